"""install.sh into an image root, and the boot scripts on a machine without GPUs or NICs."""

from __future__ import annotations

import os
import shlex
import shutil
import stat
import subprocess
import sys
from collections.abc import Callable
from functools import cache
from pathlib import Path

import pytest
from plans import FULL_SETTINGS, full_plan, plan_without, setting

from generator.bundle.read import read_bundle
from generator.bundle.write import write_bundle
from generator.commands.generate import render_for
from generator.model import layout
from generator.model.layout import in_overlay
from generator.model.setting import Plan
from generator.render.overlay import kernel_cmdline
from generator.render.render import render_bundle
from generator.verify.run import verify_checks
from generator.verify.verdicts import Verdict

TOOLS = (
    "sh",
    "awk",
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
    "head",
    "tail",
    "ln",
    "sort",
    "cut",
    "sha256sum",
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
    script: Path, *args: str, path: Path, log: Path | None = None, sysroot: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """Run a bundle script with stub tools first on PATH. ``sysroot`` (TEST_SYSROOT) stands in for
    / where the script reads /run: without it, a preflight result a run on this host left in
    /run/goldtune would judge the test's GPUs (CI failed so once)."""
    env = {"PATH": str(path), "STUB_LOG": str(log or "/dev/null"), "LC_ALL": "C"}
    if sysroot is not None:
        env["TEST_SYSROOT"] = str(sysroot)
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
    # with --root the links are made by install.sh itself, no systemctl needed (issue 29)
    assert "goldtune: enable goldtune-gpu.service" in first.stdout
    for overlay_file in (bundle / "rootfs").rglob("*"):
        if overlay_file.is_file():
            target = "/" + str(overlay_file.relative_to(bundle / "rootfs"))
            assert after_first[target] == (
                f"{overlay_file.stat().st_mode & 0o7777:04o}",
                overlay_file.read_bytes(),
            )
    assert after_first["/etc/tuned/active_profile"][1] == b"goldtune-inference\n"
    assert after_first["/etc/tuned/profile_mode"][1] == b"manual\n"
    assert stat.S_IMODE((root / "usr/lib/goldtune/gpu-setup").stat().st_mode) == 0o755


def test_services_are_linked_in_the_image_and_missing_units_are_skipped(tmp_path: Path) -> None:
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
    # systemctl --root wrote through links out of the image (issue 29): install.sh makes them
    assert not log.exists()
    actions = ("goldtune: enable ", "goldtune: disable ", "goldtune: mask ")
    assert [line for line in result.stdout.splitlines() if line.startswith(actions)] == [
        "goldtune: disable irqbalance.service",
        "goldtune: mask bluetooth.service",
        "goldtune: enable goldtune-gpu.service",
        "goldtune: enable goldtune-irq-affinity.service",
        "goldtune: enable goldtune-pcie-acs.service",
        "goldtune: enable goldtune-cuda-mps.service",  # shipped by the bundle
        "goldtune: enable goldtune-metrics.timer",
        "goldtune: enable goldtune-node-labels.service",
        "goldtune: enable goldtune-preflight.service",  # issue 28
        "goldtune: enable goldtune-nccl-resolve.service",  # issue 38
        "goldtune: enable goldtune-kernel-args.service",  # the image's boot check (issue 27)
    ]
    wants = root / "etc/systemd/system/multi-user.target.wants"
    assert os.readlink(wants / "goldtune-gpu.service") == "/etc/systemd/system/goldtune-gpu.service"
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
    assert sorted(os.listdir(wants)) == [
        "goldtune-cuda-mps.service",
        "goldtune-gpu.service",
        "goldtune-irq-affinity.service",
        "goldtune-kernel-args.service",  # the image's boot check of its kernel arguments
        "goldtune-nccl-resolve.service",  # issue 38
        "goldtune-node-labels.service",
        "goldtune-pcie-acs.service",
        "goldtune-preflight.service",
    ]
    timers = root / "etc/systemd/system/timers.target.wants"
    assert os.listdir(timers) == ["goldtune-metrics.timer"]
    assert os.readlink(root / "etc/systemd/system/bluetooth.service") == "/dev/null"


@pytest.mark.skipif(shutil.which("systemctl") is None, reason="systemctl not installed")
def test_a_dropped_install_section_takes_its_wants_link_along(tmp_path: Path) -> None:
    """The persistenced drop-in carries [Install] WantedBy=multi-user.target, which enables the
    packaged (static) unit; a later bundle without GPUs removes the drop-in and, with real
    `systemctl --root`, the multi-user.target.wants link it made (disabled before removal)."""
    root = tmp_path / "image"
    packaged = root / "usr/lib/systemd/system/nvidia-persistenced.service"
    packaged.parent.mkdir(parents=True)
    packaged.write_text("[Service]\nExecStart=/usr/bin/nvidia-persistenced\n")  # Ubuntu's: static
    env_path = f"{make_bin(tmp_path, {})}:{os.path.dirname(shutil.which('systemctl') or '')}"
    link = root / "etc/systemd/system/multi-user.target.wants/nvidia-persistenced.service"
    without_gpus = full_plan(
        settings=tuple(s for s in FULL_SETTINGS if "nvidia-persistenced" not in s.key)
    )
    for name, plan in (("gpus", full_plan()), ("no-gpus", without_gpus)):
        result = subprocess.run(
            [str(bundle_for(tmp_path, plan, name) / "install.sh"), "--root", str(root)],
            capture_output=True,
            text=True,
            env={"PATH": env_path, "LC_ALL": "C"},
            check=False,
        )
        assert result.returncode == 0, result.stdout + result.stderr
        assert link.is_symlink() is (name == "gpus"), result.stdout
    assert "disable nvidia-persistenced.service" in result.stdout
    assert not list((root / "etc/systemd/system/nvidia-persistenced.service.d").glob("*.conf"))


def test_files_a_newer_bundle_drops_are_removed(tmp_path: Path) -> None:
    root = tmp_path / "image"
    root.mkdir()
    path = make_bin(tmp_path, {})
    run(bundle_for(tmp_path, full_plan(), "old") / "install.sh", "--root", str(root), path=path)
    assert (root / "usr/lib/goldtune/irq-affinity").exists()
    result = run(
        bundle_for(tmp_path, plan_without("irq"), "new") / "install.sh",
        "--root",
        str(root),
        path=path,
    )
    assert result.returncode == 0, result.stderr
    assert not (root / "usr/lib/goldtune/irq-affinity").exists()
    assert not (root / "etc/systemd/system/goldtune-irq-affinity.service").exists()
    assert "removed /usr/lib/goldtune/irq-affinity (no longer in the bundle)" in result.stdout
    assert (root / "usr/lib/goldtune/gpu-setup").exists()


def test_a_dropped_timer_takes_its_timers_target_link_along(tmp_path: Path) -> None:
    """goldtune-metrics.timer (knob prometheus_textfile) is linked into timers.target.wants; a
    later bundle without it disables it before removing the file, so no dangling link stays
    (before: only *.service files were disabled on removal)."""
    root = tmp_path / "image"
    root.mkdir()
    path = make_bin(tmp_path, {})
    without_timer = tuple(s for s in FULL_SETTINGS if s.key != "goldtune-metrics.timer")
    link = root / "etc/systemd/system/timers.target.wants/goldtune-metrics.timer"
    for name, plan in (("on", full_plan()), ("off", full_plan(settings=without_timer))):
        result = run(
            bundle_for(tmp_path, plan, name) / "install.sh", "--root", str(root), path=path
        )
        assert result.returncode == 0, result.stdout + result.stderr
        assert link.is_symlink() is (name == "on"), result.stdout
    assert "disable goldtune-metrics.timer" in result.stdout
    assert not (root / "etc/systemd/system/goldtune-metrics.timer").exists()


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
        bundle / GPU_SETUP,
        str(bundle / GPU_DATA),
        path=make_bin(tmp_path, stubs),
        log=log,
        sysroot=tmp_path / "no-preflight-result",
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


def test_gpu_setup_without_the_host_driver_says_so_in_one_line(tmp_path: Path) -> None:
    """A host-driver bundle on a node without nvidia-smi applies nothing and says so in one
    journal line; the boot goes on (a VM, an image without the driver yet, the cloud-init form
    without a preflight): verify --strict is the gate that fails on such an image."""
    result, calls = run_gpu_setup(tmp_path, full_plan(), None)
    assert result.returncode == 0
    assert result.stdout.endswith(
        "\ngoldtune-gpu: nvidia-smi not found (no NVIDIA driver installed); nothing done\n"
    )
    assert calls == []


@pytest.mark.parametrize(
    ("daemon", "modes", "pm_calls"),
    [
        ("exit 1", ("Enabled", "Enabled"), 0),
        ("exit 1", ("Enabled", "Disabled"), 1),
        # a running daemon decides persistence: a GPU it left off is reported, not forced
        ("exit 0", ("Enabled", "Disabled"), 0),
    ],
)
def test_gpu_setup_sets_legacy_persistence_only_without_a_daemon_and_a_gpu_off(
    tmp_path: Path, daemon: str, modes: tuple[str, str], pm_calls: int
) -> None:
    """The bundle's own gpu-setup and data file: -pm 1 is the fallback where no daemon runs."""
    bundle = bundle_for(tmp_path, full_plan())
    log = tmp_path / "smi.log"
    log.touch()
    rows = [f"{row}, {mode}" for row, mode in zip(INVENTORY.splitlines(), modes, strict=True)]
    inventory = "".join(row + "\n" for row in rows)
    path = make_bin(tmp_path, {"systemctl": f"{daemon}\n", "nvidia-smi": fake_smi(inventory)})
    result = run(
        bundle / GPU_SETUP,
        str(bundle / GPU_DATA),
        path=path,
        log=log,
        sysroot=tmp_path / "no-preflight-result",
    )
    state = "active" if daemon == "exit 0" else "not active"
    assert f"(nvidia-persistenced {state})" in result.stdout
    assert log.read_text().splitlines().count("-pm 1") == pm_calls, result.stdout


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
    # irqbalance's warning: tests/test_scripts.py (a running irqbalance in a fake /proc)


# --- boot arguments per mechanism and tuned layered: inference -> training -> inference --------

INFERENCE = full_plan()
TRAINING = full_plan(
    profile_name="training",
    settings=(
        *(s for s in FULL_SETTINGS if s.key != "intel_idle.max_cstate"),
        setting("kernel-arg", "iommu", "pt", "test.iommu"),
    ),
)
# A RHEL 9 root as installed: BLS entries with literal options (no $kernelopts from 9.0 on),
# GRUB_ENABLE_BLSCFG=true, no /etc/kernel/cmdline yet, tuned on throughput-performance.
RHEL_OPTIONS = "root=/dev/mapper/rhel-root ro crashkernel=1G-4G:192M,4G-64G:256M rhgb quiet"
RHEL_ENTRY = "boot/loader/entries/4f1c2d-5.14.0-427.13.1.el9_4.x86_64.conf"


def rhel_root(root: Path, with_tuned_files: bool = True) -> Path:
    files = {
        "etc/default/grub": 'GRUB_CMDLINE_LINUX="crashkernel=1G-4G:192M rhgb quiet"\n'
        "GRUB_ENABLE_BLSCFG=true\n",
        RHEL_ENTRY: "title Red Hat Enterprise Linux (5.14.0-427.13.1.el9_4.x86_64) 9.4\n"
        "version 5.14.0-427.13.1.el9_4.x86_64\nlinux /vmlinuz-5.14.0-427.13.1.el9_4.x86_64\n"
        f"options {RHEL_OPTIONS}\ngrub_users $grub_users\ngrub_class rhel\n",
        "etc/tuned/active_profile": "throughput-performance\n",
        "etc/tuned/profile_mode": "auto\n",
    }
    if with_tuned_files:
        files["usr/lib/tuned/throughput-performance/tuned.conf"] = "[sysctl]\nvm.swappiness=10\n"
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def entry_options(root: Path) -> list[str]:
    text = (root / RHEL_ENTRY).read_text()
    return [line.split(None, 1)[1] for line in text.splitlines() if line.startswith("options")]


def test_bls_arguments_are_added_and_removed_across_bundles_in_an_image(tmp_path: Path) -> None:
    root = rhel_root(tmp_path / "image")
    path = make_bin(tmp_path, {})
    bundles = {
        plan.profile_name: bundle_for(tmp_path, plan, plan.profile_name)
        for plan in (INFERENCE, TRAINING)
    }

    def install(name: str) -> subprocess.CompletedProcess[str]:
        result = run(bundles[name] / "install.sh", "--root", str(root), path=path)
        assert result.returncode == 0, result.stdout + result.stderr
        return result

    install("inference")
    after_inference = image_tree(root)
    inference_line = f"{RHEL_OPTIONS} {kernel_cmdline(INFERENCE)}"
    assert entry_options(root) == [inference_line]
    assert (root / "etc/kernel/cmdline").read_text() == inference_line + "\n"
    assert (root / "var/lib/goldtune/kernel-args").read_text().split() == kernel_cmdline(
        INFERENCE
    ).split()
    checks, _ = verify_checks(read_bundle(bundles["inference"]), root, None)
    args = [c for c in checks if c.kind == "kernel-arg"]
    assert args and all(c.verdict == Verdict.OK for c in args), args

    result = install("training")
    training_line = f"{RHEL_OPTIONS} {kernel_cmdline(TRAINING)}"
    assert "remove 'intel_idle.max_cstate=1'" in result.stdout
    assert entry_options(root) == [training_line]
    assert (root / "etc/kernel/cmdline").read_text() == training_line + "\n"
    assert (root / "etc/tuned/active_profile").read_text() == (
        "throughput-performance goldtune-training\n"
    )

    install("inference")
    # back exactly: nothing of training is left, but the record of what this run removed (the
    # boot check's kernel-args-removed: training's iommu=pt)
    removed = "/var/lib/goldtune/kernel-args-removed"
    assert image_tree(root)[removed] == ("0644", b"iommu=pt\n")
    assert {**image_tree(root), removed: after_inference[removed]} == after_inference
    assert "done: 0 written," in install("inference").stdout


def test_bls_entries_with_tuned_params_are_edited_around_the_variable(tmp_path: Path) -> None:
    """Issue 27 item 1 (review W-N1): RHEL 9 entries end in tuned's ``$tuned_params``
    (tuned's 92-tuned.install appends it; grub2's blscfg expand_val() expands ``$name`` words).
    On the base the run refused the entry and /etc/kernel/cmdline and exited 1."""
    root = rhel_root(tmp_path / "image")
    entry = root / RHEL_ENTRY
    entry.write_text(entry.read_text().replace(RHEL_OPTIONS, f"{RHEL_OPTIONS} $tuned_params"))
    (root / "etc/kernel").mkdir(parents=True)
    (root / "etc/kernel/cmdline").write_text(f"{RHEL_OPTIONS} $tuned_params\n")
    path = make_bin(tmp_path, {})
    bundles = {
        plan.profile_name: bundle_for(tmp_path, plan, plan.profile_name)
        for plan in (INFERENCE, TRAINING)
    }
    for name, plan in (("inference", INFERENCE), ("training", TRAINING)):
        result = run(bundles[name] / "install.sh", "--root", str(root), path=path)
        assert result.returncode == 0, result.stdout + result.stderr
        line = f"{RHEL_OPTIONS} $tuned_params {kernel_cmdline(plan)}"
        assert entry_options(root) == [line]  # the variable kept where it stands
        assert (root / "etc/kernel/cmdline").read_text() == line + "\n"
    # a '$' inside a word (or ${name}) is not a blscfg variable word: still not edited
    entry.write_text(entry.read_text().replace("$tuned_params", "x$tuned_params"))
    result = run(bundles["inference"] / "install.sh", "--root", str(root), path=path)
    assert result.returncode == 1
    assert "its options are not plain words or grub variables" in result.stdout


def grub_cmdline_linux(root: Path) -> list[str]:
    text = (root / "etc/default/grub").read_text()
    return [line for line in text.splitlines() if line.startswith("GRUB_CMDLINE_LINUX=")]


def test_a_bls_image_build_edits_grub_cmdline_linux_too(tmp_path: Path) -> None:
    """Issue 27 item 5: RHEL 9.0-9.2's grub2-mkconfig rewrites every BLS entry's options from
    GRUB_CMDLINE_LINUX (rhboot/grub2 10_linux.in update_bls_cmdline(); opt-in from 9.3,
    RHELDOCS-16752), so the image's next grub2-mkconfig dropped the arguments. Live, grubby
    --update-kernel=ALL edits it (grubby(8)); an image build edits it as text. On main the line
    was left as it was."""
    root = rhel_root(tmp_path / "image")
    path = make_bin(tmp_path, {})
    bundles = {
        plan.profile_name: bundle_for(tmp_path, plan, plan.profile_name)
        for plan in (INFERENCE, TRAINING)
    }
    for name, plan in (("inference", INFERENCE), ("training", TRAINING), ("inference", INFERENCE)):
        result = run(bundles[name] / "install.sh", "--root", str(root), path=path)
        assert result.returncode == 0, result.stdout + result.stderr
        assert grub_cmdline_linux(root) == [
            f'GRUB_CMDLINE_LINUX="crashkernel=1G-4G:192M rhgb quiet {kernel_cmdline(plan)}"'
        ]
    assert "GRUB_ENABLE_BLSCFG=true" in (root / "etc/default/grub").read_text()
    # a line the shell would expand is not edited, and the run says so
    grub = root / "etc/default/grub"
    grub.write_text('GRUB_CMDLINE_LINUX="$EXTRA quiet"\nGRUB_ENABLE_BLSCFG=true\n')
    result = run(bundles["training"] / "install.sh", "--root", str(root), path=path)
    assert result.returncode == 1
    assert "GRUB_CMDLINE_LINUX is not one line" in result.stdout
    assert grub.read_text() == 'GRUB_CMDLINE_LINUX="$EXTRA quiet"\nGRUB_ENABLE_BLSCFG=true\n'


def test_a_new_kernel_cmdline_is_seeded_without_the_entrys_variables(tmp_path: Path) -> None:
    """/etc/kernel/cmdline is read by every kernel-install layout; only grub expands
    ``$tuned_params`` (and 92-tuned.install adds it to new grub entries itself)."""
    root = rhel_root(tmp_path / "image")
    entry = root / RHEL_ENTRY
    entry.write_text(entry.read_text().replace(RHEL_OPTIONS, f"{RHEL_OPTIONS} $tuned_params"))
    bundle = bundle_for(tmp_path, INFERENCE)
    result = run(bundle / "install.sh", "--root", str(root), path=make_bin(tmp_path, {}))
    assert result.returncode == 0, result.stdout + result.stderr
    assert entry_options(root) == [f"{RHEL_OPTIONS} $tuned_params {kernel_cmdline(INFERENCE)}"]
    assert (root / "etc/kernel/cmdline").read_text() == (
        f"{RHEL_OPTIONS} {kernel_cmdline(INFERENCE)}\n"
    )


BLACKLISTS = full_plan(
    settings=(
        *FULL_SETTINGS,
        setting("kernel-arg", "modprobe.blacklist", "nouveau", "test.blacklist"),
        setting("kernel-arg", "rd.driver.blacklist", "nouveau", "test.blacklist"),
    )
)


def test_list_arguments_of_the_image_and_the_bundle_are_merged_not_replaced(
    tmp_path: Path,
) -> None:
    """Issue 27 item 3 (review W-N3): kmod (libkmod-config.c kcmdline_parse_result) and dracut
    (parse-kernel.sh) read every modprobe.blacklist= / rd.driver.blacklist= and split it at ','.
    On the base the image's lists were dropped (``modprobe.blacklist=nouveau`` alone)."""
    root = rhel_root(tmp_path / "image")
    entry = root / RHEL_ENTRY
    image_args = "modprobe.blacklist=pcspkr,floppy rd.driver.blacklist=floppy iommu=on"
    entry.write_text(entry.read_text().replace(RHEL_OPTIONS, f"{RHEL_OPTIONS} {image_args}"))
    path = make_bin(tmp_path, {})
    merged = "modprobe.blacklist=pcspkr,floppy,nouveau rd.driver.blacklist=floppy,nouveau"
    others = kernel_cmdline(INFERENCE)
    bundle = bundle_for(tmp_path, BLACKLISTS, "blacklists")
    assert run(bundle / "install.sh", "--root", str(root), path=path).returncode == 0
    assert entry_options(root) == [f"{RHEL_OPTIONS} iommu=on {others} {merged}"]
    assert (
        root / "etc/kernel/cmdline"
    ).read_text() == f"{RHEL_OPTIONS} iommu=on {others} {merged}\n"
    again = run(bundle / "install.sh", "--root", str(root), path=path)
    assert "done: 0 written," in again.stdout  # the merged list is stable
    checks, _ = verify_checks(read_bundle(bundle), root, None)
    args = [c for c in checks if c.kind == "kernel-arg"]
    assert len(args) == 5 and all(c.verdict == Verdict.OK for c in args), args
    # a bundle without them takes back only its own element: the image's lists stay
    plain = bundle_for(tmp_path, INFERENCE, "plain")
    assert run(plain / "install.sh", "--root", str(root), path=path).returncode == 0
    assert entry_options(root) == [
        f"{RHEL_OPTIONS} iommu=on modprobe.blacklist=pcspkr,floppy rd.driver.blacklist=floppy "
        f"{others}"
    ]


def test_tuned_is_layered_on_the_selected_profile_and_the_previous_one_kept(
    tmp_path: Path,
) -> None:
    root = rhel_root(tmp_path / "image")
    path = make_bin(tmp_path, {})
    for plan in (INFERENCE, TRAINING):
        bundle = bundle_for(tmp_path, plan, plan.profile_name)
        result = run(bundle / "install.sh", "--root", str(root), path=path)
        assert result.returncode == 0, result.stdout + result.stderr
        active = (root / "etc/tuned/active_profile").read_text()
        assert active == f"throughput-performance goldtune-{plan.profile_name}\n"
        assert (root / "etc/tuned/profile_mode").read_text() == "manual\n"
        assert (root / "var/lib/goldtune/tuned-previous").read_text() == "throughput-performance\n"
        # the profile itself is the bundle's file, byte for byte (no include= is written into it)
        tuned_conf = f"etc/tuned/goldtune-{plan.profile_name}/tuned.conf"
        assert (root / tuned_conf).read_bytes() == (bundle / "rootfs" / tuned_conf).read_bytes()


# a bundle of the same system whose profile says tuned: off (no tuned profile in it)
TUNED_OFF = plan_without("tuned")


def debian_tuned_root(root: Path) -> Path:
    """An image whose tuned selection is none before the tool's: no selection files."""
    (root / "etc/default").mkdir(parents=True)
    (root / "etc/default/grub").write_text('GRUB_CMDLINE_LINUX=""\n')
    return root


@pytest.mark.parametrize(
    ("image", "left"),
    [(rhel_root, "throughput-performance"), (debian_tuned_root, None)],
    ids=["image-profile-kept", "only-ours"],
)
def test_a_bundle_without_tuned_takes_ours_out_of_the_selection(
    tmp_path: Path, image: Callable[[Path], Path], left: str | None
) -> None:
    """tuned: off over a layered bundle: the record removes goldtune-inference's profile, so the
    selection drops it as --uninstall does (tuned refuses a selection that names a missing
    profile: tuned/daemon/daemon.py _load_profiles). The image's profile is kept; with only ours,
    the selection files go and tuned loads its recommended profile. tuned-previous goes too."""
    root = image(tmp_path / "image")
    path = make_bin(tmp_path, {})
    for plan, name in ((INFERENCE, "layered"), (TUNED_OFF, "off")):
        result = run(
            bundle_for(tmp_path, plan, name) / "install.sh", "--root", str(root), path=path
        )
        assert result.returncode == 0, result.stdout + result.stderr
    assert not (root / "etc/tuned/goldtune-inference/tuned.conf").exists()
    active, mode = root / "etc/tuned/active_profile", root / "etc/tuned/profile_mode"
    if left:
        assert active.read_text() == f"{left}\n"
        assert mode.read_text() == "manual\n"
        assert f"tuned loads {left}" in result.stdout, result.stdout
    else:
        assert not active.exists() and not mode.exists()
        assert "tuned loads its recommended profile" in result.stdout, result.stdout
    assert not (root / "var/lib/goldtune/tuned-previous").exists()
    again = run(
        bundle_for(tmp_path, TUNED_OFF, "again") / "install.sh", "--root", str(root), path=path
    )
    assert again.returncode == 0 and "removed /" not in again.stdout, again.stdout
    assert "tuned loads" not in again.stdout, again.stdout


def plant_active_profile_code(root: Path) -> None:
    (root / "etc/tuned/active_profile").write_text("$(reboot)\n")


def plant_active_profile_link(root: Path) -> None:
    (root / "etc/tuned/active_profile").unlink()
    (root / "etc/tuned/active_profile").symlink_to("../../victim")


def plant_quoted_args_record(root: Path) -> None:
    (root / "var/lib/goldtune").mkdir(parents=True)
    (root / "var/lib/goldtune/kernel-args").write_text('a="b c"\n')


def plant_fifo_args_record(root: Path) -> None:
    (root / "var/lib/goldtune").mkdir(parents=True)
    os.mkfifo(root / "var/lib/goldtune/kernel-args")  # reading it would hang


def plant_quoted_entry_options(root: Path) -> None:
    (root / RHEL_ENTRY).write_text('options root=/dev/vda "quoted arg"\n')


@pytest.mark.parametrize(
    ("prepare", "message"),
    [
        (plant_active_profile_code, "not a list of profile names"),
        (plant_active_profile_link, "/etc/tuned/active_profile is not a plain file"),
        (plant_quoted_args_record, "is not a list of arguments; it was not used"),
        (
            plant_fifo_args_record,
            "kernel-argument record /var/lib/goldtune/kernel-args is not a plain file",
        ),
        (plant_quoted_entry_options, "its options are not plain words"),
    ],
)
def test_foreign_tuned_and_boot_files_are_validated_not_used(
    tmp_path: Path, prepare: Callable[[Path], None], message: str
) -> None:
    root = rhel_root(tmp_path / "image")
    prepare(root)
    bundle = bundle_for(tmp_path, INFERENCE)
    result = run(bundle / "install.sh", "--root", str(root), path=make_bin(tmp_path, {}))
    assert result.returncode == 1, result.stdout
    assert message in result.stdout
    assert "$(reboot)" not in result.stdout and '"b c"' not in result.stdout  # never echoed
    assert not (root / "victim").exists()  # nothing written through the link


def test_a_debian_image_gets_the_drop_in_and_no_bls_edit(tmp_path: Path) -> None:
    root = tmp_path / "image"
    (root / "etc/default").mkdir(parents=True)
    (root / "etc/default/grub").write_text('GRUB_CMDLINE_LINUX_DEFAULT="quiet"\n')
    result = run(
        bundle_for(tmp_path, INFERENCE) / "install.sh",
        "--root",
        str(root),
        path=make_bin(tmp_path, {}),
    )
    assert result.returncode == 0, result.stdout
    assert "boot arguments (grub-dropin)" in result.stdout
    assert not (root / "etc/kernel/cmdline").exists()
    assert (root / "etc/default/grub.d/90-goldtune.cfg").exists()


def test_an_update_grub_reached_through_a_link_out_of_the_image_does_not_count(
    tmp_path: Path,
) -> None:
    """The first-boot unit runs the image's own update-grub: /usr/sbin -> the host's is refused."""
    root = tmp_path / "image"
    (root / "etc/default").mkdir(parents=True)
    (root / "etc/default/grub").write_text('GRUB_CMDLINE_LINUX_DEFAULT="quiet"\n')
    host_sbin = tmp_path / "host-sbin"
    host_sbin.mkdir()
    (host_sbin / "update-grub").write_text("#!/bin/sh\n")
    (host_sbin / "update-grub").chmod(0o755)
    (root / "usr").mkdir()
    (root / "usr/sbin").symlink_to(host_sbin)
    bundle = bundle_for(tmp_path, INFERENCE)
    result = run(bundle / "install.sh", "--root", str(root), path=make_bin(tmp_path, {}))
    assert result.returncode == 0, result.stdout
    assert "the image has no update-grub" in result.stdout
    assert not (root / "etc/systemd/system/goldtune-update-grub.service").exists()


def test_kernel_install_gives_a_later_kernel_the_bundles_arguments(tmp_path: Path) -> None:
    """systemd's kernel-install (90-loaderentry) reads /etc/kernel/cmdline for a new entry."""
    kernel_install = shutil.which("kernel-install")
    if kernel_install is None:
        pytest.skip("kernel-install (systemd) not installed")
    root = rhel_root(tmp_path / "image")
    bundle = bundle_for(tmp_path, INFERENCE)
    result = run(bundle / "install.sh", "--root", str(root), path=make_bin(tmp_path, {}))
    assert result.returncode == 0, result.stdout
    (tmp_path / "vmlinuz").write_text("not a kernel\n")
    # systemd 252 takes the layout from install.conf beside the cmdline, not from the environment
    (root / "etc/kernel/install.conf").write_text("layout=bls\n")
    installed = subprocess.run(
        [kernel_install, "add", "5.14.0-503.el9.x86_64", str(tmp_path / "vmlinuz")],
        capture_output=True,
        text=True,
        check=False,
        env={
            "PATH": os.environ["PATH"],
            # the image's /etc/kernel and /boot instead of the host's (systemd 251+)
            "KERNEL_INSTALL_CONF_ROOT": str(root / "etc/kernel"),
            "BOOT_ROOT": str(root / "boot"),
            "KERNEL_INSTALL_PLUGINS": "/usr/lib/kernel/install.d/90-loaderentry.install",
        },
    )
    assert installed.returncode == 0, installed.stdout + installed.stderr
    (new_entry,) = (root / "boot/loader/entries").glob("*-5.14.0-503.el9.x86_64.conf")
    options = [
        line.split(None, 1)[1]
        for line in new_entry.read_text().splitlines()
        if line.startswith("options")
    ]
    # kernel-install appends systemd.machine_id=<the host's id>: everything before it is the file
    assert [o.rsplit(" systemd.machine_id=", 1)[0] for o in options] == [
        f"{RHEL_OPTIONS} {kernel_cmdline(INFERENCE)}"
    ]
    checks, _ = verify_checks(read_bundle(bundle), root, None)
    args = [c for c in checks if c.kind == "kernel-arg"]
    assert args and all(c.verdict == Verdict.OK for c in args), args


# --- with the root as / : a private mount namespace and chroot, the host's /usr read-only -------


@cache
def can_chroot() -> bool:
    if os.geteuid() != 0 or shutil.which("unshare") is None or shutil.which("chroot") is None:
        return False
    probe = subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "true"], capture_output=True, check=False
    )
    return probe.returncode == 0


