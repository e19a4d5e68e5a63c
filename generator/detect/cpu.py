"""CPU, NUMA and memory of a machine, from /proc/cpuinfo, /proc/meminfo and sysfs topology."""

from __future__ import annotations

import re
from collections import Counter
from typing import NamedTuple

from generator.detect.tree import Tree, decimal, shown
from generator.errors import InputError, Problem
from generator.inputs.catalog import AmbiguousNameError, Catalog
from generator.model.cpulist import expand_cpus

MAX_CPUS = 16384
CPUINFO = "/proc/cpuinfo"

# MIDR_EL1 implementer codes as /proc/cpuinfo prints them ("CPU implementer : 0x41").
# Source: Arm ARM MIDR_EL1; NVIDIA/grace-cpu-benchmarking-guide src/developer/cpudetect.md
# (get_implementer_name) [P].
ARM_IMPLEMENTERS = {
    "0x41": "Arm",
    "0x42": "Broadcom",
    "0x43": "Cavium",
    "0x46": "Fujitsu",
    "0x48": "HiSilicon",
    "0x4e": "NVIDIA",
    "0x50": "Applied Micro",
    "0x51": "Qualcomm",
    "0x56": "Marvell",
    "0xc0": "Ampere",
}
# Grace's cores are Arm Neoverse V2 (MIDR 0x41/0xd4f), as in other vendors' chips, so the core
# does not identify Grace; the SoC does. SMCCC SOC_ID "jep106:036b:0241" is NVIDIA's JEP106
# code with the Grace chip id: NVIDIA/DCGM modules/sysmon/DcgmSystemMonitor.cpp
# (ReadCpuVendorAndModel) [P]; format "jep106:%02x%02x:%04x" from Linux
# drivers/firmware/smccc/soc_id.c [P].
SOC_ID = "/sys/devices/soc0/soc_id"
GRACE_SOC_ID = "jep106:036b:0241"
X86_VENDORS = {"GenuineIntel": "intel", "AuthenticAMD": "amd"}
# Arm implementers the format has a cpu.vendor for; every other one (Graviton's cores are Arm's
# own Neoverse, implementer 0x41) is written as vendor `other` with `arch: aarch64`.
ARM_VENDORS = {"0xc0": "ampere"}
# What cpuinfo model names add around the catalog's names: trademarks, "CPU", the clock, and
# AMD's "96-Core Processor". Removing them leaves a name the catalog matches exactly.
MODEL_NOISE = re.compile(r"\((?:R|TM|tm|r)\)|\bCPU\b|@.*$|\b\d+-Core\b|\bProcessor\b")


class CpuIdentity(NamedTuple):
    vendor: str  # intel | amd | nvidia | ampere | other
    arch: str  # x86_64 | aarch64
    model: str | None  # a catalog key, or None
    seen_as: str  # what cpuinfo or the SoC id says, for the comment
    model_note: str  # why the model is what it is


class Topology(NamedTuple):
    sockets: int
    cores_per_socket: int
    threads_per_core: int
    online_cpus: int


class NumaLayout(NamedTuple):
    cpu_nodes: tuple[int, ...]
    memory_only_nodes: tuple[int, ...]  # nodes without CPUs: GPU memory (Grace), CXL
    memory_only_kib: int  # memory on those nodes, counted in MemTotal once onlined
    cpus_of_node: dict[int, frozenset[int]]


def cpulist(text: str | None, source: str) -> list[int]:
    """A kernel CPU list, bounded so a foreign ``0-4000000000`` cannot exhaust memory."""
    if text is None or not text.strip():
        return []
    if not re.fullmatch(r"[0-9,\-]{1,4096}", text.strip()):
        raise InputError(Problem(source, "", f"not a CPU list: {shown(text.strip())!r}"))
    if any(decimal(n, source) >= MAX_CPUS for n in re.findall(r"\d+", text)):
        raise InputError(
            Problem(source, "", f"CPU number above {MAX_CPUS - 1}: {shown(text.strip())!r}")
        )
    try:
        return expand_cpus(text.strip())
    except ValueError as error:
        raise InputError(Problem(source, "", f"not a CPU list: {error}")) from None


def cpuinfo_fields(text: str) -> dict[str, str]:
    """The first value of each ``key : value`` line (the first processor's block)."""
    fields: dict[str, str] = {}
    for line in text.splitlines():
        key, colon, value = line.partition(":")
        if colon:
            fields.setdefault(key.strip(), value.strip())
    return fields


def identify_cpu(tree: Tree, catalog: Catalog) -> CpuIdentity:
    text = tree.read(CPUINFO)
    if text is None:
        raise InputError(Problem(tree.label(CPUINFO), "", "missing or unreadable"))
    fields = cpuinfo_fields(text)
    if "CPU implementer" in fields:
        return _identify_arm(tree, fields)
    return _identify_x86(tree, fields, catalog)


