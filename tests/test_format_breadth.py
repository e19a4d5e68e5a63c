"""What real machines have and the hardware format could not say before issue 31: SMT whose
state the BIOS decides, NUMA nodes of uneven size, PCIe GPUs paired by NVLink bridges, the ports
of one NIC card; and the refusal of an unknown GPU by PCI id, which says how to add it.

Each test fails on main: the fields did not exist (a strict model refused them), an uneven
split was refused outright, and the refusal named only the folder."""

from __future__ import annotations

from typing import Any

import pytest
from rules.helpers import hardware

from generator.errors import InputError
from generator.inputs.catalog import load_catalog
from generator.inputs.facts import Facts
from generator.inputs.hardware import resolve_facts
from generator.inputs.hardware_spec import HardwareSpec
from generator.inputs.schema import validate_model

CATALOG = load_catalog()


def resolved(cpu: dict[str, Any] | None = None, **fields: Any) -> Facts:
    """The test machine with ``fields``; ``cpu`` replaces its cpu mapping whole."""
    data = hardware(**fields)
    if cpu is not None:
        data["cpu"] = cpu
    spec = validate_model(HardwareSpec, data, "test.yaml")
    return resolve_facts(spec, CATALOG, "test.yaml")


def refused(cpu: dict[str, Any] | None = None, **fields: Any) -> str:
    with pytest.raises(InputError) as raised:
        resolved(cpu, **fields)
    return "\n".join(raised.value.lines())


XEON_6980P = {"model": "Xeon-6980P", "sockets": 2}  # 128 cores, SMT2 in the catalog


# --- SMT the BIOS decides ----------------------------------------------------------------------


def test_smt_bios_keeps_the_thread_count_unknown_where_the_model_gives_it() -> None:
    assert resolved(cpu=XEON_6980P).cpu.threads_known  # the catalog's 2
    facts = resolved(cpu={**XEON_6980P, "smt": "bios"})
    assert not facts.cpu.threads_known and facts.cpu.threads_per_core == 1
    off = resolved(cpu={**XEON_6980P, "smt": "disabled"}).cpu
    assert (off.threads_per_core, off.threads_known) == (1, True)
    on = resolved(cpu={**XEON_6980P, "smt": "enabled"}).cpu
    assert (on.threads_per_core, on.threads_known) == (2, True)


@pytest.mark.parametrize(
    ("cpu", "message"),
    [
        ({**XEON_6980P, "smt": "bios", "threads_per_core": 2}, "bios says the BIOS decides"),
        ({**XEON_6980P, "smt": "disabled", "threads_per_core": 2}, "SMT disabled means 1 thread"),
        (
            {**XEON_6980P, "smt": "enabled", "threads_per_core": 1},
            "SMT enabled, but threads_per_core is 1",
        ),
        ({"model": "Grace", "sockets": 1, "smt": "bios"}, "Grace has no SMT"),
        ({"model": "Grace", "sockets": 1, "smt": "enabled"}, "SMT enabled, but Grace has 1 thread"),
    ],
)
def test_smt_that_contradicts_the_threads_is_refused(cpu: dict[str, Any], message: str) -> None:
    assert f"cpu.smt: {message}" in refused(cpu=cpu)


# --- uneven NUMA splits ------------------------------------------------------------------------


def test_snc3_over_128_cores_is_described_node_by_node() -> None:
    facts = resolved(cpu={**XEON_6980P, "cores_per_numa_node": [43, 43, 42]}, numa_nodes=6)
    assert facts.cpu.cores_per_node == (43, 43, 42)
    # cores of socket 0 are 0-127, of socket 1 128-255; their SMT siblings follow from 256
    assert facts.cpulist_of_node(0) == "0-42,256-298"
    assert facts.cpulist_of_node(2) == "86-127,342-383"
    assert facts.cpulist_of_node(3) == "128-170,384-426"
    every = sorted(cpu for node in range(6) for cpu in facts.cpus_of_node(node))
    assert every == list(range(facts.cpu.logical_cpus))


def test_an_even_split_is_what_it_was() -> None:
    facts = resolved(cpu={"model": "EPYC-9654", "sockets": 2}, numa_nodes=8)
    assert facts.cpu.cores_per_node is None
    assert facts.cpulist_of_node(1) == "24-47,216-239"


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        (
            {"numa_nodes": 6},
            "numa_nodes: 6 nodes do not split 128 cores per socket evenly (give "
            "cpu.cores_per_numa_node",
        ),
        ({"numa_nodes": 6, "cores_per_numa_node": [64, 64]}, "lists 2 nodes; a socket has 3"),
        ({"numa_nodes": 6, "cores_per_numa_node": [43, 43, 43]}, "adds up to 129 cores"),
    ],
)
def test_an_uneven_split_that_does_not_add_up_is_refused(
    fields: dict[str, Any], message: str
) -> None:
    split = {"cores_per_numa_node": fields.pop("cores_per_numa_node")} if len(fields) > 1 else {}
    assert message in refused(cpu={**XEON_6980P, **split}, **fields)


