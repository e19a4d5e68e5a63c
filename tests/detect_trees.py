"""Fake machines for `gen detect --root`: sysfs-like trees from a dict, links as sysfs has them.

``build(root, {"sys/block/vda": Link("../devices/..."), "proc/cpuinfo": "..."})`` writes each
entry: a string is a file, a ``Link`` a symbolic link. ``FakeMachine`` composes the dict for a
whole machine (CPU topology, NUMA nodes, PCI functions, NICs, RDMA devices, disks, /proc) the
way the kernel lays it out, so the detector follows the same links it follows on real hardware.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from generator.model.cpulist import compress_cpus


class Link(NamedTuple):
    target: str


Entry = str | Link


def build(root: Path, entries: dict[str, Entry]) -> Path:
    for relative, entry in sorted(entries.items()):
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(entry, Link):
            os.symlink(entry.target, path)
        else:
            path.write_text(entry)
    return root


def pci_dir(address: str) -> str:
    return f"sys/devices/pci{address[:4]}:{address[5:7]}/{address}"


@dataclass
class FakeMachine:
    cpuinfo: str
    sockets: int
    cores_per_socket: int
    threads_per_core: int
    nodes: dict[int, list[int]]  # node -> CPUs (empty: a memory-only node)
    mem_total_kib: int
    node_mem_kib: dict[int, int] = field(default_factory=dict)
    kernel: str = "6.8.0-45-generic"
    page_kib: int = 4
    os_release: str = 'PRETTY_NAME="Ubuntu 24.04.1 LTS"\nID=ubuntu\nVERSION_ID="24.04"\n'
    soc_id: str | None = None
    entries: dict[str, Entry] = field(default_factory=dict)

    def cpus(self) -> list[int]:
        return list(range(self.sockets * self.cores_per_socket * self.threads_per_core))

    def pci(
        self,
        address: str,
        vendor: str,
        device: str,
        pci_class: str,
        node: int = -1,
        local_cpus: str = "",
    ) -> str:
        base = pci_dir(address)
        if local_cpus:
            self.entries[f"{base}/local_cpulist"] = f"{local_cpus}\n"
        self.entries.update(
            {
                f"{base}/vendor": f"0x{vendor}\n",
                f"{base}/device": f"0x{device}\n",
                f"{base}/class": f"{pci_class}\n",
                f"{base}/numa_node": f"{node}\n",
                f"sys/bus/pci/devices/{address}": Link(f"../../../devices/{base[12:]}"),
            }
        )
        return base

    def nic(
        self,
        name: str,
        address: str | None,
        *,
        speed: int | None = None,
        link_type: int = 1,
        via: str = "",
        operstate: str | None = None,
    ) -> None:
        """An interface on a PCI function (``via``: a bus device between, e.g. virtio0)."""
        if address is None:
            base = f"sys/devices/virtual/net/{name}"
        else:
            parent = pci_dir(address) + (f"/{via}" if via else "")
            base = f"{parent}/net/{name}"
            self.entries[f"{base}/device"] = Link(f"../../../{via or address}")
        self.entries[f"{base}/type"] = f"{link_type}\n"
        if speed is not None:
            self.entries[f"{base}/speed"] = f"{speed}\n"
        if operstate is not None:
            self.entries[f"{base}/operstate"] = f"{operstate}\n"
        self.entries[f"sys/class/net/{name}"] = Link(f"../../{base[4:]}")

    def rdma(
        self, name: str, address: str, rate: str | None = None, phys_state: str = "5: LinkUp"
    ) -> None:
        """An RDMA device on a PCI function; ``rate``: port 1's, as sysfs prints it, with its
        ``phys_state``."""
        base = f"{pci_dir(address)}/infiniband/{name}"
        self.entries[f"{base}/device"] = Link(f"../../../{address}")
        if rate is not None:
            self.entries[f"{base}/ports/1/rate"] = f"{rate}\n"
            self.entries[f"{base}/ports/1/phys_state"] = f"{phys_state}\n"
        self.entries[f"sys/class/infiniband/{name}"] = Link(f"../../{base[4:]}")

    def disk(
        self,
        name: str,
        parent: str | None,
        dev: str,
        *,
        rotational: int = 0,
        removable: int = 0,
        size: int = 1 << 30,
        partitions: dict[str, str] | None = None,
    ) -> None:
        base = f"{parent}/{name}" if parent else f"sys/devices/virtual/block/{name}"
        self.entries.update(
            {
                f"{base}/dev": f"{dev}\n",
                f"{base}/removable": f"{removable}\n",
                f"{base}/size": f"{size}\n",
                f"{base}/queue/rotational": f"{rotational}\n",
                f"sys/block/{name}": Link(f"../{base[4:]}"),
            }
        )
        for part, part_dev in (partitions or {}).items():
            self.entries[f"{base}/{part}/partition"] = f"{part[-1]}\n"
            self.entries[f"{base}/{part}/dev"] = f"{part_dev}\n"

    def root_on(self, dev: str, source: str) -> None:
        self.entries["proc/self/mountinfo"] = (
            "22 27 0:21 / /proc rw,relatime - proc proc rw\n"
            f"27 1 {dev} / / rw,relatime - ext4 {source} rw\n"
        )

    def default_route(self, interface: str) -> None:
        self.entries["proc/net/route"] = (
            "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n"
            f"{interface}\t00000000\t010200C0\t0003\t0\t0\t0\t00000000\t0\t0\t0\n"
        )

    def files(self) -> dict[str, Entry]:
        entries = dict(self.entries)
        cpus = self.cpus()
        entries["sys/devices/system/cpu/online"] = f"{compress_cpus(cpus)}\n"
        per_socket = self.cores_per_socket * self.threads_per_core
        for cpu in cpus:
            socket, rest = divmod(cpu, per_socket)
            entries[f"sys/devices/system/cpu/cpu{cpu}/topology/physical_package_id"] = f"{socket}\n"
            entries[f"sys/devices/system/cpu/cpu{cpu}/topology/core_id"] = (
                f"{rest // self.threads_per_core}\n"
            )
        for node, node_cpus in self.nodes.items():
            entries[f"sys/devices/system/node/node{node}/cpulist"] = f"{compress_cpus(node_cpus)}\n"
            kib = self.node_mem_kib.get(node, 0)
            entries[f"sys/devices/system/node/node{node}/meminfo"] = (
                f"Node {node} MemTotal:  {kib} kB\n"
            )
        entries["proc/cpuinfo"] = self.cpuinfo
        entries["proc/meminfo"] = f"MemTotal:       {self.mem_total_kib} kB\nMemFree:  1000 kB\n"
        entries["proc/sys/kernel/osrelease"] = f"{self.kernel}\n"
        entries["proc/self/smaps"] = f"KernelPageSize:        {self.page_kib} kB\n"
        entries["etc/os-release"] = Link("../usr/lib/os-release")
        entries["usr/lib/os-release"] = self.os_release
        if self.soc_id is not None:
            entries["sys/devices/soc0/soc_id"] = f"{self.soc_id}\n"
        return entries

    def build(self, root: Path) -> Path:
        return build(root, self.files())


def x86_cpuinfo(vendor: str, model: str) -> str:
    return f"processor\t: 0\nvendor_id\t: {vendor}\ncpu family\t: 6\nmodel name\t: {model}\n\n"


def arm_cpuinfo(implementer: str, part: str) -> str:
    return (
        f"processor\t: 0\nBogoMIPS\t: 2000.00\nCPU implementer\t: {implementer}\n"
        f"CPU part\t: {part}\n\n"
    )


def split_nodes(cpus: int, nodes: int) -> dict[int, list[int]]:
    """Contiguous CPU numbers per node (the fake topology numbers CPUs socket by socket)."""
    per_node = cpus // nodes
    return {node: list(range(node * per_node, (node + 1) * per_node)) for node in range(nodes)}


GIB = 1024 * 1024  # in KiB


def dgx_h100() -> FakeMachine:
    """2x Xeon 8480C, 8 H100 SXM by PCI id, 4 NVSwitches, 8 ConnectX-7 IB ports, NVMe."""
    box = FakeMachine(
        x86_cpuinfo("GenuineIntel", "Intel(R) Xeon(R) Platinum 8480C"),
        2,
        56,
        2,
        split_nodes(224, 2),
        2063 * GIB,
    )
    gpu_buses = ["18", "2a", "3a", "5d", "9a", "ab", "ba", "db"]
    for index, bus in enumerate(gpu_buses):
        box.pci(f"0000:{bus}:00.0", "10de", "2330", "0x030200", node=index // 4)
    for index in range(4):
        box.pci(f"0000:0{index + 5}:00.0", "10de", "22a3", "0x068000", node=index // 2)
    ib_buses = ["18", "40", "4f", "5e", "9a", "c0", "ce", "dc"]
    # the RDMA device of each port as Table 6 of the DGX H100 User Guide gives it ("Default
    # RDMA"; mlx5_1, 2, 7 and 8 are the storage adapters this tree leaves out)
    rdma_numbers = [0, 3, 4, 5, 6, 9, 10, 11]
    for index, bus in enumerate(ib_buses):
        address = f"0000:{bus}:00.1" if bus in gpu_buses else f"0000:{bus}:00.0"
        box.pci(address, "15b3", "1021", "0x020700", node=index // 4)
        box.nic(f"ibp{int(bus, 16)}s0", address, speed=400000, link_type=32)
        box.rdma(f"mlx5_{rdma_numbers[index]}", address)
    box.pci("0000:a0:00.0", "8086", "1593", "0x020000", node=1)
    box.nic("ens3f0np0", "0000:a0:00.0", speed=100000)
    box.pci("0000:a1:00.0", "8086", "1533", "0x020000", node=1)
    box.nic("eno1", "0000:a1:00.0", speed=1000)
    box.nic("lo", None, link_type=772)
    box.default_route("ens3f0np0")
    box.pci("0000:b0:00.0", "144d", "a80a", "0x010802", node=0)
    box.disk(
        "nvme0n1",
        f"{pci_dir('0000:b0:00.0')}/nvme/nvme0",
        "259:0",
        partitions={"nvme0n1p1": "259:1", "nvme0n1p2": "259:2"},
    )
    box.pci("0000:b1:00.0", "144d", "a80a", "0x010802", node=1)
    box.disk("nvme1n1", f"{pci_dir('0000:b1:00.0')}/nvme/nvme1", "259:3")
    box.disk("loop0", None, "7:0", rotational=1)
    box.root_on("259:2", "/dev/nvme0n1p2")
    return box


def l4_pcie() -> FakeMachine:
    """1x EPYC 9654, one L4, a BMC's VGA (ASPEED), a 25G NIC, a SATA SSD holding /."""
    box = FakeMachine(
        x86_cpuinfo("AuthenticAMD", "AMD EPYC 9654 96-Core Processor"),
        1,
        96,
        2,
        split_nodes(192, 1),
        384 * GIB,
    )
    box.pci("0000:41:00.0", "10de", "27b8", "0x030200", node=0)
    box.pci("0000:02:00.0", "1a03", "2000", "0x030000", node=0)
    box.pci("0000:c1:00.0", "14e4", "1750", "0x020000", node=0)
    box.nic("ens1f0np0", "0000:c1:00.0", speed=25000)
    box.default_route("ens1f0np0")
    box.pci("0000:03:00.0", "1022", "7901", "0x010601", node=0)
    box.disk(
        "sda",
        f"{pci_dir('0000:03:00.0')}/ata1/host0/target0:0:0/0:0:0:0/block",
        "8:0",
        partitions={"sda1": "8:1"},
    )
    box.disk(
        "sdb",
        f"{pci_dir('0000:03:00.0')}/ata2/host1/target1:0:0/1:0:0:0/block",
        "8:16",
        rotational=1,
    )
    box.disk("sdc", f"{pci_dir('0000:03:00.0')}/usb1/1-1/block", "8:32", removable=1)
    box.root_on("8:1", "/dev/sda1")
    return box


