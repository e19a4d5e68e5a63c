"""PCI functions, GPUs, NICs and disks of a machine, from sysfs (links resolved in the tree)."""

from __future__ import annotations

import re
from typing import NamedTuple

from generator.detect.cpu import cpulist
from generator.detect.tree import Tree, shown
from generator.model.vendors import GPU_VENDORS, NVIDIA, NVSWITCH_DEVICE_IDS, GpuVendor

# \Z, not $: a name or value with a newline at its end must not match
PCI_ADDRESS = re.compile(r"^[0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]\Z")
PCI_ID = re.compile(r"^0x([0-9a-f]{4})\Z")
NVIDIA_VENDOR = NVIDIA.pci_hex  # generator/model/vendors.py
AMD_VENDOR = GPU_VENDORS[GpuVendor.AMD].pci_hex
# PCI base class 03 (display): 0300 VGA, 0302 3D controller (data-centre GPUs). Other display
# functions (a BMC's VGA, a VM's virtual GPU) are no GPU vendor's and are left out.
GPU_CLASSES = ("0x0300", "0x0302")
# The classes each GPU vendor's data-centre GPUs carry. AMD: amdgpu binds vendor 0x1002 by class,
# VGA 0x0300, display-other 0x0380 (MI200 and earlier Instinct) and processing accelerator 0x1200
# (MI300 on: "drm/amdgpu: add the accelerator pcie class", the pciidlist entry
# PCI_CLASS_ACCELERATOR_PROCESSING << 8 in drivers/gpu/drm/amd/amdgpu/amdgpu_drv.c).
GPU_CLASSES_OF_VENDOR = {
    NVIDIA_VENDOR: GPU_CLASSES,
    AMD_VENDOR: ("0x0300", "0x0380", "0x1200"),
}
ARPHRD_ETHER, ARPHRD_INFINIBAND = "1", "32"  # include/uapi/linux/if_arp.h [P]


class PciFunction(NamedTuple):
    address: str
    path: str  # the resolved /sys/devices/... path in the tree
    vendor: str  # 4 hex digits
    device: str
    pci_class: str  # 0xCCSSPP
    numa_node: int | None  # None: the kernel does not know (-1)
    local_cpus: frozenset[int]  # local_cpulist: the CPUs nearest to the function

    @property
    def pci_id(self) -> str:
        return f"{self.vendor}:{self.device}"


class Nic(NamedTuple):
    name: str
    path: str
    link_type: str | None  # ARPHRD number as text
    speed_mbps: int | None
    pci: PciFunction | None
    rdma_devices: tuple[str, ...]  # /sys/class/infiniband names on the same PCI function


class Disk(NamedTuple):
    name: str
    path: str
    kind: str  # nvme | ssd | hdd
    kind_note: str
    dev: str | None  # major:minor
    partitions: dict[str, str]  # major:minor -> partition name
    slaves: tuple[str, ...]  # for virtual devices (dm, md): names of what they sit on


def _hex_id(tree: Tree, path: str) -> str | None:
    match = PCI_ID.match((tree.value(path) or "").lower())
    return match.group(1) if match else None


def _int_or_none(text: str | None) -> int | None:
    return int(text) if text is not None and re.fullmatch(r"-?\d{1,9}", text) else None


def read_pci(tree: Tree) -> dict[str, PciFunction]:
    """Every PCI function by its resolved sysfs path."""
    functions: dict[str, PciFunction] = {}
    for address in tree.entries("/sys/bus/pci/devices"):
        if not PCI_ADDRESS.match(address):
            continue
        path = tree.real_path(f"/sys/bus/pci/devices/{address}")
        vendor = _hex_id(tree, f"/sys/bus/pci/devices/{address}/vendor")
        device = _hex_id(tree, f"/sys/bus/pci/devices/{address}/device")
        if path is None or vendor is None or device is None:
            continue
        pci_class = (tree.value(f"{path}/class") or "").lower()
        node = _int_or_none(tree.value(f"{path}/numa_node"))
        local = f"{path}/local_cpulist"
        functions[path] = PciFunction(
            address,
            path,
            vendor,
            device,
            pci_class,
            node if node is not None and node >= 0 else None,
            frozenset(cpulist(tree.value(local), tree.label(local))),
        )
    return functions


def is_gpu(function: PciFunction) -> bool:
    """A GPU of a vendor goldtune knows: its vendor id with one of that vendor's GPU classes."""
    classes = GPU_CLASSES_OF_VENDOR.get(function.vendor, ())
    return bool(classes) and function.pci_class.startswith(classes)


def gpus_of(functions: dict[str, PciFunction]) -> list[PciFunction]:
    return sorted(filter(is_gpu, functions.values()), key=lambda f: f.address)


def other_display_functions(functions: dict[str, PciFunction]) -> list[PciFunction]:
    found = [f for f in functions.values() if not is_gpu(f) and f.pci_class.startswith(GPU_CLASSES)]
    return sorted(found, key=lambda f: f.address)


def nvswitches_of(functions: dict[str, PciFunction]) -> list[PciFunction]:
    found = [
        f
        for f in functions.values()
        if f.vendor == NVIDIA_VENDOR and f.device in NVSWITCH_DEVICE_IDS
    ]
    return sorted(found, key=lambda f: f.address)


def pci_function_of(path: str, functions: dict[str, PciFunction]) -> PciFunction | None:
    """The PCI function a device path sits on: the deepest PCI address in the path."""
    parts = path.split("/")
    for end in range(len(parts), 0, -1):
        if PCI_ADDRESS.match(parts[end - 1]):
            return functions.get("/".join(parts[:end]))
    return None


