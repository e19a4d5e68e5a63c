"""nvidia-persistenced in persistence mode (issue 16): the drop-in for the packaged unit, its
enablement in an image (Ubuntu's unit is static), and what gen verify says about both."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from packaged_units import PERSISTENCED, RHEL_PERSISTENCED, UBUNTU_PERSISTENCED
from plans import full_plan

from generator.bundle.read import Bundle, read_bundle
from generator.bundle.write import write_bundle
from generator.commands.generate import plan_for
from generator.inputs.distro import load_distros
from generator.model.layout import unit_dropin
from generator.model.setting import Plan, Setting
from generator.render.render import render_bundle
from generator.rules.gpu.driver import PORTABLE_PERSISTENCED
from generator.verify import image, image_runtime, live
from generator.verify.run import verify_checks
from generator.verify.snapshot import Snapshot
from generator.verify.verdicts import Verdict

SYSTEMCTL = shutil.which("systemctl")
needs_systemctl = pytest.mark.skipif(SYSTEMCTL is None, reason="systemctl not installed")
PACKAGED = f"/usr/lib/systemd/system/{PERSISTENCED}"
DROPIN = unit_dropin(PERSISTENCED)
WANTS = f"etc/systemd/system/multi-user.target.wants/{PERSISTENCED}"
COMMAND = f"{PORTABLE_PERSISTENCED} --user nvidia-persistenced --persistence-mode --verbose"


def planned(option: str, value: str) -> Setting:
    return Setting("unit-dropin", f"{PERSISTENCED} {option}", value, "because", rule="test.rule")


EXEC_START = planned("ExecStart", COMMAND)
WANTED_BY = planned("WantedBy", "multi-user.target")


# --- the distribution tables the drop-in is built from ----------------------------------------


def test_every_distribution_package_installs_the_program_the_portable_drop_in_starts() -> None:
    packaged = {
        key: distro.nvidia.persistenced.program
        for key, distro in load_distros().items()
        # a table that names the unit but could not read its command (rhel-10) states none
        if distro.nvidia.persistenced is not None and distro.nvidia.persistenced.exec_start
    }
    assert packaged and set(packaged.values()) == {PORTABLE_PERSISTENCED}, packaged


def test_the_packaged_user_is_read_from_the_packaged_command() -> None:
    users = {
        key: distro.nvidia.persistenced.user
        for key, distro in load_distros().items()
        if distro.nvidia.persistenced is not None
    }
    assert users["ubuntu-24.04"] == users["ubuntu-22.04"] == "nvidia-persistenced"
    assert users["debian-12"] == "nvpd"
    assert users["rhel-9"] is None  # NVIDIA's RHEL package runs it as root


# --- an image: install.sh --root with the packaged unit, real systemctl ------------------------


def ubuntu_root(root: Path, unit: str = UBUNTU_PERSISTENCED) -> Path:
    (root / PACKAGED.lstrip("/")).parent.mkdir(parents=True)
    (root / PACKAGED.lstrip("/")).write_text(unit)
    for name in (PORTABLE_PERSISTENCED, "/bin/rm"):  # what the unit runs: stubs
        program = root / name.lstrip("/")
        program.parent.mkdir(parents=True, exist_ok=True)
        program.write_text("#!/bin/sh\n")
        program.chmod(0o755)
    return root


def install(bundle: Path, root: Path) -> subprocess.CompletedProcess[str]:
    env_path = f"/usr/sbin:/usr/bin:/sbin:/bin:{os.path.dirname(SYSTEMCTL or '')}"
    return subprocess.run(
        [str(bundle / "install.sh"), "--root", str(root)],
        capture_output=True,
        text=True,
        env={"PATH": env_path, "LC_ALL": "C"},
        check=False,
    )


def is_enabled(root: Path) -> str:
    result = subprocess.run(
        [SYSTEMCTL or "systemctl", f"--root={root}", "is-enabled", PERSISTENCED],
        capture_output=True,
        text=True,
        check=False,
    )
    return result.stdout.strip()


@needs_systemctl
def test_the_drop_in_makes_ubuntus_static_unit_enabled_in_an_image(tmp_path: Path) -> None:
    plan = plan_for("dgx-h100", "inference", "ubuntu-24.04")
    bundle = write_bundle(render_bundle(plan), tmp_path / "bundle")
    root = ubuntu_root(tmp_path / "image")
    assert is_enabled(root) == "static"  # the packaged unit alone: enable would do nothing
    result = install(bundle, root)
    assert f"enable {PERSISTENCED}\n" in result.stdout, result.stdout
    assert "is static" not in result.stdout
    assert os.readlink(root / WANTS) == PACKAGED
    assert is_enabled(root) == "enabled"
    checks, _ = verify_checks(read_bundle(bundle), root, None)
    ours = {(c.kind, c.key): c for c in checks if PERSISTENCED in c.key}
    assert set(ours) == {
        ("file", DROPIN),
        ("service", PERSISTENCED),
        ("unit-dropin", f"{PERSISTENCED} ExecStart"),
        ("unit-dropin", f"{PERSISTENCED} WantedBy"),
    }
    assert all(c.verdict == Verdict.OK for c in ours.values()), ours
    assert "--no-persistence-mode" not in ours[("unit-dropin", f"{PERSISTENCED} ExecStart")].actual


@needs_systemctl
@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze missing")
def test_systemd_analyze_verifies_the_packaged_unit_with_the_drop_in(tmp_path: Path) -> None:
    plan = plan_for("gh200", "inference", "ubuntu-24.04")
    bundle = write_bundle(render_bundle(plan), tmp_path / "bundle")
    root = ubuntu_root(tmp_path / "image")
    assert install(bundle, root).returncode in (0, 1)
    shown = subprocess.run(
        ["systemd-analyze", "verify", f"--root={root}", "--recursive-errors=no", PERSISTENCED],
        capture_output=True,
        text=True,
        check=False,
    )
    assert shown.returncode == 0, shown.stderr
    dropin = (root / DROPIN.lstrip("/")).read_text()
    assert "ExecStart=\nExecStart=/usr/bin/nvidia-persistenced --user root " in dropin


def without_persistenced_dropin(plan: Plan) -> Plan:
    kept = tuple(s for s in plan.settings if not s.key.startswith(f"{PERSISTENCED} "))
    return Plan(plan.hardware_name, plan.profile_name, kept, plan.notes)


@needs_systemctl
def test_install_reports_enabling_a_static_unit_as_a_failure(tmp_path: Path) -> None:
    """Without the drop-in's [Install], systemctl enable exits 0 and changes nothing."""
    bundle = write_bundle(
        render_bundle(without_persistenced_dropin(full_plan())), tmp_path / "bundle"
    )
    root = ubuntu_root(tmp_path / "image")
    result = install(bundle, root)
    assert result.returncode == 1, result.stdout
    assert f"enable {PERSISTENCED}: the unit is static" in result.stdout
    assert not (root / WANTS).exists()


