"""The gpu area's rules, one module per concept: the device and its driver (``driver``), sharing
a GPU (``sharing``), the fabric between GPUs (``fabric``). ``generator.rules.REGISTRY`` lists them
as ``gpu.<rule>``, in the order the plan runs them."""

from __future__ import annotations

from generator.rules.gpu.amd import amd_clocks, amd_environment
from generator.rules.gpu.driver import (
    boot_unit,
    clocks,
    compute_mode,
    dcgm,
    ecc,
    nouveau,
    persistence,
    power_limit,
    vendor_profiles,
)
from generator.rules.gpu.fabric import fabric_manager, imex, nvlink_subnet_manager, peermem
from generator.rules.gpu.sharing import amd_partitions, mig, mps

__all__ = [
    "amd_clocks",
    "amd_environment",
    "amd_partitions",
    "boot_unit",
    "clocks",
    "compute_mode",
    "dcgm",
    "ecc",
    "fabric_manager",
    "imex",
    "mig",
    "mps",
    "nouveau",
    "nvlink_subnet_manager",
    "peermem",
    "persistence",
    "power_limit",
    "vendor_profiles",
]
