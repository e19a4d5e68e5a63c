#!/usr/bin/env python3
"""Print goldtune's performance figures (no assertions; targets live here, not in tests).

  make bench                      # or: .venv/bin/python bench/bench.py [options]

Figures, each the median of --runs fresh processes:
  1. the import floor: a fresh interpreter importing click, jinja2, yaml and pydantic's BaseModel;
     and the same plus one trivial pydantic model defined and validated (pydantic loads its schema
     machinery and plugin loader only then; any program that validates with pydantic pays it);
  2. one cold `gen` (a new process writing one bundle over the previous one) against both
     floors, target <= 1.3x;
  3. one `gen diff` of two bundles against the import floor, target <= 1.2x;
  4. the marginal time per bundle in one `gen matrix` of >= 500 bundles (the difference between
     a large and a small matrix, divided by the extra bundles), with the default worker count
     and with one worker, target <= 5 ms. Writing a bundle creates ~40 files and directories, so
     the scratch file system matters: its cost to create a small file is printed beside it.

goldtune's modules are byte-compiled first, as `pip install` does (a checkout run with
PYTHONDONTWRITEBYTECODE would otherwise recompile them in every process).
"""

from __future__ import annotations

import argparse
import compileall
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
ENV = {**os.environ, "PYTHONPATH": str(REPO)}
# `import pydantic` alone is lazy and loads almost nothing; importing BaseModel is the real cost
# of importing the dependency, so the floor imports that.
IMPORTS = "import click, jinja2, yaml; from pydantic import BaseModel"
FLOOR = [sys.executable, "-c", IMPORTS]
FLOOR_WITH_MODEL = [sys.executable, "-c", f"{IMPORTS}\nclass Probe(BaseModel):\n    x: int\nProbe(x=1)"]

HW_TEMPLATE = """\
cpu: {{vendor: {vendor}, sockets: {sockets}, cores_per_socket: {cores}, threads_per_core: 2}}
memory_gib: {memory}
gpus: [{{model: {gpu}, count: {count}}}]
nics:
  - {{name: ib0, model: ConnectX-7, speed_gbps: 400, numa_node: 0, role: compute}}
  - {{name: eth0, speed_gbps: {speed}, numa_node: {node}, role: storage}}
disks: [{{name: nvme0n1, kind: nvme, role: os}}]
"""
GPUS = ["H100-SXM5-80GB", "A100-SXM4-80GB", "L40S", "L4", "B200"]


def gen_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "generator", *args]


def timed(command: list[str], cwd: Path, allowed: tuple[int, ...] = (0,)) -> float:
    start = time.perf_counter()
    result = subprocess.run(command, cwd=cwd, env=ENV, stdout=subprocess.DEVNULL)
    elapsed = time.perf_counter() - start
    if result.returncode not in allowed:
        raise SystemExit(f"{' '.join(command[:4])}… failed with exit status {result.returncode}")
    return elapsed


def median_of(runs: int, command: list[str], cwd: Path, allowed: tuple[int, ...] = (0,)) -> float:
    return statistics.median(timed(command, cwd, allowed) for _ in range(runs))


def write_hardware(folder: Path, count: int) -> list[str]:
    paths = []
    for index in range(count):
        text = HW_TEMPLATE.format(
            vendor=("intel", "amd")[index % 2], sockets=1 + index % 2, cores=16 + 8 * (index % 8),
            memory=256 * (1 + index % 8), gpu=GPUS[index % len(GPUS)], count=1 + index % 8,
            speed=(25, 100, 200, 400)[index % 4], node=index % 2 if index % 2 else 0,
        )
        path = folder / f"hw{index:04d}.yaml"
        path.write_text(text)
        paths.append(str(path))
    return paths