@needs_systemctl
def test_rhel_unit_keeps_its_own_install_section(tmp_path: Path) -> None:
    bundle = write_bundle(render_bundle(full_plan()), tmp_path / "bundle")
    root = ubuntu_root(tmp_path / "image", RHEL_PERSISTENCED)
    result = install(bundle, root)
    assert f"enable {PERSISTENCED}\n" in result.stdout, result.stdout
    assert is_enabled(root) == "enabled"


# --- image verify ------------------------------------------------------------------------------


def tree(root: Path, files: dict[str, str]) -> image.Image:
    for name, text in files.items():
        path = root / name.lstrip("/")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return image.Image(root)


OURS = f"[Service]\nExecStart=\nExecStart={COMMAND}\n\n[Install]\nWantedBy=multi-user.target\n"


def test_image_the_drop_in_replaces_the_packaged_command(tmp_path: Path) -> None:
    machine = tree(tmp_path, {PACKAGED: UBUNTU_PERSISTENCED, DROPIN: OURS})
    assert image_runtime.check_unit_dropin(EXEC_START, machine).verdict == Verdict.OK
    assert image_runtime.check_unit_dropin(WANTED_BY, machine).verdict == Verdict.OK


def test_image_without_the_drop_in_the_packaged_command_differs(tmp_path: Path) -> None:
    machine = tree(tmp_path, {PACKAGED: UBUNTU_PERSISTENCED})
    check = image_runtime.check_unit_dropin(EXEC_START, machine)
    assert check.verdict == Verdict.DIFFERS and "--no-persistence-mode" in check.actual
    assert image_runtime.check_unit_dropin(WANTED_BY, machine).verdict == Verdict.MISSING


def test_image_a_later_drop_in_that_restores_no_persistence_mode_wins(tmp_path: Path) -> None:
    later = f"[Service]\nExecStart=\nExecStart={COMMAND} --no-persistence-mode\n"
    files = {PACKAGED: UBUNTU_PERSISTENCED, DROPIN: OURS}
    files[DROPIN.replace("90-goldtune", "99-local")] = later
    check = image_runtime.check_unit_dropin(EXEC_START, tree(tmp_path, files))
    assert check.verdict == Verdict.DIFFERS and "99-local.conf" in check.actual


# --- live verify -------------------------------------------------------------------------------

BUNDLE = Bundle(Path("/nonexistent"), Plan("box", "inference", (EXEC_START, WANTED_BY)))


def machine(cmdline: str | None, state: str = "active", enabled: str = "enabled") -> live.Live:
    records = {
        "runtime-unit": [
            (f"{PERSISTENCED}:ActiveState", state),
            (f"{PERSISTENCED}:LoadState", "loaded"),
        ],
        "unit-enabled": [(PERSISTENCED, enabled)],
        "runtime-cmdline": [(PERSISTENCED, cmdline)] if cmdline is not None else [],
    }
    return live.Live.of(Snapshot(records=records), BUNDLE)


def test_live_the_daemon_runs_the_drop_ins_command() -> None:
    check = live.check_unit_dropin(EXEC_START, machine(COMMAND + " "))
    assert check.verdict == Verdict.OK, check


@pytest.mark.parametrize(
    ("cmdline", "state", "reason"),
    [
        # started before the drop-in (or a later drop-in restored the packaged command)
        (COMMAND.replace("--persistence-mode", "--no-persistence-mode"), "active", "--no-pers"),
        # the drop-in's command, but another user: a later drop-in or an old start
        (COMMAND.replace("nvidia-persistenced --per", "root --per"), "active", "other options"),
        (None, "inactive", "no daemon keeps persistence mode on"),
    ],
)
def test_live_a_daemon_without_the_drop_ins_command_differs(
    cmdline: str | None, state: str, reason: str
) -> None:
    check = live.check_unit_dropin(EXEC_START, machine(cmdline, state))
    assert check.verdict == Verdict.DIFFERS and reason in check.reason, check


def test_live_a_static_unit_is_not_wanted_at_boot() -> None:
    assert live.check_unit_dropin(WANTED_BY, machine(COMMAND)).verdict == Verdict.OK
    check = live.check_unit_dropin(WANTED_BY, machine(COMMAND, enabled="static"))
    assert check.verdict == Verdict.DIFFERS and "not enabled" in check.reason
