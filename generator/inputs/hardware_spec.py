"""The hardware file's format: what a machine description may say, validated strictly.

The pydantic models of a hardware file (``HardwareSpec`` and its parts), the name rules every
name obeys before it reaches a script or a rule, and the JSON Schema editors read
(``gen schema``). Loading, merging over a reference system and resolving models against the
catalog are ``generator.inputs.hardware``'s.
"""

# No `from __future__ import annotations` here: pydantic would have to eval every annotation
# string when the models are defined, which is a measurable part of start-up (bench/bench.py).
from typing import Annotated, Any, Literal

from pydantic import Field, StringConstraints

from generator.inputs.schema import StrictModel

# Linux accepts up to IFNAMSIZ-1 = 15 bytes and forbids '/', ':' and whitespace; we also forbid
# every shell and udev metacharacter because names reach scripts and rules.
InterfaceName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,14}$")]
# An RDMA device as the kernel names it (/sys/class/infiniband: mlx5_0, mlx5_bond_0, irdma0,
# bnxt_re0): at most IB_DEVICE_NAME_MAX-1 = 63 bytes (include/rdma/ib_verbs.h). Never ',' or ':'
# (NCCL_IB_HCA separates devices and ports with them) nor a shell or udev metacharacter.
RdmaDeviceName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,62}$")]
DiskName = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9]{0,31}$")]
CardName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,31}$")]
BundleName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")]
NumaNode = Annotated[int, Field(ge=0, le=63)]
# A PCI function's address as sysfs names it under /sys/bus/pci/devices: domain:bus:device.function
# in lower-case hex, 0000:3b:00.0 (drivers/pci/probe.c pci_setup_device: "%04x:%02x:%02x.%d"; a
# domain wider than 4 digits exists on VMD and Hyper-V hosts). Device 00-1f, function 0-7
# (PCI_SLOT, PCI_FUNC: 5 and 3 bits).
PciAddress = Annotated[
    str, StringConstraints(pattern=r"^[0-9a-f]{4,8}:[0-9a-f]{2}:[01][0-9a-f]\.[0-7]$")
]

NAME_RULES = {
    "name": "letters, digits, '.', '_', '-'; at most 64 characters",
    "nics": "an interface name is 1-15 of [A-Za-z0-9_.-], not starting with '.' or '-'",
}


# What each CPU vendor implies for cpu.arch; `other` (Graviton, any Arm or x86 chip the format
# has no vendor for) implies nothing, so it needs cpu.arch. NVIDIA's only CPU is Grace (aarch64).
CpuVendor = Literal["intel", "amd", "nvidia", "ampere", "other"]
CpuArch = Literal["x86_64", "aarch64"]
ARCH_OF_VENDOR: dict[str, str] = {
    "intel": "x86_64",
    "amd": "x86_64",
    "nvidia": "aarch64",
    "ampere": "aarch64",
}


def _doc(text: str) -> Any:
    """A field's description: the JSON Schema's hover text in editors."""
    return Field(description=text)


class CpuSpec(StrictModel):
    model: Annotated[
        str | None, _doc("CPU model: a hardware_db/cpus key or alias (brings vendor and cores)")
    ] = None
    vendor: Annotated[
        CpuVendor | None,
        _doc(
            "intel, amd, nvidia (Grace), ampere (Altra, AmpereOne), or other (Graviton and any "
            "chip without a vendor of its own; then cpu.arch is required)"
        ),
    ] = None
    arch: Annotated[
        CpuArch | None,
        _doc("instruction set as `uname -m` prints it; implied by the model or the vendor"),
    ] = None
    sockets: Annotated[int, Field(ge=1, le=16, description="CPU packages (sockets)")]
    cores_per_socket: Annotated[
        int | None, Field(ge=1, le=1024, description="physical cores per socket")
    ] = None
    threads_per_core: Annotated[
        int | None, Field(ge=1, le=8, description="hardware threads per core (2 with SMT on)")
    ] = None
    smt: Annotated[
        Literal["enabled", "disabled", "bios"] | None,
        _doc(
            "SMT as the machine runs: enabled, disabled, or bios (the chip has SMT and the "
            "BIOS setting is not known here: the thread count stays unknown, even where the "
            "model gives it)"
        ),
    ] = None
    cores_per_numa_node: Annotated[
        list[Annotated[int, Field(ge=1, le=1024)]] | None,
        Field(
            min_length=1,
            max_length=16,
            description=(
                "physical cores of each NUMA node of one socket, for an uneven split (SNC3 of "
                "128 cores: [43, 43, 42]); default: numa_nodes split the cores evenly"
            ),
        ),
    ] = None


