#!/usr/bin/env python3
"""Print goldtune's performance figures beside their goals (issue 25; no assertions live in the
tests).

  make bench                      # or: .venv/bin/python bench/bench.py [options]

How the figures are taken, so that they can be trusted on a shared machine:
  - the commands a ratio compares run interleaved (A B C A B C ...), never as blocks, so drift in
    the machine's load moves both sides of a ratio alike;
  - `gen` is the installed console script beside this interpreter (.venv/bin/gen), as users run it;
  - every run is one fresh process tree, reaped with wait4(): its wall time, its CPU time (user +
    system of the process and every descendant it waited for) and its peak resident memory (the
    largest single process of the tree); each figure prints min / median / max;
  - the matrix marginal per bundle is the slope of a least-squares line through several matrix
    sizes (each run several times, interleaved), not the difference of two single runs;
  - /proc/pressure/cpu ("some avg10": the share of the last 10 s in which a runnable task waited
    for a CPU) is printed before and after each file system's figures: a figure taken under
    pressure is not a quiet-machine figure, and the table says so.

The figures, for each scratch file system (default: the system temp dir and /dev/shm):
  1. the import floor: a fresh interpreter importing click, jinja2, yaml and pydantic's BaseModel,
     and the same plus one trivial pydantic model defined and validated;
  2. one cold `gen` writing a new bundle, and one replacing the bundle it wrote before (gen
     removes the old tree itself before it exits: that is in its figure);
  3. one `gen diff` of two bundles, and one `gen verify` of a bundle against a snapshot;
  4. `gen matrix --all-profiles` at three sizes with 2 workers (override with --jobs): marginal
     wall and CPU per bundle (and its ratio to the floor with a model), and the peak memory of the
     largest process at the largest size;
  5. `gen matrix --check` of the largest matrix's bundles, committed: nothing changed, and one
     hardware file changed (interleaved).
Then, once: the processes each boot script starts on a fake matching node (bench/boot_forks.py,
strace; `--forks-only` prints only that), and a bundle set's size and first-boot cost
(bench/set_cost.py; `--set-only` prints only that).
Ratios and goals are judged on CPU medians (what the work costs; wall time on a loaded machine
mostly measures the other tenants) and printed with wall medians beside them.

goldtune's modules are byte-compiled first, as `pip install` does (a checkout run with
PYTHONDONTWRITEBYTECODE would otherwise recompile them in every process), and the caches are
warmed by one run before anything is timed.
"""

from __future__ import annotations

import argparse
import compileall
import functools
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NamedTuple

import boot_cost
import boot_forks
import set_cost

REPO = Path(__file__).resolve().parent.parent
GEN = Path(sys.executable).parent / "gen"
ENV = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
# `import pydantic` alone is lazy and loads almost nothing; importing BaseModel is the real cost
# of importing the dependency, so the floor imports that.
IMPORTS = "import click, jinja2, yaml; from pydantic import BaseModel"
FLOOR = [sys.executable, "-c", IMPORTS]
PROBE = "class Probe(BaseModel):\n    x: int\nProbe(x=1)"
FLOOR_WITH_MODEL = [sys.executable, "-c", f"{IMPORTS}\n{PROBE}"]
PRESSURE = Path("/proc/pressure/cpu")
QUIET_PRESSURE = 10.0  # % "some avg10" above which the machine is called busy
# cold `gen` against the floor with one pydantic model, on CPU medians (issue 25: no private API)
COLD_GOAL = 1.20
# `gen verify --snapshot` of a snapshot without Xid events, against the import floor (issue 43)
VERIFY_GOAL = 0.5
# A collector's snapshot of a node that read one setting and no Xid: what verify judges most days.
SNAPSHOT = "goldtune-snapshot\tbegin\t1\nsysctl\tvm.swappiness\t1\ngoldtune-snapshot\tend\t1\n"
# a matrix's marginal CPU per bundle against the floor with one pydantic model (issue 43)
PER_BUNDLE_GOAL = 0.03
# `gen matrix --check` of the largest matrix's committed bundles, one input changed (issue 43)
CHECK_GOAL = 10.0

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


