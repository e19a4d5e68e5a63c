"""gpu-setup-amd (issue 31): the AMD Instinct boot script, run against a recording ``amd-smi`` and a
fake /sys tree of GPUs bound to amdgpu (TEST_SYSROOT), and from a rendered AMD bundle.

Every test here fails on main, which has no gpu-setup-amd."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from generate import generate
from rules.helpers import profile
from test_install import make_bin

from generator.inputs.load import load_inputs
from generator.model import layout
from generator.model.layout import in_overlay
from generator.paths import templates_dir
from generator.plan.build import build_plan
from generator.render.render import render_bundle

SCRIPT = templates_dir() / layout.SCRIPTS_DIR / "gpu-setup-amd"

# Every amd-smi call is recorded in $STUB_LOG, then sleeps $FAKE_SLEEP seconds when set (a
# wedged driver); it changes nothing in the fake tree.
RECORDING_SMI = """\
printf '%s\\n' "$*" >>"$STUB_LOG"
[ -z "${FAKE_SLEEP:-}" ] || exec sleep "$FAKE_SLEEP"
exit 0
"""
MI300X = {
    "current_compute_partition": "SPX",
    "available_compute_partition": "SPX, DPX, QPX, CPX",
    "current_memory_partition": "NPS1",
    "available_memory_partition": "NPS1, NPS4",
}
WATTS = 1_000_000  # hwmon power files are in microwatts


def amd_gpu(root: Path, bdf: str, files: dict[str, str], power: tuple[int, int, int]) -> None:
    """A PCI function bound to amdgpu, with its partition files and hwmon power1_cap_*."""
    device = root / "sys" / "bus" / "pci" / "drivers" / "amdgpu" / bdf
    hwmon = device / "hwmon" / "hwmon3"
    hwmon.mkdir(parents=True)
    for name, text in files.items():
        (device / name).write_text(text + "\n")
    default, low, high = power
    for name, watts in (("default", default), ("min", low), ("max", high)):
        (hwmon / f"power1_cap_{name}").write_text(f"{watts * WATTS}\n")


def run_setup(
    tmp_path: Path, data: str, gpus: int = 2, smi: bool = True, **env: str
) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    root = tmp_path / "root"
    for index in range(gpus):
        amd_gpu(root, f"0000:{0x05 + index * 0x20:02x}:00.0", MI300X, (750, 400, 750))
    root.mkdir(parents=True, exist_ok=True)
    (tmp_path / "gpu.conf").write_text(f"log-as\tgt-gpu\n{data}")
    log = tmp_path / "smi.log"
    log.touch()
    path = make_bin(tmp_path, {"amd-smi": RECORDING_SMI} if smi else {})
    for tool in ("timeout", "date", "sleep"):
        if not (path / tool).exists():
            (path / tool).symlink_to(shutil.which(tool) or f"/bin/{tool}")
    result = subprocess.run(
        [str(SCRIPT), str(tmp_path / "gpu.conf")],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
        env={
            "PATH": str(path),
            "STUB_LOG": str(log),
            "TEST_SYSROOT": str(root),
            "LC_ALL": "C",
            **env,
        },
    )
    return result, log.read_text().splitlines()


def test_compute_partition_is_set_once_on_each_gpu_in_another_mode(tmp_path: Path) -> None:
    result, calls = run_setup(tmp_path, "compute-partition\tCPX\n")
    assert result.returncode == 0, result.stdout
    assert calls == [
        "set --gpu 0000:05:00.0 --compute-partition CPX",
        "set --gpu 0000:25:00.0 --compute-partition CPX",
    ]
    assert "gt-gpu: GPU 0000:05:00.0: compute partition SPX -> CPX: done" in result.stdout


def test_a_gpu_already_in_the_mode_and_a_mode_not_offered_call_nothing(tmp_path: Path) -> None:
    result, calls = run_setup(tmp_path, "compute-partition\tSPX\n")
    assert calls == [] and "compute partition already SPX" in result.stdout
    result, calls = run_setup(tmp_path / "tpx", "compute-partition\tTPX\n")
    assert calls == [] and "compute partition TPX not offered (SPX, DPX, QPX, CPX)" in result.stdout


def test_memory_partition_is_reported_with_its_command_never_changed(tmp_path: Path) -> None:
    """Changing it restarts amdgpu with every workload stopped: reported, not done at boot."""
    result, calls = run_setup(tmp_path, "memory-partition\tNPS4\ncompute-partition\tCPX\n")
    assert result.returncode == 0, result.stdout
    assert not [call for call in calls if "--memory-partition" in call]
    assert "memory partition is NPS1, the plan asks NPS4: not changed at boot" in result.stdout
    assert "amd-smi set --memory-partition NPS4" in result.stdout


@pytest.mark.parametrize(
    ("limit", "watts"),
    [("90%", 675), ("100%", 750), ("40%", 400), ("500", 500), ("900", 750)],
)
def test_power_cap_is_a_share_of_each_cards_default_clamped_to_its_range(
    tmp_path: Path, limit: str, watts: int
) -> None:
    """40 % of 750 W is under the card's 400 W minimum; 900 W is over its 750 W maximum."""
    result, calls = run_setup(tmp_path, f"power-limit\t{limit}\n", gpus=1)
    assert calls == [f"set --gpu 0000:05:00.0 --power-cap {watts}"], result.stdout