needs_chroot = pytest.mark.skipif(
    not can_chroot(), reason="needs root and a private mount namespace (unshare, chroot)"
)


def in_chroot(root: Path, command: str, binds: tuple[tuple[str, str], ...] = ()) -> str:
    """Run ``command`` with ``root`` as /, in a mount namespace of its own (nothing leaks out)."""
    for name in ("bin", "sbin", "lib", "lib64"):
        if not (root / name).is_symlink() and not (root / name).exists():
            (root / name).symlink_to(f"usr/{name}")
    for name in ("usr", "dev", "stub"):
        (root / name).mkdir(exist_ok=True)
    # awk is /etc/alternatives/awk on Debian, and the chroot has the image's /etc: the real one
    awk = Path(shutil.which("awk") or "/usr/bin/awk").resolve()
    if not (root / "stub/awk").is_symlink():
        (root / "stub/awk").symlink_to(awk)
    # the host's /usr under a writable overlay whose changes stay in the root (the bundle's
    # scripts go to /usr/lib/goldtune): nothing is written to the host's /usr
    layers = root / ".usr-layers"
    for name in ("upper", "work"):
        (layers / name).mkdir(parents=True, exist_ok=True)
    options = f"lowerdir=/usr,upperdir={layers}/upper,workdir={layers}/work"
    script = (
        f"set -e\nmount -t overlay usr -o {shlex.quote(options)} {shlex.quote(str(root / 'usr'))}\n"
    )
    script += "".join(
        f"mount --bind {shlex.quote(host)} {shlex.quote(str(root / inside))}\n"
        for host, inside in [("/dev", "dev"), *binds]
    )
    script += (
        f"exec chroot {shlex.quote(str(root))} /usr/bin/env -i PATH=/stub:/usr/sbin:/usr/bin "
        f"LC_ALL=C STUB_LOG=/stub.log /bin/sh -c {shlex.quote(command)}\n"
    )
    result = subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "sh", "-c", script],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def stub(root: Path, name: str, body: str = "") -> None:
    path = root / "stub" / name
    path.parent.mkdir(exist_ok=True)
    path.write_text(f'#!/bin/sh\nprintf "%s\\n" "{name} $*" >>"$STUB_LOG"\n{body}')
    path.chmod(0o755)


