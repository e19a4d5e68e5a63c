"""A machine's hardware description, as the hardware YAML that `gen check` reads.

Each value comes with its source in a comment; what the machine cannot tell (a NIC's role) is
marked GUESS; what the format cannot say yet (CPU-less NUMA nodes, the distribution, per-board
power limits) is written as a comment, never squeezed into a field that means something else.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from generator import TOOL, __version__
from generator.detect import cpu as cpus
from generator.detect import devices
from generator.detect.devices import ARPHRD_INFINIBAND, Disk, Nic, PciFunction
from generator.detect.driver import DriverGpu, DriverReport
from generator.detect.driver_amd import KfdGpu, read_kfd
from generator.detect.emit import comment, field, line, scalar
from generator.detect.system import read_driver, read_os
from generator.detect.tree import Tree, shown
from generator.errors import InputError, Problem
from generator.inputs.catalog import Catalog, GpuModel, NicModel
from generator.inputs.hardware_spec import HardwareSpec
from generator.model.vendors import vendor_spec, vendor_table

# \Z, not $: Python's $ also matches before a final newline, which a name in /sys may end with
INTERFACE_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,14}\Z")  # as inputs/hardware_spec.py
DISK_NAME = re.compile(r"^[a-z][a-z0-9]{0,31}\Z")
RDMA_DEVICE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,62}")  # fullmatch, as hardware.py
PCI_ADDRESS_FORMAT = re.compile(r"[0-9a-f]{4,8}:[0-9a-f]{2}:[01][0-9a-f]\.[0-7]")  # the format's
KIB_PER_GIB = 1024 * 1024
FAST_PORT_MBPS = 25000
NVIDIA_ID = devices.NVIDIA_VENDOR
AMD_ID = devices.AMD_VENDOR


class Machine(NamedTuple):
    """What the description is built from: the tree, the catalog and the driver's answers."""

    tree: Tree
    catalog: Catalog
    driver: DriverReport | str  # the NVIDIA driver's report, or why there is none
    live: bool
    distros: tuple[str, ...] = ()  # the distribution tables' keys and aliases (os.distro)
    amd_driver: DriverReport | str = "amd-smi: not asked"  # amd-smi's report, or why none


def describe(machine: Machine, command: str) -> str:
    """The whole description, deterministic for a given tree, catalog and driver report."""
    tree = machine.tree
    identity = cpus.identify_cpu(tree, machine.catalog)
    numa = cpus.read_numa(tree)
    functions = devices.read_pci(tree)
    lines = header(command, machine)
    topology = cpus.read_topology(tree)
    lines += cpu_lines(identity, topology, len(numa.cpu_nodes))
    lines += node_cores_lines(topology, numa)
    lines += memory_lines(cpus.read_memory_kib(tree), numa, tree.label("/proc/meminfo"))
    lines += gpu_lines(functions, numa, machine)
    lines += nic_lines(tree, functions, numa, machine.catalog)
    lines += disk_lines(tree)
    lines += os_lines(tree, machine.live, machine.distros)
    return "\n".join(lines) + "\n"


def header(command: str, machine: Machine) -> list[str]:
    distribution = read_os(machine.tree, machine.live).distribution
    return [
        comment(0, f"Hardware description written by `{command}` ({TOOL} {__version__})."),
        comment(
            0,
            "Each value names its source; GUESS marks what the machine cannot tell. "
            "Review before use.",
        ),
        comment(0, f"distribution: {distribution or 'unknown'} (/etc/os-release)"),
    ]


def cpu_lines(identity: cpus.CpuIdentity, topology: cpus.Topology, cpu_nodes: int) -> list[str]:
    lines = ["cpu:"]
    seen = shown(identity.seen_as) if identity.seen_as else "no model name"
    if identity.model is not None:
        lines.append(field(2, "model", identity.model, f"{seen}: {identity.model_note}"))
    else:
        lines.append(comment(2, f"model: left out, {identity.model_note} ({seen})"))
    lines.append(field(2, "vendor", identity.vendor, f"{cpus.CPUINFO} ({identity.arch})"))
    if identity.arch != "x86_64" or identity.vendor == "other":
        # x86_64 is what intel and amd imply; every other box says its arch outright
        how = "CPU implementer line" if identity.arch == "aarch64" else "x86 vendor_id line"
        lines.append(field(2, "arch", identity.arch, f"{cpus.CPUINFO} has a {how}"))
    source = f"physical_package_id from cpu*/topology of {topology.online_cpus} online CPUs"
    sockets, cores = topology.sockets, topology.cores_per_socket
    if cpu_nodes < sockets and sockets % cpu_nodes == 0:
        # A VM's virtual sockets often share one NUMA node; the format needs numa_nodes to be a
        # multiple of sockets, and the NUMA layout is what the rules act on.
        source = (
            f"GUESS: {sockets} packages share {cpu_nodes} NUMA node(s), as a VM's virtual "
            f"sockets do; written as {cpu_nodes} socket(s) of {sockets // cpu_nodes * cores} "
            "cores because the format needs numa_nodes to be a multiple of sockets"
        )
        sockets, cores = cpu_nodes, sockets // cpu_nodes * cores
    lines.append(field(2, "sockets", sockets, source))
    lines.append(field(2, "cores_per_socket", cores, "core_id per package"))
    lines.append(field(2, "threads_per_core", topology.threads_per_core, "online CPUs per core"))
    return lines


