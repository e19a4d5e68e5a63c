"""The schema of the shipped hardware knowledge's GPU, NIC and CPU entries (hardware_db/), as
pydantic validates each file.

Imported only to validate entries: where the shipped catalog comes from its cache
(generator/inputs/catalog_cache.py), a run never defines these models (~4 ms of a cold `gen`,
issue 43); rules read each validated entry as a plain record of generator/inputs/catalog.py.
"""

# No `from __future__ import annotations` here: pydantic would have to eval every annotation
# string when the models are defined.
from typing import Annotated, Literal

from pydantic import AfterValidator, Field, StringConstraints

from generator.inputs.schema import MigProfile, StrictModel
from generator.model.vendors import GpuVendor, vendor_table

ModelKey = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,63}$")]
PciDeviceId = Annotated[str, StringConstraints(pattern=r"^0x[0-9a-f]{4}$")]
Sources = Annotated[list[Annotated[str, StringConstraints(min_length=3)]], Field(min_length=1)]


class PowerLimitsSchema(StrictModel):
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


class GpuSchema(StrictModel):
    """A GPU entry (hardware_db/gpus/*.yaml) as validated; rules read it as catalog.GpuModel."""

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
    power: PowerLimitsSchema = Field(default_factory=PowerLimitsSchema.model_construct)
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


class NicSchema(StrictModel):
    """A NIC entry (hardware_db/nics/*.yaml) as validated; rules read it as catalog.NicModel."""

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


class CpuSchema(StrictModel):
    """A CPU entry (hardware_db/cpus/*.yaml) as validated; rules read it as catalog.CpuModel."""

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


# Each catalog folder's schema, by its name under hardware_db/ (and a site catalog's).
SCHEMAS: dict[str, type[StrictModel]] = {"gpus": GpuSchema, "nics": NicSchema, "cpus": CpuSchema}
