"""`gen detect` on AMD Instinct hosts (issue 31): PCI vendor 0x1002 with the Instinct classes,
the KFD topology and amd-smi's JSON, from a fake tree and a recording amd-smi.

On main every test here fails: detect looked for NVIDIA's vendor id alone, so an 8x MI300X host
was described as having no GPUs."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from generator.cli import main
from generator.detect import driver_amd
from generator.detect.describe import Machine, describe, find_gpu
from generator.detect.tree import Tree
from generator.inputs.catalog import Catalog, GpuModel, Index, load_catalog
from generator.inputs.catalog_schema import GpuSchema
from tests import detect_trees as trees


def detect(root: Path) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, ["detect", "--root", str(root)])
    return result.exit_code, result.stdout, result.stderr


def shipped_mi300x() -> str:
    """The catalog's key for 1002:74a1 once it has the entry, else what detect writes without."""
    model = find_gpu(load_catalog(), "74a1", "1002")
    return model.key if model else "1002:74a1"


def test_an_8x_mi300x_host_on_two_epyc_sockets(tmp_path: Path) -> None:
    status, text, errors = detect(trees.mi300x_epyc().build(tmp_path / "tree"))
    assert status == 0, errors
    data = yaml.safe_load(text)
    assert data["cpu"]["vendor"] == "amd" and data["numa_nodes"] == 2
    assert data["gpus"] == [
        {"model": shipped_mi300x(), "count": 8, "numa_nodes": [0, 0, 0, 0, 1, 1, 1, 1]}
    ]
    assert "PCI 1002:74a1" in text
    assert "display functions of other vendors left out (1a03:2000)" in text
    assert "nvswitch" not in text  # an NVIDIA fact: not written for AMD GPUs
    # the KFD topology: one compute partition per GPU (SPX)
    assert "# kfd 0000:05:00.0: one compute partition (gpu_id 40000), 1216 SIMDs" in text
    # the captured amd-smi answer, per GPU
    assert (
        '# captured amd-smi static --json 0000:e5:00.0: "AMD Instinct MI300X", 196592 MiB, '
        "power range 0-750 W, power cap 750 W, partition SPX/NPS1" in text
    )
    assert len([nic for nic in data["nics"] if nic["role"] == "compute"]) == 8


def test_gen_check_takes_the_mi300x_host_or_says_which_entry_to_add(tmp_path: Path) -> None:
    """Without a catalog entry for 1002:74a1 the refusal names the file, the fields and where
    the facts are found; with one (issue 31's catalog) the description is accepted."""
    _, text, errors = detect(trees.mi300x_epyc().build(tmp_path / "tree"))
    path = tmp_path / "mi300x.yaml"
    path.write_text(text)
    result = CliRunner().invoke(main, ["check", "--hw", str(path), "--profile", "training"])
    if shipped_mi300x() != "1002:74a1":
        assert result.exit_code == 0, result.output
        return
    assert result.exit_code == 2
    assert "gpus[0].model: unknown GPU model '1002:74a1'" in result.output
    assert "add one to hardware_db/gpus/ (pci_device_ids) listing it" in result.output
    assert "amd-smi static" in result.output and "pciutils/pciids" in result.output
    assert "written by PCI device id" in errors


def catalog_with(*extra: GpuModel) -> Catalog:
    """The shipped catalog with GPU entries of a test's own, in place of the shipped entries
    that list one of their PCI device ids."""
    shipped = load_catalog()
    catalog = Catalog(shipped.root)
    theirs = {device for entry in extra for device in entry.pci_device_ids}
    kept = [e for e in shipped.gpus.entries if not theirs & set(e.pci_device_ids)]
    catalog.__dict__["gpus"] = Index.build("GPU", [*kept, *extra])
    return catalog