@needs_chroot
def test_live_bls_uses_grubby_to_add_and_remove_and_layers_tuned(tmp_path: Path) -> None:
    """Live on a RHEL-like root. grubby is a stub that records its calls: Debian does not
    package grubby, and what is tested is which arguments install.sh asks it to add and remove
    across inference -> training -> inference. The other live tools are recording stubs too, so
    nothing touches this host's kernel, units or tuned."""
    root = rhel_root(tmp_path / "rhel", with_tuned_files=False)  # /usr is the host's here
    (root / "run/systemd/system").mkdir(parents=True)
    for name in ("grubby", "tuned-adm", "sysctl", "systemd-tmpfiles", "udevadm", "update-grub"):
        stub(root, name)
    stub(root, "systemd-detect-virt", "exit 1\n")  # not in a chroot: the live path
    stub(
        root,
        "systemctl",
        'case "$*" in *"is-active --quiet tuned.service") exit 0 ;; cat*) exit 1 ;; esac\n',
    )
    (root / "tmp").mkdir()
    for number, plan in enumerate((INFERENCE, TRAINING, INFERENCE)):
        bundle = bundle_for(root / "tmp", plan, f"bundle-{number}")
        out = in_chroot(root, f"/{bundle.relative_to(root)}/install.sh")
        assert "done:" in out and " 0 failed" in out, out
    calls = (root / "stub.log").read_text().splitlines()
    inference, training = kernel_cmdline(INFERENCE), kernel_cmdline(TRAINING)
    assert [c for c in calls if c.startswith("grubby")] == [
        f"grubby --update-kernel=ALL --args={inference}",
        f"grubby --update-kernel=ALL --args={training} --remove-args=intel_idle.max_cstate=1",
        f"grubby --update-kernel=ALL --args={inference} --remove-args=iommu=pt",
    ]
    assert [c for c in calls if c.startswith("tuned-adm")] == [
        "tuned-adm profile throughput-performance goldtune-inference",
        "tuned-adm profile throughput-performance goldtune-training",
        "tuned-adm profile throughput-performance goldtune-inference",
    ]
    assert not [c for c in calls if c.startswith("update-grub")]
    assert (root / "etc/kernel/cmdline").read_text() == f"{RHEL_OPTIONS} {inference}\n"