def rdma_functions(tree: Tree) -> dict[str, list[str]]:
    """PCI device paths that carry an RDMA device (/sys/class/infiniband), with its names."""
    found: dict[str, list[str]] = {}
    for name in tree.entries("/sys/class/infiniband"):
        device = tree.real_path(f"/sys/class/infiniband/{name}/device")
        if device is not None:
            found.setdefault(device, []).append(name)
    return found


def read_nics(tree: Tree, functions: dict[str, PciFunction]) -> tuple[list[Nic], list[str]]:
    """Interfaces backed by a device (virtual ones: lo, bridges, bonds, veth, are left out)."""
    nics: list[Nic] = []
    notes: list[str] = []
    rdma = rdma_functions(tree)
    for name in tree.entries("/sys/class/net"):
        path = tree.real_path(f"/sys/class/net/{name}")
        if path is None or "/devices/virtual/" in path:
            continue
        device = tree.real_path(f"/sys/class/net/{name}/device")
        if device is None:
            notes.append(f"interface {shown(name)} has no device link; left out")
            continue
        pci = pci_function_of(device, functions)
        speed = _int_or_none(tree.value(f"{path}/speed"))
        rdma_names = tuple(rdma.get(pci.path, [])) if pci else ()
        nics.append(
            Nic(
                name,
                path,
                tree.value(f"{path}/type"),
                speed if speed and speed > 0 else None,
                pci,
                rdma_names,
            )
        )
    return nics, notes


def default_route_interfaces(tree: Tree) -> set[str]:
    """Interfaces with a default route (destination 00000000) in /proc/net/route."""
    names = set()
    for line in (tree.read("/proc/net/route") or "").splitlines()[1:]:
        fields = line.split()
        if len(fields) >= 8 and fields[1] == "00000000" and fields[7] == "00000000":
            names.add(fields[0])
    return names


def read_block_devices(tree: Tree) -> tuple[list[Disk], list[Disk], list[str]]:
    """(disks to describe, virtual block devices, notes on what was left out)."""
    disks: list[Disk] = []
    virtual: list[Disk] = []
    notes: list[str] = []
    for name in tree.entries("/sys/block"):
        path = tree.real_path(f"/sys/block/{name}")
        if path is None:
            continue
        kind, kind_note = _disk_kind(tree, name, path)
        partitions = _partitions(tree, path)
        slaves = tuple(tree.entries(f"{path}/slaves"))
        disk = Disk(name, path, kind, kind_note, tree.value(f"{path}/dev"), partitions, slaves)
        if "/devices/virtual/" in path:
            virtual.append(disk)  # loop, ram, zram, dm, md: not disks, but may hold /
        elif tree.value(f"{path}/removable") == "1":
            notes.append(f"{shown(name)}: removable; left out")
        elif tree.value(f"{path}/size") == "0":
            notes.append(f"{shown(name)}: size 0 (no medium); left out")
        else:
            disks.append(disk)
    return disks, virtual, notes


def _disk_kind(tree: Tree, name: str, path: str) -> tuple[str, str]:
    if re.fullmatch(r"nvme\d+n\d+", name):
        return "nvme", "an NVMe namespace"
    rotational = tree.value(f"{path}/queue/rotational")
    if rotational == "0":
        return "ssd", "queue/rotational 0"
    if rotational == "1":
        return "hdd", "queue/rotational 1 (virtual disks often say 1 whatever backs them)"
    return "hdd", "GUESS: queue/rotational unreadable"


def _partitions(tree: Tree, path: str) -> dict[str, str]:
    found = {}
    for entry in tree.entries(path):
        if tree.value(f"{path}/{entry}/partition") is not None:
            dev = tree.value(f"{path}/{entry}/dev")
            if dev is not None:
                found[dev] = entry
    return found


def root_device(tree: Tree) -> tuple[str | None, str | None]:
    """(major:minor, source) of the filesystem mounted at / (the last mount there wins)."""
    found: tuple[str | None, str | None] = (None, None)
    for line in (tree.read("/proc/self/mountinfo") or "").splitlines():
        fields = line.split()
        if len(fields) >= 5 and fields[4] == "/" and " - " in line:
            after = line.split(" - ", 1)[1].split()
            found = (fields[2], after[1] if len(after) > 1 else None)
    return found


def os_disks(
    disks: list[Disk], virtual: list[Disk], dev: str | None, source: str | None
) -> set[str]:
    """Names of the disks that hold / (through a partition, or under dm/md devices)."""
    by_name = {d.name: d for d in disks + virtual}
    owner_of_dev: dict[str, str] = {}
    for disk in disks + virtual:
        if disk.dev:
            owner_of_dev[disk.dev] = disk.name
        for partition_dev in disk.partitions:
            owner_of_dev[partition_dev] = disk.name
    start = owner_of_dev.get(dev or "")
    if start is None and source and source.startswith("/dev/"):
        start = _owner_by_name(source.rsplit("/", 1)[1], disks + virtual)
    return _physical_under(start, by_name, depth=0) if start else set()


def _owner_by_name(name: str, disks: list[Disk]) -> str | None:
    for disk in disks:
        if disk.name == name or name in disk.partitions.values():
            return disk.name
    return None


def _physical_under(name: str, by_name: dict[str, Disk], depth: int) -> set[str]:
    disk = by_name.get(name)
    if disk is None or depth > 8:
        return set()
    if "/devices/virtual/" not in disk.path:
        return {disk.name}
    found: set[str] = set()
    for slave in disk.slaves:
        owner = _owner_by_name(slave, list(by_name.values()))
        if owner is not None and owner != name:
            found |= _physical_under(owner, by_name, depth + 1)
    return found