class GpuSpec(StrictModel):
    model: Annotated[
        str,
        _doc(
            "GPU model: a hardware_db/gpus key, an alias (what nvidia-smi prints) or a PCI id "
            "(10de:2330)"
        ),
    ]
    count: Annotated[int, Field(ge=1, le=64, description="GPUs of this model")]
    numa_nodes: Annotated[
        list[NumaNode] | None, _doc("NUMA node of each GPU, one per GPU, in PCI order")
    ] = None
    nvlink_bridges: Annotated[
        list[Annotated[list[Annotated[int, Field(ge=0, le=63)]], Field(min_length=2, max_length=2)]]
        | None,
        Field(
            max_length=32,
            description=(
                "PCIe cards joined by NVLink bridges, as pairs of GPU positions in this group "
                "(PCI order, from 0): [[0, 1], [2, 3]]; a card in no pair has no bridge"
            ),
        ),
    ] = None


class NicSpec(StrictModel):
    name: Annotated[InterfaceName, _doc("interface name as the booted system names it")]
    model: Annotated[
        str | None,
        _doc("NIC model: a hardware_db/nics key, an alias or a PCI id (15b3:1021)"),
    ] = None
    speed_gbps: Annotated[int | None, Field(ge=1, le=1600, description="link speed in Gbit/s")] = (
        None
    )
    numa_node: Annotated[NumaNode | None, _doc("NUMA node the NIC's PCIe slot is attached to")] = (
        None
    )
    role: Annotated[
        Literal["compute", "storage", "frontend", "management"],
        _doc("what the NIC carries: compute fabric, storage, front-end or management traffic"),
    ]
    rdma: Annotated[
        bool | None, _doc("RDMA in use; defaults to the model's capability on compute/storage")
    ] = None
    rdma_device: Annotated[
        RdmaDeviceName | None,
        _doc(
            "the RDMA device the kernel gives this port (mlx5_0: /sys/class/net/<name>/device/"
            "infiniband/); names the compute HCAs in NCCL_IB_HCA"
        ),
    ] = None
    card: Annotated[
        CardName | None,
        _doc(
            "the physical card this port is on, a name its ports share (slot3): the ports of "
            "one card share its PCIe slot, NUMA node and model"
        ),
    ] = None
    pci_address: Annotated[
        PciAddress | None,
        _doc(
            "the PCI function of this port (0000:3b:00.0, as /sys/bus/pci/devices names it): "
            "an identity that survives interface renaming; the boot step finds the port's "
            "interface and RDMA device from it, and the preflight checks it"
        ),
    ] = None
    names_real: Annotated[
        bool,
        _doc(
            "true: name and rdma_device are this host's own (gen detect read them, or you checked "
            "them on the booted system); only such names are pinned in NCCL_SOCKET_IFNAME and "
            "NCCL_IB_HCA. Default false: a shipped system's placeholder names are never pinned"
        ),
    ] = False


class DiskSpec(StrictModel):
    name: Annotated[DiskName, _doc("kernel block device name (nvme0n1, sda)")]
    kind: Annotated[Literal["nvme", "ssd", "hdd"], _doc("NVMe, SATA/SAS SSD or rotating disk")]
    role: Annotated[Literal["os", "data", "cache"], _doc("os (holds /), data or cache")] = "data"


# A whole kernel release as `uname -r` prints it (6.8, 6.1.0-18-amd64, 5.14.0-427.13.1.el9_4.x86_64,
# 6.6.31+rpt-rpi-v8), matched from start to end: "6.8; rm -rf /" once passed a start-only match.
KernelRelease = Annotated[
    str,
    StringConstraints(
        pattern=r"^[0-9]{1,4}\.[0-9]{1,4}(\.[0-9]{1,6})?([-+._~][A-Za-z0-9._+~-]{0,64})?$"
    ),
]


# A distribution key or alias as the tables in hardware_db/distros/ spell them (ubuntu-24.04,
# rhel-8, rhel-9); whether it is a known one is decided against those tables, with the known
# ones listed.
DistroName = Annotated[
    str, StringConstraints(pattern=r"^[A-Za-z][A-Za-z0-9]*(-[A-Za-z][A-Za-z0-9]*)*-[0-9][0-9.]*$")
]


DriverDelivery = Literal[
    "host", "nvidia-gpu-operator", "amd-gpu-operator", "distribution-precompiled"
]


class OsSpec(StrictModel):
    kernel: Annotated[
        KernelRelease | None, _doc("target kernel release as `uname -r` prints it")
    ] = None
    page_size_kib: Annotated[
        Literal[4, 16, 64], _doc("kernel page size in KiB (16 and 64 exist on aarch64 only)")
    ] = 4
    # None: a portable bundle, right on every supported distribution (no distro defaults used)
    distro: Annotated[
        DistroName | None,
        _doc(
            "target distribution: the key or an alias of a table in hardware_db/distros/ or the "
            "site catalog's distros/ (`gen schema hardware` lists them); none: portable"
        ),
    ] = None
    # How the GPU kernel driver reaches the node: a fact of the image and the cluster, not of the
    # workload (one training-k8s profile runs on both kinds of fleet), and one `gen detect` reads
    # off a live node, as it reads distro and kernel; hence here, beside them.
    driver: Annotated[
        DriverDelivery,
        _doc(
            "who delivers the GPU kernel driver: host (installed in the image), "
            "nvidia-gpu-operator or amd-gpu-operator (the Operator's driver container after "
            "kubelet starts), distribution-precompiled (the distribution's signed modules)"
        ),
    ] = "host"


