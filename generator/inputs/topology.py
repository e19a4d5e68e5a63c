"""What real machines have that a count cannot say (issue 31): SMT whose state the BIOS decides,
NUMA nodes of uneven size, PCIe GPUs paired by NVLink bridges, the ports of one NIC card.

Each function checks one of these against the rest of the hardware file and the catalog and
returns the problems (file, field path, what is wrong), all at once like the other checks of
generator/inputs/hardware.py, which calls them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from generator.errors import Problem
from generator.inputs.catalog import CpuModel, GpuModel, NicModel


class CpuSmt(Protocol):
    """The fields of a hardware file's cpu mapping read here (inputs/hardware_spec.py CpuSpec)."""

    @property
    def threads_per_core(self) -> int | None: ...
    @property
    def smt(self) -> str | None: ...


def resolve_threads(
    spec: CpuSmt, model: CpuModel | None, source: str
) -> tuple[int | None, list[Problem]]:
    """Hardware threads per core, None when not known, from ``smt`` and ``threads_per_core``.

    ``smt: bios``: the chip has SMT and the BIOS decides (a fleet whose BIOS profiles differ, an
    image for all of them): the thread count stays unknown even where the catalog gives the
    chip's, and rules that depend on it decide at boot or say they cannot (CpuFacts.threads_known).
    ``smt: disabled``: one thread per core. ``smt: enabled``: the chip's threads (more than
    one). Not on/off: YAML 1.1 reads those as booleans.
    """
    written, chip = spec.threads_per_core, model.threads_per_core if model else None
    where = "cpu.smt"
    if spec.smt is None:
        return written or chip, []
    if spec.smt == "bios":
        if written is not None:
            message = "bios says the BIOS decides; threads_per_core states it"
            return None, [Problem(source, where, message, "leave threads_per_core out")]
        if chip == 1 and model is not None:
            return None, [Problem(source, where, f"{model.key} has no SMT (1 thread per core)")]
        return None, []
    if spec.smt == "disabled":
        if written not in (None, 1):
            message = f"SMT disabled means 1 thread per core, not threads_per_core {written}"
            return 1, [Problem(source, where, message)]
        return 1, []
    threads = written or chip
    if threads == 1:
        what = f"{model.key} has" if chip == 1 and model is not None else "threads_per_core is"
        return threads, [Problem(source, where, f"SMT enabled, but {what} 1 thread per core")]
    return threads, []


def resolve_node_cores(
    given: Sequence[int] | None, cores: int, sockets: int, numa_nodes: int, source: str
) -> tuple[tuple[int, ...] | None, list[Problem]]:
    """The physical cores of each NUMA node of one socket: as given (SNC3 of 128 cores is 43,
    43, 42), or None for an even split; a problem when neither adds up."""
    per_socket = numa_nodes // sockets
    if given is None:
        if cores % per_socket == 0:
            return None, []
        message = f"{numa_nodes} nodes do not split {cores} cores per socket evenly"
        hint = (
            f"give cpu.cores_per_numa_node, the cores of each of the {per_socket} nodes of a "
            "socket (lscpu's NUMA lines, /sys/devices/system/node/node*/cpulist)"
        )
        return None, [Problem(source, "numa_nodes", message, hint)]
    where = "cpu.cores_per_numa_node"
    if len(given) != per_socket:
        message = f"lists {len(given)} nodes; a socket has {per_socket} ({numa_nodes} nodes)"
        return None, [Problem(source, where, message)]
    if sum(given) != cores:
        message = f"adds up to {sum(given)} cores; a socket has {cores}"
        return None, [Problem(source, where, message)]
    return tuple(given), []


def check_bridges(
    bridges: Sequence[Sequence[int]], count: int, model: GpuModel, where: str, source: str
) -> list[Problem]:
    """NVLink bridges join two PCIe cards each (H100 NVL, A100 PCIe, RTX: two-way bridges); a
    board's NVLink (SXM, superchips) is not a bridge, and a card without NVLink takes none."""
    field = f"{where}.nvlink_bridges"
    if model.form_factor != "pcie":
        message = f"{model.key} is {model.form_factor}: its NVLink is on the board, not bridges"
        return [Problem(source, field, message)]
    if model.nvlink_generation == 0:
        return [Problem(source, field, f"{model.key} has no NVLink")]
    problems = []
    seen: set[int] = set()
    for position, pair in enumerate(bridges):
        if len(set(pair)) != len(pair):
            problems.append(Problem(source, f"{field}[{position}]", "bridges a GPU to itself"))
            continue
        for gpu in pair:
            if gpu >= count:
                message = f"GPU {gpu} out of range (the group has {count}: 0-{count - 1})"
                problems.append(Problem(source, f"{field}[{position}]", message))
            elif gpu in seen:
                message = f"GPU {gpu} is in two bridges; a bridge pairs two cards"
                problems.append(Problem(source, f"{field}[{position}]", message))
            seen.add(gpu)
    return problems


class NicPort(Protocol):
    """The fields of a NIC entry read here (inputs/hardware_spec.py NicSpec)."""

    @property
    def name(self) -> str: ...
    @property
    def card(self) -> str | None: ...
    @property
    def numa_node(self) -> int | None: ...


MAX_PORTS_PER_CARD = 8


def check_cards(
    ports: Sequence[NicPort], models: Sequence[NicModel | None], source: str
) -> list[Problem]:
    """The ports of one card (same ``card``) sit in one PCIe slot: one NUMA node, one model."""
    problems = []
    first: dict[str, int] = {}
    counts: dict[str, int] = {}
    for index, port in enumerate(ports):
        if port.card is None:
            continue
        counts[port.card] = counts.get(port.card, 0) + 1
        if counts[port.card] == MAX_PORTS_PER_CARD + 1:
            message = f"more than {MAX_PORTS_PER_CARD} ports on card {port.card!r}"
            problems.append(Problem(source, f"nics[{index}].card", message))
        other = first.setdefault(port.card, index)
        if other == index:
            continue
        mate = ports[other]
        if None not in (port.numa_node, mate.numa_node) and port.numa_node != mate.numa_node:
            message = (
                f"NUMA node {port.numa_node}, but {mate.name} on card {port.card!r} is on "
                f"{mate.numa_node}: the ports of one card share its slot"
            )
            problems.append(Problem(source, f"nics[{index}].numa_node", message))
        model, mate_model = models[index], models[other]
        if model is not None and mate_model is not None and model.key != mate_model.key:
            message = f"{model.key}, but {mate.name} on card {port.card!r} is {mate_model.key}"
            problems.append(Problem(source, f"nics[{index}].model", message))
    return problems