def node_cores_lines(topology: cpus.Topology, numa: cpus.NumaLayout) -> list[str]:
    """cpu.cores_per_numa_node where the nodes of a socket differ in size (SNC3 of 128 cores:
    43, 43, 42): each node's CPUs over the threads per core, the first socket's nodes in order;
    nothing for an even split, or where the sockets' splits differ (the format has one list)."""
    nodes = [len(numa.cpus_of_node.get(node, ())) for node in numa.cpu_nodes]
    sockets, threads = topology.sockets, topology.threads_per_core
    if len(set(nodes)) <= 1 or len(nodes) % sockets or any(n % threads for n in nodes):
        return []
    per_socket = len(nodes) // sockets
    split = [n // threads for n in nodes[:per_socket]]
    if nodes != nodes[:per_socket] * sockets or sum(split) != topology.cores_per_socket:
        return [comment(2, "cores_per_numa_node: left out, the sockets' NUMA splits differ")]
    note = "CPUs of each node of a socket over its threads per core (/sys/devices/system/node)"
    return [field(2, "cores_per_numa_node", split, note)]


def memory_gib_range() -> tuple[int, int]:
    """The memory_gib the input format takes (inputs/hardware_spec.py), read from the model."""
    limits = HardwareSpec.model_fields["memory_gib"].metadata
    low = next(limit.ge for limit in limits if hasattr(limit, "ge"))
    high = next(limit.le for limit in limits if hasattr(limit, "le"))
    return int(low), int(high)


def memory_lines(total_kib: int, numa: cpus.NumaLayout, source: str) -> list[str]:
    """memory_gib: MemTotal less the CPU-less nodes' memory, in whole GiB. Outside the range the
    format takes (a MemTotal of a few kB, or of exabytes) it is refused, never made up."""
    usable = (total_kib - numa.memory_only_kib) // KIB_PER_GIB
    low, high = memory_gib_range()
    if not low <= usable <= high:
        less = f" less {numa.memory_only_kib} kB on CPU-less nodes" if numa.memory_only_kib else ""
        raise InputError(
            Problem(
                source,
                "memory_gib",
                f"MemTotal {total_kib} kB{less} is not {low}-{high} GiB, the range "
                "memory_gib takes; refused",
            )
        )
    note = "MemTotal of /proc/meminfo, rounded down (a little below the installed RAM)"
    if numa.memory_only_kib:
        note += f"; less {numa.memory_only_kib // KIB_PER_GIB} GiB on CPU-less nodes"
    lines = [field(0, "memory_gib", usable, note)]
    lines.append(
        field(0, "numa_nodes", len(numa.cpu_nodes), "nodes with CPUs in /sys/devices/system/node")
    )
    listed = ", ".join(str(n) for n in numa.memory_only_nodes) or "none"
    lines.append(
        field(
            0,
            "memory_only_numa_nodes",
            len(numa.memory_only_nodes),
            f"nodes whose cpulist is empty in /sys/devices/system/node: {listed} "
            "(GPU memory on Grace, or CXL)",
        )
    )
    return lines


def device_node(function: PciFunction | None, numa: cpus.NumaLayout) -> tuple[int | None, str]:
    """A PCI function's NUMA node: its numa_node, else the one node its local_cpulist lies on."""
    if function is None:
        return None, "not on a PCI function"
    if function.numa_node is not None:
        return node_index(function.numa_node, numa, "numa_node of its PCI function")
    local = function.local_cpus
    holding = [n for n, node_cpus in numa.cpus_of_node.items() if local and local <= node_cpus]
    if len(numa.cpus_of_node) > 1 and len(holding) == 1:
        return node_index(holding[0], numa, "numa_node -1, but its local_cpulist is that node's")
    return None, "numa_node -1: the firmware gives no locality"


def node_index(node: int, numa: cpus.NumaLayout, note: str) -> tuple[int | None, str]:
    """A NUMA node as the format numbers them (nodes with CPUs, from 0)."""
    if numa.cpu_nodes != tuple(range(len(numa.cpu_nodes))):
        return None, f"node {node}: CPU nodes are not numbered 0-{len(numa.cpu_nodes) - 1}"
    if node not in numa.cpu_nodes:
        return None, f"node {node} has no CPUs"
    return node, note


def find_gpu(catalog: Catalog, device: str, vendor: str = NVIDIA_ID) -> GpuModel | None:
    """The catalog entry of a PCI vendor:device: a device id is the vendor's own numbering, so
    an entry matches only with its vendor's PCI id (generator/model/vendors.py)."""
    return next(
        (
            g
            for g in catalog.gpus.entries
            if f"0x{device}" in g.pci_device_ids and vendor_spec(g.vendor).pci_hex == vendor
        ),
        None,
    )


def vendor_name(pci_vendor: str) -> str:
    """NVIDIA, AMD: the name of the GPU vendor whose PCI vendor id this is."""
    return next((v.name for v in vendor_table().values() if v.pci_hex == pci_vendor), pci_vendor)


def find_nic(catalog: Catalog, pci_id: str) -> NicModel | None:
    return next((n for n in catalog.nics.entries if pci_id in n.pci_ids), None)


def gpu_lines(
    functions: dict[str, PciFunction], numa: cpus.NumaLayout, machine: Machine
) -> list[str]:
    found = devices.gpus_of(functions)
    others = devices.other_display_functions(functions)
    lines: list[str] = []
    if others:
        ids = ", ".join(sorted({f.pci_id for f in others}))
        lines.append(
            comment(
                0,
                f"display functions of other vendors left out ({ids}): the "
                "format describes NVIDIA and AMD GPUs only",
            )
        )
    if not found:
        return [
            *lines,
            field(0, "gpus", [], "no NVIDIA or AMD GPU function on the PCI bus"),
        ]
    lines.append("gpus:")
    kfd = read_kfd(machine.tree) if any(f.vendor == AMD_ID for f in found) else {}
    for pci_id in sorted({f.pci_id for f in found}, key=lambda i: _first(found, i)):
        group = [f for f in found if f.pci_id == pci_id]
        lines += _gpu_group(group, numa, machine)
        lines += kfd_comments(group, kfd)
    if any(f.vendor == NVIDIA_ID for f in found):
        lines += nvswitch_lines(functions, machine.driver)
    return lines


def _first(found: list[PciFunction], pci_id: str) -> str:
    return min(f.address for f in found if f.pci_id == pci_id)


def _gpu_group(group: list[PciFunction], numa: cpus.NumaLayout, machine: Machine) -> list[str]:
    vendor, device = group[0].vendor, group[0].device
    model = find_gpu(machine.catalog, device, vendor)
    key = model.key if model else f"0x{device}" if vendor == NVIDIA_ID else f"{vendor}:{device}"
    where = (
        "catalog entry by PCI id"
        if model
        else "NOT IN THE CATALOG (hardware_db/gpus/); `gen check` names the missing entry"
    )
    lines = [field(2, "- model", key, f"PCI {vendor}:{device}, {where}")]
    lines.append(field(4, "count", len(group), f"{len(group)} PCI functions"))
    nodes = [device_node(f, numa) for f in group]
    if all(node is not None for node, _ in nodes):
        lines.append(
            field(
                4,
                "numa_nodes",
                [node for node, _ in nodes],
                "numa_node per GPU, in PCI address order",
            )
        )
    else:
        lines.append(comment(4, f"numa_nodes left out: {next(n for v, n in nodes if v is None)}"))
    driver = machine.amd_driver if vendor == AMD_ID else machine.driver
    lines += driver_comments(group, model, driver)
    return lines


def kfd_comments(group: list[PciFunction], kfd: dict[str, KfdGpu]) -> list[str]:
    """What the KFD topology says of each AMD GPU: its compute partitions and SIMDs."""
    if group[0].vendor != AMD_ID:
        return []
    if not kfd:
        return [comment(4, "kfd: no GPU node in /sys/class/kfd/kfd/topology (amdgpu not loaded?)")]
    lines = []
    for function in group:
        nodes = kfd.get(function.address)
        if nodes is None:
            lines.append(comment(4, f"kfd: {function.address} has no KFD node"))
            continue
        ids = ", ".join(str(gpu_id) for gpu_id in nodes.gpu_ids[:8])
        partitions = len(nodes.gpu_ids)
        mode = "one compute partition" if partitions == 1 else f"{partitions} compute partitions"
        lines.append(
            comment(
                4,
                f"kfd {function.address}: {mode} (gpu_id {ids}), {nodes.simd_count} SIMDs; "
                "count is PCI functions, not partitions",
            )
        )
    return lines


def driver_comments(
    group: list[PciFunction], model: GpuModel | None, driver: DriverReport | str
) -> list[str]:
    if isinstance(driver, str):
        return [comment(4, f"driver facts: none ({driver}); from PCI ids alone")]
    lines = []
    for function in group:
        gpu = driver.gpus.get(function.address)
        if gpu is None:
            lines.append(comment(4, f"{driver.source}: {function.address} not reported"))
            continue
        lines.append(comment(4, f"{driver.source} {function.address}: {_gpu_summary(gpu)}"))
        if gpu.device_id and gpu.device_id != function.device:
            lines.append(
                comment(
                    4,
                    f"{driver.source} reports device 0x{gpu.device_id}, sysfs 0x{function.device}",
                )
            )
    if model is not None:
        lines += _catalog_differences(group, model, driver)
    return lines


def _gpu_summary(gpu: DriverGpu) -> str:
    parts = [f'"{shown(gpu.name)}"' if gpu.name else "no name"]
    if gpu.memory_mib is not None:
        parts.append(f"{gpu.memory_mib} MiB")
    default, low, high = gpu.power_w
    if default is None and high:  # amd-smi gives the range and the cap, not the default
        parts.append(f"power range {low or 0}-{high} W")
    elif default or low or high:
        parts.append(f"power default {default} W, range {low}-{high} W")
    graphics, memory = gpu.max_clocks_mhz
    if graphics or memory:
        parts.append(f"max clocks {graphics}/{memory} MHz")
    if gpu.mig_mode:
        parts.append(f"MIG {gpu.mig_mode}")
    if gpu.nvlinks_active is not None:
        parts.append(f"{gpu.nvlinks_active} NVLinks active")
    if gpu.power_cap_w is not None:
        parts.append(f"power cap {gpu.power_cap_w} W")
    if gpu.compute_partition or gpu.memory_partition:
        parts.append(f"partition {gpu.compute_partition or '?'}/{gpu.memory_partition or '?'}")
    return ", ".join(parts)


def _catalog_differences(
    group: list[PciFunction], model: GpuModel, driver: DriverReport
) -> list[str]:
    """Where the driver disagrees with the catalog entry: the machine wins at boot, say so."""
    notes = set()
    for function in group:
        gpu = driver.gpus.get(function.address)
        if gpu is None:
            continue
        if gpu.power_w[0] and model.power.default_w and gpu.power_w[0] != model.power.default_w:
            notes.add(
                f"default power {gpu.power_w[0]} W here, {model.power.default_w} W in the catalog"
            )
        if (
            gpu.max_clocks_mhz[0]
            and model.max_graphics_clock_mhz
            and gpu.max_clocks_mhz[0] != model.max_graphics_clock_mhz
        ):
            notes.add(
                f"max graphics clock {gpu.max_clocks_mhz[0]} MHz here, "
                f"{model.max_graphics_clock_mhz} MHz in the catalog"
            )
    return [comment(4, f"{driver.source} differs from {model.key}: {n}") for n in sorted(notes)]


def nvswitch_lines(functions: dict[str, PciFunction], driver: DriverReport | str) -> list[str]:
    switches = devices.nvswitches_of(functions)
    if switches:
        ids = ", ".join(sorted({s.pci_id for s in switches}))
        return [field(0, "nvswitch", True, f"{len(switches)} NVSwitch PCI functions ({ids})")]
    if isinstance(driver, DriverReport):
        answers = {gpu.nvswitch for gpu in driver.gpus.values()}
        if True in answers:
            return [field(0, "nvswitch", True, f"{driver.source}: NVLinks lead to an NVSwitch")]
        if answers == {False}:
            return [field(0, "nvswitch", False, f"{driver.source}: NVLinks lead to no NVSwitch")]
    return [
        comment(
            0,
            "nvswitch: left out (no NVSwitch PCI function; the format's default "
            "from the GPU model applies)",
        )
    ]


def nic_lines(
    tree: Tree, functions: dict[str, PciFunction], numa: cpus.NumaLayout, catalog: Catalog
) -> list[str]:
    found, notes = devices.read_nics(tree, functions)
    routes = devices.default_route_interfaces(tree)
    lines = [comment(0, note) for note in notes]
    usable = [nic for nic in found if INTERFACE_NAME.match(nic.name)]
    lines += [
        comment(0, f"interface {shown(nic.name)}: not a name the format accepts; left out")
        for nic in found
        if nic not in usable
    ]
    if not usable:
        return [*lines, field(0, "nics", [], "no interface backed by a device in /sys/class/net")]
    lines.append("nics:")
    shared = _shared_rdma_devices(usable)
    cards = _cards(usable)
    for nic in usable:
        described = _nic(nic, routes, numa, catalog, shared)
        if nic.name in cards:  # before the closing names_real line
            described.insert(len(described) - 1, cards[nic.name])
        lines += described
    return lines


def _cards(nics: list[Nic]) -> dict[str, str]:
    """The card line of each interface that shares its PCI slot (domain, bus, device) with
    another: the functions of one device are the ports of one card (a dual-port ConnectX is
    functions .0 and .1; a dual-port mlx4 is two interfaces on one function)."""
    slots: dict[str, list[Nic]] = {}
    for nic in nics:
        if nic.pci is not None:
            slots.setdefault(nic.pci.address.rsplit(".", 1)[0], []).append(nic)
    lines = {}
    for slot, ports in slots.items():
        if len(ports) > 1:
            names = ", ".join(port.name for port in ports)
            card = slot.replace(":", "-")
            for port in ports:
                lines[port.name] = field(4, "card", card, f"PCI slot {slot}, ports {names}")
    return lines


def _shared_rdma_devices(nics: list[Nic]) -> set[str]:
    """RDMA devices on the PCI function of more than one interface (a dual-port mlx4 adapter
    is one device with two ports): no interface owns them, so none gets their name."""
    seen: set[str] = set()
    shared: set[str] = set()
    for nic in nics:
        for name in nic.rdma_devices:
            (shared if name in seen else seen).add(name)
    return shared


def _nic(
    nic: Nic, routes: set[str], numa: cpus.NumaLayout, catalog: Catalog, shared: set[str]
) -> list[str]:
    model = find_nic(catalog, nic.pci.pci_id) if nic.pci else None
    lines = [
        field(
            2,
            "- name",
            nic.name,
            f"/sys/class/net, on PCI {nic.pci.address}"
            if nic.pci
            else "/sys/class/net, not on a PCI function",
        )
    ]
    if nic.pci is not None and PCI_ADDRESS_FORMAT.fullmatch(nic.pci.address):
        lines.append(field(4, "pci_address", nic.pci.address, "its device link in /sys/class/net"))
    if model is not None:
        lines.append(field(4, "model", model.key, f"PCI {nic.pci.pci_id if nic.pci else ''}"))
    elif nic.pci is not None:
        lines.append(
            comment(
                4,
                f"model: left out, PCI {nic.pci.pci_id} is not in the catalog (hardware_db/nics/)",
            )
        )
    lines += _nic_speed(nic, model)
    node, note = device_node(nic.pci, numa)
    lines.append(
        field(4, "numa_node", node, note)
        if node is not None
        else comment(4, f"numa_node: left out, {note}")
    )
    role, why = guess_role(nic, routes)
    lines.append(field(4, "role", role, f"GUESS: {why}"))
    lines += _nic_rdma(nic, model, shared)
    lines.append(field(4, "names_real", True, "names read from this host's sysfs"))
    return lines


def _nic_speed(nic: Nic, model: NicModel | None) -> list[str]:
    if nic.speed_mbps is None:
        return [comment(4, "speed_gbps: left out, sysfs speed unknown (link down?)")]
    gbps = nic.speed_mbps // 1000
    if gbps < 1:
        return [comment(4, f"speed_gbps: left out, {nic.speed_mbps} Mb/s is below 1 Gbit/s")]
    if model is not None and model.max_speed_gbps and gbps > model.max_speed_gbps:
        return [
            comment(
                4,
                f"speed_gbps: left out, sysfs says {gbps} Gbit/s, above the "
                f"{model.key} maximum of {model.max_speed_gbps}",
            )
        ]
    return [field(4, "speed_gbps", gbps, f"sysfs speed {nic.speed_mbps} Mb/s")]


def guess_role(nic: Nic, routes: set[str]) -> tuple[str, str]:
    """A NIC's job is not in sysfs: guess from the link type, the routes and the speed."""
    if nic.link_type == ARPHRD_INFINIBAND:
        return "compute", "an InfiniBand link (type 32) carries the GPU fabric"
    if nic.name in routes:
        return "frontend", "it carries the default route (/proc/net/route)"
    if nic.rdma_devices:
        return "compute", "an RDMA-capable port off the default route"
    if nic.speed_mbps is None or nic.speed_mbps < FAST_PORT_MBPS:
        return "management", "a slow or unknown-speed port off the default route"
    return "storage", "a fast port without RDMA, off the default route"


def _nic_rdma(nic: Nic, model: NicModel | None, shared: set[str]) -> list[str]:
    if not nic.rdma_devices:
        return [
            comment(
                4, "rdma: left out, no RDMA device on its PCI function in /sys/class/infiniband"
            )
        ]
    names = ", ".join(shown(name) for name in nic.rdma_devices)
    if model is not None and not model.rdma:
        return [
            comment(
                4,
                f"rdma: left out, RDMA device {names} seen but the catalog's {model.key} has none",
            )
        ]
    return [
        field(4, "rdma", True, f"RDMA device {names} on its PCI function"),
        _nic_rdma_device(nic, shared),
    ]


def _nic_rdma_device(nic: Nic, shared: set[str]) -> str:
    """The RDMA device NCCL_IB_HCA names for this port: the one on its PCI function
    (/sys/class/net/<name>/device/infiniband/<device>), when it is this interface's alone."""
    if len(nic.rdma_devices) > 1:
        names = ", ".join(shown(name) for name in nic.rdma_devices)
        return comment(4, f"rdma_device: left out, its PCI function has several ({names})")
    device = nic.rdma_devices[0]
    if device in shared:
        return comment(
            4, f"rdma_device: left out, {shown(device)} is on another interface's function too"
        )
    if not RDMA_DEVICE_NAME.fullmatch(device):
        return comment(4, f"rdma_device: left out, {shown(device)} is not a name the format takes")
    return field(4, "rdma_device", device, "/sys/class/infiniband, on the same PCI function")


def disk_lines(tree: Tree) -> list[str]:
    disks, virtual, notes = devices.read_block_devices(tree)
    dev, source = devices.root_device(tree)
    holding_root = devices.os_disks(disks, virtual, dev, source)
    lines = [comment(0, f"disk {note}") for note in notes]
    lines += [
        comment(0, f"disk {shown(d.name)}: not a name the format accepts; left out")
        for d in disks
        if not DISK_NAME.match(d.name)
    ]
    usable = [d for d in disks if DISK_NAME.match(d.name)]
    if not holding_root:
        lines.append(comment(0, "no disk found holding / (/proc/self/mountinfo); none marked os"))
    if not usable:
        return [*lines, field(0, "disks", [], "no physical disk in /sys/block")]
    lines.append("disks:")
    lines += [_disk(d, d.name in holding_root) for d in usable]
    return lines


def _disk(disk: Disk, holds_root: bool) -> str:
    role = "os" if holds_root else "data"
    why = "holds / (/proc/self/mountinfo)" if holds_root else "GUESS: data (cache is never guessed)"
    text = f"- {{name: {scalar(disk.name)}, kind: {scalar(disk.kind)}, role: {role}}}"
    return line(2, text, f"{disk.kind_note}; {why}")


def os_lines(tree: Tree, live: bool, distros: tuple[str, ...] = ()) -> list[str]:
    info = read_os(tree, live, distros)
    lines = ["os:"]
    if info.distro is not None:
        lines.append(field(2, "distro", info.distro, info.distro_note))
    else:
        lines.append(comment(2, f"distro: {info.distro_note}"))
    if info.kernel is not None:
        lines.append(field(2, "kernel", info.kernel, info.kernel_note))
    else:
        lines.append(comment(2, f"kernel: left out, {info.kernel_note}"))
    if info.page_size_kib in (4, 16, 64):
        lines.append(field(2, "page_size_kib", info.page_size_kib, info.page_note))
    elif info.page_size_kib is not None:
        lines.append(
            comment(2, f"page_size_kib: left out, {info.page_size_kib} KiB is not 4, 16 or 64")
        )
    else:
        lines.append(comment(2, f"page_size_kib: left out, {info.page_note}"))
    if (driver := read_driver(tree))[0] is not None:
        lines.append(field(2, "driver", *driver))
    return lines
