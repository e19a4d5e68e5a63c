"""Boot arguments that are not owned by another area (IOMMU mode, page zeroing) and the PCIe
ACS state set at boot."""

from __future__ import annotations

from generator.inputs.facts import Facts
from generator.inputs.profile import Profile
from generator.model.layout import ACS_UNIT, PREFLIGHT_UNIT
from generator.model.vendors import GpuVendor
from generator.rules.base import Output, acs_off, kernel_arg, note, rule, service

# AMD Instinct's host settings follow "AMD Instinct MI300X system optimization" (ROCm/amdgpu-docs,
# docs/system-optimization/mi300x.rst, commit 67902e2), cited by section.
AMD_GUIDE = "AMD's MI300X system optimization guide"


# AMD's MI300A guide (ROCm/amdgpu-docs docs/system-optimization/mi300a.rst, commit dbebd48):
# "System BIOS settings are preconfigured for optimal performance from the platform vendor",
# "IOMMU is turned off by default" (acpidump shows no IVRS or DMAR table), "CPU core states and
# C-states: The system BIOS handles these settings for the MI300A".
MI300A_GUIDE = "AMD's MI300A system optimization guide"


def only_apus(facts: Facts) -> bool:
    """Every GPU here is an APU (catalog form factor apu): the MI300A guide, not MI300X's."""
    return facts.has_gpus and all(group.model.form_factor == "apu" for group in facts.gpus)


def host_cpu(facts: Facts) -> str:
    """``2x AMD EPYC 9575F``: the CPU the firmware advice is read against (tuning-review-4 D-A3:
    the MI300X guide's list is for EPYC 9004, and an MI355X box may have EPYC 9005)."""
    name = facts.cpu.model.name if facts.cpu.model else f"{facts.cpu.vendor} CPU (model not given)"
    return f"{facts.cpu.sockets}x {name}"


def amd_guides(facts: Facts) -> str:
    """The AMD pages the host settings follow, one per model's ``host_guide`` (catalog), the
    MI300X guide for a model without one: MI325X and MI355X have their own system acceptance
    pages (ROCm/system-acceptance-docs docs/gpus/), which differ from the MI300X guide
    (tuning-review-4 D-A3)."""
    guides = [
        group.model.host_guide or AMD_GUIDE
        for group in facts.gpus
        if group.model.vendor == GpuVendor.AMD
    ]
    return " and ".join(dict.fromkeys(guides)) or AMD_GUIDE


def acceptance_guided(facts: Facts) -> bool:
    """Every AMD GPU here follows a system acceptance page that requires pci=bfsort."""
    groups = [group for group in facts.gpus if group.model.vendor == GpuVendor.AMD]
    return bool(groups) and all(group.model.pci_bfsort for group in groups)


def guide_section(facts: Facts) -> str:
    """Where the guide says it: the acceptance pages' "Kernel parameters", the optimization
    guides' "GRUB settings"."""
    return "Kernel parameters" if acceptance_guided(facts) else "GRUB settings"


def amd_gpus(facts: Facts) -> str:
    """``8x MI300X``: the machine's AMD GPUs, "" when it has none."""
    return ", ".join(
        f"{group.count}x {group.model.key}"
        for group in facts.gpus
        if group.model.vendor == GpuVendor.AMD
    )


