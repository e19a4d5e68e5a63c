"""Kubernetes: kubelet's CPU, topology and memory managers, reservations and eviction.

Only with ``kubernetes: true``. The values go into one KubeletConfiguration drop-in in
/etc/kubernetes/kubelet.conf.d, which kubelet reads with ``--config-dir`` (1.28 alpha behind
KUBELET_CONFIG_DROPIN_DIR_ALPHA, beta and on by default from 1.30: KEP-3983).

Sizing sources: kube-reserved follows the EKS AMI (nodeadm, internal/kubelet/config.go: CPU 6 %
of the first core, 1 % of the second, 0.5 % of the next two, 0.25 % of the rest; memory
11 MiB x maxPods + 255 MiB; ephemeral-storage 1Gi); system-reserved memory follows OpenShift's
automatic node sizing (25 % of the first 4 GiB, 20 % of the next 4, 10 % of the next 8, 6 % of
the next 112, 2 % above 128 GiB; OpenShift "Allocating resources for nodes", Red Hat solution
5843241). The memory manager's reservedMemory must add up to kube-reserved + system-reserved +
the hard eviction threshold, or kubelet refuses to start (Kubernetes "Memory Manager" task page).
"""

from __future__ import annotations

from generator.inputs.facts import Facts
from generator.inputs.profile import Profile
from generator.model.cpulist import compress_cpus
from generator.model.vendors import GpuVendor
from generator.rules.base import Output, kubelet_field, note, rule
from generator.rules.irq import housekeeping_cpus, pin_assignments

MAX_PODS = 110  # kubelet's default maxPods; the EKS memory formula counts it
# (CPUs from, millicores per CPU) of the EKS tiers, first match from the top
CPU_TIERS_MILLI = ((4, 2.5), (2, 5.0), (1, 10.0), (0, 60.0))
# (GiB of RAM up to, share) of OpenShift's system-reserved memory tiers
MEMORY_TIERS = ((4, 0.25), (8, 0.20), (16, 0.10), (128, 0.06), (None, 0.02))
EVICTION_MEMORY_MI = 1024
EVICTION_HARD = (
    ("memory.available", f"{EVICTION_MEMORY_MI}Mi"),
    ("nodefs.available", "10%"),
    ("nodefs.inodesFree", "5%"),
    ("imagefs.available", "15%"),
)


def reserved_cpu_milli(logical_cpus: int) -> float:
    """The EKS kube-reserved CPU for this many CPUs, in millicores: each tier's rate for the CPUs
    in it (a sum per CPU, asked twice per plan, was 0.04 ms of a plan's CPU on a DGX)."""
    total, above = 0.0, logical_cpus
    for start, milli in CPU_TIERS_MILLI:  # from the top tier down
        if above > start:
            total += (above - start) * milli
            above = start
    return total


def kube_reserved_memory_mi() -> int:
    return 11 * MAX_PODS + 255


def system_reserved_memory_mi(memory_gib: int) -> int:
    reserved, floor = 0.0, 0
    for ceiling, share in MEMORY_TIERS:
        top = memory_gib if ceiling is None else min(memory_gib, ceiling)
        reserved += max(0, top - floor) * share
        floor = ceiling or floor
    return round(reserved * 1024)


def reserved_memory_mi(facts: Facts) -> int:
    """What the memory manager's reservedMemory must add up to (kubelet checks the sum)."""
    system = system_reserved_memory_mi(facts.memory_gib)
    return kube_reserved_memory_mi() + system + EVICTION_MEMORY_MI


