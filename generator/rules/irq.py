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
    """NICs that get manual pinning: RDMA or >= 100 Gbit/s, with a known NUMA node."""
    if profile.irq != "pin":
        return []
    return [nic for nic in facts.nics if _wants_pinning(nic) and nic.numa_node is not None]


def irq_cpus(facts: Facts, node: int) -> str:
    """The node's CPUs without CPU 0, which keeps the kernel's housekeeping work."""
    return compress_cpus(cpu for cpu in facts.cpus_of_node(node) if cpu != 0)


@rule("irq.pin-nics")
def pin_nics(facts: Facts, profile: Profile) -> Output:
    """Pin each fast NIC's interrupts to CPUs of the NIC's NUMA node (never CPU 0)."""
    if profile.irq != "pin":
        return
    unplaced = [nic.name for nic in facts.nics if _wants_pinning(nic) and nic.numa_node is None]
    if unplaced:
        yield note(f"NICs {', '.join(unplaced)} have no numa_node in the hardware file: their "
                   "interrupts are not pinned")
    for nic in pinned_nics(facts, profile):
        assert nic.numa_node is not None
        yield irq_pin(nic.name, irq_cpus(facts, nic.numa_node),
                      f"interrupts of {nic.name} handled on its own NUMA node {nic.numa_node}: "
                      "no cross-socket hop for every completion; CPU 0 left to housekeeping")


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
