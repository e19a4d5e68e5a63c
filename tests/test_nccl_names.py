"""NCCL is pinned only to names the hardware file states as real (issue 26 item 5).

NCCL_SOCKET_IFNAME that matches no interface fails every job's bootstrap ("Bootstrap : no socket
interface found", NVIDIA/nccl src/bootstrap.cc); NCCL_IB_HCA that matches no HCA moves the
collectives onto TCP sockets without an error. On main, shipped training bundles pinned both to
names their own system files call placeholders, so the first test failed there.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from generator.commands.generate import plan_for
from generator.inputs.catalog import load_catalog
from generator.inputs.hardware import load_facts
from generator.model.nccl_boot import at_boot
from tests.conftest import PROFILES, SYSTEMS

PINNED_LISTS = {"NCCL_SOCKET_IFNAME": "name", "NCCL_IB_HCA": "rdma_device"}


def listed_names(value: str) -> list[str]:
    """The names in an NCCL list: without its ^ and = marks, each entry without its :port."""
    return [entry.split(":")[0] for entry in value.lstrip("^").lstrip("=").split(",")]


def pinned(hardware: str, profile: str) -> dict[str, list[str]]:
    """The names each list pins; a list resolved at boot (issue 38) names none here."""
    plan = plan_for(hardware, profile)
    return {
        setting.key: [] if at_boot(setting.value) else listed_names(setting.value)
        for setting in plan.settings
        if setting.kind == "nccl" and setting.key in PINNED_LISTS
    }


@pytest.mark.parametrize("profile", PROFILES)
@pytest.mark.parametrize("system", SYSTEMS)
def test_no_shipped_bundle_pins_a_name_its_hardware_file_does_not_state_as_real(
    system: str, profile: str
) -> None:
    facts, _ = load_facts(system, load_catalog())
    for key, names in pinned(system, profile).items():
        field = PINNED_LISTS[key]
        real = {getattr(nic, field) for nic in facts.nics if getattr(nic, "names_real", False)}
        assert set(names) <= real, f"{key} names {sorted(set(names) - real)}, not stated as real"


def test_the_dgx_h100_user_guide_names_are_pinned_its_placeholders_are_not() -> None:
    """The compute names the DGX H100 User Guide gives are real; the front end's is not."""
    lists = pinned("dgx-h100", "training-multinode")
    assert lists == {
        "NCCL_IB_HCA": [
            "mlx5_0",
            "mlx5_3",
            "mlx5_4",
            "mlx5_5",
            "mlx5_6",
            "mlx5_9",
            "mlx5_10",
            "mlx5_11",
        ]
    }
    notes = [note.text for note in plan_for("dgx-h100", "training-multinode").notes]
    assert any(
        "NCCL_SOCKET_IFNAME not written: the frontend NIC name(s) ens3f0np0 are not stated" in text
        for text in notes
    )


def test_a_user_marked_overlay_pins_and_a_rename_alone_does_not(tmp_path: Path) -> None:
    """names_real on an overlay's NIC pins it; renaming a NIC without saying so leaves its new
    name unstated, even where the reference's name was real."""
    marked = tmp_path / "marked.yaml"
    marked.write_text(
        "system: dgx-h100\nnics:\n  ens3f0np0: {name: bond0, names_real: true}\n"
        "  ibp24s0: {rdma_device: mlx5_7}\n"
    )
    lists = pinned(str(marked), "training")
    assert lists["NCCL_SOCKET_IFNAME"] == ["bond0"]
    # ibp24s0's new rdma_device is the overlay's, unmarked: no name pinned, the list is found
    # at boot instead (issue 38)
    assert lists["NCCL_IB_HCA"] == []
    facts, _ = load_facts(str(marked), load_catalog())
    by_name = {nic.name: nic for nic in facts.nics}
    assert by_name["bond0"].names_real and not by_name["ibp24s0"].names_real
    assert by_name["ibp64s0"].names_real  # untouched: the reference's word stands