def reserved_cpus(facts: Facts) -> list[int]:
    """Whole physical cores from CPU 0 on, with their SMT siblings, covering the EKS tiers for
    kube-reserved plus the same again for system-reserved; never fewer than the housekeeping
    core the IRQ pinning keeps free (irq.housekeeping_cpus)."""
    needed = -(-2 * reserved_cpu_milli(facts.cpu.logical_cpus) // 1000)
    cores = max(1, -(-int(needed) // facts.cpu.threads_per_core))
    cpus = housekeeping_cpus(facts)
    threads = range(facts.cpu.threads_per_core)
    for core in range(cores):
        cpus |= {core + thread * facts.cpu.physical_cores for thread in threads}
    return sorted(cpus)


@rule("kubernetes.cpu-manager")
def cpu_manager(facts: Facts, profile: Profile) -> Output:
    """Exclusive cores for Guaranteed pods, the housekeeping core kept for the system."""
    if not profile.kubernetes:
        return
    yield kubelet_field(
        "cpuManagerPolicy",
        "static",
        "Guaranteed pods with integer CPU requests get exclusive cores: no "
        "time-slicing with other pods next to the data loaders that feed the GPUs",
    )
    cpus = reserved_cpus(facts)
    yield kubelet_field(
        "reservedSystemCPUs",
        compress_cpus(cpus),
        "whole cores from CPU 0 on with their SMT siblings, starting with the "
        "housekeeping core the IRQ pinning keeps free; "
        "sized to the EKS kube-reserved CPU tiers plus as much for the system "
        f"({2 * reserved_cpu_milli(facts.cpu.logical_cpus):.0f}m); it replaces "
        "the cpu of kubeReserved and systemReserved",
    )

    if pin_assignments(facts, profile):
        yield note(
            "NIC interrupts are pinned to every CPU of their node but the housekeeping core, "
            "so the static CPU manager may give a Guaranteed pod a CPU that also takes "
            "interrupts; keep latency-critical pods off the NICs' nodes or pin fewer CPUs"
        )


@rule("kubernetes.cgroup-driver")
def cgroup_driver(facts: Facts, profile: Profile) -> Output:
    """kubelet's cgroup driver, the one the container runtime is configured with."""
    if not profile.kubernetes:
        return
    yield kubelet_field(
        "cgroupDriver",
        "systemd",
        "systemd owns the cgroup tree on this host; the runtime's SystemdCgroup "
        "says the same, and a mismatch fails every pod sandbox",
    )
    if profile.containers == "docker":
        yield note(
            "dockerd is no CRI runtime since Kubernetes 1.24 (dockershim removed): kubelet "
            "needs cri-dockerd, or containerd's CRI plugin (`containers: containerd`)"
        )
    elif profile.containers == "none":
        yield note(
            "kubernetes without `containers:`: the runtime (cri-o, containerd) is "
            "configured elsewhere; it must use the systemd cgroup driver and the NVIDIA "
            "runtime"
        )


def gpu_nodes(facts: Facts) -> set[int] | None:
    """The NUMA nodes the GPUs sit on; None when the hardware file does not say."""
    if any(group.numa_nodes is None for group in facts.gpus):
        return None
    return {node for group in facts.gpus for node in group.numa_nodes or ()}


def topology_policy(facts: Facts, profile: Profile) -> tuple[str, str]:
    if profile.intent == "inference":
        return "best-effort", (
            "inference pods are admitted even when their CPUs and GPUs "
            "cannot share a NUMA node; alignment is preferred, never a reason "
            "to refuse"
        )
    nodes = gpu_nodes(facts)
    if facts.has_gpus and nodes is not None and len(nodes) == 1:
        return "single-numa-node", (
            f"every GPU sits on NUMA node {min(nodes)}: a training "
            "pod's CPUs, memory and GPUs all fit there"
        )
    return "restricted", (
        "training pods get CPUs, memory and GPUs on the fewest NUMA nodes that "
        "hold them, or are refused; single-numa-node would refuse a pod that "
        "takes GPUs on several nodes"
    )


@rule("kubernetes.topology-manager", vendors=(GpuVendor.NVIDIA,))
def topology_manager(facts: Facts, profile: Profile) -> Output:
    """NUMA alignment of a pod's CPUs, memory and GPUs: by intent, only on multi-node machines."""
    if not profile.kubernetes:
        return
    if not facts.is_numa:
        yield note("one NUMA node: every placement is aligned; no topology or memory manager")
        return
    policy, why = topology_policy(facts, profile)
    yield kubelet_field("topologyManagerPolicy", policy, why)
    if profile.intent == "training":
        yield kubelet_field(
            "topologyManagerScope",
            "pod",
            "the pod's containers are aligned together: the trainer and its "
            "sidecars share the NUMA node of their GPUs",
        )


@rule("kubernetes.memory-manager")
def memory_manager(facts: Facts, profile: Profile) -> Output:
    """Guaranteed pods' memory from their NUMA nodes; the reservation spread over the nodes."""
    if not profile.kubernetes or not facts.is_numa:
        return
    yield kubelet_field(
        "memoryManagerPolicy",
        "Static",
        "Guaranteed pods' memory comes from the NUMA nodes of their CPUs and GPUs, "
        "so host-to-GPU copies do not cross the socket link",
    )
    total = reserved_memory_mi(facts)
    share, rest = divmod(total, facts.numa_nodes)
    for node in range(facts.numa_nodes):
        amount = share + (rest if node == 0 else 0)
        yield kubelet_field(
            f"reservedMemory/{node}",
            f"{amount}Mi",
            f"NUMA node {node}'s part of {total}Mi = kubeReserved + systemReserved "
            "+ evictionHard memory.available, which kubelet requires the nodes to "
            "add up to; system and kubelet memory is not bound to one node",
        )


@rule("kubernetes.reserved")
def reserved(facts: Facts, profile: Profile) -> Output:
    """Memory and disk kept from pods for kubelet, the runtime and the system."""
    if not profile.kubernetes:
        return
    yield kubelet_field(
        "kubeReserved/memory",
        f"{kube_reserved_memory_mi()}Mi",
        f"the EKS AMI's 11Mi x maxPods ({MAX_PODS}) + 255Mi for kubelet and the runtime",
    )
    yield kubelet_field(
        "kubeReserved/ephemeral-storage",
        "1Gi",
        "the EKS AMI's reservation for kubelet's and the runtime's own files",
    )
    yield kubelet_field(
        "systemReserved/memory",
        f"{system_reserved_memory_mi(facts.memory_gib)}Mi",
        f"OpenShift's automatic sizing for {facts.memory_gib} GiB of RAM "
        "(25/20/10/6/2 % tiers): page tables, slab and the GPU driver's daemons "
        "grow with the machine",
    )


@rule("kubernetes.eviction")
def eviction(facts: Facts, profile: Profile) -> Output:
    """Hard eviction thresholds with room for memory the kernel cannot reclaim."""
    if not profile.kubernetes:
        return
    for signal, threshold in EVICTION_HARD:
        if signal == "memory.available":
            why = (
                "ten times the 100Mi default: pinned host buffers of GPU jobs cannot be "
                "reclaimed, so at 100Mi the kernel's OOM killer acts before kubelet's eviction"
            )
        else:
            why = (
                "kubelet's default, written out: unless mergeDefaultEvictionSettings is "
                "true, a signal an evictionHard map leaves out is set to 0 "
                "(KubeletConfiguration v1beta1)"
            )
        yield kubelet_field(f"evictionHard/{signal}", threshold, why)
