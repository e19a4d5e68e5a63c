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
from generator.model.cpulist import expand_cpus
from generator.model.vendors import GpuVendor
from generator.rules.base import Output, kubelet_field, note, rule
from generator.rules.irq import pin_assignments, smt_off

# The EKS AMI's kube-reserved memory: 11 MiB per pod kubelet admits (maxPods) + 255 MiB.
RESERVED_MI_PER_POD = 11
RESERVED_MI_BASE = 255
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


def kube_reserved_memory_mi(max_pods: int) -> int:
    return RESERVED_MI_PER_POD * max_pods + RESERVED_MI_BASE


def system_reserved_memory_mi(memory_gib: int) -> int:
    reserved, floor = 0.0, 0
    for ceiling, share in MEMORY_TIERS:
        top = memory_gib if ceiling is None else min(memory_gib, ceiling)
        reserved += max(0, top - floor) * share
        floor = ceiling or floor
    return round(reserved * 1024)


def reserved_memory_mi(facts: Facts, profile: Profile) -> int:
    """What the memory manager's reservedMemory must add up to (kubelet checks the sum)."""
    system = system_reserved_memory_mi(facts.memory_gib)
    return kube_reserved_memory_mi(profile.max_pods) + system + EVICTION_MEMORY_MI


def isolated_cpus(profile: Profile) -> set[int]:
    """CPUs an ``isolcpus`` override takes from the scheduler (``isolcpus=[flags,]<cpu-list>``,
    Documentation/admin-guide/kernel-parameters.txt): its CPU list's numbers, flags aside."""
    cpus: set[int] = set()
    for override in profile.overrides:
        if override.kind == "kernel-arg" and override.key == "isolcpus":
            parts = str(override.value).split(",")
            listed = ",".join(
                part for part in parts if all(end.isdigit() for end in part.split("-", 1))
            )
            cpus |= set(expand_cpus(listed))
    return cpus


def online_cpu_count(facts: Facts, profile: Profile) -> int:
    """The CPUs kubelet sees online: nosmt (irq.smt_off) keeps one thread per core."""
    return facts.cpu.physical_cores if smt_off(facts, profile) else facts.cpu.logical_cpus


