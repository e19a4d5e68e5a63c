"""GPU sharing (issue 18, "Missing"): the CUDA MPS unit, MIG layouts applied by gpu-setup."""

from __future__ import annotations

import re
from pathlib import Path

from generate import generate
from validators.checks_system import check_units

from generator.commands.generate import render_for
from generator.model import layout
from generator.model.layout import in_overlay

MPS_UNIT_FILE = in_overlay(layout.unit_file(layout.MPS_UNIT))
WORKLOADS = {"kubelet.service", "containerd.service", "docker.service", "slurmd.service"}


def profile_file(tmp_path: Path, text: str, name: str = "sharing") -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(f"description: test\nextends: inference\n{text}")
    return path


def test_no_mps_unit_unless_the_profile_asks() -> None:
    files = render_for("dgx-h100", "inference")
    assert MPS_UNIT_FILE not in files
    assert layout.MPS_UNIT.encode() not in files["install.list"][0]


def test_the_mps_unit_runs_the_daemon_after_the_gpu_unit_before_the_workloads(
    tmp_path: Path,
) -> None:
    files = render_for("dgx-h100", str(profile_file(tmp_path, "gpu_mps: true\n")))
    text = files[MPS_UNIT_FILE][0].decode()
    assert f"ExecStart={layout.MPS_CONTROL} -d\n" in text
    assert "Type=forking\n" in text
    assert f"CUDA_MPS_PIPE_DIRECTORY={layout.MPS_PIPE_DIR} " in text
    assert f"CUDA_MPS_LOG_DIRECTORY={layout.MPS_LOG_DIR}\n" in text
    (after,) = re.findall(r"^After=(.*)$", text, re.MULTILINE)
    assert layout.GPU_UNIT in after.split()
    (before,) = re.findall(r"^Before=(.*)$", text, re.MULTILINE)
    assert set(before.split()) == WORKLOADS
    assert not re.search(r"^(Wants|Requires)=", text, re.MULTILINE), "orders, never pulls in"
    assert f"service\tenable\t{layout.MPS_UNIT}" in files["install.list"][0].decode()


def test_the_mps_unit_passes_systemd_analyze_verify(tmp_path: Path) -> None:
    result = generate("dgx-h100", profile_file(tmp_path, "gpu_mps: true\n"), tmp_path / "b")
    assert result.exit_code == 0, result.output
    assert (tmp_path / "b" / MPS_UNIT_FILE).is_file()
    assert check_units(tmp_path / "b") == []
