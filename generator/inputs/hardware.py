"""The hardware description: what the machine *is*.

Load a hand-written YAML file (or a shipped system name), merge it over a reference system from
``hardware_db/systems/`` when it names one, validate it strictly and resolve model names against
the catalog into immutable ``Facts``.
"""

# No `from __future__ import annotations` here: pydantic would have to eval every annotation
# string when the models are defined, which is a measurable part of start-up (bench/bench.py).
import re
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, StringConstraints

from generator.errors import InputError, Problem
from generator.inputs.catalog import Catalog, CpuModel, GpuModel, NicModel
from generator.inputs.facts import CpuFacts, DiskFacts, Facts, GpuGroup, NicFacts, OsFacts
from generator.inputs.schema import StrictModel, closest, validate_model
from generator.inputs.yamlio import name_or_stem, read_yaml_file
from generator.textsafe import short_key

# Linux accepts up to IFNAMSIZ-1 = 15 bytes and forbids '/', ':' and whitespace; we also forbid
# every shell and udev metacharacter because names reach scripts and rules.
InterfaceName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,14}$")]
DiskName = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9]{0,31}$")]
BundleName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")]
Count = Annotated[int, Field(ge=1, le=64)]
NumaNode = Annotated[int, Field(ge=0, le=63)]

NAME_RULES = {
    "name": "letters, digits, '.', '_', '-'; at most 64 characters",
    "nics": "an interface name is 1-15 of [A-Za-z0-9_.-], not starting with '.' or '-'",
}


class CpuSpec(StrictModel):
    model: str | None = None
    vendor: Literal["intel", "amd", "nvidia"] | None = None
    sockets: Annotated[int, Field(ge=1, le=16)]
    cores_per_socket: Annotated[int, Field(ge=1, le=1024)] | None = None
    threads_per_core: Annotated[int, Field(ge=1, le=8)] | None = None


class GpuSpec(StrictModel):
    model: str
    count: Count
    numa_nodes: list[NumaNode] | None = None


class NicSpec(StrictModel):
    name: InterfaceName
    model: str | None = None
    speed_gbps: Annotated[int, Field(ge=1, le=1600)] | None = None
    numa_node: NumaNode | None = None
    role: Literal["compute", "storage", "frontend", "management"]
    rdma: bool | None = None


class DiskSpec(StrictModel):
    name: DiskName
    kind: Literal["nvme", "ssd", "hdd"]
    role: Literal["os", "data", "cache"] = "data"


# A whole kernel release as `uname -r` prints it (6.8, 6.1.0-18-amd64, 5.14.0-427.13.1.el9_4.x86_64,
# 6.6.31+rpt-rpi-v8), matched from start to end: "6.8; rm -rf /" once passed a start-only match.
KernelRelease = Annotated[
    str,
    StringConstraints(
        pattern=r"^[0-9]{1,4}\.[0-9]{1,4}(\.[0-9]{1,6})?([-+._~][A-Za-z0-9._+~-]{0,64})?$"
    ),
]


class OsSpec(StrictModel):
    kernel: KernelRelease | None = None
    page_size_kib: Literal[4, 16, 64] = 4


class HardwareSpec(StrictModel):
    """A hardware description as written by the user (after merging any reference system)."""

    name: BundleName | None = None
    description: str | None = None
    source: list[str] = []
    system: str | None = None
    cpu: CpuSpec
    memory_gib: Annotated[int, Field(ge=1, le=65536)]
    numa_nodes: Annotated[int, Field(ge=1, le=64)] | None = None
    gpus: Annotated[list[GpuSpec], Field(max_length=16)] = []
    nvswitch: bool | None = None
    nics: Annotated[list[NicSpec], Field(max_length=64)] = []
    disks: Annotated[list[DiskSpec], Field(max_length=256)] = []
    os: OsSpec = Field(default_factory=OsSpec)


def deep_merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """Mappings merge key by key; lists and scalars in ``override`` replace."""
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def is_path_reference(reference: str) -> bool:
    """A value with a ``/`` or ending in ``.yaml``/``.yml`` names a file; else a shipped name.

    The rule is fixed so that a file in the current directory (or beside a profile) can never
    stand in for a shipped system or profile: ``inference`` is always the shipped profile,
    ``./inference.yaml`` the file.
    """
    return "/" in reference or reference.endswith((".yaml", ".yml"))


