"""The shipped hardware knowledge: GPU, NIC and CPU models and reference systems.

Every entry lives in its own YAML file under ``hardware_db/<kind>/`` and carries ``source:``
lines for its numbers. A number that no source confirms stays empty (``null``); rules treat an
empty number as "unknown" and leave the decision to the boot-time unit, which queries the card.

Each file is validated against its schema (generator/inputs/catalog_schema.py) and read as a
plain record (GpuModel, NicModel, CpuModel below); the shipped entries come from a cache
(catalog_cache.py) in most runs, which then never define the pydantic models.
"""

import re
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, NamedTuple, Self, TypeVar

from pydantic import BaseModel

from generator.errors import InputError, Problem
from generator.inputs import schema as validation
from generator.inputs import yamlio
from generator.inputs.catalog_cache import cached
from generator.inputs.schema import validate_model
from generator.inputs.yamlio import read_catalog_entry
from generator.model import mig
from generator.model import vendors as gpu_vendors
from generator.model.vendors import vendor_spec
from generator.paths import files_ending, hardware_db_dir, site_catalog_named

if TYPE_CHECKING:
    from generator.inputs.distro import Distro


class Record:
    """A validated catalog entry as the rules read it: its fields as attributes, compared by
    value. A plain class, not the pydantic schema the file was validated with
    (generator/inputs/catalog_schema.py): a run that reads the shipped catalog from its cache
    never defines those models (~4 ms of a cold `gen`, issue 43)."""

    def __init__(self, **fields: Any) -> None:
        self.__dict__.update(fields)

    def __setattr__(self, name: str, value: Any) -> None:
        # read-only, as the frozen pydantic entries were: rules share the cached catalog's entries
        raise AttributeError(f"{type(self).__name__}.{name}: a catalog entry is read-only")

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other.__dict__ == self.__dict__

    def __hash__(self) -> int:
        return hash((type(self).__name__, *self.__dict__))

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={value!r}" for name, value in self.__dict__.items())
        return f"{type(self).__name__}({fields})"

    def replace(self, **changes: Any) -> Self:
        """A copy with ``changes`` (tests vary one fact of a shipped entry)."""
        return type(self)(**{**self.__dict__, **changes})

    @classmethod
    def of(cls, entry: BaseModel) -> Self:
        """The record of a validated entry: every field of its schema."""
        return cls(**dict(entry))


class PowerLimits(Record):
    """Board power limits in watts as nvidia-smi reports them (default, min, max)."""

    default_w: int | None
    min_w: int | None
    max_w: int | None


class CatalogEntry(Record):
    """What every entry holds (catalog_schema.py says what each field may be)."""

    key: str
    name: str
    aliases: list[str]
    vendor: str
    notes: str
    source: list[str]


class GpuModel(CatalogEntry):
    pci_device_ids: list[str]
    architecture: str
    form_factor: str
    compute_capability: str | None
    memory_gib: float | None
    memory_type: str | None
    power: PowerLimits
    max_graphics_clock_mhz: int | None
    max_memory_clock_mhz: int | None
    mig_max_instances: int | None
    mig_profiles: dict[str, int]
    nvlink_generation: int | None
    nvswitch_baseboard: bool
    multi_node_nvlink: bool
    ecc_default_on: bool | None
    kernel_modules: str | None
    cpu_less_numa_nodes: int | None
    xgmi_links: int | None
    compute_partitions: list[str] | None
    memory_partitions: list[str] | None
    host_guide: str | None
    pci_bfsort: bool | None

    @classmethod
    def of(cls, entry: BaseModel) -> Self:
        fields = dict(entry)
        if "power" in fields:
            fields["power"] = PowerLimits.of(fields["power"])
        return cls(**fields)

    @property
    def supports_mig(self) -> bool:
        return bool(self.mig_max_instances)

    @property
    def is_superchip(self) -> bool:
        """CPU and GPU in one package, the GPU's memory coherent with the CPU's over NVLink-C2C
        (GH200, GB200, GB300): Linux shows that memory as NUMA nodes without CPUs."""
        return self.form_factor == "superchip"


