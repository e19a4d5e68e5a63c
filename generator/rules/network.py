"""Network: socket buffers sized to the NICs that carry TCP, backlogs, multi-rail ARP, BBR, and
the NCCL defaults and NUMA hints drawn from the NICs and GPUs the hardware file describes."""

from __future__ import annotations

from collections.abc import Callable

from generator.inputs.facts import Facts, NicFacts
from generator.inputs.profile import Profile
from generator.model.cpulist import compress_cpus
from generator.model.layout import NCCL_UNIT
from generator.model.nccl_boot import Search, at_boot, resolved_reason
from generator.model.setting import Setting
from generator.model.vendors import GpuVendor
from generator.rules.base import (
    MIB,
    Output,
    load_module,
    nccl_default,
    note,
    rccl_default,
    rule,
    service,
    sysctl,
)

# Round-trip times the socket buffer *limits* are sized for: a serving front end sees clients
# across a region; training side paths (checkpoints, datasets) reach storage across sites. The
# limits are ceilings, not allocations: autotuning grows a socket's buffers only to what its
# measured rate x RTT needs (net/ipv4/tcp_input.c tcp_rcv_space_adjust, tcp_sndbuf_expand,
# bounded by tcp_rmem[2]/tcp_wmem[2]), so a flow inside one datacenter (~0.1 ms: ~1.25 MB at
# 100 Gbit/s) stays far below the ceiling, while the kernel's own (tcp_rmem[2]: at most 6 MiB,
# ip-sysctl.rst; 32 MiB since Linux 6.16, 572be9bf9d0d) would hold one 100 Gbit/s flow at
# 20 ms to about 2.5 (13) Gbit/s. What all sockets together may take is bounded by tcp_mem,
# which goldtune leaves to the kernel.
RTT_MS = {"inference": 20, "training": 40}
BUFFER_FLOOR = 16 * MIB
# Caps from the reference profiles: 256 MiB serving, 512 MiB training (NVIDIA's multi-node
# training profiles ship the same 512 MiB).
BUFFER_CAP = {"inference": 256 * MIB, "training": 512 * MIB}
FAST_NIC_GBPS = 100
# tcp_rmem's middle value, the kernel's own default since Linux 4.20 (a337531b942b "tcp: up
# initial rmem to 128KB and SYN rwin to around 64KB"; Documentation/networking/ip-sysctl.rst
# "Default: 131072 bytes"): restated because the sysctl takes all three values at once, and
# never the 87380 of older kernels, which would lower today's default.
TCP_RMEM_DEFAULT = 131072


def _next_power_of_two(value: int) -> int:
    return 1 << (value - 1).bit_length()


def socket_buffer_bytes(speed_gbps: int, intent: str) -> int:
    """Bandwidth-delay product of the fastest TCP NIC, rounded up to a power of two."""
    bdp = speed_gbps * 1_000_000_000 // 8 * RTT_MS[intent] // 1000
    return min(BUFFER_CAP[intent], max(BUFFER_FLOOR, _next_power_of_two(bdp)))


def _fastest(nics: tuple[NicFacts, ...]) -> NicFacts | None:
    known = [nic for nic in nics if nic.speed_gbps]
    return max(known, key=lambda nic: nic.speed_gbps or 0) if known else None


def _fastest_tcp(facts: Facts) -> NicFacts | None:
    """The fastest NIC whose traffic is TCP: a NIC with RDMA in use (an InfiniBand storage port,
    a RoCE one) moves its storage traffic over RDMA, which no socket buffer touches, and carries
    TCP only on the side (IPoIB, NFS over TCP), so it counts only when no other NIC carries TCP."""
    plain = _fastest(tuple(nic for nic in facts.tcp_nics if not nic.rdma))
    return plain or _fastest(facts.tcp_nics)


