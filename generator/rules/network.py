"""Network: socket buffers sized to the NICs that carry TCP, backlogs, multi-rail ARP, BBR, and
the NCCL defaults and NUMA hints drawn from the NICs and GPUs the hardware file describes."""

from __future__ import annotations

from generator.inputs.facts import Facts, NicFacts
from generator.inputs.profile import Profile
from generator.model.cpulist import compress_cpus
from generator.model.vendors import GpuVendor
from generator.rules.base import MIB, Output, load_module, nccl_default, note, rule, sysctl

# Round-trip times the socket buffers are sized for: a serving front end sees clients across a
# region; training side paths (checkpoints, datasets) cross a cluster and its storage.
RTT_MS = {"inference": 20, "training": 40}
BUFFER_FLOOR = 16 * MIB
# Caps from the reference profiles: 256 MiB serving, 512 MiB training (NVIDIA's multi-node
# training profiles ship the same 512 MiB).
BUFFER_CAP = {"inference": 256 * MIB, "training": 512 * MIB}
FAST_NIC_GBPS = 100


def _next_power_of_two(value: int) -> int:
    return 1 << (value - 1).bit_length()


def socket_buffer_bytes(speed_gbps: int, intent: str) -> int:
    """Bandwidth-delay product of the fastest TCP NIC, rounded up to a power of two."""
    bdp = speed_gbps * 1_000_000_000 // 8 * RTT_MS[intent] // 1000
    return min(BUFFER_CAP[intent], max(BUFFER_FLOOR, _next_power_of_two(bdp)))


def _fastest(nics: tuple[NicFacts, ...]) -> NicFacts | None:
    known = [nic for nic in nics if nic.speed_gbps]
    return max(known, key=lambda nic: nic.speed_gbps or 0) if known else None


@rule("network.rdma-paths")
def rdma_paths(facts: Facts, profile: Profile) -> Output:
    """Say that RDMA fabrics need no TCP sysctl (RDMA bypasses the kernel stack)."""
    rdma_compute = [nic.name for nic in facts.nics if nic.rdma and nic.role == "compute"]
    if rdma_compute:
        yield note(
            f"RDMA fabric NICs ({', '.join(rdma_compute)}) bypass the kernel TCP stack: "
            "no socket buffer setting helps them, so none is sized for them"
        )


@rule("network.socket-buffers")
def socket_buffers(facts: Facts, profile: Profile) -> Output:
    """Size TCP socket buffer limits to the bandwidth-delay product of the fastest TCP NIC."""
    fastest = _fastest(facts.tcp_nics)
    if fastest is None or (fastest.speed_gbps or 0) < 10:
        unknown = [nic.name for nic in facts.tcp_nics if not nic.speed_gbps]
        missing = f" (no speed_gbps known for {', '.join(unknown)})" if unknown else ""
        yield note(
            f"no NIC of a known 10 Gbit/s or more carries TCP{missing}: "
            "socket buffer defaults are kept (net.core.rmem_max, net.core.wmem_max, "
            "net.ipv4.tcp_rmem and net.ipv4.tcp_wmem: NVIDIA's multiNodeTraining profiles "
            "raise them to 512 MiB whatever the NIC)"
        )
        return
    assert fastest.speed_gbps is not None
    size = socket_buffer_bytes(fastest.speed_gbps, profile.intent)
    rtt = RTT_MS[profile.intent]
    why = (
        f"{fastest.name} carries TCP at {fastest.speed_gbps} Gbit/s: autotuning only grows "
        f"buffers up to the max, sized here to the bandwidth-delay product at {rtt} ms "
        f"({size // MIB} MiB, at most {BUFFER_CAP[profile.intent] // MIB} MiB for {profile.intent})"
    )
    middle = 131072 if profile.intent == "training" else 87380
    yield sysctl("net.core.rmem_max", size, why)
    yield sysctl("net.core.wmem_max", size, why)
    yield sysctl("net.ipv4.tcp_rmem", f"4096 {middle} {size}", why)
    yield sysctl(
        "net.ipv4.tcp_wmem",
        f"4096 {65536 if profile.intent == 'inference' else middle} {size}",
        why,
    )


@rule("network.backlog", vendors=(GpuVendor.NVIDIA,))
def backlog(facts: Facts, profile: Profile) -> Output:
    """Deepen the per-CPU receive backlog for NICs of 100 Gbit/s and more."""
    fastest = _fastest(facts.tcp_nics)
    if fastest is None or (fastest.speed_gbps or 0) < FAST_NIC_GBPS:
        if facts.has_gpus and facts.tcp_nics:
            yield note(
                "net.core.netdev_max_backlog left at the default (NVIDIA's generic and "
                "multiNodeTraining profiles set 10000): no TCP NIC of a known 100 Gbit/s or "
                "more delivers bursts that overflow it"
            )
        return
    yield sysctl(
        "net.core.netdev_max_backlog",
        250000,
        f"{fastest.name} at {fastest.speed_gbps} Gbit/s delivers bursts that overflow "
        "the 1000-packet default backlog (drops counted in /proc/net/softnet_stat)",
    )


