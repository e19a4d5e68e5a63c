"""os.driver: who delivers the GPU kernel driver (issue 39), and what each model changes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from generator.detect.system import read_driver
from generator.detect.tree import Tree
from tests.generate import generate

OPERATOR_HW = "system: dgx-h100\nos: {driver: nvidia-gpu-operator}\n"


def overlay(tmp_path: Path, text: str, name: str = "node.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def bundle(tmp_path: Path, hardware: str | Path, profile: str = "training-k8s") -> Path:
    out = tmp_path / "out"
    result = generate(hardware, profile, out)
    assert result.exit_code == 0, result.output
    return out


def test_operator_model_is_said_in_explain_and_plan(tmp_path: Path) -> None:
    out = bundle(tmp_path, overlay(tmp_path, OPERATOR_HW))
    assert "delivered by **nvidia-gpu-operator**" in (out / "EXPLAIN.md").read_text()
    assert json.loads((out / "plan.json").read_text())["driver"] == "nvidia-gpu-operator"


def test_host_model_plan_has_no_driver_field(tmp_path: Path) -> None:
    out = bundle(tmp_path, "dgx-h100")
    assert "driver" not in json.loads((out / "plan.json").read_text())
    assert "delivered by" not in (out / "EXPLAIN.md").read_text()


def test_unknown_driver_model_is_bad_input(tmp_path: Path) -> None:
    hardware = overlay(tmp_path, "system: dgx-h100\nos: {driver: container}\n")
    result = generate(hardware, "training-k8s", tmp_path / "out")
    assert result.exit_code == 2
    assert "os.driver" in result.output
    assert not (tmp_path / "out").exists()


def touch(root: Path, path: str) -> None:
    target = root / path.lstrip("/")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text("")


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        # the Operator's driver root and startup-probe marker, no host driver: its model
        (["/run/nvidia/driver/usr/bin/nvidia-smi"], "nvidia-gpu-operator"),
        (["/run/nvidia/validations/.driver-ctr-ready"], "nvidia-gpu-operator"),
        # a host nvidia-smi too: the validator calls that a pre-installed driver; left out
        (["/run/nvidia/driver/usr/bin/nvidia-smi", "/usr/bin/nvidia-smi"], None),
        (["/usr/bin/nvidia-smi"], None),
        ([], None),
    ],
)
def test_detect_reads_the_operator_driver_root(
    tmp_path: Path, files: list[str], expected: str | None
) -> None:
    for path in files:
        touch(tmp_path, path)
    assert read_driver(Tree(tmp_path))[0] == expected


def test_detect_writes_the_driver_line(tmp_path: Path) -> None:
    from generator.detect.describe import os_lines

    touch(tmp_path, "/run/nvidia/driver/usr/bin/nvidia-smi")
    assert any(
        line.strip().startswith("driver: nvidia-gpu-operator")
        for line in os_lines(Tree(tmp_path), False)
    )
