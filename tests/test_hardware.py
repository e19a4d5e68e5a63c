"""The hardware description format: good and bad inputs, merging over reference systems."""

from __future__ import annotations

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
        {"os": {"page_size_kib": 64, "kernel": "6.8"}},
        lambda f: f.os.page_size_kib == 64 and f.os.kernel == (6, 8),
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
        load_facts(hw_with(write, {"gpus": [{"model": "L40", "count": 1}]}), CATALOG)
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
