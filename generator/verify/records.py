"""The collector's values of several columns, as records with named fields.

Each multi-column value (templates/scripts/collect's header documents its format) is split here,
once, by a small pure function of its text; the live checks read the fields by name. A parser
never raises on a short or malformed row (a foreign or truncated snapshot): a field the row
lacks is ``?`` (or None where a number is parsed), and the check judges it as it judges a value
it does not expect.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from generator.model.cpulist import expand_cpus
from generator.model.probes import Section
from generator.verify.snapshot import Snapshot, Why, is_absent, why_not
from generator.verify.udevmatch import Disk

# What a parser puts in a field the row lacks.
NO_FIELD = "?"

# --- gpu: nvidia-smi --query-gpu ----------------------------------------------------------------


class GpuRecord(NamedTuple):
    """One NVIDIA GPU of the ``gpu`` section: a line of ``nvidia-smi --query-gpu=<SMI_QUERY>
    --format=csv,noheader,nounits``, its fields named once here (``gpu_record``)."""

    gpu_index: str  # nvidia-smi's index
    bus_id: str
    name: str
    persistence_mode: str
    ecc_current: str
    ecc_pending: str
    compute_mode: str
    power_limit: str
    power_default_limit: str
    clocks_gr: str
    clocks_max_gr: str
    mig_current: str
    mig_pending: str


# The nvidia-smi fields the collector queries, in GpuRecord's order (templates/scripts/collect's
# `fields` in collect_gpu; tests/test_collector_contract.py holds the two equal).
SMI_QUERY = (
    "index",
    "pci.bus_id",
    "name",
    "persistence_mode",
    "ecc.mode.current",
    "ecc.mode.pending",
    "compute_mode",
    "power.limit",
    "power.default_limit",
    "clocks.gr",
    "clocks.max.gr",
    "mig.mode.current",
    "mig.mode.pending",
)


def gpu_record(line: str) -> GpuRecord:
    """A CSV line of nvidia-smi; a field it lacks is ``?``, fields past SMI_QUERY (a newer
    nvidia-smi) are dropped."""
    parts = [part.strip() for part in line.split(",")]
    padded = parts + [NO_FIELD] * (len(SMI_QUERY) - len(parts))
    return GpuRecord(*padded[: len(SMI_QUERY)])


def gpu_records(snapshot: Snapshot) -> list[GpuRecord]:
    """The ``gpu`` section's GPUs (its ``tool`` record says whether nvidia-smi answered)."""
    return [gpu_record(value) for key, value in snapshot.section(Section.GPU) if key != "tool"]


# --- irq: "<irq> <smp_affinity_list>" ------------------------------------------------------------


class IrqRow(NamedTuple):
    """One MSI interrupt of an interface."""

    irq: str
    cpus: str  # smp_affinity_list as read (0-3,8), a reason (!unreadable), or ? when none
    cpu_list: tuple[int, ...] | None  # those CPUs; None where cpus is not a CPU list


def cpu_list(text: str) -> tuple[int, ...] | None:
    """``0-2,5`` -> (0, 1, 2, 5); None for a reason or malformed text (never ValueError)."""
    if why_not(text) is not None:
        return None
    try:
        return tuple(expand_cpus(text))
    except ValueError:
        return None


def irq_row(text: str) -> IrqRow:
    """``42 0-3``; a row without its CPU list (cut short) has cpus ``?`` and no CPUs."""
    irq, _, cpus = text.partition(" ")
    return IrqRow(irq, cpus or NO_FIELD, cpu_list(cpus) if cpus else None)


# The collector's row of the device's local_cpulist, before the interrupts' rows
LOCAL_CPUS = "local-cpus"


def irq_rows(snapshot: Snapshot, interface: str) -> list[IrqRow]:
    """The interface's interrupts; a reason instead of them (``!absent``, ``!no-msi-irqs``) is
    read with ``Snapshot.why_not``."""
    rows = [irq_row(value) for value in snapshot.values(Section.IRQ, interface)]
    return [row for row in rows if row.irq != LOCAL_CPUS]


def irq_local_cpus(snapshot: Snapshot, interface: str) -> tuple[int, ...] | None:
    """The CPUs of the interface's PCI function's local_cpulist as the collector read it; None
    where it has none, or its row is not a CPU list."""
    rows = [irq_row(value) for value in snapshot.values(Section.IRQ, interface)]
    return next((row.cpu_list for row in rows if row.irq == LOCAL_CPUS), None)


# --- limits, runtime-limits: a row of /proc/<pid>/limits --------------------------------------


class LimitRow(NamedTuple):
    name: str  # Max open files
    soft: str
    hard: str
    units: str  # files, bytes, seconds; empty where the kernel prints none


# The columns of /proc/<pid>/limits (fs/proc/base.c proc_pid_limits: "%-25s %-20s %-20s %-10s"),
# which the limits section keeps: a limit's name has blanks, so its columns tell it apart.
_SOFT, _HARD, _UNITS = 26, 47, 68  # where each column after the name starts
# The kernel's names of those rows (fs/proc/base.c lnames): the runtime-limits section squeezes
# the columns, so a squeezed row's name is told by these.
LIMIT_NAMES = (
    "Max cpu time",
    "Max file size",
    "Max data size",
    "Max stack size",
    "Max core file size",
    "Max resident set",
    "Max processes",
    "Max open files",
    "Max locked memory",
    "Max address space",
    "Max file locks",
    "Max pending signals",
    "Max msgqueue size",
    "Max nice priority",
    "Max realtime priority",
    "Max realtime timeout",
)


