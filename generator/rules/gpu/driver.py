"""GPU and driver: nouveau, persistence, the boot unit, ECC, compute mode, clocks, power, DCGM,
and NVIDIA's own tuned profiles."""

from __future__ import annotations

from generator.inputs.facts import Facts, GpuGroup
from generator.inputs.profile import Profile
from generator.model.layout import (
    GPU_PATH_UNIT,
    GPU_UNIT,
    OPERATOR_DRIVER_READY,
    OPERATOR_DRIVER_ROOT,
    PERSISTENCED_UNIT,
)
from generator.model.vendors import GpuVendor
from generator.rules.base import (
    Output,
    blacklist,
    gpu_action,
    kernel_arg,
    module_option,
    note,
    rule,
    service,
    unit_dropin,
)
from generator.rules.gpu.common import (
    DRIVER_CONTAINER,
    models_of,
    nvidia_operator_driver,
    nvlink5_baseboard,
)
from generator.rules.memory import coherent_gpu_models


@rule("gpu.nouveau", vendors=(GpuVendor.NVIDIA,))
def nouveau(facts: Facts, profile: Profile) -> Output:
    """Keep nouveau away from NVIDIA GPUs, in the root filesystem and in the initramfs."""
    if not facts.has_gpus:
        return
    why = "the open-source nouveau driver binds the GPUs before the NVIDIA driver can"
    yield blacklist("nouveau", why)
    yield module_option("nouveau", "modeset", 0, why + " (no modesetting if it is loaded anyway)")
    yield kernel_arg("modprobe.blacklist", "nouveau", why + "; applies before modprobe.d is read")
    yield kernel_arg("rd.driver.blacklist", "nouveau", why + "; applies inside a dracut initramfs")
    if nvidia_operator_driver(facts):
        yield note(
            "nouveau stays blacklisted with the GPU Operator's driver: its driver container "
            "installs with --no-nouveau-check and neither blacklists nor unloads it "
            f"({DRIVER_CONTAINER})"
        )


# Where every shipped distribution's package installs the daemon (hardware_db/distros/*.yaml
# exec_start: Debian 12, Ubuntu 22.04/24.04 and NVIDIA's RHEL 9 package all use /usr/bin), so a
# bundle for no named distribution starts the same program.
PORTABLE_PERSISTENCED = "/usr/bin/nvidia-persistenced"


PERSISTENCED_OPTIONS = ("--persistence-mode", "--verbose")


PERSISTENCED_WANTED_BY = "multi-user.target"


def persistenced_user(facts: Facts) -> tuple[str | None, str]:
    """The user the daemon runs as (None: no --user, so root), and why."""
    if superchips := coherent_gpu_models(facts):
        return "root", (
            f"as root on {superchips}: the daemon onlines the GPU memory's NUMA node and writes "
            "/sys/devices/system/memory/auto_online_blocks, which fails as another user "
            "(NVIDIA/nvidia-persistenced#11)"
        )
    distro = facts.os.distro
    packaged = distro.nvidia.persistenced if distro else None
    if distro is None or packaged is None or packaged.exec_start is None:
        return None, (
            "as root: the packaged user differs between distributions (Debian nvpd, Ubuntu "
            "nvidia-persistenced, NVIDIA's RHEL package none), so only --os keeps it"
        )
    if packaged.user is None:
        return None, f"as root, as {distro.key}'s package runs it"
    return packaged.user, f"as {packaged.user}, the user {distro.key}'s package runs it as"


def persistenced_command(facts: Facts) -> tuple[str, str]:
    """The daemon's command line for the drop-in's ExecStart, and why it is this one."""
    distro = facts.os.distro
    packaged = distro.nvidia.persistenced if distro else None
    program = (packaged.program if packaged else None) or PORTABLE_PERSISTENCED
    user, why_user = persistenced_user(facts)
    words = [program, *(("--user", user) if user else ()), *PERSISTENCED_OPTIONS]
    return " ".join(words), why_user


