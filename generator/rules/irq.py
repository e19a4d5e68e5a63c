"""IRQ affinity: pin fast NICs' interrupts to their own NUMA node, or leave it to irqbalance."""

from __future__ import annotations

from generator.inputs.facts import Facts, NicFacts
from generator.inputs.profile import Profile
from generator.model.cpulist import compress_cpus
from generator.model.layout import IRQ_UNIT
from generator.rules.base import Output, irq_pin, note, rule, service

PIN_MIN_GBPS = 100


def _wants_pinning(nic: NicFacts) -> bool:
    return nic.rdma or (nic.speed_gbps or 0) >= PIN_MIN_GBPS


def housekeeping_cpus(facts: Facts) -> set[int]:
    """CPU 0 and its SMT siblings: the first physical core keeps the kernel's housekeeping."""
    return {thread * facts.cpu.physical_cores for thread in range(facts.cpu.threads_per_core)}


def irq_cpus(facts: Facts, node: int | None) -> str:
    """The node's CPUs (every CPU when the node is unknown) without the first physical core."""
    nodes = [node] if node is not None else range(facts.numa_nodes)
    cpus = [cpu for n in nodes for cpu in facts.cpus_of_node(n)]
    return compress_cpus(set(cpus) - housekeeping_cpus(facts))


def pin_assignments(facts: Facts, profile: Profile) -> dict[str, str]:
    """Interface -> CPU list for every fast NIC (RDMA or >= 100 Gbit/s), or {} when pinning is off.

    All or nothing: irqbalance is switched off when pinning, so a fast NIC left unpinned
    (its node has no CPU besides the first core) would be neither pinned nor balanced.
    """
    if profile.irq != "pin":
        return {}
    assignments = {
        nic.name: irq_cpus(facts, nic.numa_node) for nic in facts.nics if _wants_pinning(nic)
    }
    return assignments if all(assignments.values()) else {}


def _first_core(facts: Facts) -> str:
    return (
        "the first core (CPU 0 and its SMT siblings)"
        if facts.cpu.threads_per_core > 1
        else "the first core (CPU 0)"
    )


def _pin_reason(facts: Facts, nic: NicFacts) -> str:
    if nic.numa_node is None:
        return (
            f"{nic.name} has no numa_node in the hardware file, so its interrupts are spread over "
            f"every CPU but {_first_core(facts)} (irqbalance is off); "
            "give numa_node to keep them NUMA-local"
        )
    return (
        f"interrupts of {nic.name} handled on its own NUMA node {nic.numa_node}: no cross-socket "
        f"hop for every completion; {_first_core(facts)} left to housekeeping"
    )


@rule("irq.pin-nics")
def pin_nics(facts: Facts, profile: Profile) -> Output:
    """Pin each fast NIC's interrupts to CPUs of the NIC's NUMA node, never the first core."""
    assignments = pin_assignments(facts, profile)
    for nic in facts.nics:
        if nic.name in assignments:
            yield irq_pin(nic.name, assignments[nic.name], _pin_reason(facts, nic))
    if profile.irq != "pin" or assignments:
        return
    for nic in facts.nics:
        if _wants_pinning(nic) and not irq_cpus(facts, nic.numa_node):
            yield note(
                f"{nic.name}: its NUMA node has no CPU besides the first core; no interrupt is "
                "pinned and irqbalance keeps balancing them all"
            )


@rule("irq.irqbalance")
def irqbalance(facts: Facts, profile: Profile) -> Output:
    """Either irqbalance or manual pinning, never both."""
    if pin_assignments(facts, profile):
        yield service(
            "irqbalance.service",
            "disable",
            "NIC interrupts are pinned at boot; irqbalance would move them again",
        )
        yield service(
            IRQ_UNIT,
            "enable",
            "pins NIC interrupts at boot, when the interfaces exist; logs and skips a missing one",
        )
    elif profile.irq == "irqbalance":
        yield service(
            "irqbalance.service", "enable", "the profile leaves interrupt placement to irqbalance"
        )
    elif not any(_wants_pinning(nic) for nic in facts.nics):
        yield note("no RDMA or >= 100 Gbit/s NIC: interrupts are left to the kernel and irqbalance")