def _carries(nic: NicFacts) -> str:
    if nic.rdma:
        return (
            f"{nic.name} ({nic.speed_gbps} Gbit/s; every NIC here that carries TCP uses RDMA) "
            f"moves its {nic.role} traffic over RDMA, which bypasses socket buffers; these serve "
            "the TCP it also carries (IPoIB, NFS over TCP)"
        )
    return f"{nic.name} carries TCP at {nic.speed_gbps} Gbit/s"


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
    fastest = _fastest_tcp(facts)
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
        f"{_carries(fastest)}: autotuning grows a socket's buffers only as far as its rate x RTT "
        f"needs and never past this ceiling, sized to the bandwidth-delay product at {rtt} ms "
        f"({size // MIB} MiB, at most {BUFFER_CAP[profile.intent] // MIB} MiB for "
        f"{profile.intent}); flows inside the datacenter stay far below it"
    )
    yield sysctl("net.core.rmem_max", size, why)
    yield sysctl("net.core.wmem_max", size, why)
    yield sysctl("net.ipv4.tcp_rmem", f"4096 {TCP_RMEM_DEFAULT} {size}", why)
    yield sysctl(
        "net.ipv4.tcp_wmem",
        f"4096 {65536 if profile.intent == 'inference' else TCP_RMEM_DEFAULT} {size}",
        why,
    )


# The deeper per-CPU backlog: the brief's value (TUNING.md), the one Mellanox's mlnx-tools
# sysctl_perf_tuning sets (tsbin/sysctl_perf_tuning).
BACKLOG_PACKETS = 250000