def persistenced_reasons(facts: Facts) -> tuple[str, str]:
    """Why the drop-in replaces ExecStart and adds WantedBy=, said of the target distribution's
    packaged unit (hardware_db/distros/); a portable bundle names the packaging it must fix."""
    distro = facts.os.distro
    packaged = distro.nvidia.persistenced if distro else None
    if distro is None or packaged is None or packaged.exec_start is None:
        return (
            "the packaged command (Ubuntu's passes --no-persistence-mode)",
            "Ubuntu's packaged unit has no [Install] section, so without this systemctl "
            "enable does nothing",
        )
    off = " (persistence mode off)" if packaged.persistence_mode is False else ""
    replaced = f"{distro.key}'s packaged '{packaged.exec_start}'{off}"
    if packaged.static:
        wanted = (
            f"{distro.key}'s packaged unit is static, so without this systemctl enable does nothing"
        )
    else:
        wanted = (
            f"{distro.key}'s packaged unit has its own [Install] section; restated so that "
            "the drop-in alone enables it"
        )
    return replaced, wanted


@rule("gpu.persistence", vendors=(GpuVendor.NVIDIA,))
def persistence(facts: Facts, profile: Profile) -> Output:
    """Keep the driver initialised between CUDA processes: nvidia-persistenced in persistence mode.

    The daemon is started at boot.

    The daemon starts with persistence mode on unless given --no-persistence-mode
    (NVIDIA/nvidia-persistenced option-table.h), which Ubuntu's packaged unit passes; that unit
    is also static (no [Install]), so enabling it does nothing (hardware_db/distros/ubuntu-*.yaml).
    The drop-in resets ExecStart and adds [Install] WantedBy=, which systemctl enable honours in
    drop-ins since systemd 236 (NEWS; every target distribution ships 249 or later). NVIDIA
    deprecates legacy persistence mode (nvidia-smi -pm) in favour of the daemon, so the boot
    unit uses -pm only where no daemon runs.
    """
    if not facts.has_gpus:
        return
    if nvidia_operator_driver(facts):
        yield note(
            "nvidia-persistenced not enabled in the image: the GPU Operator's driver container "
            f"runs it in persistence mode (_start_daemons, {DRIVER_CONTAINER})"
        )
        return
    why = "avoids 1-2 s of driver initialisation on every CUDA start"
    command, why_user = persistenced_command(facts)
    replaced, wanted = persistenced_reasons(facts)
    yield service(PERSISTENCED_UNIT, "enable", why)
    yield unit_dropin(
        PERSISTENCED_UNIT,
        "ExecStart",
        command,
        f"{why}: the daemon in persistence mode, replacing {replaced}, {why_user}",
    )
    yield unit_dropin(
        PERSISTENCED_UNIT,
        "WantedBy",
        PERSISTENCED_WANTED_BY,
        f"{why}: started at boot; {wanted} (systemd >= 236 reads [Install] from drop-ins)",
    )
    yield gpu_action(
        "persistence",
        "on",
        why + "; the boot unit checks what each GPU reports and runs nvidia-smi -pm 1 (legacy "
        "persistence mode) only where nvidia-persistenced is not running",
    )
    packaged = facts.os.distro.nvidia.persistenced if facts.os.distro else None
    if facts.os.distro and packaged is not None and packaged.persistence_mode is False:
        # hardware_db/distros/: Ubuntu's unit is static and runs --no-persistence-mode
        yield note(
            f"{facts.os.distro.key}'s {packaged.unit} runs '{packaged.exec_start}' and is "
            f"{'static' if packaged.static else 'packaged'}: the bundle's drop-in replaces "
            f"ExecStart with '{command}' and adds WantedBy={PERSISTENCED_WANTED_BY}, so "
            "persistence mode is on from boot"
        )


