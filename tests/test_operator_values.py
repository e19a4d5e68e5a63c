"""gpu-operator/values.yaml: what a bundle for the GPU Operator's driver decides that the
Operator owns, as values of its Helm chart (issue 39), each key one of the chart's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from gpu_operator_chart import ENUMS, VALUES_EXCERPT

from tests.generate import generate

VALUES = "gpu-operator/values.yaml"


def operator_bundle(tmp_path: Path, system: str, profile: str = "training-k8s") -> Path:
    tmp_path.mkdir(parents=True, exist_ok=True)
    hardware = tmp_path / "node.yaml"
    hardware.write_text(f"system: {system}\nos: {{driver: nvidia-gpu-operator}}\n")
    out = tmp_path / "out"
    result = generate(hardware, profile, out)
    assert result.exit_code == 0, result.output
    return out


def leaves(tree: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    found: dict[str, Any] = {}
    for key, value in tree.items():
        path = f"{prefix}{key}"
        found |= leaves(value, path + ".") if isinstance(value, dict) else {path: value}
    return found


def values_of(out: Path) -> dict[str, Any]:
    return leaves(yaml.safe_load((out / VALUES).read_text()))


def mig_profile(tmp_path: Path, layout: str) -> str:
    path = tmp_path / "k8s-mig.yaml"
    path.write_text(f"extends: training-k8s\nname: k8s-mig\ngpu_mig_layout: {layout}\n")
    return str(path)


def test_every_key_is_one_of_the_charts_with_a_value_it_accepts(tmp_path: Path) -> None:
    chart = leaves(yaml.safe_load(VALUES_EXCERPT))
    bundles = [
        operator_bundle(tmp_path / "h100", "dgx-h100"),
        operator_bundle(tmp_path / "b200", "dgx-b200", mig_profile(tmp_path, "{1g.23gb: 7}")),
    ]
    for out in bundles:
        for path, value in values_of(out).items():
            assert path in chart, path
            assert type(value) is type(chart[path]), path
            assert value in ENUMS.get(path, (value,)), path


def test_the_h100_operator_bundle_hands_rdma_and_the_toolkit_to_the_operator(
    tmp_path: Path,
) -> None:
    out = operator_bundle(tmp_path, "dgx-h100")
    assert values_of(out) == {
        "driver.enabled": True,
        "driver.rdma.enabled": True,  # mlx5 NICs: the Operator's driver container loads peermem
        "hostPaths.driverInstallDir": "/run/nvidia/driver",
        "toolkit.enabled": True,
    }
    # the file is not installed on the node, and EXPLAIN.md says the site applies it
    assert VALUES not in (out / "install.list").read_text()
    assert not list((out / "rootfs").rglob("values.yaml"))
    explain = (out / "EXPLAIN.md").read_text()
    assert f"`{VALUES}`: values for\nits Helm chart" in explain
    assert "the site applies them with the\nchart" in explain


def test_blackwell_needs_the_open_modules_and_a_mig_layout_picks_the_strategy(
    tmp_path: Path,
) -> None:
    single = values_of(
        operator_bundle(tmp_path / "a", "dgx-b200", mig_profile(tmp_path, "{1g.23gb: 7}"))
    )
    assert single["driver.kernelModuleType"] == "open"
    assert single["mig.strategy"] == "single"
    assert single["migManager.config.name"] == "goldtune-mig-parted-config"
    mixed = values_of(
        operator_bundle(
            tmp_path / "b", "dgx-h100", mig_profile(tmp_path, "{3g.40gb: 1, 2g.20gb: 1}")
        )
    )
    assert mixed["mig.strategy"] == "mixed"
    assert "driver.kernelModuleType" not in mixed  # Hopper: the chart's auto chooses


def test_a_profile_that_keeps_goldtunes_runtime_turns_the_operators_toolkit_off(
    tmp_path: Path,
) -> None:
    profile = tmp_path / "mine.yaml"
    profile.write_text("extends: training-k8s\nruntime_config: goldtune\n")
    assert (
        values_of(operator_bundle(tmp_path, "dgx-h100", str(profile)))["toolkit.enabled"] is False
    )


@pytest.mark.parametrize("driver", ["host", "distribution-precompiled", "amd-gpu-operator"])
def test_no_values_file_without_the_nvidia_gpu_operator(tmp_path: Path, driver: str) -> None:
    hardware = tmp_path / "node.yaml"
    hardware.write_text(f"system: dgx-h100\nos: {{driver: {driver}}}\n")
    assert generate(hardware, "training-k8s", tmp_path / "out").exit_code == 0
    assert not (tmp_path / "out/gpu-operator").exists()
