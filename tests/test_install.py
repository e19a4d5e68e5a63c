"""install.sh into an image root, and the boot scripts on a machine without GPUs or NICs."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest
from plans import full_plan, plan_without, setting

from generator.bundle.write import write_bundle
from generator.model import layout
from generator.model.layout import in_overlay
from generator.model.setting import Plan
from generator.render.render import render_bundle

TOOLS = (
    "sh",
    "cp",
    "cmp",
    "mkdir",
    "chmod",
    "chown",
    "mv",
    "rm",
    "cat",
    "dirname",
    "stat",
    "id",
    "grep",
    "sed",
    "readlink",
    "tr",
    "printf",
    "mktemp",
)


def image_tree(root: Path) -> dict[str, tuple[str, bytes | str]]:
    found: dict[str, tuple[str, bytes | str]] = {}
    for path in sorted(root.rglob("*")):
        name = "/" + str(path.relative_to(root))
        if path.is_symlink():
            found[name] = ("link", os.readlink(path))
        elif path.is_file():
            found[name] = (f"{path.stat().st_mode & 0o7777:04o}", path.read_bytes())
    return found


def make_bin(tmp_path: Path, stubs: dict[str, str], name: str = "bin") -> Path:
    """A PATH directory with the tools install.sh needs (no systemctl) plus stub scripts."""
    directory = tmp_path / name
    directory.mkdir()
    for tool in TOOLS:
        real = shutil.which(tool)
        if real:
            (directory / tool).symlink_to(real)
    for stub, body in stubs.items():
        path = directory / stub
        path.write_text("#!/bin/sh\n" + body)
        path.chmod(0o755)
    return directory


RECORDING_SYSTEMCTL = (
    'printf "%s\\n" "$*" >>"$STUB_LOG"\ncase $1 in cat | is-active) exit 1 ;; esac\nexit 0\n'
)


def bundle_for(tmp_path: Path, plan: Plan, name: str = "bundle") -> Path:
    return write_bundle(render_bundle(plan), tmp_path / name)


def run(
    script: Path, *args: str, path: Path, log: Path | None = None
) -> subprocess.CompletedProcess[str]:
    env = {"PATH": str(path), "STUB_LOG": str(log or "/dev/null"), "LC_ALL": "C"}
    return subprocess.run(
        [str(script), *args], capture_output=True, text=True, env=env, check=False
    )


def test_install_into_an_image_twice_gives_the_same_tree(tmp_path: Path) -> None:
    bundle = bundle_for(tmp_path, full_plan())
    root = tmp_path / "image"
    root.mkdir()
    path = make_bin(tmp_path, {})
    first = run(bundle / "install.sh", "--root", str(root), path=path)
    assert first.returncode == 0, first.stderr
    after_first = image_tree(root)
    second = run(bundle / "install.sh", "--root", str(root), path=path)
    assert second.returncode == 0, second.stderr
    assert image_tree(root) == after_first
    assert "goldtune: installed /etc/sysctl.d/90-goldtune.conf (mode 0644)" in first.stdout
    assert "goldtune: unchanged /etc/sysctl.d/90-goldtune.conf" in second.stdout
    assert "done: 0 written," in second.stdout
    assert "systemctl not found on this host: enable goldtune-gpu.service skipped" in first.stdout
    for overlay_file in (bundle / "rootfs").rglob("*"):
        if overlay_file.is_file():
            target = "/" + str(overlay_file.relative_to(bundle / "rootfs"))
            assert after_first[target] == (
                f"{overlay_file.stat().st_mode & 0o7777:04o}",
                overlay_file.read_bytes(),
            )
    assert after_first["/etc/tuned/active_profile"][1] == b"goldtune-inference\n"
    assert after_first["/etc/tuned/profile_mode"][1] == b"manual\n"
    assert stat.S_IMODE((root / "usr/local/libexec/goldtune/gpu-setup").stat().st_mode) == 0o755


def test_services_use_systemctl_root_and_missing_units_are_skipped(tmp_path: Path) -> None:
    bundle = bundle_for(tmp_path, full_plan())
    root = tmp_path / "image"
    (root / "usr/lib/systemd/system").mkdir(parents=True)
    (root / "usr/lib/systemd/system/irqbalance.service").write_text(
        "[Service]\nExecStart=/bin/true\n"
    )
    log = tmp_path / "systemctl.log"
    result = run(
        bundle / "install.sh",
        f"--root={root}",
        path=make_bin(tmp_path, {"systemctl": RECORDING_SYSTEMCTL}),
        log=log,
    )
    assert result.returncode == 0, result.stderr
    calls = log.read_text().splitlines()
    assert calls == [
        f"--root={root} --quiet disable irqbalance.service",
        f"--root={root} --quiet mask bluetooth.service",
        f"--root={root} --quiet enable goldtune-gpu.service",
        f"--root={root} --quiet enable goldtune-irq-affinity.service",
    ]
    assert (
        f"nvidia-persistenced.service is not installed in {root}: enable skipped" in result.stdout
    )
    assert "update-grub" in result.stdout  # told what to run inside the image, nothing run


@pytest.mark.skipif(shutil.which("systemctl") is None, reason="systemctl not installed")
def test_real_systemctl_root_enables_the_units(tmp_path: Path) -> None:
    bundle = bundle_for(tmp_path, full_plan())
    root = tmp_path / "image"
    root.mkdir()
    env_path = f"{make_bin(tmp_path, {})}:{os.path.dirname(shutil.which('systemctl') or '')}"
    for _ in range(2):
        result = subprocess.run(
            [str(bundle / "install.sh"), "--root", str(root)],
            capture_output=True,
            text=True,
            env={"PATH": env_path, "LC_ALL": "C"},
            check=False,
        )
        assert result.returncode == 0, result.stdout + result.stderr
    wants = root / "etc/systemd/system/multi-user.target.wants"
    assert sorted(os.listdir(wants)) == ["goldtune-gpu.service", "goldtune-irq-affinity.service"]
    assert os.readlink(root / "etc/systemd/system/bluetooth.service") == "/dev/null"


def test_files_a_newer_bundle_drops_are_removed(tmp_path: Path) -> None:
    root = tmp_path / "image"
    root.mkdir()
    path = make_bin(tmp_path, {})
    run(bundle_for(tmp_path, full_plan(), "old") / "install.sh", "--root", str(root), path=path)
    assert (root / "usr/local/libexec/goldtune/irq-affinity").exists()
    result = run(
        bundle_for(tmp_path, plan_without("irq"), "new") / "install.sh",
        "--root",
        str(root),
        path=path,
    )
    assert result.returncode == 0, result.stderr
    assert not (root / "usr/local/libexec/goldtune/irq-affinity").exists()
    assert not (root / "etc/systemd/system/goldtune-irq-affinity.service").exists()
    assert (
        "removed /usr/local/libexec/goldtune/irq-affinity (no longer in the bundle)"
        in result.stdout
    )
    assert (root / "usr/local/libexec/goldtune/gpu-setup").exists()


def test_an_absolute_symlink_in_the_image_is_not_written_through(tmp_path: Path) -> None:
    outside = tmp_path / "host-etc"
    outside.mkdir()
    root = tmp_path / "image"
    root.mkdir()
    (root / "etc").symlink_to(outside)
    result = run(
        bundle_for(tmp_path, full_plan()) / "install.sh",
        "--root",
        str(root),
        path=make_bin(tmp_path, {}),
    )
    assert result.returncode == 1
    assert "absolute symbolic link" in result.stderr
    assert os.listdir(outside) == []


def test_a_symlink_at_a_target_file_is_replaced_not_followed(tmp_path: Path) -> None:
    root = tmp_path / "image"
    (root / "etc/sysctl.d").mkdir(parents=True)
    victim = tmp_path / "victim"
    victim.write_text("keep")
    (root / "etc/sysctl.d/90-goldtune.conf").symlink_to(victim)
    result = run(
        bundle_for(tmp_path, full_plan()) / "install.sh",
        "--root",
        str(root),
        path=make_bin(tmp_path, {}),
    )
    assert result.returncode == 0, result.stderr
    assert victim.read_text() == "keep"
    assert not (root / "etc/sysctl.d/90-goldtune.conf").is_symlink()


@pytest.mark.parametrize("args", [["--root", "/nonexistent/image"], ["--bogus"], ["--root"]])
def test_bad_usage_exits_2(tmp_path: Path, args: list[str]) -> None:
    result = run(
        bundle_for(tmp_path, full_plan()) / "install.sh", *args, path=make_bin(tmp_path, {})
    )
    assert result.returncode == 2


# --- the GPU boot script, with a fake nvidia-smi -----------------------------------------------

INVENTORY = (
    "0, NVIDIA H100 80GB HBM3, 1755, 200.00, 700.00, 700.00, Disabled, [N/A]\n"
    "1, NVIDIA H100 80GB HBM3, 1980, 200.00, 700.00, 700.00, Enabled, Disabled\n"
)


def fake_smi(query_output: str, query_status: int = 0, fail_on: str = "") -> str:
    return (
        'printf "%s\\n" "$*" >>"$STUB_LOG"\n'
        f'case $1 in --query-gpu=*) printf "%s" "{query_output}"; exit {query_status} ;; esac\n'
        f'case " $* " in *" {fail_on} "*) [ -n "{fail_on}" ] && {{ echo "Setting not supported"; '
        f"exit 3; }} ;; esac\n"
        "exit 0\n"
    )


GPU_SETUP = in_overlay(layout.GPU_SCRIPT)
GPU_DATA = in_overlay(layout.GPU_DATA)
IRQ_SCRIPT = in_overlay(layout.IRQ_SCRIPT)
IRQ_DATA = in_overlay(layout.IRQ_DATA)


def run_gpu_setup(
    tmp_path: Path, plan: Plan, smi: str | None
) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    bundle = bundle_for(tmp_path, plan)
    stubs = {"systemctl": RECORDING_SYSTEMCTL.replace('"$STUB_LOG"', "/dev/null")}
    if smi is not None:
        stubs["nvidia-smi"] = smi
    log = tmp_path / "smi.log"
    log.touch()
    result = run(
        bundle / GPU_SETUP, str(bundle / GPU_DATA), path=make_bin(tmp_path, stubs), log=log
    )
    return result, [line for line in log.read_text().splitlines() if not line.startswith("--query")]


def test_gpu_setup_applies_and_clamps_each_action_per_card(tmp_path: Path) -> None:
    result, calls = run_gpu_setup(tmp_path, full_plan(), fake_smi(INVENTORY))
    assert result.returncode == 0
    assert calls == [
        "-pm 1",
        "-i 0 -e 1",
        "-i 0 -c EXCLUSIVE_PROCESS",
        "-i 0 -lgc 1755,1755",
        "-i 0 -pl 560",
        "-i 1 -c EXCLUSIVE_PROCESS",
        "-i 1 -lgc 1980,1980",
        "-i 1 -pl 560",
    ]
    out = result.stdout
    assert "GPU 0: planned 1980 MHz is above the card's 1755 MHz; using 1755" in out
    assert "GPU 0: ECC on (takes effect after the next reboot): done" in out
    assert "GPU 1: ECC already Enabled" in out
    assert "GPU 0: MIG not supported ([N/A]); skipped" in out
    assert "GPU 1: MIG already Disabled" in out


def test_gpu_setup_clamps_a_power_limit_to_the_card_range(tmp_path: Path) -> None:
    plan = full_plan(settings=(setting("gpu", "power-limit", "900"),))
    result, calls = run_gpu_setup(tmp_path, plan, fake_smi(INVENTORY))
    assert calls == ["-i 0 -pl 700", "-i 1 -pl 700"]
    assert "GPU 0: 900 W is above the card's maximum; using 700 W" in result.stdout


def test_gpu_setup_logs_an_unsupported_action_and_goes_on(tmp_path: Path) -> None:
    result, calls = run_gpu_setup(tmp_path, full_plan(), fake_smi(INVENTORY, fail_on="-c"))
    assert result.returncode == 0
    assert (
        "GPU 0: compute mode EXCLUSIVE_PROCESS: failed or not supported: Setting not supported"
        in result.stdout
    )
    assert "-i 1 -pl 560" in calls


@pytest.mark.parametrize(
    ("smi", "message"),
    [
        (None, "nvidia-smi not found (no NVIDIA driver installed); nothing to do"),
        (
            fake_smi("No devices were found\n", query_status=6),
            "nvidia-smi found no usable GPU: No devices were found",
        ),
        (fake_smi(""), "no GPU found; nothing to do"),
    ],
)
def test_gpu_setup_without_driver_or_gpu_does_nothing_and_exits_0(
    tmp_path: Path, smi: str | None, message: str
) -> None:
    result, calls = run_gpu_setup(tmp_path, full_plan(), smi)
    assert result.returncode == 0
    assert f"goldtune-gpu: {message}" in result.stdout
    assert calls == []


def test_gpu_setup_leaves_persistence_to_persistenced_when_active(tmp_path: Path) -> None:
    bundle = bundle_for(tmp_path, full_plan())
    log = tmp_path / "smi.log"
    log.touch()
    path = make_bin(tmp_path, {"systemctl": "exit 0\n", "nvidia-smi": fake_smi(INVENTORY)})
    result = run(bundle / GPU_SETUP, str(bundle / GPU_DATA), path=path, log=log)
    assert "persistence: nvidia-persistenced is active" in result.stdout
    assert "-pm 1" not in log.read_text()


# --- the IRQ boot script ---------------------------------------------------------------------


def test_irq_affinity_skips_missing_interfaces_and_exits_0(tmp_path: Path) -> None:
    plan = full_plan(
        settings=(setting("irq", "goldtune-none0", "1-3"), setting("irq", "lo", "1-3"))
    )
    bundle = bundle_for(tmp_path, plan)
    path = make_bin(tmp_path, {"udevadm": "exit 0\n", "systemctl": "exit 0\n"})
    result = run(bundle / IRQ_SCRIPT, str(bundle / IRQ_DATA), path=path)
    assert result.returncode == 0
    assert "goldtune-irq-affinity: goldtune-none0: no such interface; skipped" in result.stdout
    assert (
        "goldtune-irq-affinity: lo: no MSI interrupts (virtual or legacy device); skipped"
        in result.stdout
    )
    assert "warning: irqbalance is running" in result.stdout