@rule("gpu.boot-unit", vendors=(GpuVendor.NVIDIA, GpuVendor.AMD))
def boot_unit(facts: Facts, profile: Profile) -> Output:
    """Apply GPU settings at boot on the real machine (images are built without GPUs).

    NVIDIA GPUs always have settings (persistence, ECC); AMD Instinct ones only what the profile
    asks (a power cap, partition modes), applied with amd-smi by gpu-setup-amd.
    """
    if facts.has_nvidia_gpus:
        tool = "nvidia-smi"
    elif facts.has_gpus and any(amd_gpu_knobs(profile)):
        tool = "amd-smi"
    else:
        return
    if nvidia_operator_driver(facts):
        yield from operator_boot_unit()
        return
    if tool == "amd-smi" and facts.os.driver == "amd-gpu-operator":
        yield note(AMD_OPERATOR_BOOT_UNIT)
        return
    yield service(
        GPU_UNIT,
        "enable",
        f"{tool} settings need the GPU, so they run at boot; the unit logs and "
        "skips when the driver or the GPU is absent",
    )


# The AMD GPU Operator's KMM loads amdgpu after kubelet starts, and leaves no readiness file a
# path unit could watch (its node labeller polls /sys/class/kfd and /sys/module/amdgpu/drivers,
# ROCm/gpu-operator@6df13c17 internal/nodelabeller/nodelabeller.go; sysfs sends no inotify).
AMD_OPERATOR_BOOT_UNIT = (
    "goldtune-gpu.service not enabled: the AMD GPU Operator loads amdgpu after kubelet starts, so "
    "at boot there is no GPU to set; partition modes go to its device config manager (see "
    "gpu.amd-partitions), and a power limit the profile asks is not applied by this bundle"
)


def operator_boot_unit() -> Output:
    """The GPU settings once the Operator's driver is ready: a path unit on its readiness marker
    starts the GPU unit (never at boot: the driver arrives after kubelet, and nothing waits),
    whose nvidia-smi runs in the driver root, as the Operator's validator runs it."""
    why = (
        f"the GPU Operator's driver container loads the driver after kubelet starts; its "
        f"startup probe writes {OPERATOR_DRIVER_READY} once nvidia-smi works"
    )
    yield service(GPU_PATH_UNIT, "enable", f"{why}: this path unit then starts {GPU_UNIT}, once")
    yield service(
        GPU_UNIT,
        "disable",
        f"{why}: started by {GPU_PATH_UNIT}, never at boot, where it would find no driver and "
        "fail (an earlier host-driver bundle's enablement is taken back)",
    )
    yield gpu_action(
        "driver-root",
        OPERATOR_DRIVER_ROOT,
        f"{why}; nvidia-smi runs in its driver root (chroot {OPERATOR_DRIVER_ROOT} nvidia-smi, "
        "as the Operator's validator does)",
    )


def amd_gpu_knobs(profile: Profile) -> tuple[object, ...]:
    """The profile's knobs that give AMD GPUs a boot-time setting (None: not asked)."""
    knobs = (
        profile.gpu_power_limit_percent,
        profile.gpu_compute_partition,
        profile.gpu_memory_partition,
    )
    return tuple(knob for knob in knobs if knob is not None)


@rule("gpu.ecc", vendors=(GpuVendor.NVIDIA,))
def ecc(facts: Facts, profile: Profile) -> Output:
    """Make sure ECC is on where it costs no memory; GDDR boards keep what they ship with.

    GDDR6 boards (L4, L40S, A10: memory_type gddr in hardware_db) keep ECC inline in the same
    DRAM, so turning it on takes about 1/16 of VRAM and some bandwidth after the next, possibly
    unplanned, reboot (TUNING.md GPU table: on GDDR "only when the profile asks"); HBM has
    separate ECC bits. A profile asks with an override of gpu ecc.
    """
    if not facts.has_gpus or profile.gpu_ecc != "enable":
        return
    if gddr := [group.model.key for group in facts.gpus if group.model.memory_type == "gddr"]:
        yield note(
            f"ECC left as the boards ship it on {', '.join(gddr)}: GDDR keeps ECC inline, "
            "so turning it on takes about 1/16 of VRAM after the next reboot; a profile "
            "override (kind gpu, key ecc, value on) asks for it"
        )
        return
    unknown = [group.model.key for group in facts.gpus if group.model.memory_type is None]
    memory = "HBM keeps ECC in separate bits, so it costs no capacity"
    if unknown:
        memory = (
            f"HBM ECC costs no capacity (memory type of {', '.join(unknown)} not in hardware_db)"
        )
    yield gpu_action(
        "ecc",
        "on",
        f"silent bit flips corrupt long runs and answers; {memory}; set "
        "only where it is off, effective after the next reboot",
    )


