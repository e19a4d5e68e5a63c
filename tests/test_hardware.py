"""The hardware description format: good and bad inputs, merging over reference systems."""

from __future__ import annotations

import subprocess
import sys

import pytest
import yaml

from generator.errors import InputError
from generator.inputs.catalog import load_catalog
from generator.inputs.hardware import deep_merge, load_facts
from tests.conftest import MINIMAL_HW

CATALOG = load_catalog()


def hw_with(write, changes: dict | None = None, drop: tuple[str, ...] = ()) -> str:
    data = deep_merge(yaml.safe_load(MINIMAL_HW), changes or {})
    for key in drop:
        data.pop(key)
    return str(write("box.yaml", yaml.safe_dump(data)))


GOOD = [
    ("minimal", {}, lambda f: (f.name, f.gpu_count, f.numa_nodes) == ("box", 2, 2)),
    (
        "gpu by alias",
        {"gpus": [{"model": "nvidia l4", "count": 1}]},
        lambda f: f.gpus[0].model.key == "L4",
    ),
    (
        "gpu by pci id",
        {"gpus": [{"model": "0x2330", "count": 8}]},
        lambda f: f.gpus[0].model.key == "H100-SXM5-80GB",
    ),
    (
        "cpu model brings vendor and cores",
        {"cpu": {"model": "Xeon-8480C", "vendor": None, "cores_per_socket": None}},
        lambda f: (f.cpu.vendor, f.cpu.cores_per_socket) == ("intel", 56),
    ),
    (
        "numa per gpu",
        {"gpus": [{"model": "L4", "count": 2, "numa_nodes": [0, 1]}]},
        lambda f: f.gpus[0].numa_nodes == (0, 1),
    ),
    (
        "nic model brings rdma",
        {"nics": [{"name": "ib0", "model": "ConnectX-7", "role": "compute", "numa_node": 1}]},
        lambda f: f.nics[0].rdma and f.nics[0].speed_gbps == 400,
    ),
    (
        "rdma off explicitly",
        {"nics": [{"name": "ib0", "model": "ConnectX-7", "role": "compute", "rdma": False}]},
        lambda f: not f.nics[0].rdma,
    ),
    (
        "nvswitch default from 8 sxm",
        {"gpus": [{"model": "H100-SXM5-80GB", "count": 8}]},
        lambda f: f.nvswitch,
    ),
    ("no nvswitch for pcie", {"gpus": [{"model": "L40S", "count": 8}]}, lambda f: not f.nvswitch),
    (
        "npS4 numa",
        {"numa_nodes": 8},
        lambda f: f.numa_nodes == 8 and f.cpus_of_node(1) == [2, 3, 18, 19],
    ),
    ("name from file", {"name": "my-box"}, lambda f: f.name == "my-box"),
    ("no gpus", {"gpus": []}, lambda f: not f.has_gpus),
    (
        "64k pages",
        {"cpu": {"vendor": "ampere"}, "os": {"page_size_kib": 64, "kernel": "6.8"}},
        lambda f: f.os.page_size_kib == 64 and f.os.kernel == (6, 8),
    ),
    (
        "ampere is aarch64",
        {"cpu": {"vendor": "ampere"}},
        lambda f: (f.cpu.vendor, f.cpu.arch) == ("ampere", "aarch64"),
    ),
    (
        "graviton: other with arch",
        {"cpu": {"vendor": "other", "arch": "aarch64"}},
        lambda f: (f.cpu.vendor, f.cpu.arch) == ("other", "aarch64"),
    ),
    (
        "other x86",
        {"cpu": {"vendor": "other", "arch": "x86_64"}},
        lambda f: f.cpu.arch == "x86_64",
    ),
    (
        "grace by model",
        {"cpu": {"model": "Grace", "vendor": None, "cores_per_socket": None}},
        lambda f: (f.cpu.vendor, f.cpu.arch) == ("nvidia", "aarch64"),
    ),
    ("arch agrees with vendor", {"cpu": {"arch": "x86_64"}}, lambda f: f.cpu.arch == "x86_64"),
    (
        "gpu as nvidia-smi prints it",
        {"gpus": [{"model": "NVIDIA H100 80GB HBM3", "count": 8}]},
        lambda f: f.gpus[0].model.key == "H100-SXM5-80GB",
    ),
    (
        "gpu as lspci -nn prints it",
        {"gpus": [{"model": "10de:2330", "count": 8}]},
        lambda f: f.gpus[0].model.key == "H100-SXM5-80GB",
    ),
    (
        "gpu by vendor and name",
        {"gpus": [{"model": "NVIDIA B200", "count": 8}]},
        lambda f: f.gpus[0].model.key == "B200",
    ),
    (
        "nic by family name",
        {"nics": [{"name": "e0", "model": "Intel E810", "role": "frontend"}]},
        lambda f: f.nics[0].model is not None and f.nics[0].model.key == "E810",
    ),
    (
        "nic by vendor and part",
        {"nics": [{"name": "e0", "model": "Broadcom BCM57508", "role": "frontend"}]},
        lambda f: f.nics[0].model is not None and f.nics[0].model.key == "BCM57508",
    ),
    (
        "nic by pci id",
        {"nics": [{"name": "e0", "model": "15b3:1021", "role": "compute"}]},
        lambda f: f.nics[0].model is not None and f.nics[0].model.key == "ConnectX-7",
    ),
    (
        "L4 is L4, not L40S",
        {"gpus": [{"model": "l4", "count": 1}]},
        lambda f: f.gpus[0].model.key == "L4",
    ),
]