@rule("boot.iommu-passthrough", vendors=(GpuVendor.NVIDIA, GpuVendor.AMD))
def iommu_passthrough(facts: Facts, profile: Profile) -> Output:
    """IOMMU passthrough: for GPUDirect (NVIDIA GPUs with RDMA NICs), and with any AMD Instinct.

    AMD's MI300X guide ("GRUB settings") recommends IOMMU support in pass-through mode on every
    Instinct host, ``iommu=pt`` on AMD CPUs and ``intel_iommu=on iommu=pt`` on Intel ones; with
    the IOMMU off the kernel drops X2APIC and sees at most 255 CPUs ("IOMMU configuration --
    systems with 256 CPU threads"). NVIDIA's condition (RDMA NICs) is NVIDIA's; each vendor's
    GPUs follow their own guide.
    """
    if (amd := amd_gpus(facts)) and facts.cpu.arch == "x86_64":
        why = (
            f"{amd}: {amd_guides(facts)}, {guide_section(facts)}, recommends IOMMU support in "
            "pass-through mode "
            "(no DMA translation for the GPUs); with the IOMMU off the kernel drops X2APIC and "
            "sees at most 255 CPUs (IOMMU configuration, 256 CPU threads)"
        )
        if only_apus(facts):
            why = (
                f"{amd}: {MI300A_GUIDE} says the IOMMU is off by default on these platforms "
                "(no IVRS or DMAR ACPI table), where iommu=pt changes nothing; kept so that a "
                "platform that does enable it passes the GPUs through untranslated, as "
                f"{AMD_GUIDE} asks of discrete Instinct GPUs"
            )
    elif facts.has_nvidia_gpus and facts.rdma_nics:
        why = "GPUDirect RDMA: passthrough removes IOMMU translation from GPU<->NIC DMA"
    else:
        return
    if facts.cpu.arch == "aarch64":
        yield kernel_arg("iommu.passthrough", 1, why + " (the arm64 SMMU form of iommu=pt)")
        return
    yield kernel_arg("iommu", "pt", why)
    if facts.cpu.vendor == "intel":
        yield kernel_arg(
            "intel_iommu",
            "on",
            "Intel VT-d is off unless asked for; on + pt keeps it usable for devices that need it"
            + (f" ({AMD_GUIDE}, GRUB settings: intel_iommu=on iommu=pt)" if amd else ""),
        )


@rule("boot.pci-realloc", vendors=(GpuVendor.AMD,))
def pci_realloc(facts: Facts, profile: Profile) -> Output:
    """Keep the BIOS's PCI resource assignment on AMD Instinct hosts (pci=realloc=off).

    AMD's MI300X guide, "GRUB settings": with it Linux "is able to unambiguously detect all GPUs"
    of the system, as it disables the automatic reallocation of PCI resources, which is used
    when the BIOS has not allocated the SR-IOV BARs. NVIDIA's guides do not ask for it.
    """
    if not facts.has_gpus:
        return
    why = (
        f"{amd_gpus(facts)}: {MI300A_GUIDE if only_apus(facts) else amd_guides(facts)}, "
        f"{guide_section(facts)}, recommends pci=realloc=off so that "
        "the kernel keeps the BIOS's PCI resource assignment and detects every GPU (automatic "
        "reallocation is for SR-IOV BARs the BIOS left unassigned)"
    )
    if not acceptance_guided(facts):
        yield kernel_arg("pci", "realloc=off", why)
        return
    # One pci= word with both options: "pci=option[,option...]" (Documentation/admin-guide/
    # kernel-parameters.txt); pci_setup() (drivers/pci/pci.c) splits the value at commas and
    # hands "bfsort" to the x86 pcibios_setup() (arch/x86/pci/common.c, pci_bf_sort).
    yield kernel_arg(
        "pci",
        "realloc=off,bfsort",
        why + "; the same pages require pci=bfsort (breadth-first PCI enumeration, a "
        "predictable device order, so that a job does not reach an unintended GPU over the "
        "network), which the MI300X guide does not ask for",
    )
    yield note(
        f"{amd_guides(facts)}: modprobe.blacklist=amdgpu, in the same list, is marked optional "
        "(for a GPU that may not be ready at boot, e.g. during a firmware update) and then "
        "needs amdgpu loaded after boot by the site: not set, as the GPU unit, the RCCL jobs "
        "and AMD's device plugin expect the driver loaded; numa_balancing=disable is set as "
        "the sysctl kernel.numa_balancing=0 (memory.numa-balancing)"
    )


# AMD's BIOS list common to the Instinct MI3xx line (ROCm/system-acceptance-docs
# docs/common/bios-settings.md, 23e7312): required, without virtualization, and for performance.
ACCEPTANCE_BIOS = (
    "Above 4G decoding enabled, NUMA nodes per socket NPS1 (never NPS0), memory interleaving, "
    "PCIe ten-bit tags and ARI enabled; without virtualization SR-IOV and ACS disabled (then "
    "pci=realloc=off is required) and the IOMMU kept enabled; for performance ASPM disabled, "
    "determinism slider Power, cTDP and package power limit at the CPU's maximum, xGMI at "
    "x16 32 Gbps, GMI folding disabled, APBDIS 1, DF C-states disabled, SOC P-state P0, TSME "
    "disabled, SMT control Disable where the work is compute-bound"
)


