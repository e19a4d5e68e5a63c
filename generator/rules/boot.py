"""Boot arguments that are not owned by another area: IOMMU mode, page zeroing."""

from __future__ import annotations

from generator.inputs.facts import Facts
from generator.inputs.profile import Profile
from generator.rules.base import Output, kernel_arg, note, rule


@rule("boot.iommu-passthrough")
def iommu_passthrough(facts: Facts, profile: Profile) -> Output:
    """IOMMU passthrough for GPUDirect: GPUs with RDMA NICs only."""
    if not (facts.has_gpus and facts.rdma_nics):
        return
    why = "GPUDirect RDMA: passthrough removes IOMMU translation from GPU<->NIC DMA"
    if facts.cpu.arch == "aarch64":
        yield kernel_arg("iommu.passthrough", 1, why + " (the arm64 SMMU form of iommu=pt)")
        return
    yield kernel_arg("iommu", "pt", why)
    if facts.cpu.vendor == "intel":
        yield kernel_arg(
            "intel_iommu",
            "on",
            "Intel VT-d is off unless asked for; on + pt keeps it usable for devices that need it",
        )


@rule("boot.init-on-alloc")
def init_on_alloc(facts: Facts, profile: Profile) -> Output:
    """Skip zeroing every allocated page on GPU servers (multi-GB pinned host buffers)."""
    if not facts.has_gpus:
        return
    yield kernel_arg(
        "init_on_alloc",
        0,
        "distribution kernels zero each page on allocation, which costs measurable bandwidth "
        "for multi-GB host buffers (NVIDIA's base profile does the same); trade-off: gives up "
        "a hardening default",
    )


@rule("boot.acs")
def acs(facts: Facts, profile: Profile) -> Output:
    """Say why PCIe ACS is left alone even though it slows GPU peer-to-peer traffic."""
    if facts.gpu_count > 1 and facts.rdma_nics:
        yield note(
            "PCIe ACS redirect is left enabled: the pci=disable_acs_redir= device list is "
            "firmware- and slot-specific; set it per platform after measuring all-reduce bandwidth"
        )


@rule("boot.acpi-power-meter")
def acpi_power_meter(facts: Facts, profile: Profile) -> Output:
    """Expose the Grace platform's ACPI power cap, as NVIDIA's Grace guide asks.

    NVIDIA/grace-cpu-benchmarking-guide src/platform/index.md recommends
    acpi_power_meter.force_cap_on=y ("Enable ACPI power meter and with power capping") on every
    Grace platform; drivers/hwmon/acpi_power_meter.c hides the power1_cap controls unless this
    parameter or a DMI quirk allows them. Keyed on Grace itself, not on aarch64: Ampere and
    Graviton servers are aarch64 too, and NVIDIA's guide does not speak for them.
    """
    if not facts.cpu.is_grace:
        return
    yield kernel_arg(
        "acpi_power_meter.force_cap_on",
        "y",
        "NVIDIA's Grace guide: the ACPI power meter then offers its power cap "
        "(power1_cap), which the driver otherwise hides as unsafe; no cap is set here",
    )