@pytest.mark.parametrize("label,changes,check", GOOD, ids=[g[0] for g in GOOD])
def test_good_hardware(write, label, changes, check):
    facts, _ = load_facts(hw_with(write, changes), CATALOG)
    assert check(facts)


BAD = [
    ("unknown key", {"colour": "red"}, "colour", "unknown field"),
    ("string for number", {"memory_gib": "256"}, "memory_gib", "expected int, got string"),
    ("negative ram", {"memory_gib": -1}, "memory_gib", "greater than or equal to 1"),
    ("absurd ram", {"memory_gib": 10**9}, "memory_gib", "less than or equal"),
    (
        "zero gpus",
        {"gpus": [{"model": "L4", "count": 0}]},
        "gpus[0].count",
        "greater than or equal to 1",
    ),
    (
        "billion gpus",
        {"gpus": [{"model": "L4", "count": 10**9}]},
        "gpus[0].count",
        "less than or equal",
    ),
    (
        "unknown gpu",
        {"gpus": [{"model": "H100-SXM", "count": 1}]},
        "gpus[0].model",
        "unknown GPU model",
    ),
    (
        "gpu count vs numa",
        {"gpus": [{"model": "L4", "count": 2, "numa_nodes": [0]}]},
        "gpus[0].numa_nodes",
        "one per GPU",
    ),
    (
        "gpu numa out of range",
        {"gpus": [{"model": "L4", "count": 1, "numa_nodes": [5]}]},
        "gpus[0].numa_nodes[0]",
        "out of range",
    ),
    (
        "nic numa out of range",
        {"nics": [{"name": "eth0", "numa_node": 2, "role": "frontend"}]},
        "nics[0].numa_node",
        "out of range",
    ),
    (
        "unknown nic",
        {"nics": [{"name": "eth0", "model": "ConnectX-9", "role": "frontend"}]},
        "nics[0].model",
        "unknown NIC model",
    ),
    ("unknown cpu", {"cpu": {"model": "Xeon 9999"}}, "cpu.model", "unknown CPU model"),
    (
        "vendor contradicts model",
        {"cpu": {"model": "EPYC-7742", "vendor": "intel"}},
        "cpu.vendor",
        "contradicts",
    ),
    ("no vendor", {"cpu": {"vendor": None}}, "cpu.vendor", "required"),
    ("other without arch", {"cpu": {"vendor": "other"}}, "cpu.arch", "required when"),
    ("unknown vendor", {"cpu": {"vendor": "arm"}}, "cpu.vendor", "invalid value 'arm'"),
    ("arm64 is not an arch", {"cpu": {"arch": "arm64"}}, "cpu.arch", "invalid value"),
    (
        "intel is not aarch64",
        {"cpu": {"arch": "aarch64"}},
        "cpu.arch",
        "contradicts vendor intel (x86_64 only)",
    ),
    (
        "grace is not x86",
        {"cpu": {"model": "Grace", "vendor": None, "arch": "x86_64"}},
        "cpu.arch",
        "contradicts model Grace (aarch64)",
    ),
    (
        "64k pages on x86",
        {"os": {"page_size_kib": 64}},
        "os.page_size_kib",
        "64 KiB pages do not exist on x86_64",
    ),
    (
        "16k pages on x86",
        {"cpu": {"vendor": "other", "arch": "x86_64"}, "os": {"page_size_kib": 16}},
        "os.page_size_kib",
        "do not exist on x86_64",
    ),
    ("kernel not whole", {"os": {"kernel": "6"}}, "os.kernel", "invalid value"),
    ("kernel with junk", {"os": {"kernel": "6.8 junk"}}, "os.kernel", "invalid value"),
    (
        "ambiguous gpu family",
        {"gpus": [{"model": "H100", "count": 1}]},
        "gpus[0].model",
        "'H100' could be any of H100-NVL, H100-PCIe, H100-SXM5-80GB",
    ),
    (
        # L40 is a model of its own now (issue 31); "RTX PRO 6000" is a prefix of the Server
        # Edition's name and must not find it (the Workstation editions share the prefix)
        "no substring match",
        {"gpus": [{"model": "RTX PRO 6000", "count": 1}]},
        "gpus[0].model",
        "unknown GPU model 'RTX PRO 6000'",
    ),
    (
        "pci id of another vendor",
        {"gpus": [{"model": "8086:2330", "count": 1}]},
        "gpus[0].model",
        "unknown GPU model",
    ),
    (
        "pci id the catalog lacks names the entry to add, not a list of names",
        {"gpus": [{"model": "10de:9999", "count": 1}]},
        "gpus[0].model",
        "no catalog entry has this PCI id: add one to hardware_db/gpus/",
    ),
    (
        "nic pci id the catalog lacks",
        {"nics": [{"name": "eth0", "role": "frontend", "model": "15b3:ffff"}]},
        "nics[0].model",
        "add one to hardware_db/nics/ (pci_ids)",
    ),
    (
        "duplicate nic",
        {"nics": [{"name": "eth0", "role": "frontend"}, {"name": "eth0", "role": "storage"}]},
        "nics[1].name",
        "duplicate",
    ),
    (
        "nic semicolon",
        {"nics": [{"name": "eth0;reboot", "role": "frontend"}]},
        "nics[0].name",
        "invalid value",
    ),
    (
        "nic subshell",
        {"nics": [{"name": "$(reboot)", "role": "frontend"}]},
        "nics[0].name",
        "invalid value",
    ),
    (
        "nic backtick",
        {"nics": [{"name": "`id`", "role": "frontend"}]},
        "nics[0].name",
        "invalid value",
    ),
    (
        "nic slash",
        {"nics": [{"name": "../etc", "role": "frontend"}]},
        "nics[0].name",
        "invalid value",
    ),
    (
        "nic space",
        {"nics": [{"name": "eth 0", "role": "frontend"}]},
        "nics[0].name",
        "invalid value",
    ),
    (
        "nic too long",
        {"nics": [{"name": "a" * 16, "role": "frontend"}]},
        "nics[0].name",
        "invalid value",
    ),
    (
        "nic speed above model",
        {"nics": [{"name": "e", "model": "E810", "speed_gbps": 400, "role": "frontend"}]},
        "nics[0].speed_gbps",
        "exceeds",
    ),
    # issue 40 item 6: the Pensando family entry holds the family's fastest board (400G)
    (
        "pollara above the family maximum",
        {"nics": [{"name": "e", "model": "Pollara 400", "speed_gbps": 800, "role": "compute"}]},
        "nics[0].speed_gbps",
        "exceeds the Pensando-ionic maximum of 400",
    ),
    ("bad role", {"nics": [{"name": "e", "role": "gpu"}]}, "nics[0].role", "invalid value 'gpu'"),
    ("numa not multiple of sockets", {"numa_nodes": 3}, "numa_nodes", "not a multiple"),
    ("unknown system", {"system": "dgx-z900"}, "system", "unknown reference system"),
    (
        "bad disk kind",
        {"disks": [{"name": "sda", "kind": "tape"}]},
        "disks[0].kind",
        "invalid value",
    ),
]