def test_a_wedged_driver_stops_every_later_call(tmp_path: Path) -> None:
    result, calls = run_setup(
        tmp_path, "compute-partition\tCPX\n", FAKE_SLEEP="5", TEST_CALL_LIMIT="1"
    )
    assert result.returncode == 0
    assert len(calls) == 1  # the second GPU is not tried: its call would hang as well
    assert "amd-smi did not answer within 1 s; the GPU or driver is wedged" in result.stdout


def test_no_amd_smi_and_no_gpu_are_logged_and_skipped(tmp_path: Path) -> None:
    result, _ = run_setup(tmp_path, "compute-partition\tCPX\n", smi=False)
    assert result.returncode == 0 and "amd-smi not found" in result.stdout
    result, calls = run_setup(tmp_path / "bare", "compute-partition\tCPX\n", gpus=0)
    assert result.returncode == 0 and calls == []
    assert "no GPU bound to amdgpu" in result.stdout


@pytest.mark.parametrize(
    "line",
    [
        "compute-partition\tcpx",
        "memory-partition\tNPS3",
        "power-limit\t5%%",
        "power-limit\t$(reboot)",
        "persistence\ton",  # NVIDIA's action: not this script's
        "compute-partition CPX",
    ],
)
def test_bad_data_is_refused_and_nothing_called(tmp_path: Path, line: str) -> None:
    result, calls = run_setup(tmp_path, f"compute-partition\tCPX\n{line}\n")
    assert result.returncode == 2
    assert "line 3" in result.stdout and "nothing done" in result.stdout
    assert calls == []


def test_the_amd_bundles_data_file_is_what_the_script_accepts(tmp_path: Path) -> None:
    """The generator's gpu.conf for an MI300X plan passes the script's --check, and runs."""
    inputs = load_inputs("mi300x-8x-epyc", "training")
    wanted = profile(
        "training",
        gpu_compute_partition="CPX",
        gpu_memory_partition="NPS4",
        gpu_power_limit_percent=90,
    )
    files = render_bundle(build_plan(inputs.facts, wanted))
    data = files[in_overlay(layout.GPU_DATA)][0].decode()
    (tmp_path / "gpu.conf").write_text(data)
    check = subprocess.run(
        [str(SCRIPT), "--check", str(tmp_path / "gpu.conf")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert check.returncode == 0, check.stdout
    body = data.split("log-as\tgoldtune-gpu\n", 1)[1]
    result, calls = run_setup(tmp_path / "run", body, gpus=1)
    assert result.returncode == 0, result.stdout
    assert calls == [
        "set --gpu 0000:05:00.0 --compute-partition CPX",
        "set --gpu 0000:05:00.0 --power-cap 675",
    ]


def test_a_failed_gpu_claim_of_the_preflight_skips_every_action(tmp_path: Path) -> None:
    """The preflight unit found other GPUs than the plan's (issue 28): no amd-smi call, a line
    naming the claim; the data's preflight line, which AMD bundles carry, is accepted."""
    result_file = tmp_path / "root/run/goldtune/preflight"
    result_file.parent.mkdir(parents=True)
    result_file.write_text("state\tmismatch\nmismatch\tgpu.count\t8\t7\tgpu:power-limit\n")
    data = "preflight\t/run/goldtune/preflight\ncompute-partition\tCPX\npower-limit\t90%\n"
    result, calls = run_setup(tmp_path, data)
    assert result.returncode == 0, result.stdout
    assert calls == []
    assert "every GPU action skipped: preflight: gpu.count differs" in result.stdout


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        # W-A3: on main this was a note, exit 0, and the valid DPX was dropped with NPS2
        (
            "gpu_compute_partition: DPX\ngpu_memory_partition: NPS2\n",
            "gpu_memory_partition: NPS2 is not a mode of MI300X "
            "(its memory_partitions: NPS1, NPS4)",
        ),
        ("gpu_compute_partition: TPX\n", "gpu_compute_partition: TPX is not a mode of MI300X"),
    ],
)
def test_a_partition_mode_the_gpu_does_not_have_is_exit_2_on_one_line(
    tmp_path: Path, text: str, needle: str
) -> None:
    """An invalid AMD partition request is bad input, as an invalid MIG layout is."""
    wanted = tmp_path / "part.yaml"
    wanted.write_text(f"description: test\nextends: training\n{text}")
    result = generate("mi300x-8x-epyc", wanted, tmp_path / "b")
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], result.output
    assert not (tmp_path / "b").exists()


def test_the_amd_gpu_unit_runs_before_amds_gpu_clients_not_nvidias() -> None:
    """Issue 40 item 5: on main the AMD unit was ordered before DCGM, nvsm, IMEX and MPS only;
    AMD's device metrics exporter (gpuagent.service, amd-metrics-exporter.service) and rdcd could
    hold the GPUs while the compute partition changed."""
    inputs = load_inputs("mi300x-8x-epyc", "training")
    files = render_bundle(
        build_plan(inputs.facts, profile("training", gpu_compute_partition="CPX"))
    )
    unit = files[in_overlay(layout.unit_file(layout.GPU_UNIT))][0].decode()
    (before,) = [line for line in unit.splitlines() if line.startswith("Before=")]
    units = before.removeprefix("Before=").split()
    assert units == list(layout.AMD_GPU_CLIENT_UNITS)
    assert {"gpuagent.service", "amd-metrics-exporter.service", "rdc.service"} <= set(units)
    assert {"kubelet.service", "containerd.service"} <= set(units)
    assert not any("nvidia" in name or "dcgm" in name for name in units)
    assert "DCGM" not in unit and "gpuagent" in unit