class NicModel(CatalogEntry):
    pci_ids: list[str]
    driver: str
    rdma_driver: str | None
    max_speed_gbps: int | None
    rdma: bool
    infiniband: bool


class CpuModel(CatalogEntry):
    arch: str
    cores_per_socket: int | None
    threads_per_core: int | None
    cpufreq_driver: str | None
    idle_driver: str | None
    series: str | None
    x86_family: int | None
    arm_cpu_implementer: str | None
    arm_cpu_part: str | None


EntryT = TypeVar("EntryT", GpuModel, NicModel, CpuModel)


def _normalise(name: str) -> str:
    return re.sub(r"[\s_]+", "-", name.strip().lower())


class AmbiguousNameError(LookupError):
    """A name that several entries answer to: the caller lists them, it never picks one."""

    def __init__(self, name: str, candidates: list[str]) -> None:
        super().__init__(f"{name!r} names {', '.join(candidates)}")
        self.candidates = candidates


def names_of(entry: Any) -> list[str]:
    """Every name an entry answers to: key, name, aliases and PCI ids (bare and vendor:device)."""
    names = [entry.key, entry.name, *entry.aliases, *getattr(entry, "pci_ids", [])]
    for device in getattr(entry, "pci_device_ids", []):
        names += [device, f"{vendor_spec(entry.vendor).pci_hex}:{device.removeprefix('0x')}"]
    return names


class Index(NamedTuple, Generic[EntryT]):
    """Entries of one kind, found by exact key, name, alias (case, spaces and '_' aside) or PCI
    id. Never by substring (L4 is not L40S); a name two entries share finds neither.

    A NamedTuple and Catalog a plain class: frozen dataclasses compile their methods at import,
    about 0.7 ms each of every run."""

    kind: str
    entries: tuple[EntryT, ...]
    # every spelling, normalised, with the entries that answer to it: built by ``build``
    by_name: dict[str, tuple[EntryT, ...]]

    @classmethod
    def build(cls, kind: str, entries: list[Any]) -> "Index[Any]":
        by_name: dict[str, tuple[Any, ...]] = {}
        for entry in sorted(entries, key=lambda e: e.key):
            spellings: list[str] = list(dict.fromkeys(map(_normalise, names_of(entry))))
            spelling: str
            for spelling in spellings:
                by_name[spelling] = (*by_name.get(spelling, ()), entry)
        return cls(kind, tuple(sorted(entries, key=lambda e: e.key)), by_name)

    def find(self, name: str) -> EntryT | None:
        """The one entry ``name`` means, None if none; AmbiguousNameError if several share it."""
        found = self.by_name.get(_normalise(name), ())
        if len(found) > 1:
            raise AmbiguousNameError(name, [entry.key for entry in found])
        return found[0] if found else None

    @property
    def shared_names(self) -> dict[str, list[str]]:
        """Names that more than one entry answers to, with those entries' keys."""
        return {
            name: [entry.key for entry in found]
            for name, found in self.by_name.items()
            if len(found) > 1
        }

    @property
    def keys(self) -> list[str]:
        return [entry.key for entry in self.entries]


def _load_entries(folder: Path, record: type[CatalogEntry]) -> list[Any]:
    """The entries of one catalog folder (``gpus``, ``nics``, ``cpus``), validated against its
    schema, as ``record``s."""
    from generator.inputs.catalog_schema import SCHEMAS  # only to validate: not on a cached run

    entries = []
    for path in sorted(folder.glob("*.yaml")):
        data = read_catalog_entry(folder.parent, path)
        entry = record.of(validate_model(SCHEMAS[folder.name], data, str(path)))
        if entry.key != path.stem:
            raise InputError(
                Problem(
                    str(path), "key", f"{entry.key!r} does not match the file name {path.stem!r}"
                )
            )
        entries.append(entry)
    return entries