@pytest.mark.parametrize("label,changes,path,message", BAD, ids=[b[0] for b in BAD])
def test_bad_hardware_names_the_field(write, label, changes, path, message):
    with pytest.raises(InputError) as caught:
        load_facts(hw_with(write, changes), CATALOG)
    matching = [p for p in caught.value.problems if p.path == path]
    assert matching, [str(p) for p in caught.value.problems]
    assert message in str(matching[0])
    assert matching[0].source.endswith("box.yaml")


def test_misspelt_gpu_gets_a_hint(write):
    with pytest.raises(InputError) as caught:
        load_facts(hw_with(write, {"gpus": [{"model": "L40SS", "count": 1}]}), CATALOG)
    assert "did you mean" in str(caught.value) and "L40S" in str(caught.value)


def test_missing_required_fields(write):
    with pytest.raises(InputError) as caught:
        load_facts(hw_with(write, drop=("cpu", "memory_gib")), CATALOG)
    assert {p.path for p in caught.value.problems} == {"cpu", "memory_gib"}


def test_system_merge_overrides_and_replaces_lists(write):
    path = write(
        "mine.yaml",
        """\
        system: dgx-h100
        memory_gib: 4096
        cpu: {sockets: 2}
        nics:
          - {name: ib0, model: ConnectX-7, numa_node: 1, role: compute}
        """,
    )
    facts, _ = load_facts(str(path), CATALOG)
    assert facts.name == "mine"
    assert facts.memory_gib == 4096
    assert facts.cpu.cores_per_socket == 56  # kept from the reference system's CPU model
    assert [n.name for n in facts.nics] == ["ib0"]  # lists replace
    assert facts.gpu_count == 8 and facts.nvswitch