def gh200() -> FakeMachine:
    """One Grace (SoC id), one GH200 GPU, GPU memory on CPU-less nodes 1-8, 64 KiB pages."""
    nodes = {0: list(range(72)), **{node: [] for node in range(1, 9)}}
    box = FakeMachine(
        arm_cpuinfo("0x41", "0xd4f"),
        1,
        72,
        1,
        nodes,
        (480 + 96) * GIB,
        node_mem_kib={0: 480 * GIB, 1: 96 * GIB},
        kernel="6.8.0-1013-nvidia-64k",
        page_kib=64,
        soc_id="jep106:036b:0241",
    )
    box.pci("0009:01:00.0", "10de", "2342", "0x030200", node=0)
    box.pci("0000:01:00.0", "15b3", "1021", "0x020700", node=0)
    box.nic("ib0", "0000:01:00.0", speed=400000, link_type=32)
    box.rdma("mlx5_0", "0000:01:00.0")
    box.pci("0002:01:00.0", "15b3", "1021", "0x020000", node=0)
    box.nic("enP2p1s0f0np0", "0002:01:00.0", speed=100000)
    box.default_route("enP2p1s0f0np0")
    box.pci("0008:01:00.0", "144d", "a80a", "0x010802", node=0)
    box.disk(
        "nvme0n1",
        f"{pci_dir('0008:01:00.0')}/nvme/nvme0",
        "259:0",
        partitions={"nvme0n1p2": "259:2"},
    )
    box.root_on("259:2", "/dev/nvme0n1p2")
    return box


