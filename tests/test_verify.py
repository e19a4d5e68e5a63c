"""`gen verify`: hand-made bundles, snapshots and image trees in temporary directories."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from generator.bundle.read import read_bundle
from generator.bundle.write import write_bundle
from generator.errors import InputError
from generator.model.collect_data import check_collect_data
from generator.model.layout import COLLECT_DATA, COLLECT_SCRIPT, in_overlay
from generator.model.setting import Plan, Setting
from generator.render.collector import collect_lines
from generator.render.render import render_bundle
from generator.verify.consumers import parse_cmdline
from generator.verify.live import check_settings
from generator.verify.run import collector_script, run_verify, verify_checks
from generator.verify.snapshot import parse_snapshot
from generator.verify.verdicts import Verdict

OK, DIFFERS, MISSING, NA = Verdict.OK, Verdict.DIFFERS, Verdict.MISSING, Verdict.NOT_APPLICABLE

RULES = (
    '# nvme\nACTION=="add|change", SUBSYSTEM=="block", ENV{DEVTYPE}=="disk", '
    'KERNEL=="nvme[0-9]*n[0-9]*", '
    'ATTR{queue/scheduler}="none"\n'
    'ACTION=="add|change", SUBSYSTEM=="block", ENV{DEVTYPE}=="disk", KERNEL=="sd*", '
    'ATTR{queue/rotational}=="0", '
    'ATTR{queue/scheduler}="mq-deadline"\n'
)


def make_bundle(
    tmp_path: Path,
    settings: list[tuple[str, str, str]],
    files: dict[str, tuple[str, int]] | None = None,
    profile: str = "inference",
) -> Path:
    """A bundle directory: plan.json, the overlay files and a manifest of them."""
    bundle = tmp_path / "bundle"
    bundle.mkdir(exist_ok=True)
    plan = {
        "format": 1,
        "tool": "goldtune",
        "hardware": "test-hw",
        "profile": profile,
        "notes": [],
        "warnings": [],
        "settings": [
            {"kind": k, "key": key, "value": v, "rule": f"test.{k}", "reason": "because"}
            for k, key, v in settings
        ],
    }
    (bundle / "plan.json").write_text(json.dumps(plan))
    manifest = []
    for path, (text, mode) in (files or {}).items():
        target = bundle / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
        manifest.append(
            {
                "path": path,
                "sha256": hashlib.sha256(text.encode()).hexdigest(),
                "mode": f"{mode:04o}",
            }
        )
    (bundle / "manifest.json").write_text(json.dumps({"files": manifest}))
    return bundle


ACS = "goldtune-pcie-acs.service"


def snapshot_text(*records: tuple[str, str, str], noise: bool = False) -> str:
    lines = [
        "goldtune-snapshot\tbegin\t1",
        *("\t".join(r) for r in records),
        "goldtune-snapshot\tend\t1",
    ]
    text = "\r\n".join(lines) + "\r\n"
    return f"[    1.0] kernel booting\r\n{text}[   40.0] reboot: Power down\r\n" if noise else text


def verdicts_for(
    tmp_path: Path,
    settings: list[tuple[str, str, str]],
    *records: tuple[str, str, str],
    files: dict[str, tuple[str, int]] | None = None,
) -> list:
    bundle = read_bundle(make_bundle(tmp_path, settings, files))
    return check_settings(bundle, parse_snapshot(snapshot_text(*records)))


def one(tmp_path: Path, setting: tuple[str, str, str], *records: tuple[str, str, str], files=None):
    [check] = verdicts_for(tmp_path, [setting], *records, files=files)
    return check


def limits_rows(user: str, **rows: tuple[str, str]) -> list[tuple[str, str, str]]:
    names = {"nofile": ("Max open files", "files"), "memlock": ("Max locked memory", "bytes")}
    return [
        ("limits", user, f"{names[item][0]:<25} {soft:<20} {hard:<20} {names[item][1]:<10}")
        for item, (soft, hard) in rows.items()
    ]


# --- the snapshot format -------------------------------------------------------------------


def test_snapshot_is_found_in_a_console_log_with_crlf():
    snap = parse_snapshot(snapshot_text(("sysctl", "vm.swappiness", "1"), noise=True))
    assert snap.value("sysctl", "vm.swappiness") == "1"


def test_last_snapshot_of_several_counts():
    text = snapshot_text(("sysctl", "vm.swappiness", "60")) + snapshot_text(
        ("sysctl", "vm.swappiness", "1")
    )
    assert parse_snapshot(text).value("sysctl", "vm.swappiness") == "1"


@pytest.mark.parametrize(
    "text,needle",
    [
        ("nothing here\n", "no snapshot in it"),
        ("goldtune-snapshot\tbegin\t1\nsysctl\tvm.swappiness\t1\n", "truncated"),
        ("goldtune-snapshot\tbegin\t1\nnot a record\ngoldtune-snapshot\tend\t1\n", "line 2"),
    ],
)
def test_bad_snapshots_are_bad_input(text, needle):
    with pytest.raises(InputError, match=needle):
        parse_snapshot(text, "snap.log")


# --- one table per kind: setting, what the collector saw, verdict ---------------------------

H100_MIG = (
    "0, 00000000:1B:00.0, NVIDIA H100, Enabled, Enabled, Enabled, Default, 700.00, 700.00, "
    "1980, 1980, {mig}, {mig}"
)
CASES = [
    # sysctl: /proc/sys, whitespace as the kernel prints it
    (("sysctl", "vm.swappiness", "1"), [("sysctl", "vm.swappiness", "1")], OK),
    (("sysctl", "vm.swappiness", "1"), [("sysctl", "vm.swappiness", "60")], DIFFERS),
    (("sysctl", "vm.swapiness", "1"), [("sysctl", "vm.swapiness", "!absent")], MISSING),
    (
        ("sysctl", "net.ipv4.tcp_rmem", "4096 87380 536870912"),
        [("sysctl", "net.ipv4.tcp_rmem", "4096 87380  536870912")],
        OK,
    ),
    (("sysctl", "vm.swappiness", "1"), [], MISSING),
    # kernel-arg: /proc/cmdline, then the kernel's own view
    (("kernel-arg", "iommu", "pt"), [("cmdline", "-", "root=/dev/vda iommu=pt")], OK),
    (("kernel-arg", "iommu", "pt"), [("cmdline", "-", "root=/dev/vda")], MISSING),
    (("kernel-arg", "iommu", "pt"), [("cmdline", "-", "iommu=pt iommu=off")], DIFFERS),
    (("kernel-arg", "nosmt", ""), [("cmdline", "-", "ro nosmt")], OK),
    (("kernel-arg", "nvidia-drm.modeset", "1"), [("cmdline", "-", "nvidia_drm.modeset=1")], OK),
    # list arguments: the plan's elements among the image's (install.sh merges them, issue 27)
    (
        ("kernel-arg", "modprobe.blacklist", "nouveau"),
        [("cmdline", "-", "modprobe.blacklist=pcspkr,floppy,nouveau")],
        OK,
    ),
    (
        ("kernel-arg", "modprobe.blacklist", "nouveau"),
        [("cmdline", "-", "modprobe.blacklist=nouveau modprobe.blacklist=pcspkr")],
        OK,  # kmod reads every occurrence
    ),
    (
        ("kernel-arg", "module_blacklist", "nouveau"),
        [("cmdline", "-", "module_blacklist=nouveau module_blacklist=pcspkr")],
        DIFFERS,  # the kernel keeps the last one
    ),
    (
        ("kernel-arg", "rd.driver.blacklist", "nouveau"),
        [("cmdline", "-", "rd.driver.blacklist=pcspkr")],
        DIFFERS,
    ),
    (
        ("kernel-arg", "processor.max_cstate", "1"),
        [("cmdline", "-", "processor.max_cstate=1"), ("modparam", "processor/max_cstate", "8")],
        DIFFERS,
    ),
    (
        ("kernel-arg", "processor.max_cstate", "1"),
        [("cmdline", "-", "processor.max_cstate=1"), ("modparam", "processor/max_cstate", "1")],
        OK,
    ),
    (
        ("kernel-arg", "transparent_hugepage", "madvise"),
        [
            ("cmdline", "-", "transparent_hugepage=madvise"),
            ("sysfs", "/sys/kernel/mm/transparent_hugepage/enabled", "[always] madvise never"),
        ],
        DIFFERS,
    ),
    (
        ("kernel-arg", "bogus_arg", "1"),
        [
            ("cmdline", "-", "bogus_arg=1"),
            (
                "kernel",
                "unknown-params",
                'Unknown kernel command line parameters "bogus_arg=1", will be passed to user '
                "space.",
            ),
        ],
        DIFFERS,
    ),
    # limit: a PAM session of the domain's user; limits.conf memlock is KiB, /proc shows bytes
    (
        ("limit", "* soft nofile", "1048576"),
        limits_rows("nobody", nofile=("1048576", "1048576")),
        OK,
    ),
    (
        ("limit", "* hard nofile", "1048576"),
        limits_rows("nobody", nofile=("1048576", "524288")),
        DIFFERS,
    ),
    (("limit", "* - memlock", "64"), limits_rows("nobody", memlock=("65536", "65536")), OK),
    (
        ("limit", "* hard memlock", "unlimited"),
        limits_rows("nobody", memlock=("65536", "unlimited")),
        OK,
    ),
    (("limit", "@gpu hard nofile", "1048576"), [], NA),
    (("limit", "* hard maxlogins", "4"), [], NA),
    (("limit", "alice hard nofile", "1048576"), [("limits", "alice", "!absent")], NA),
    (("limit", "* hard nofile", "1048576"), [("limits", "nobody", "!unavailable")], NA),
    # systemd-manager: systemctl show, sizes and time spans as the manager prints them
    (
        ("systemd-manager", "DefaultLimitNOFILE", "1048576"),
        [
            ("manager", "DefaultLimitNOFILE", "1048576"),
            ("manager", "DefaultLimitNOFILESoft", "1048576"),
        ],
        OK,
    ),
    (
        ("systemd-manager", "DefaultLimitNOFILE", "524288:1048576"),
        [
            ("manager", "DefaultLimitNOFILE", "1048576"),
            ("manager", "DefaultLimitNOFILESoft", "1024"),
        ],
        DIFFERS,
    ),
    (
        ("systemd-manager", "DefaultLimitMEMLOCK", "64M"),
        [
            ("manager", "DefaultLimitMEMLOCK", "67108864"),
            ("manager", "DefaultLimitMEMLOCKSoft", "67108864"),
        ],
        OK,
    ),
    (
        ("systemd-manager", "DefaultTimeoutStopSec", "90s"),
        [("manager", "DefaultTimeoutStopSec", "1min 30s")],
        OK,
    ),
    (
        ("systemd-manager", "DefaultLimitNOFILE", "1048576"),
        [("manager", "DefaultLimitNOFILE", "!unavailable")],
        NA,
    ),
    # modprobe: modprobe --showconfig and /proc/modules
    (
        ("modprobe", "blacklist nouveau", ""),
        [("module", "nouveau", "available"), ("modprobe-config", "-", "blacklist nouveau")],
        OK,
    ),
    (
        ("modprobe", "blacklist nouveau", ""),
        [("module", "nouveau", "loaded"), ("modprobe-config", "-", "blacklist nouveau")],
        DIFFERS,
    ),
    (("modprobe", "blacklist pcspkr", ""), [("module", "pcspkr", "loaded")], MISSING),
    (
        ("modprobe", "blacklist snd-hda-intel", ""),
        [
            ("module", "snd-hda-intel", "absent"),
            ("modprobe-config", "-", "blacklist snd_hda_intel"),
        ],
        OK,
    ),
    (
        ("modprobe", "options loop max_loop", "42"),
        [
            ("module", "loop", "loaded"),
            ("modprobe-config", "-", "options loop max_loop=42"),
            ("modparam", "loop/max_loop", "42"),
        ],
        OK,
    ),
    (
        ("modprobe", "options loop max_loop", "42"),
        [("module", "loop", "loaded"), ("modprobe-config", "-", "options loop max_loop=8")],
        DIFFERS,
    ),
    (
        ("modprobe", "options loop max_loop", "42"),
        [
            ("module", "loop", "loaded"),
            ("modprobe-config", "-", "options loop max_loop=42"),
            ("modparam", "loop/max_loop", "8"),
        ],
        DIFFERS,
    ),
    # module-load
    (("module-load", "nvidia-peermem", ""), [("module", "nvidia-peermem", "loaded")], OK),
    (("module-load", "loop", ""), [("module", "loop", "builtin")], OK),
    (("module-load", "loop", ""), [("module", "loop", "available")], DIFFERS),
    (("module-load", "nvidia-peermem", ""), [("module", "nvidia-peermem", "absent")], NA),
    # sysfs: globs, [selected] values, absent drivers
    (
        ("sysfs", "/sys/kernel/mm/transparent_hugepage/defrag", "defer+madvise"),
        [
            (
                "sysfs",
                "/sys/kernel/mm/transparent_hugepage/defrag",
                "always defer [defer+madvise] madvise never",
            )
        ],
        OK,
    ),
    (
        ("sysfs", "/sys/devices/system/cpu/cpu*/cpufreq/scaling_governor", "performance"),
        [
            ("sysfs", "/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor", "performance"),
            ("sysfs", "/sys/devices/system/cpu/cpu1/cpufreq/scaling_governor", "powersave"),
        ],
        DIFFERS,
    ),
    (
        ("sysfs", "/sys/devices/system/cpu/cpu*/cpufreq/scaling_governor", "performance"),
        [("sysfs", "/sys/devices/system/cpu/cpu*/cpufreq/scaling_governor", "!absent")],
        NA,
    ),
    # irq
    (("irq", "ib0", "1-3,8"), [("irq", "ib0", "120 1-3,8"), ("irq", "ib0", "121 1,2,3,8")], OK),
    (("irq", "ib0", "1-3"), [("irq", "ib0", "120 1-3"), ("irq", "ib0", "121 0-63")], DIFFERS),
    (("irq", "ib0", "1-3"), [("irq", "ib0", "!absent")], NA),
    # local: one list for every IRQ, within the device's local_cpulist where collected; the
    # round-robin node's NIC on node 0 (the even CPUs) with its IRQs on node 0's CPUs is OK,
    # with them on 0-7 less 0 (what an assumed usual numbering gave) half remote
    (("irq", "ib0", "local"), [("irq", "ib0", "120 2-7"), ("irq", "ib0", "121 2-7")], OK),
    (("irq", "ib0", "local"), [("irq", "ib0", "120 2-7"), ("irq", "ib0", "121 1-7")], DIFFERS),
    (
        ("irq", "ib0", "local"),
        [("irq", "ib0", "local-cpus 0,2,4,6"), ("irq", "ib0", "120 2,4,6")],
        OK,
    ),
    (
        ("irq", "ib0", "local"),
        [("irq", "ib0", "local-cpus 0,2,4,6"), ("irq", "ib0", "120 1-7")],
        DIFFERS,
    ),
    # pcie-acs: judged by the run of its boot unit and what it logged
    (
        ("pcie-acs", "gpus", "off"),
        [
            ("own-unit", ACS, "ActiveState=active"),
            ("own-unit", ACS, "Result=success"),
            ("own-unit-log", ACS, "goldtune-pcie-acs: 6 ports had ACS turned off"),
        ],
        OK,
    ),
    (
        ("pcie-acs", "gpus", "off"),
        [("own-unit", ACS, "ActiveState=failed"), ("own-unit", ACS, "Result=exit-code")],
        DIFFERS,
    ),
    (
        ("pcie-acs", "nic ib0", "off"),
        [
            ("own-unit", ACS, "ActiveState=active"),
            ("own-unit", ACS, "Result=success"),
            ("own-unit-log", ACS, "goldtune-pcie-acs: virtual machine (kvm): ACS is what ..."),
        ],
        NA,
    ),
    (("pcie-acs", "gpus", "off"), [("sysctl", "vm.swappiness", "1")], MISSING),
    # service
    (
        ("service", "irqbalance.service", "disable"),
        [("unit-enabled", "irqbalance.service", "disabled")],
        OK,
    ),
    (
        ("service", "irqbalance.service", "disable"),
        [("unit-enabled", "irqbalance.service", "enabled")],
        DIFFERS,
    ),
    (("service", "cups.service", "disable"), [("unit-enabled", "cups.service", "!absent")], NA),
    (
        ("service", "goldtune-gpu.service", "enable"),
        [("unit-enabled", "goldtune-gpu.service", "enabled")],
        OK,
    ),
    # the MPS unit starts a daemon: enabled but not running is a failure
    (
        ("service", "goldtune-cuda-mps.service", "enable"),
        [
            ("unit-enabled", "goldtune-cuda-mps.service", "enabled"),
            ("unit-active", "goldtune-cuda-mps.service", "active"),
        ],
        OK,
    ),
    (
        ("service", "goldtune-cuda-mps.service", "enable"),
        [
            ("unit-enabled", "goldtune-cuda-mps.service", "enabled"),
            ("unit-active", "goldtune-cuda-mps.service", "inactive"),
        ],
        DIFFERS,
    ),
    (
        ("service", "ctrl-alt-del.target", "mask"),
        [("unit-enabled", "ctrl-alt-del.target", "!absent")],
        MISSING,
    ),
    (
        ("service", "ctrl-alt-del.target", "mask"),
        [("unit-enabled", "ctrl-alt-del.target", "masked")],
        OK,
    ),
    # gpu
    (("gpu", "persistence", "on"), [("gpu", "tool", "!absent")], NA),
    # MIG layout: the live instances, as many of each profile as planned
    *(
        (
            ("gpu", "mig-layout", "3g.40gb,2g.20gb,1g.10gb,1g.10gb"),
            [("gpu", "tool", "ok"), ("gpu", "0", H100_MIG.format(mig="Enabled")), *instances],
            verdict,
        )
        for instances, verdict in (
            ([("gpu-mig", "0", "1g.10gb,3g.40gb,1g.10gb,2g.20gb")], OK),
            ([("gpu-mig", "0", "3g.40gb,2g.20gb,1g.10gb")], DIFFERS),
            ([("gpu-mig", "0", "none")], DIFFERS),
            ([("gpu-mig", "0", "!failed Insufficient Permissions")], DIFFERS),
            ([], DIFFERS),
        )
    ),
    (  # MIG mode still off (a reset pending): not the plan
        ("gpu", "mig-layout", "7g.80gb"),
        [("gpu", "tool", "ok"), ("gpu", "0", H100_MIG.format(mig="Disabled"))],
        DIFFERS,
    ),
    (
        ("gpu", "persistence", "on"),
        [
            ("gpu", "tool", "ok"),
            (
                "gpu",
                "0",
                "0, 00000000:1B:00.0, NVIDIA H100, Enabled, Enabled, Enabled, Default, 700.00, "
                "700.00, 1980, 1980, Disabled, Disabled",
            ),
        ],
        OK,
    ),
    (
        ("gpu", "compute-mode", "EXCLUSIVE_PROCESS"),
        [
            ("gpu", "tool", "ok"),
            (
                "gpu",
                "0",
                "0, 00000000:1B:00.0, NVIDIA H100, Enabled, Enabled, Enabled, Default, 700.00, "
                "700.00, 1980, 1980, Disabled, Disabled",
            ),
        ],
        DIFFERS,
    ),
    (
        ("gpu", "mig", "off"),
        [
            ("gpu", "tool", "ok"),
            (
                "gpu",
                "0",
                "0, 00000000:01:00.0, NVIDIA L4, Enabled, Enabled, Enabled, Default, 72.00, 72.00, "
                "2040, 2040, [N/A], [N/A]",
            ),
        ],
        NA,
    ),
    (
        ("gpu", "power-limit", "90%"),
        [
            ("gpu", "tool", "ok"),
            (
                "gpu",
                "0",
                "0, 00000000:1B:00.0, NVIDIA H100, Enabled, Enabled, Enabled, Default, 630.00, "
                "700.00, 1980, 1980, Disabled, Disabled",
            ),
        ],
        OK,
    ),
]


@pytest.mark.parametrize(
    "setting,records,verdict", CASES, ids=[f"{c[0][0]}-{c[0][1]}-{i}" for i, c in enumerate(CASES)]
)
def test_live_verdicts(tmp_path, setting, records, verdict):
    check = one(tmp_path, setting, *records)
    assert check.verdict == verdict, check
    if verdict == NA:
        assert check.reason, "not applicable always says why"


def test_udev_counts_only_disks_the_bundle_rules_match(tmp_path):
    files = {"rootfs/etc/udev/rules.d/60-goldtune-io-scheduler.rules": (RULES, 0o644)}
    disks = [
        ("block", "vda:queue/scheduler", "[none] mq-deadline"),
        ("block", "vda:queue/rotational", "0"),
        ("block", "sda:queue/scheduler", "[mq-deadline] none"),
        ("block", "sda:queue/rotational", "0"),
        ("block", "sdb:queue/scheduler", "[none] mq-deadline"),
        ("block", "sdb:queue/rotational", "1"),
    ]
    ssd = one(tmp_path, ("udev", "ssd", "mq-deadline"), *disks, files=files)
    assert ssd.verdict == OK and "sda" in ssd.actual and "vda" not in ssd.actual
    nvme = one(tmp_path, ("udev", "nvme", "none"), *disks, files=files)
    assert nvme.verdict == NA and "no nvme disk" in nvme.reason
    wrong = one(
        tmp_path,
        ("udev", "ssd", "mq-deadline"),
        ("block", "sda:queue/scheduler", "mq-deadline [none]"),
        ("block", "sda:queue/rotational", "0"),
        files=files,
    )
    assert wrong.verdict == DIFFERS


TUNED = {"rootfs/etc/tuned/goldtune-inference/tuned.conf": ("[cpu]\ngovernor=performance\n", 0o644)}


@pytest.mark.parametrize(
    "setting,records,verdict",
    [
        (("tuned", "cpu.governor", "performance"), [("tuned", "active", "!absent")], NA),
        (
            ("tuned", "cpu.governor", "performance"),
            [("tuned", "active", "virtual-guest"), ("tuned", "verify", "ok")],
            DIFFERS,
        ),
        (
            ("tuned", "cpu.governor", "performance"),
            [
                ("tuned", "active", "goldtune-inference"),
                ("tuned", "verify", "ok"),
                ("sysfs", "/sys/devices/system/cpu/cpu*/cpufreq/scaling_governor", "!absent"),
            ],
            NA,
        ),
        (
            ("tuned", "sysctl.vm.dirty_ratio", "7"),
            [
                ("tuned", "active", "goldtune-inference"),
                ("tuned", "verify", "ok"),
                ("sysctl", "vm.dirty_ratio", "40"),
            ],
            DIFFERS,
        ),
        (
            ("tuned", "disk.readahead", "4096"),
            [("tuned", "active", "goldtune-inference"), ("tuned", "verify", "ok")],
            OK,
        ),
        (
            ("tuned", "disk.readahead", "4096"),
            [("tuned", "active", "goldtune-inference"), ("tuned", "verify", "failed")],
            DIFFERS,
        ),
        # install.sh layers the bundle's profile last, over the base: merged left to right
        (
            ("tuned", "disk.readahead", "4096"),
            [
                ("tuned", "active", "throughput-performance goldtune-inference"),
                ("tuned", "verify", "ok"),
            ],
            OK,
        ),
        (
            ("tuned", "disk.readahead", "4096"),
            [
                ("tuned", "active", "goldtune-inference throughput-performance"),
                ("tuned", "verify", "ok"),
            ],
            DIFFERS,
        ),
    ],
)
def test_tuned_verdicts(tmp_path, setting, records, verdict):
    assert one(tmp_path, setting, *records, files=TUNED).verdict == verdict


def test_cmdline_parsing_stops_at_init_arguments():
    assert parse_cmdline('a=1 b "c=x y" nvidia-drm.modeset=1 -- d=2') == {
        "a": "1",
        "b": None,
        "c": "x y",
        "nvidia_drm.modeset": "1",
    }


# --- health of the boot ---------------------------------------------------------------------


def health(tmp_path: Path, *records: tuple[str, str, str], files=None) -> list:
    bundle = make_bundle(tmp_path, [], files)
    checks, _ = verify_checks(read_bundle(bundle), None, write_snapshot(tmp_path, *records))
    return checks


def write_snapshot(tmp_path: Path, *records: tuple[str, str, str]) -> Path:
    path = tmp_path / "snapshot.log"
    path.write_text(snapshot_text(*records, noise=True))
    return path


def test_a_clean_boot_is_healthy(tmp_path):
    checks = health(
        tmp_path,
        ("system", "state", "running"),
        ("journal", "-", "[ 0.05] guest kernel: tsc: Unable to calibrate against PIT"),
        ("own-unit", "goldtune-gpu.service", "UnitFileState=enabled"),
        ("own-unit", "goldtune-gpu.service", "Result=success"),
        ("own-unit", "goldtune-gpu.service", "ActiveState=active"),
        ("own-unit", "goldtune-gpu.service", "InactiveExitTimestampMonotonic=23011921"),
        ("own-unit", "goldtune-gpu.service", "ActiveEnterTimestampMonotonic=23996878"),
        (
            "own-unit-log",
            "goldtune-gpu.service",
            "goldtune-gpu: nvidia-smi not found; nothing to do",
        ),
    )
    assert all(c.verdict == OK for c in checks), checks
    unit = next(c for c in checks if c.kind == "unit")
    assert "0.98 s" in unit.actual and "nothing to do" in unit.reason


@pytest.mark.parametrize(
    "record,kind",
    [
        (("system", "state", "degraded"), "system"),
        (("system", "failed-unit", "systemd-modules-load.service"), "system"),
        (
            (
                "journal",
                "-",
                "[ 9.1] guest systemd-sysctl[201]: Couldn't write 'off' to "
                "'kernel/numa_balancing': Invalid argument",
            ),
            "journal",
        ),
        (
            (
                "journal",
                "-",
                "[ 9.1] guest systemd[1]: /etc/systemd/system.conf.d/90-goldtune.conf:3: Unknown "
                "key 'DefaultLimitMEMLOK' in section [Manager], ignoring.",
            ),
            "journal",
        ),
        (
            (
                "journal",
                "-",
                "[ 9.1] guest runuser[300]: pam_limits(runuser:session): unknown limit item "
                "'memlok'",
            ),
            "journal",
        ),
        (
            (
                "journal",
                "-",
                "[ 9.1] guest kernel: loop: `notanumber' invalid for parameter `max_loop'",
            ),
            "journal",
        ),
        (
            (
                "journal",
                "-",
                "[ 9.1] guest (udev-worker)[150]: sda: /etc/udev/rules.d/60-x.rules:2 Failed to "
                "write ATTR{/sys/.../queue/scheduler}, ignoring: Invalid argument",
            ),
            "journal",
        ),
        (
            (
                "modprobe-error",
                "-",
                "libkmod: ERROR: /etc/modprobe.d/x.conf line 1: ignoring bad line starting with "
                "'blacklst'",
            ),
            "journal",
        ),
        (("own-unit", "goldtune-irq-affinity.service", "Result=exit-code"), "unit"),
    ],
)
def test_an_unhealthy_boot_fails(tmp_path, record, kind):
    checks = health(tmp_path, ("system", "state", "running"), record)
    assert any(c.kind == kind and c.verdict == DIFFERS for c in checks), checks


def test_installed_files_are_compared_with_the_manifest(tmp_path):
    files = {
        "rootfs/etc/sysctl.d/90-goldtune.conf": ("vm.swappiness = 1\n", 0o644),
        "rootfs/usr/lib/goldtune/gpu-setup": ("#!/bin/sh\n", 0o755),
    }
    digest = hashlib.sha256(b"vm.swappiness = 1\n").hexdigest()
    checks = health(
        tmp_path,
        ("file", "/etc/sysctl.d/90-goldtune.conf", f"{digest} 644"),
        ("file", "/usr/lib/goldtune/gpu-setup", f"{digest} 755"),
        files=files,
    )
    by_key = {c.key: c.verdict for c in checks if c.kind == "file"}
    assert by_key == {
        "/etc/sysctl.d/90-goldtune.conf": OK,
        "/usr/lib/goldtune/gpu-setup": DIFFERS,
    }


def test_the_collector_need_not_be_on_the_machine_but_tuning_files_must(tmp_path):
    """The collector and its data are verify-side tooling (cloud-init leaves them out): absent,
    not-applicable; installed but not the bundle's, differs; a tuning file absent, missing."""
    tuning = "rootfs/etc/sysctl.d/90-goldtune.conf"
    files = {
        tuning: ("vm.swappiness = 1\n", 0o644),
        in_overlay(COLLECT_SCRIPT): ("#!/bin/sh\n", 0o755),
        in_overlay(COLLECT_DATA): ("tool goldtune\n", 0o644),
    }
    wrong = hashlib.sha256(b"stale\n").hexdigest()
    checks = health(tmp_path, ("file", COLLECT_DATA, f"{wrong} 644"), files=files)
    by_key = {c.key: c for c in checks if c.kind == "file"}
    assert by_key["/etc/sysctl.d/90-goldtune.conf"].verdict == MISSING
    assert by_key[COLLECT_SCRIPT].verdict == NA
    assert "verify-side tooling" in by_key[COLLECT_SCRIPT].reason
    assert by_key[COLLECT_DATA].verdict == DIFFERS