def test_shipped_system_by_name():
    facts, path = load_facts("dgx-h100", CATALOG)
    assert path.name == "dgx-h100.yaml" and facts.name == "dgx-h100"


def test_unknown_shipped_name_hints():
    with pytest.raises(InputError, match="did you mean dgx-h100"):
        load_facts("dgx-h10", CATALOG)


def test_deep_merge():
    assert deep_merge({"a": {"b": 1, "c": 2}, "l": [1]}, {"a": {"c": 3}, "l": [2]}) == {
        "a": {"b": 1, "c": 3},
        "l": [2],
    }


@pytest.mark.parametrize(
    "changes,path,hint",
    [
        ({"memory_gb": 64}, "memory_gb", "did you mean memory_gib?"),
        ({"cpu": {"thread_per_core": 2}}, "cpu.thread_per_core", "did you mean threads_per_core?"),
        (
            {"nics": [{"name": "e", "role": "frontend", "sped_gbps": 10}]},
            "nics[0].sped_gbps",
            "did you mean speed_gbps?",
        ),
        ({"colour": "red"}, "colour", ""),
    ],
)
def test_unknown_field_hints_the_nearest_known_one(write, changes, path, hint):
    with pytest.raises(InputError) as caught:
        load_facts(hw_with(write, changes), CATALOG)
    [problem] = [p for p in caught.value.problems if p.path == path]
    assert problem.message == "unknown field" and problem.hint == hint