def epyc_nps4() -> FakeMachine:
    """2x EPYC 9654 in NPS4: 8 NUMA nodes; NICs on nodes 1 and 6; no GPUs."""
    box = FakeMachine(
        x86_cpuinfo("AuthenticAMD", "AMD EPYC 9654 96-Core Processor"),
        2,
        96,
        2,
        split_nodes(384, 8),
        1536 * GIB,
    )
    box.pci("0000:41:00.0", "15b3", "101d", "0x020000", node=1)
    box.nic("ens1np0", "0000:41:00.0", speed=200000)
    box.rdma("mlx5_0", "0000:41:00.0")
    box.pci("0000:c1:00.0", "15b3", "101d", "0x020000", node=6)
    box.nic("ens2np0", "0000:c1:00.0", speed=200000)
    box.rdma("mlx5_1", "0000:c1:00.0")
    box.default_route("ens2np0")
    # firmware without locality (numa_node -1): local_cpulist within node 3 says where it is;
    # one spanning two nodes says nothing
    box.pci("0000:61:00.0", "8086", "1592", "0x020000", local_cpus="144-191")
    box.nic("ens3np0", "0000:61:00.0", speed=100000)
    box.pci("0000:62:00.0", "8086", "1592", "0x020000", local_cpus="0-95")
    box.nic("ens4np0", "0000:62:00.0", speed=100000)
    box.pci("0000:01:00.0", "144d", "a80a", "0x010802", node=0)
    box.disk(
        "nvme0n1",
        f"{pci_dir('0000:01:00.0')}/nvme/nvme0",
        "259:0",
        partitions={"nvme0n1p1": "259:1"},
    )
    box.root_on("259:1", "/dev/nvme0n1p1")
    return box