@rule("gpu.compute-mode", vendors=(GpuVendor.NVIDIA,))
def compute_mode(facts: Facts, profile: Profile) -> Output:
    """One process per GPU when the profile asks for exclusive GPUs."""
    if not facts.has_gpus:
        return
    if profile.gpu_compute_mode != "exclusive-process":
        yield note(
            "GPU compute mode left at DEFAULT: the driver resets it at every load, so "
            "pinning it would do nothing"
        )
        return
    yield gpu_action(
        "compute-mode",
        "EXCLUSIVE_PROCESS",
        "one process per GPU: no time-slicing between ranks or workers",
    )


def _clock_value(group: GpuGroup) -> str:
    return str(group.model.max_graphics_clock_mhz) if group.model.max_graphics_clock_mhz else "max"


@rule("gpu.clocks", vendors=(GpuVendor.NVIDIA,))
def clocks(facts: Facts, profile: Profile) -> Output:
    """Lock graphics clocks at the model's maximum for deterministic inference latency.

    A profile that boosts resets any lock instead (nvidia-smi -rgc): a lock set by an earlier
    bundle or by hand survives until the driver unloads, so a live switch from inference-latency
    to training would otherwise keep the old fixed clocks.
    """
    if not facts.has_gpus:
        return
    if profile.gpu_clocks != "lock-max":
        yield gpu_action(
            "clocks",
            "reset",
            "the profile leaves clocks to the driver's boost; a lock from an earlier bundle "
            "or set by hand lasts until the driver unloads, so it is reset (nvidia-smi -rgc)",
        )
        return
    values = {_clock_value(group) for group in facts.gpus}
    value = values.pop() if len(values) == 1 else "max"
    known = (
        f"{value} MHz from hardware_db ({models_of(facts)})"
        if value != "max"
        else "the card's reported maximum"
    )
    yield gpu_action(
        "clocks",
        value,
        f"boost clocks follow temperature and power, so latency varies; locked at "
        f"{known}, clamped at boot to what each card reports it supports",
    )


@rule("gpu.power-limit", vendors=(GpuVendor.NVIDIA, GpuVendor.AMD))
def power_limit(facts: Facts, profile: Profile) -> Output:
    """Cap board power at a share of each card's own default limit, only when the profile says so.

    Always a percentage, resolved at boot against the card's reported power.default_limit: one
    model name covers boards of different defaults (A100 SXM4 at 400 W and 500 W,
    hardware_db/gpus/A100-SXM4-80GB.yaml), so watts from the catalog would cap a 500 W board
    at 80 % of 400 W. AMD Instinct: the card's amdgpu hwmon power1_cap_default (microwatts),
    set with ``amd-smi set --power-cap`` and clamped to power1_cap_min/max by gpu-setup-amd.
    """
    percent = profile.gpu_power_limit_percent
    if not facts.has_gpus or percent is None:
        return
    if not facts.has_nvidia_gpus:
        yield gpu_action(
            "power-limit",
            f"{percent}%",
            f"the profile caps {models_of(facts)} at {percent}% of each card's own default power "
            "cap, read at boot from amdgpu's hwmon power1_cap_default and set with amd-smi; "
            "clamped to the card's min/max cap",
        )
        return
    defaults = sorted({g.model.power.default_w for g in facts.gpus if g.model.power.default_w})
    catalog = (
        f" (hardware_db gives {', '.join(f'{watts} W' for watts in defaults)} for "
        f"{models_of(facts)}; boards of one model can differ)"
        if defaults
        else ""
    )
    yield gpu_action(
        "power-limit",
        f"{percent}%",
        f"the profile caps power at {percent}% of each card's own default limit, read at "
        f"boot from nvidia-smi{catalog}, to avoid thermal throttling; clamped to the card's "
        "min/max limits",
    )