@rule("network.somaxconn")
def somaxconn(facts: Facts, profile: Profile) -> Output:
    """A deep accept queue for inference front ends."""
    if profile.intent != "inference" or not facts.tcp_nics:
        return
    yield sysctl(
        "net.core.somaxconn",
        65535,
        "serving front ends accept bursts of connections; the 4096 default queue drops them",
    )


@rule("network.multirail-arp", vendors=(GpuVendor.NVIDIA,))
def multirail_arp(facts: Facts, profile: Profile) -> Output:
    """Each NIC answers ARP only for its own address when several NICs share a role."""
    roles = [nic.role for nic in facts.nics if nic.role in {"compute", "storage"}]
    shared = sorted({role for role in roles if roles.count(role) > 1})
    if not shared:
        if facts.has_gpus:
            yield note(
                "arp_announce=2/arp_ignore=1 (NVIDIA's nvidia-base profile sets them on "
                "every host) left at the default: with at most one compute and one storage "
                "NIC no other NIC can answer ARP for their addresses"
            )
        return
    why = (
        f"several {'/'.join(shared)} NICs on one host (multi-rail): without this one NIC "
        "answers ARP for its neighbours' addresses and steals their traffic"
    )
    yield sysctl("net.ipv4.conf.all.arp_announce", 2, why)
    yield sysctl("net.ipv4.conf.all.arp_ignore", 1, why)
    yield note(
        "net.ipv4.conf.default.arp_announce/arp_ignore (NVIDIA's nvidia-base sets them too) "
        "not set: the kernel applies the larger of conf.all and the interface's own value "
        "(Documentation/networking/ip-sysctl.rst), so conf.all already covers every interface"
    )


@rule("network.bbr", vendors=(GpuVendor.NVIDIA,))
def bbr(facts: Facts, profile: Profile) -> Output:
    """BBR and fq for multi-node training over TCP side paths."""
    if not facts.tcp_nics:
        return
    if not profile.multinode:
        if facts.has_gpus:
            yield note(
                "TCP congestion control left at the default (NVIDIA's generic and "
                "multiNodeTraining profiles select bbr + fq): single-node work has no "
                "long bandwidth-delay TCP paths for BBR to help"
            )
        return
    why = (
        "multi-node training moves checkpoints and datasets over high bandwidth-delay TCP "
        "paths, where BBR keeps throughput that loss-based CUBIC gives up"
    )
    yield load_module("tcp_bbr", why + " (loaded before sysctl.d selects it)")
    yield sysctl("net.core.default_qdisc", "fq", why + "; BBR paces through the fq qdisc")
    yield sysctl("net.ipv4.tcp_congestion_control", "bbr", why)
    yield note(
        "net.ipv4.tcp_max_syn_backlog (NVIDIA's multiNodeTraining: 8192) not set: the kernel "
        "sizes it from the TCP hash table, max(128, established-hash size / 128) "
        "(net/ipv4/tcp_ipv4.c, tcp_sk_init), thousands on servers with this much memory, and "
        "training opens few, long-lived connections"
    )


# The roles NCCL's bootstrap and socket transport may use, in the order preferred: never a
# compute fabric port (RDMA carries the collectives) or a storage port.
SOCKET_ROLES = ("frontend", "management")


def _socket_interfaces(facts: Facts) -> tuple[str, list[str]] | None:
    """(role, names) of the NICs NCCL's sockets should use: the frontend ones, else management."""
    for role in SOCKET_ROLES:
        names = [nic.name for nic in facts.nics if nic.role == role]
        if names:
            return role, names
    return None


# NCCL keeps at most MAX_IB_DEVS entries of NCCL_IB_HCA (32 in current releases, 16 in older
# ones; src/transport/net_ib.cc) and reads a value of at most 1023 bytes from nccl.conf
# (src/misc/param.cc setEnvFile, envValue[1024]): a longer list would be cut without a word.
IB_HCA_MAX_DEVICES = 16
NCCL_CONF_MAX_VALUE = 1023


@rule("network.nccl")
def nccl(facts: Facts, profile: Profile) -> Output:
    """NCCL defaults in /etc/nccl.conf for training on compute RDMA fabrics.

    NCCL reads NCCL_* variables from ~/.nccl.conf and /etc/nccl.conf as KEY=VALUE lines, a job's
    environment winning (NCCL User Guide, "Environment Variables"; src/misc/param.cc
    setEnvFile/initEnv). NCCL_SOCKET_IFNAME takes a list of interface-name prefixes, exact names
    when it starts with "=" (same page). NCCL_IB_HCA takes RDMA device names (mlx5_0), prefixes
    too unless the list starts with "=" (src/transport/net_ib.cc ncclIbInit: searchExact;
    src/misc/utils.cc matchIf compares the whole name then): without it mlx5_1 also selects
    mlx5_10. It is written from nics[].rdma_device when every compute RDMA NIC has one, so NCCL
    never runs collectives over a storage or front-end HCA; else a note says how to add them.
    """
    compute = [nic for nic in facts.rdma_nics if nic.role == "compute"]
    if profile.intent != "training" or not compute:
        return
    yield from _socket_ifname(facts)
    yield from _ib_hca(facts, compute)