@needs_chroot
@pytest.mark.parametrize(
    ("image", "expected"),
    [
        (rhel_root, "tuned-adm profile throughput-performance"),
        (debian_tuned_root, "tuned-adm auto_profile"),  # tuned's own choice, none guessed
    ],
    ids=["image-profile-kept", "only-ours"],
)
def test_live_a_bundle_without_tuned_switches_tuned_off_ours(
    tmp_path: Path, image: Callable[[Path], Path], expected: str
) -> None:
    """Live, tuned running: inference, then the same system's bundle without tuned. The
    selection loses goldtune-inference and tuned is switched to what is left, or to its
    automatic mode (its recommended profile) when nothing is."""
    root = image(tmp_path / "root")
    (root / "run/systemd/system").mkdir(parents=True)
    for name in ("grubby", "tuned-adm", "sysctl", "systemd-tmpfiles", "udevadm", "update-grub"):
        stub(root, name)
    stub(root, "systemd-detect-virt", "exit 1\n")
    stub(
        root,
        "systemctl",
        'case "$*" in *"is-active --quiet tuned.service") exit 0 ;; cat*) exit 1 ;; esac\n',
    )
    (root / "tmp").mkdir()
    for plan, name in ((INFERENCE, "layered"), (TUNED_OFF, "off")):
        bundle = bundle_for(root / "tmp", plan, name)
        out = in_chroot(root, f"/{bundle.relative_to(root)}/install.sh")
        assert "done:" in out and " 0 failed" in out, out
    calls = [c for c in (root / "stub.log").read_text().splitlines() if c.startswith("tuned-adm")]
    assert calls[1:] == [expected], calls
    active = root / "etc/tuned/active_profile"
    if image is rhel_root:
        assert active.read_text() == "throughput-performance\n"
    else:
        assert not active.exists() and "tuned loads its recommended profile" in out, out
    assert not (root / "etc/tuned/goldtune-inference/tuned.conf").exists()


