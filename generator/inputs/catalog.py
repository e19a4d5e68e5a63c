"""The shipped hardware knowledge: GPU, NIC and CPU models and reference systems.

Every entry lives in its own YAML file under ``hardware_db/<kind>/`` and carries ``source:``
lines for its numbers. A number that no source confirms stays empty (``null``); rules treat an
empty number as "unknown" and leave the decision to the boot-time unit, which queries the card.
"""

# No `from __future__ import annotations` here: pydantic would have to eval every annotation
# string when the models are defined, which is a measurable part of start-up (bench/bench.py).
import re
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Generic, Literal, NamedTuple, TypeVar

from pydantic import AfterValidator, Field, StringConstraints

from generator.errors import InputError, Problem
from generator.inputs import schema as validation
from generator.inputs import yamlio
from generator.inputs.catalog_cache import cached
from generator.inputs.schema import StrictModel, validate_model
from generator.inputs.yamlio import read_catalog_entry
from generator.model import mig
from generator.model import vendors as gpu_vendors
from generator.model.mig import PROFILE_NAME as MIG_PROFILE_NAME
from generator.model.vendors import GpuVendor, vendor_spec, vendor_table
from generator.paths import files_ending, hardware_db_dir, site_catalog_named

if TYPE_CHECKING:
    from generator.inputs.distro import Distro

ModelKey = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,63}$")]
PciDeviceId = Annotated[str, StringConstraints(pattern=r"^0x[0-9a-f]{4}$")]
MigProfile = Annotated[str, StringConstraints(pattern=rf"^{MIG_PROFILE_NAME}$")]
Sources = Annotated[list[Annotated[str, StringConstraints(min_length=3)]], Field(min_length=1)]


class PowerLimits(StrictModel):
    """Board power limits in watts as nvidia-smi reports them (default, min, max)."""

    default_w: Annotated[int, Field(gt=0, le=5000)] | None = None
    min_w: Annotated[int, Field(gt=0, le=5000)] | None = None
    max_w: Annotated[int, Field(gt=0, le=5000)] | None = None


def known_gpu_vendor(vendor: str) -> str:
    """A vendor with a row in generator/model/vendors.py, which says what it takes."""
    if vendor not in vendor_table():
        raise ValueError(f"not a GPU vendor goldtune knows ({', '.join(vendor_table())})")
    return vendor


GpuVendorName = Annotated[str, AfterValidator(known_gpu_vendor)]


class GpuModel(StrictModel):
    key: ModelKey
    name: str
    aliases: list[str] = []  # noqa: RUF012 -- pydantic copies field defaults
    vendor: GpuVendorName = GpuVendor.NVIDIA.value  # a row of generator/model/vendors.py
    pci_device_ids: Annotated[list[PciDeviceId], Field(min_length=1)]
    architecture: Literal["ampere", "ada", "hopper", "blackwell", "cdna3", "cdna4"]
    # oam: an OCP Accelerator Module on a universal baseboard (AMD Instinct MI300X and later);
    # apu: CPU cores and the GPU in one socket sharing its HBM as system memory (AMD Instinct
    # MI300A), whose memory Linux sees as ordinary NUMA nodes with CPUs, unlike a superchip's
    form_factor: Literal["sxm", "pcie", "superchip", "oam", "apu"]
    compute_capability: Annotated[str, StringConstraints(pattern=r"^\d+\.\d+$")] | None = None
    memory_gib: Annotated[float, Field(gt=0)] | None = None
    # GDDR keeps ECC inline, in the same DRAM (about 1/16 of capacity); HBM has dedicated ECC bits.
    memory_type: Literal["hbm", "gddr"] | None = None
    power: PowerLimits = Field(default_factory=PowerLimits.model_construct)
    max_graphics_clock_mhz: Annotated[int, Field(gt=0, le=10000)] | None = None
    max_memory_clock_mhz: Annotated[int, Field(gt=0, le=20000)] | None = None
    mig_max_instances: Annotated[int, Field(ge=0, le=7)] | None = None  # 0: no MIG
    # The MIG GPU instance profiles and how many of each fit one GPU (NVIDIA MIG user guide,
    # "Supported MIG Profiles"; mig-parted's per-model configs); empty: not known here.
    mig_profiles: dict[MigProfile, Annotated[int, Field(ge=1, le=7)]] = {}  # noqa: RUF012 -- pydantic copies field defaults
    nvlink_generation: Annotated[int, Field(ge=0, le=9)] | None = None  # 0: no NVLink
    nvswitch_baseboard: bool = False  # its 8-GPU HGX/DGX baseboard connects GPUs through NVSwitch
    # Its NVLink domain spans trays through external NVLink switch trays (NVL72), which run the
    # fabric manager; the host shares GPU memory across trays through IMEX.
    multi_node_nvlink: bool = False
    ecc_default_on: bool | None = None
    # open: only NVIDIA's open GPU kernel modules drive it; the proprietary flavour does not
    # support Grace Hopper and Blackwell platforms. None: either flavour, or not NVIDIA's.
    kernel_modules: Literal["open"] | None = None
    # A superchip's GPU memory as Linux shows it without the driver's CDMM: this many NUMA nodes
    # without CPUs per GPU (GH200, GB200: 8). None: not known here (or not a superchip).
    cpu_less_numa_nodes: Annotated[int, Field(ge=0, le=64)] | None = None
    # AMD Instinct: xGMI (Infinity Fabric) links to peer GPUs on its 8-GPU baseboard; the compute
    # (accelerator) and memory (NPS) partition modes amd-smi sets (amd-smi set --compute-partition /
    # --memory-partition). None: not known here; NVIDIA models leave them empty.
    xgmi_links: Annotated[int, Field(ge=0, le=16)] | None = None
    compute_partitions: list[Literal["SPX", "DPX", "TPX", "QPX", "CPX"]] | None = None
    memory_partitions: list[Literal["NPS1", "NPS2", "NPS4", "NPS8"]] | None = None
    # AMD Instinct: the AMD page whose host settings this model's bundle follows (its title, as
    # EXPLAIN.md names it), and whether that page requires pci=bfsort on the kernel command
    # line. None: no model-specific page known here (the MI300X system optimization guide then).
    host_guide: str | None = None
    pci_bfsort: bool | None = None
    notes: str = ""
    source: Sources

    @property
    def supports_mig(self) -> bool:
        return bool(self.mig_max_instances)

    @property
    def is_superchip(self) -> bool:
        """CPU and GPU in one package, the GPU's memory coherent with the CPU's over NVLink-C2C
        (GH200, GB200, GB300): Linux shows that memory as NUMA nodes without CPUs."""
        return self.form_factor == "superchip"


