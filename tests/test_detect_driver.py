"""GPU facts from NVML and nvidia-smi, replaced only at the library boundary (a fake `pynvml`)."""

from __future__ import annotations

import subprocess
import sys
import types
from pathlib import Path
from typing import Any, NamedTuple

import pytest
import yaml

from generator.commands import detect as command
from generator.detect import driver
from generator.detect.describe import Machine, describe
from generator.detect.tree import Tree
from generator.inputs.catalog import load_catalog
from tests import detect_trees as trees

H100_BUSES = ["18", "2a", "3a", "5d", "9a", "ab", "ba", "db"]


class PciInfo(NamedTuple):
    busId: bytes  # noqa: N815 -- NVML's own field names
    pciDeviceId: int  # noqa: N815 -- NVML's own field names


class NVMLError(Exception):
    pass


def fake_pynvml(
    answers: dict[str, Any] | None = None, init_fails: bool = False
) -> types.ModuleType:
    """A `pynvml` module with recorded answers of an 8-GPU HGX H100 (driver 550, NVSwitch)."""
    recorded = {
        "name": b"NVIDIA H100 80GB HBM3",
        "memory": 85520809984,
        "default_mw": 700000,
        "limits_mw": (200000, 700000),
        "clocks": {0: 1980, 2: 2619},
        "mig": (0, 0),
        "links": 18,
        "remote_type": 2,
        **(answers or {}),
    }
    module = types.ModuleType("pynvml")
    module.NVML_CLOCK_GRAPHICS, module.NVML_CLOCK_MEM, module.NVML_NVLINK_MAX_LINKS = 0, 2, 18

    def init() -> None:
        if init_fails:
            raise NVMLError("Driver Not Loaded")

    def unsupported(*_: Any) -> Any:
        raise NVMLError("Not Supported")

    def answer(key: str) -> Any:
        return (lambda *_: recorded[key]) if recorded[key] is not None else unsupported

    module.nvmlInit, module.nvmlShutdown = init, lambda: None
    module.nvmlDeviceGetCount = lambda: len(H100_BUSES)
    module.nvmlDeviceGetHandleByIndex = lambda index: index
    module.nvmlDeviceGetPciInfo = lambda index: PciInfo(
        f"00000000:{H100_BUSES[index]}:00.0".upper().encode(), 0x233010DE
    )
    module.nvmlDeviceGetName = answer("name")
    module.nvmlDeviceGetMemoryInfo = lambda _: types.SimpleNamespace(total=recorded["memory"])
    module.nvmlDeviceGetPowerManagementDefaultLimit = answer("default_mw")
    module.nvmlDeviceGetPowerManagementLimitConstraints = answer("limits_mw")
    module.nvmlDeviceGetMaxClockInfo = lambda _, clock: recorded["clocks"][clock]
    module.nvmlDeviceGetMigMode = answer("mig")
    module.nvmlDeviceGetNvLinkState = lambda _, link: 1 if link < recorded["links"] else 0
    module.nvmlDeviceGetNvLinkRemoteDeviceType = answer("remote_type")
    return module


def loader_of(module: types.ModuleType | None):
    def load(name: str) -> types.ModuleType:
        assert name == "pynvml"
        if module is None:
            raise ModuleNotFoundError("No module named 'pynvml'")
        return module

    return load


def describe_with(machine: trees.FakeMachine, tmp_path: Path, report: Any) -> str:
    tree = Tree(machine.build(tmp_path / "tree"))
    return describe(Machine(tree, load_catalog(), report, live=False), "gen detect --root T")


def test_nvml_answers_become_comments_and_the_nvswitch_field(tmp_path: Path):
    report = driver.query_nvml(loader_of(fake_pynvml()))
    assert isinstance(report, driver.DriverReport) and report.source == "NVML"
    assert sorted(report.gpus) == [f"0000:{bus}:00.0" for bus in H100_BUSES]
    text = describe_with(trees.dgx_h100(), tmp_path, report)
    assert (
        '# NVML 0000:18:00.0: "NVIDIA H100 80GB HBM3", 81559 MiB, power default 700 W, '
        "range 200-700 W, max clocks 1980/2619 MHz, MIG disabled, 18 NVLinks active"
    ) in text
    assert yaml.safe_load(text)["gpus"][0]["model"] == "H100-SXM5-80GB"


def test_nvswitch_from_nvml_when_no_nvswitch_function_is_on_the_bus(tmp_path: Path):
    machine = trees.dgx_h100()
    machine.entries = {k: v for k, v in machine.entries.items() if not _is_nvswitch(k)}
    text = describe_with(machine, tmp_path, driver.query_nvml(loader_of(fake_pynvml())))
    assert "nvswitch: true                    # NVML: NVLinks lead to an NVSwitch" in text
    point_to_point = driver.query_nvml(loader_of(fake_pynvml({"remote_type": 0})))
    text = describe_with(machine, tmp_path / "b", point_to_point)
    assert yaml.safe_load(text)["nvswitch"] is False


def _is_nvswitch(key: str) -> bool:
    return any(
        key.startswith(trees.pci_dir(f"0000:0{n}:00.0")) or key.endswith(f"0000:0{n}:00.0")
        for n in range(5, 9)
    )