# --- the command: report, JSON, exit status -------------------------------------------------


def test_exit_0_and_a_table_when_everything_applicable_is_ok(tmp_path, capsys):
    bundle = make_bundle(tmp_path, [("sysctl", "vm.swappiness", "1"), ("gpu", "persistence", "on")])
    snap = write_snapshot(tmp_path, ("sysctl", "vm.swappiness", "1"), ("gpu", "tool", "!absent"))
    assert run_verify(bundle, snapshot=snap) == 0
    out = capsys.readouterr().out
    assert (
        "VERDICT" in out
        and "not-applicable" in out
        and "1 ok, 0 differ, 0 missing, 1 not applicable" in out
    )


def test_exit_1_and_json_when_something_differs(tmp_path, capsys):
    bundle = make_bundle(tmp_path, [("sysctl", "vm.swappiness", "1")])
    snap = write_snapshot(tmp_path, ("sysctl", "vm.swappiness", "60"))
    assert run_verify(bundle, snapshot=snap, as_json=True) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["status"] == "differs" and data["summary"]["differs"] == 1
    assert data["checks"][0] == {
        "kind": "sysctl",
        "key": "vm.swappiness",
        "expected": "1",
        "actual": "60",
        "verdict": "differs",
        "reason": "",
        "rule": "test.sysctl",
    }