@rule("network.backlog", vendors=(GpuVendor.NVIDIA,))
def backlog(facts: Facts, profile: Profile) -> Output:
    """Deepen the per-CPU receive backlog where packets queue on it: container veth traffic.

    netdev_max_backlog bounds each CPU's input_pkt_queue, which only enqueue_to_backlog fills
    (net/core/dev.c): from netif_rx (veth's receive side, drivers/net/veth.c veth_forward_skb ->
    __netif_rx; loopback; non-NAPI drivers) and from RPS steering, which
    netif_receive_skb_internal takes only when rps_needed is on. A NAPI NIC (mlx5, ice, bnxt)
    without RPS hands its packets straight to the stack, so on bare metal the value does
    nothing; goldtune enables no RPS. Under a container runtime every packet a pod receives
    through its veth pair queues there, 1000 packets by default, so bursts from a fast NIC drop.
    """
    # a NIC with RDMA in use moves its traffic over RDMA, not through the pods' veth pairs
    fastest = _fastest(tuple(nic for nic in facts.tcp_nics if not nic.rdma))
    fast = fastest is not None and (fastest.speed_gbps or 0) >= FAST_NIC_GBPS
    containers = profile.containers != "none" or profile.kubernetes
    if fastest is None or not fast or not containers:
        if facts.has_gpus and facts.tcp_nics:
            why = (
                "no container runtime here, and a NAPI NIC without RPS never queues to it "
                "(net/core/dev.c: only netif_rx and RPS steering use the per-CPU backlog; "
                "goldtune enables no RPS: raise it with RPS or veth traffic)"
                if not containers
                else "no TCP NIC of a known 100 Gbit/s or more without RDMA feeds the pods' "
                "veth traffic bursts that overflow it"
            )
            yield note(
                "net.core.netdev_max_backlog left at the default (NVIDIA's generic and "
                f"multiNodeTraining profiles set 10000): {why}"
            )
        return
    yield sysctl(
        "net.core.netdev_max_backlog",
        BACKLOG_PACKETS,
        f"{fastest.name} at {fastest.speed_gbps} Gbit/s feeds the containers, whose veth pairs "
        "queue every received packet on the per-CPU backlog (veth_forward_skb -> __netif_rx); "
        "the 1000-packet default drops bursts (counted in /proc/net/softnet_stat)",
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

# NCCL keeps at most MAX_IB_DEVS entries of NCCL_IB_HCA (32 in current releases, 16 in older
# ones; src/transport/net_ib.cc) and reads a value of at most 1023 bytes from nccl.conf
# (src/misc/param.cc setEnvFile, envValue[1024]): a longer list would be cut without a word.
IB_HCA_MAX_DEVICES = 16
NCCL_CONF_MAX_VALUE = 1023

# How a name becomes a fact, said in every note that leaves a list out for want of one.
HOW_TO_MAKE_REAL = (
    "names_real: true on a NIC whose name and rdma_device you checked on the booted host "
    "(gen detect writes it for the names it reads)"
)


# The writer of one NCCL_* default, in the file one collective library reads, and the library's
# name its reasons give.
ConfWriter = tuple[Callable[[str, object, str], Setting], str]


@rule("network.nccl", vendors=(GpuVendor.NVIDIA, GpuVendor.AMD))
def nccl(facts: Facts, profile: Profile) -> Output:
    """NCCL defaults in /etc/nccl.conf (RCCL's in /etc/rccl.conf) for training on RDMA fabrics.

    NCCL reads NCCL_* variables from ~/.nccl.conf and /etc/nccl.conf as KEY=VALUE lines, a job's
    environment winning (NCCL User Guide, "Environment Variables"; src/misc/param.cc
    setEnvFile/initEnv). NCCL_SOCKET_IFNAME and NCCL_IB_HCA are lists of name prefixes; a leading
    "^" excludes the list instead, then a "=" makes every entry a whole name (src/os/linux.cc
    ncclOsFindInterfaces and src/transport/net_ib/init.cc: searchNot, then searchExact;
    src/misc/utils.cc matchIf compares the name with its terminating NUL when exact): without
    it mlx5_1 also selects mlx5_10.

    Only names the hardware file states as real (nics[].names_real: gen detect, or the user)
    are pinned, never a shipped system's placeholders, because a list that matches nothing
    breaks every job. NCCL_SOCKET_IFNAME given: ncclFindInterfaces (src/misc/socket.cc) looks
    only at the list, and none found fails bootstrapNetInit ("Bootstrap : no socket interface
    found", ncclInvalidUsage, src/bootstrap.cc) and the IB transport's own address lookup ("NET/IB
    : No IP interface found"). Unset: NCCL searches ib*, then everything but docker/lo/virbr,
    then docker, lo and virbr, and finds one wherever any interface is up. An exclusion list
    (^docker,lo) is no safe stand-in: it drops those fallbacks, so it too can match nothing. A
    wrong NCCL_IB_HCA leaves the IB transport without devices, and NCCL moves the collectives onto
    TCP sockets without an error (src/plugin/net.cc: a plugin with no device is disabled, Socket
    is next). So a name not stated as real is never pinned as such.

    Such names are resolved at boot instead (issue 38): the value becomes a search
    (generator/model/nccl_boot.py) that nccl-resolve runs on the node before the container
    runtimes and kubelet start, by each port's pci_address, else (NCCL_IB_HCA only) by the
    compute models' PCI ids, speed, NUMA nodes and count; it writes the names it finds for sure
    between two marks of nccl.conf, and none where it cannot tell (a BlueField-3 storage port is
    never a ConnectX-7 by PCI id; a storage card of the compute model makes the count differ).
    Without pci_address or a model there is nothing to search by: unset, and a note says why.

    With AMD GPUs the same variables go to /etc/rccl.conf: RCCL, NCCL's code ported to ROCm,
    reads ~/.rccl.conf and /etc/rccl.conf and never /etc/nccl.conf (ROCm/rccl
    src/misc/param.cc initEnv), and takes the interface and HCA lists as NCCL does.
    """
    compute = [nic for nic in facts.rdma_nics if nic.role == "compute"]
    if profile.intent != "training" or not compute:
        return
    writers = _conf_writers(facts)
    written = [*_socket_ifname(facts, writers), *_ib_hca(facts, compute, writers)]
    yield from written
    boot_keys = [s.key for s in written if isinstance(s, Setting) and at_boot(s.value)]
    if boot_keys:
        yield service(
            NCCL_UNIT,
            "enable",
            f"writes {' and '.join(dict.fromkeys(boot_keys))} at boot from what the node has, "
            "before the container runtime and kubelet start; writes nothing where it finds none",
        )


def _conf_writers(facts: Facts) -> tuple[ConfWriter, ...]:
    """nccl.conf for NVIDIA GPUs (and a machine without GPUs), rccl.conf for AMD ones."""
    writers: list[ConfWriter] = []
    if facts.has_nvidia_gpus or not facts.has_gpus:
        writers.append((nccl_default, "NCCL"))
    if facts.has_gpus_of(GpuVendor.AMD):
        writers.append((rccl_default, "RCCL"))
    return tuple(writers)


def _socket_nics(facts: Facts) -> tuple[str, list[NicFacts]] | None:
    """(role, NICs) NCCL's sockets should use: the frontend ones, else the management ones."""
    for role in SOCKET_ROLES:
        nics = [nic for nic in facts.nics if nic.role == role]
        if nics:
            return role, nics
    return None


def _socket_ifname(facts: Facts, writers: tuple[ConfWriter, ...]) -> Output:
    sockets = _socket_nics(facts)
    others = sorted({nic.role for nic in facts.nics if nic.role in ("storage", "management")})
    if sockets is None:
        yield note(
            "NCCL_SOCKET_IFNAME not written: the hardware file names no frontend or management "
            "NIC for NCCL's bootstrap sockets"
        )
        return
    role, nics = sockets
    names = [nic.name for nic in nics if nic.names_real]
    search = by_pci(nics)
    if not names and search is not None:
        for write, library in writers:
            what = f"the {role} NICs' interfaces that exist and are up (operstate)"
            yield write(
                "NCCL_SOCKET_IFNAME",
                search.value,
                resolved_reason(library, "NCCL_SOCKET_IFNAME", search, what),
            )
        return
    if not names:
        yield note(
            f"NCCL_SOCKET_IFNAME not written: the {role} NIC name(s) "
            f"{', '.join(nic.name for nic in nics)} are not stated as real, and a name no "
            "interface has fails every job's bootstrap (\"no socket interface found\"); NCCL's "
            "own search (ib*, then any interface but docker/lo/virbr) is kept; to pin them, "
            f"{HOW_TO_MAKE_REAL}"
        )
        return
    avoided = f"; never the {'/'.join(others)} ports" if role == "frontend" and others else ""
    for write, library in writers:
        yield write(
            "NCCL_SOCKET_IFNAME",
            "=" + ",".join(names),
            f"{library}'s bootstrap and socket fallback use the {role} NIC(s), exactly these names "
            f"(the leading equals sign), not whichever interface it finds first{avoided}; "
            "the compute ports carry the collectives over RDMA",
        )


def by_pci(nics: list[NicFacts]) -> Search | None:
    """The ports by their PCI addresses, when every one has it (nics[].pci_address)."""
    addresses = [nic.pci_address for nic in nics if nic.pci_address is not None]
    if not addresses or len(addresses) != len(nics):
        return None
    return Search(pci=tuple(dict.fromkeys(addresses)))


def by_role_facts(compute: list[NicFacts], facts: Facts) -> Search | None:
    """The compute ports by their models' PCI ids, their one speed and their NUMA nodes where
    the file states them, never at another NIC's PCI address, counted; None when a port's model
    is unknown (no id to look for: a driver alone matches the storage cards too)."""
    models = [nic.model for nic in compute]
    if any(model is None for model in models):
        return None
    speeds = {nic.speed_gbps if nic.speed_stated else None for nic in compute}
    nodes = [nic.numa_node for nic in compute]
    others = {nic.pci_address for nic in facts.nics if nic.role != "compute"}
    return Search(
        ids=tuple(sorted({pci_id for model in models if model for pci_id in model.pci_ids})),
        gbps=speeds.pop() if len(speeds) == 1 else None,  # {None}: a speed not stated
        nodes=tuple(sorted({n for n in nodes if n is not None})) if None not in nodes else (),
        not_at=tuple(sorted(address for address in others if address is not None)),
        expected=len(compute),
    )


def _ib_hca(facts: Facts, compute: list[NicFacts], writers: tuple[ConfWriter, ...]) -> Output:
    other_rdma = [nic.name for nic in facts.rdma_nics if nic.role != "compute"]
    also = f"NCCL would also use the RDMA ports of {', '.join(other_rdma)}" if other_rdma else ""
    why = also or "every RDMA port here is a compute port, which NCCL uses on its own"
    unnamed = [nic.name for nic in compute if nic.rdma_device is None]
    unreal = [nic.name for nic in compute if not nic.names_real]
    search = by_pci(compute) or by_role_facts(compute, facts)
    if (unnamed or unreal) and search is not None and len(compute) <= IB_HCA_MAX_DEVICES:
        roles = "/".join(sorted({nic.role for nic in facts.rdma_nics if nic.role != "compute"}))
        for write, library in writers:
            what = "the compute NICs' RDMA devices (mlx5_0)"
            avoided = f"; {library} would also use the {roles} RDMA ports otherwise"
            yield write(
                "NCCL_IB_HCA",
                search.value,
                resolved_reason(library, "NCCL_IB_HCA", search, what) + (avoided if roles else ""),
            )
        return
    if unnamed:
        how = (
            "give each compute NIC its rdma_device, the name under "
            "/sys/class/net/<interface>/device/infiniband/ (gen detect fills it)"
        )
        yield note(
            f"NCCL_IB_HCA not written: no rdma_device for {', '.join(unnamed)}; {why}; "
            f"to name them, {how}"
        )
        return
    if unreal:
        yield note(
            f"NCCL_IB_HCA not written: the rdma_device of {', '.join(unreal)} is not stated as "
            "real, and a list naming no HCA moves the collectives onto TCP sockets without an "
            f"error; {why}; to pin them, {HOW_TO_MAKE_REAL}"
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
    for write, library in writers:
        yield write(
            "NCCL_IB_HCA",
            value,
            f"{library}'s RDMA transport uses exactly the compute HCAs (the leading equals sign: "
            f"whole names, so mlx5_1 never also selects mlx5_10){avoided}",
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
    if not facts.is_numa:  # nodes WITH CPUs: a process can only be bound to one of those
        yield note("one NUMA node with CPUs: every process is local to the GPUs; no affinity hint")
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


# RDMA drivers that MLNX_OFED / DOCA-OFED extend with the PeerDirect peer-memory API
# (ib_register_peer_memory_client), the one amdgpu-dkms's amdkfd registers with: mlx5.
PEERDIRECT_RDMA_DRIVERS = frozenset({"mlx5_core"})


@rule("network.amd-gpu-rdma", vendors=(GpuVendor.AMD,))
def amd_gpu_rdma(facts: Facts, profile: Profile) -> Output:
    """Say which path lets the RDMA NICs reach AMD GPU memory; no module is loaded for it.

    RCCL's IB transport uses GPU memory directly through one of two paths (ROCm/rccl
    src/transport/net_ib.cc ncclIbGdrSupport, ncclIbDmaBufSupport):

    - PeerDirect: amdgpu-dkms's amdkfd registers as a peer-memory client with the ib_core of
      MLNX_OFED / DOCA-OFED (ROCmRDMA, "now included as part of the ROCK Kernel Driver"; ROCm
      docs, Remote Device Programming), which RCCL finds at
      /sys/kernel/mm/memory_peers/amdkfd/version or by ib_register_peer_memory_client in
      /proc/kallsyms. No module of its own: nothing for modules-load.d (unlike NVIDIA's
      nvidia-peermem).
    - DMA-BUF, with the inbox kernel RDMA stack and rdma-core, and a kernel built with
      CONFIG_DMABUF_MOVE_NOTIFY=y and CONFIG_PCI_P2PDMA=y. Which RCCL matters (the note names
      both): the standalone ROCm/rccl (src/misc/rocmwrap.cc at 081f8fd) only tries it with
      NCCL_DMABUF_ENABLE=1 (default 0) and reads /boot/config-<release> through fopen's result
      without checking it (fgets on NULL), so a job whose root has no such file, as in most
      containers, would crash; goldtune therefore does not write NCCL_DMABUF_ENABLE=1 to
      rccl.conf. The RCCL of ROCm/rocm-systems (projects/rccl/src/misc/rocmwrap.cc, 1f21bd7 as
      read by tuning-review-4 D-A6, and later) defaults it to 1 and reads the kernel config
      from /proc/config.gz, /boot/config-<release> and others, checking each open, then
      /proc/kallsyms: nothing to write there either.

    ROCmRDMA also wants large-BAR GPUs, the IOMMU off or in pass-through (the rule
    boot.iommu-passthrough), and the NIC and GPU under one PCIe root complex.
    """
    if not facts.has_gpus:
        return
    rdma = facts.rdma_nics
    if not rdma:
        return
    peerdirect = [
        nic.name
        for nic in rdma
        if nic.model is not None and nic.model.driver in PEERDIRECT_RDMA_DRIVERS
    ]
    others = [nic.name for nic in rdma if nic.name not in peerdirect]
    if peerdirect:
        yield note(
            f"GPU memory over RDMA for {', '.join(peerdirect)} (mlx5): with MLNX_OFED/DOCA-OFED, "
            "amdgpu-dkms's amdkfd registers as a PeerDirect peer-memory client "
            "(/sys/kernel/mm/memory_peers/amdkfd/version, which RCCL checks: "
            "src/transport/net_ib.cc ncclIbGdrSupport); no module to load, amdgpu registers "
            "itself; with the inbox mlx5 stack the DMA-BUF path below applies instead"
        )
    if others or peerdirect:
        yield note(
            "GPU memory over RDMA through DMA-BUF (inbox kernel RDMA stack and rdma-core"
            + (f": {', '.join(others)}" if others else "")
            + "): needs a kernel with CONFIG_DMABUF_MOVE_NOTIFY=y and CONFIG_PCI_P2PDMA=y. "
            "The standalone ROCm/rccl (src/misc/rocmwrap.cc, 081f8fd) needs "
            "NCCL_DMABUF_ENABLE=1 (default 0) and reads /boot/config-<release> without "
            "checking it opened, so a job without /boot (a container) would crash: not written "
            "to rccl.conf, set it in jobs that see /boot. The RCCL of ROCm/rocm-systems "
            "(projects/rccl, 1f21bd7 and later) enables DMA-BUF by default and reads the kernel "
            "config safely: nothing to set"
        )


@rule("network.rccl-conf", vendors=(GpuVendor.AMD,))
def rccl_conf(facts: Facts, profile: Profile) -> Output:
    """Say which file RCCL reads: /etc/rccl.conf, where this bundle writes RCCL's defaults.

    RCCL's initEnv reads ``~/.rccl.conf``, then ``/etc/rccl.conf``, as KEY=VALUE lines with
    setenv without overwrite, so a job's environment wins over both and the user's file over
    the system's; it never reads /etc/nccl.conf (ROCm/rccl src/misc/param.cc initEnv,
    setEnvFile; RCCL docs, "RCCL environment variables": NCCL_CONF_FILE, default ~/.rccl.conf
    or /etc/rccl.conf). network.nccl therefore writes the NCCL_* defaults of an AMD machine to
    /etc/rccl.conf.
    """
    if not facts.has_gpus:
        return
    yield note(
        "RCCL (AMD's NCCL) reads NCCL_* variables from the environment, then ~/.rccl.conf, then "
        "/etc/rccl.conf, never /etc/nccl.conf (ROCm/rccl src/misc/param.cc initEnv; RCCL "
        "environment variables: NCCL_CONF_FILE): the NCCL_* defaults this bundle decides for "
        "RCCL go to /etc/rccl.conf"
    )