def test_nvml_disagreeing_with_the_catalog_is_said(tmp_path: Path):
    report = driver.query_nvml(
        loader_of(fake_pynvml({"default_mw": 650000, "clocks": {0: 1755, 2: 2619}}))
    )
    text = describe_with(trees.dgx_h100(), tmp_path, report)
    assert (
        "# NVML differs from H100-SXM5-80GB: default power 650 W here, 700 W in the catalog" in text
    )
    assert "max graphics clock 1755 MHz here, 1980 MHz in the catalog" in text


def test_nvml_calls_that_fail_leave_their_fact_unknown():
    report = driver.query_nvml(
        loader_of(fake_pynvml({"name": None, "default_mw": None, "mig": None}))
    )
    assert isinstance(report, driver.DriverReport)
    gpu = report.gpus["0000:18:00.0"]
    assert gpu.name is None and gpu.power_w[0] is None and gpu.mig_mode is None
    assert gpu.memory_mib == 81559


def test_nvml_is_imported_through_the_real_import_boundary(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml())
    report = driver.query_nvml()
    assert isinstance(report, driver.DriverReport) and len(report.gpus) == 8


def test_without_nvml_nvidia_smi_answers():
    calls = []

    def smi() -> bytes:
        calls.append(1)
        return SMI_XML

    report = driver.query_driver(loader_of(None), smi)
    assert isinstance(report, driver.DriverReport) and report.source == "nvidia-smi -q -x" and calls
    gpu = report.gpus["0000:18:00.0"]
    assert gpu == driver.DriverGpu(
        "0000:18:00.0",
        "NVIDIA H100 80GB HBM3",
        "2330",
        81559,
        (700, 200, 700),
        (1980, 2619),
        "disabled",
    )


def test_a_driver_that_does_not_answer_leaves_pci_ids_alone(tmp_path: Path):
    report = driver.query_driver(
        loader_of(fake_pynvml(init_fails=True)), lambda: "nvidia-smi: not installed"
    )
    assert report == "NVML: no driver answered (nvmlInit failed); nvidia-smi: not installed"
    text = describe_with(trees.l4_pcie(), tmp_path, report)
    assert (
        "# driver facts: none (NVML: no driver answered (nvmlInit failed); nvidia-smi: not "
        "installed); from PCI ids alone" in text
    )


def test_nvidia_smi_is_bounded_by_a_timeout(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(driver.shutil, "which", lambda _: "/usr/bin/nvidia-smi")

    def hang(*_: Any, **kwargs: Any) -> None:
        assert kwargs["timeout"] == driver.NVIDIA_SMI_TIMEOUT_S
        raise subprocess.TimeoutExpired("nvidia-smi", kwargs["timeout"])

    monkeypatch.setattr(driver.subprocess, "run", hang)
    assert driver.run_nvidia_smi() == "nvidia-smi: no answer within 20 s"
    monkeypatch.setattr(driver.shutil, "which", lambda _: None)
    assert driver.run_nvidia_smi() == "nvidia-smi: not installed"


@pytest.mark.parametrize(
    ("xml", "expected"),
    [
        (b"<nvidia_smi_log><gpu", "not valid XML"),
        (
            b'<!DOCTYPE x [<!ENTITY a "aaaa">]><nvidia_smi_log>&a;</nvidia_smi_log>',
            "declares XML entities",
        ),
        (b"<" + b"a" * (driver.MAX_XML_BYTES + 1), "output over 8 MiB"),
    ],
)
def test_bad_nvidia_smi_output_is_a_reason_not_a_traceback(xml: bytes, expected: str):
    answer = driver.parse_nvidia_smi(xml)
    assert isinstance(answer, str) and expected in answer


def test_a_captured_nvidia_smi_answer_is_read_from_the_tree(tmp_path: Path):
    machine = trees.dgx_h100()
    machine.entries["goldtune-capture/nvidia-smi-q-x.xml"] = SMI_XML.decode()
    root = machine.build(tmp_path / "tree")
    text, _ = command.detect_text(root)
    assert '# captured nvidia-smi -q -x 0000:18:00.0: "NVIDIA H100 80GB HBM3", 81559 MiB' in text
    assert "# captured nvidia-smi -q -x: 0000:2a:00.0 not reported" in text


# Trimmed from the shape of `nvidia-smi -q -x` (nvsmi_device_v12.dtd) on an H100 SXM node.
SMI_XML = b"""<?xml version="1.0" ?>
<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v12.dtd">
<nvidia_smi_log>
  <driver_version>550.90.07</driver_version>
  <attached_gpus>1</attached_gpus>
  <gpu id="00000000:18:00.0">
    <product_name>NVIDIA H100 80GB HBM3</product_name>
    <mig_mode><current_mig>Disabled</current_mig><pending_mig>Disabled</pending_mig></mig_mode>
    <pci><pci_bus_id>00000000:18:00.0</pci_bus_id><pci_device_id>0x233010DE</pci_device_id></pci>
    <fb_memory_usage><total>81559 MiB</total><used>1 MiB</used></fb_memory_usage>
    <gpu_power_readings>
      <current_power_limit>700.00 W</current_power_limit>
      <default_power_limit>700.00 W</default_power_limit>
      <min_power_limit>200.00 W</min_power_limit>
      <max_power_limit>700.00 W</max_power_limit>
    </gpu_power_readings>
    <max_clocks>
      <graphics_clock>1980 MHz</graphics_clock><mem_clock>2619 MHz</mem_clock>
    </max_clocks>
  </gpu>
</nvidia_smi_log>
"""