class NicModel(StrictModel):
    key: ModelKey
    name: str
    aliases: list[str] = []  # noqa: RUF012 -- pydantic copies field defaults
    vendor: Literal["nvidia", "intel", "broadcom", "amd"]
    pci_ids: Annotated[
        list[Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{4}:[0-9a-f]{4}$")]],
        Field(min_length=1),
    ]
    driver: Annotated[str, StringConstraints(pattern=r"^[a-z0-9_]+$")]
    rdma_driver: Annotated[str, StringConstraints(pattern=r"^[a-z0-9_]+$")] | None = None
    max_speed_gbps: Annotated[int, Field(gt=0, le=1600)] | None = None
    rdma: bool
    infiniband: bool = False
    notes: str = ""
    source: Sources


class CpuModel(StrictModel):
    key: ModelKey
    name: str
    aliases: list[str] = []  # noqa: RUF012 -- pydantic copies field defaults
    vendor: Literal["intel", "amd", "nvidia", "ampere", "other"]
    arch: Literal["x86_64", "aarch64"]
    cores_per_socket: Annotated[int, Field(gt=0, le=1024)] | None = None
    threads_per_core: Annotated[int, Field(gt=0, le=8)] | None = None
    cpufreq_driver: str | None = None
    idle_driver: str | None = None
    # x86: AMD's product series ("EPYC 9005"), which vendor guides name their settings for, and
    # the CPU family /proc/cpuinfo prints ("cpu family : 26" is 0x1A), which the kernel keys its
    # cpufreq driver on (amd-pstate.c). None: not known here.
    series: str | None = None
    x86_family: Annotated[int, Field(ge=1, le=255)] | None = None
    # arm64 only: the MIDR fields as /proc/cpuinfo prints them ("CPU implementer\t: 0x41",
    # "CPU part\t: 0xd0c"; arch/arm64/kernel/cpuinfo.c), which tuned's cpuinfo_regex units match
    arm_cpu_implementer: Annotated[str, Field(pattern=r"^0x[0-9a-f]{2}$")] | None = None
    arm_cpu_part: Annotated[str, Field(pattern=r"^0x[0-9a-f]{3}$")] | None = None
    notes: str = ""
    source: Sources


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


def _load_entries(folder: Path, model: type[Any]) -> list[Any]:
    entries = []
    for path in sorted(folder.glob("*.yaml")):
        entry = validate_model(model, read_catalog_entry(folder.parent, path), str(path))
        if entry.key != path.stem:
            raise InputError(
                Problem(
                    str(path), "key", f"{entry.key!r} does not match the file name {path.stem!r}"
                )
            )
        entries.append(entry)
    return entries


def _load_index(folder: Path, kind: str, model: type[Any]) -> Index[Any]:
    def load() -> Index[Any]:
        return Index.build(kind, _load_entries(folder, model))

    # Only the shipped catalog is cached: it is the same on every run of one installation.
    if folder.parent != hardware_db_dir():
        return load()
    # the code an entry's validation runs: the models, their checks, how the YAML is read, and
    # the MIG profile-name pattern and the vendor table the GPU model checks against
    code = (
        Path(__file__),
        Path(validation.__file__),
        Path(yamlio.__file__),
        Path(mig.__file__),
        Path(gpu_vendors.__file__),
    )
    return cached(folder, code, load)


def _with_site(shipped: Index[Any], folder: Path, model: type[Any]) -> Index[Any]:
    """``shipped`` extended by a site catalog's entries of the same kind (``folder``), validated
    as the shipped ones are. A site entry may add models, never redefine one: a key, name, alias
    or PCI id a shipped entry already answers to is an error naming the site file."""
    added = _load_entries(folder, model)
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

    def _index(self, folder: str, kind: str, model: type[Any]) -> Index[Any]:
        shipped = _load_index(self.root / folder, kind, model)
        return shipped if self.site is None else _with_site(shipped, self.site / folder, model)

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