DEBIAN_GRUB = (
    "GRUB_DEFAULT=0\nGRUB_TIMEOUT=5\n"
    "GRUB_DISTRIBUTOR=`lsb_release -i -s 2> /dev/null || echo Debian`\n"
    'GRUB_CMDLINE_LINUX_DEFAULT="quiet"\nGRUB_CMDLINE_LINUX=""\n'
)
# grub-probe asks the kernel which block device holds /; the test root is a directory, so it is
# the one stub here, bound over /usr/sbin/grub-probe. grub-mkconfig and /etc/grub.d are real.
GRUB_PROBE = """case "$*" in
*--target=device*) echo /dev/vda1 ;;
*--target=fs_uuid*) echo 0f0e0d0c-0b0a-4909-8807-060504030201 ;;
*--target=fs*) echo ext2 ;;
*--target=partuuid*) echo 01234567-01 ;;
*--target=drive*) echo '(hd0,msdos1)' ;;
*--target=partmap*) echo msdos ;;
esac
"""


@needs_chroot
@pytest.mark.skipif(
    shutil.which("update-grub") is None or not Path("/etc/grub.d/10_linux").exists(),
    reason="grub-common/grub2-common not installed (tests/tools/install-tools.sh)",
)
def test_update_grub_in_a_debian_root_carries_exactly_the_bundles_arguments(
    tmp_path: Path,
) -> None:
    root = tmp_path / "debian"
    for name, text in {
        "etc/default/grub": DEBIAN_GRUB,
        "boot/vmlinuz-6.1.0-9-amd64": "kernel\n",
        "boot/initrd.img-6.1.0-9-amd64": "initrd\n",
        "etc/tuned/bootcmdline": "",  # tuned's /etc/grub.d/00_tuned sources it (host has tuned)
    }.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    (root / "etc/grub.d").mkdir()
    (root / "boot/grub").mkdir()
    stub(root, "grub-probe", GRUB_PROBE)
    binds = (("/etc/grub.d", "etc/grub.d"), (str(root / "stub/grub-probe"), "usr/sbin/grub-probe"))
    path = make_bin(tmp_path, {})
    for number, plan in enumerate((INFERENCE, TRAINING, INFERENCE)):
        bundle = bundle_for(tmp_path, plan, f"bundle-{number}")
        result = run(bundle / "install.sh", "--root", str(root), path=path)
        assert result.returncode == 0, result.stdout + result.stderr
        in_chroot(root, "update-grub", binds)
        lines = [
            line.split()[2:]
            for line in (root / "boot/grub/grub.cfg").read_text().splitlines()
            if line.strip().startswith("linux")
        ]
        normal = [words for words in lines if "single" not in words]
        assert len(normal) == 2 and len(lines) == 3, lines
        for words in normal:
            assert words == ["root=/dev/vda1", "ro", "quiet", *kernel_cmdline(plan).split()]
        (recovery,) = [words for words in lines if "single" in words]
        assert recovery == ["root=/dev/vda1", "ro", "single"]  # _DEFAULT is not for recovery


@needs_chroot
@pytest.mark.skipif(
    shutil.which("update-grub") is None
    or not Path("/etc/grub.d/10_linux").exists()
    or shutil.which("systemctl") is None,
    reason="grub-common/grub2-common and systemctl not installed (tests/tools/install-tools.sh)",
)
def test_a_debian_image_built_with_root_regenerates_grub_cfg_once_at_first_boot(
    tmp_path: Path,
) -> None:
    """Issue 27 item 2 (review W-N2): on the base, --root left grub.cfg as it was and nothing at
    first boot ran update-grub. Now the image carries an enabled oneshot unit that runs its own
    update-grub once (install.sh runs nothing of the image); here its command runs chrooted, as
    systemd would run it at first boot, with the host's real grub-mkconfig."""
    root = tmp_path / "debian"
    for name, text in {
        "etc/default/grub": DEBIAN_GRUB,
        "boot/vmlinuz-6.1.0-9-amd64": "kernel\n",
        "boot/initrd.img-6.1.0-9-amd64": "initrd\n",
        "etc/tuned/bootcmdline": "",
        # the image's own update-grub: install.sh must never run it (the host's /usr hides it
        # in the chroot below, where the real one runs)
        "usr/sbin/update-grub": f"#!/bin/sh\ntouch {tmp_path}/ran-the-images-program\n",
    }.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    (root / "usr/sbin/update-grub").chmod(0o755)
    (root / "etc/grub.d").mkdir()
    (root / "boot/grub").mkdir()
    stub(root, "grub-probe", GRUB_PROBE)
    binds = (("/etc/grub.d", "etc/grub.d"), (str(root / "stub/grub-probe"), "usr/sbin/grub-probe"))
    env_path = f"{make_bin(tmp_path, {})}:{os.path.dirname(shutil.which('systemctl') or '')}"
    unit = root / "etc/systemd/system/goldtune-update-grub.service"
    marker = root / "var/lib/goldtune/grub-regenerated"
    for number, plan in enumerate((INFERENCE, TRAINING)):
        bundle = bundle_for(tmp_path, plan, f"bundle-{number}")
        result = subprocess.run(
            [str(bundle / "install.sh"), "--root", str(root)],
            capture_output=True,
            text=True,
            env={"PATH": env_path, "LC_ALL": "C"},
            check=False,
        )
        assert result.returncode == 0, result.stdout + result.stderr
        assert "goldtune-update-grub.service runs update-grub at first boot" in result.stdout
        assert not (tmp_path / "ran-the-images-program").exists()
        assert not marker.exists()  # handed over again: regenerated again at the next boot
        assert (root / "etc/systemd/system/multi-user.target.wants" / unit.name).is_symlink()
        text = unit.read_text()
        assert "ConditionPathExists=!/var/lib/goldtune/grub-regenerated" in text
        (command,) = [
            line.split("=", 1)[1] for line in text.splitlines() if line.startswith("ExecStart=")
        ]
        assert command.startswith("/bin/sh -c ")
        in_chroot(root, shlex.split(command)[2], binds)  # first boot
        assert marker.exists()  # the condition keeps it from running at later boots
        lines = [
            line.split()[2:]
            for line in (root / "boot/grub/grub.cfg").read_text().splitlines()
            if line.strip().startswith("linux") and "single" not in line
        ]
        assert lines and all(
            words == ["root=/dev/vda1", "ro", "quiet", *kernel_cmdline(plan).split()]
            for words in lines
        ), lines


# --- image builds (issue 13): nothing started, nothing fatal for absent hardware; --strict -------

# A GPU-less Packer build VM: every unit file is there (the NVIDIA packages are installed), but
# the NVIDIA daemons cannot start without a GPU, so `enable --now` of them fails.
BUILD_VM_SYSTEMCTL = """case "$*" in
cat*) exit 0 ;;
*"--now -- nvidia-"*) echo "Job failed because the control process exited" >&2; exit 1 ;;
esac
exit 0
"""


def build_vm_root(root: Path, detect_virt_status: int) -> Path:
    """A root that is / of a running systemd system (or of a chroot, by systemd-detect-virt)."""
    (root / "run/systemd/system").mkdir(parents=True)
    (root / "tmp").mkdir()
    for name in ("sysctl", "systemd-tmpfiles", "udevadm", "tuned-adm", "update-grub"):
        stub(root, name)
    # the NVIDIA package's unit (the host's /usr is bound in, without it)
    (root / "etc/systemd/system").mkdir(parents=True)
    (root / "etc/systemd/system/nvidia-persistenced.service").write_text("[Service]\n")
    stub(root, "systemd-detect-virt", f"exit {detect_virt_status}\n")
    stub(root, "systemctl", BUILD_VM_SYSTEMCTL)
    return root


def install_in(root: Path, *args: str) -> tuple[int, str, list[str]]:
    """install.sh of a full bundle run with ``root`` as /: (exit status, output, tool calls)."""
    bundle = bundle_for(root / "tmp", full_plan())
    command = f"/{bundle.relative_to(root)}/install.sh {' '.join(args)} 2>&1; echo status=$?"
    out = in_chroot(root, command)
    status = int(out.rsplit("status=", 1)[1])
    return status, out, (root / "stub.log").read_text().splitlines()


