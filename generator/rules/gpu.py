"""GPU and driver: nouveau, persistence, ECC, compute mode, clocks, power, MIG, fabric."""

from __future__ import annotations

from generator.inputs.facts import Facts, GpuGroup
from generator.model.layout import GPU_UNIT
from generator.inputs.profile import Profile
from generator.rules.base import (
    Output, blacklist, gpu_action, kernel_arg, load_module, module_option, note, rule, service,
)


def _models(facts: Facts) -> str:
    return ", ".join(f"{group.count}x {group.model.key}" for group in facts.gpus)


@rule("gpu.nouveau")
def nouveau(facts: Facts, profile: Profile) -> Output:
    """Keep nouveau away from NVIDIA GPUs, in the root filesystem and in the initramfs."""
    if not facts.has_gpus:
        return
    why = "the open-source nouveau driver binds the GPUs before the NVIDIA driver can"
    yield blacklist("nouveau", why)
    yield module_option("nouveau", "modeset", 0, why + " (no modesetting if it is loaded anyway)")
    yield kernel_arg("modprobe.blacklist", "nouveau", why + "; applies before modprobe.d is read")
    yield kernel_arg("rd.driver.blacklist", "nouveau", why + "; applies inside a dracut initramfs")


@rule("gpu.persistence")
def persistence(facts: Facts, profile: Profile) -> Output:
    """Keep the driver initialised between CUDA processes (nvidia-persistenced)."""
    if not facts.has_gpus:
        return
    why = "avoids 1-2 s of driver initialisation on every CUDA start"
    yield service("nvidia-persistenced.service", "enable", why)
    yield gpu_action("persistence", "on",
                     why + "; the boot unit runs nvidia-smi -pm 1 only when nvidia-persistenced is not active")


@rule("gpu.boot-unit")
def boot_unit(facts: Facts, profile: Profile) -> Output:
    """Apply GPU settings at boot on the real machine (images are built without GPUs)."""
    if not facts.has_gpus:
        return
    yield service(GPU_UNIT, "enable",
                  "nvidia-smi settings need the GPU, so they run at boot; the unit logs and "
                  "skips when the driver or the GPU is absent")


@rule("gpu.ecc")
def ecc(facts: Facts, profile: Profile) -> Output:
    """Make sure ECC is on (set only where it is off; takes effect after a reboot)."""
    if not facts.has_gpus or profile.gpu_ecc != "enable":
        return
    yield gpu_action("ecc", "on", "silent bit flips corrupt long runs and answers; ECC costs "
                     "little; set only where it is off, effective after the next reboot")


@rule("gpu.compute-mode")
def compute_mode(facts: Facts, profile: Profile) -> Output:
    """One process per GPU when the profile asks for exclusive GPUs."""
    if not facts.has_gpus:
        return
    if profile.gpu_compute_mode != "exclusive-process":
        yield note("GPU compute mode left at DEFAULT: the driver resets it at every load, so "
                   "pinning it would do nothing")
        return
    yield gpu_action("compute-mode", "EXCLUSIVE_PROCESS",
                     "one process per GPU: no time-slicing between ranks or workers")


def _clock_value(group: GpuGroup) -> str:
    return str(group.model.max_graphics_clock_mhz) if group.model.max_graphics_clock_mhz else "max"


@rule("gpu.clocks")
def clocks(facts: Facts, profile: Profile) -> Output:
    """Lock graphics clocks at the model's maximum for deterministic inference latency."""
    if not facts.has_gpus or profile.gpu_clocks != "lock-max":
        return
    values = {_clock_value(group) for group in facts.gpus}
    value = values.pop() if len(values) == 1 else "max"
    known = f"{value} MHz from hardware_db ({_models(facts)})" if value != "max" else "the card's reported maximum"
    yield gpu_action("clocks", value,
                     f"boost clocks follow temperature and power, so latency varies; locked at "
                     f"{known}, clamped at boot to what each card reports it supports")


@rule("gpu.power-limit")
def power_limit(facts: Facts, profile: Profile) -> Output:
    """Cap board power at a share of the default limit, only when the profile says so."""
    percent = profile.gpu_power_limit_percent
    if not facts.has_gpus or percent is None:
        return
    defaults = {group.model.power.default_w for group in facts.gpus}
    default = defaults.pop() if len(defaults) == 1 else None
    if default:
        value, known = str(default * percent // 100), f"{default} W default from hardware_db"
    else:
        value, known = f"{percent}%", "the card's reported default limit"
    yield gpu_action("power-limit", value,
                     f"the profile caps power at {percent}% of {known} to avoid thermal "
                     "throttling; clamped at boot to the card's min/max limits")


@rule("gpu.mig")
def mig(facts: Facts, profile: Profile) -> Output:
    """Turn MIG off at boot only when the profile asks and a GPU supports it."""
    if profile.gpu_mig != "disable":
        return
    if not any(group.model.supports_mig for group in facts.gpus):
        yield note("MIG off requested, but no GPU here supports MIG")
        return
    yield gpu_action("mig", "off", "the profile wants whole GPUs; partitioning is a deployment choice")


@rule("gpu.fabric-manager")
def fabric_manager(facts: Facts, profile: Profile) -> Output:
    """Run nvidia-fabricmanager on NVSwitch systems; NVLink does not come up without it."""
    if not facts.has_gpus or not facts.nvswitch:
        return
    yield service("nvidia-fabricmanager.service", "enable",
                  f"{_models(facts)} connect through NVSwitch: without the fabric manager "
                  "NVLink all-to-all never comes up and CUDA reports no peer access")


@rule("gpu.dcgm")
def dcgm(facts: Facts, profile: Profile) -> Output:
    """Run DCGM (health, Xid errors, metrics) where it is installed."""
    if not facts.has_gpus:
        return
    yield service("nvidia-dcgm.service", "enable",
                  "GPU health checks, Xid error reporting and metrics; skipped where DCGM is not installed")


@rule("gpu.peermem")
def peermem(facts: Facts, profile: Profile) -> Output:
    """Load nvidia-peermem for GPUDirect RDMA when GPUs and RDMA NICs meet."""
    if not facts.has_gpus:
        return
    rdma = facts.rdma_nics
    if not rdma:
        yield note("no RDMA NIC: GPUDirect RDMA (nvidia-peermem) does not apply")
        return
    names = ", ".join(nic.name for nic in rdma)
    yield load_module("nvidia-peermem",
                      f"GPUDirect RDMA: NICs {names} read and write GPU memory without a bounce through "
                      f"host RAM; loaded by {GPU_UNIT} once the NVIDIA driver provides it")