def _socket_ifname(facts: Facts) -> Output:
    sockets = _socket_interfaces(facts)
    others = sorted({nic.role for nic in facts.nics if nic.role in ("storage", "management")})
    if sockets is None:
        yield note(
            "NCCL_SOCKET_IFNAME not written: the hardware file names no frontend or management "
            "NIC for NCCL's bootstrap sockets"
        )
        return
    role, names = sockets
    avoided = f"; never the {'/'.join(others)} ports" if role == "frontend" and others else ""
    yield nccl_default(
        "NCCL_SOCKET_IFNAME",
        "=" + ",".join(names),
        f"NCCL's bootstrap and socket fallback use the {role} NIC(s), exactly these names "
        f"(the leading equals sign), not whichever interface it finds first{avoided}; "
        "the compute ports carry the collectives over RDMA",
    )


def _ib_hca(facts: Facts, compute: list[NicFacts]) -> Output:
    other_rdma = [nic.name for nic in facts.rdma_nics if nic.role != "compute"]
    also = f"NCCL would also use the RDMA ports of {', '.join(other_rdma)}" if other_rdma else ""
    unnamed = [nic.name for nic in compute if nic.rdma_device is None]
    if unnamed:
        how = (
            "give each compute NIC its rdma_device, the name under "
            "/sys/class/net/<interface>/device/infiniband/ (gen detect fills it)"
        )
        why = also or "every RDMA port here is a compute port, which NCCL uses on its own"
        yield note(
            f"NCCL_IB_HCA not written: no rdma_device for {', '.join(unnamed)}; {why}; "
            f"to name them, {how}"
        )
        return
    devices = [nic.rdma_device for nic in compute if nic.rdma_device is not None]
    value = "=" + ",".join(devices)
    if len(devices) > IB_HCA_MAX_DEVICES or len(value) > NCCL_CONF_MAX_VALUE:
        yield note(
            f"NCCL_IB_HCA not written: {len(devices)} compute HCAs are more than NCCL keeps "
            f"in one list ({IB_HCA_MAX_DEVICES} in older releases, {NCCL_CONF_MAX_VALUE} bytes "
            "in nccl.conf)"
        )
        return
    avoided = f"; {also} otherwise" if also else ""
    yield nccl_default(
        "NCCL_IB_HCA",
        value,
        "NCCL's RDMA transport uses exactly the compute HCAs (the leading equals sign: whole "
        f"names, so mlx5_1 never also selects mlx5_10){avoided}",
    )


def _nodes_of_gpus(facts: Facts) -> dict[int, list[int]]:
    """NUMA node -> the GPU indexes on it (PCI order, as gpus[].numa_nodes lists them)."""
    nodes: dict[int, list[int]] = {}
    index = 0
    for group in facts.gpus:
        for offset in range(group.count):
            if group.numa_nodes is not None:
                nodes.setdefault(group.numa_nodes[offset], []).append(index + offset)
        index += group.count
    return nodes


@rule("network.gpu-numa-hints", vendors=(GpuVendor.NVIDIA,))
def gpu_numa_hints(facts: Facts, profile: Profile) -> Output:
    """Say which NUMA node each GPU is on, for the affinity of serving units and NCCL.

    gpus[].numa_nodes of the hardware file gives one node per GPU in PCI order (nvidia-smi's
    index). A process that runs away from its GPU's node pays a socket hop on every host<->GPU
    copy; NCCL binds its own threads to the GPU's local CPUs (NCCL_IGNORE_CPU_AFFINITY, NCCL
    User Guide), a serving process must be told. Nothing is set: goldtune writes no serving unit.
    The node's CPUs are named by the kernel's list (/sys/devices/system/node/node<N>/cpulist),
    not computed here: numactl and systemd take the node number itself.
    """
    if not facts.has_gpus:
        return
    if not facts.is_numa:
        yield note("one NUMA node: every process is local to the GPUs; no affinity hint")
        return
    nodes = _nodes_of_gpus(facts)
    if not nodes:
        yield note(
            "no gpus[].numa_nodes in the hardware file: no NUMA affinity hint for serving units"
        )
        return
    places = "; ".join(
        f"GPU {compress_cpus(set(gpus))} on node {node}" for node, gpus in sorted(nodes.items())
    )
    who = (
        "bind each serving process to its GPU's node (numactl --cpunodebind=N --membind=N, or "
        "NUMAPolicy=bind and NUMAMask=N in its systemd unit; the node's CPUs are in "
        "/sys/devices/system/node/nodeN/cpulist)"
        if profile.intent == "inference"
        else "NCCL binds its threads to each GPU's local CPUs itself; pin data loaders the same"
    )
    yield note(f"NUMA affinity hint (nvidia-smi's GPU index): {places}: {who}")
