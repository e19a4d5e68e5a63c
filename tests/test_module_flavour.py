"""Open and proprietary NVIDIA kernel modules (issue 39): the catalog says which GPUs need the
open ones, and no plan writes an nvidia module option that the open flavour does not read."""

from __future__ import annotations

from pathlib import Path

import pytest

from generator.inputs.catalog import load_catalog
from generator.inputs.load import load_inputs
from generator.model.setting import Setting
from generator.plan.checks import check_setting
from generator.plan.module_flavour import OPEN_NVIDIA_PARAMS, open_module_models


def option(param: str) -> Setting:
    return Setting("modprobe", f"options nvidia {param}", "1", "a site's override", rule="override")


def test_the_catalog_says_grace_and_blackwell_need_the_open_modules() -> None:
    gpus = load_catalog().gpus.entries
    needs_open = {g.key for g in gpus if g.kernel_modules == "open"}
    # NVIDIA: "For cutting-edge platforms such as NVIDIA Grace Hopper or NVIDIA Blackwell, you
    # must use the open-source GPU kernel modules"
    blackwell = {g.key for g in gpus if g.architecture == "blackwell"}
    grace = {g.key for g in gpus if g.vendor == "nvidia" and g.is_superchip}
    assert needs_open == blackwell | grace
    assert "GH200" in needs_open and "H100-SXM5-80GB" not in needs_open


@pytest.mark.parametrize(
    ("param", "refused"),
    [
        ("NVreg_EnableStreamMemOPs", False),  # declared by the open nvidia.ko
        ("NVreg_RestrictProfilingToAdminUsers", False),
        ("NVreg_OpenRmEnableUnsupportedGpus", True),  # declared, "ignored"
        ("NVreg_RmProfilingAdminOnly", True),  # the registry key, not the parameter name
        ("NVreg_NoSuchOption", True),
    ],
)
def test_an_nvidia_option_the_open_modules_do_not_read_is_refused_on_blackwell(
    param: str, refused: bool
) -> None:
    b200 = load_inputs("dgx-b200", "training").facts
    assert open_module_models(b200) == ["B200"]
    errors = check_setting(option(param), b200, True)
    assert any("open GPU kernel modules" in error for error in errors) == refused
    # Hopper: either flavour drives it, so nothing is refused on this ground
    h100 = load_inputs("dgx-h100", "training").facts
    assert not any("open GPU kernel modules" in e for e in check_setting(option(param), h100, True))


def test_no_shipped_plan_writes_an_nvidia_option_outside_the_open_list() -> None:
    from generator.plan.build import build_plan

    for system in ("dgx-b200", "gb200-nvl72-tray", "gh200", "dgx-h100"):
        inputs = load_inputs(system, "training-k8s")
        plan = build_plan(inputs.facts, inputs.profile)
        options = [
            s.key.split()[2]
            for s in plan.of_kind("modprobe")
            if s.key.startswith("options nvidia ")
        ]
        assert set(options) <= OPEN_NVIDIA_PARAMS


def test_a_profile_override_only_the_proprietary_flavour_reads_is_bad_input(tmp_path: Path) -> None:
    from tests.generate import generate

    profile = tmp_path / "p.yaml"
    profile.write_text(
        "extends: training-k8s\nname: p\noverrides:\n  - {kind: modprobe, key: "
        '"options nvidia NVreg_OpenRmEnableUnsupportedGpus", value: "1", reason: test}\n'
    )
    result = generate("dgx-b200", profile, tmp_path / "out")
    assert result.exit_code == 2
    assert result.output.count("\n") == 1
    assert "the open GPU kernel modules, which B200 need, do not read it" in result.output
    assert not (tmp_path / "out").exists()
