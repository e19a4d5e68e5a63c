"""One image, two machine shapes (issue 44's "done when"): a bundle set of two members baked into
the boot test's cached Debian root, booted under QEMU as each shape and as a shape neither member
describes.

The members: the detect test's emulated machine (two sockets, two NUMA nodes, a NIC behind an
expander bridge on node 1: tests/test_detect_boot.py's KNOWN and TOPOLOGY) and a one-socket,
one-node machine without that NIC. Each boot's selector must pick its own member and apply it
(the member's sysctl.d file and units installed, its preflight run), and `gen verify` on the
collector's snapshot judges the member the node recorded (/run/goldtune/selected, printed by the
hook). The third shape (four sockets, no NIC) matches neither: the selector fails with one line
per member and nothing machine-specific is there. Kernel arguments: the set forbids the reboot
(default); the harness's loader is QEMU's -kernel, so the arguments are not judged here.
Marked ``boot``; skips without root, QEMU or the cached root (as the other boot tests).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from test_detect_boot import KNOWN, SMP, TOPOLOGY

pytestmark = pytest.mark.boot

REPO = Path(__file__).resolve().parents[1]
BOOT = REPO / "tests/boot"
TIMEOUT_S = 900
EXTRA = """#!/bin/sh
echo set-begin
cat /run/goldtune/selected
systemctl is-failed goldtune-select.service
journalctl -b -o cat --no-pager -u goldtune-select.service
ls /etc/sysctl.d /etc/goldtune 2>&1
echo set-end
"""
HOOK = """#!/bin/sh
set -eu
install -m 0755 "{extra}" "$1/usr/local/sbin/boottest-extra"
"""
ONE = KNOWN | {
    "description": "a one-socket, one-node shape (tests/test_set_boot.py)",
    "cpu": KNOWN["cpu"] | {"sockets": 1},
    "numa_nodes": 1,
    "nics": [],
}
SHAPES = {  # shape -> (-smp, QEMU topology arguments, the member expected)
    "two": (SMP, TOPOLOGY, "two"),
    "one": ("2,sockets=1,cores=2,threads=1", [], "one"),
    "neither": ("4,sockets=4,cores=1,threads=1", [], None),
}


def needs_boot() -> None:
    if os.geteuid() != 0 or shutil.which("qemu-system-x86_64") is None:
        pytest.skip("needs root and qemu-system-x86_64")


@pytest.fixture(scope="module")
def set_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    needs_boot()
    base = tmp_path_factory.mktemp("set-boot")
    hardware = []
    for name, described in (("two", KNOWN), ("one", ONE)):
        path = base / f"{name}.yaml"
        path.write_text(yaml.safe_dump(described | {"name": name}))
        hardware += ["--hw", str(path)]
    out = base / "set"
    command = [sys.executable, "-m", "generator", "set", *hardware, "--profile", "training"]
    made = subprocess.run(
        [*command, "-o", str(out)], cwd=REPO, capture_output=True, text=True, check=False
    )
    assert made.returncode == 0, made.stderr
    return out


def boot(set_dir: Path, shape: str, out: Path) -> str:
    smp, topology, expected = SHAPES[shape]
    member = set_dir / "members" / f"{expected or 'two'}-training"
    extra = out.parent / f"{shape}-extra"
    extra.write_text(EXTRA)
    hook = out.parent / f"{shape}-hook"
    hook.write_text(HOOK.format(extra=extra))
    hook.chmod(0o755)
    command = [str(BOOT / "boot.sh"), "--bundle", str(set_dir), "--out", str(out)]
    command += ["--collector", str(member / "rootfs/usr/lib/goldtune/collect")]
    command += ["--collect-data", str(member / "rootfs/etc/goldtune/collect.conf")]
    command += ["--timeout", str(TIMEOUT_S), "--smp", smp, "--hook", str(hook)]
    if topology:
        arguments = out.parent / f"{shape}-topology.args"
        arguments.write_text("\n".join(topology) + "\n")
        command += ["--qemu-args", str(arguments)]
    booted = subprocess.run(
        command, capture_output=True, text=True, timeout=TIMEOUT_S + 900, check=False
    )
    assert booted.returncode == 0, booted.stderr[-4000:]
    log = (out / "extra.log").read_text(errors="replace")
    return log.split("set-begin", 1)[-1].split("set-end", 1)[0]


@pytest.mark.parametrize("shape", ["two", "one"])
def test_each_shape_boots_its_own_member(set_dir: Path, shape: str, tmp_path: Path) -> None:
    report = boot(set_dir, shape, tmp_path / "out")
    lines = report.strip().splitlines()
    assert lines[0] == shape, report  # /run/goldtune/selected
    assert lines[1] == "active", report  # goldtune-select.service did not fail
    assert f"member {shape} is this node's" in report
    assert "90-goldtune.conf" in report and "preflight.conf" in report
    member = set_dir / "members" / f"{shape}-training"
    code = (
        "import sys; from pathlib import Path; from generator.verify.run import run_verify; "
        "sys.exit(run_verify(Path(sys.argv[1]), snapshot=Path(sys.argv[2]), as_json=True))"
    )
    verified = subprocess.run(
        [sys.executable, "-c", code, str(member), str(tmp_path / "out/snapshot.log")],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    assert verified.returncode in (0, 1), verified.stderr
    checks = json.loads(verified.stdout)["checks"]
    sysctls = [c for c in checks if c["kind"] == "sysctl"]
    assert sysctls and all(c["verdict"] == "ok" for c in sysctls), sysctls


def test_a_shape_of_neither_member_fails_and_gets_nothing(set_dir: Path, tmp_path: Path) -> None:
    report = boot(set_dir, "neither", tmp_path / "out")
    assert "No such file" in report.strip().splitlines()[0], report  # no /run/goldtune/selected
    assert "failed" in report
    for member in ("two", "one"):
        assert f"member {member} does not match: " in report
        assert "the hardware file says" in report.split(f"member {member} does not match: ")[1]
    assert "no member of the set matches this node; nothing machine-specific applied" in report
    assert "90-goldtune.conf" not in report