def test_the_catalog_entry_is_found_by_vendor_and_device(tmp_path: Path) -> None:
    """An AMD function resolves to the entry of its vendor only: device ids are each vendor's
    own numbering, so an NVIDIA entry listing 0x74a1 must not claim an MI300X."""
    amd = GpuModel.of(
        GpuSchema.model_construct(
            key="TEST-MI300X", name="test", vendor="amd", pci_device_ids=["0x74a1"]
        )
    )
    nvidia = GpuModel.of(
        GpuSchema.model_construct(
            key="TEST-NV", name="test", vendor="nvidia", pci_device_ids=["0x74a1"]
        )
    )
    tree = Tree(trees.mi300x_epyc().build(tmp_path / "tree"))
    for catalog, expected in ((catalog_with(nvidia), "1002:74a1"), (catalog_with(amd), None)):
        text = describe(Machine(tree, catalog, "no NVIDIA driver", False), "gen detect")
        model = yaml.safe_load(text)["gpus"][0]["model"]
        assert model == (expected or "TEST-MI300X")
    assert find_gpu(catalog_with(nvidia, amd), "74a1", "10de") is nvidia


def test_a_gpu_in_cpx_mode_is_one_gpu_of_several_kfd_nodes(tmp_path: Path) -> None:
    """CPX splits an MI300X into 8 compute partitions, each a KFD node on the same PCI
    function: the count stays the PCI functions, the comment names the partitions."""
    box = trees.mi300x_epyc()
    for partition in range(1, 8):
        trees.kfd_node(box, 100 + partition, 50000 + partition, "0000:05:00.0", 152)
    status, text, _ = detect(box.build(tmp_path / "tree"))
    assert status == 0
    assert yaml.safe_load(text)["gpus"][0]["count"] == 8
    assert "# kfd 0000:05:00.0: 8 compute partitions (gpu_id 40000, 50001," in text
    assert "# kfd 0000:26:00.0: one compute partition" in text


def test_without_the_kfd_topology_or_amd_smi_the_pci_bus_still_answers(tmp_path: Path) -> None:
    box = trees.mi300x_epyc()
    box.entries = {
        path: entry
        for path, entry in box.entries.items()
        if not path.startswith(("sys/class/kfd", "goldtune-capture"))
    }
    status, text, _ = detect(box.build(tmp_path / "tree"))
    assert status == 0 and yaml.safe_load(text)["gpus"][0]["count"] == 8
    assert "kfd: no GPU node in /sys/class/kfd/kfd/topology" in text
    assert "driver facts: none (the capture holds no amd-smi static --json output)" in text


def test_a_display_class_amd_gpu_is_a_gpu_and_an_amd_cpu_function_is_not(tmp_path: Path) -> None:
    """MI200 and earlier Instinct cards are display-other (0x0380); the EPYC's own functions
    are vendor 0x1022, not the GPU vendor 0x1002."""
    box = trees.epyc_nps4()
    box.pci("0000:c3:00.0", "1002", "740c", "0x038000", node=6)
    box.pci("0000:00:00.2", "1022", "14a4", "0x080600", node=0)
    box.pci("0000:c3:00.1", "1002", "ab28", "0x040300", node=6)  # an audio function: not a GPU
    status, text, _ = detect(box.build(tmp_path / "tree"))
    assert status == 0
    assert yaml.safe_load(text)["gpus"] == [{"model": "1002:740c", "count": 1, "numa_nodes": [6]}]


# --- amd-smi's JSON --------------------------------------------------------------------------


@pytest.mark.parametrize("wrapped", [False, True], ids=["list", "gpu_data"])
def test_amd_smi_json_of_both_shapes_is_read(wrapped: bool) -> None:
    text = trees.amd_smi_static(["0000:05:00.0", "0000:26:00.0"], wrapped=wrapped)
    report = driver_amd.parse_amd_smi(text.encode())
    assert isinstance(report, driver_amd.DriverReport)
    gpu = report.gpus["0000:05:00.0"]
    assert (gpu.name, gpu.device_id, gpu.memory_mib) == ("AMD Instinct MI300X", "74a1", 196592)
    assert gpu.power_w == (None, None, 750) and gpu.power_cap_w == 750
    assert (gpu.compute_partition, gpu.memory_partition) == ("SPX", "NPS1")