OVERLAYS = [
    (
        "change one nic by name",
        "nics: {ibp24s0: {speed_gbps: 200}}",
        lambda f: (
            (len(f.nics), f.nics[0].name, f.nics[0].speed_gbps) == (14, "ibp24s0", 200)
            and f.nics[1].speed_gbps == 400
        ),
    ),
    (
        "rename one nic, in place",
        "nics: {ibp24s0: {name: ib0}}",
        lambda f: [n.name for n in f.nics][:2] == ["ib0", "ibp64s0"] and len(f.nics) == 14,
    ),
    (
        "remove one nic",
        "nics: {ibp24s0: {remove: true}}",
        lambda f: len(f.nics) == 13 and "ibp24s0" not in [n.name for n in f.nics],
    ),
    (
        "add one nic at the end",
        "nics: {eth9: {role: management, speed_gbps: 1}}",
        lambda f: len(f.nics) == 15 and f.nics[-1].name == "eth9",
    ),
    (
        "change a disk by name",
        "disks: {nvme2n1: {role: data}}",
        lambda f: [d.role for d in f.disks][:4] == ["os", "os", "data", "cache"],
    ),
    (
        "a list still replaces",
        "nics: [{name: ib0, role: compute}]",
        lambda f: [n.name for n in f.nics] == ["ib0"],
    ),
    ("overlay without cpu", "memory_gib: 1024", lambda f: f.cpu.sockets == 2),
]


@pytest.mark.parametrize("label,text,check", OVERLAYS, ids=[o[0] for o in OVERLAYS])
def test_overlay_edits_lists_by_name(write, label, text, check):
    facts, _ = load_facts(str(write("mine.yaml", f"system: dgx-h100\n{text}\n")), CATALOG)
    assert check(facts), [(n.name, n.speed_gbps) for n in facts.nics]


BAD_OVERLAYS = [
    ("remove a name not there", "nics: {ibp25s0: {remove: true}}", "nics.ibp25s0", "no nics item"),
    ("remove is alone", "nics: {ibp24s0: {remove: true, role: storage}}", "nics.ibp24s0", "alone"),
    ("edit not a mapping", "nics: {ibp24s0: 200}", "nics.ibp24s0", "expected a mapping"),
    ("new nic lacks role", "nics: {eth9: {speed_gbps: 1}}", "nics[14].role", "required"),
    ("rename onto another", "nics: {ibp24s0: {name: ibp64s0}}", "nics[1].name", "duplicate"),
]


@pytest.mark.parametrize("label,text,path,message", BAD_OVERLAYS, ids=[b[0] for b in BAD_OVERLAYS])
def test_bad_overlay_names_the_field(write, label, text, path, message):
    with pytest.raises(InputError) as caught:
        load_facts(str(write("mine.yaml", f"system: dgx-h100\n{text}\n")), CATALOG)
    matching = [p for p in caught.value.problems if p.path == path]
    assert matching and message in str(matching[0]), [str(p) for p in caught.value.problems]


def test_edits_by_name_need_a_reference_system(write):
    with pytest.raises(InputError) as caught:
        load_facts(hw_with(write, {"nics": {"eth0": {"speed_gbps": 10}}}), CATALOG)
    assert [p.path for p in caught.value.problems] == ["nics"]
    assert "edits a reference system's list" in str(caught.value)


def test_the_default_os_builds_no_validator_of_its_own():
    """A file without ``os:`` gets OsSpec's defaults without building OsSpec's validator: one
    schema build per input model and run (the cold run's CPU, issue 17)."""
    code = (
        "from generator.inputs.catalog import load_catalog\n"
        "from generator.inputs.hardware import load_facts\n"
        "from generator.inputs.hardware_spec import OsSpec\n"
        "facts, _ = load_facts('dgx-h100', load_catalog())\n"
        "assert (facts.os.page_size_kib, facts.os.distro, facts.os.kernel) == (4, None, None)\n"
        "print(OsSpec.__pydantic_complete__)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["False"]
