"""GPU and driver: nouveau, persistence, ECC, compute mode, clocks, power, MIG, fabric."""

from __future__ import annotations

from generator.inputs.facts import Facts, GpuGroup, NicFacts
from generator.inputs.profile import Profile
from generator.model import mig as mig_layouts
from generator.model.layout import (
    GPU_CLIENT_UNITS,
    GPU_UNIT,
    MPS_PIPE_DIR,
    MPS_UNIT,
    PERSISTENCED_UNIT,
)
from generator.model.vendors import GpuVendor
from generator.rules.base import (
    Output,
    blacklist,
    gpu_action,
    kernel_arg,
    load_module,
    module_option,
    note,
    rule,
    service,
    unit_dropin,
)
from generator.rules.memory import coherent_gpu_models


def _models(facts: Facts) -> str:
    return ", ".join(f"{group.count}x {group.model.key}" for group in facts.gpus)


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
    yield service(
        GPU_UNIT,
        "enable",
        f"{tool} settings need the GPU, so they run at boot; the unit logs and "
        "skips when the driver or the GPU is absent",
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
        f"{value} MHz from hardware_db ({_models(facts)})"
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
            f"the profile caps {_models(facts)} at {percent}% of each card's own default power "
            "cap, read at boot from amdgpu's hwmon power1_cap_default and set with amd-smi; "
            "clamped to the card's min/max cap",
        )
        return
    defaults = sorted({g.model.power.default_w for g in facts.gpus if g.model.power.default_w})
    catalog = (
        f" (hardware_db gives {', '.join(f'{watts} W' for watts in defaults)} for "
        f"{_models(facts)}; boards of one model can differ)"
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


@rule("gpu.mig", vendors=(GpuVendor.NVIDIA,))
def mig(facts: Facts, profile: Profile) -> Output:
    """MIG off, or a MIG layout, at boot: only when the profile asks and a GPU supports MIG.

    A layout (knob gpu_mig_layout) turns MIG mode on and creates the GPU instances, each with its
    default compute instance (nvidia-smi mig -cgi <profiles> -C), on every MIG-capable GPU.
    GPU instances do not survive a reboot or a driver reload, so the boot unit creates them each
    boot (NVIDIA MIG user guide, "Getting Started with MIG": MIG mode persists, instances do
    not). The plan checks the layout against each model's profiles in hardware_db.

    MIG mode changes only while no process holds the GPU ("In use by another client"; the MIG
    guide stops nvsm and dcgm first), so the boot unit runs before every GPU client it knows of
    (layout.GPU_CLIENT_UNITS, its Before=) and a note tells the site what to do for the rest.
    """
    layout = profile.gpu_mig_layout
    if profile.gpu_mig != "disable" and layout is None:
        return
    capable = [group.model.key for group in facts.gpus if group.model.supports_mig]
    if not capable:
        yield note(f"MIG {'layout' if layout else 'off'} requested, but no GPU here supports MIG")
        return
    yield note(mig_clients_note())
    if layout is None:
        yield gpu_action(
            "mig", "off", "the profile wants whole GPUs; partitioning is a deployment choice"
        )
        return
    yield gpu_action(
        "mig",
        "on",
        f"the profile's MIG layout needs MIG mode on {', '.join(capable)}; where the card "
        "reports the change as pending, the boot unit says a GPU reset or reboot is needed",
    )
    yield gpu_action(
        "mig-layout",
        ",".join(mig_layouts.expanded(layout)),
        "the profile's MIG layout ("
        + ", ".join(f"{name} x{count}" for name, count in layout.items())
        + "), created at every boot (instances do not survive a reboot), largest first; a "
        "GPU that already has other instances is left as it is and reported",
    )


def mig_clients_note() -> str:
    """What the site must do for GPU clients the boot unit cannot order itself before."""
    return (
        f"MIG mode changes only while no process holds the GPU (NVIDIA's MIG user guide stops "
        f"nvsm and dcgm first): {GPU_UNIT} runs before {', '.join(GPU_CLIENT_UNITS)}. Any "
        f"other unit that opens a GPU at boot (a site's inference server, a monitoring agent, "
        f"a DCGM exporter started another way) needs After={GPU_UNIT} in a drop-in of its own "
        "(systemctl edit <unit>), or the change fails 'In use by another client' or stays "
        "pending, and the boot unit logs that the MIG layout was not created"
    )


def not_offered(facts: Facts, field: str, mode: str) -> list[str]:
    """The GPU models whose catalog entry lists its partition modes (``field``) without ``mode``."""
    return [
        group.model.key
        for group in facts.gpus
        if (modes := getattr(group.model, field)) is not None and mode not in modes
    ]


@rule("gpu.amd-partitions", vendors=(GpuVendor.AMD,))
def amd_partitions(facts: Facts, profile: Profile) -> Output:
    """AMD Instinct compute and memory partition modes, only when the profile asks.

    AMD's MI300X partitioning overview and quick-start guide (ROCm/amdgpu-docs
    docs/gpu-partitioning/mi300x/): the compute partition returns to SPX at every boot and every
    amdgpu reload, so the boot unit sets it each time; a memory partition change restarts the
    amdgpu driver with every GPU workload stopped, so the boot unit compares it and reports the
    command, never changes it; on MI300X the memory partitions may not outnumber the compute
    ones (NPS4 needs CPX).
    """
    compute, memory = profile.gpu_compute_partition, profile.gpu_memory_partition
    if not facts.has_gpus or (compute is None and memory is None):
        return
    for knob, field, mode in (
        ("gpu_compute_partition", "compute_partitions", compute),
        ("gpu_memory_partition", "memory_partitions", memory),
    ):
        if mode is not None and (models := not_offered(facts, field, mode)):
            yield note(f"{knob}: {mode} is not a mode of {', '.join(models)} ({field}); not set")
            return
    if memory == "NPS4" and compute not in (None, "CPX"):
        yield note(
            f"gpu_memory_partition NPS4 with gpu_compute_partition {compute}: AMD's MI300X "
            "partitioning guide allows NPS4 only with CPX; neither set"
        )
        return
    if memory is not None:
        yield gpu_action(
            "memory-partition",
            memory,
            f"the profile asks memory partition {memory} on {_models(facts)}: compared at boot, "
            "a GPU in another mode reported with the amd-smi command; changing it restarts the "
            "amdgpu driver with every GPU workload stopped (AMD's MI300X partitioning "
            "quick-start guide), so the boot unit does not",
        )
    if compute is not None:
        yield gpu_action(
            "compute-partition",
            compute,
            f"the profile asks compute partition {compute} on {_models(facts)}: set at each "
            "boot with amd-smi, as the GPU returns to SPX at every reboot and amdgpu reload "
            "(AMD's MI300X partitioning overview)",
        )


@rule("gpu.mps", vendors=(GpuVendor.NVIDIA,))
def mps(facts: Facts, profile: Profile) -> Output:
    """Run the CUDA MPS control daemon when the profile asks (knob gpu_mps, default false).

    Who wants it: inference servers that run several small processes per GPU (several Triton
    model instances or workers, each too small to fill an H100), and MPI codes with more ranks
    than GPUs; kernels of different processes then run concurrently instead of time-sliced.
    Off by default: a fatal GPU fault in one client ends the other clients sharing that GPU
    (NVIDIA MPS guide, "Error Containment"), and clients need CUDA_MPS_PIPE_DIRECTORY set.
    NVIDIA's MPS guide ("Starting MPS control daemon", multi-user setup) sets the GPU to
    EXCLUSIVE_PROCESS first, so that only the MPS server holds a context; the compute mode stays
    the profile's choice (gpu.compute-mode) and a note says when it is DEFAULT.

    Containers: the NVIDIA container toolkit does not wire MPS into a container, that is the
    user's or a higher layer's job (NVIDIA/nvidia-container-toolkit#714, a maintainer,
    2025-11-17); a container reaches a host daemon with the host's IPC namespace and the pipe
    directory (NVIDIA/nvidia-docker#419, a maintainer: "run the MPS server on the host and use
    --ipc=host"), so EXPLAIN.md says what to pass. Kubernetes: NVIDIA's device plugin runs MPS
    itself when its config has ``sharing.mps`` (README "With CUDA MPS"): its own control daemon
    per resource, which sets EXCLUSIVE_PROCESS on its GPUs and starts
    ``nvidia-cuda-mps-control -d`` with its pipes under /run/nvidia/mps/<resource>/pipe
    (cmd/mps-control-daemon/mps/daemon.go, root.go; docs/mps.md), and hands each pod the
    environment and mounts. A host daemon beside it would be a second server competing for the
    same EXCLUSIVE_PROCESS GPUs, and pods cannot see it anyway: no unit, and a note says so.
    """
    if not profile.gpu_mps:
        return
    if not facts.has_gpus:
        yield note("MPS requested, but there is no GPU here: no MPS daemon")
        return
    if profile.kubernetes:
        yield note(MPS_UNDER_KUBERNETES)
        return
    if profile.containers != "none":
        yield note(mps_in_containers(profile.containers))
    yield service(
        MPS_UNIT,
        "enable",
        "the profile asks for MPS: CUDA processes share each GPU through one MPS server, "
        f"so their kernels run concurrently; clients must set CUDA_MPS_PIPE_DIRECTORY="
        f"{MPS_PIPE_DIR}; started after {GPU_UNIT} (compute mode set first), before the "
        "container runtimes, kubelet and slurmd",
    )
    if profile.gpu_compute_mode != "exclusive-process":
        yield note(
            "MPS with compute mode DEFAULT: a process that does not reach the MPS daemon (no "
            f"CUDA_MPS_PIPE_DIRECTORY={MPS_PIPE_DIR} in its environment) opens its own "
            "context beside the MPS server and is time-sliced with it; NVIDIA's MPS guide sets "
            "EXCLUSIVE_PROCESS so that only the server holds each GPU "
            "(gpu_compute_mode: exclusive-process)"
        )


MPS_UNDER_KUBERNETES = (
    "MPS requested on a Kubernetes node: no host MPS daemon. NVIDIA's device plugin runs MPS for "
    "pods when its config has sharing.mps (k8s-device-plugin README, 'With CUDA MPS'): its "
    "daemon sets EXCLUSIVE_PROCESS, keeps its pipes under /run/nvidia/mps/<resource>/pipe and "
    "gives each pod CUDA_MPS_PIPE_DIRECTORY and the mounts; a host daemon would compete with it "
    "for the same GPUs (k8s-device-plugin cmd/mps-control-daemon/mps/daemon.go). Configure "
    "sharing.mps in the device plugin instead"
)


def mps_in_containers(runtime: str) -> str:
    """What a container must be given to reach the host's MPS daemon (the rule's sources)."""
    return (
        f"MPS with {runtime} containers: the NVIDIA container toolkit does not pass MPS into a "
        "container (NVIDIA/nvidia-container-toolkit#714). A container reaches this daemon only "
        f"with the host's IPC namespace, the pipe directory mounted at the same path and "
        f"CUDA_MPS_PIPE_DIRECTORY={MPS_PIPE_DIR} (NVIDIA/nvidia-docker#419): docker run "
        f"--ipc=host -v {MPS_PIPE_DIR}:{MPS_PIPE_DIR} -e CUDA_MPS_PIPE_DIRECTORY={MPS_PIPE_DIR}, "
        "(nerdctl run takes the same flags); without them its CUDA processes miss the daemon and "
        "open their own context (compute mode DEFAULT) or find the GPU busy (EXCLUSIVE_PROCESS)"
    )


def _multi_node_nvlink(facts: Facts) -> str:
    """The GPU models here that join a rack-wide NVLink domain (GB200 NVL72 trays), or ""."""
    return ", ".join(group.model.key for group in facts.gpus if group.model.multi_node_nvlink)


def _nvlink5_baseboard(facts: Facts) -> bool:
    """An NVSwitch baseboard of NVLink 5 GPUs (HGX/DGX B200 and later): 4th-gen NVSwitch."""
    generations = [group.model.nvlink_generation or 0 for group in facts.gpus]
    return facts.nvswitch and max(generations, default=0) >= 5


@rule("gpu.fabric-manager", vendors=(GpuVendor.NVIDIA,))
def fabric_manager(facts: Facts, profile: Profile) -> Output:
    """Run nvidia-fabricmanager on NVSwitch systems; NVLink does not come up without it.

    Not on a GB200 NVL72 compute tray: its NVLink switches sit in the rack's switch trays, whose
    NVOS runs the fabric manager and NVLSM (DGX GB200 user guide, networking; NVIDIA DeepOps
    ubuntu-24.04 platform table: GB200 "nvswitch: false, imex: true").
    """
    if not facts.has_gpus:
        return
    if trays := _multi_node_nvlink(facts):
        yield note(
            f"nvidia-fabricmanager not enabled: {trays} reach the rack's NVLink domain "
            "through external NVLink switch trays, which run the fabric manager and NVLSM; "
            "a compute tray runs nvidia-imex instead"
        )
        return
    if not facts.nvswitch:
        return
    why = (
        f"{_models(facts)} connect through NVSwitch: without the fabric manager NVLink "
        "all-to-all never comes up and CUDA reports no peer access"
    )
    if _nvlink5_baseboard(facts):
        why += (
            "; on NVLink 5 baseboards its start script (nvidia-fabricmanager-start.sh) also "
            "starts the NVLink subnet manager from the nvlsm package"
        )
    yield service("nvidia-fabricmanager.service", "enable", why)


@rule("gpu.nvlink-subnet-manager", vendors=(GpuVendor.NVIDIA,))
def nvlink_subnet_manager(facts: Facts, profile: Profile) -> Output:
    """Load ib_umad for the NVLink subnet manager on NVLink 5 NVSwitch baseboards.

    Fabric Manager user guide r2.3 ("Systems Using Fourth Generation NVSwitches", "What is NVLink
    Subnet Manager?"): DGX/HGX B200 and later need NVLSM besides the fabric manager, and the
    package's nvidia-fabricmanager-start.sh starts both, so NVLSM has no unit of its own.
    NVLSM is an OpenSM that reaches the NVSwitch management ports through /dev/infiniband/umad*;
    without ib_umad the fabric manager's precheck fails and GPUs stay in fabric state "In
    Progress" (spectrocloud/CanvOS PR #700 on HGX B200; NVIDIA's nvidia-base tuned profile loads
    ib_umad). Keyed on the GPU model's NVLink generation in hardware_db, not on a name.
    """
    if not facts.has_gpus or not _nvlink5_baseboard(facts):
        return
    yield load_module(
        "ib_umad",
        f"{_models(facts)} use 4th-gen NVSwitch: the NVLink subnet manager (NVLSM) "
        "reaches the switches through /dev/infiniband/umad*, and the fabric "
        "manager's precheck fails without it",
    )
    yield note(
        "NVLSM is not enabled as a unit: nvidia-fabricmanager.service starts it through "
        "nvidia-fabricmanager-start.sh; the image needs the nvlsm package (same release "
        "train as the driver) installed"
    )


@rule("gpu.imex", vendors=(GpuVendor.NVIDIA,))
def imex(facts: Facts, profile: Profile) -> Output:
    """Run nvidia-imex on trays of a multi-node NVLink domain (GB200 NVL72 compute trays).

    IMEX guide (docs.nvidia.com/multi-node-nvlink-systems/imex-guide): GPU memory is exported and
    imported across the trays of an NVLink domain only through the IMEX daemon; NVIDIA DeepOps
    enables nvidia-imex.service on GB200/GB300 (roles/nvidia-dgx/vars/ubuntu-24.04.yml).
    """
    if not facts.has_gpus or not (trays := _multi_node_nvlink(facts)):
        return
    yield service(
        "nvidia-imex.service",
        "enable",
        f"{trays} share GPU memory with the other trays of the NVLink domain only "
        "through IMEX; the daemon also needs the domain's node list "
        "(/etc/nvidia-imex/nodes_config.cfg), which is site-specific and not generated",
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


# RDMA drivers that MLNX_OFED / DOCA-OFED extend with the PeerDirect API
# (ib_register_peer_memory_client) that nvidia-peermem plugs into: ConnectX and BlueField (mlx5).
PEERDIRECT_DRIVERS = frozenset({"mlx5_core"})


def _peerdirect(nic: NicFacts) -> bool:
    return nic.model is not None and nic.model.driver in PEERDIRECT_DRIVERS


def _stack(nic: NicFacts) -> str:
    """The NIC and its RDMA driver as the catalog knows it."""
    if nic.model is None:
        return f"{nic.name} (model not given)"
    return f"{nic.name} ({nic.model.rdma_driver or nic.model.driver})"


@rule("gpu.peermem", vendors=(GpuVendor.NVIDIA,))
def peermem(facts: Facts, profile: Profile) -> Output:
    """Load nvidia-peermem for GPUDirect RDMA, only for NICs on NVIDIA's PeerDirect stack.

    nvidia-peermem is a client of the PeerDirect API that MLNX_OFED / DOCA-OFED add to the mlx5
    (ConnectX, BlueField) RDMA stack; other RDMA NICs (Broadcom bnxt_re, Intel irdma) reach GPU
    memory through DMA-BUF (Linux >= 5.12, open GPU kernel modules, CUDA >= 11.7), which NVIDIA
    now recommends over nvidia-peermem everywhere (GPU Operator docs, "GPUDirect RDMA and GPUDirect
    Storage"). Keyed on the catalog's NIC driver, not on `rdma: true`.
    """
    if not facts.has_gpus:
        return
    rdma = facts.rdma_nics
    if not rdma:
        yield note("no RDMA NIC: GPUDirect RDMA (nvidia-peermem) does not apply")
        return
    others = [nic for nic in rdma if not _peerdirect(nic)]
    if others:
        yield note(
            f"GPUDirect RDMA for {', '.join(_stack(nic) for nic in others)} goes through "
            "DMA-BUF (Linux >= 5.12 with the open GPU kernel modules), not nvidia-peermem, "
            "which only serves the mlx5 PeerDirect stack of MLNX_OFED/DOCA-OFED"
        )
    if peerdirect := [nic.name for nic in rdma if _peerdirect(nic)]:
        yield load_module(
            "nvidia-peermem",
            f"GPUDirect RDMA: NICs {', '.join(peerdirect)} (mlx5) read and write GPU "
            "memory without a bounce through host RAM via MLNX_OFED/DOCA-OFED "
            "PeerDirect; with the inbox mlx5 stack the module does not load and "
            f"DMA-BUF applies instead; loaded by {GPU_UNIT} once the "
            "NVIDIA driver provides it",
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
    if not _nvlink5_baseboard(facts):
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