# --- NVLink bridges of PCIe cards -------------------------------------------------------------


def test_nvlink_bridges_name_which_pcie_cards_are_paired() -> None:
    gpus = [{"model": "H100-NVL", "count": 4, "nvlink_bridges": [[0, 1], [2, 3]]}]
    assert resolved(gpus=gpus).gpus[0].nvlink_bridges == ((0, 1), (2, 3))
    assert resolved(gpus=[{"model": "H100-NVL", "count": 4}]).gpus[0].nvlink_bridges == ()


@pytest.mark.parametrize(
    ("gpu", "message"),
    [
        ({"model": "H100-NVL", "count": 2, "nvlink_bridges": [[0, 2]]}, "GPU 2 out of range"),
        (
            {"model": "H100-NVL", "count": 4, "nvlink_bridges": [[0, 1], [1, 2]]},
            "GPU 1 is in two bridges",
        ),
        ({"model": "H100-NVL", "count": 2, "nvlink_bridges": [[1, 1]]}, "bridges a GPU to itself"),
        (
            {"model": "H100-SXM5-80GB", "count": 8, "nvlink_bridges": [[0, 1]]},
            "is sxm: its NVLink is on the board",
        ),
        ({"model": "L4", "count": 2, "nvlink_bridges": [[0, 1]]}, "L4 has no NVLink"),
    ],
)
def test_a_bridge_that_cannot_be_is_refused(gpu: dict[str, Any], message: str) -> None:
    assert message in refused(gpus=[gpu])


def test_a_bridge_is_a_pair() -> None:
    with pytest.raises(InputError, match="nvlink_bridges"):
        resolved(gpus=[{"model": "H100-NVL", "count": 4, "nvlink_bridges": [[0, 1, 2]]}])


# --- the ports of one NIC card -----------------------------------------------------------------


def port(name: str, **fields: Any) -> dict[str, Any]:
    return {"name": name, "role": "compute", "model": "ConnectX-7", "numa_node": 0, **fields}


def test_the_two_ports_of_one_card_share_a_card_name() -> None:
    nics = [port("ens1f0np0", card="slot1"), port("ens1f1np1", card="slot1"), port("ens2np0")]
    facts = resolved(nics=nics)
    assert [nic.card for nic in facts.nics] == ["slot1", "slot1", None]


def test_ports_of_one_card_in_two_slots_are_refused() -> None:
    nics = [port("ens1f0np0", card="slot1"), port("ens1f1np1", card="slot1", numa_node=1)]
    text = refused(nics=nics, numa_nodes=2, cpu={"model": "EPYC-9654", "sockets": 2})
    assert "nics[1].numa_node: NUMA node 1, but ens1f0np0 on card 'slot1' is on 0" in text
    nics = [port("ens1f0np0", card="slot1"), port("ens1f1np1", card="slot1", model="E810")]
    assert "nics[1].model: E810, but ens1f0np0 on card 'slot1' is ConnectX-7" in refused(nics=nics)
    with pytest.raises(InputError, match="card"):
        resolved(nics=[port("ens1f0np0", card="slot 1")])


# --- an unknown GPU by PCI id --------------------------------------------------------------------


@pytest.mark.parametrize("pci_id", ["10de:3180", "1002:74ff", "0x3180"])
def test_an_unknown_gpu_by_pci_id_says_which_fields_to_add_and_where_to_find_them(
    pci_id: str,
) -> None:
    text = refused(gpus=[{"model": pci_id, "count": 1}])
    assert f"gpus[0].model: unknown GPU model '{pci_id}'" in text
    assert "add one to hardware_db/gpus/ (pci_device_ids) listing it" in text
    for field in ("key", "name", "vendor", "pci_device_ids", "architecture", "form_factor"):
        assert field in text
    assert "pciutils/pciids" in text and "nvidia-smi -q" in text and "amd-smi static" in text
    assert "H100" not in text  # no list of known names: the fix is an entry, not a rename


def test_smt_words_survive_yaml() -> None:
    """on/off would reach the model as booleans (YAML 1.1): the words are enabled, disabled,
    bios, read here through the loader `gen check` uses."""
    from generator.inputs.yamlio import parse_yaml_text

    for word in ("enabled", "disabled", "bios"):
        data = parse_yaml_text(f"cpu: {{model: Xeon-6980P, sockets: 2, smt: {word}}}\n", "t")
        assert resolved(cpu=data["cpu"]).cpu.threads_known == (word != "bios")
