"""irq.*: fast NICs' interrupts pinned to the NIC's NUMA node (never the first core, compressed)
xor irqbalance."""

from __future__ import annotations

from typing import Any

import pytest

from generator.model.setting import Setting
from generator.rules import irq

from .helpers import (
    DUAL_EPYC,
    DUAL_XEON,
    GRACE,
    Case,
    case_ids,
    check_case,
    facts,
    nic,
    notes_of,
    profile,
    rdma_compute,
    settings_of,
)

PINNING = {
    ("service", "irqbalance.service", "disable"),
    ("service", "goldtune-irq-affinity.service", "enable"),
}
IRQBALANCE: dict[str, Any] = {"irq": "irqbalance"}
NOSMT: dict[str, Any] = {"smt": "disable"}
# 2 x 60 cores (Xeon-8570, DGX B200), threads_per_core in neither the file nor hardware_db
UNKNOWN_THREADS: dict[str, Any] = {
    "cpu": {"model": "Xeon-8570", "sockets": 2, "cores_per_socket": 60, "threads_per_core": None}
}
DUAL_32_NO_SMT = {"cpu": {"sockets": 2, "cores_per_socket": 32, "threads_per_core": 1}}
ONE_16X2 = {"cpu": {"cores_per_socket": 16}}
EPYC_NPS4 = {**DUAL_EPYC, "numa_nodes": 8}  # 2 x 96 cores x 2 threads, 24 cores per node
# one core per NUMA node: node 0 holds only the first core (CPUs 0 and 2)
ONE_CORE_PER_NODE = {
    "cpu": {"sockets": 1, "cores_per_socket": 2, "threads_per_core": 2},
    "numa_nodes": 2,
}
LEFT_TO_KERNEL = "interrupts are left to the kernel and irqbalance"
ONLY_FIRST_CORE = "no CPU besides the first core"
SHAPES: dict[str, dict[str, Any]] = {
    "xeon": DUAL_XEON,
    "epyc-nps4": EPYC_NPS4,
    "2s-no-smt": DUAL_32_NO_SMT,
    "1s-smt": ONE_16X2,
    "grace": GRACE,
}


def pin(name: str, cpus: str) -> tuple[str, str, str]:
    return ("irq", name, cpus)