def ampere_one() -> FakeMachine:
    """AmpereOne (MIDR implementer 0xc0), an A100 PCIe: vendor ampere, arch aarch64."""
    box = FakeMachine(arm_cpuinfo("0xc0", "0xac3"), 1, 192, 1, split_nodes(192, 1), 512 * GIB)
    box.pci("0000:01:00.0", "10de", "20b5", "0x030200", node=0)
    return box


def graviton() -> FakeMachine:
    """A Graviton-like box: Arm's own Neoverse V1 (0x41/0xd40), no Grace SoC id, an L4 PCIe:
    vendor other, arch aarch64, and nothing Grace about it."""
    box = FakeMachine(arm_cpuinfo("0x41", "0xd40"), 1, 64, 1, split_nodes(64, 1), 256 * GIB)
    box.soc_id = "jep106:043b:0000"  # not NVIDIA's code; any other SoC reads the same
    box.pci("0000:31:00.0", "10de", "27b8", "0x030200", node=0)
    return box


def vm_without_gpus() -> FakeMachine:
    """A QEMU guest: 4 vCPUs, virtio-net behind virtio0, a virtio disk holding / whole."""
    box = FakeMachine(
        x86_cpuinfo("GenuineIntel", "Intel Xeon Processor (Icelake)"),
        4,
        1,
        1,
        split_nodes(4, 1),
        16 * GIB,
        kernel="6.1.0-27-amd64",
        os_release='PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nID=debian\nVERSION_ID="12"\n',
    )
    box.pci("0000:00:02.0", "1234", "1111", "0x030000")
    box.pci("0000:00:03.0", "1af4", "1041", "0x020000")
    box.entries[f"{pci_dir('0000:00:03.0')}/virtio0/vendor"] = "0x1af4\n"
    box.nic("eth0", "0000:00:03.0", via="virtio0")
    box.nic("lo", None, link_type=772)
    box.default_route("eth0")
    box.pci("0000:00:04.0", "1af4", "1042", "0x010000")
    box.disk("vda", f"{pci_dir('0000:00:04.0')}/virtio1/block", "254:0", rotational=1)
    box.disk("zram0", None, "252:0")
    box.root_on("254:0", "/dev/vda")
    return box


# The PCI functions of the eight OAM GPUs of an MI300X platform on two EPYC sockets: four behind
# each socket (illustrative bus numbers; each GPU is a processing accelerator, class 0x120000).
MI300X_BUSES = ["05", "26", "46", "65", "85", "a6", "c6", "e5"]
MI300X_SIMDS = 1216  # 304 CUs x 4 SIMDs (a fake value, as the KFD node prints it)