@rule("gpu.dcgm", vendors=(GpuVendor.NVIDIA,))
def dcgm(facts: Facts, profile: Profile) -> Output:
    """Run DCGM (health, Xid errors, metrics) where it is installed."""
    if not facts.has_gpus:
        return
    yield service(
        "nvidia-dcgm.service",
        "enable",
        "GPU health checks, Xid error reporting and metrics; skipped where DCGM is not installed",
        optional=True,  # DCGM is a separate package (datacenter-gpu-manager), not the driver's
    )


@rule("gpu.vendor-profiles", vendors=(GpuVendor.NVIDIA,))
def vendor_profiles(facts: Facts, profile: Profile) -> Output:
    """Say which settings of NVIDIA's own tuned profiles are left out, and why.

    NVIDIA/skyhook-packages 3f9169b nvidia-tuned/profiles (research/peer-systems.md 2.3):
    nvidia-base ([modules] ib_umad), nvidia-h100-performance (pci=realloc=off, console=),
    nvidia-gb200-performance (kernel.threads-max=16512444, vm.min_free_kbytes=65536, earlycon,
    containerd LimitSTACK=67108864), multiNodeTraining (rmem_default/wmem_default 128 MiB).
    Settings goldtune has, or that other rules explain, are not repeated here. rdma-core loads
    ib_umad where an InfiniBand device exists (kernel-boot/modules/infiniband.conf).
    """
    if not facts.has_gpus:
        return
    if not nvlink5_baseboard(facts):
        yield note(
            "ib_umad (loaded by NVIDIA's nvidia-base profile everywhere) is loaded only for "
            "NVLSM on NVLink 5 NVSwitch baseboards; rdma-core loads it with the "
            "InfiniBand stack where an HCA is present"
        )
    if ("kernel-arg", "pci") in {(o.kind, o.key) for o in profile.overrides}:
        # the profile sets pci= itself: saying it is not set would contradict the plan
        yield note(
            "console= and earlycon (NVIDIA's h100/gb200 profiles) not set: the serial console "
            "is BMC-specific"
        )
    else:
        yield note(
            "pci=realloc=off, console= and earlycon (NVIDIA's h100/gb200 profiles) not set: "
            "PCI resource allocation and the serial console are firmware- and BMC-specific"
        )
    yield note(
        "kernel.threads-max not raised (NVIDIA's gb200 profile: 16512444): the kernel "
        "sizes it from RAM (kernel/fork.c: an eighth of memory for thread stacks) and "
        "pid_max (4194304 under systemd) caps threads first"
    )
    kernel_min_free = min(262144, int((facts.memory_gib * 1024 * 1024 * 16) ** 0.5))
    yield note(
        f"vm.min_free_kbytes not set (NVIDIA's gb200 profile: 65536): the kernel's own "
        f"value is sqrt(16 x RAM in KiB), about {kernel_min_free} KiB here "
        "(mm/page_alloc.c, at most 262144), so a fixed 65536 would lower it on machines "
        "above 256 GiB"
    )
    # With containers: the runtime drop-in (containers.runtime-limits) exists but sets no stack.
    where = (
        "the runtime drop-in of containers.runtime-limits leaves it out"
        if profile.containers != "none"
        else "goldtune writes no container-runtime drop-ins"
    )
    yield note(
        f"containerd LimitSTACK=67108864 (NVIDIA's gb200 profile) not set: {where}, and "
        "RLIMIT_STACK also becomes glibc's default stack size for every new thread"
    )
    if profile.multinode:
        yield note(
            "net.core.rmem_default/wmem_default not raised (NVIDIA's multiNodeTraining: "
            "134217728): they size every new socket, control connections included; TCP "
            "autotuning grows buffers up to the tcp_rmem/tcp_wmem maximum instead"
        )
