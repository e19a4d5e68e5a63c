"""The GPU vendors goldtune knows: one closed vocabulary, and one row of data per vendor.

Everything that differs between GPU vendors and is not a rule lives in that vendor's row: its
PCI vendor id (which the fixed scripts read from their data files, never from their own text),
the tool that reads and sets its GPUs, the fixed script that applies the plan's GPU actions at
boot, the collector section that reads its GPUs back, the kernel modules its driver brings, and
the units its packages install. Rules say which vendors they apply to beside the rule
(``@rule(..., vendors=(GpuVendor.NVIDIA,))``); the catalog's GPU entries name their vendor.

Adding a vendor: a member here and its row in ``GPU_VENDORS`` (README, "Adding a GPU vendor").
"""

# No `from __future__ import annotations`: a NamedTuple turns each string annotation into
# a compiled ForwardRef, ~0.15 ms a record at import (bench/bench.py's cold gen).
from collections.abc import Iterable, Mapping
from enum import StrEnum
from types import MappingProxyType
from typing import NamedTuple


class GpuVendor(StrEnum):
    """A GPU vendor, as ``hardware_db/gpus/*.yaml`` spells it (``vendor: nvidia``)."""

    NVIDIA = "nvidia"
    AMD = "amd"


class VendorSpec(NamedTuple):
    """What goldtune knows of one GPU vendor, as data."""

    vendor: str  # a GpuVendor (a test may add a row of its own)
    name: str  # as people write it: NVIDIA
    pci_vendor_id: int  # PCI-SIG vendor id (pci.ids): 0x10de
    smi_tool: str  # the command that reads and sets the GPUs: nvidia-smi
    setup_script: str  # the fixed script (templates/scripts/) applying gpu actions at boot
    collector_section: str  # the collector's whole section that reads the GPUs back
    driver_module_prefixes: tuple[str, ...]  # modules the driver brings, not the kernel
    # the units of the vendor's packages that a distribution table describes
    # (hardware_db/distros/*.yaml, the section named after the vendor)
    packaged_units: tuple[str, ...]
    # GPU actions only this vendor's GPUs have: a plan with one is read back from this vendor's
    # collector section whatever vendor its GPUs are (generator/model/collect_data.py)
    own_actions: frozenset[str] = frozenset()

    @property
    def pci_hex(self) -> str:
        """The id as ``lspci -nn`` prints it, before the device id: ``10de``."""
        return f"{self.pci_vendor_id:04x}"

    @property
    def sysfs_id(self) -> str:
        """The id as /sys/bus/pci/devices/*/vendor holds it (drivers/pci/pci-sysfs.c:
        ``pci_config_attr(vendor, "0x%04x\\n")``, lowercase), as the fixed scripts compare it."""
        return f"0x{self.pci_vendor_id:04x}"


GPU_VENDORS: Mapping[str, VendorSpec] = MappingProxyType(
    {
        GpuVendor.NVIDIA: VendorSpec(
            GpuVendor.NVIDIA,
            "NVIDIA",
            0x10DE,
            smi_tool="nvidia-smi",
            setup_script="gpu-setup",
            collector_section="gpu",
            driver_module_prefixes=("nvidia",),
            packaged_units=("persistenced", "fabricmanager"),
        ),
        GpuVendor.AMD: VendorSpec(
            GpuVendor.AMD,
            "AMD",
            0x1002,
            smi_tool="amd-smi",
            setup_script="gpu-setup-amd",
            collector_section="gpu-amd",
            driver_module_prefixes=("amdgpu",),
            packaged_units=(),
            # amd-smi set --compute-partition, --memory-partition
            own_actions=frozenset({"compute-partition", "memory-partition"}),
        ),
    }
)


def vendor_table() -> Mapping[str, VendorSpec]:
    """The rows in use: ``GPU_VENDORS``, read at each call so that a test can add a row."""
    return GPU_VENDORS


def vendor_spec(vendor: str) -> VendorSpec:
    """The row of one vendor; KeyError for a vendor the table does not hold."""
    return vendor_table()[vendor]


def pci_vendor_ids(vendors: Iterable[str] | None = None) -> tuple[str, ...]:
    """The sysfs vendor ids (``0x10de``) of ``vendors``, or of every vendor, in table order."""
    wanted = None if vendors is None else set(vendors)
    return tuple(
        spec.sysfs_id for spec in vendor_table().values() if wanted is None or spec.vendor in wanted
    )


# NVIDIA's row, for the readers that only NVIDIA has today (detect's NVML and nvidia-smi, the
# collector's nvidia-smi fields in verify).
NVIDIA = GPU_VENDORS[GpuVendor.NVIDIA]


# NVSwitch PCI functions: LR10 (A100 generation) 0x1ae8, 0x1af0-0x1aff; LS10 (H100 generation)
# 0x22a0-0x22af. Source: open-gpu-kernel-modules src/common/nvswitch/kernel/nvswitch.c device
# tables [P] (research/hardware-facts.md A1). Blackwell NVSwitches have no PCI function there.
# gen detect and the preflight unit (its data file) find them by these ids.
NVSWITCH_DEVICE_IDS = frozenset(
    ["1ae8", *(f"1af{d:x}" for d in range(16)), *(f"22a{d:x}" for d in range(16))]
)