class HardwareSpec(StrictModel):
    """A hardware description as written by the user (after merging any reference system)."""

    name: Annotated[
        BundleName | None, _doc("bundle name; defaults to the file name without .yaml")
    ] = None
    description: Annotated[str | None, _doc("free text for the reader")] = None
    source: Annotated[list[str], _doc("where the facts in this file come from")] = []  # noqa: RUF012 -- pydantic copies field defaults
    system: Annotated[
        str | None,
        _doc(
            "a shipped reference system (hardware_db/systems) this file overlays: mappings merge "
            "key by key, nics and disks as a mapping edit the reference list by name"
        ),
    ] = None
    cpu: Annotated[CpuSpec, _doc("the CPUs")]
    memory_gib: Annotated[int, Field(ge=1, le=65536, description="host memory in GiB")]
    numa_nodes: Annotated[
        int | None,
        Field(ge=1, le=64, description="NUMA nodes with CPUs (default: one per socket)"),
    ] = None
    # Linux numbers nodes up to MAX_NUMNODES (1 << CONFIG_NODES_SHIFT: 1024 at most on arm64
    # and x86_64); kubelet's topology manager counts these too (cadvisor GetNodesInfo keeps a
    # node without CPUs), so they decide its 8-node limit.
    memory_only_numa_nodes: Annotated[
        int | None,
        Field(
            ge=0,
            le=1024,
            description=(
                "NUMA nodes without CPUs: GPU memory on Grace (GH200, GB200), CXL memory; "
                "not given: not known (gen detect counts them)"
            ),
        ),
    ] = None
    gpus: Annotated[list[GpuSpec], Field(max_length=16, description="GPU groups by model")] = []  # noqa: RUF012 -- pydantic copies field defaults
    nvswitch: Annotated[
        bool | None, _doc("GPUs connected through NVSwitch (default: 8-GPU HGX baseboards)")
    ] = None
    nics: Annotated[list[NicSpec], Field(max_length=64, description="network interfaces")] = []  # noqa: RUF012 -- pydantic copies field defaults
    disks: Annotated[list[DiskSpec], Field(max_length=256, description="block devices")] = []  # noqa: RUF012 -- pydantic copies field defaults
    os: Annotated[
        OsSpec, Field(default_factory=OsSpec.model_construct, description="the target OS")
    ]


def _edit_schema(item: dict[str, Any], field: str) -> dict[str, Any]:
    """An overlay's edit of one named item: the item's fields, none required, or remove."""
    edit = {key: value for key, value in item.items() if key not in ("required", "title")}
    edit["description"] = f"fields of the {field} item to change, or remove: true to drop it"
    edit["properties"] = {
        **item["properties"],
        "remove": {"const": True, "description": "drop this item from the reference list"},
    }
    return edit


def json_schema() -> dict[str, Any]:
    """The JSON Schema of hardware files, overlays (``system:``) included.

    Pydantic's schema describes the merged result; an overlay may leave out ``cpu`` and
    ``memory_gib`` (and ``cpu.sockets``) and give nics/disks as a mapping of edits by name. So
    those requirements move into an ``else`` branch that applies when ``system`` is absent.
    """
    schema = HardwareSpec.model_json_schema()
    defs = schema["$defs"]
    required = schema.pop("required")
    cpu_required = defs["CpuSpec"].pop("required")
    whole_file: dict[str, Any] = {"required": required, "properties": {"cpu": {}}}
    whole_file["properties"]["cpu"] = {"required": cpu_required}
    for field, item in (("nics", "NicSpec"), ("disks", "DiskSpec")):
        defs[f"{item}Edit"] = _edit_schema(defs[item], field)
        as_list = schema["properties"][field]
        names = defs[item]["properties"]["name"]["pattern"]
        schema["properties"][field] = {
            "description": (
                f"{as_list['description']}: a list, or in an overlay a mapping of name -> edit "
                "of the reference system's list"
            ),
            "anyOf": [
                {key: value for key, value in as_list.items() if key != "description"},
                {
                    "type": "object",
                    "propertyNames": {"pattern": names},
                    "additionalProperties": {"$ref": f"#/$defs/{item}Edit"},
                },
            ],
        }
        whole_file["properties"][field] = {"type": "array"}
    schema["if"] = {"required": ["system"]}
    schema["else"] = whole_file
    return schema