def find_input(
    reference: str, folder: Path, kind: str, choices: list[str], relative_to: Path | None = None
) -> Path:
    """The file a reference names: a path (relative to ``relative_to`` when given, else to the
    current directory), or the shipped ``folder/<name>.yaml``; an unknown name is an InputError."""
    if is_path_reference(reference):
        path = Path(reference)
        return relative_to / path if relative_to is not None and not path.is_absolute() else path
    shipped = folder / f"{reference}.yaml"
    if reference in choices and shipped.is_file():
        return shipped
    hint = closest(reference, choices)
    if Path(f"{reference}.yaml").is_file() or Path(reference).is_file():
        hint = (
            f"a bare name is a shipped {kind}; to read the file, give it as a path: "
            f"./{short_key(reference)}.yaml"
        )
    raise InputError(Problem(short_key(reference), "", f"no shipped {kind} of that name", hint))


def find_hardware_file(reference: str, catalog: Catalog) -> Path:
    systems = catalog.system_files
    return find_input(reference, catalog.root / "systems", "system", list(systems))


def load_hardware(reference: str, catalog: Catalog) -> tuple[HardwareSpec, Path]:
    """Read, merge over a reference system and validate; returns the spec and its file."""
    path = find_hardware_file(reference, catalog)
    source = str(path)
    data = read_yaml_file(path)
    system = data.get("system")
    if system is not None:
        if not isinstance(system, str) or system not in catalog.system_files:
            hint = closest(str(system), catalog.system_files)
            raise InputError(
                Problem(source, "system", f"unknown reference system {system!r}", hint)
            )
        base = read_yaml_file(catalog.system_files[system])
        base.pop("description", None)
        base.pop("source", None)
        data = deep_merge(base, data)
    data = name_or_stem(data, path)
    spec = validate_model(HardwareSpec, data, source)
    return spec, path


def _resolve_cpu(spec: CpuSpec, catalog: Catalog, source: str) -> tuple[CpuFacts, list[Problem]]:
    problems: list[Problem] = []
    model: CpuModel | None = None
    if spec.model is not None:
        model = catalog.cpus.find(spec.model)
        if model is None:
            hint = closest(spec.model, catalog.cpus.keys)
            problems.append(Problem(source, "cpu.model", f"unknown CPU model {spec.model!r}", hint))
    vendor = spec.vendor or (model.vendor if model else None)
    if model and spec.vendor and spec.vendor != model.vendor:
        problems.append(
            Problem(
                source,
                "cpu.vendor",
                f"{spec.vendor!r} contradicts model {model.key} ({model.vendor})",
            )
        )
    if vendor is None and not problems:
        problems.append(Problem(source, "cpu.vendor", "required when cpu.model is not given"))
    cores = spec.cores_per_socket or (model.cores_per_socket if model else None)
    if cores is None and not problems:
        problems.append(
            Problem(source, "cpu.cores_per_socket", "required (the CPU model does not give it)")
        )
    stated = spec.threads_per_core or (model.threads_per_core if model else None)
    arch = model.arch if model else ("aarch64" if vendor == "nvidia" else "x86_64")
    cpu = CpuFacts(
        model, vendor or "intel", arch, spec.sockets, cores or 1, stated or 1, stated is not None
    )
    return cpu, problems


def _resolve_gpus(
    spec: HardwareSpec, catalog: Catalog, numa_nodes: int, source: str
) -> tuple[tuple[GpuGroup, ...], list[Problem]]:
    problems: list[Problem] = []
    groups: list[GpuGroup] = []
    for index, gpu in enumerate(spec.gpus):
        where = f"gpus[{index}]"
        model: GpuModel | None = catalog.gpus.find(gpu.model)
        if model is None:
            hint = closest(gpu.model, catalog.gpus.keys)
            problems.append(
                Problem(source, f"{where}.model", f"unknown GPU model {gpu.model!r}", hint)
            )
            continue
        if gpu.numa_nodes is not None:
            if len(gpu.numa_nodes) != gpu.count:
                problems.append(
                    Problem(
                        source,
                        f"{where}.numa_nodes",
                        f"lists {len(gpu.numa_nodes)} nodes for count {gpu.count} GPUs; give one per GPU",
                    )
                )
            for position, node in enumerate(gpu.numa_nodes):
                if node >= numa_nodes:
                    problems.append(
                        Problem(
                            source,
                            f"{where}.numa_nodes[{position}]",
                            f"NUMA node {node} out of range (the machine has {numa_nodes}: 0-{numa_nodes - 1})",
                        )
                    )
        groups.append(GpuGroup(model, gpu.count, tuple(gpu.numa_nodes) if gpu.numa_nodes else None))
    total = sum(group.count for group in groups)
    if total > 64:
        problems.append(
            Problem(source, "gpus", f"{total} GPUs in one machine; at most 64 are supported")
        )
    return tuple(groups), problems