def kfd_node(box: FakeMachine, node: int, gpu_id: int, address: str = "", simds: int = 0) -> None:
    """One node of /sys/class/kfd/kfd/topology/nodes (kfd_topology.c node_show): a CPU node
    (no SIMDs, gpu_id 0) or a GPU compute partition (its PCI function as domain, location_id)."""
    base = f"sys/class/kfd/kfd/topology/nodes/{node}"
    location = domain = 0
    if address:
        domain, bus, rest = address.split(":")
        device, function = rest.split(".")
        location = int(bus, 16) << 8 | int(device, 16) << 3 | int(function)
    box.entries[f"{base}/gpu_id"] = f"{gpu_id}\n"
    box.entries[f"{base}/properties"] = (
        f"cpu_cores_count {0 if address else 96}\nsimd_count {simds}\nmem_banks_count 1\n"
        f"vendor_id {4098 if address else 0}\ndevice_id {0x74A1 if address else 0}\n"
        f"location_id {location}\ndomain {int(domain, 16) if address else 0}\n"
        f"drm_render_minor {128 + node if address else 0}\n"
    )


def amd_smi_static(addresses: list[str], wrapped: bool = False) -> str:
    """What `amd-smi static --asic --bus --vram --limit --partition --json` prints (the shape of
    amdsmi_cli/amdsmi_commands.py static_gpu; values of an MI300X, for a test)."""
    gpus = [
        {
            "gpu": index,
            "asic": {
                "market_name": "AMD Instinct MI300X",
                "vendor_id": "0x1002",
                "device_id": "0x74a1",
                "rev_id": "0x00",
                "num_compute_units": 304,
                "target_graphics_version": "gfx942",
            },
            "bus": {"bdf": address, "max_pcie_width": 16},
            "vram": {"type": "HBM3", "size": {"value": 196592, "unit": "MB"}},
            "limit": {
                "max_power": {"value": 750, "unit": "W"},
                "min_power": {"value": 0, "unit": "W"},
                "socket_power": {"value": 750, "unit": "W"},
            },
            "partition": {
                "compute_partition": "SPX",
                "memory_partition": "NPS1",
                "partition_id": 0,
            },
        }
        for index, address in enumerate(addresses)
    ]
    return json.dumps({"gpu_data": gpus} if wrapped else gpus, indent=4)


def mi300x_epyc() -> FakeMachine:
    """2x EPYC 9654 (NPS1), 8 MI300X OAM GPUs (vendor 0x1002, class 0x1200), their KFD nodes,
    an ASPEED BMC VGA, 8 ConnectX-7 InfiniBand ports, a captured amd-smi answer."""
    box = FakeMachine(
        x86_cpuinfo("AuthenticAMD", "AMD EPYC 9654 96-Core Processor"),
        2,
        96,
        2,
        split_nodes(384, 2),
        2304 * GIB,
    )
    kfd_node(box, 0, 0)
    kfd_node(box, 1, 0)
    addresses = [f"0000:{bus}:00.0" for bus in MI300X_BUSES]
    for index, address in enumerate(addresses):
        box.pci(address, "1002", "74a1", "0x120000", node=index // 4)
        kfd_node(box, 2 + index, 40000 + index, address, MI300X_SIMDS)
    box.entries["goldtune-capture/amd-smi-static.json"] = amd_smi_static(addresses)
    box.pci("0000:02:00.0", "1a03", "2000", "0x030000", node=0)
    for index, bus in enumerate(["0c", "2c", "4c", "6c", "8c", "ac", "cc", "ec"]):
        address = f"0000:{bus}:00.0"
        box.pci(address, "15b3", "1021", "0x020700", node=index // 4)
        box.nic(f"ibp{int(bus, 16)}s0", address, speed=400000, link_type=32)
        box.rdma(f"mlx5_{index}", address)
    box.pci("0000:a1:00.0", "14e4", "1750", "0x020000", node=1)
    box.nic("ens1f0np0", "0000:a1:00.0", speed=100000)
    box.default_route("ens1f0np0")
    box.pci("0000:b0:00.0", "144d", "a80a", "0x010802", node=0)
    box.disk(
        "nvme0n1",
        f"{pci_dir('0000:b0:00.0')}/nvme/nvme0",
        "259:0",
        partitions={"nvme0n1p1": "259:1"},
    )
    box.root_on("259:1", "/dev/nvme0n1p1")
    return box
