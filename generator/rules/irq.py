"""IRQ affinity: pin fast NICs' interrupts to their own NUMA node, or leave it to irqbalance."""

from __future__ import annotations

from generator.cpulist import compress_cpus
from generator.facts import Facts, NicFacts
from generator.profile import Profile
from generator.rules.base import Output, irq_pin, note, rule, service

PIN_MIN_GBPS = 100


def _wants_pinning(nic: NicFacts) -> bool:
    return nic.rdma or (nic.speed_gbps or 0) >= PIN_MIN_GBPS


def pinned_nics(facts: Facts, profile: Profile) -> list[NicFacts]:
    """NICs whose interrupts are pinned: RDMA or >= 100 Gbit/s."""
    if profile.irq != "pin":
        return []
    return [nic for nic in facts.nics if _wants_pinning(nic)]


def housekeeping_cpus(facts: Facts) -> set[int]:
    """CPU 0 and its SMT siblings: the first physical core keeps the kernel's housekeeping."""
    return {thread * facts.cpu.physical_cores for thread in range(facts.cpu.threads_per_core)}


def irq_cpus(facts: Facts, node: int | None) -> str:
    """The node's CPUs (every CPU when the node is unknown) without the first physical core."""
    nodes = [node] if node is not None else range(facts.numa_nodes)
    cpus = [cpu for n in nodes for cpu in facts.cpus_of_node(n)]
    return compress_cpus(set(cpus) - housekeeping_cpus(facts))


def _pin_reason(nic: NicFacts) -> str:
    if nic.numa_node is None:
        return (f"{nic.name} has no numa_node in the hardware file, so its interrupts are spread over "
                "every CPU but the first core (irqbalance is off); give numa_node to keep them NUMA-local")
    return (f"interrupts of {nic.name} handled on its own NUMA node {nic.numa_node}: no cross-socket "
            "hop for every completion; the first core (CPU 0 and its SMT sibling) left to housekeeping")


@rule("irq.pin-nics")
def pin_nics(facts: Facts, profile: Profile) -> Output:
    """Pin each fast NIC's interrupts to CPUs of the NIC's NUMA node, never the first core."""
    for nic in pinned_nics(facts, profile):
        cpus = irq_cpus(facts, nic.numa_node)
        if not cpus:
            yield note(f"{nic.name}: its NUMA node has no CPU besides the first core; interrupts not pinned")
            continue
        yield irq_pin(nic.name, cpus, _pin_reason(nic))


@rule("irq.irqbalance")
def irqbalance(facts: Facts, profile: Profile) -> Output:
    """Either irqbalance or manual pinning, never both."""
    if pinned_nics(facts, profile):
        yield service("irqbalance.service", "disable",
                      "NIC interrupts are pinned at boot; irqbalance would move them again")
        yield service("goldtune-irq-affinity.service", "enable",
                      "pins NIC interrupts at boot, when the interfaces exist; logs and skips a missing one")
    elif profile.irq == "irqbalance":
        yield service("irqbalance.service", "enable", "the profile leaves interrupt placement to irqbalance")
    else:
        yield note("no RDMA or >= 100 Gbit/s NIC: interrupts are left to the kernel and irqbalance")
