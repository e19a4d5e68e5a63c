"""IRQ affinity: pin fast NICs' interrupts to their own NUMA node, or leave it to irqbalance."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from generator.inputs.facts import Facts, NicFacts
from generator.inputs.profile import Profile
from generator.model.cpulist import compress_cpus
from generator.model.layout import IRQ_UNIT
from generator.rules.base import Output, irq_pin, note, rule, service

PIN_MIN_GBPS = 100


def _wants_pinning(nic: NicFacts) -> bool:
    return nic.rdma or (nic.speed_gbps or 0) >= PIN_MIN_GBPS


# The value that tells irq-affinity to work out the CPU list on the machine itself.
RESOLVE_AT_BOOT = "local"


def housekeeping_cpus(facts: Facts) -> set[int]:
    """CPU 0 and its SMT siblings: the first physical core keeps the kernel's housekeeping."""
    return set(facts.cpu.housekeeping_cpus)


def smt_off(facts: Facts, profile: Profile) -> bool:
    """nosmt is planned (cpu.smt): every sibling thread but the first of each core goes offline.

    x86 only: the plan drops nosmt elsewhere (plan/known_keys.py), so siblings stay online there.
    """
    return (
        profile.smt == "disable" and facts.cpu.threads_per_core > 1 and facts.cpu.arch == "x86_64"
    )


def online_cpus(facts: Facts, profile: Profile, cpus: list[int]) -> set[int]:
    """CPUS less those nosmt takes offline: the kernel numbers every core's first thread first,
    so the siblings are the CPUs from physical_cores on."""
    if smt_off(facts, profile):
        return {cpu for cpu in cpus if cpu < facts.cpu.physical_cores}
    return set(cpus)


def irq_cpus(facts: Facts, profile: Profile, node: int | None) -> str:
    """The node's online CPUs (every CPU when the node is unknown) without the first core, in
    Linux's usual numbering: read for whether any is left (_pin_value), never written out, since
    which CPUs they are is the node's own numbering."""
    nodes = [node] if node is not None else range(facts.numa_nodes)  # nodes WITH CPUs
    cpus = [cpu for n in nodes for cpu in facts.cpus_of_node(n)]
    return compress_cpus(online_cpus(facts, profile, cpus) - housekeeping_cpus(facts))


NodeCpus = Callable[[int | None], str]  # irq_cpus of one machine and profile, by node


def _pin_value(facts: Facts, nic: NicFacts, node_cpus: NodeCpus) -> str:
    """RESOLVE_AT_BOOT, or "" where the machine as described has no CPU for the NIC's interrupts
    but the first core. Only how MANY CPUs a node has is read here, never which: the list itself
    is the device's local_cpulist on the machine (pin_assignments)."""
    if not facts.cpu.threads_known:
        return RESOLVE_AT_BOOT  # how many threads the first core holds is not known here
    return RESOLVE_AT_BOOT if node_cpus(nic.numa_node) else ""


def node_cpus_once(facts: Facts, profile: Profile) -> NodeCpus:
    """irq_cpus by node, each node's list computed once: NICs share their node's (8 NICs on 2
    nodes are 2 lists, each a pass over about a hundred CPUs)."""
    lists: dict[int | None, str] = {}

    def node_cpus(node: int | None) -> str:
        if node not in lists:
            lists[node] = irq_cpus(facts, profile, node)
        return lists[node]

    return node_cpus


def pin_assignments(facts: Facts, profile: Profile) -> Mapping[str, str]:
    """Interface -> RESOLVE_AT_BOOT for every fast NIC (RDMA or >= 100 Gbit/s), or {} when
    pinning is off.

    Every list is resolved on the machine: irq-affinity reads the PCI device's local_cpulist
    and numa_node (Linux drivers/pci/pci-sysfs.c, local_cpulist_show, numa_node_show), else its
    node's cpulist (drivers/base/node.c), and CPU 0's thread_siblings_list
    (drivers/base/topology.c), and leaves the interrupts alone if nothing but the first core is
    there. A list computed here would assume how the firmware numbers CPUs: the usual Linux
    order (Facts.cpus_of_node) is not the only one, and where the firmware numbers CPUs
    round-robin across sockets (node 0 the even CPUs, node 1 the odd) half of a NIC's
    interrupts would land on the remote socket while every count the preflight checks matches.

    All or nothing: irqbalance is switched off when pinning, so a fast NIC left unpinned
    (its node has no CPU besides the first core) would be neither pinned nor balanced.
    """
    if profile.irq != "pin":
        return {}
    node_cpus = node_cpus_once(facts, profile)
    assignments = {
        nic.name: _pin_value(facts, nic, node_cpus) for nic in facts.nics if _wants_pinning(nic)
    }
    return assignments if all(assignments.values()) else {}


def _pin_reason(facts: Facts, profile: Profile, nic: NicFacts) -> str:
    at_boot = (
        "resolved at boot: irq-affinity reads the device's local_cpulist (else its numa_node's "
        "CPUs, else every online CPU), less CPU 0's core and the CPUs that are offline"
    )
    if nic.numa_node is None:
        return (
            f"{nic.name} has no numa_node in the hardware file, so its CPU list is {at_boot}; "
            "spreading over every CPU would undo the driver's NUMA-local queue placement"
        )
    offline = (
        " (the SMT siblings nosmt takes offline among them)" if smt_off(facts, profile) else ""
    )
    return (
        f"interrupts of {nic.name} handled on its own NUMA node {nic.numa_node}: no cross-socket "
        f"hop for every completion; the list is {at_boot}{offline}: which CPUs a node holds "
        "is the firmware's numbering (round-robin across sockets on some), read on the node, "
        "never assumed here"
    )


@rule("irq.pin-nics")
def pin_nics(facts: Facts, profile: Profile) -> Output:
    """Pin each fast NIC's interrupts to CPUs of the NIC's NUMA node, never the first core."""
    assignments = pin_assignments(facts, profile)
    for nic in facts.nics:
        if nic.name in assignments:
            yield irq_pin(nic.name, assignments[nic.name], _pin_reason(facts, profile, nic))
    if profile.irq != "pin" or assignments:
        return
    node_cpus = node_cpus_once(facts, profile)
    for nic in facts.nics:
        if _wants_pinning(nic) and not _pin_value(facts, nic, node_cpus):
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