def reserved_cpu_count(facts: Facts, profile: Profile) -> int | None:
    """How many CPUs kubelet keeps for the system: whole online cores covering the EKS tiers for
    kube-reserved plus the same again for system-reserved, at least one core. None when
    threads_per_core is not known: a count of whole cores would be sized for a guessed machine.

    A count, never a list: which CPUs form a core or a node is the firmware's numbering, which
    the hardware file does not hold (Linux's usual order numbers each core's first thread first,
    others number siblings next to each other or CPUs round-robin across sockets). kubelet's
    static CPU manager, given kubeReserved + systemReserved cpu and no reservedSystemCPUs,
    reserves that many CPUs itself from the booted machine's topology, whole cores from the
    low-numbered ones ("with 8 CPUs and HT enabled, numReservedCPUs=2 gives {0,4}": CPU 0's
    core; pkg/kubelet/cm/cpumanager/policy_static.go NewStaticPolicy, takeByTopology), online
    by construction (cadvisor lists the online CPUs). With nosmt (irq.smt_off) a core is one
    CPU. kubelet does not read isolcpus: the cpu_manager rule notes it where one is set.
    """
    if not facts.cpu.threads_known:
        return None
    threads = 1 if smt_off(facts, profile) else facts.cpu.threads_per_core
    needed = -(-2 * reserved_cpu_milli(online_cpu_count(facts, profile)) // 1000)
    return max(1, -(-int(needed) // threads)) * threads


def _reserved_count_reason(facts: Facts, profile: Profile, count: int) -> str:
    threads = 1 if smt_off(facts, profile) else facts.cpu.threads_per_core
    online = online_cpu_count(facts, profile)
    return (
        f"half of {count} CPUs, {count // threads} whole core(s) of {threads} thread(s): the "
        "EKS kube-reserved CPU tiers plus as much for the system "
        f"({2 * reserved_cpu_milli(online):.0f}m for {online} online CPUs), rounded up to whole "
        "cores; kubelet's static CPU manager reserves that many CPUs itself, whole cores from "
        "the low-numbered ones of the booted machine (policy_static.go NewStaticPolicy, "
        "takeByTopology), so no reservedSystemCPUs list assumes how the firmware numbers CPUs"
    )


@rule("kubernetes.cpu-manager")
def cpu_manager(facts: Facts, profile: Profile) -> Output:
    """Exclusive cores for Guaranteed pods, the first cores kept for the system.

    The reservation is a cpu quantity (kubeReserved + systemReserved), never a
    reservedSystemCPUs list: kubelet picks the CPUs from the node's own topology
    (reserved_cpu_count). With threads_per_core unknown the quantities are the EKS tiers
    unrounded, and kubelet reserves their sum rounded up to whole CPUs (cpu_manager.go refuses
    the static policy a zero cpu reservation).
    """
    if not profile.kubernetes:
        return
    yield kubelet_field(
        "cpuManagerPolicy",
        "static",
        "Guaranteed pods with integer CPU requests get exclusive cores: no "
        "time-slicing with other pods next to the data loaders that feed the GPUs",
    )
    count = reserved_cpu_count(facts, profile)
    if count is None:
        milli = f"{reserved_cpu_milli(facts.cpu.logical_cpus):.0f}m"
        why = (
            "the EKS kube-reserved CPU tiers for the CPUs the file states; threads_per_core "
            "is not known, so no count is rounded to whole cores of a guessed machine: "
            "kubelet's static CPU manager reserves that many CPUs itself from the "
            "low-numbered cores of the booted machine, online by construction "
            "(policy_static.go NewStaticPolicy, takeByTopology)"
        )
    else:
        milli, why = f"{count * 500}m", _reserved_count_reason(facts, profile, count)
    for field in ("kubeReserved/cpu", "systemReserved/cpu"):
        yield kubelet_field(field, milli, why)
    if isolated_cpus(profile):
        yield note(
            "kubelet reserves its CPUs from the low-numbered cores without reading isolcpus: "
            "keep the isolated CPUs off the first cores, or state reservedSystemCPUs for "
            "this node by an override"
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


# kubelet refuses to start its topology manager on a machine with more NUMA nodes than this
# (topology_manager.go NewManager, defaultMaxAllowableNUMANodes) unless the policy option
# max-allowable-numa-nodes raises it (KEP-4622: beta in 1.31 behind the default-on
# TopologyManagerPolicyBetaOptions gate, GA in 1.35). It counts EVERY node: numa_info.go
# NewNUMAInfo takes cadvisor's topology, and cadvisor GetNodesInfo keeps nodes without CPUs.
KUBELET_MAX_NUMA_NODES = 8

# The pod shapes the Kubernetes profiles are chosen for, each a Guaranteed pod whose CPU and
# memory requests fit one socket (tests/test_kubelet_topology.py feeds them to kubelet's hint
# merge, ported, for every shipped system):
#   all-gpus  every GPU of the node (a data-parallel trainer)
#   half      the GPUs of one socket
#   one-gpu   one GPU
POD_SHAPES = ("all-gpus", "half", "one-gpu")


def gpu_nodes(facts: Facts) -> set[int] | None:
    """The NUMA nodes the GPUs sit on; None when the hardware file does not say."""
    if any(group.numa_nodes is None for group in facts.gpus):
        return None
    return {node for group in facts.gpus for node in group.numa_nodes or ()}


def numa_count_known(facts: Facts) -> bool:
    """Whether the plan knows how many NUMA nodes kubelet will count: not where the GPUs are
    superchips (which show their memory as CPU-less nodes) and neither the file nor hardware_db
    says how many (facts.memory_only_expected). Elsewhere an unstated count is taken as none;
    the preflight checks the live count against the limit (claim numa.nodes_at_most)."""
    return facts.memory_only_numa_nodes is not None or not facts.memory_only_expected


def topology_managed(facts: Facts) -> bool:
    """Whether kubelet's topology and memory managers are worth turning on and can start.

    Alignment needs two nodes WITH CPUs (facts.is_numa). The start-up limit counts ALL nodes
    (facts.all_numa_nodes), CPU-less ones inferred from the catalog where the file omits them
    (hardware.cpu_less_nodes: a GB200 tray's 4 GPUs x 8); where their count is not known at
    all (numa_count_known) neither manager is turned on: kubelet does not start with a manager
    it refuses (topology_manager.go NewManager), and a tray has 34 nodes. Above the limit,
    max-allowable-numa-nodes would let kubelet start, but every Guaranteed pod's admission
    then walks every subset of all the nodes: the device manager's and the Static memory
    manager's hints iterate bitmask.IterateBitMasks over every node
    (devicemanager/topology_hints.go generateDeviceTopologyHints, memorymanager
    policy_static.go calculateHints), 2^34 masks on a GB200 tray, where kubelet "never reaches
    the Allocate call" (kubernetes/kubernetes PR #135581). So both managers stay off there.
    """
    return (
        facts.is_numa and numa_count_known(facts) and facts.all_numa_nodes <= KUBELET_MAX_NUMA_NODES
    )


def cpu_less_text(facts: Facts) -> str:
    """How many NUMA nodes have no CPUs, and where that comes from."""
    if facts.memory_only_inferred:
        return (
            f"{facts.memory_only_numa_nodes} without CPUs, inferred from hardware_db "
            f"({facts.memory_only_inferred} per GPU: the superchips' memory; the file omits "
            "memory_only_numa_nodes)"
        )
    return f"{facts.memory_only_numa_nodes or 0} without CPUs"


def topology_policy(facts: Facts, profile: Profile) -> tuple[str, str]:
    """The policy from what kubelet's merge admits (topologymanager/policy.go, mergePermutation).

    A merged hint is preferred only when every provider's mask is equal. For the all-gpus shape
    on a machine whose GPUs span two nodes the device manager prefers only {0,1} while the CPU
    and memory managers prefer {0} or {1}: no preferred merge exists, so ``restricted`` (admits
    only a preferred best hint) and ``single-numa-node`` reject the pod (TopologyAffinityError);
    ``best-effort`` admits it, on the narrowest non-preferred merge, and aligns the half and
    one-gpu shapes exactly as restricted would. Only when every GPU sits on one node do all
    three shapes have a preferred one-node merge, and ``single-numa-node`` admits them all.
    """
    shapes = (
        "all-gpus, half (the GPUs of one socket) and one-gpu pods whose CPUs and memory "
        "fit one socket"
    )
    if profile.intent == "inference":
        return "best-effort", (
            f"admits {shapes}, even when their CPUs and GPUs cannot share a NUMA node; "
            "alignment is preferred, never a reason to refuse; rejects none"
        )
    nodes = gpu_nodes(facts)
    if facts.has_gpus and nodes is not None and len(nodes) == 1:
        return "single-numa-node", (
            f"every GPU sits on NUMA node {min(nodes)}: admits {shapes}, all on that node; "
            "rejects a pod whose CPUs or memory do not fit one node"
        )
    return "best-effort", (
        f"admits {shapes}, aligned on one node where every resource fits one; rejects none. "
        "restricted would reject the all-gpus pod (kubelet marks a merged hint preferred "
        "only when every provider's mask is equal: the GPUs' {0,1} against the CPUs' {0}), "
        "single-numa-node the all-gpus and half pods"
    )


@rule("kubernetes.topology-manager", vendors=(GpuVendor.NVIDIA,))
def topology_manager(facts: Facts, profile: Profile) -> Output:
    """NUMA alignment of a pod's CPUs, memory and GPUs: by intent, only on multi-node machines.

    Pod shapes (Guaranteed, CPUs and memory that fit one socket) per profile, proven against
    kubelet's merge, ported, in tests/test_kubelet_topology.py for every shipped system:
    training-k8s on GPUs across nodes (best-effort, pod scope) admits all-gpus, half and
    one-gpu, aligning half and one-gpu to one node; with every GPU on one node
    (single-numa-node) admits all three on it and rejects a pod whose CPUs or memory exceed a
    node; inference (best-effort) admits all three. On one node with CPUs, or above kubelet's
    NUMA limit (topology_managed), no topology manager: every shape is admitted unaligned.
    """
    if not profile.kubernetes:
        return
    if not facts.is_numa:
        cpu_less = facts.memory_only_numa_nodes
        also = f" (and {cpu_less_text(facts)}, which hold no process)" if cpu_less else ""
        yield note(
            f"one NUMA node with CPUs{also}: every placement is aligned; no topology or "
            "memory manager"
        )
        return
    if not numa_count_known(facts):
        yield note(
            f"{facts.numa_nodes} NUMA nodes with CPUs, and the GPUs are superchips whose memory "
            "Linux shows as NUMA nodes without CPUs (8 per GPU on GB200), but neither the "
            "hardware file (memory_only_numa_nodes; gen detect counts them) nor hardware_db says "
            "how many: no topology or memory manager, which kubelet refuses above "
            f"{KUBELET_MAX_NUMA_NODES} nodes in all (topologymanager NewManager), and a node "
            "whose kubelet refuses one does not start. Pods are admitted unaligned; bind them "
            "with the GPUs' CPU nodes (gpus[].numa_nodes) in the pod spec"
        )
        return
    if not topology_managed(facts):
        yield note(
            f"{facts.all_numa_nodes} NUMA nodes ({facts.numa_nodes} with CPUs, "
            f"{cpu_less_text(facts)}): no topology or "
            f"memory manager. kubelet refuses either above {KUBELET_MAX_NUMA_NODES} nodes "
            "(topologymanager NewManager, counting nodes without CPUs), and "
            "max-allowable-numa-nodes (KEP-4622) only lifts that refusal: each Guaranteed "
            "pod's admission would then walk all 2^N node subsets in the device and memory "
            "managers' hints (kubernetes PR #135581, GB200). Pods are admitted unaligned; "
            "bind them with the GPUs' CPU nodes (gpus[].numa_nodes) in the pod spec"
        )
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
    if facts.memory_only_numa_nodes is None:
        yield note(
            f"the hardware file does not say how many NUMA nodes have no CPUs "
            f"(memory_only_numa_nodes; gen detect counts them): kubelet counts them too and "
            f"refuses its topology manager above {KUBELET_MAX_NUMA_NODES} nodes in all"
        )


@rule("kubernetes.memory-manager")
def memory_manager(facts: Facts, profile: Profile) -> Output:
    """Guaranteed pods' memory from their NUMA nodes; the reservation spread over the nodes.

    The reservation goes to the nodes with CPUs (kubelet checks only the sum). Off wherever
    the topology manager is (topology_managed)."""
    if not profile.kubernetes or not topology_managed(facts):
        return
    yield kubelet_field(
        "memoryManagerPolicy",
        "Static",
        "Guaranteed pods' memory comes from the NUMA nodes of their CPUs and GPUs, "
        "so host-to-GPU copies do not cross the socket link",
    )
    total = reserved_memory_mi(facts, profile)
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
        "maxPods",
        profile.max_pods,
        "the pod count kubeReserved memory is sized for, stated so that the --config file's "
        "maxPods, which this drop-in overrides, cannot outgrow the reservation (a --max-pods "
        "flag still wins); knob max_pods, 110 being kubelet's default",
    )
    yield kubelet_field(
        "kubeReserved/memory",
        f"{kube_reserved_memory_mi(profile.max_pods)}Mi",
        f"the EKS AMI's {RESERVED_MI_PER_POD}Mi x maxPods ({profile.max_pods}) + "
        f"{RESERVED_MI_BASE}Mi for kubelet and the runtime",
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