def test_amd_smi_values_it_could_not_read_stay_unknown() -> None:
    text = b'[{"gpu": 0, "asic": {"market_name": "N/A", "device_id": "N/A"},'
    text += b' "bus": {"bdf": "0000:05:00.0"}, "limit": {"max_power": "N/A",'
    text += b' "socket_power": {"value": 750, "unit": "mW"}}, "partition": "N/A"}]'
    report = driver_amd.parse_amd_smi(text)
    assert isinstance(report, driver_amd.DriverReport)
    gpu = report.gpus["0000:05:00.0"]
    assert gpu.name is gpu.device_id is gpu.power_cap_w is gpu.compute_partition is None


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (b"not json", "not valid JSON"),
        (b'{"other": 1}', "neither a list of GPUs nor a gpu_data list"),
        (b"[" * 100000, "not valid JSON"),
        (b" " * (driver_amd.MAX_JSON_BYTES + 1), "over 8 MiB"),
    ],
)
def test_amd_smi_output_that_cannot_be_read_is_a_reason(data: bytes, why: str) -> None:
    answer = driver_amd.parse_amd_smi(data)
    assert isinstance(answer, str) and why in answer


def fake_tool(folder: Path, name: str, body: str) -> None:
    folder.mkdir(exist_ok=True)
    path = folder / name
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


def test_a_recording_amd_smi_is_asked_for_the_static_sections(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    record = tmp_path / "args"
    answer = tmp_path / "answer.json"
    answer.write_text(trees.amd_smi_static(["0000:05:00.0"]))
    fake_tool(tmp_path / "bin", "amd-smi", f'echo "$@" > {record}\ncat {answer}')
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    data = driver_amd.run_amd_smi()
    assert isinstance(data, bytes)
    assert record.read_text().split() == list(driver_amd.AMD_SMI_ARGS)
    report = driver_amd.parse_amd_smi(data)
    assert isinstance(report, driver_amd.DriverReport) and list(report.gpus) == ["0000:05:00.0"]


def test_a_hung_amd_smi_costs_its_timeout_not_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_tool(tmp_path / "bin", "amd-smi", "exec sleep 30")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr(driver_amd, "AMD_SMI_TIMEOUT_S", 1)
    assert driver_amd.run_amd_smi() == "amd-smi: no answer within 1 s"
    fake_tool(tmp_path / "bin", "amd-smi", "exit 3")
    assert driver_amd.run_amd_smi() == "amd-smi: exit status 3"
    monkeypatch.setenv("PATH", str(tmp_path / "nowhere"))
    assert driver_amd.run_amd_smi() == "amd-smi: not installed"


def test_the_ports_of_one_card_are_written_as_one_card(tmp_path: Path) -> None:
    """Issue 31's "the two ports of one card": two functions of one PCI device (a dual-port
    ConnectX) share a card name, which `gen check` holds to one NUMA node and one model."""
    box = trees.epyc_nps4()
    box.pci("0000:41:00.1", "15b3", "101d", "0x020000", node=1)
    box.nic("ens1f1np1", "0000:41:00.1", speed=200000)
    status, text, _ = detect(box.build(tmp_path / "tree"))
    assert status == 0
    by_name = {nic["name"]: nic for nic in yaml.safe_load(text)["nics"]}
    assert by_name["ens1np0"]["card"] == by_name["ens1f1np1"]["card"] == "0000-41-00"
    assert "card" not in by_name["ens2np0"]
    assert "PCI slot 0000:41:00, ports ens1f1np1, ens1np0" in text
    path = tmp_path / "detected.yaml"
    path.write_text(text)
    result = CliRunner().invoke(main, ["check", "--hw", str(path), "--profile", "training"])
    assert result.exit_code == 0, result.output


def test_snc3_over_cores_that_do_not_divide_is_written_node_by_node(tmp_path: Path) -> None:
    """Issue 31's uneven NUMA split: 2x 128 cores in SNC3 (43, 43, 42 per socket) was a
    description `gen check` refused; now it names each node's cores and is accepted."""
    sizes = [43, 43, 42] * 2
    nodes, first = {}, 0
    for node, size in enumerate(sizes):  # cores socket by socket, SMT siblings from 256
        nodes[node] = [*range(first, first + size), *range(256 + first, 256 + first + size)]
        first += size
    box = trees.FakeMachine(
        trees.x86_cpuinfo("GenuineIntel", "Intel(R) Xeon(R) 6980P"),
        2,
        128,
        2,
        nodes,
        1024 * trees.GIB,
    )
    status, text, errors = detect(box.build(tmp_path / "tree"))
    assert status == 0, errors
    data = yaml.safe_load(text)
    assert data["numa_nodes"] == 6 and data["cpu"]["cores_per_numa_node"] == [43, 43, 42]
    assert errors == ""  # gen check takes it: no warning