def _resolve_nic(
    index: int, nic: NicSpec, catalog: Catalog, numa_nodes: int, source: str
) -> tuple[NicFacts, list[Problem]]:
    where = f"nics[{index}]"
    problems: list[Problem] = []
    model: NicModel | None = None
    if nic.model is not None:
        model = catalog.nics.find(nic.model)
        if model is None:
            problems.append(
                Problem(
                    source,
                    f"{where}.model",
                    f"unknown NIC model {nic.model!r}",
                    closest(nic.model, catalog.nics.keys),
                )
            )
    speed = nic.speed_gbps or (model.max_speed_gbps if model else None)
    if model and model.max_speed_gbps and nic.speed_gbps and nic.speed_gbps > model.max_speed_gbps:
        problems.append(
            Problem(
                source,
                f"{where}.speed_gbps",
                f"{nic.speed_gbps} Gbit/s exceeds the {model.key} maximum of {model.max_speed_gbps}",
            )
        )
    if model and nic.rdma and not model.rdma:
        problems.append(Problem(source, f"{where}.rdma", f"{model.key} has no RDMA capability"))
    if nic.numa_node is not None and nic.numa_node >= numa_nodes:
        problems.append(
            Problem(
                source,
                f"{where}.numa_node",
                f"NUMA node {nic.numa_node} out of range (the machine has {numa_nodes}: 0-{numa_nodes - 1})",
            )
        )
    rdma = (
        nic.rdma
        if nic.rdma is not None
        else bool(model and model.rdma and nic.role in {"compute", "storage"})
    )
    return NicFacts(nic.name, model, speed, nic.numa_node, nic.role, rdma), problems


def _check_unique(names: list[str], field: str, source: str) -> list[Problem]:
    problems = []
    seen: dict[str, int] = {}
    for index, name in enumerate(names):
        if name in seen:
            problems.append(
                Problem(
                    source,
                    f"{field}[{index}].name",
                    f"duplicate name {name!r} (also {field}[{seen[name]}])",
                )
            )
        seen.setdefault(name, index)
    return problems


def _default_nvswitch(groups: tuple[GpuGroup, ...]) -> bool:
    """An 8-GPU baseboard of a model whose HGX/DGX board uses NVSwitch."""
    return any(group.model.nvswitch_baseboard and group.count >= 8 for group in groups)


def _parse_kernel(text: str | None) -> tuple[int, int] | None:
    if text is None:
        return None
    match = re.match(r"^(\d+)\.(\d+)", text)
    return (int(match.group(1)), int(match.group(2))) if match else None


def resolve_facts(spec: HardwareSpec, catalog: Catalog, source: str) -> Facts:
    """Resolve model names and check every cross-field constraint; all problems at once."""
    cpu, problems = _resolve_cpu(spec.cpu, catalog, source)
    numa_nodes = spec.numa_nodes or spec.cpu.sockets
    if numa_nodes % spec.cpu.sockets:
        problems.append(
            Problem(
                source,
                "numa_nodes",
                f"{numa_nodes} is not a multiple of {spec.cpu.sockets} sockets",
            )
        )
    elif not problems and cpu.cores_per_socket % (numa_nodes // spec.cpu.sockets):
        problems.append(
            Problem(
                source,
                "numa_nodes",
                f"{numa_nodes} nodes do not split {cpu.cores_per_socket} cores per socket evenly",
            )
        )
    gpus, gpu_problems = _resolve_gpus(spec, catalog, numa_nodes, source)
    problems += gpu_problems
    nics: list[NicFacts] = []
    for index, nic_spec in enumerate(spec.nics):
        nic, nic_problems = _resolve_nic(index, nic_spec, catalog, numa_nodes, source)
        nics.append(nic)
        problems += nic_problems
    problems += _check_unique([nic.name for nic in spec.nics], "nics", source)
    problems += _check_unique([disk.name for disk in spec.disks], "disks", source)
    if problems:
        raise InputError(problems)
    nvswitch = spec.nvswitch if spec.nvswitch is not None else _default_nvswitch(gpus)
    disks = tuple(DiskFacts(d.name, d.kind, d.role) for d in spec.disks)
    os_facts = OsFacts(_parse_kernel(spec.os.kernel), spec.os.page_size_kib)
    assert spec.name is not None
    return Facts(
        spec.name, cpu, spec.memory_gib, numa_nodes, gpus, nvswitch, tuple(nics), disks, os_facts
    )


def load_facts(reference: str, catalog: Catalog) -> tuple[Facts, Path]:
    spec, path = load_hardware(reference, catalog)
    return resolve_facts(spec, catalog, str(path)), path
