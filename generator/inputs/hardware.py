"""The hardware description: what the machine *is*.

Load a hand-written YAML file (or a shipped system name), merge it over a reference system from
``hardware_db/systems/`` when it names one, validate it strictly (the format is
``generator.inputs.hardware_spec``'s) and resolve model names against the catalog into immutable
``Facts``.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from generator.errors import InputError, Problem
from generator.inputs.catalog import AmbiguousNameError, Catalog, CpuModel, EntryT, Index, NicModel
from generator.inputs.facts import CpuFacts, DiskFacts, Facts, GpuGroup, NicFacts, OsFacts
from generator.inputs.hardware_spec import ARCH_OF_VENDOR, CpuSpec, HardwareSpec, NicSpec, OsSpec
from generator.inputs.schema import closest, validate_model
from generator.inputs.topology import (
    check_bridges,
    check_cards,
    resolve_node_cores,
    resolve_threads,
)
from generator.inputs.yamlio import name_or_stem, read_catalog_entry, read_yaml_file
from generator.textsafe import short_key

if TYPE_CHECKING:  # the distribution tables' models are built only when a bundle targets one
    from generator.inputs.distro import Distro


# Lists of named items an overlay can edit by name instead of restating the whole list.
NAMED_LISTS = ("nics", "disks")
# The fields of a NIC that name it on the host, which names_real vouches for.
NIC_NAME_FIELDS = {"name", "rdma_device"}


def deep_merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """Mappings merge key by key; lists and scalars in ``override`` replace."""
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def edit_by_name(
    base: list[Any], edits: dict[Any, Any], field: str, source: str
) -> tuple[list[Any], list[Problem]]:
    """A reference system's list of named items, edited by an overlay's mapping of name -> edit.

    An edit of a name in the list merges over that item (``name:`` in it renames it); ``remove:
    true`` alone drops it; a new name is appended as a whole item. The list keeps its order.
    """
    items = [dict(item) if isinstance(item, dict) else item for item in base]
    position = {str(item.get("name")): i for i, item in enumerate(items) if isinstance(item, dict)}
    problems: list[Problem] = []
    removed: set[int] = set()
    for name, edit in edits.items():
        where = f"{field}.{short_key(str(name))}"
        if not isinstance(edit, dict):
            hint = "give the fields to change, or remove: true"
            problems.append(Problem(source, where, "expected a mapping of fields", hint))
            continue
        index = position.get(str(name))
        if "remove" in edit:
            if edit != {"remove": True}:
                problems.append(Problem(source, where, "remove: true stands alone"))
            elif index is None:
                message = f"no {field} item named {short_key(str(name))!r} to remove"
                problems.append(Problem(source, where, message, closest(str(name), position)))
            else:
                removed.add(index)
            continue
        if index is None:
            items.append({"name": name, **edit})
        else:
            items[index] = {**items[index], **edit}
            if field == "nics" and NIC_NAME_FIELDS & edit.keys() and "names_real" not in edit:
                # a name the overlay gives is the overlay's word, not the reference's: it is
                # real only where the overlay says so
                items[index]["names_real"] = False
    return [item for i, item in enumerate(items) if i not in removed], problems


def overlay(base: dict[str, Any], data: dict[str, Any], source: str) -> dict[str, Any]:
    """``data`` over a reference system: mappings merge, a nics/disks mapping edits by name."""
    problems: list[Problem] = []
    edited: dict[str, Any] = {}
    for field in NAMED_LISTS:
        edits = data.get(field)
        if isinstance(edits, dict) and isinstance(base.get(field, []), list):
            edited[field], field_problems = edit_by_name(base.get(field, []), edits, field, source)
            problems += field_problems
    if problems:
        raise InputError(problems)
    return {**deep_merge(base, data), **edited}


def _refuse_edits_without_system(data: dict[str, Any], source: str) -> None:
    for field in NAMED_LISTS:
        if isinstance(data.get(field), dict):
            message = f"a mapping of {field} by name edits a reference system's list"
            hint = f"name the system: it edits, or give {field} as a list"
            raise InputError(Problem(source, field, message, hint))


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
    if not is_path_reference(reference) and reference in systems:
        return systems[reference]  # shipped, or the site catalog's
    return find_input(reference, catalog.root / "systems", "system", list(systems))


def read_system(path: Path, catalog: Catalog) -> dict[str, Any]:
    """A reference system of the catalog (<root>/systems/<name>.yaml, shipped or the site's),
    read without following a link below its catalog's folder."""
    return read_catalog_entry(path.parent.parent, path)


def load_hardware(reference: str, catalog: Catalog) -> tuple[HardwareSpec, Path]:
    """Read, merge over a reference system and validate; returns the spec and its file."""
    path = find_hardware_file(reference, catalog)
    source = str(path)
    data = read_system(path, catalog) if path in catalog.system_files.values() else None
    data = read_yaml_file(path) if data is None else data
    system = data.get("system")
    if system is not None:
        if not isinstance(system, str) or system not in catalog.system_files:
            hint = closest(str(system), catalog.system_files)
            raise InputError(
                Problem(source, "system", f"unknown reference system {system!r}", hint)
            )
        base = read_system(catalog.system_files[system], catalog)
        base.pop("description", None)
        base.pop("source", None)
        data = overlay(base, data, source)
    else:
        _refuse_edits_without_system(data, source)
    data = name_or_stem(data, path)
    spec = validate_model(HardwareSpec, data, source)
    return spec, path


def _resolve_arch(
    spec: CpuSpec, model: CpuModel | None, vendor: str | None, source: str
) -> tuple[str | None, list[Problem]]:
    """cpu.arch as written, else the model's, else what the vendor implies; contradictions."""
    implied = model.arch if model else ARCH_OF_VENDOR.get(vendor or "")
    if spec.arch is None:
        if implied is None and vendor == "other":
            return None, [Problem(source, "cpu.arch", "required when cpu.vendor is other")]
        return implied, []
    problems = []
    if model and spec.arch != model.arch:
        message = f"{spec.arch!r} contradicts model {model.key} ({model.arch})"
        problems.append(Problem(source, "cpu.arch", message))
    elif vendor in ARCH_OF_VENDOR and spec.arch != ARCH_OF_VENDOR[vendor]:
        message = f"{spec.arch!r} contradicts vendor {vendor} ({ARCH_OF_VENDOR[vendor]} only)"
        problems.append(Problem(source, "cpu.arch", message))
    return spec.arch, problems


def _resolve_cpu(spec: CpuSpec, catalog: Catalog, source: str) -> tuple[CpuFacts, list[Problem]]:
    problems: list[Problem] = []
    model: CpuModel | None = None
    if spec.model is not None:
        model, problem = _find_model(catalog.cpus, spec.model, "cpu.model", source)
        problems += problem
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
    arch, arch_problems = _resolve_arch(spec, model, vendor, source)
    if not problems:  # an unknown model or a missing vendor is the one thing to fix first
        problems += arch_problems
    cores = spec.cores_per_socket or (model.cores_per_socket if model else None)
    if cores is None and not problems:
        problems.append(
            Problem(source, "cpu.cores_per_socket", "required (the CPU model does not give it)")
        )
    stated, smt_problems = resolve_threads(spec, model, source)
    if not problems:
        problems += smt_problems
    facts = CpuFacts(
        model,
        vendor or "intel",
        arch or "x86_64",
        spec.sockets,
        cores or 1,
        stated or 1,
        stated is not None,
    )
    return facts, problems


# A PCI id as lspci -nn prints it (10de:2330) or as sysfs does (0x2330). A pattern: only an
# unknown model name is matched against it, so a run with none never compiles it.
PCI_ID = r"(?:[0-9a-fA-F]{4}:[0-9a-fA-F]{4}|0x[0-9a-fA-F]{4})"
CATALOG_FOLDERS = {
    "GPU": "hardware_db/gpus/ (pci_device_ids)",
    "NIC": "hardware_db/nics/ (pci_ids)",
}
# What a new entry must hold (the required fields of GpuModel and NicModel in
# generator/inputs/catalog.py), what it should hold where a source says it, and where those
# facts are found: the fix for a refused PCI id is an entry, so the refusal says how to write it.
CATALOG_RECIPES = {
    "GPU": (
        "key (the file name), name, vendor, pci_device_ids, architecture, form_factor, source; "
        "then memory_gib, power (default_w, min_w, max_w), partition or MIG modes, null where no "
        "source says. The facts: pci.ids (github.com/pciutils/pciids) for the id and name, "
        "`nvidia-smi -q` or `amd-smi static` on the machine for memory and power limits, "
        "the vendor's datasheet for the rest"
    ),
    "NIC": (
        "key (the file name), name, vendor, pci_ids, driver, rdma, source; then max_speed_gbps, "
        "rdma_driver, infiniband. The facts: pci.ids (github.com/pciutils/pciids) for the id "
        "and name, `ethtool -i` and `ls /sys/class/infiniband` on the machine for the drivers, "
        "the vendor's datasheet for the speed"
    ),
}


def _find_model(
    index: Index[EntryT], name: str, where: str, source: str
) -> tuple[EntryT | None, list[Problem]]:
    """The catalog entry ``name`` means, or the one problem saying why there is none."""
    try:
        entry = index.find(name)
    except AmbiguousNameError as error:
        listed = ", ".join(error.candidates)
        message = f"{name!r} could be any of {listed}"
        return None, [Problem(source, where, message, "name one of them by its key")]
    if entry is None:
        message = f"unknown {index.kind} model {name!r}"
        if re.fullmatch(PCI_ID, name.strip(), re.ASCII):
            # What `gen detect` writes for hardware the catalog lacks: the fix is a catalog
            # entry, not a different name, so no list of known names.
            folder = CATALOG_FOLDERS.get(index.kind, "hardware_db/")
            hint = f"no catalog entry has this PCI id: add one to {folder} listing it"
            if index.kind in CATALOG_RECIPES:
                hint += f", with {CATALOG_RECIPES[index.kind]}"
            return None, [Problem(source, where, message, hint)]
        return None, [Problem(source, where, message, closest(name, index.keys))]
    return entry, []


def _resolve_gpus(
    spec: HardwareSpec, catalog: Catalog, numa_nodes: int, source: str
) -> tuple[tuple[GpuGroup, ...], list[Problem]]:
    problems: list[Problem] = []
    groups: list[GpuGroup] = []
    for index, gpu in enumerate(spec.gpus):
        where = f"gpus[{index}]"
        model, model_problems = _find_model(catalog.gpus, gpu.model, f"{where}.model", source)
        if model is None:
            problems += model_problems
            continue
        if gpu.numa_nodes is not None:
            if len(gpu.numa_nodes) != gpu.count:
                problems.append(
                    Problem(
                        source,
                        f"{where}.numa_nodes",
                        f"lists {len(gpu.numa_nodes)} nodes for count {gpu.count} GPUs; "
                        "give one per GPU",
                    )
                )
            for position, node in enumerate(gpu.numa_nodes):
                if node >= numa_nodes:
                    problems.append(
                        Problem(
                            source,
                            f"{where}.numa_nodes[{position}]",
                            f"NUMA node {node} out of range "
                            f"(the machine has {numa_nodes}: 0-{numa_nodes - 1})",
                        )
                    )
        bridges = tuple((pair[0], pair[1]) for pair in gpu.nvlink_bridges or ())
        if bridges:
            problems += check_bridges(bridges, gpu.count, model, where, source)
        nodes = tuple(gpu.numa_nodes) if gpu.numa_nodes else None
        groups.append(GpuGroup(model, gpu.count, nodes, bridges))
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
        model, model_problems = _find_model(catalog.nics, nic.model, f"{where}.model", source)
        problems += model_problems
    speed = nic.speed_gbps or (model.max_speed_gbps if model else None)
    if model and model.max_speed_gbps and nic.speed_gbps and nic.speed_gbps > model.max_speed_gbps:
        problems.append(
            Problem(
                source,
                f"{where}.speed_gbps",
                f"{nic.speed_gbps} Gbit/s exceeds the {model.key} maximum of "
                f"{model.max_speed_gbps}",
            )
        )
    if model and nic.rdma and not model.rdma:
        problems.append(Problem(source, f"{where}.rdma", f"{model.key} has no RDMA capability"))
    if nic.numa_node is not None and nic.numa_node >= numa_nodes:
        problems.append(
            Problem(
                source,
                f"{where}.numa_node",
                f"NUMA node {nic.numa_node} out of range "
                f"(the machine has {numa_nodes}: 0-{numa_nodes - 1})",
            )
        )
    rdma = (
        nic.rdma
        if nic.rdma is not None
        else bool(model and model.rdma and nic.role in {"compute", "storage"})
    )
    if nic.rdma_device is not None and not rdma:
        message = "names an RDMA device, but the NIC does not use RDMA"
        hint = "set rdma: true, or leave rdma_device out"
        problems.append(Problem(source, f"{where}.rdma_device", message, hint))
    facts = NicFacts(
        nic.name,
        model,
        speed,
        nic.numa_node,
        nic.role,
        rdma,
        nic.rdma_device,
        nic.names_real,
        nic.card,
        nic.pci_address,
        nic.speed_gbps is not None,
    )
    return facts, problems


def _check_unique(
    names: list[str | None], field: str, source: str, key: str = "name"
) -> list[Problem]:
    """Each name once in the list (None: not given, never a duplicate)."""
    problems = []
    seen: dict[str, int] = {}
    for index, name in enumerate(names):
        if name is None:
            continue
        if name in seen:
            problems.append(
                Problem(
                    source,
                    f"{field}[{index}].{key}",
                    f"duplicate {key.replace('_', ' ')} {name!r} (also {field}[{seen[name]}])",
                )
            )
        seen.setdefault(name, index)
    return problems


def _default_nvswitch(groups: tuple[GpuGroup, ...]) -> bool:
    """An 8-GPU baseboard of a model whose HGX/DGX board uses NVSwitch."""
    return any(group.model.nvswitch_baseboard and group.count >= 8 for group in groups)


def _check_page_size(os_spec: OsSpec, arch: str, source: str) -> list[Problem]:
    """x86_64 has 4 KiB pages only (arch/x86/include/asm/page_types.h: PAGE_SHIFT 12); 16 and
    64 KiB are arm64 build options (arch/arm64/Kconfig ARM64_16K_PAGES, ARM64_64K_PAGES)."""
    if arch != "x86_64" or os_spec.page_size_kib == 4:
        return []
    message = f"{os_spec.page_size_kib} KiB pages do not exist on x86_64 (4 KiB only)"
    return [Problem(source, "os.page_size_kib", message)]


def _parse_kernel(text: str | None) -> tuple[int, int] | None:
    if text is None:
        return None
    match = re.match(r"^(\d+)\.(\d+)", text)
    return (int(match.group(1)), int(match.group(2))) if match else None


def _resolve_os(
    written: str | None, source: str, os_name: str | None, catalog: Catalog
) -> Distro | None:
    """The target distribution: ``--os`` (``os_name``) wins over the file's ``os.distro``; both
    name a shipped table or one of the site catalog's."""
    if os_name is None and written is None:
        return None  # portable: no distribution's tables read, nor their models defined
    from generator.inputs.distro import resolve_distro

    if os_name is not None:
        return resolve_distro(os_name, catalog.distros)
    if written is not None:
        return resolve_distro(written, catalog.distros, source, "os.distro")
    return None


def resolve_facts(
    spec: HardwareSpec, catalog: Catalog, source: str, os_name: str | None = None
) -> Facts:
    """Resolve model names and check every cross-field constraint; all problems at once.

    ``os_name`` (the ``--os`` option) names the target distribution instead of ``os.distro``.
    """
    cpu, problems = _resolve_cpu(spec.cpu, catalog, source)
    cpu_resolved = not problems  # else cpu.arch is a fallback, not a fact to judge others by
    numa_nodes = spec.numa_nodes or spec.cpu.sockets
    if numa_nodes % spec.cpu.sockets:
        problems.append(
            Problem(
                source,
                "numa_nodes",
                f"{numa_nodes} is not a multiple of {spec.cpu.sockets} sockets",
            )
        )
    elif not problems:
        node_cores, node_problems = resolve_node_cores(
            spec.cpu.cores_per_numa_node,
            cpu.cores_per_socket,
            spec.cpu.sockets,
            numa_nodes,
            source,
        )
        problems += node_problems
        cpu = cpu._replace(cores_per_node=node_cores)
    if cpu_resolved:
        problems += _check_page_size(spec.os, cpu.arch, source)
    gpus, gpu_problems = _resolve_gpus(spec, catalog, numa_nodes, source)
    problems += gpu_problems
    nics: list[NicFacts] = []
    for index, nic_spec in enumerate(spec.nics):
        nic, nic_problems = _resolve_nic(index, nic_spec, catalog, numa_nodes, source)
        nics.append(nic)
        problems += nic_problems
    problems += _check_unique([nic.name for nic in spec.nics], "nics", source)
    problems += check_cards(spec.nics, [nic.model for nic in nics], source)
    problems += _check_unique(
        [nic.rdma_device for nic in spec.nics], "nics", source, key="rdma_device"
    )
    problems += _check_unique([disk.name for disk in spec.disks], "disks", source)
    distro: Distro | None = None
    try:
        distro = _resolve_os(spec.os.distro, source, os_name, catalog)
    except InputError as error:  # reported with the others: all problems at once
        problems += error.problems
    if problems:
        raise InputError(problems)
    nvswitch = spec.nvswitch if spec.nvswitch is not None else _default_nvswitch(gpus)
    disks = tuple(DiskFacts(d.name, d.kind, d.role) for d in spec.disks)
    # an unstated kernel is the named distribution's, where all its kernel lines share one
    # mainline version (hardware_db/distros/: RHEL's 4.18 and 5.14), else a current one
    kernel = _parse_kernel(spec.os.kernel) or (distro.kernel_version if distro else None)
    # and its backports are judged against the build the table names for it (rhel-8: 8.10's)
    assumed = distro.assumed_release if distro is not None and spec.os.kernel is None else None
    os_facts = OsFacts(
        kernel, spec.os.page_size_kib, distro, spec.os.kernel, assumed, spec.os.driver
    )
    assert spec.name is not None
    return Facts(
        spec.name,
        cpu,
        spec.memory_gib,
        numa_nodes,
        gpus,
        nvswitch,
        tuple(nics),
        disks,
        os_facts,
        *cpu_less_nodes(spec.memory_only_numa_nodes, gpus),
        any(group.model.is_superchip for group in gpus),
    )


def cpu_less_nodes(stated: int | None, gpus: tuple[GpuGroup, ...]) -> tuple[int | None, str]:
    """The NUMA nodes without CPUs: as stated, else inferred from the superchip GPUs' catalog
    count (GpuModel.cpu_less_numa_nodes per GPU), with how ("4 GB200 x 8"); (None, "") where
    the file omits it and a superchip's count is not in the catalog, or there is no superchip
    (a CXL expander's nodes are nowhere in the catalog). The same superchip form factor keys
    memory.numa-balancing (memory.coherent_gpu_models)."""
    superchips = [group for group in gpus if group.model.is_superchip]
    if stated is not None or not superchips:
        return stated, ""
    if any(group.model.cpu_less_numa_nodes is None for group in superchips):
        return None, ""
    counts = [(group, group.model.cpu_less_numa_nodes or 0) for group in superchips]
    how = ", ".join(f"{group.count} {group.model.key} x {per_gpu}" for group, per_gpu in counts)
    return sum(group.count * per_gpu for group, per_gpu in counts), how


def load_facts(reference: str, catalog: Catalog, os_name: str | None = None) -> tuple[Facts, Path]:
    spec, path = load_hardware(reference, catalog)
    return resolve_facts(spec, catalog, str(path), os_name), path