def cpu_series_clause(facts: Facts) -> str:
    """Whether the MI300X guide's EPYC 9004 BIOS list is this host's CPU generation: said from
    the CPU model's ``series`` (catalog), never assumed (tuning-review-4 D-A3)."""
    series = facts.cpu.model.series if facts.cpu.model else None
    if series == "EPYC 9004":
        return "written for EPYC 9004 hosts, this host's series"
    return (
        f"written for EPYC 9004 hosts; this host's {series or 'CPU series (not in the catalog)'} "
        "takes the same options where its BIOS has them, and its platform guide where not"
    )


def low_latency_fabric(facts: Facts, profile: Profile) -> bool:
    """Multi-node work over compute RDMA NICs, with the C-state knob not set by the profile
    itself (only inherited or goldtune's default): the case AMD's C2 advice names."""
    own_choice = profile.origins.get("cstates") == profile.name
    return profile.multinode and bool(_compute_rdma_nics(facts)) and not own_choice


@rule("boot.amd-firmware", vendors=(GpuVendor.AMD,))
def amd_firmware(facts: Facts, profile: Profile) -> Output:
    """Name what AMD's guide for these GPUs asks of the firmware, and decide the C2 state.

    APUs follow their own guide (MI300A_GUIDE): BIOS preconfigured by the platform vendor, IOMMU
    off by default, C-states handled by the BIOS; the MI300X list would be wrong advice there.
    MI325X and MI355X follow their system acceptance pages, whose BIOS list is the MI3xx one
    (ACCEPTANCE_BIOS) for EPYC 9004 and 9005 hosts; MI300X its system optimization guide's
    "System BIOS settings", written for EPYC 9004. Each note names the CPU the host has.

    C-states: both guides disable the power-gated C2 state (``cpupower idle-set -d 2``) for
    high-performance, low-latency networks (mi300x.rst "CPU core states"; system-acceptance
    docs/common/os-tuning.md, "C-states Configuration": "particularly important for
    high-performance networking", the kernel command line preferred). A multi-node profile
    with compute RDMA NICs is that case (tuning-review-4 D-A1): processor.max_cstate=1 keeps the
    ACPI idle driver at C1, unless the profile itself set cstates, which then stands.
    """
    if not facts.has_gpus:
        return
    if only_apus(facts):
        yield note(
            f"{amd_gpus(facts)}: {MI300A_GUIDE}: the system BIOS settings are preconfigured by "
            "the platform vendor and need no change (ask the vendor, not this bundle); the "
            "IOMMU is off by default: confirm that 'acpidump | grep IVRS' and 'acpidump | grep "
            "DMAR' print nothing; C-states are handled by the system BIOS, not the OS"
        )
        return
    guide = amd_guides(facts)
    if acceptance_guided(facts):
        yield note(
            f"{amd_gpus(facts)} on {host_cpu(facts)}: {guide}, BIOS settings (AMD's list for "
            "the Instinct MI3xx line on AMD EPYC hosts, 9004 or 9005 series), set in firmware, "
            f"not by this bundle: {ACCEPTANCE_BIOS}"
        )
    else:
        yield note(
            f"{amd_gpus(facts)} on {host_cpu(facts)}: {guide}, System BIOS settings "
            f"({cpu_series_clause(facts)}), set in "
            "firmware, not by this bundle: Above 4G decoding, SR-IOV and IOMMU enabled, NUMA "
            "nodes per socket Auto (NPS1), APBDIS 1 (no data-fabric P-states), determinism "
            "slider Power, TSME disabled, SMT control Disable where the work is compute-bound"
        )
    if profile.cstates == "shallow":
        return
    section = "C-states configuration" if acceptance_guided(facts) else "CPU core states"
    c2 = (
        f"{amd_gpus(facts)}: {guide} ({section}) disables the power-gated C2 state (cpupower "
        "idle-set -d 2) for high-performance, low-latency networks"
    )
    if low_latency_fabric(facts, profile):
        yield kernel_arg(
            "processor.max_cstate",
            1,
            f"{c2}, as this multi-node profile's RDMA fabric is; the kernel command line, "
            "which the guide prefers, keeps the ACPI idle driver at C1 (the profile's own "
            "cstates: default would keep C2)",
        )
        return
    yield note(
        f"{c2}; this profile keeps the default C-states, and cstates: shallow follows AMD's "
        "advice (processor.max_cstate=1)"
    )