class Sample(NamedTuple):
    wall: float  # seconds
    cpu: float  # seconds, user + system, the process and its reaped descendants
    peak_kib: int  # largest resident set of one process in the tree


class Figures(NamedTuple):
    """One file system's results: samples per command, matrix fits, pressure before/after."""

    where: str
    samples: dict[str, list[Sample]]
    matrix: dict[str, float]
    pressure: tuple[float | None, float | None]
    create_us: float


def run_once(command: Sequence[str], cwd: Path, allowed: tuple[int, ...] = (0,)) -> Sample:
    start = time.perf_counter()
    child = subprocess.Popen(
        command, cwd=cwd, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    _, status, usage = os.wait4(child.pid, 0)
    elapsed = time.perf_counter() - start
    child.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
    if child.returncode not in allowed:
        rerun = subprocess.run(
            command, cwd=cwd, env=ENV, capture_output=True, text=True, check=False
        )
        raise SystemExit(
            f"{' '.join(map(str, command[:4]))} ... failed with exit status "
            f"{child.returncode}: {rerun.stderr.strip()[-500:]}"
        )
    return Sample(elapsed, usage.ru_utime + usage.ru_stime, usage.ru_maxrss)


def interleaved(rounds: int, steps: dict[str, Callable[[], Sample]]) -> dict[str, list[Sample]]:
    """Run every step once per round, in turn (A B C A B C ...), rotating where a round starts."""
    samples: dict[str, list[Sample]] = {name: [] for name in steps}
    names = list(steps)
    for round_index in range(rounds):
        shift = round_index % len(names)
        for name in names[shift:] + names[:shift]:
            samples[name].append(steps[name]())
    return samples


def cpu_pressure() -> float | None:
    """/proc/pressure/cpu "some avg10" in %, or None where the kernel has no PSI."""
    try:
        first_line = PRESSURE.read_text().splitlines()[0]
    except (OSError, IndexError):
        return None
    fields = dict(field.split("=", 1) for field in first_line.split()[1:])
    return float(fields["avg10"])


def write_hardware(folder: Path, count: int) -> list[str]:
    paths = []
    for index in range(count):
        text = HW_TEMPLATE.format(
            vendor=("intel", "amd")[index % 2],
            sockets=1 + index % 2,
            cores=16 + 8 * (index % 8),
            memory=256 * (1 + index % 8),
            gpu=GPUS[index % len(GPUS)],
            count=1 + index % 8,
            speed=(25, 100, 200, 400)[index % 4],
            node=index % 2 if index % 2 else 0,
        )
        path = folder / f"hw{index:04d}.yaml"
        path.write_text(text)
        paths.append(str(path))
    return paths


def least_squares_slope(points: Sequence[tuple[float, float]]) -> float:
    """Slope of the least-squares line through (x, y) points."""
    mean_x = statistics.fmean(x for x, _ in points)
    mean_y = statistics.fmean(y for _, y in points)
    spread = sum((x - mean_x) ** 2 for x, _ in points)
    return sum((x - mean_x) * (y - mean_y) for x, y in points) / spread


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


def check_nothing_left(directory: Path) -> None:
    """A run's work ends when it exits: no hidden tree of a replaced bundle is left behind."""
    hidden = [name for name in os.listdir(directory) if name.startswith(".")]
    if hidden:
        raise SystemExit(f"gen exited leaving {hidden[0]} in {directory}")


class Bench:
    """The figures for one scratch directory."""

    def __init__(self, work: Path, options: argparse.Namespace) -> None:
        self.work = work
        self.options = options
        self.counter = 0

    def gen(self, *args: str, allowed: tuple[int, ...] = (0,)) -> Sample:
        return run_once([str(GEN), *args], self.work, allowed)

    def fresh(self, prefix: str) -> Path:
        self.counter += 1
        return self.work / f"{prefix}-{self.counter}"

    def gen_new(self) -> Sample:
        target = self.fresh("new")
        sample = self.gen("--hw", "dgx-h100", "--profile", "inference", "-o", str(target))
        shutil.rmtree(target)
        return sample

    def gen_replace(self) -> Sample:
        sample = self.gen("--hw", "dgx-h100", "--profile", "inference", "-o", str(self.work / "a"))
        check_nothing_left(self.work)
        return sample

    def matrix(self, hardware: list[str]) -> Sample:
        out = self.fresh("matrix")
        args = ["matrix", "-o", str(out), "--all-profiles", "--jobs", str(self.options.jobs)]
        for path in hardware:
            args += ["--hw", path]
        sample = self.gen(*args)
        shutil.rmtree(out)
        return sample

    def single_commands(self) -> dict[str, list[Sample]]:
        self.gen("--hw", "dgx-h100", "--profile", "inference", "-o", str(self.work / "a"))  # caches
        self.gen("--hw", "dgx-a100", "--profile", "inference", "-o", str(self.work / "b"))
        snapshot = self.work / "snapshot.txt"
        snapshot.write_text(SNAPSHOT)
        return interleaved(
            self.options.runs,
            {
                "floor": lambda: run_once(FLOOR, self.work),
                "floor_model": lambda: run_once(FLOOR_WITH_MODEL, self.work),
                "gen_new": self.gen_new,
                "gen_replace": self.gen_replace,
                "diff": lambda: self.gen(
                    "diff", str(self.work / "a"), str(self.work / "b"), allowed=(0, 1)
                ),
                "verify": lambda: self.gen(
                    "verify", str(self.work / "a"), "--snapshot", str(snapshot), allowed=(0, 1)
                ),
            },
        )

    def matrix_figures(self) -> tuple[dict[str, list[Sample]], dict[str, float]]:
        profiles = len(list((REPO / "profiles").glob("*.yaml")))
        largest = -(-self.options.bundles // profiles)
        hardware = write_hardware(self.work, largest)
        sizes = sorted({max(1, largest // 5), max(2, 3 * largest // 5), largest})
        steps: dict[str, Callable[[], Sample]] = {
            f"matrix_{size * profiles}": functools.partial(self.matrix, hardware[:size])
            for size in sizes
        }
        samples = interleaved(self.options.matrix_runs, steps)
        runs = [
            (size * profiles, run) for size in sizes for run in samples[f"matrix_{size * profiles}"]
        ]
        wall = [(bundles, run.wall) for bundles, run in runs]
        cpu = [(bundles, run.cpu) for bundles, run in runs]
        largest_runs = samples[f"matrix_{largest * profiles}"]
        fits = {
            "sizes": float(len(sizes)),
            "largest": float(largest * profiles),
            "wall_per_bundle": least_squares_slope(wall),
            "cpu_per_bundle": least_squares_slope(cpu),
            "peak_mib": max(run.peak_kib for run in largest_runs) / 1024,
        }
        return samples, fits

    def fleet_check(self, args: list[str], changed: Path | None) -> Sample:
        """One `gen matrix --check` of the committed fleet; with ``changed``, that hardware file
        is edited for the run (its bundles are stale: exit 1) and put back after it."""
        if changed is None:
            return self.gen(*args)
        original = changed.read_text()
        changed.write_text(original.replace("memory_gib: ", "memory_gib: 1", 1))
        try:
            return self.gen(*args, allowed=(1,))
        finally:
            changed.write_text(original)

    def fleet_check_figures(self) -> dict[str, list[Sample]]:
        """`gen matrix --check` of a committed fleet of --bundles bundles: nothing changed, and
        one hardware file changed (issue 43: judged by manifest, only the changed rendered)."""
        profiles = len(list((REPO / "profiles").glob("*.yaml")))
        folder = self.work / "fleet-hw"
        folder.mkdir()
        hardware = write_hardware(folder, -(-self.options.bundles // profiles))
        args = ["matrix", "--all-profiles", "--jobs", str(self.options.jobs)]
        for path in hardware:
            args += ["--hw", path]
        committed = self.work / "fleet"
        self.gen(*args, "-o", str(committed))  # the fleet repository's bundles: not timed
        check = [*args, "--check", str(committed)]
        samples = interleaved(
            self.options.matrix_runs,
            {
                "check_unchanged": functools.partial(self.fleet_check, check, None),
                "check_one_changed": functools.partial(self.fleet_check, check, Path(hardware[0])),
            },
        )
        shutil.rmtree(committed)
        return samples

    def figures(self, where: str) -> Figures:
        before = cpu_pressure()
        samples = self.single_commands()
        matrix_samples, fits = self.matrix_figures()
        check_samples = self.fleet_check_figures()
        after = cpu_pressure()
        return Figures(
            where,
            {**samples, **matrix_samples, **check_samples},
            fits,
            (before, after),
            file_create_cost(self.work) * 1e6,
        )


def spread(samples: list[Sample], field: str) -> str:
    values = sorted(getattr(sample, field) * 1000 for sample in samples)
    return f"{statistics.median(values):.0f} ({values[0]:.0f}-{values[-1]:.0f})"


def median(samples: list[Sample], field: str) -> float:
    return float(statistics.median(getattr(sample, field) for sample in samples))


def verdict(met: bool) -> str:
    return "met" if met else "**not met**"


def ratio_cell(figures: Figures, name: str, base: str) -> str:
    cpu = median(figures.samples[name], "cpu") / median(figures.samples[base], "cpu")
    wall = median(figures.samples[name], "wall") / median(figures.samples[base], "wall")
    return f"{cpu:.2f}× CPU ({wall:.2f}× wall)"


def table(results: list[Figures], jobs: int) -> list[str]:
    """The Markdown table the README shows: one column per file system, goals beside."""
    header = "| figure | " + " | ".join(f.where for f in results) + " | goal (issue 25) |"
    rows = [header, "|" + " --- |" * (len(results) + 2)]

    def row(label: str, cell: Callable[[Figures], str], goal: str = "—") -> None:
        rows.append(f"| {label} | " + " | ".join(cell(f) for f in results) + f" | {goal} |")

    def both(name: str) -> Callable[[Figures], str]:
        return lambda f: f"{spread(f.samples[name], 'cpu')} / {spread(f.samples[name], 'wall')}"

    def pressure(f: Figures) -> str:
        shown = ["n/a" if value is None else f"{value:.0f} %" for value in f.pressure]
        busy = any(value is not None and value > QUIET_PRESSURE for value in f.pressure)
        return f"{shown[0]} → {shown[1]}" + (" (busy)" if busy else "")

    def matrix(key: str, scale: float, unit: str) -> Callable[[Figures], str]:
        return lambda f: f"{f.matrix[key] * scale:.1f} {unit}"

    def cold_goal(f: Figures) -> str:
        ratio = median(f.samples["gen_new"], "cpu") / median(f.samples["floor_model"], "cpu")
        return f"{ratio_cell(f, 'gen_new', 'floor_model')}, {verdict(ratio <= COLD_GOAL)}"

    def wall_goal(f: Figures) -> str:
        limit = 2.0 if "tmpfs" in f.where else 4.0
        value = f.matrix["wall_per_bundle"] * 1000
        return f"{value:.1f} ms, {verdict(value <= limit)} (≤ {limit:.0f} ms)"

    row("CPU pressure, some avg10, before → after", pressure, f"≤ {QUIET_PRESSURE:.0f} % is quiet")
    row("import floor, ms CPU / wall, median (min-max)", both("floor"))
    row("floor + one pydantic model validated", both("floor_model"))
    row("cold `gen`, new bundle", both("gen_new"))
    row("… against the floor with a model", cold_goal, f"≤ {COLD_GOAL:.2f}×")
    row("cold `gen`, replacing the previous bundle", both("gen_replace"))
    row(
        "… replacing against writing new (gen removes the old tree itself)",
        lambda f: ratio_cell(f, "gen_replace", "gen_new"),
    )
    row("`gen diff` of two bundles", both("diff"))
    row("… against the import floor", lambda f: ratio_cell(f, "diff", "floor"))
    row("`gen verify BUNDLE --snapshot FILE` (no Xid event)", both("verify"))
    row(
        "… against the import floor",
        lambda f: f"{ratio_cell(f, 'verify', 'floor')}, {verdict(verify_ratio(f) <= VERIFY_GOAL)}",
        f"≤ {VERIFY_GOAL}×",
    )
    row(
        f"`gen matrix`, {jobs} workers: marginal wall per bundle (fit over "
        f"{int(results[0].matrix['sizes'])} sizes)",
        wall_goal,
        "≤ 2 ms tmpfs, ≤ 4 ms ext4",
    )
    row(
        "… marginal CPU per bundle",
        lambda f: (
            f"{f.matrix['cpu_per_bundle'] * 1000:.1f} ms, "
            f"{verdict(f.matrix['cpu_per_bundle'] <= 0.008)}"
        ),
        "≤ 8 ms",
    )
    row(
        "… against the floor with a model",
        lambda f: f"{per_bundle_ratio(f):.3f}×, {verdict(per_bundle_ratio(f) <= PER_BUNDLE_GOAL)}",
        f"≤ {PER_BUNDLE_GOAL}×",
    )
    row(
        f"… peak memory of one process, {int(results[0].matrix['largest'])} bundles",
        lambda f: f"{f.matrix['peak_mib']:.0f} MiB, {verdict(f.matrix['peak_mib'] < 64)}",
        "< 64 MiB",
    )
    row(
        f"`gen matrix --check` of {int(results[0].matrix['largest'])} committed bundles, "
        "nothing changed, s CPU / wall",
        lambda f: check_cell(f, "check_unchanged"),
        f"≤ {CHECK_GOAL:.0f} s CPU",
    )
    row(
        "… one hardware file changed (its bundles stale)",
        lambda f: check_cell(f, "check_one_changed"),
        f"≤ {CHECK_GOAL:.0f} s CPU",
    )
    row("creating one small file", lambda f: f"{f.create_us:.0f} µs", "—")
    return rows


def verify_ratio(figures: Figures) -> float:
    return median(figures.samples["verify"], "cpu") / median(figures.samples["floor"], "cpu")


def per_bundle_ratio(figures: Figures) -> float:
    """The matrix's marginal CPU per bundle against one run of the floor with a model."""
    return figures.matrix["cpu_per_bundle"] / median(figures.samples["floor_model"], "cpu")


def check_cell(figures: Figures, name: str) -> str:
    samples = figures.samples[name]
    cpu, wall = median(samples, "cpu"), median(samples, "wall")
    return f"{cpu:.1f} / {wall:.1f} s, {verdict(cpu <= CHECK_GOAL)}"


def file_system(path: Path) -> str:
    """ "ext4 (/tmp)": the type of the mount holding ``path`` (/proc/self/mounts, longest match),
    "ext4, no journal (/tmp)" for an ext4 mounted without one (see ext4_journal)."""
    resolved, best, kind, source = path.resolve(), "", "?", ""
    try:
        mounts = Path("/proc/self/mounts").read_text().splitlines()
    except OSError:
        mounts = []
    for line in mounts:
        fields = line.split()
        mount_point = fields[1].replace("\\040", " ")
        if resolved.is_relative_to(mount_point) and len(mount_point) >= len(best):
            best, kind, source = mount_point, fields[2], fields[0]
    if kind == "ext4" and ext4_journal(source) is False:
        kind = "ext4, no journal"
    return f"{kind} ({path})"


def ext4_journal(source: str) -> bool | None:
    """Whether the ext4 on device ``source`` has a journal (None: unknown).

    Without one, ext4 passes over every free inode deleted in the last 60 s (360 s while its
    inode table block is unwritten) when it allocates one: recently_deleted(), RECENTCY_MIN and
    RECENTCY_DIRTY, checked only when s_journal is NULL (fs/ext4/ialloc.c, find_inode_bit). So
    creating files soon after removing others, as the matrix figures do run after run, costs
    several times what it does on a journaled ext4 (mkfs.ext4's default): on the development
    machine 14.2 against 5.0 ms of wall per matrix bundle. /sys/fs/ext4/<device>/journal_task
    holds the journal thread's id, or "<none>"."""
    device = os.path.basename(os.path.realpath(source))
    try:
        task = Path("/sys/fs/ext4", device, "journal_task").read_text().strip()
    except OSError:
        return None
    return task != "<none>"


def default_scratch() -> list[Path]:
    places = [Path(tempfile.gettempdir())]
    if Path("/dev/shm").is_dir():
        places.append(Path("/dev/shm"))
    return places


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=11, help="runs of each single command")
    parser.add_argument("--matrix-runs", type=int, default=3, help="runs of each matrix size")
    parser.add_argument("--bundles", type=int, default=1000, help="bundles in the largest matrix")
    parser.add_argument("--jobs", type=int, default=2, help="matrix workers")
    parser.add_argument(
        "--scratch",
        type=Path,
        action="append",
        default=None,
        help="where to write (repeatable; default: the temp dir and /dev/shm)",
    )
    parser.add_argument(
        "--boot",
        action="store_true",
        help="also what the bundle's boot units cost each boot: the cached QEMU image of "
        "tests/boot without and with a bundle, interleaved (root; minutes per boot)",
    )
    parser.add_argument("--boot-rounds", type=int, default=2, help="boots without and with each")
    parser.add_argument("--boot-system", default="dgx-h100", help="the bundle's hardware")
    parser.add_argument("--boot-profile", default="inference", help="the bundle's profile")
    parser.add_argument(
        "--boot-only", action="store_true", help="only the boot cost (implies --boot)"
    )
    parser.add_argument(
        "--forks-only",
        action="store_true",
        help="only the processes each boot script starts on a fake matching node (strace)",
    )
    parser.add_argument("--set-only", action="store_true", help="only the bundle set's figures")
    options = parser.parse_args()
    if options.set_only:
        print("\n".join(set_cost.run()))
        return
    if options.forks_only:
        print("\n".join(boot_forks.run()))
        return
    if options.boot_only:
        print(
            "\n".join(boot_cost.run(options.boot_rounds, options.boot_system, options.boot_profile))
        )
        return
    if not GEN.is_file():
        raise SystemExit(f"{GEN}: no installed console script; run `make .venv/.installed-stamp`")
    compileall.compile_dir(REPO / "generator", quiet=1)
    results = []
    for place in options.scratch or default_scratch():
        with tempfile.TemporaryDirectory(dir=place, prefix="goldtune-bench-") as scratch:
            results.append(Bench(Path(scratch), options).figures(file_system(place)))
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} CPUs "
        f"({len(os.sched_getaffinity(0))} usable), Python {platform.python_version()}, "
        f"{platform.system()} {platform.release()}; gen = {GEN}"
    )
    print(
        f"{options.runs} interleaved runs per command, {options.matrix_runs} per matrix size; "
        "goals judged on CPU medians\n"
    )
    print("\n".join(table(results, options.jobs)))
    print()
    print("\n".join(boot_forks.run()))
    print()
    print("\n".join(set_cost.run()))
    if options.boot:
        print()
        print(
            "\n".join(boot_cost.run(options.boot_rounds, options.boot_system, options.boot_profile))
        )


if __name__ == "__main__":
    main()
