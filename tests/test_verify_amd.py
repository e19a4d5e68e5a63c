"""`gen verify` of AMD GPU actions (issue 31): the collector's gpu-amd section, read from the
files amd-smi reads, and the same verdicts as the NVIDIA checks.

On main the collector has no gpu-amd section (its data file is refused as an unknown section),
and a gpu action nvidia-smi cannot read was passed as OK: every test here fails there."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from generator.bundle.read import Bundle
from generator.model.collect_data import whole_sections
from generator.model.setting import Plan, Setting
from generator.model.vendors import GPU_VENDORS, GpuVendor
from generator.render.collector import collect_lines
from generator.verify.live import check_live
from generator.verify.live_state import Live
from generator.verify.run import collector_script
from generator.verify.snapshot import Snapshot, parse_snapshot
from generator.verify.verdicts import Check, Verdict
from tests.detect_trees import Link, build

MI300X = "0000:05:00.0"
WATT = 1_000_000  # power1_cap is in microwatts


def snapshot_of(*records: tuple[str, str, str]) -> Snapshot:
    lines = ["goldtune-snapshot\tbegin\t1", *("\t".join(r) for r in records)]
    return parse_snapshot("\n".join([*lines, "goldtune-snapshot\tend\t1", ""]))


def amd_record(
    address: str = MI300X,
    cap_w: int | str = 600,
    default_w: int | str = 750,
    compute: str = "CPX",
    memory: str = "NPS4",
    driver: str = "amdgpu",
) -> tuple[str, str, str]:
    cap = cap_w * WATT if isinstance(cap_w, int) else cap_w
    default = default_w * WATT if isinstance(default_w, int) else default_w
    fields = f"driver={driver} power1_cap={cap} power1_cap_default={default}"
    fields += f" current_compute_partition={compute} current_memory_partition={memory}"
    return ("gpu-amd", address, fields)


def judged(key: str, value: str, *records: tuple[str, str, str], kind: str = "gpu") -> Check:
    setting = Setting(kind, key, value, "test", "gpu.test")
    bundle = Bundle(Path("."), Plan("x", "y", (setting,)))
    return check_live(setting, Live.of(snapshot_of(*records), bundle))


AMD_MACHINE = (("gpu", "tool", "!absent"), ("gpu-amd", "tool", "ok"))


@pytest.mark.parametrize(
    ("key", "value", "verdict"),
    [
        ("power-limit", "80%", Verdict.OK),  # 600 W of a 750 W default
        ("power-limit", "90%", Verdict.DIFFERS),
        ("power-limit", "600", Verdict.OK),
        ("power-limit", "700", Verdict.DIFFERS),
        ("compute-partition", "CPX", Verdict.OK),
        ("compute-partition", "SPX", Verdict.DIFFERS),
        ("memory-partition", "NPS4", Verdict.OK),
        ("memory-partition", "NPS1", Verdict.DIFFERS),
        ("persistence", "on", Verdict.NOT_JUDGED),  # no reading of it on AMD GPUs: not passed
    ],
)
def test_amd_actions_get_the_nvidia_checks_verdicts(key: str, value: str, verdict: Verdict) -> None:
    records = (*AMD_MACHINE, amd_record(), amd_record("0000:26:00.0"))
    check = judged(key, value, *records)
    assert check.verdict == verdict, check


def test_one_gpu_off_the_plan_fails_the_setting() -> None:
    records = (*AMD_MACHINE, amd_record(), amd_record("0000:26:00.0", compute="SPX"))
    check = judged("compute-partition", "CPX", *records)
    assert check.verdict == Verdict.DIFFERS
    assert check.actual == f"GPU {MI300X}: CPX; GPU 0000:26:00.0: SPX"


def test_gpus_without_partitions_or_driver_or_a_collected_section() -> None:
    no_modes = amd_record(compute="!absent", memory="!absent")
    check = judged("compute-partition", "CPX", *AMD_MACHINE, no_modes)
    assert check.verdict == Verdict.NOT_APPLICABLE
    check = judged("power-limit", "80%", *AMD_MACHINE, amd_record(driver="none"))
    assert check.verdict == Verdict.DIFFERS
    assert "amdgpu is not bound" in check.reason
    check = judged("power-limit", "80%", *AMD_MACHINE, amd_record(default_w="!absent"))
    assert check.verdict == Verdict.DIFFERS
    check = judged("compute-partition", "CPX", ("gpu", "tool", "!absent"))
    assert check.verdict == Verdict.MISSING
    check = judged("compute-partition", "CPX", *AMD_MACHINE)
    assert check.verdict == Verdict.NOT_APPLICABLE


def test_an_action_nvidia_smi_cannot_read_is_not_judged_on_an_nvidia_machine() -> None:
    """On main, gpu_actual's last branch answered True for any action it did not know."""
    row = "0, 00000000:1B:00.0, NVIDIA H100, Enabled, Enabled, Enabled, Default, 700.00, 700.00, "
    records = (("gpu", "tool", "ok"), ("gpu", "0", row + "1980, 1980, Disabled, Disabled"))
    check = judged("perf-determinism", "1900", *records)
    assert check.verdict == Verdict.NOT_JUDGED
    assert judged("power-limit", "700", *records).verdict == Verdict.OK


# --- the collector's data and the collector itself --------------------------------------------