@pytest.mark.parametrize(
    "prepare,needle",
    [
        (lambda b: (b / "plan.json").unlink(), "not a goldtune bundle: no plan.json"),
        (lambda b: (b / "plan.json").write_text("{"), "unreadable plan.json"),
        (
            lambda b: (b / "plan.json").write_text(
                '{"format": 1, "tool": "goldtune", "settings": [{"kind": "sysctl", '
                '"key": 1, "value": "1", "rule": "r", "reason": "r"}]}'
            ),
            "'key' missing or not a string",
        ),
        (
            lambda b: (b / "plan.json").write_text(
                '{"format": 1, "tool": "goldtune", "settings": [{"kind": "nosuch"}]}'
            ),
            "unknown setting kind",
        ),
        (lambda b: (b / "plan.json").write_text('{"settings": []}'), "not a goldtune plan"),
        (lambda b: (b / "manifest.json").write_text('{"files": [{"path": "x"}]}'), "files[0]"),
        # hostile bundles (issue 11, items 6 and 7): each was a traceback or a hang
        (
            lambda b: (b / "plan.json").write_text("[" * 100_000 + "]" * 100_000),
            "nested too deeply",
        ),
        (
            lambda b: (b / "plan.json").write_text('{"format": ' + "9" * 5000 + "}"),
            "numbers too long",
        ),
        (
            lambda b: (b / "plan.json").write_text(
                '{"format": 1, "tool": "goldtune", "settings": [], "notes": ["x"]}'
            ),
            "'notes' is not a list of objects",
        ),
        (
            lambda b: (b / "plan.json").write_text(
                '{"format": 1, "tool": "goldtune", "settings": [1]}'
            ),
            "'settings' is not a list of objects",
        ),
        (lambda b: (b / "manifest.json").write_text("[" * 100_000), "nested too deeply"),
        (lambda b: (b / "manifest.json").write_text('["files"]'), "a manifest has a list of files"),
        (
            lambda b: ((b / "plan.json").unlink(), os.mkfifo(b / "plan.json")),
            "plan.json: is a FIFO",
        ),
        (
            lambda b: ((b / "plan.json").unlink(), (b / "plan.json").symlink_to("/etc/hostname")),
            "symbolic link",
        ),
    ],
)
def test_bad_bundles_are_bad_input(tmp_path, prepare, needle):
    bundle = make_bundle(tmp_path, [])
    prepare(bundle)
    with pytest.raises(InputError, match=needle.replace("[", r"\[").replace("]", r"\]")) as error:
        run_verify(bundle, snapshot=write_snapshot(tmp_path))
    assert error.value.exit_code == 2