def limit_row(line: str) -> LimitRow:
    """A row of the limits section, by the kernel's columns (a short row: empty fields)."""
    return LimitRow(
        name=line[:_SOFT].strip(),
        soft=line[_SOFT:_HARD].strip(),
        hard=line[_HARD:_UNITS].strip(),
        units=line[_UNITS:].strip(),
    )


def squeezed_limit_row(line: str) -> LimitRow | None:
    """A row of the runtime-limits section (blanks squeezed); None for a row of no known name
    or without a soft and a hard value."""
    name = next((n for n in LIMIT_NAMES if line == n or line.startswith(n + " ")), None)
    words = line[len(name) :].split() if name else []
    if name is None or len(words) < 2:
        return None
    return LimitRow(name, words[0], words[1], " ".join(words[2:]))


def limit_rows(snapshot: Snapshot, user: str) -> list[LimitRow]:
    """/proc/self/limits in a session of ``user``; a reason instead (``!absent``: no such user,
    ``!unavailable``: not root) is read with ``Snapshot.why_not``."""
    return [limit_row(line) for line in snapshot.values(Section.LIMITS, user)]


def runtime_limit_rows(snapshot: Snapshot, unit: str) -> list[LimitRow]:
    """/proc/<MainPID>/limits of a runtime unit's process: the rows that parse."""
    rows = (squeezed_limit_row(line) for line in snapshot.values(Section.RUNTIME_LIMITS, unit))
    return [row for row in rows if row is not None]


# --- acs: the ACS Control register of each port above the devices -------------------------------


class AcsPort(NamedTuple):
    """A root or downstream port with ACS, and its ACS Control register."""

    port: str  # its PCI address, 0000:00:01.0
    kind: str  # root | downstream
    control: str  # the register, 4 hex digits

    @property
    def bits(self) -> int:
        return int(self.control, 16)


class AcsReading(NamedTuple):
    """The acs records of one target (``gpus``, ``nic:<interface>``)."""

    absent: bool  # no such device on this machine
    unreadable: bool  # a port's config space could not be read (the collector ran as a user)
    ports: tuple[AcsPort, ...]  # ports with ACS (one without: ``<port> !no-acs``, left out)
    left_on: tuple[str, ...]  # devices whose DMA the IOMMU translates: ACS left on above them


_ACS_PORT = re.compile(
    r"([0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]) (root|downstream) ([0-9a-f]{4})"
)
# "!iommu <device> <group type>"; the reason word as the collector prints it (collect_acs)
_ACS_IOMMU = "iommu"


def acs_reading(rows: list[str]) -> AcsReading:
    """The acs records of one target, as collect_acs prints them (a row of another shape is
    left out: a port is judged only when its whole row reads)."""
    ports = tuple(AcsPort(*found.groups()) for row in rows if (found := _ACS_PORT.fullmatch(row)))
    reasons = [(why_not(row) or "").split() for row in rows]
    left_on = tuple(words[1] for words in reasons if len(words) > 1 and words[0] == _ACS_IOMMU)
    return AcsReading(
        absent=len(rows) == 1 and is_absent(rows[0]),
        unreadable=any(is_unreadable_row(row) for row in rows),
        ports=ports,
        left_on=left_on,
    )


def is_unreadable_row(row: str) -> bool:
    """``!unreadable``, or ``<port> !unreadable``: a port whose config space was not read."""
    return why_not(row.rpartition(" ")[2]) == Why.UNREADABLE


# --- gpu-amd: "driver=<driver> power1_cap=<uW> …" ------------------------------------------------


class AmdGpu(NamedTuple):
    """One GPU of the gpu-amd section: the amdgpu files the collector read for it, each as read
    or the reason it was not (``!absent``: amdgpu has no such file for it)."""

    address: str  # its PCI address
    driver: str  # the driver bound to it, or none
    power1_cap: str  # the hwmon power cap, in microwatts
    power1_cap_default: str
    current_compute_partition: str
    current_memory_partition: str


def amd_gpu(address: str, text: str) -> AmdGpu:
    """A gpu-amd record: ``key=value`` words (a word without ``=`` belongs to the value before
    it: a squeezed value with blanks); a field the record lacks is ``?`` (driver: none), a name
    AmdGpu does not know (a newer collector) is left out."""
    fields: dict[str, str] = {"driver": "none"}
    last = ""
    for word in text.split(" "):
        name, equals, value = word.partition("=")
        if equals and name:
            fields[name], last = value, name
        elif last:
            fields[last] += f" {word}"
    named = [fields.get(name, NO_FIELD) for name in AmdGpu._fields[1:]]
    return AmdGpu(address, *named)


# --- own-unit: Property=value of a unit ---------------------------------------------------------


def unit_properties(lines: list[str]) -> dict[str, str]:
    """``systemctl show`` lines (``Result=success``) as a mapping; the last of a name wins."""
    props = {}
    for line in lines:
        name, _, text = line.partition("=")
        props[name] = text
    return props


# --- block: <dev>:<attr> -----------------------------------------------------------------------


def block_disks(snapshot: Snapshot) -> list[Disk]:
    """The whole disks of the block section, each with its attributes (queue/scheduler, …)."""
    attrs: dict[str, dict[str, str]] = {}
    for key, value in snapshot.section(Section.BLOCK):
        name, _, attr = key.partition(":")
        attrs.setdefault(name, {})[attr] = value
    return [Disk(name, values) for name, values in attrs.items()]
