"""NVIDIA's two kernel module flavours: a module option the open flavour does not read.

The open and the proprietary GPU kernel modules have the same module names (nvidia, nvidia-uvm,
nvidia-modeset, nvidia-drm, nvidia-peermem: NVIDIA's driver installation guide, "Kernel
Modules"), so a blacklist or a load of one of them reads the same for both. Their options are
not: the open nvidia.ko declares as module parameters only the NVreg_ entries of
NVIDIA/open-gpu-kernel-modules@df1c9a3d (595.45.04) kernel-open/nvidia/nv-reg.h
(NV_DEFINE_REG_ENTRY and kin; RmProfilingAdminOnly under its parameter name
RestrictProfilingToAdminUsers), and ignores OpenRmEnableUnsupportedGpus (kept "for backwards
compatibility"). The proprietary flavour's parameter list is not published as source, so only
the open side is checked: on GPUs that need the open modules (hardware_db kernel_modules: open,
Grace Hopper and Blackwell platforms) an nvidia option outside that list is one only the other
flavour could read, and the plan refuses it.
"""

from __future__ import annotations

from generator.inputs.facts import Facts
from generator.model.kinds import Kind
from generator.model.setting import Setting

OPEN_NVIDIA_PARAMS = frozenset(
    f"NVreg_{name}"
    for name in (
        "CoherentGPUMemoryMode",
        "CreateImexChannel0",
        "DeviceFileGID",
        "DeviceFileMode",
        "DeviceFileUID",
        "DmaRemapPeerMmio",
        "DynamicPowerManagement",
        "DynamicPowerManagementVideoMemoryThreshold",
        "EnableDbgBreakpoint",
        "EnableGpuFirmware",
        "EnableGpuFirmwareLogs",
        "EnableMSI",
        "EnableNonblockingOpen",
        "EnablePCIERelaxedOrderingMode",
        "EnablePCIeGen3",
        "EnableResizableBar",
        "EnableS0ixPowerManagement",
        "EnableStreamMemOPs",
        "EnableSystemMemoryPools",
        "EnableUserNUMAManagement",
        "ExcludeAllGpus",
        "ExcludedGpus",
        "GpuBlacklist",
        "GpuInitOnProbe",
        "GrdmaPciTopoCheckOverride",
        "IgnoreMMIOCheck",
        "ImexChannelCount",
        "InitializeSystemMemoryAllocations",
        "KMallocHeapMaxSize",
        "MemoryPoolSize",
        "ModifyDeviceFiles",
        "NvLinkDisable",
        "PreserveVideoMemoryAllocations",
        "RegisterPCIDriver",
        "RegisterPlatformDeviceDriver",
        "RegistryDwords",
        "RegistryDwordsPerDevice",
        "ResmanDebugLevel",
        "RestrictProfilingToAdminUsers",
        "RmLogonRC",
        "RmMsg",
        "RmNvlinkBandwidth",
        "RmNvlinkBandwidthLinkCount",
        "S0ixPowerManagementVideoMemoryThreshold",
        "TegraGpuPgMask",
        "TemporaryFilePath",
        "UseKernelSuspendNotifiers",
        "UsePageAttributeTable",
        "VMallocHeapMaxSize",
    )
)
IGNORED_BY_OPEN = frozenset({"NVreg_OpenRmEnableUnsupportedGpus"})


def open_module_models(facts: Facts) -> list[str]:
    """The GPU models here that only the open GPU kernel modules drive (hardware_db)."""
    return sorted({g.model.key for g in facts.gpus if g.model.kernel_modules == "open"})


def check_module_flavour(setting: Setting, facts: Facts) -> str | None:
    """An option of the nvidia module that the open flavour does not read, on GPUs that need it."""
    if setting.kind != Kind.MODPROBE or not setting.key.startswith("options nvidia "):
        return None
    param = setting.key.split()[2]
    if param in OPEN_NVIDIA_PARAMS and param not in IGNORED_BY_OPEN:
        return None
    if not (models := open_module_models(facts)):
        return None
    return (
        f"{setting.key}: the open GPU kernel modules, which {', '.join(models)} need, do not "
        "read it (open-gpu-kernel-modules kernel-open/nvidia/nv-reg.h)"
    )