CASES: tuple[Case, ...] = (
    # Every list is resolved at boot from the device (irq-affinity, tests/test_scripts.py on
    # fake sysfs trees of the usual and the round-robin numbering): the rule says which NICs,
    # never which CPUs
    Case(
        "xeon-node0",
        irq.pin_nics,
        {pin("ib0", "local")},
        hw={**DUAL_XEON, "nics": [rdma_compute("ib0", numa=0)]},
    ),
    Case(
        "xeon-node1",
        irq.pin_nics,
        {pin("ib1", "local")},
        hw={**DUAL_XEON, "nics": [rdma_compute("ib1", numa=1)]},
    ),
    Case(
        "xeon-both-nodes",
        irq.pin_nics,
        {pin("ib0", "local"), pin("ib1", "local")},
        hw={**DUAL_XEON, "nics": [rdma_compute("ib0", numa=0), rdma_compute("ib1", numa=1)]},
    ),
    Case(
        "one-socket-smt-first-core-siblings-excluded",
        irq.pin_nics,
        {pin("eth0", "local")},
        hw={**ONE_16X2, "nics": [nic("eth0", "frontend", 100, numa=0)]},
    ),
    Case(
        "two-sockets-no-smt",
        irq.pin_nics,
        {pin("ib0", "local"), pin("ib1", "local")},
        hw={**DUAL_32_NO_SMT, "nics": [rdma_compute("ib0", numa=0), rdma_compute("ib1", numa=1)]},
    ),
    Case(
        "epyc-nps4",
        irq.pin_nics,
        {pin("ib0", "local"), pin("ib5", "local")},
        hw={**EPYC_NPS4, "nics": [rdma_compute("ib0", numa=0), rdma_compute("ib5", numa=5)]},
    ),
    Case(
        "grace",
        irq.pin_nics,
        {pin("ib0", "local")},
        hw={**GRACE, "nics": [rdma_compute("ib0", numa=0)]},
    ),
    # which NICs: every RDMA or >= 100 Gbit/s NIC
    Case(
        "slow-rdma-pinned",
        irq.pin_nics,
        {pin("ib0", "local")},
        hw={**DUAL_XEON, "nics": [rdma_compute("ib0", speed=25, numa=0)]},
    ),
    Case(
        "fast-tcp-pinned",
        irq.pin_nics,
        {pin("eth0", "local")},
        hw={**DUAL_XEON, "nics": [nic("eth0", "storage", 200, rdma=False, numa=1)]},
    ),
    Case(
        "slow-tcp-not-pinned",
        irq.pin_nics,
        set(),
        hw={**DUAL_XEON, "nics": [nic("eth0", "frontend", 25, numa=0)]},
    ),
    Case(
        "only-fast-nics-pinned",
        irq.pin_nics,
        {pin("ib0", "local")},
        hw={
            **DUAL_XEON,
            "nics": [
                rdma_compute("ib0", numa=0),
                nic("eth0", "frontend", 25, numa=1),
                nic("eno1", "management", 1, numa=0),
            ],
        },
    ),
    # no numa_node: resolved at boot from the device's local_cpulist (never every CPU, which
    # undoes the driver's NUMA-local queue spread), and the reason says so
    Case(
        "no-numa-node-resolved-at-boot",
        irq.pin_nics,
        {pin("ib0", "local")},
        hw={**DUAL_XEON, "nics": [rdma_compute("ib0", numa=None)]},
    ),
    Case(
        "no-numa-node-epyc-nps4",
        irq.pin_nics,
        {pin("ib0", "local")},
        hw={**EPYC_NPS4, "nics": [rdma_compute("ib0", numa=None)]},
    ),
    Case(
        "no-numa-node-one-socket",
        irq.pin_nics,
        {pin("eth0", "local")},
        hw={**ONE_16X2, "nics": [nic("eth0", "frontend", 100)]},
    ),
    Case(
        "no-numa-node-next-to-a-placed-nic",
        irq.pin_nics,
        {pin("ib0", "local"), pin("ib1", "local")},
        hw={**DUAL_XEON, "nics": [rdma_compute("ib0", numa=0), rdma_compute("ib1", numa=None)]},
    ),
    # threads_per_core unknown (Xeon-8570 in hardware_db, none in the file): which CPUs are
    # siblings is not guessed, the list is resolved at boot
    Case(
        "threads-unknown-resolved-at-boot",
        irq.pin_nics,
        {pin("ib0", "local"), pin("ib1", "local")},
        hw={
            "cpu": {**UNKNOWN_THREADS["cpu"]},
            "nics": [rdma_compute("ib0", numa=0), rdma_compute("ib1", numa=1)],
        },
    ),
    # nosmt: the siblings that go offline are not in the lists
    Case(
        "nosmt-drops-the-siblings",
        irq.pin_nics,
        {pin("ib0", "local"), pin("ib1", "local")},
        hw={**DUAL_XEON, "nics": [rdma_compute("ib0", numa=0), rdma_compute("ib1", numa=1)]},
        knobs=NOSMT,
    ),
    Case(
        "nosmt-epyc-nps4",
        irq.pin_nics,
        {pin("ib0", "local"), pin("ib5", "local")},
        hw={**EPYC_NPS4, "nics": [rdma_compute("ib0", numa=0), rdma_compute("ib5", numa=5)]},
        knobs=NOSMT,
    ),
    # Arm with SMT: the plan drops nosmt there (x86 only), so the siblings stay in the list
    Case(
        "nosmt-on-arm-keeps-the-siblings",
        irq.pin_nics,
        {pin("ib0", "local")},
        hw={
            "cpu": {"vendor": "nvidia", "sockets": 1, "cores_per_socket": 4, "threads_per_core": 2},
            "nics": [rdma_compute("ib0", numa=0)],
        },
        knobs=NOSMT,
    ),
    Case(
        "nosmt-without-smt-changes-nothing",
        irq.pin_nics,
        {pin("ib0", "local"), pin("ib1", "local")},
        hw={**DUAL_32_NO_SMT, "nics": [rdma_compute("ib0", numa=0), rdma_compute("ib1", numa=1)]},
        knobs=NOSMT,
    ),
    # a node with nothing besides the first core: a note, not a setting
    Case(
        "node-with-only-the-first-core-note",
        irq.pin_nics,
        set(),
        hw={**ONE_CORE_PER_NODE, "nics": [rdma_compute("ib0", numa=0)]},
        note=f"ib0: its NUMA node has {ONLY_FIRST_CORE}",
    ),
    Case(
        "node-with-only-the-first-core-nothing-pinned",
        irq.pin_nics,
        set(),
        hw={
            **ONE_CORE_PER_NODE,
            "nics": [rdma_compute("ib0", numa=0), rdma_compute("ib1", numa=1)],
        },
        note=f"ib0: its NUMA node has {ONLY_FIRST_CORE}",
    ),
    Case(
        "single-cpu-no-numa-node-note",
        irq.pin_nics,
        set(),
        hw={
            "cpu": {"sockets": 1, "cores_per_socket": 1, "threads_per_core": 1},
            "nics": [rdma_compute("ib0", numa=None)],
        },
        note=f"ib0: its NUMA node has {ONLY_FIRST_CORE}",
    ),
    Case(
        "irqbalance-profile",
        irq.pin_nics,
        set(),
        hw={**DUAL_XEON, "nics": [rdma_compute("ib0", numa=0)]},
        knobs=IRQBALANCE,
    ),
    Case(
        "irqbalance-profile-no-numa-node",
        irq.pin_nics,
        set(),
        hw={**DUAL_XEON, "nics": [rdma_compute("ib0", numa=None)]},
        knobs=IRQBALANCE,
    ),
    Case("no-nic", irq.pin_nics, set()),
    # irqbalance: disabled only when something is pinned; enabled when the profile chooses it;
    # otherwise a note says interrupts stay with the kernel and irqbalance
    Case(
        "irqbalance-off-when-pinning",
        irq.irqbalance,
        PINNING,
        hw={**DUAL_XEON, "nics": [rdma_compute("ib0", numa=0)]},
    ),
    Case(
        "irqbalance-off-no-numa-node",
        irq.irqbalance,
        PINNING,
        hw={**DUAL_XEON, "nics": [rdma_compute("ib0", numa=None)]},
    ),
    Case(
        "irqbalance-untouched-nothing-pinned",
        irq.irqbalance,
        set(),
        hw={**DUAL_XEON, "nics": [nic("eth0", "frontend", 25, numa=0)]},
        note=LEFT_TO_KERNEL,
    ),
    Case("irqbalance-untouched-no-nic", irq.irqbalance, set(), note=LEFT_TO_KERNEL),
    Case(
        "irqbalance-on-by-profile",
        irq.irqbalance,
        {("service", "irqbalance.service", "enable")},
        hw={**DUAL_XEON, "nics": [rdma_compute("ib0", numa=0)]},
        knobs=IRQBALANCE,
    ),
    Case(
        "irqbalance-on-by-profile-no-nic",
        irq.irqbalance,
        {("service", "irqbalance.service", "enable")},
        knobs=IRQBALANCE,
    ),
)


