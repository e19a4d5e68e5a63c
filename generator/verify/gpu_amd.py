"""The live checks of AMD GPU actions: the collector's ``gpu-amd`` section against the plan.

The collector reads what amd-smi reads and sets (templates/scripts/collect ``collect_gpu_amd``):
per GPU the driver bound to it, the hwmon ``power1_cap`` and ``power1_cap_default`` in
microwatts (amdgpu's hwmon, Documentation/gpu/amdgpu/thermal.rst; amd-smi divides them by 10^6,
amdsmi_cli ``convert_SI_unit(..., MICRO)``), and
``current_compute_partition`` / ``current_memory_partition`` of the PCI device. The verdicts are
the NVIDIA checks' (generator/verify/live.py ``check_gpu``): a power limit is met within 1 W, of
the default when given in %; a mode is met when every GPU has it; not applicable where no GPU has
the file; an action this goldtune has no reading for is not judged, never passed.
"""

from __future__ import annotations

from generator.model.probes import Section
from generator.model.setting import Setting
from generator.model.vendors import GPU_VENDORS, GpuVendor
from generator.verify.records import AmdGpu, amd_gpu
from generator.verify.snapshot import Snapshot, is_absent
from generator.verify.verdicts import Check, Verdict, check_of

SECTION = Section(GPU_VENDORS[GpuVendor.AMD].collector_section)
DRIVERS = GPU_VENDORS[GpuVendor.AMD].driver_module_prefixes
NOT_COLLECTED = "not in the snapshot (was it collected with this bundle's collector?)"
MICROWATTS = 1_000_000
# The partition actions, each read from its own field of the record (mode_field).
MODE_ACTIONS = frozenset({"compute-partition", "memory-partition"})


def amd_gpus(snapshot: Snapshot) -> list[AmdGpu]:
    """Each GPU record of the gpu-amd section (its ``tool`` record says whether amd-smi is)."""
    return [
        amd_gpu(address, text) for address, text in snapshot.section(SECTION) if address != "tool"
    ]


def driven(gpu: AmdGpu) -> bool:
    return gpu.driver.startswith(DRIVERS)


def mode_field(gpu: AmdGpu, action: str) -> str:
    """The live value of a partition action."""
    if action == "compute-partition":
        return gpu.current_compute_partition
    return gpu.current_memory_partition


def read_field(gpu: AmdGpu, action: str) -> str:
    """The field an action is judged from: amdgpu's power1_cap, or its partition file."""
    return gpu.power1_cap if action == "power-limit" else mode_field(gpu, action)


def power_actual(gpu: AmdGpu, value: str) -> tuple[str, bool]:
    """The cap now in W, and whether it is the planned one (W, or % of the default) within 1 W."""
    cap, default = gpu.power1_cap, gpu.power1_cap_default
    if not cap.isdigit():
        return f"power1_cap {cap}", False
    watts = int(cap) / MICROWATTS
    if value.endswith("%"):
        if not default.isdigit():
            return f"{watts:g} W (default {default})", False
        target = float(value[:-1]) * int(default) / MICROWATTS / 100
    else:
        target = float(value)
    return f"{watts:g} W", abs(watts - target) <= 1


def mode_actual(gpu: AmdGpu, action: str, value: str) -> tuple[str, bool]:
    found = mode_field(gpu, action)
    return found, found.upper() == value.upper()


def check_gpu_amd(setting: Setting, snapshot: Snapshot) -> Check:
    tool = snapshot.value(SECTION, "tool")
    if tool is None:
        return check_of(setting, "?", Verdict.MISSING, NOT_COLLECTED)
    gpus = amd_gpus(snapshot)
    if not gpus:
        return check_of(setting, "no GPU", Verdict.NOT_APPLICABLE, "no AMD GPU on the PCI bus")
    idle = [gpu.address for gpu in gpus if not driven(gpu)]
    if idle:
        text = ", ".join(idle[:4])
        return check_of(setting, f"no driver on {text}", Verdict.DIFFERS, "amdgpu is not bound")
    if setting.key == "power-limit":
        results = [power_actual(gpu, setting.value) for gpu in gpus]
    elif setting.key in MODE_ACTIONS:
        results = [mode_actual(gpu, setting.key, setting.value) for gpu in gpus]
    else:
        reason = f"this goldtune has no reading of {setting.key} on AMD GPUs"
        return check_of(setting, "not read", Verdict.NOT_JUDGED, reason)
    pairs = zip(gpus, results, strict=True)
    text = "; ".join(f"GPU {gpu.address}: {actual}" for gpu, (actual, _) in pairs)
    if all(is_absent(read_field(gpu, setting.key)) for gpu in gpus):
        reason = f"these GPUs have no {setting.key} (amdgpu exposes no file for it)"
        return check_of(setting, text, Verdict.NOT_APPLICABLE, reason)
    return check_of(setting, text, Verdict.OK if all(ok for _, ok in results) else Verdict.DIFFERS)
