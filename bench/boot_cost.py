"""What the bundle's boot units cost each boot (issue 28), for `bench.py --boot`.

The cached Debian 12 image of tests/boot boots under QEMU without the bundle (boot.sh
``--delivery none``: the base image) and with it (``install.sh --root``), interleaved (none, with,
none, with, ...) so that drift in the host's load moves both alike. In each boot the harness,
once the boot is over, prints ``systemd-analyze time``, ``blame`` and ``critical-chain
multi-user.target`` onto a serial port. Printed: the userspace time of each boot, each goldtune
unit's blame, the median unit against the goal (under 0.10 of the base image's median userspace
time in the same emulation) and the goldtune units on multi-user.target's critical chain.

Needs root, QEMU and debootstrap (tests/boot/README.md); without them it says why and skips.
Each boot takes minutes under TCG.
"""

from __future__ import annotations

import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import NamedTuple

REPO = Path(__file__).resolve().parent.parent
BOOT = REPO / "tests/boot"
GOAL = 0.10  # each unit's blame against the base image's userspace time
UNIT = "goldtune-"  # the bundle's units' names start so (generator/model/layout.py TOOL)
BOOT_TIMEOUT_S = 1200
ANALYZE = """#!/bin/sh
echo goldtune-analyze-begin
systemd-analyze time --no-pager
echo goldtune-blame
systemd-analyze blame --no-pager
echo goldtune-chain
systemd-analyze critical-chain --no-pager multi-user.target
echo goldtune-analyze-end
"""
HOOK = """#!/bin/sh
set -eu
install -m 0755 "{analyze}" "$1/usr/local/sbin/boottest-extra"
"""
SPAN_PART = re.compile(r"(\d+(?:\.\d+)?)(h|min|ms|us|µs|s)")
UNIT_SECONDS = {"h": 3600.0, "min": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6}


class Boot(NamedTuple):
    bundle: bool
    userspace_s: float | None
    blame: dict[str, float]  # goldtune unit -> seconds
    on_chain: list[str]  # goldtune units on multi-user.target's critical chain


def span_seconds(text: str) -> float:
    """A systemd time span as systemd-analyze prints it (``3min 44.954s``, ``812ms``)."""
    return sum(float(n) * UNIT_SECONDS[unit] for n, unit in SPAN_PART.findall(text))


def parse_analyze(log: str, bundle: bool) -> Boot:
    match = re.search(r"goldtune-analyze-begin\n(.*?)goldtune-analyze-end", log, re.DOTALL)
    if not match:
        return Boot(bundle, None, {}, [])
    time_part, _, rest = match.group(1).partition("goldtune-blame\n")
    blame_part, _, chain_part = rest.partition("goldtune-chain\n")
    userspace = re.search(r"\+ ([^=+]*?) \(userspace\)", time_part)
    blame = {}
    for line in blame_part.splitlines():
        words = line.split()
        if words and words[-1].startswith(UNIT):
            blame[words[-1]] = span_seconds(" ".join(words[:-1]))
    chain = sorted(set(re.findall(r"(goldtune-[\w.-]+)", chain_part)))
    return Boot(bundle, span_seconds(userspace.group(1)) if userspace else None, blame, chain)


def missing() -> str | None:
    """Why the boots cannot run here, or None."""
    if os.geteuid() != 0:
        return "needs root (debootstrap, the image, QEMU)"
    for tool in ("qemu-system-x86_64", "debootstrap", "mkfs.ext4"):
        if shutil.which(tool) is None:
            return f"needs {tool} (tests/boot/README.md)"
    return None


def boot_once(bundle: Path, work: Path, with_bundle: bool, hook: Path) -> Boot:
    out = work / f"boot-{len(list(work.glob('boot-*')))}"
    command = [str(BOOT / "boot.sh"), "--bundle", str(bundle), "--out", str(out)]
    command += ["--hook", str(hook), "--timeout", str(BOOT_TIMEOUT_S)]
    if not with_bundle:
        command += ["--delivery", "none"]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        print(f"  boot failed ({done.returncode}): {done.stderr[-400:]}", file=sys.stderr)
        return Boot(with_bundle, None, {}, [])
    return parse_analyze((out / "extra.log").read_text(errors="replace"), with_bundle)


def table(boots: list[Boot]) -> list[str]:
    lines = [f"{'bundle':8} {'userspace':>10}  goldtune units (blame)"]
    for boot in boots:
        blamed = ", ".join(f"{u.removeprefix(UNIT)} {t:.2f} s" for u, t in boot.blame.items())
        userspace = "?" if boot.userspace_s is None else f"{boot.userspace_s:.1f} s"
        chain = f"; on the critical chain: {', '.join(boot.on_chain)}" if boot.on_chain else ""
        lines.append(f"{'with' if boot.bundle else 'none':8} {userspace:>10}  {blamed}{chain}")
    base = [b.userspace_s for b in boots if not b.bundle and b.userspace_s is not None]
    if not base:
        return [*lines, "no base boot finished: no ratio"]
    limit = GOAL * statistics.median(base)
    lines.append(
        f"goal: each unit under {GOAL:.2f} x the base image's median userspace "
        f"{statistics.median(base):.1f} s = {limit:.2f} s"
    )
    for unit in sorted({u for b in boots for u in b.blame}):
        times = [b.blame[unit] for b in boots if unit in b.blame]
        median = statistics.median(times)
        verdict = "met" if median < limit else "NOT MET"
        ratio = median / statistics.median(base)
        lines.append(f"  {unit:40} median {median:6.2f} s  {ratio:.3f} x  {verdict}")
    return lines


def run(rounds: int, system: str, profile: str) -> list[str]:
    """Boot the image ``rounds`` times without and with the bundle; the lines to print."""
    why = missing()
    if why:
        return [f"boot cost: skipped: {why}"]
    with tempfile.TemporaryDirectory(prefix="goldtune-boot-cost-") as scratch:
        work = Path(scratch)
        bundle = work / "bundle"
        made = subprocess.run(
            [sys.executable, "-m", "generator", "--hw", system, "--profile", profile, "-o", bundle],
            cwd=REPO,
            capture_output=True,
            text=True,
            check=False,
        )
        if made.returncode != 0:
            return [f"boot cost: gen failed: {made.stderr[-400:]}"]
        analyze = work / "analyze"
        analyze.write_text(ANALYZE)
        hook = work / "hook.sh"
        hook.write_text(HOOK.format(analyze=analyze))
        hook.chmod(0o755)
        boots = []
        for _ in range(rounds):
            for with_bundle in (False, True):
                boots.append(boot_once(bundle, work, with_bundle, hook))
    title = f"boot cost: {system} x {profile}, {rounds} round(s) interleaved (QEMU, tests/boot)"
    return [title, *table(boots)]