def test_root_and_snapshot_exclude_each_other(tmp_path):
    with pytest.raises(InputError, match="exclude each other"):
        run_verify(make_bundle(tmp_path, []), root=tmp_path, snapshot=tmp_path / "s")


def test_missing_snapshot_file_is_bad_input(tmp_path):
    with pytest.raises(InputError, match="no such file"):
        run_verify(make_bundle(tmp_path, []), snapshot=tmp_path / "nosuch.log")


# --- the collector ---------------------------------------------------------------------------

SAMPLE_PLAN = Plan(
    "test-hw",
    "inference",
    (
        Setting("sysctl", "vm.swappiness", "1", "r"),
        Setting("kernel-arg", "processor.max_cstate", "1", "r"),
        Setting("limit", "* hard nofile", "1048576", "r"),
        Setting("systemd-manager", "DefaultLimitNOFILE", "1048576", "r"),
        Setting("modprobe", "blacklist nouveau", "", "r"),
        Setting("module-load", "loop", "", "r"),
        Setting(
            "sysfs", "/sys/devices/system/cpu/cpu*/cpufreq/scaling_governor", "performance", "r"
        ),
        Setting("udev", "nvme", "none", "r"),
        Setting("tuned", "cpu.governor", "performance", "r"),
        Setting("gpu", "persistence", "on", "r"),
        Setting("irq", "ib0", "1-3", "r"),
        Setting("service", "irqbalance.service", "disable", "r"),
    ),
)