@needs_chroot
def test_the_live_path_on_a_gpu_less_build_vm_fails_as_issue_13_reports(tmp_path: Path) -> None:
    """The failure that needs the image-build mode: live, the NVIDIA units are started."""
    status, out, calls = install_in(build_vm_root(tmp_path / "vm", detect_virt_status=1))
    assert status == 1, out
    assert "(live system)" in out
    assert "enable nvidia-persistenced.service failed" in out
    assert "systemctl --quiet enable --now -- nvidia-persistenced.service" in calls
    assert "sysctl --system" in calls  # and the live steps ran on the build VM itself


@needs_chroot
@pytest.mark.parametrize(
    ("args", "detect_virt_status", "why"),
    [
        (("--image-build",), 1, "image build: --image-build"),
        ((), 0, "image build: in a chroot"),  # detected: nothing to pass
    ],
)
def test_an_image_build_of_root_enables_units_without_starting_anything(
    tmp_path: Path, args: tuple[str, ...], detect_virt_status: int, why: str
) -> None:
    status, out, calls = install_in(build_vm_root(tmp_path / "vm", detect_virt_status), *args)
    assert status == 0, out
    assert f"({why})" in out
    systemctl = [call for call in calls if call.startswith("systemctl")]
    assert "irqbalance.service is not installed in /: disable skipped" in out
    assert systemctl == [
        "systemctl --quiet mask bluetooth.service",
        "systemctl --quiet enable goldtune-gpu.service",
        "systemctl --quiet enable goldtune-irq-affinity.service",
        "systemctl --quiet enable goldtune-pcie-acs.service",
        "systemctl --quiet enable nvidia-persistenced.service",
        "systemctl is-enabled -- nvidia-persistenced.service",  # a static unit is not enabled
        "systemctl --quiet enable goldtune-cuda-mps.service",
        "systemctl --quiet enable goldtune-metrics.timer",
        "systemctl --quiet enable goldtune-node-labels.service",
        "systemctl --quiet enable goldtune-preflight.service",
        "systemctl --quiet enable goldtune-nccl-resolve.service",  # issue 38
        "systemctl --quiet enable goldtune-kernel-args.service",  # the boot check (issue 27)
    ]  # no --now, no daemon-reload, no try-restart: nothing is started or stopped
    assert not [c for c in calls if c.split()[0] in ("sysctl", "systemd-tmpfiles", "udevadm")]
    assert not [c for c in calls if c.startswith("tuned-adm")]
    assert "update-grub " in calls  # the image's grub.cfg gets the arguments before capture
    (deferred,) = [line for line in out.splitlines() if "deferred to first boot:" in line]
    assert deferred == (
        "goldtune: deferred to first boot: apply sysctl.d, write sysfs values, load modules, "
        "apply I/O scheduler rules, apply the unit drop-ins, container runtime and kubelet files, "
        "tuned loads goldtune-inference, "
        f"the kernel arguments ({kernel_cmdline(full_plan())}), "
        "start goldtune-gpu.service, goldtune-irq-affinity.service, goldtune-pcie-acs.service, "
        "nvidia-persistenced.service, goldtune-cuda-mps.service, goldtune-metrics.timer, "
        "goldtune-node-labels.service, goldtune-preflight.service, "
        "goldtune-nccl-resolve.service, goldtune-kernel-args.service"
    )


# kubernetes/release cmd/krel/templates/latest/kubeadm/10-kubeadm.conf (deb): how kubeadm's
# packages start kubelet; the bundle's kubelet.service.d drop-in extends its KUBELET_CONFIG_ARGS.
KUBEADM_DROPIN = """[Service]
Environment="KUBELET_KUBECONFIG_ARGS=--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf \
--kubeconfig=/etc/kubernetes/kubelet.conf"
Environment="KUBELET_CONFIG_ARGS=--config=/var/lib/kubelet/config.yaml"
EnvironmentFile=-/var/lib/kubelet/kubeadm-flags.env
EnvironmentFile=-/etc/default/kubelet
ExecStart=
ExecStart=/usr/bin/kubelet $KUBELET_KUBECONFIG_ARGS $KUBELET_CONFIG_ARGS $KUBELET_KUBEADM_ARGS \
$KUBELET_EXTRA_ARGS
"""


def image_with(root: Path, units: tuple[str, ...], commands: tuple[str, ...]) -> Path:
    """An image with these units (kubelet.service as kubeadm's packages ship it) and commands."""
    root.mkdir()
    for unit in units:
        path = root / "usr/lib/systemd/system" / unit
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("[Service]\nExecStart=/bin/true\n")
        if unit == "kubelet.service":
            (path.parent / "kubelet.service.d").mkdir()
            (path.parent / "kubelet.service.d/10-kubeadm.conf").write_text(KUBEADM_DROPIN)
    for command in commands:
        path = root / "usr/bin" / command
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("#!/bin/sh\n")
        path.chmod(0o755)
    return root


FULL_PLAN_NEEDS = (
    "nvidia-persistenced.service",
    "tuned.service",
    "containerd.service",
    "docker.service",
    "kubelet.service",
)


@pytest.mark.parametrize(
    ("units", "commands", "lacking"),
    [
        (
            (),
            (),
            "unit nvidia-persistenced.service, command nvidia-smi, unit tuned.service, "
            "unit containerd.service, unit docker.service, unit kubelet.service",
        ),
        (FULL_PLAN_NEEDS, (), "command nvidia-smi"),  # the driver installed after install.sh
        (FULL_PLAN_NEEDS[1:], ("nvidia-smi",), "unit nvidia-persistenced.service"),
    ],
)
def test_strict_fails_naming_what_the_image_lacks_and_installs_nothing(
    tmp_path: Path, units: tuple[str, ...], commands: tuple[str, ...], lacking: str
) -> None:
    root = image_with(tmp_path / "image", units, commands)
    before = image_tree(root)
    bundle = bundle_for(tmp_path, full_plan())
    path = make_bin(tmp_path, {"systemctl": RECORDING_SYSTEMCTL})
    result = run(bundle / "install.sh", "--root", str(root), "--strict", path=path)
    assert result.returncode == 1, result.stdout
    assert f"strict: {root} lacks what the plan needs: {lacking}; nothing installed" in (
        result.stderr
    )
    assert image_tree(root) == before
    # without --strict the same image is installed, and the lack is said, not fatal
    relaxed = run(bundle / "install.sh", "--root", str(root), path=path)
    assert relaxed.returncode == 0, relaxed.stdout + relaxed.stderr
    assert f"warning: {root} lacks what the plan needs: {lacking}" in relaxed.stdout


def test_strict_passes_on_an_image_with_everything_the_plan_needs(tmp_path: Path) -> None:
    root = image_with(tmp_path / "image", FULL_PLAN_NEEDS, ())
    (root / "usr/sbin").mkdir()
    (root / "usr/sbin/nvidia-smi").symlink_to("/etc/alternatives/nvidia-smi")  # never followed
    path = make_bin(tmp_path, {"systemctl": RECORDING_SYSTEMCTL})
    bundle = bundle_for(tmp_path, full_plan())
    result = run(bundle / "install.sh", "--root", str(root), "--strict", path=path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"(image build: --root {root})" in result.stdout
    assert "lacks" not in result.stdout + result.stderr
    assert "deferred to first boot: apply sysctl.d," in result.stdout


def test_a_bin_directory_link_out_of_the_image_does_not_count(tmp_path: Path) -> None:
    """nvidia-smi on this host, reached through an absolute /usr/local/bin link, is not the
    image's: the lookup never leaves the root."""
    host_bin = tmp_path / "host-bin"
    host_bin.mkdir()
    (host_bin / "nvidia-smi").write_text("#!/bin/sh\n")
    (host_bin / "nvidia-smi").chmod(0o755)
    root = image_with(tmp_path / "image", FULL_PLAN_NEEDS, ())
    (root / "usr/local").mkdir(parents=True)
    (root / "usr/local/bin").symlink_to(host_bin)
    result = run(
        bundle_for(tmp_path, full_plan()) / "install.sh",
        "--root",
        str(root),
        "--strict",
        path=make_bin(tmp_path, {}),
    )
    assert result.returncode == 1
    assert "lacks what the plan needs: command nvidia-smi;" in result.stderr


def requirements(system: str, profile: str = "inference") -> list[str]:
    text = render_for(system, profile)["install.list"][0].decode()
    return [line for line in text.splitlines() if line.startswith("require\t")]


@pytest.mark.parametrize(
    ("system", "expected"),
    [
        (
            "dgx-h100",  # NVSwitch: the fabric manager; DCGM is enabled only where installed
            [
                "require\tunit\tnvidia-fabricmanager.service",
                "require\tunit\tnvidia-persistenced.service",
                "require\tcommand\tnvidia-smi",
                "require\tunit\ttuned.service",
            ],
        ),
        (
            "l4-inference",  # PCIe cards: no fabric manager
            [
                "require\tunit\tnvidia-persistenced.service",
                "require\tcommand\tnvidia-smi",
                "require\tunit\ttuned.service",
            ],
        ),
    ],
)
def test_install_list_requires_what_the_plan_needs_of_the_image(
    system: str, expected: list[str]
) -> None:
    assert requirements(system) == expected


@pytest.mark.parametrize(
    ("runtime_config", "required"),
    [("goldtune", True), ("gpu-operator", False)],
)
def test_the_runtime_goldtune_makes_default_is_required_of_the_image(
    tmp_path: Path, runtime_config: str, required: bool
) -> None:
    """containerd's default runtime runs /usr/bin/nvidia-container-runtime; where it is absent
    every pod sandbox fails, so install.sh --strict names it (issue 26 item 6; on main no require
    line named it). Where the GPU Operator owns the runtime, goldtune names no program."""
    profile = tmp_path / "k8s.yaml"
    profile.write_text(f"extends: training-k8s\nruntime_config: {runtime_config}\n")
    text = render_for("dgx-h100", str(profile))["install.list"][0].decode()
    line = "require\tcommand\tnvidia-container-runtime"
    assert (line in text.splitlines()) == required
    assert "require\tunit\tcontainerd.service" in text.splitlines()


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("require\tunit\t$(reboot)", "not a unit name"),
        ("require\tcommand\t/usr/bin/nvidia-smi", "not a command name"),  # a name, never a path
        ("require\tcommand\t..", "not a command name"),
        ("require\tpackage\tnvidia-driver", "require takes unit or command"),
        ("require\tunit", "unknown key, or the wrong number of fields"),
    ],
)
def test_a_bad_require_line_is_refused_before_anything_is_written(
    tmp_path: Path, line: str, message: str
) -> None:
    bundle = bundle_for(tmp_path, full_plan())
    with (bundle / "install.list").open("a") as handle:
        handle.write(line + "\n")
    root = tmp_path / "image"
    root.mkdir()
    result = run(bundle / "install.sh", "--root", str(root), path=make_bin(tmp_path, {}))
    assert result.returncode == 2
    last = len((bundle / "install.list").read_text().splitlines())
    assert f"install.list: line {last}: {message}; nothing installed" in result.stderr
    assert "$(reboot)" not in result.stderr
    assert list(root.iterdir()) == []


