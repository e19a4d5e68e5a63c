"""network.*: socket buffers from the NICs that carry TCP, backlog, somaxconn, multi-rail ARP,
BBR."""

from __future__ import annotations

import pytest

from generator.model.setting import Setting
from generator.rules import network

from .helpers import (
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

MIB = 1024**2


def buffers(size_mib: int, intent: str) -> set[tuple[str, str, str]]:
    size = str(size_mib * MIB)
    rmem_mid, wmem_mid = ("131072", "65536") if intent == "inference" else ("131072", "131072")
    return {
        ("sysctl", "net.core.rmem_max", size),
        ("sysctl", "net.core.wmem_max", size),
        ("sysctl", "net.ipv4.tcp_rmem", f"4096 {rmem_mid} {size}"),
        ("sysctl", "net.ipv4.tcp_wmem", f"4096 {wmem_mid} {size}"),
    }


RDMA_FABRIC = [rdma_compute(f"ib{i}", numa=None) for i in range(4)]
FRONT_100 = nic("ens3", "frontend", 100)
# mlx5_1 and mlx5_10 side by side: a prefix list would let mlx5_1 select mlx5_10 too
NAMED_FABRIC = [
    {**rdma_compute(f"ib{i}", numa=None), "rdma_device": device}
    for i, device in enumerate(("mlx5_1", "mlx5_10", "mlx5_0", "mlx5_11"))
]
STORAGE_RDMA_NAMED = {**nic("stor0", "storage", 200, rdma=True), "rdma_device": "mlx5_2"}


def real(*nics: dict[str, object]) -> list[dict[str, object]]:
    """The NICs with their names stated as the host's own (names_real: gen detect, or the user)."""
    return [{**entry, "names_real": True} for entry in nics]


REAL_FRONT_100 = real(FRONT_100)[0]
ADDRESSES = ("0000:18:00.0", "0000:40:00.0")
AT_ADDRESSES = [
    {**rdma_compute(f"ib{i}"), "pci_address": address} for i, address in enumerate(ADDRESSES)
]
BLUEFIELD_STORAGE = {**nic("ib8", "storage", 400, rdma=True), "model": "BlueField-3"}
# Compute ports whose names are not stated as real: NCCL_IB_HCA resolved at boot by the model's
# PCI id, speed and count (issue 38), by the boot unit the rule enables
BOOT_HCA = {
    ("nccl", "NCCL_IB_HCA", "boot/id=15b3:1021/gbps=400/count=4"),
    ("service", "goldtune-nccl-resolve.service", "enable"),
}
NO_BUFFERS = "no NIC of a known 10 Gbit/s or more carries TCP"
ARP = {
    ("sysctl", "net.ipv4.conf.all.arp_announce", "2"),
    ("sysctl", "net.ipv4.conf.all.arp_ignore", "1"),
}
BBR = {
    ("module-load", "tcp_bbr", ""),
    ("sysctl", "net.core.default_qdisc", "fq"),
    ("sysctl", "net.ipv4.tcp_congestion_control", "bbr"),
}

CASES: tuple[Case, ...] = (
    Case(
        "rdma-paths-note",
        network.rdma_paths,
        set(),
        hw={"nics": RDMA_FABRIC},
        note="bypass the kernel TCP stack",
    ),
    Case("rdma-paths-tcp-only", network.rdma_paths, set(), hw={"nics": [FRONT_100]}),
    # socket buffers: the bandwidth-delay product of the fastest TCP NIC at 20 ms (inference) or
    # 40 ms (training), a power of two, at least 16 MiB,
    # at most 256 MiB (inference) or 512 MiB (training)
    Case(
        "buffers-100g-inference",
        network.socket_buffers,
        buffers(256, "inference"),
        hw={"nics": [FRONT_100]},
    ),
    Case(
        "buffers-100g-training",
        network.socket_buffers,
        buffers(512, "training"),
        hw={"nics": [FRONT_100]},
        intent="training",
    ),
    Case(
        "buffers-400g-inference-capped-256m",
        network.socket_buffers,
        buffers(256, "inference"),
        hw={"nics": [nic("ens1", "storage", 400, model="ConnectX-7")]},
    ),
    Case(
        "buffers-400g-training-capped-512m",
        network.socket_buffers,
        buffers(512, "training"),
        hw={"nics": [nic("ens1", "storage", 400, model="ConnectX-7")]},
        intent="training",
    ),
    Case(
        "buffers-200g-inference-capped-256m",
        network.socket_buffers,
        buffers(256, "inference"),
        hw={"nics": [nic("ens1", "frontend", 200)]},
    ),
    Case(
        "buffers-25g-inference",
        network.socket_buffers,
        buffers(64, "inference"),
        hw={"nics": [nic("eth0", "frontend", 25)]},
    ),
    Case(
        "buffers-25g-training",
        network.socket_buffers,
        buffers(128, "training"),
        hw={"nics": [nic("eth0", "frontend", 25)]},
        intent="training",
    ),
    Case(
        "buffers-10g-inference",
        network.socket_buffers,
        buffers(32, "inference"),
        hw={"nics": [nic("eth0", "frontend", 10)]},
    ),
    Case(
        "buffers-10g-training",
        network.socket_buffers,
        buffers(64, "training"),
        hw={"nics": [nic("eth0", "frontend", 10)]},
        intent="training",
    ),
    Case(
        "buffers-below-10g",
        network.socket_buffers,
        set(),
        hw={"nics": [nic("eth0", "frontend", 1)]},
        note=NO_BUFFERS,
    ),
    Case(
        "buffers-unknown-speed-named",
        network.socket_buffers,
        set(),
        hw={"nics": [nic("eth0", "frontend")]},
        note=f"{NO_BUFFERS} (no speed_gbps known for eth0)",
    ),
    Case(
        "buffers-slow-and-unknown-speed-named",
        network.socket_buffers,
        set(),
        hw={"nics": [nic("eth0", "frontend", 1), nic("eth1", "storage"), nic("eth2", "frontend")]},
        note=f"{NO_BUFFERS} (no speed_gbps known for eth1, eth2)",
    ),
    Case(
        "buffers-unknown-speed-beside-a-fast-one",
        network.socket_buffers,
        buffers(32, "inference"),
        hw={"nics": [nic("eth0", "frontend"), nic("eth1", "frontend", 10)]},
    ),
    Case("buffers-no-nic", network.socket_buffers, set(), note=NO_BUFFERS),
    # RDMA compute fabrics do not count, however fast; the slower TCP NIC decides
    Case(
        "buffers-rdma-only",
        network.socket_buffers,
        set(),
        hw={"nics": RDMA_FABRIC},
        note=NO_BUFFERS,
    ),
    Case(
        "buffers-rdma-plus-25g-frontend",
        network.socket_buffers,
        buffers(64, "inference"),
        hw={"nics": [*RDMA_FABRIC, nic("eth0", "frontend", 25)]},
    ),
    Case(
        "buffers-management-does-not-count",
        network.socket_buffers,
        set(),
        hw={"nics": [nic("eno1", "management", 100)]},
        note=NO_BUFFERS,
    ),
    Case(
        "buffers-compute-without-rdma-counts",
        network.socket_buffers,
        buffers(256, "inference"),
        hw={"nics": [nic("eth0", "compute", 100, rdma=False)]},
    ),
    Case(
        "buffers-fastest-tcp-nic",
        network.socket_buffers,
        buffers(256, "inference"),
        hw={"nics": [nic("eth0", "frontend", 25), FRONT_100, nic("eth2", "frontend", 10)]},
    ),
    # backlog: only where packets queue on it, the veth pairs of containers fed by a TCP NIC of
    # 100 Gbit/s and more; a NAPI NIC without RPS never uses it (bare metal: fails on main)
    Case(
        "backlog-100g-containers",
        network.backlog,
        {("sysctl", "net.core.netdev_max_backlog", "250000")},
        hw={"nics": [FRONT_100]},
        knobs={"containers": "containerd"},
    ),
    Case(
        "backlog-100g-bare-metal-says-why",
        network.backlog,
        set(),
        hw={"gpus": [{"model": "L4", "count": 1}], "nics": [FRONT_100]},
        note="a NAPI NIC without RPS never queues to it",
    ),
    Case(
        "backlog-25g",
        network.backlog,
        set(),
        hw={"nics": [nic("eth0", "frontend", 25)]},
        knobs={"containers": "containerd"},
    ),
    Case("backlog-rdma-only", network.backlog, set(), hw={"nics": RDMA_FABRIC}),
    Case(
        "backlog-rdma-storage-feeds-no-veth",
        network.backlog,
        set(),
        hw={"gpus": [{"model": "L4", "count": 1}], "nics": [nic("ib8", "storage", 200, rdma=True)]},
        knobs={"containers": "containerd"},
        note="no TCP NIC of a known 100 Gbit/s or more without RDMA",
    ),
    Case(
        "backlog-gpu-slow-tcp-says-why",
        network.backlog,
        set(),
        hw={"gpus": [{"model": "L4", "count": 1}], "nics": [nic("eth0", "frontend")]},
        knobs={"containers": "containerd"},
        note="no TCP NIC of a known 100 Gbit/s or more without RDMA feeds the pods' veth",
    ),
    # somaxconn: inference front ends
    Case(
        "somaxconn-inference",
        network.somaxconn,
        {("sysctl", "net.core.somaxconn", "65535")},
        hw={"nics": [FRONT_100]},
    ),
    Case(
        "somaxconn-training", network.somaxconn, set(), hw={"nics": [FRONT_100]}, intent="training"
    ),
    Case("somaxconn-no-tcp-nic", network.somaxconn, set(), hw={"nics": RDMA_FABRIC}),
    # multi-rail ARP: several compute or storage NICs
    Case(
        "arp-multirail-compute",
        network.multirail_arp,
        ARP,
        hw={"nics": RDMA_FABRIC},
        note="conf.all already covers every interface",
    ),
    Case(
        "arp-two-storage",
        network.multirail_arp,
        ARP,
        hw={"nics": [nic("s0", "storage", 100), nic("s1", "storage", 100)]},
    ),
    Case(
        "arp-one-compute-one-storage",
        network.multirail_arp,
        set(),
        hw={"nics": [rdma_compute(), nic("s0", "storage", 100)]},
    ),
    Case(
        "arp-two-frontends",
        network.multirail_arp,
        set(),
        hw={"nics": [nic("f0", "frontend", 25), nic("f1", "frontend", 25)]},
    ),
    Case(
        "arp-single-rail-gpu-says-why",
        network.multirail_arp,
        set(),
        hw={"gpus": [{"model": "L4", "count": 1}], "nics": [nic("f0", "frontend", 25)]},
        note="nvidia-base",
    ),
    # BBR: multi-node training with a TCP path
    Case(
        "bbr-multinode",
        network.bbr,
        BBR,
        hw={"nics": [*RDMA_FABRIC, FRONT_100]},
        intent="training",
        note="tcp_max_syn_backlog",
        knobs={"multinode": True},
    ),
    Case("bbr-single-node", network.bbr, set(), hw={"nics": [FRONT_100]}, intent="training"),
    Case(
        "bbr-single-node-gpu-says-why",
        network.bbr,
        set(),
        hw={"gpus": [{"model": "L4", "count": 1}], "nics": [FRONT_100]},
        note="multiNodeTraining",
    ),
    Case(
        "bbr-multinode-rdma-only",
        network.bbr,
        set(),
        hw={"nics": RDMA_FABRIC},
        intent="training",
        knobs={"multinode": True},
    ),
    # /etc/nccl.conf: training on compute RDMA fabrics; sockets on the frontend, else management;
    # only names stated as real (names_real) are pinned
    Case(
        "nccl-training-frontend",
        network.nccl,
        {("nccl", "NCCL_SOCKET_IFNAME", "=ens3"), *BOOT_HCA},
        intent="training",
        hw={"nics": [*RDMA_FABRIC, REAL_FRONT_100, nic("mgmt0", "management", 1)]},
    ),
    # AMD GPUs: the same values in /etc/rccl.conf, the file RCCL reads (ROCm/rccl
    # src/misc/param.cc initEnv), never nccl.conf (failed before: they went to nccl.conf)
    Case(
        "nccl-amd-gpus-write-rccl-conf",
        network.nccl,
        {
            ("rccl", "NCCL_SOCKET_IFNAME", "=ens3"),
            ("rccl", "NCCL_IB_HCA", "=mlx5_1,mlx5_10,mlx5_0,mlx5_11"),
        },
        intent="training",
        hw={
            "gpus": [{"model": "MI300X", "count": 8}],
            "nics": [*real(*NAMED_FABRIC), REAL_FRONT_100, STORAGE_RDMA_NAMED],
        },
    ),
    # NCCL_IB_HCA: exact names (=), only the compute HCAs, in the file's order
    Case(
        "nccl-ib-hca-exact-compute-only",
        network.nccl,
        {
            ("nccl", "NCCL_SOCKET_IFNAME", "=ens3"),
            ("nccl", "NCCL_IB_HCA", "=mlx5_1,mlx5_10,mlx5_0,mlx5_11"),
        },
        intent="training",
        hw={"nics": [*real(*NAMED_FABRIC), REAL_FRONT_100, STORAGE_RDMA_NAMED]},
    ),
    Case(
        "nccl-ib-hca-one-unknown",
        network.nccl,
        {("nccl", "NCCL_SOCKET_IFNAME", "=ens3"), *BOOT_HCA},
        intent="training",
        hw={
            "nics": [
                *real(*NAMED_FABRIC[:3], rdma_compute("ib3")),
                REAL_FRONT_100,
                STORAGE_RDMA_NAMED,
            ]
        },
    ),
    Case(
        "nccl-ib-hca-too-many",
        network.nccl,
        {("nccl", "NCCL_SOCKET_IFNAME", "=ens3")},
        intent="training",
        hw={
            "nics": [
                *real(
                    *(
                        {**rdma_compute(f"ib{i}", numa=None), "rdma_device": f"mlx5_{i}"}
                        for i in range(17)
                    )
                ),
                REAL_FRONT_100,
            ]
        },
        note="17 compute HCAs are more than NCCL keeps",
    ),
    Case(
        "nccl-training-management-only",
        network.nccl,
        {("nccl", "NCCL_SOCKET_IFNAME", "=mgmt0,mgmt1"), *BOOT_HCA},
        intent="training",
        hw={
            "nics": [*RDMA_FABRIC, *real(nic("mgmt0", "management", 1), nic("mgmt1", "management"))]
        },
    ),
    Case(
        "nccl-storage-rdma-says-override",
        network.nccl,
        {("nccl", "NCCL_SOCKET_IFNAME", "=ens3"), *BOOT_HCA},
        intent="training",
        hw={"nics": [*RDMA_FABRIC, REAL_FRONT_100, nic("stor0", "storage", 200, rdma=True)]},
    ),
    # placeholder names (a shipped system's, or any file that does not say names_real) are never
    # pinned: a list matching no interface fails NCCL's bootstrap, one matching no HCA silently
    # moves the collectives onto sockets (fails on main, which pinned them)
    Case(
        "nccl-placeholder-frontend-not-pinned",
        network.nccl,
        {("nccl", "NCCL_IB_HCA", "=mlx5_1,mlx5_10,mlx5_0,mlx5_11")},
        intent="training",
        hw={"nics": [*real(*NAMED_FABRIC), FRONT_100]},
        note="NCCL_SOCKET_IFNAME not written: the frontend NIC name(s) ens3 are not stated as real",
    ),
    Case(
        "nccl-placeholder-hcas-not-pinned",
        network.nccl,
        {("nccl", "NCCL_SOCKET_IFNAME", "=ens3"), *BOOT_HCA},
        intent="training",
        hw={"nics": [*NAMED_FABRIC[:2], *real(*NAMED_FABRIC[2:]), REAL_FRONT_100]},
    ),
    Case(
        "nccl-only-the-real-socket-names",
        network.nccl,
        {("nccl", "NCCL_SOCKET_IFNAME", "=ens4"), *BOOT_HCA},
        intent="training",
        hw={"nics": [*RDMA_FABRIC, FRONT_100, *real(nic("ens4", "frontend", 25))]},
    ),
    Case(
        "nccl-no-socket-nic",
        network.nccl,
        BOOT_HCA,
        intent="training",
        hw={"nics": RDMA_FABRIC},
        note="NCCL_SOCKET_IFNAME not written",
    ),
    # Names not stated as real (issue 38): found at boot by what survives renaming. By PCI
    # address when every port has one (failed before: NCCL_IB_HCA was left out with a note)
    Case(
        "nccl-hca-by-pci-address",
        network.nccl,
        {
            ("nccl", "NCCL_IB_HCA", f"boot/pci={ADDRESSES[0]},{ADDRESSES[1]}"),
            ("service", "goldtune-nccl-resolve.service", "enable"),
        },
        intent="training",
        hw={"nics": [*AT_ADDRESSES, BLUEFIELD_STORAGE]},
    ),
    # by role facts: the compute model's PCI id (a BlueField-3's a2dc is never one), its speed,
    # its NUMA nodes, never at another NIC's stated address, and the count
    Case(
        "nccl-hca-by-role-facts-never-the-bluefield",
        network.nccl,
        {
            (
                "nccl",
                "NCCL_IB_HCA",
                "boot/id=15b3:1021/gbps=400/nodes=0,1/not=0000:c1:00.0/count=2",
            ),
            ("service", "goldtune-nccl-resolve.service", "enable"),
        },
        intent="training",
        hw={
            "cpu": {"sockets": 2, "cores_per_socket": 8, "threads_per_core": 1},
            "nics": [
                rdma_compute("ib0", numa=0),
                rdma_compute("ib1", numa=1),
                {**BLUEFIELD_STORAGE, "pci_address": "0000:c1:00.0"},
            ],
        },
    ),
    # a speed the file does not state is the model's maximum only: not matched on the node,
    # where a ConnectX-7 may run at 200 Gbit/s (failed before speed_stated: gbps=400)
    Case(
        "nccl-hca-unstated-speed-is-not-searched",
        network.nccl,
        {
            ("nccl", "NCCL_IB_HCA", "boot/id=15b3:1021/nodes=0/count=2"),
            ("service", "goldtune-nccl-resolve.service", "enable"),
        },
        intent="training",
        hw={"nics": [rdma_compute("ib0", speed=None), rdma_compute("ib1", speed=None)]},
    ),
    # a compute NIC without a model has no id to be found by: left out, as before
    Case(
        "nccl-hca-no-model-no-search",
        network.nccl,
        set(),
        intent="training",
        hw={"nics": [nic("ib0", "compute", 400, rdma=True)]},
        note="NCCL_IB_HCA not written: no rdma_device for ib0",
    ),
    # the socket NICs by their PCI addresses: the interfaces there that are up, at boot
    Case(
        "nccl-socket-by-pci-address",
        network.nccl,
        {
            ("nccl", "NCCL_SOCKET_IFNAME", "boot/pci=0000:a0:00.0"),
            ("nccl", "NCCL_IB_HCA", "=mlx5_1,mlx5_10,mlx5_0,mlx5_11"),
            ("service", "goldtune-nccl-resolve.service", "enable"),
        },
        intent="training",
        hw={"nics": [*real(*NAMED_FABRIC), {**FRONT_100, "pci_address": "0000:a0:00.0"}]},
    ),
    Case("nccl-inference", network.nccl, set(), hw={"nics": [*RDMA_FABRIC, FRONT_100]}),
    Case("nccl-no-rdma", network.nccl, set(), intent="training", hw={"nics": [FRONT_100]}),
    # NUMA hints from gpus[].numa_nodes: said, never set
    Case(
        "numa-hints-inference",
        network.gpu_numa_hints,
        set(),
        hw={
            "gpus": [{"model": "H100-SXM5-80GB", "count": 4, "numa_nodes": [0, 0, 1, 1]}],
            "numa_nodes": 2,
            "cpu": {"sockets": 2, "cores_per_socket": 8, "threads_per_core": 1},
        },
        note="GPU 0-1 on node 0; GPU 2-3 on node 1: bind each serving process",
    ),
    Case(
        "numa-hints-training",
        network.gpu_numa_hints,
        set(),
        intent="training",
        hw={
            "gpus": [{"model": "H100-SXM5-80GB", "count": 2, "numa_nodes": [0, 1]}],
            "numa_nodes": 2,
        },
        note="NCCL binds its threads",
    ),
    Case(
        "numa-hints-unknown",
        network.gpu_numa_hints,
        set(),
        hw={"gpus": [{"model": "L4", "count": 2}], "numa_nodes": 2},
        note="no gpus[].numa_nodes",
    ),
    Case(
        "numa-hints-one-node",
        network.gpu_numa_hints,
        set(),
        hw={"gpus": [{"model": "L4", "count": 1, "numa_nodes": [0]}], "numa_nodes": 1},
        note="one NUMA node with CPUs: every process is local to the GPUs",
    ),
    Case("numa-hints-no-gpu", network.gpu_numa_hints, set()),
    # AMD GPUs over RDMA: PeerDirect (amdkfd's peer-memory client, MLNX_OFED) for mlx5, DMA-BUF
    # otherwise; never a module to load (failed before: no rule said which path applies)
    Case(
        "amd-gpu-rdma-mlx5",
        network.amd_gpu_rdma,
        set(),
        hw={"gpus": [{"model": "MI300X", "count": 8}], "nics": RDMA_FABRIC},
        note="amdgpu-dkms's amdkfd registers as a PeerDirect peer-memory client",
    ),
    Case(
        "amd-gpu-rdma-broadcom",
        network.amd_gpu_rdma,
        set(),
        hw={
            "gpus": [{"model": "MI300X", "count": 8}],
            "nics": [{**rdma_compute("bnxt0", speed=200), "model": "BCM57508"}],
        },
        note="through DMA-BUF (inbox kernel RDMA stack and rdma-core: bnxt0)",
    ),
    # issue 40 item 6: Broadcom's 400G Thor2 is in the catalog (on main: "unknown NIC model")
    Case(
        "amd-gpu-rdma-thor2-400g",
        network.amd_gpu_rdma,
        set(),
        hw={
            "gpus": [{"model": "MI300X", "count": 8}],
            "nics": [{**rdma_compute("bnxt0", speed=400), "model": "BCM57608"}],
        },
        note="through DMA-BUF (inbox kernel RDMA stack and rdma-core: bnxt0)",
    ),
    # issue 40 item 6: AMD's Pollara 400 resolves to the Pensando ionic family entry (on main:
    # "unknown NIC model"), whose RoCE goes through ionic_rdma and DMA-BUF
    Case(
        "amd-gpu-rdma-pollara-400",
        network.amd_gpu_rdma,
        set(),
        hw={
            "gpus": [{"model": "MI355X", "count": 8}],
            "nics": [{**rdma_compute("ens10np0", speed=400), "model": "Pollara 400"}],
        },
        note="through DMA-BUF (inbox kernel RDMA stack and rdma-core: ens10np0)",
    ),
    # D-A6: the DMA-BUF note names the RCCL it holds for (standalone rccl: default 0, unsafe
    # config read; rocm-systems' RCCL: on by default, read safely)
    Case(
        "amd-gpu-rdma-dmabuf-rccl-versions",
        network.amd_gpu_rdma,
        set(),
        hw={
            "gpus": [{"model": "MI300X", "count": 8}],
            "nics": [{**rdma_compute("bnxt0", speed=200), "model": "BCM57508"}],
        },
        note="The RCCL of ROCm/rocm-systems (projects/rccl, 1f21bd7 and later) enables DMA-BUF",
    ),
    Case(
        "amd-gpu-rdma-no-rdma",
        network.amd_gpu_rdma,
        set(),
        hw={"gpus": [{"model": "MI300X", "count": 8}]},
    ),
    Case(
        "amd-gpu-rdma-h100",
        network.amd_gpu_rdma,
        set(),
        hw={"gpus": [{"model": "H100-SXM5-80GB", "count": 8}], "nics": RDMA_FABRIC},
    ),
    # AMD: RCCL's config file is /etc/rccl.conf (RCCL environment variables, NCCL_CONF_FILE),
    # where network.nccl now writes RCCL's defaults (failed before: the note sent them to
    # nccl.conf through NCCL_CONF_FILE)
    Case(
        "rccl-conf-mi300x",
        network.rccl_conf,
        set(),
        hw={"gpus": [{"model": "MI300X", "count": 8}]},
        note="the NCCL_* defaults this bundle decides for RCCL go to /etc/rccl.conf",
    ),
    Case(
        "rccl-conf-h100",
        network.rccl_conf,
        set(),
        hw={"gpus": [{"model": "H100-SXM5-80GB", "count": 8}]},
    ),
)


@pytest.mark.parametrize("case", CASES, ids=case_ids(CASES))
def test_network_rule(case: Case) -> None:
    check_case(case)


@pytest.mark.parametrize("intent", ["inference", "training"])
def test_buffers_never_shrink_as_the_tcp_nic_gets_faster(intent: str) -> None:
    cap = {"inference": 256 * MIB, "training": 512 * MIB}[intent]
    sizes = []
    for speed in (10, 25, 40, 50, 100, 200, 400, 800, 1600):
        out = network.socket_buffers.apply(
            facts(nics=[nic("eth0", "frontend", speed)]), profile(intent)
        )
        sizes.append(int(settings_of(out, "sysctl")["net.core.rmem_max"]))
    assert sizes == sorted(sizes)
    assert all(16 * MIB <= size <= cap and size & (size - 1) == 0 for size in sizes)
    assert sizes[-1] == cap


@pytest.mark.parametrize(
    ("speed", "intent", "size"),
    [
        (400, "inference", 268435456),
        (400, "training", 536870912),
        (800, "training", 536870912),
        (100, "inference", 268435456),
        (50, "inference", 134217728),
        (50, "training", 268435456),
        (10, "inference", 33554432),
        (1, "inference", 16 * MIB),  # the floor (the rule emits nothing below 10 Gbit/s)
        (1, "training", 16 * MIB),
    ],
)
def test_socket_buffer_bytes(speed: int, intent: str, size: int) -> None:
    assert network.socket_buffer_bytes(speed, intent) == size


def test_buffers_ignore_a_faster_rdma_fabric() -> None:
    slow = facts(nics=[nic("eth0", "frontend", 25)])
    with_fabric = facts(nics=[nic("eth0", "frontend", 25), *RDMA_FABRIC])
    assert settings_of(
        network.socket_buffers.apply(slow, profile("training")), "sysctl"
    ) == settings_of(network.socket_buffers.apply(with_fabric, profile("training")), "sysctl")


def test_buffer_reason_names_the_nic_and_speed() -> None:
    out = network.socket_buffers.apply(facts(nics=[FRONT_100]), profile("inference"))
    reasons = [s.reason for s in out if isinstance(s, Setting)]
    assert len(reasons) == len(out) == 4
    assert all(
        "ens3" in r and "100 Gbit/s" in r and "20 ms" in r and "at most 256 MiB for inference" in r
        for r in reasons
    )
    out = network.socket_buffers.apply(facts(nics=[FRONT_100]), profile("training"))
    reasons = [s.reason for s in out if isinstance(s, Setting)]
    assert len(reasons) == 4 and all(
        "40 ms" in r and "at most 512 MiB for training" in r for r in reasons
    )


def test_no_buffer_note_leaves_out_the_speed_list_when_every_speed_is_known() -> None:
    out = network.socket_buffers.apply(
        facts(nics=[nic("eth0", "frontend", 1)]), profile("inference")
    )
    (text,) = notes_of(out)
    assert text.startswith(
        "no NIC of a known 10 Gbit/s or more carries TCP: socket buffer defaults are kept ("
    )


@pytest.mark.parametrize("intent", ["inference", "training"])
def test_tcp_rmem_never_lowers_the_kernels_initial_receive_buffer(intent: str) -> None:
    """tcp_rmem's middle value is the kernel's default, 131072 since Linux 4.20 (ip-sysctl.rst):
    inference restated the older 87380 on main and so lowered it (review W-N5)."""
    out = network.socket_buffers.apply(facts(nics=[FRONT_100]), profile(intent))
    low, initial, _ = settings_of(out, "sysctl")["net.ipv4.tcp_rmem"].split()
    assert (int(low), int(initial)) == (4096, 131072)


def test_an_rdma_storage_port_does_not_size_the_tcp_buffers_when_a_tcp_nic_exists() -> None:
    """A storage port with RDMA in use (an InfiniBand port: its TCP is IPoIB) moves storage over
    RDMA, which no socket buffer touches: the 25 Gbit/s front end sizes them (64 MiB at 20 ms),
    not the 400 Gbit/s port (256 MiB). Fails on main, which sized them from the RDMA port."""
    storage = nic("ib8", "storage", 400, rdma=True)
    out = network.socket_buffers.apply(
        facts(nics=[storage, nic("eth0", "frontend", 25)]), profile("inference")
    )
    assert settings_of(out, "sysctl")["net.core.rmem_max"] == str(64 * MIB)
    reasons = {s.reason for s in out if isinstance(s, Setting)}
    assert len(reasons) == 1 and reasons.pop().startswith("eth0 carries TCP at 25 Gbit/s")


def test_an_rdma_storage_port_alone_sizes_the_buffers_and_says_what_they_serve() -> None:
    out = network.socket_buffers.apply(
        facts(nics=[nic("ib8", "storage", 200, rdma=True)]), profile("training")
    )
    assert settings_of(out, "sysctl")["net.core.rmem_max"] == str(512 * MIB)
    (reason,) = {s.reason for s in out if isinstance(s, Setting)}
    assert "moves its storage traffic over RDMA" in reason and "IPoIB" in reason
    assert "never past this ceiling" in reason  # a ceiling, not an allocation


def test_rccl_conf_reasons_name_rccl() -> None:
    """AMD GPUs: rccl.conf's reasons speak of RCCL (failed before: they said NCCL's)."""
    machine = facts(
        gpus=[{"model": "MI300X", "count": 8}],
        nics=[*real(*NAMED_FABRIC), REAL_FRONT_100],
    )
    output = network.nccl.apply(machine, profile("training"))
    reasons = [s.reason for s in output if isinstance(s, Setting)]
    assert len(reasons) == 2 and all(r.startswith("RCCL's ") for r in reasons)
