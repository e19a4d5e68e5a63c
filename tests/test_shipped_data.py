"""Every shipped data file loads cleanly, carries sources, and names resolve one way only."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from generator.inputs.catalog import (
    _normalise,
    load_catalog,
    names_of,
)
from generator.inputs.catalog_schema import SCHEMAS
from generator.inputs.hardware import load_facts
from generator.inputs.profile import load_profile
from generator.inputs.schema import validate_model
from generator.inputs.yamlio import read_yaml_file
from tests.conftest import PROFILES, REPO, SYSTEMS

DB = REPO / "hardware_db"
ENTRY_FILES = [(kind, path) for kind in SCHEMAS for path in sorted((DB / kind).glob("*.yaml"))]
MODELS = SCHEMAS


@pytest.mark.parametrize("kind,path", ENTRY_FILES, ids=[f"{k}/{p.stem}" for k, p in ENTRY_FILES])
def test_catalog_entry_loads_and_cites_sources(kind: str, path: Path):
    entry = validate_model(MODELS[kind], read_yaml_file(path), str(path))
    assert entry.key == path.stem
    assert entry.source and all(len(line) > 10 for line in entry.source)


@pytest.mark.parametrize("system", SYSTEMS)
def test_reference_system_loads(system: str):
    facts, path = load_facts(system, load_catalog())
    assert facts.name == system
    assert read_yaml_file(path).get("source"), "a reference system cites its sources"


@pytest.mark.parametrize("profile", PROFILES)
def test_profile_loads(profile: str):
    resolved, _ = load_profile(profile)
    assert resolved.name == profile and resolved.description


# Family names several entries answer to on purpose: each is an error listing the candidates.
SHARED_ON_PURPOSE = {
    "gpus": {
        "a100": ["A100-PCIe-40GB", "A100-PCIe-80GB", "A100-SXM4-40GB", "A100-SXM4-80GB"],
        "h100": ["H100-NVL", "H100-PCIe", "H100-SXM5-80GB"],
    },
    "nics": {},
    "cpus": {},
}


@pytest.mark.parametrize("index", ["gpus", "nics", "cpus"])
def test_no_name_resolves_to_two_entries(index: str):
    entries = getattr(load_catalog(), index).entries
    names = Counter(n for e in entries for n in {_normalise(x) for x in names_of(e)})
    shared = {n for n, c in names.items() if c > 1}
    assert shared == set(SHARED_ON_PURPOSE[index])
    assert getattr(load_catalog(), index).shared_names == SHARED_ON_PURPOSE[index]


REQUIRED_GPUS = {
    "A100-SXM4-40GB",
    "A100-SXM4-80GB",
    "A100-PCIe-80GB",
    "A30",
    "A10",
    "L4",
    "L40S",
    "H100-SXM5-80GB",
    "H100-PCIe",
    "H100-NVL",
    "H200-SXM-141GB",
    "H200-NVL",
    "GH200",
    "B200",
    "GB200",
    # issue 31: platforms fleets buy in 2026
    "B300",
    "GB300",
    "RTX-PRO-6000-Server",
    "A100-PCIe-40GB",
    "L40",
}


def test_required_models_are_shipped():
    catalog = load_catalog()
    assert set(catalog.gpus.keys) >= REQUIRED_GPUS
    assert {
        "ConnectX-6",
        "ConnectX-6-Dx",
        "ConnectX-7",
        "ConnectX-8",
        "BlueField-3",
        "E810",
        "BCM57508",
    } <= set(catalog.nics.keys)
    assert {
        "Xeon-8480C",
        "Xeon-8570",
        "Xeon-6980P",
        "Xeon-6960P",
        "EPYC-7742",
        "EPYC-9654",
        "EPYC-9575F",
        "EPYC-9965",
        "Grace",
    } <= set(catalog.cpus.keys)
    assert {
        "dgx-a100",
        "dgx-h100",
        "dgx-h200",
        "dgx-b200",
        "hgx-h100-epyc",
        "l40s-4x-pcie",
        "l4-inference",
        "gh200",
    } <= set(SYSTEMS)
    assert {"inference", "training", "inference-latency", "training-multinode"} <= set(PROFILES)


def test_l4_and_l40s_never_confused():
    catalog = load_catalog()
    assert catalog.gpus.find("L4").key == "L4"
    assert catalog.gpus.find("l40s").key == "L40S"
    assert catalog.gpus.find("0x26b9").key == "L40S"
    assert catalog.gpus.find("0x27b8").key == "L4"


# issue 31: what lspci and nvidia-smi print for each new GPU finds its entry (pci.ids and the
# open-gpu-kernel-modules README's Compatible GPUs table), never a neighbour sharing a prefix
NEW_GPU_NAMES = {
    "B300": ["10de:3182", "NVIDIA B300 SXM6 AC"],
    "GB300": ["10de:31c2", "10de:31c3", "NVIDIA GB300"],
    "RTX-PRO-6000-Server": ["10de:2bb5", "NVIDIA RTX PRO 6000 Blackwell Server Edition"],
    "A100-PCIe-40GB": ["10de:20b1", "10de:20f1", "NVIDIA A100-PCIE-40GB"],
    "L40": ["10de:26b5", "NVIDIA L40"],
    # AMD Instinct MI300A, the APU (pci.ids 74a0; amd-smi static's PRODUCT_NAME); failed before:
    # no entry, and MI300X's must not answer for it
    "MI300A": ["1002:74a0", "0x74a0", "AMD Instinct MI300A", "Aqua Vanjaram [Instinct MI300A]"],
}


@pytest.mark.parametrize("key", sorted(NEW_GPU_NAMES))
def test_new_gpus_found_by_pci_id_and_driver_name(key: str) -> None:
    gpus = load_catalog().gpus
    for name in NEW_GPU_NAMES[key]:
        found = gpus.find(name)
        assert found is not None and found.key == key, name


def test_pollara_is_the_pensando_family_entry_by_name_and_pci_id() -> None:
    """Issue 40 item 6: every Pensando card shares 1dd8:1002 (pci.ids: the Pollara 400 is only
    subsystem 1dd8:5201), so the catalog holds one family entry with the facts the family shares,
    found by the Pollara's names and by the shared PCI id alike."""
    nics = load_catalog().nics
    pollara, by_id = nics.find("AMD Pensando Pollara 400"), nics.find("1dd8:1002")
    assert pollara is not None and pollara is by_id and pollara.key == "Pensando-ionic"
    assert (pollara.driver, pollara.rdma_driver, pollara.rdma, pollara.infiniband) == (
        "ionic",
        "ionic_rdma",
        True,
        False,
    )
    assert "subsystem" in pollara.notes and "1dd8:5201" in " ".join(pollara.source)


@pytest.mark.parametrize(
    ("system", "gpu", "cpu"),
    [("mi325x-8x-epyc", "MI325X", "EPYC-9575F"), ("mi355x-8x-epyc", "MI355X", "EPYC-9965")],
)
def test_mi325x_and_mi355x_systems_ship_on_epyc_9005(system: str, gpu: str, cpu: str) -> None:
    """Issue 40 item 1: 8-GPU MI325X and MI355X systems on EPYC 9005 (Turin), as AMD's
    acceptance pages and MLCommons' AMD systems have them."""
    facts, _ = load_facts(system, load_catalog())
    assert [(g.model.key, g.count) for g in facts.gpus] == [(gpu, 8)]
    assert facts.cpu.model is not None and facts.cpu.model.key == cpu
    assert facts.cpu.model.series == "EPYC 9005" and facts.cpu.model.x86_family == 0x1A
    assert len(facts.rdma_nics) == 8