def collect_data(plan: Plan) -> str:
    return render_bundle(plan)[in_overlay(COLLECT_DATA)][0].decode()


def run_collector(tmp_path: Path, data: str) -> subprocess.CompletedProcess[str]:
    data_file = tmp_path / "collect.conf"
    data_file.write_text(data)
    return subprocess.run(
        ["sh", str(collector_script()), str(data_file)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_collector_runs_here_and_its_output_parses(tmp_path):
    result = run_collector(tmp_path, collect_data(SAMPLE_PLAN))
    snap = parse_snapshot(result.stdout)
    assert snap.value("meta", "kernel") == os.uname().release
    assert snap.value("meta", "bundle") == "test-hw_inference"
    assert (
        snap.value("sysctl", "vm.swappiness") == Path("/proc/sys/vm/swappiness").read_text().strip()
    )
    assert snap.value("cmdline", "-") is not None
    assert snap.values("irq", "ib0") == ["!absent"]
    assert snap.value("module", "loop") in {"loaded", "builtin", "available", "absent"}


def test_collector_reads_only_what_its_data_names(tmp_path):
    result = run_collector(tmp_path, collect_data(Plan("empty", "none", ())))
    snap = parse_snapshot(result.stdout)
    assert not snap.has("sysctl") and not snap.has("irq") and not snap.has("gpu")
    assert snap.has("sysfs")  # the effect paths are always read


@pytest.mark.parametrize(
    "line",
    [
        "sysctl\tvm.swappiness'; reboot; '",
        "sysctl\t$(reboot)",
        "reboot",
        "sysctl",
        "block\tx",
        "sysctl\ta b",
        "gpu-vendor\t10de",
        "gpu-vendor\t0x10DE",
    ],
)
def test_collector_refuses_bad_data_before_printing_anything(tmp_path, line):
    data = collect_data(SAMPLE_PLAN) + line + "\n"
    result = run_collector(tmp_path, data)
    assert result.returncode == 2
    assert result.stdout == ""
    assert "nothing collected" in result.stderr
    with pytest.raises(InputError):
        check_collect_data(data, "collect.conf")


def test_collector_refuses_gpus_to_look_for_without_a_vendor_id(tmp_path):
    """The gpu section counts GPUs on the PCI bus by the data's gpu-vendor ids (issue 25)."""
    data = collect_data(Plan("x", "y", (Setting("gpu", "persistence", "on", "r"),)))
    assert "\ngpu-vendor\t0x10de\n" in data
    data = data.replace("gpu-vendor\t0x10de\n", "")
    result = run_collector(tmp_path, data)
    assert result.returncode == 2 and result.stdout == ""
    assert "acs gpus or gpu without a gpu-vendor line" in result.stderr
    with pytest.raises(InputError, match="without a gpu-vendor line"):
        check_collect_data(data, "collect.conf")


def test_collector_data_refuses_words_that_are_not_plain():
    plan = Plan("x", "y", (Setting("sysctl", "vm.swappiness'; reboot; '", "1", "r"),))
    with pytest.raises(InputError, match="cannot be passed to the collector"):
        collect_lines(plan)


def test_live_verify_runs_the_packaged_collector_with_the_bundle_data(tmp_path, capsys):
    bundle = write_bundle(render_bundle(SAMPLE_PLAN), tmp_path / "bundle")
    marker = tmp_path / "the-bundle-script-ran"
    script = bundle / in_overlay(COLLECT_SCRIPT)
    script.write_text(f"#!/bin/sh\ntouch {marker}\n")
    manifest = json.loads((bundle / "manifest.json").read_text())
    for entry in manifest["files"]:  # a bundle made so: its manifest matches the script
        if entry["path"] == in_overlay(COLLECT_SCRIPT):
            entry["sha256"] = hashlib.sha256(script.read_bytes()).hexdigest()
    (bundle / "manifest.json").write_text(json.dumps(manifest))
    status = run_verify(bundle, as_json=True)
    assert not marker.exists()
    report = json.loads(capsys.readouterr().out)
    assert status in (0, 1)
    assert report["source"] == "live" and report["kernel"] == os.uname().release
    assert any(c["kind"] == "sysctl" and c["key"] == "vm.swappiness" for c in report["checks"])


def test_live_verify_refuses_forged_collector_data(tmp_path):
    bundle = write_bundle(render_bundle(SAMPLE_PLAN), tmp_path / "bundle")
    data = bundle / in_overlay(COLLECT_DATA)
    data.write_text(data.read_text() + "sysctl\t$(reboot)\n")
    with pytest.raises(InputError, match="does not match the bundle's manifest"):
        run_verify(bundle)


# --- --root: a mounted image -----------------------------------------------------------------


def image_tree(root: Path, files: dict[str, str], links: dict[str, str] | None = None) -> Path:
    for path, text in files.items():
        target = root / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    for path, target_path in (links or {}).items():
        link = root / path.lstrip("/")
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(target_path)
    return root


ROOT_SETTINGS = [
    ("sysctl", "vm.swappiness", "1"),
    ("kernel-arg", "iommu", "pt"),
    ("limit", "* - nofile", "1048576"),
    ("systemd-manager", "DefaultLimitNOFILE", "1048576"),
    ("modprobe", "blacklist nouveau", ""),
    ("modprobe", "options nouveau modeset", "0"),
    ("module-load", "tcp_bbr", ""),
    ("sysfs", "/sys/kernel/mm/transparent_hugepage/defrag", "defer+madvise"),
    ("udev", "nvme", "none"),
    ("tuned", "cpu.governor", "performance"),
    ("gpu", "persistence", "on"),
    ("service", "goldtune-gpu.service", "enable"),
    ("service", "irqbalance.service", "disable"),
    ("service", "cups.service", "disable"),
    ("service", "ctrl-alt-del.target", "mask"),
]
ROOT_FILES = {
    "/etc/sysctl.d/90-goldtune.conf": "vm.swappiness = 1\n",
    "/etc/default/grub.d/90-goldtune.cfg": (
        'GRUB_CMDLINE_LINUX_DEFAULT="${GRUB_CMDLINE_LINUX_DEFAULT:+$GRUB_CMDLINE_LINUX_DEFAULT }'
        'iommu=pt"\n'
    ),
    "/etc/security/limits.d/90-goldtune.conf": "*  -  nofile  1048576\n",
    "/etc/systemd/system.conf.d/90-goldtune.conf": "[Manager]\nDefaultLimitNOFILE=1048576\n",
    "/etc/modprobe.d/90-goldtune.conf": "blacklist nouveau\noptions nouveau modeset=0\n",
    "/etc/modules-load.d/90-goldtune.conf": "tcp_bbr\n",
    "/etc/tmpfiles.d/90-goldtune.conf": (
        "w /sys/kernel/mm/transparent_hugepage/defrag - - - - defer+madvise\n"
    ),
    "/etc/udev/rules.d/60-goldtune-io-scheduler.rules": RULES,
    "/etc/tuned/goldtune-inference/tuned.conf": "[cpu]\ngovernor=performance\n",
    "/etc/tuned/active_profile": "goldtune-inference\n",
    "/usr/lib/tuned/functions": "",
    "/etc/systemd/system/goldtune-gpu.service": (
        "[Service]\nExecStart=/bin/true\n[Install]\nWantedBy=multi-user.target\n"
    ),
    "/usr/lib/systemd/system/irqbalance.service": "[Service]\nExecStart=/usr/sbin/irqbalance\n",
}
ROOT_LINKS = {
    "/etc/systemd/system/multi-user.target.wants/goldtune-gpu.service": (
        "/etc/systemd/system/goldtune-gpu.service"
    ),
    "/etc/systemd/system/ctrl-alt-del.target": "/dev/null",
    "/lib": "usr/lib",
}


def root_verdicts(
    tmp_path: Path, files: dict[str, str], links: dict[str, str]
) -> dict[tuple[str, str], Verdict]:
    overlay = {
        f"rootfs{path}": (text, 0o644) for path, text in ROOT_FILES.items() if "goldtune" in path
    }
    bundle = make_bundle(tmp_path, ROOT_SETTINGS, overlay)
    root = image_tree(tmp_path / "image", files, links)
    checks, _ = verify_checks(read_bundle(bundle), root, None)
    return {(c.kind, c.key): c.verdict for c in checks}


def test_root_of_a_good_image(tmp_path, capsys):
    verdicts = root_verdicts(tmp_path, ROOT_FILES, ROOT_LINKS)
    assert verdicts.pop(("service", "cups.service")) == NA
    assert all(v == OK for v in verdicts.values()), verdicts
    assert run_verify(tmp_path / "bundle", root=tmp_path / "image") == 0


def test_root_finds_what_overrides_or_is_missing(tmp_path):
    files = dict(ROOT_FILES)
    files["/etc/sysctl.d/99-local.conf"] = "vm.swappiness=60\n"  # read after ours: wins at boot
    files["/etc/default/grub.d/99-local.cfg"] = (
        'GRUB_CMDLINE_LINUX_DEFAULT="quiet"\n'  # drops our argument
    )
    files["/etc/tuned/active_profile"] = "virtual-guest\n"
    files["/etc/systemd/system.conf.d/90-goldtune.conf"] = "[Manager]\nDefaultLimitNOFILE=65536\n"
    files["/boot/grub/grub.cfg"] = "menuentry x {\n  linux /vmlinuz root=/dev/sda ro quiet\n}\n"
    del files["/etc/modules-load.d/90-goldtune.conf"]
    links = dict(ROOT_LINKS)
    del links["/etc/systemd/system/ctrl-alt-del.target"]
    links["/etc/systemd/system/multi-user.target.wants/irqbalance.service"] = (
        "/lib/systemd/system/irqbalance.service"
    )
    verdicts = root_verdicts(tmp_path, files, links)
    assert verdicts[("sysctl", "vm.swappiness")] == DIFFERS
    assert verdicts[("kernel-arg", "iommu")] == MISSING
    assert verdicts[("tuned", "cpu.governor")] == DIFFERS
    assert verdicts[("systemd-manager", "DefaultLimitNOFILE")] == DIFFERS
    assert verdicts[("module-load", "tcp_bbr")] == MISSING
    assert verdicts[("service", "irqbalance.service")] == DIFFERS
    assert verdicts[("service", "ctrl-alt-del.target")] == MISSING
    assert verdicts[("file", "/etc/systemd/system.conf.d/90-goldtune.conf")] == DIFFERS
    assert verdicts[("file", "/etc/modules-load.d/90-goldtune.conf")] == MISSING


def test_root_a_required_unit_the_image_lacks_names_the_contract_and_its_package(tmp_path):
    """The build host has no GPU to tell a GPU image by: install.list's require lines
    (install.sh --strict) are the image-side contract, and the reason says so."""
    from generator.bundle.read import Bundle
    from generator.verify.image import Image, check_service

    fabric = Setting("service", "nvidia-fabricmanager.service", "enable", "r", "gpu.fabric")
    dcgm = Setting("service", "nvidia-dcgm.service", "enable", "r", "gpu.dcgm", optional=True)
    bundle = Bundle(tmp_path, Plan("x", "y", (fabric, dcgm), distro="ubuntu-22.04"))
    image = Image(image_tree(tmp_path / "image", {"/etc/hostname": "x\n"}))
    absent = check_service(fabric, image, bundle)
    assert absent.verdict == NA, absent
    assert "install.list require line" in absent.reason, absent.reason
    assert "nvidia-fabricmanager-580 580.178.04" in absent.reason, absent.reason
    optional = check_service(dcgm, image, bundle)
    assert optional.verdict == NA and "optional" in optional.reason, optional
    unit = "/usr/lib/systemd/system/nvidia-fabricmanager.service"
    wants = "/etc/systemd/system/multi-user.target.wants/nvidia-fabricmanager.service"
    image = Image(image_tree(tmp_path / "image2", {unit: "[Service]\n"}, {wants: unit}))
    assert check_service(fabric, image, bundle).verdict == OK


def test_root_without_the_collector_verifies_and_a_missing_tuning_file_fails(tmp_path):
    """As a cloud-init first boot leaves a machine: no collector (verify-side tooling)."""
    overlay = {f"rootfs{path}": (text, 0o644) for path, text in ROOT_FILES.items()}
    overlay[in_overlay(COLLECT_SCRIPT)] = ("#!/bin/sh\n", 0o644)

    def file_verdicts(name: str, files: dict[str, str]) -> dict[str, Verdict]:
        (tmp_path / name).mkdir()
        bundle = make_bundle(tmp_path / name, ROOT_SETTINGS, overlay)
        root = image_tree(tmp_path / name / "image", files, ROOT_LINKS)
        checks, _ = verify_checks(read_bundle(bundle), root, None)
        return {c.key: c.verdict for c in checks if c.kind == "file"}

    assert file_verdicts("without", ROOT_FILES)[COLLECT_SCRIPT] == NA
    assert (
        file_verdicts("stale", {**ROOT_FILES, COLLECT_SCRIPT: "old\n"})[COLLECT_SCRIPT] == DIFFERS
    )
    tuning = "/etc/sysctl.d/90-goldtune.conf"
    lacking = {path: text for path, text in ROOT_FILES.items() if path != tuning}
    assert file_verdicts("lacking", lacking)[tuning] == MISSING


def test_root_reads_grub_cfg_when_the_image_has_one(tmp_path):
    files = dict(ROOT_FILES)
    files["/boot/grub/grub.cfg"] = "menuentry x {\n  linux /vmlinuz root=/dev/sda ro quiet\n}\n"
    assert root_verdicts(tmp_path, files, ROOT_LINKS)[("kernel-arg", "iommu")] == DIFFERS
    files["/boot/grub/grub.cfg"] = (
        "menuentry x {\n  linux /vmlinuz root=/dev/sda ro quiet iommu=pt\n}\n"
    )
    shutil.rmtree(tmp_path / "image")
    assert root_verdicts(tmp_path, files, ROOT_LINKS)[("kernel-arg", "iommu")] == OK


def test_absolute_links_in_the_image_stay_in_the_image(tmp_path):
    files = dict(ROOT_FILES)
    del files["/etc/sysctl.d/90-goldtune.conf"]
    files["/usr/share/goldtune/sysctl.conf"] = "vm.swappiness = 1\n"
    links = dict(ROOT_LINKS)
    links["/etc/sysctl.d/90-goldtune.conf"] = "/usr/share/goldtune/sysctl.conf"
    links["/etc/sysctl.d/50-host.conf"] = "/etc/hostname"  # resolved on the host it would be read
    verdicts = root_verdicts(tmp_path, files, links)
    assert verdicts[("sysctl", "vm.swappiness")] == OK
    assert (
        verdicts[("file", "/etc/sysctl.d/90-goldtune.conf")] == MISSING
    )  # a link, not the bundle's file


def test_root_knows_a_module_the_image_does_not_have(tmp_path):
    files = dict(ROOT_FILES)
    files["/usr/lib/modules/6.1.0-50-amd64/modules.dep"] = "kernel/drivers/block/loop.ko.xz:\n"
    files["/usr/lib/modules/6.1.0-50-amd64/modules.builtin"] = "kernel/fs/ext4/ext4.ko\n"
    assert root_verdicts(tmp_path, files, ROOT_LINKS)[("module-load", "tcp_bbr")] == DIFFERS
    shutil.rmtree(tmp_path / "image")
    files["/usr/lib/modules/6.1.0-50-amd64/modules.dep"] += "kernel/net/ipv4/tcp_bbr.ko.xz:\n"
    assert root_verdicts(tmp_path, files, ROOT_LINKS)[("module-load", "tcp_bbr")] == OK


def test_root_driver_module_is_loaded_by_the_gpu_unit(tmp_path):
    """nvidia-* modules come with the driver: the GPU script loads them, not modules-load.d."""
    data = "# gpu.peermem: rdma\nmodule\tnvidia-peermem\n"
    settings = [("module-load", "nvidia-peermem", "")]
    bundle = make_bundle(tmp_path, settings, {})
    good = image_tree(tmp_path / "good", {"/etc/goldtune/gpu.conf": data}, {})
    bad = image_tree(tmp_path / "bad", {"/etc/goldtune/gpu.conf": "# nothing\n"}, {})
    verdict = {
        name: verify_checks(read_bundle(bundle), root, None)[0]
        for name, root in (("good", good), ("bad", bad))
    }
    pick = lambda checks: next(c.verdict for c in checks if c.kind == "module-load")  # noqa: E731
    assert pick(verdict["good"]) == OK
    assert pick(verdict["bad"]) == MISSING


# A RHEL 9 image: GRUB_ENABLE_BLSCFG=true and BLS entries; grub2-mkconfig reads neither the
# Debian drop-in nor writes GRUB_CMDLINE_LINUX into the entries (hardware_db/distros/rhel-9.yaml).
BLS_ENTRY = "/boot/loader/entries/0123-5.14.0-427.el9.x86_64.conf"
RHEL_FILES = {
    "/etc/default/grub": 'GRUB_CMDLINE_LINUX="rhgb quiet"\nGRUB_ENABLE_BLSCFG=true\n',
    BLS_ENTRY: "title RHEL\nlinux /vmlinuz-5.14.0-427.el9.x86_64\noptions root=/dev/vda3 ro\n",
}


def bls_arg_verdict(tmp_path: Path, files: dict[str, str]) -> tuple[Verdict, str]:
    bundle = make_bundle(tmp_path, [("kernel-arg", "iommu", "pt")], {})
    root = image_tree(tmp_path / "image", {**ROOT_FILES, **files}, ROOT_LINKS)
    checks, _ = verify_checks(read_bundle(bundle), root, None)
    found = next(c for c in checks if c.kind == "kernel-arg")
    return found.verdict, found.actual


def test_a_bls_image_does_not_read_the_debian_drop_in(tmp_path):
    """The drop-in sets iommu=pt, but RHEL boots from the entries, which lack it."""
    assert bls_arg_verdict(tmp_path, RHEL_FILES) == (MISSING, f"absent ({BLS_ENTRY})")


@pytest.mark.parametrize(
    ("changes", "verdict"),
    [
        ({"/etc/kernel/cmdline": "root=/dev/vda3 ro iommu=pt\n"}, OK),
        ({}, DIFFERS),  # no /etc/kernel/cmdline: kernels installed later lack it
        ({"/etc/kernel/cmdline": "root=/dev/vda3 ro\n"}, MISSING),
        (
            {"/etc/kernel/cmdline": "iommu=pt", "/boot/grub2/grub.cfg": "linux /v root=/dev/vda3"},
            MISSING,
        ),
        ({"/etc/kernel/cmdline": "iommu=pt", BLS_ENTRY: "options iommu=off"}, DIFFERS),
        ({BLS_ENTRY: "options $kernelopts iommu=pt"}, Verdict.NOT_JUDGED),
    ],
)
def test_a_bls_image_is_judged_by_its_entries_and_kernel_cmdline(tmp_path, changes, verdict):
    files = {**RHEL_FILES, BLS_ENTRY: RHEL_FILES[BLS_ENTRY] + "options iommu=pt\n"}
    assert bls_arg_verdict(tmp_path, {**files, **changes})[0] == verdict


def test_grub_enable_blscfg_without_entries_is_missing(tmp_path):
    files = {"/etc/default/grub": "GRUB_ENABLE_BLSCFG=true\n"}
    assert bls_arg_verdict(tmp_path, files) == (MISSING, "no BLS entry")


def test_a_once_unit_skipped_on_its_condition_is_healthy(tmp_path):
    """Issue 27: goldtune-update-grub.service runs once at first boot, then its marker keeps it
    from starting (ConditionPathExists=!...). Every later boot systemd skips it on the condition:
    that is no failure (on main: "enabled, but it did not run"). An enabled unit that was never
    started has ConditionResult=no too, but no condition timestamp: still a failure."""
    unit = "goldtune-update-grub.service"
    base = (
        ("system", "state", "running"),
        ("own-unit", unit, "UnitFileState=enabled"),
        ("own-unit", unit, "ActiveState=inactive"),
        ("own-unit", unit, "Result=success"),
        ("own-unit", unit, "ConditionResult=no"),
        ("own-unit", unit, "InactiveExitTimestampMonotonic=0"),
    )
    skipped = health(tmp_path, *base, ("own-unit", unit, "ConditionTimestampMonotonic=9120345"))
    (check,) = [c for c in skipped if c.kind == "unit"]
    assert check.verdict == OK and "condition" in check.reason, check
    never = health(tmp_path, *base, ("own-unit", unit, "ConditionTimestampMonotonic=0"))
    (check,) = [c for c in never if c.kind == "unit"]
    assert check.verdict == DIFFERS and "did not run" in check.reason, check