def test_the_data_asks_for_gpu_amd_only_for_amd_actions() -> None:
    nvidia = Plan("x", "y", (Setting("gpu", "power-limit", "90%", "r", "gpu.power"),))
    texts = [line.text for line in collect_lines(nvidia)]
    assert "gpu" in texts and "gpu-amd" not in texts  # an NVIDIA bundle's data as before
    amd = Plan("x", "y", (Setting("gpu", "compute-partition", "CPX", "r", "gpu.partition"),))
    texts = [line.text for line in collect_lines(amd)]
    assert "gpu-amd" in texts and any(t.startswith("gpu-vendor\t") for t in texts)


def fake_amd_sysfs(root: Path) -> None:
    """Two MI300X functions (one with amdgpu bound, its hwmon and partition files), an EPYC
    function of vendor 0x1022, and an NVIDIA GPU the gpu-vendor lines do not name."""
    device = f"sys/devices/pci0000:00/{MI300X}"
    idle = "sys/devices/pci0000:00/0000:26:00.0"
    build(
        root,
        {
            f"{device}/vendor": "0x1002\n",
            f"{device}/class": "0x120000\n",
            f"{device}/driver": Link("../../../bus/pci/drivers/amdgpu"),
            f"{device}/hwmon/hwmon3/power1_cap": f"{600 * WATT}\n",
            f"{device}/hwmon/hwmon3/power1_cap_default": f"{750 * WATT}\n",
            f"{device}/current_compute_partition": "CPX\n",
            f"{device}/current_memory_partition": "NPS4\n",
            f"sys/bus/pci/devices/{MI300X}": Link(f"../../../devices/pci0000:00/{MI300X}"),
            f"{idle}/vendor": "0x1002\n",
            f"{idle}/class": "0x120000\n",
            "sys/bus/pci/devices/0000:26:00.0": Link("../../../devices/pci0000:00/0000:26:00.0"),
            "sys/bus/pci/drivers/amdgpu/bind": "",
            "sys/devices/pci0000:00/0000:00:00.2/vendor": "0x1022\n",
            "sys/devices/pci0000:00/0000:00:00.2/class": "0x080600\n",
            "sys/bus/pci/devices/0000:00:00.2": Link("../../../devices/pci0000:00/0000:00:00.2"),
            "sys/devices/pci0000:00/0000:1b:00.0/vendor": "0x10de\n",
            "sys/devices/pci0000:00/0000:1b:00.0/class": "0x030200\n",
            "sys/bus/pci/devices/0000:1b:00.0": Link("../../../devices/pci0000:00/0000:1b:00.0"),
        },
    )


def run_collect(tmp_path: Path, data: str, with_amd_smi: bool) -> subprocess.CompletedProcess[str]:
    (tmp_path / "collect.conf").write_text(data)
    fake = tmp_path / "bin"
    fake.mkdir(exist_ok=True)
    if with_amd_smi:  # present, and hanging if it were ever run: the collector only looks
        (fake / "amd-smi").write_text("#!/bin/sh\nexec sleep 600\n")
        (fake / "amd-smi").chmod(0o755)
    return subprocess.run(
        ["sh", str(collector_script()), str(tmp_path / "collect.conf")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={
            **os.environ,
            "PATH": f"{fake}:{os.environ['PATH']}",
            "TEST_SYSROOT": str(tmp_path / "root"),
        },
    )


DATA = "tool\tgoldtune\nbundle\tmi300x_training\ngpu-vendor\t0x1002\ngpu-amd\n"


@pytest.mark.parametrize("with_amd_smi", [True, False], ids=["amd-smi", "no-amd-smi"])
def test_the_collector_reads_each_amd_gpu_from_sysfs(tmp_path: Path, with_amd_smi: bool) -> None:
    fake_amd_sysfs(tmp_path / "root")
    result = run_collect(tmp_path, DATA, with_amd_smi)
    assert result.returncode == 0, result.stderr
    snap = parse_snapshot(result.stdout)
    assert snap.value("gpu-amd", "tool") == ("ok" if with_amd_smi else "!absent")
    assert [key for key, _ in snap.section("gpu-amd")] == ["tool", MI300X, "0000:26:00.0"]
    assert snap.value("gpu-amd", MI300X) == (
        f"driver=amdgpu power1_cap={600 * WATT} power1_cap_default={750 * WATT} "
        "current_compute_partition=CPX current_memory_partition=NPS4"
    )
    assert snap.value("gpu-amd", "0000:26:00.0") == (
        "driver=none power1_cap=!absent power1_cap_default=!absent "
        "current_compute_partition=!absent current_memory_partition=!absent"
    )
    setting = Setting("gpu", "power-limit", "80%", "test", "gpu.test")
    check = check_live(setting, Live.of(snap, Bundle(Path("."), Plan("x", "y", (setting,)))))
    assert check.verdict == Verdict.DIFFERS and "0000:26:00.0" in check.actual


def test_gpu_amd_without_a_vendor_line_is_refused(tmp_path: Path) -> None:
    result = run_collect(tmp_path, DATA.replace("gpu-vendor\t0x1002\n", ""), False)
    assert result.returncode == 2 and "without a gpu-vendor line" in result.stderr


def test_the_amd_rows_collector_section_is_the_collectors() -> None:
    """The vendor row's collector_section (generator/model/vendors.py) is a whole section the
    collector reads and verify's data check accepts (tests/test_vendors.py asks it of each row
    once the AMD boot script is there too)."""
    section = GPU_VENDORS[GpuVendor.AMD].collector_section
    assert section in whole_sections()
    assert f"! wanted {section} || collect_gpu_amd" in collector_script().read_text()