@rule("boot.init-on-alloc", vendors=(GpuVendor.NVIDIA,))
def init_on_alloc(facts: Facts, profile: Profile) -> Output:
    """Skip zeroing every allocated page on GPU servers (multi-GB pinned host buffers).

    NVIDIA's nvidia-base tuned profile, which every NVIDIA profile includes, sets
    ``init_on_alloc=0`` (NVIDIA/nvidia-tuned profiles/common/nvidia-base/tuned.conf,
    ``[bootloader] cmdline_init_on_alloc``), and the Grace benchmarking guide asks for it
    ("Platform Configuration"). It gives up a hardening default (Debian's and Ubuntu's kernels
    are built with CONFIG_INIT_ON_ALLOC_DEFAULT_ON=y, hardware_db/distros/): the profile's
    ``init_on_alloc: keep`` leaves the kernel's own default.
    """
    if not facts.has_gpus:
        return
    if profile.init_on_alloc == "keep":
        yield note(
            "init_on_alloc left at the kernel's build default (the profile says init_on_alloc: "
            "keep): pages stay zeroed on allocation, a hardening default, at some host-memory "
            "bandwidth for multi-GB buffers"
        )
        return
    yield kernel_arg(
        "init_on_alloc",
        0,
        "distribution kernels zero each page on allocation, which costs measurable bandwidth "
        "for multi-GB host buffers (NVIDIA's nvidia-base tuned profile sets the same); "
        "trade-off: gives up a hardening default (profile knob init_on_alloc: keep)",
    )


def acs_wanted(facts: Facts, profile: Profile) -> bool:
    """ACS off: as the pcie_acs knob says, else for training on a multi-GPU machine, whose
    collectives move GPU<->GPU and GPU<->NIC traffic through the PCIe switches. Not by default
    on Grace: NVIDIA's gb200 profiles include nvidia-base, not nvidia-acs-disable (its GPUs
    reach each other over NVLink and their CPU over NVLink-C2C, not through PCIe switches)."""
    if profile.pcie_acs is not None:
        return profile.pcie_acs == "disable-p2p" and facts.has_gpus
    return profile.intent == "training" and facts.gpu_count > 1 and not facts.cpu.is_grace


def _compute_rdma_nics(facts: Facts) -> list[str]:
    return [nic.name for nic in facts.rdma_nics if nic.role == "compute"]


# AMD's own instruction for ACS: "Single-node network configuration for AMD Instinct
# accelerators" (ROCm/gpu-cluster-networking docs/how-to/single-node-config.rst, commit 0d26d8c,
# instinct.docs.amd.com/projects/gpu-cluster-networking), prerequisites: "Disable PCI ACS (access
# control services). Run the disable-acs-script on all PCIe devices supporting it. This must be
# done after each reboot", and again under "Vendor-specific NIC tuning": "Ensure ACS is disabled".
AMD_ACS_GUIDE = (
    "AMD's single-node network configuration guide for Instinct (gpu-cluster-networking, "
    "prerequisites: disable PCI ACS after each reboot)"
)
NVIDIA_ACS_GUIDE = "NCCL troubleshooting guide"


def acs_guide(facts: Facts) -> str:
    """The vendor guide the ACS decision follows: AMD's for a machine with AMD GPUs only."""
    return AMD_ACS_GUIDE if amd_gpus(facts) and not facts.has_nvidia_gpus else NVIDIA_ACS_GUIDE