def _identify_x86(tree: Tree, fields: dict[str, str], catalog: Catalog) -> CpuIdentity:
    vendor_id = fields.get("vendor_id", "")
    if not vendor_id:
        raise InputError(
            Problem(
                tree.label(CPUINFO),
                "cpu.arch",
                "neither an x86 vendor_id nor an Arm CPU implementer: not a CPU the format knows",
            )
        )
    # vendor_id is x86 CPUID leaf 0, so the arch is certain even for a vendor without a name
    # in the format (Hygon, Zhaoxin): those are `other`.
    vendor = X86_VENDORS.get(vendor_id, "other")
    name = fields.get("model name", "")
    cleaned = " ".join(MODEL_NOISE.sub(" ", name).split())
    try:
        entry = catalog.cpus.find(cleaned) if cleaned else None
    except AmbiguousNameError:
        entry = None
    if entry is not None and entry.vendor == vendor:
        return CpuIdentity(
            vendor, "x86_64", entry.key, name, f"catalog entry for {shown(cleaned)!r}"
        )
    note = (
        f"no catalog entry named {shown(cleaned)!r}" if cleaned else "cpuinfo gives no model name"
    )
    return CpuIdentity(vendor, "x86_64", None, name, note)


def _identify_arm(tree: Tree, fields: dict[str, str]) -> CpuIdentity:
    implementer = fields.get("CPU implementer", "").lower()
    part = fields.get("CPU part", "").lower()
    soc_id = tree.value(SOC_ID)
    maker = ARM_IMPLEMENTERS.get(implementer, f"implementer {shown(implementer)}")
    seen = (
        f"{maker} core (MIDR {shown(implementer)}/{shown(part)}), SoC id {shown(soc_id or 'none')}"
    )
    if soc_id == GRACE_SOC_ID:
        return CpuIdentity(
            "nvidia", "aarch64", "Grace", seen, f"SoC id {GRACE_SOC_ID} is NVIDIA Grace"
        )
    vendor = ARM_VENDORS.get(implementer, "other")
    note = f"implementer {shown(implementer)} is {maker}" if implementer else "no implementer"
    if vendor == "other":
        # Neoverse cores are in Grace, Graviton and others alike: without Grace's SoC id the
        # core says nothing of the platform, so no Grace rule may apply.
        note += f"; not NVIDIA Grace (SoC id is not {GRACE_SOC_ID})"
    return CpuIdentity(vendor, "aarch64", None, seen, note)


def read_topology(tree: Tree) -> Topology:
    """Sockets, cores and threads of the online CPUs, from each CPU's topology directory."""
    base = "/sys/devices/system/cpu"
    online = cpulist(tree.value(f"{base}/online"), tree.label(f"{base}/online"))
    if not online:
        names = [n for n in tree.entries(base) if re.fullmatch(r"cpu\d+", n)]
        online = sorted(decimal(n[3:], tree.label(f"{base}/{n}")) for n in names)
    if not online:
        raise InputError(
            Problem(tree.label(base), "", "no CPUs found (no online list, no cpuN directories)")
        )
    threads_of_core: Counter[tuple[str, str]] = Counter()
    for cpu in online:
        topology = f"{base}/cpu{cpu}/topology"
        package = tree.value(f"{topology}/physical_package_id") or "0"
        core = tree.value(f"{topology}/core_id")
        # -1 or absent: the kernel does not know the core, so each CPU counts as one
        threads_of_core[(package, core if core not in (None, "-1") else f"cpu{cpu}")] += 1
    cores_of_package = Counter(package for package, _ in threads_of_core)
    if len(set(cores_of_package.values())) != 1:
        counts = ", ".join(f"package {p}: {n}" for p, n in sorted(cores_of_package.items()))
        raise InputError(
            Problem(
                tree.label(base),
                "cpu.cores_per_socket",
                (
                    f"sockets have different numbers of online cores ({counts}); "
                    "the format needs one "
                    "number (are CPUs offline?)"
                ),
            )
        )
    return Topology(
        len(cores_of_package),
        next(iter(cores_of_package.values())),
        max(threads_of_core.values()),
        len(online),
    )


def read_numa(tree: Tree) -> NumaLayout:
    base = "/sys/devices/system/node"
    names = [n for n in tree.entries(base) if re.fullmatch(r"node\d+", n)]
    nodes = sorted(decimal(n[4:], tree.label(f"{base}/{n}")) for n in names)
    cpu_nodes: list[int] = []
    memory_only: list[int] = []
    memory_only_kib = 0
    cpus_of_node: dict[int, frozenset[int]] = {}
    for node in nodes:
        path = f"{base}/node{node}/cpulist"
        node_cpus = cpulist(tree.value(path), tree.label(path))
        if node_cpus:
            cpu_nodes.append(node)
            cpus_of_node[node] = frozenset(node_cpus)
            continue
        memory_only.append(node)
        meminfo = f"{base}/node{node}/meminfo"
        found = _meminfo_kib(tree.read(meminfo), f"Node {node} MemTotal", tree.label(meminfo))
        memory_only_kib += found or 0
    return NumaLayout(tuple(cpu_nodes) or (0,), tuple(memory_only), memory_only_kib, cpus_of_node)


def _meminfo_kib(text: str | None, key: str, source: str) -> int | None:
    match = re.search(rf"^{re.escape(key)}:\s+(\d+) kB", text or "", re.MULTILINE)
    return decimal(match.group(1), source, "memory_gib") if match else None


def read_memory_kib(tree: Tree) -> int:
    total = _meminfo_kib(tree.read("/proc/meminfo"), "MemTotal", tree.label("/proc/meminfo"))
    if total is None:
        raise InputError(Problem(tree.label("/proc/meminfo"), "memory_gib", "no MemTotal line"))
    return total
