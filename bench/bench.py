#!/usr/bin/env python3
"""Print goldtune's performance figures (no assertions; targets live here, not in tests).

  python3 bench/bench.py [--runs N] [--bundles N]

Figures:
  1. cold `gen` (one process writing one bundle) against the bare import of its dependencies
     (click, jinja2, yaml and pydantic's BaseModel): ratio, target <= 1.3x;
  2. marginal time per bundle in one `gen matrix` of >= 500 bundles, target <= 5 ms;
  3. one `gen diff` of two bundles against the same import floor, target <= 1.2x.
Median of N runs of each process.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
ENV = {**os.environ, "PYTHONPATH": str(REPO)}
# `import pydantic` alone is lazy and loads almost nothing; importing BaseModel is the real cost
# of the dependency, so the floor imports that.
FLOOR = [sys.executable, "-c", "import click, jinja2, yaml; from pydantic import BaseModel"]

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


def timed(command: list[str], cwd: Path) -> float:
    start = time.perf_counter()
    subprocess.run(command, cwd=cwd, env=ENV, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def median_of(runs: int, command: list[str], cwd: Path) -> float:
    return statistics.median(timed(command, cwd) for _ in range(runs))


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


def matrix_seconds(hardware: list[str], out: Path, cwd: Path) -> float:
    args = [sys.executable, "-m", "generator", "matrix", "-o", str(out)]
    for hw in hardware:
        args += ["--hw", hw]
    args += ["--all-profiles"]
    return timed(args, cwd)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--bundles", type=int, default=500)
    options = parser.parse_args()
    profiles = len(list((REPO / "profiles").glob("*.yaml")))
    with tempfile.TemporaryDirectory() as scratch:
        work = Path(scratch)
        floor = median_of(options.runs, FLOOR, work)
        gen = median_of(options.runs, [sys.executable, "-m", "generator", "--hw", "dgx-h100", "--profile",
                                       "inference", "-o", str(work / "a")], work)
        subprocess.run([sys.executable, "-m", "generator", "--hw", "dgx-a100", "--profile", "inference", "-o",
                        str(work / "b")], cwd=work, env=ENV, check=True, stdout=subprocess.DEVNULL)
        diff_command = [sys.executable, "-m", "generator", "diff", str(work / "a"), str(work / "b")]
        diff = statistics.median(
            _timed_allowing_1(diff_command, work) for _ in range(options.runs))
        hardware_count = -(-options.bundles // profiles)
        hardware = write_hardware(work, hardware_count)
        small = max(1, hardware_count // 10)
        t_small = matrix_seconds(hardware[:small], work / "m1", work)
        t_large = matrix_seconds(hardware, work / "m2", work)
        marginal = (t_large - t_small) / ((hardware_count - small) * profiles)
    print(f"machine: {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}")
    print(f"import floor (click, jinja2, yaml, pydantic.BaseModel): {floor * 1000:.0f} ms")
    print(f"cold gen, one bundle:   {gen * 1000:.0f} ms = {gen / floor:.2f}x floor (target <= 1.3x)")
    print(f"gen diff, two bundles:  {diff * 1000:.0f} ms = {diff / floor:.2f}x floor (target <= 1.2x)")
    print(f"matrix of {hardware_count * profiles} bundles: {t_large:.2f} s; marginal {marginal * 1000:.2f} ms per bundle "
          f"(target <= 5 ms)")


def _timed_allowing_1(command: list[str], cwd: Path) -> float:
    start = time.perf_counter()
    result = subprocess.run(command, cwd=cwd, env=ENV, stdout=subprocess.DEVNULL)
    if result.returncode not in (0, 1):
        raise SystemExit(f"gen diff failed with {result.returncode}")
    return time.perf_counter() - start


if __name__ == "__main__":
    main()