# --- daemon.json: merged into the one in place (dockerd reads no drop-ins) -----------------------

DOCKER_PROFILE = "extends: training\ncontainers: docker\nkubernetes: false\n"
THEIRS = {
    "default-runtime": "runc",
    "log-driver": "journald",
    "registry-mirrors": ["https://mirror.example"],
    "runtimes": {"kata": {"path": "/usr/bin/kata-runtime"}},
}


def docker_bundle(tmp_path: Path) -> Path:
    from click.testing import CliRunner

    from generator.cli import main

    (tmp_path / "training-docker.yaml").write_text(DOCKER_PROFILE)
    bundle = tmp_path / "bundle"
    result = CliRunner().invoke(
        main,
        [
            "--hw",
            "dgx-h100",
            "--profile",
            str(tmp_path / "training-docker.yaml"),
            "-o",
            str(bundle),
        ],
    )
    assert result.exit_code == 0, result.output
    return bundle


def merge_tools(tmp_path: Path, merger: str) -> Path:
    path = make_bin(tmp_path, {})
    if merger == "jq":
        (path / "jq").symlink_to(shutil.which("jq") or "/usr/bin/jq")
    elif merger == "python3":
        # the interpreter itself (a pyenv shim would need bash and pyenv on this PATH)
        (path / "python3").symlink_to(os.path.realpath(sys.executable))
    return path


@pytest.mark.parametrize("merger", ["jq", "python3"])
def test_daemon_json_is_merged_into_the_one_in_place(tmp_path: Path, merger: str) -> None:
    """The bundle's keys win (default-runtime, runtimes.nvidia), every other key is kept (a
    mirror, the log driver, another runtime beside ours); a re-install changes nothing; verify
    --root judges the merged file by its settings."""
    import json

    if merger == "jq" and shutil.which("jq") is None:
        pytest.skip("no jq here")
    bundle = docker_bundle(tmp_path)
    root = tmp_path / "image"
    (root / "etc/docker").mkdir(parents=True)
    (root / "etc/docker/daemon.json").write_text(json.dumps(THEIRS))
    path = merge_tools(tmp_path, merger)
    first = run(bundle / "install.sh", "--root", str(root), path=path)
    assert first.returncode == 0, first.stdout + first.stderr
    assert "merging the bundle's keys into /etc/docker/daemon.json" in first.stdout
    merged = json.loads((root / "etc/docker/daemon.json").read_text())
    ours = json.loads((bundle / "rootfs/etc/docker/daemon.json").read_text())
    assert merged["default-runtime"] == ours["default-runtime"] == "nvidia"
    assert merged["runtimes"] == {**THEIRS["runtimes"], **ours["runtimes"]}
    assert merged["log-driver"] == "journald"
    assert merged["registry-mirrors"] == THEIRS["registry-mirrors"]
    assert {key: merged[key] for key in ours if key != "runtimes"} == {
        key: value for key, value in ours.items() if key != "runtimes"
    }
    before = image_tree(root)
    second = run(bundle / "install.sh", "--root", str(root), path=path)
    assert second.returncode == 0, second.stdout
    assert "unchanged /etc/docker/daemon.json" in second.stdout
    assert image_tree(root) == before
    checks, _ = verify_checks(read_bundle(bundle), root, None)
    docker = [c for c in checks if c.kind == "docker" or c.key == "/etc/docker/daemon.json"]
    assert docker and all(c.verdict == Verdict.OK for c in docker), docker


@pytest.mark.parametrize(
    ("merger", "in_place", "said"),
    [
        ("python3", "[1, 2]", "is not a JSON object"),
        ("python3", '{"debug": true,', "is not a JSON object"),
        ("none", '{"debug": true}', "neither jq nor python3"),
    ],
    ids=["a-list", "not-json", "no-merger"],
)
def test_daemon_json_that_cannot_be_merged_is_left_as_it_is(
    tmp_path: Path, merger: str, in_place: str, said: str
) -> None:
    bundle = docker_bundle(tmp_path)
    root = tmp_path / "image"
    (root / "etc/docker").mkdir(parents=True)
    (root / "etc/docker/daemon.json").write_text(in_place)
    result = run(bundle / "install.sh", "--root", str(root), path=merge_tools(tmp_path, merger))
    assert result.returncode != 0
    assert said in result.stdout
    assert (root / "etc/docker/daemon.json").read_text() == in_place


def test_daemon_json_without_one_in_place_is_the_bundles(tmp_path: Path) -> None:
    bundle = docker_bundle(tmp_path)
    root = tmp_path / "image"
    root.mkdir()
    result = run(bundle / "install.sh", "--root", str(root), path=merge_tools(tmp_path, "none"))
    assert result.returncode == 0, result.stdout
    assert (root / "etc/docker/daemon.json").read_bytes() == (
        bundle / "rootfs/etc/docker/daemon.json"
    ).read_bytes()