@pytest.mark.parametrize("case", CASES, ids=case_ids(CASES))
def test_irq_rule(case: Case) -> None:
    check_case(case)


@pytest.mark.parametrize("shape", list(SHAPES))
@pytest.mark.parametrize("knobs", [{}, NOSMT], ids=["smt", "nosmt"])
def test_every_pin_list_is_resolved_on_the_node_whatever_the_shape(
    shape: str, knobs: dict[str, Any]
) -> None:
    """No list is computed from an assumed CPU numbering: one made here from Linux's usual order
    (node 0 = 0-55,112-167 on 2 x 56 x 2) puts half of each NIC's interrupts on the remote
    socket where the firmware numbers CPUs round-robin across sockets (node 0 the even CPUs)."""
    base = facts(**SHAPES[shape])
    nics = [rdma_compute(f"ib{node}", numa=node) for node in range(base.numa_nodes)]
    machine = facts(**SHAPES[shape], nics=nics)
    pins = settings_of(irq.pin_nics.apply(machine, profile("training", **knobs)), "irq")
    assert pins == {f"ib{node}": irq.RESOLVE_AT_BOOT for node in range(machine.numa_nodes)}


@pytest.mark.parametrize("shape", list(SHAPES))
def test_a_nic_without_numa_node_is_resolved_at_boot(shape: str) -> None:
    machine = facts(**SHAPES[shape], nics=[rdma_compute("ib0", numa=None)])
    (setting,) = irq.pin_nics.apply(machine, profile("inference"))
    assert isinstance(setting, Setting) and setting.target == ("irq", "ib0")
    assert setting.value == irq.RESOLVE_AT_BOOT
    assert "no numa_node" in setting.reason and "resolved at boot" in setting.reason
    assert "local_cpulist" in setting.reason


