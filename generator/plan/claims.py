"""The hardware file's claims that the plan depends on (generator/model/claims.py), each with
the settings made from it, for the preflight unit to judge at boot.

Which settings a claim carries is read from the plan itself, not kept beside the rules: a
setting keyed on an interface (irq pinning, ACS) or naming it or its RDMA device in its value
(NCCL_SOCKET_IFNAME, NCCL_IB_HCA) or its reason (socket buffers sized from its speed) depends on
that NIC; a CPU list (an override's) on the CPU and NUMA topology, while a list resolved on the
node at boot (irq ``local``) depends on the interface alone; the GPU
actions, NCCL, ACS above GPUs and kubelet's topology and memory managers on the GPUs. Rules say
in their reasons which facts they used, so the reasons are the provenance read here.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

from generator.inputs.facts import DiskFacts, Facts, NicFacts
from generator.model.claims import Claim, setting_ref
from generator.model.setting import Setting
from generator.plan.distro import DISTRO_RULE
from generator.rules.kubernetes import KUBELET_MAX_NUMA_NODES

# NVLink generations whose NVSwitch chips are PCI functions the node shows (LR10 with NVLink 3,
# LS10 with NVLink 4: open-gpu-kernel-modules src/common/nvswitch/kernel/nvswitch.c device
# tables; generator/model/vendors.py NVSWITCH_DEVICE_IDS). Blackwell's have none there, so a
# claim of NVSwitches beside NVLink-5 GPUs cannot be seen in sysfs and is not made.
PCI_NVSWITCH_GENERATIONS = frozenset({3, 4})
CPU_LIST = re.compile(r"^[0-9]+(-[0-9]+)?(,[0-9]+(-[0-9]+)?)*$")
# kubelet's managers that align CPUs, memory and devices to NUMA nodes
TOPOLOGY_FIELDS = ("topologyManager", "memoryManager", "reservedMemory")

Select = Callable[[Setting], bool]


# What may stand beside a name and still be part of a longer one (ib1 in ib10, eth0 in veth0).
NAME_CHARACTERS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")


def names(text: str, word: str) -> bool:
    """``word`` in ``text`` as a whole name: ib1 is not in ib10, nor eth0 in veth0.

    Each place ``word`` occurs is judged by the characters beside it: no pattern per word to
    compile (the hardware files' NIC, disk and model names, ~15 a plan), and the ~4,000 calls
    a plan, nearly all of them misses, cost one substring test each."""
    if word not in text:  # the operator: cheaper than a call of find for a miss
        return False
    at = text.find(word)
    while at >= 0:
        end = at + len(word)
        before = text[at - 1] if at else ""
        after = text[end] if end < len(text) else ""
        if before not in NAME_CHARACTERS and after not in NAME_CHARACTERS:
            return True
        at = text.find(word, at + 1)
    return False


def _refs(settings: Iterable[Setting], select: Select) -> tuple[str, ...]:
    return tuple(setting_ref(s.kind, s.key) for s in settings if select(s))


def is_cpu_list(setting: Setting) -> bool:
    value = setting.value.removeprefix("=")
    return bool(CPU_LIST.fullmatch(value)) and any(mark in value for mark in ",-")


def is_topology(setting: Setting) -> bool:
    return setting.kind == "kubelet" and setting.key.startswith(TOPOLOGY_FIELDS)


def is_cpu_count(setting: Setting) -> bool:
    """kubelet's CPU reservation: sized from the online CPUs, rounded to whole cores."""
    return setting.kind == "kubelet" and setting.key.endswith("Reserved/cpu")


def cpu_claims(facts: Facts, settings: tuple[Setting, ...], nosmt: bool) -> list[Claim]:
    """Sockets, cores, threads and the online CPUs: every CPU list is made of them, and the
    count of whole cores kubelet reserves."""
    depends = _refs(settings, lambda s: is_cpu_list(s) or is_cpu_count(s))
    cpu = facts.cpu
    claims = [
        Claim("cpu.sockets", str(cpu.sockets), depends),
        Claim("cpu.cores_per_socket", str(cpu.cores_per_socket), depends),
    ]
    if cpu.threads_known:
        online = cpu.physical_cores if nosmt else cpu.logical_cpus
        claims += [
            Claim("cpu.threads_per_core", str(cpu.threads_per_core), depends),
            Claim("cpu.online", str(online), depends),
        ]
    return claims


def resolved_on_node(setting: Setting) -> bool:
    """An IRQ list irq-affinity reads from the device at boot: no count of the file makes it."""
    return setting.kind == "irq" and setting.value == "local"


def numa_claims(facts: Facts, settings: tuple[Setting, ...]) -> list[Claim]:
    """The nodes with CPUs; the limit the kubelet file's managers assume of all nodes; the
    CPU-less nodes where the file states them. A count inferred from the catalog is not claimed:
    with the NVIDIA driver's CDMM (R580 on) a superchip's memory is no NUMA node at all, and
    nothing is made from the inferred count but leaving kubelet's managers off, right either way.
    """
    with_cpus = _refs(
        settings,
        lambda s: (
            is_cpu_list(s)
            or is_topology(s)
            or ("NUMA node" in s.reason and not resolved_on_node(s))
        ),
    )
    claims = [Claim("numa.nodes_with_cpus", str(facts.numa_nodes), with_cpus)]
    if managed := _refs(settings, is_topology):
        # what the kubelet file assumes of every node, CPU-less ones too: kubelet refuses its
        # topology manager above the limit and does not start (kubernetes.topology_managed)
        claims.append(Claim("numa.nodes_at_most", str(KUBELET_MAX_NUMA_NODES), managed))
    if facts.memory_only_numa_nodes is not None and not facts.memory_only_inferred:
        without = _refs(settings, lambda s: is_topology(s) or "without CPUs" in s.reason)
        claims.append(Claim("numa.memory_only_nodes", str(facts.memory_only_numa_nodes), without))
    return claims


def gpu_claims(facts: Facts, settings: tuple[Setting, ...]) -> list[Claim]:
    """Count, model (PCI device ids) and NUMA node per GPU; NVSwitch where sysfs shows it."""
    models = {group.model.key for group in facts.gpus}

    def on_gpus(s: Setting) -> bool:
        return (
            s.kind in {"gpu", "nccl", "rccl"}
            or (s.kind == "pcie-acs" and s.key == "gpus")
            or is_topology(s)
            or any(names(s.reason, model) for model in models)
        )

    depends = _refs(settings, on_gpus)
    ids = sorted({device for group in facts.gpus for device in group.model.pci_device_ids})
    claims = [Claim("gpu.count", str(facts.gpu_count), depends)]
    if not facts.gpus:
        return claims
    claims.append(Claim("gpu.pci_device", ",".join(ids), depends))
    if len(facts.gpus) == 1 and facts.gpus[0].numa_nodes is not None:
        # "in PCI order" is the format's word for one group; several models interleave
        placement = _refs(
            settings,
            lambda s: (
                is_topology(s)
                or s.kind in {"nccl", "rccl"}
                or ("GPU" in s.reason and "NUMA" in s.reason)
            ),
        )
        nodes = ",".join(str(node) for node in facts.gpus[0].numa_nodes)
        claims.append(Claim("gpu.numa_nodes", nodes, placement))
    generations = {group.model.nvlink_generation for group in facts.gpus}
    if not facts.nvswitch or generations <= PCI_NVSWITCH_GENERATIONS:
        switched = _refs(settings, lambda s: "NVSwitch" in s.reason)
        claims.append(Claim("nvswitch", "yes" if facts.nvswitch else "no", switched))
    return claims


def nic_claims(nic: NicFacts, settings: tuple[Setting, ...]) -> list[Claim]:
    """The interface by name, then its driver, speed, NUMA node and RDMA device as stated."""
    base = f"nic/{nic.name}"
    device = nic.rdma_device

    def on_name(s: Setting) -> bool:
        named = names(s.key, nic.name) or names(s.value, nic.name) or names(s.reason, nic.name)
        return named or (device is not None and (names(s.key, device) or names(s.value, device)))

    everything = _refs(settings, on_name)
    claims = [Claim(f"{base}/present", "yes", everything)]
    if nic.model is not None:
        claims.append(Claim(f"{base}/driver", nic.model.driver, everything))
    if nic.speed_gbps is not None:
        sized = _refs(
            settings, lambda s: names(s.reason, nic.name) and s.kind not in {"irq", "pcie-acs"}
        )
        claims.append(Claim(f"{base}/speed_mbps", str(nic.speed_gbps * 1000), sized))
    if nic.numa_node is not None:
        pinned = _refs(
            settings, lambda s: s.kind == "irq" and s.key == nic.name and not resolved_on_node(s)
        )
        claims.append(Claim(f"{base}/numa_node", str(nic.numa_node), pinned))
    if device is not None:
        hca = _refs(settings, lambda s: names(s.key, device) or names(s.value, device))
        claims.append(Claim(f"{base}/rdma_device", device, hca))
    return [*claims, *pci_claims(nic, settings)]


def pci_claims(nic: NicFacts, settings: tuple[Setting, ...]) -> list[Claim]:
    """A NIC with a pci_address: a network function there, whatever the host names the
    interface, and of the model's PCI ids; the settings that found the port by it depend on it."""
    address = nic.pci_address
    if address is None:
        return []
    base = f"nic/{nic.name}"
    found_by = _refs(settings, lambda s: address in s.value)
    claims = [Claim(f"{base}/pci_address", address, found_by)]
    if nic.model is not None:
        claims.append(Claim(f"{base}/pci_id", ",".join(nic.model.pci_ids), found_by))
    return claims


def disk_claims(disk: DiskFacts, settings: tuple[Setting, ...]) -> list[Claim]:
    base = f"disk/{disk.name}"
    named = _refs(settings, lambda s: names(s.key, disk.name) or names(s.value, disk.name))
    by_kind = _refs(settings, lambda s: s.kind == "udev" and s.key == disk.kind)
    return [Claim(f"{base}/present", "yes", named), Claim(f"{base}/kind", disk.kind, by_kind)]


def os_claims(facts: Facts, settings: tuple[Setting, ...]) -> list[Claim]:
    """Page size always (the format's default is 4 KiB); kernel and distribution only where the
    file names them, which is when the plan was made for them."""
    paged = _refs(settings, lambda s: "KiB pages" in s.reason or "page size" in s.reason)
    claims = [Claim("os.page_size_kib", str(facts.os.page_size_kib), paged)]
    release = facts.os.kernel_release
    if release is not None:
        claims.append(
            Claim("os.kernel", release, _refs(settings, lambda s: names(s.reason, release)))
        )
    distro = facts.os.distro
    if distro is not None:
        targeted = _refs(
            settings,
            lambda s: (
                s.rule == DISTRO_RULE or names(s.reason, distro.key) or distro.name in s.reason
            ),
        )
        # what the image's /etc/os-release says where the table names it (AL2023: amzn-2023; a
        # site table extending a shipped one: that one's), else every name of the table, key
        # first, any of which the node's ID (or ID_LIKE) and VERSION_ID may match
        named = distro.os_release or ",".join((distro.key, *distro.aliases))
        claims.append(Claim("os.distro", named, targeted))
    return claims


def plan_claims(facts: Facts, settings: tuple[Setting, ...]) -> tuple[Claim, ...]:
    """Every claim of ``facts`` the node can show, with the settings of the plan made from it."""
    nosmt = any(s.kind == "kernel-arg" and s.key == "nosmt" for s in settings)
    return (
        *cpu_claims(facts, settings, nosmt),
        *numa_claims(facts, settings),
        *gpu_claims(facts, settings),
        *(claim for nic in facts.nics for claim in nic_claims(nic, settings)),
        *(claim for disk in facts.disks for claim in disk_claims(disk, settings)),
        *os_claims(facts, settings),
    )