def matrix_seconds(hardware: list[str], out: Path, cwd: Path, jobs: int | None) -> float:
    args = gen_command("matrix", "-o", str(out), "--all-profiles")
    if jobs is not None:
        args += ["--jobs", str(jobs)]
    for hw in hardware:
        args += ["--hw", hw]
    seconds = timed(args, cwd)
    shutil.rmtree(out)
    return seconds


def marginal_per_bundle(hardware: list[str], profiles: int, work: Path, jobs: int | None) -> tuple[float, float]:
    """(seconds for the whole large matrix, marginal seconds per bundle)."""
    small = max(1, len(hardware) // 10)
    t_small = matrix_seconds(hardware[:small], work / "m-small", work, jobs)
    t_large = matrix_seconds(hardware, work / "m-large", work, jobs)
    return t_large, (t_large - t_small) / ((len(hardware) - small) * profiles)


def file_create_cost(folder: Path, count: int = 400) -> float:
    """Seconds to create, write and close one small file in ``folder`` (the disk's share)."""
    target = folder / "calibrate"
    target.mkdir()
    start = time.perf_counter()
    for index in range(count):
        (target / f"f{index}").write_bytes(b"x" * 2048)
    elapsed = time.perf_counter() - start
    shutil.rmtree(target)
    return elapsed / count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=11, help="processes per figure (median)")
    parser.add_argument("--bundles", type=int, default=500, help="bundles in the large matrix")
    parser.add_argument("--scratch", type=Path, default=None, help="where to write (default: the system temp dir)")
    options = parser.parse_args()
    compileall.compile_dir(REPO / "generator", quiet=1)
    profiles = len(list((REPO / "profiles").glob("*.yaml")))
    with tempfile.TemporaryDirectory(dir=options.scratch) as scratch:
        work = Path(scratch)
        subprocess.run(gen_command("--hw", "dgx-h100", "--profile", "inference", "-o", str(work / "a")),
                       cwd=work, env=ENV, check=True, stdout=subprocess.DEVNULL)  # warms the caches
        floor = median_of(options.runs, FLOOR, work)
        floor_model = median_of(options.runs, FLOOR_WITH_MODEL, work)
        gen = median_of(options.runs, gen_command("--hw", "dgx-h100", "--profile", "inference", "-o",
                                                  str(work / "a")), work)
        subprocess.run(gen_command("--hw", "dgx-a100", "--profile", "inference", "-o", str(work / "b")),
                       cwd=work, env=ENV, check=True, stdout=subprocess.DEVNULL)
        diff = median_of(options.runs, gen_command("diff", str(work / "a"), str(work / "b")), work, allowed=(0, 1))
        hardware = write_hardware(work, -(-options.bundles // profiles))
        bundles = len(hardware) * profiles
        t_parallel, marginal_parallel = marginal_per_bundle(hardware, profiles, work, None)
        t_serial, marginal_serial = marginal_per_bundle(hardware, profiles, work, 1)
        create = file_create_cost(work)
        where = work.parent
    jobs = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    print(f"machine: {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
          f"scratch {where}")
    print(f"import floor ({IMPORTS}): {floor * 1000:.0f} ms")
    print(f"  + one pydantic model defined and validated: {floor_model * 1000:.0f} ms")
    print(f"cold gen, one bundle:   {gen * 1000:.0f} ms = {gen / floor:.2f}x floor, "
          f"{gen / floor_model:.2f}x floor with a model (target <= 1.3x)")
    print(f"gen diff, two bundles:  {diff * 1000:.0f} ms = {diff / floor:.2f}x floor (target <= 1.2x)")
    print(f"matrix of {bundles} bundles, {jobs} workers: {t_parallel:.2f} s; marginal "
          f"{marginal_parallel * 1000:.2f} ms per bundle (target <= 5 ms)")
    print(f"matrix of {bundles} bundles, 1 worker:  {t_serial:.2f} s; marginal {marginal_serial * 1000:.2f} ms per bundle")
    print(f"scratch file system: {create * 1e6:.0f} us to create one small file")


if __name__ == "__main__":
    main()