def test_unknown_threads_per_core_stays_unknown() -> None:
    machine = facts(**UNKNOWN_THREADS, nics=[rdma_compute("ib0", numa=0)])
    assert not machine.cpu.threads_known
    (setting,) = irq.pin_nics.apply(machine, profile("inference"))
    assert isinstance(setting, Setting) and setting.value == irq.RESOLVE_AT_BOOT
    assert facts(**DUAL_XEON).cpu.threads_known


def test_with_nosmt_the_reason_says_the_offline_siblings_are_left_out() -> None:
    machine = facts(**DUAL_XEON, nics=[rdma_compute("ib0", numa=0)])
    (setting,) = irq.pin_nics.apply(machine, profile("training", **NOSMT))
    assert isinstance(setting, Setting) and setting.value == irq.RESOLVE_AT_BOOT
    assert "nosmt takes offline" in setting.reason


def test_a_nic_with_a_node_gets_a_reason_naming_the_node() -> None:
    machine = facts(**DUAL_XEON, nics=[rdma_compute("ib1", numa=1)])
    (setting,) = irq.pin_nics.apply(machine, profile("inference"))
    assert isinstance(setting, Setting)
    assert (
        "ib1" in setting.reason
        and "NUMA node 1" in setting.reason
        and "CPU 0's core" in setting.reason
        and "local_cpulist" in setting.reason
        and "numbering" in setting.reason
    )
    assert "no numa_node" not in setting.reason


@pytest.mark.parametrize("knobs", [{}, IRQBALANCE], ids=["pin", "irqbalance"])
@pytest.mark.parametrize(
    "nics",
    [
        [],
        [nic("eth0", "frontend", 25, numa=0)],
        [rdma_compute("ib0", numa=0)],
        [rdma_compute("ib0", numa=None)],
        [nic("eth0", "storage", 100, numa=1), nic("eno1", "management", 1)],
    ],
    ids=["no-nic", "slow-tcp", "rdma", "rdma-no-node", "fast-tcp"],
)
def test_left_to_the_kernel_note_exactly_when_pin_pins_nothing(
    knobs: dict[str, Any], nics: list[dict[str, Any]]
) -> None:
    machine = facts(**DUAL_XEON, nics=nics)
    pins = settings_of(irq.pin_nics.apply(machine, profile("inference", **knobs)), "irq")
    output = irq.irqbalance.apply(machine, profile("inference", **knobs))
    noted = any(LEFT_TO_KERNEL in text for text in notes_of(output))
    assert noted == (not knobs and not pins)
    assert not (noted and settings_of(output, "service")), "a note or a service choice, never both"


def test_pinning_and_irqbalance_never_both() -> None:
    for nics in (
        [rdma_compute("ib0", numa=0)],
        [rdma_compute("ib0", numa=None)],
        [nic("eth0", "frontend", 25, numa=0)],
    ):
        machine = facts(**DUAL_XEON, nics=nics)
        for knobs in ({}, IRQBALANCE):
            services = settings_of(
                irq.irqbalance.apply(machine, profile("inference", **knobs)), "service"
            )
            pins = settings_of(irq.pin_nics.apply(machine, profile("inference", **knobs)), "irq")
            assert bool(pins) == (services.get("irqbalance.service") == "disable")
            assert bool(pins) == (services.get("goldtune-irq-affinity.service") == "enable")


def test_irqbalance_stays_when_the_only_fast_nic_cannot_be_pinned() -> None:
    machine = facts(**ONE_CORE_PER_NODE, nics=[rdma_compute("ib0", numa=0)])
    pins = settings_of(irq.pin_nics.apply(machine, profile("inference")), "irq")
    services = settings_of(irq.irqbalance.apply(machine, profile("inference")), "service")
    assert pins == {}
    assert services.get("irqbalance.service") != "disable"