@rule("boot.acs", vendors=(GpuVendor.NVIDIA, GpuVendor.AMD))
def acs(facts: Facts, profile: Profile) -> Output:
    """PCIe ACS off above GPUs and compute RDMA NICs, at boot, for GPU peer-to-peer traffic.

    With ACS source validation and P2P request redirect on, a switch sends every peer-to-peer
    transfer up to the root complex: NCCL's troubleshooting guide ("PCI Access Control Services
    (ACS)", docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting.html) says P2P then
    "hangs or is much slower" and to disable ACS on bare metal (``setpci -s BDF
    ECAP_ACS+0x6.w=0000``); NVIDIA ships it as the nvidia-acs-disable TuneD profile and DGX OS
    package (peer-systems.md 2.3, 2.6); OCI measured all-reduce bus bandwidth 360 -> 426 GB/s
    after correcting ACS. AMD Instinct hosts follow AMD's own guide (AMD_ACS_GUIDE above), which
    asks the same for RCCL's GPU and NIC peer traffic, at every boot, whatever the BIOS says. The
    fixed script pcie-acs finds the ports on the machine above the GPUs of the plan's vendors
    (gpu-vendor data lines; the hardware description has no PCI paths) and writes nothing in a
    VM, where ACS isolates passed-through devices, nor above a device the IOMMU translates for:
    the same guards for either vendor. The decision (training on more than one GPU, or the
    pcie_acs knob) is the same for both vendors, as both guides tie it to collective traffic.
    """
    guide = acs_guide(facts)
    if not acs_wanted(facts, profile):
        if facts.gpu_count > 1:
            if profile.pcie_acs == "keep":
                why = "the profile says pcie_acs: keep"
            elif facts.cpu.is_grace:
                why = (
                    "NVIDIA's Grace profiles (gb200) leave it on too, as the GPUs talk over "
                    "NVLink and NVLink-C2C, not through PCIe switches (pcie_acs: disable-p2p "
                    "turns it off)"
                )
            else:
                why = (
                    "the default turns it off for training only, whose collectives move data "
                    "between every GPU and NIC; serving with tensor parallelism across GPUs "
                    "gains too: pcie_acs: disable-p2p turns it off"
                )
            vendor_practice = (
                f"{guide} disables it"
                if guide == AMD_ACS_GUIDE
                else "NVIDIA's h100 profiles turn it off "
                "(nvidia-acs-disable, pci=disable_acs_redir=)"
            )
            yield note(f"PCIe ACS left on: {why}; {vendor_practice}")
        return
    nics = _compute_rdma_nics(facts)
    origin = (
        "the profile says pcie_acs: disable-p2p"
        if profile.pcie_acs
        else f"{profile.intent} on {facts.gpu_count} GPUs"
    )
    which = "AMD" if guide == AMD_ACS_GUIDE else "NVIDIA"
    why = (
        f"{origin}: with ACS on, PCIe switches redirect GPU peer-to-peer traffic through the "
        f"root complex ({guide}); pcie-acs clears ACS on the root and "
        f"downstream ports above every {which} GPU, on bare metal only, where the IOMMU is off "
        "or in passthrough"
    )
    yield acs_off("gpus", why)
    for name in nics:
        yield acs_off(
            f"nic {name}",
            f"GPUDirect RDMA between {name} and the GPUs crosses the same PCIe switches: "
            "ACS off on the ports above it too",
        )
    yield service(ACS_UNIT, "enable", "turns PCIe ACS off at boot, before the workloads start")
    yield note(
        "pci=disable_acs_redir= (NVIDIA's nvidia-acs-disable profile) is not used: it names "
        "devices by PCI address, which the hardware description does not have, and clears only "
        "the redirect bits; the boot script finds the ports on the machine instead"
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


@rule("boot.preflight")
def preflight(facts: Facts, profile: Profile) -> Output:
    """Check at every boot that the node is the machine the hardware file describes.

    A bundle is only as right as its hardware file, and one image boots on many machines: an
    interface renamed, a GPU fallen off the bus, a NUMA layout changed in the BIOS make its values
    wrong for that node. The fixed script preflight compares each claim the plan depends on with
    sysfs (the plan's claims, generator/plan/claims.py), fails its unit on a mismatch and tells the
    IRQ and GPU units which settings to skip.
    """
    yield service(
        PREFLIGHT_UNIT,
        "enable",
        "checks at boot that this node matches the hardware file (CPUs, NUMA, GPUs, NICs, disks); "
        "a mismatch fails the unit and the settings made from that claim are skipped",
        # install.sh installs it; the cloud-init user-data has no room for it (layout.py)
        optional=True,
    )