def _load_index(folder: Path, kind: str, record: type[CatalogEntry]) -> Index[Any]:
    def load() -> Index[Any]:
        return Index.build(kind, _load_entries(folder, record))

    # Only the shipped catalog is cached: it is the same on every run of one installation.
    if folder.parent != hardware_db_dir():
        return load()
    # the code an entry's validation runs: the models, their checks, how the YAML is read, and
    # the MIG profile-name pattern and the vendor table the GPU model checks against
    code = (
        Path(__file__),
        Path(__file__).with_name("catalog_schema.py"),
        Path(validation.__file__),
        Path(yamlio.__file__),
        Path(mig.__file__),
        Path(gpu_vendors.__file__),
    )
    return cached(folder, code, load)


def _with_site(shipped: Index[Any], folder: Path, record: type[CatalogEntry]) -> Index[Any]:
    """``shipped`` extended by a site catalog's entries of the same kind (``folder``), validated
    as the shipped ones are. A site entry may add models, never redefine one: a key, name, alias
    or PCI id a shipped entry already answers to is an error naming the site file."""
    added = _load_entries(folder, record)
    if not added:
        return shipped
    for entry in added:
        source = str(folder / f"{entry.key}.yaml")
        for spelling in dict.fromkeys(map(_normalise, names_of(entry))):
            taken = shipped.by_name.get(spelling, ())
            if taken:
                raise InputError(
                    Problem(
                        source,
                        "key" if spelling == _normalise(entry.key) else "aliases",
                        f"{spelling!r} is already the shipped {shipped.kind} "
                        f"{taken[0].key!r} (hardware_db/): a site entry adds a model, it does "
                        "not redefine one; give yours its own key, names and PCI ids",
                    )
                )
    return Index.build(shipped.kind, [*shipped.entries, *added])


class Catalog:
    """Everything in ``hardware_db/``; systems stay raw mappings until a hardware file uses one.

    ``site``: a site catalog folder (``--catalog``, $GOLDTUNE_CATALOG) laid out as hardware_db/
    (gpus/, nics/, cpus/, systems/, distros/), whose entries extend the shipped ones (_with_site,
    load_site_distros).
    Each kind is read (from the cache, or validated) the first time something asks for it."""

    def __init__(self, root: Path, site: Path | None = None) -> None:
        self.root = root
        self.site = site

    def _index(self, folder: str, kind: str, record: type[CatalogEntry]) -> Index[Any]:
        shipped = _load_index(self.root / folder, kind, record)
        return shipped if self.site is None else _with_site(shipped, self.site / folder, record)

    @cached_property
    def gpus(self) -> Index[GpuModel]:
        return self._index("gpus", "GPU", GpuModel)

    @cached_property
    def nics(self) -> Index[NicModel]:
        return self._index("nics", "NIC", NicModel)

    @cached_property
    def cpus(self) -> Index[CpuModel]:
        return self._index("cpus", "CPU", CpuModel)

    @cached_property
    def distros(self) -> "dict[str, Distro]":
        """The distribution tables by key and alias: hardware_db/distros/ and the site's
        distros/ (generator/inputs/distro.py load_site_distros). Read on first use only: a
        portable run never defines the distribution models."""
        from generator.inputs.distro import load_site_distros

        return load_site_distros(self.site)

    @cached_property
    def system_files(self) -> dict[str, Path]:
        systems = {path.stem: path for path in files_ending(self.root / "systems", ".yaml")}
        if self.site is None:
            return systems
        for path in files_ending(self.site / "systems", ".yaml"):
            if path.stem in systems:
                raise InputError(
                    Problem(
                        str(path),
                        "",
                        f"{path.stem!r} is already a shipped reference system (hardware_db/"
                        "systems/): give the site's system another file name",
                    )
                )
            systems[path.stem] = path
        return systems


def site_catalog_dir() -> Path | None:
    """The site catalog of this run: --catalog, else $GOLDTUNE_CATALOG, else none; a folder
    that does not exist is bad input, not an empty catalog."""
    named = site_catalog_named()
    if named is None:
        return None
    folder, where = named
    if not folder.is_dir():
        raise InputError(Problem(str(folder), "", f"{where}: not a directory"))
    return folder


def load_catalog(root: Path | None = None) -> Catalog:
    return Catalog(root or hardware_db_dir(), site_catalog_dir())