def test_an_nccl_conf_a_newer_bundle_drops_is_removed(tmp_path: Path) -> None:
    """/etc/nccl.conf cannot carry the tool's name (NCCL reads that one path): install.sh must
    still take it back when a bundle no longer writes it, not refuse its own record line."""
    root = tmp_path / "image"
    root.mkdir()
    path = make_bin(tmp_path, {})
    first = run(
        bundle_for(tmp_path, full_plan(), "old") / "install.sh", "--root", str(root), path=path
    )
    assert first.returncode == 0, first.stdout + first.stderr
    assert (root / layout.NCCL_CONF.lstrip("/")).is_file()
    result = run(
        bundle_for(tmp_path, plan_without("nccl"), "new") / "install.sh",
        "--root",
        str(root),
        path=path,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"removed {layout.NCCL_CONF} (no longer in the bundle)" in result.stdout
    assert not (root / layout.NCCL_CONF.lstrip("/")).exists()
    assert not (root / "var/lib/goldtune/nccl.conf.image").exists()


# --- nccl.conf: the image's own lines kept after the bundle's (NCCL takes a name's first value) ---

# Azure NDv5 images ship these (shared/research/peer-systems.md); the third is a name the bundle
# sets, dropped from the merged file; the last holds a byte that is not printable ASCII.
NDV5_NCCL_CONF = (
    b"NCCL_TOPO_FILE=/opt/microsoft/ndv5/topo.xml\n"
    b"NCCL_IB_PCI_RELAXED_ORDERING=1\n"
    b"NCCL_SOCKET_IFNAME=eth0\n"
    b"NCCL_DEBUG=\x1b[2JWARN\n"
)
NDV5_KEPT = b"NCCL_TOPO_FILE=/opt/microsoft/ndv5/topo.xml\nNCCL_IB_PCI_RELAXED_ORDERING=1\n"


def nccl_plan(interface: str) -> Plan:
    """The full plan with another NCCL_SOCKET_IFNAME value: a changed bundle."""
    return full_plan(
        settings=tuple(
            setting("nccl", s.key, interface, s.rule) if s.key == "NCCL_SOCKET_IFNAME" else s
            for s in FULL_SETTINGS
        )
    )


def image_with_nccl_conf(tmp_path: Path, content: bytes = NDV5_NCCL_CONF) -> Path:
    root = tmp_path / "image"
    (root / "etc").mkdir(parents=True)
    (root / "etc/nccl.conf").write_bytes(content)
    (root / "etc/nccl.conf").chmod(0o640)
    return root


def test_the_images_nccl_conf_lines_are_kept_after_the_bundles(tmp_path: Path) -> None:
    """Ours first (NCCL keeps a name's first value), then the image's other lines, once, after
    a re-install of a changed bundle too; verify --root judges the merged file OK."""
    root = image_with_nccl_conf(tmp_path)
    path = make_bin(tmp_path, {})
    conf = root / "etc/nccl.conf"
    for name, interface in (("first", "=ens1f0np0"), ("changed", "=ens2f0np0")):
        bundle = bundle_for(tmp_path, nccl_plan(interface), name)
        result = run(bundle / "install.sh", "--root", str(root), path=path)
        assert result.returncode == 0, result.stdout + result.stderr
        ours = (bundle / "rootfs/etc/nccl.conf").read_bytes()
        merged = conf.read_bytes()
        assert merged.startswith(ours), merged
        image_part = merged[len(ours) :].split(b"\n", 2)[2]
        assert image_part == NDV5_KEPT
        assert "2 of its 4 lines kept" in result.stdout
        assert b"\x1b" not in result.stdout.encode()
        checks, _ = verify_checks(read_bundle(bundle), root, None)
        nccl = [c for c in checks if c.kind == "nccl" or c.key == layout.NCCL_CONF]
        assert nccl and all(c.verdict == Verdict.OK for c in nccl), nccl
        assert any("merged" in c.actual for c in nccl if c.kind == "file")
    kept = root / "var/lib/goldtune/nccl.conf.image"
    assert kept.read_bytes() == NDV5_NCCL_CONF
    again = run(bundle / "install.sh", "--root", str(root), path=path)
    assert f"unchanged {layout.NCCL_CONF}" in again.stdout


def test_an_nccl_conf_with_crlf_lines_keeps_them_verbatim(tmp_path: Path) -> None:
    """A file written on Windows: NCCL drops the CR (newer releases), so the lines are kept."""
    root = image_with_nccl_conf(tmp_path, NDV5_KEPT.replace(b"\n", b"\r\n"))
    bundle = bundle_for(tmp_path, full_plan())
    result = run(bundle / "install.sh", "--root", str(root), path=make_bin(tmp_path, {}))
    assert result.returncode == 0, result.stdout + result.stderr
    merged = (root / "etc/nccl.conf").read_bytes()
    assert merged.endswith(b" value\n" + NDV5_KEPT.replace(b"\n", b"\r\n"))


def test_a_bundle_without_nccl_puts_the_images_nccl_conf_back(tmp_path: Path) -> None:
    root = image_with_nccl_conf(tmp_path)
    path = make_bin(tmp_path, {})
    run(bundle_for(tmp_path, full_plan(), "old") / "install.sh", "--root", str(root), path=path)
    result = run(
        bundle_for(tmp_path, plan_without("nccl"), "new") / "install.sh",
        "--root",
        str(root),
        path=path,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"restored the image's own {layout.NCCL_CONF}" in result.stdout
    conf = root / "etc/nccl.conf"
    assert conf.read_bytes() == NDV5_NCCL_CONF
    assert conf.stat().st_mode & 0o7777 == 0o640
    assert not (root / "var/lib/goldtune/nccl.conf.image").exists()


def test_an_nccl_conf_too_large_to_merge_is_left_as_it_is(tmp_path: Path) -> None:
    huge = b"# padding\n" * 7000 + NDV5_NCCL_CONF
    root = image_with_nccl_conf(tmp_path, huge)
    result = run(
        bundle_for(tmp_path, full_plan()) / "install.sh",
        "--root",
        str(root),
        path=make_bin(tmp_path, {}),
    )
    assert result.returncode == 1
    assert "larger than 65536 bytes" in result.stdout
    assert (root / "etc/nccl.conf").read_bytes() == huge
    assert not (root / "var/lib/goldtune/nccl.conf.image").exists()
    # the record lists nccl.conf now: a later install neither takes it for ours nor removes it
    path = make_bin(tmp_path, {}, "bin2")
    for plan in (full_plan(), plan_without("nccl")):
        again = run(
            bundle_for(tmp_path, plan, "later") / "install.sh", "--root", str(root), path=path
        )
        assert (root / "etc/nccl.conf").read_bytes() == huge, again.stdout
        shutil.rmtree(tmp_path / "later")


def test_the_images_rccl_conf_is_merged_and_put_back_like_nccl_conf(tmp_path: Path) -> None:
    """RCCL reads /etc/rccl.conf as NCCL reads nccl.conf (ROCm/rccl src/misc/param.cc): an
    image's own lines are kept after the bundle's, the original at rccl.conf.image, and a bundle
    without RCCL settings puts it back. Failed before: install.sh replaced the image's file and
    a later bundle left the stale one in place."""
    root = tmp_path / "image"
    (root / "etc").mkdir(parents=True)
    conf = root / "etc/rccl.conf"
    conf.write_bytes(NDV5_NCCL_CONF)
    conf.chmod(0o640)
    path = make_bin(tmp_path, {})
    bundle = bundle_for(tmp_path, full_plan(), "old")
    result = run(bundle / "install.sh", "--root", str(root), path=path)
    assert result.returncode == 0, result.stdout + result.stderr
    ours = (bundle / "rootfs/etc/rccl.conf").read_bytes()
    assert conf.read_bytes().startswith(ours)
    assert conf.read_bytes()[len(ours) :].split(b"\n", 2)[2] == NDV5_KEPT
    kept = root / "var/lib/goldtune/rccl.conf.image"
    assert kept.read_bytes() == NDV5_NCCL_CONF
    checks, _ = verify_checks(read_bundle(bundle), root, None)
    rccl = [c for c in checks if c.kind == "rccl" or c.key == layout.RCCL_CONF]
    assert rccl and all(c.verdict == Verdict.OK for c in rccl), rccl
    result = run(
        bundle_for(tmp_path, plan_without("rccl"), "new") / "install.sh",
        "--root",
        str(root),
        path=path,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"restored the image's own {layout.RCCL_CONF}" in result.stdout
    assert conf.read_bytes() == NDV5_NCCL_CONF
    assert conf.stat().st_mode & 0o7777 == 0o640
    assert not kept.exists()


def test_a_fifo_or_link_at_nccl_conf_is_replaced_not_read(tmp_path: Path) -> None:
    outside = tmp_path / "outside.conf"
    outside.write_bytes(NDV5_NCCL_CONF)
    for plant in ("fifo", "link"):
        root = tmp_path / plant / "image"
        (root / "etc").mkdir(parents=True)
        if plant == "fifo":
            os.mkfifo(root / "etc/nccl.conf")
        else:
            (root / "etc/nccl.conf").symlink_to(outside)
        bundle = bundle_for(tmp_path / plant, full_plan())
        result = subprocess.run(
            [str(bundle / "install.sh"), "--root", str(root)],
            capture_output=True,
            text=True,
            env={"PATH": str(make_bin(tmp_path / plant, {})), "LC_ALL": "C"},
            check=False,
            timeout=60,
        )
        assert result.returncode == 0, result.stdout + result.stderr
        conf = root / "etc/nccl.conf"
        assert not conf.is_symlink()
        assert conf.read_bytes() == (bundle / "rootfs/etc/nccl.conf").read_bytes()
        assert outside.read_bytes() == NDV5_NCCL_CONF


def test_a_unit_directory_link_out_of_the_image_does_not_count(tmp_path: Path) -> None:
    """tuned.service on this host, reached through an absolute /etc/systemd/system link, is not
    the image's: unit lookups resolve their directories inside the root, as writes do."""
    host_units = tmp_path / "host-units"
    host_units.mkdir()
    (host_units / "tuned.service").write_text("[Service]\nExecStart=/bin/true\n")
    needs = tuple(unit for unit in FULL_PLAN_NEEDS if unit != "tuned.service")
    root = image_with(tmp_path / "image", needs, ("nvidia-smi",))
    (root / "etc/systemd").mkdir(parents=True)
    (root / "etc/systemd/system").symlink_to(host_units)
    result = run(
        bundle_for(tmp_path, full_plan()) / "install.sh",
        "--root",
        str(root),
        "--strict",
        path=make_bin(tmp_path, {"systemctl": RECORDING_SYSTEMCTL}),
    )
    assert result.returncode == 1
    assert "lacks what the plan needs: unit tuned.service" in result.stderr


def test_a_unit_file_link_counts_as_present_and_is_not_followed(tmp_path: Path) -> None:
    """A masked or aliased unit is a link (to /dev/null, or to a file elsewhere): present."""
    needs = tuple(unit for unit in FULL_PLAN_NEEDS if unit != "tuned.service")
    root = image_with(tmp_path / "image", needs, ("nvidia-smi",))
    (root / "usr/lib/systemd/system/tuned.service").symlink_to("/nonexistent/tuned.service")
    result = run(
        bundle_for(tmp_path, full_plan()) / "install.sh",
        "--root",
        str(root),
        "--strict",
        path=make_bin(tmp_path, {"systemctl": RECORDING_SYSTEMCTL}),
    )
    assert result.returncode == 0, result.stdout + result.stderr
