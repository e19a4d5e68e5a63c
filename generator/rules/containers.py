"""Containers: the runtime's own limits, the NVIDIA runtime for GPU containers, /dev/shm.

Only when the profile asks for a runtime (``containers: containerd | docker``). Docker runs its
containers through containerd.service (Debian's docker.io and Docker's own packages both), so a
docker profile gets the limits drop-in on both units.
"""

from __future__ import annotations

from generator.inputs.facts import Facts
from generator.inputs.profile import DEFAULT_ORIGIN, Profile
from generator.model.containerd import config_version, cri_runtime_table
from generator.model.kernel import NR_OPEN_DEFAULT
from generator.model.vendors import GpuVendor
from generator.rules.base import (
    Output,
    containerd_option,
    docker_option,
    note,
    rule,
    unit_dropin,
)
from generator.rules.gpu.common import nvidia_operator_driver
from generator.rules.limits import amd_only

# The runtime's open-file limit, soft and hard: the value limits.nofile gives logins and the hard
# limit of every other service, fs.nr_open's default. Soft = hard, unlike DefaultLimitNOFILE's soft
# 1024 (systemd.exec(5): select(2)), because a container inherits it and Kubernetes offers no
# per-pod rlimit: the workloads in GPU containers are the ones that need it.
RUNTIME_NOFILE = NR_OPEN_DEFAULT
NVIDIA_RUNTIME = "nvidia"
# Where nvidia-container-toolkit installs the runtime shim (its Debian/RPM packages).
NVIDIA_RUNTIME_BINARY = "/usr/bin/nvidia-container-runtime"
SHM_FLOOR_GIB = 8  # the article's `--shm-size=8g` for PyTorch DataLoader workers and NCCL
SHM_RAM_SHARE = 32  # above 256 GiB of RAM: 1/32 of it


def runtime_units(profile: Profile) -> tuple[str, ...]:
    """The units whose processes are the parents of every container of this profile."""
    if profile.containers == "containerd":
        return ("containerd.service",)
    if profile.containers == "docker":
        return ("docker.service", "containerd.service")
    return ()


@rule("containers.runtime-limits", vendors=(GpuVendor.NVIDIA, GpuVendor.AMD))
def runtime_limits(facts: Facts, profile: Profile) -> Output:
    """The runtime's locked-memory, open-file and task limits, which its containers inherit."""
    locked = (
        "RDMA registration (RCCL's IB transport) fails"
        if amd_only(facts)
        else "CUDA pinned host memory and RDMA registration fail"
    )
    for unit in runtime_units(profile):
        yield unit_dropin(
            unit,
            "LimitMEMLOCK",
            "infinity",
            f"containers inherit the runtime's limits: {locked} under a memlock cap "
            "(DefaultLimitMEMLOCK does not reach a unit that sets its own)",
        )
        yield unit_dropin(
            unit,
            "LimitNOFILE",
            RUNTIME_NOFILE,
            "containers get the runtime's soft and hard limits (the CRI plugin drops the "
            "spec's rlimits: containerd WithoutDefaultSecuritySettings) and a pod spec "
            "cannot set one, so soft = hard here: the systemd default 1024:524288 that "
            "containerd 2.0's unit relies on (containerd PR 8924) fails Python data "
            "loaders, which never raise their own soft limit, with EMFILE; bounded, "
            "not infinity, which resolves to fs.nr_open (2^30 with systemd >= 240) and "
            "slows programs that walk every descriptor",
        )
        yield unit_dropin(
            unit,
            "TasksMax",
            "infinity",
            "the runtime's cgroup holds a shim per container; DefaultTasksMax (15% "
            "of pid_max) would cap container starts on a dense node; the value "
            "upstream containerd.service ships",
        )


# What the GPU Operator's toolkit container (nvidia-ctk-installer) writes, so that goldtune never
# writes the same keys: NVIDIA/nvidia-container-toolkit cmd/nvidia-ctk-installer/container/
# runtime/containerd/containerd.go (DefaultDropInConfig), pkg/config/engine/containerd/config.go
# AddRuntimeWithOptions, containerd.go getBaseDropInConfigTree; runtime/runtime.go
# (set-as-default on by default); gpu-operator assets/state-container-toolkit (toolkit root
# /usr/local/nvidia).
OPERATOR_CONTAINERD = (
    "the GPU Operator's toolkit writes /etc/containerd/conf.d/99-nvidia.toml (a copy of the whole "
    'plugins."io.containerd.grpc.v1.cri" table, containerd issue 5837) with runtimes.nvidia '
    "(runc's options copied, BinaryName under /usr/local/nvidia/toolkit) and "
    'default_runtime_name = "nvidia", and adds it to imports in config.toml (with a version 1 '
    "config.toml it edits that file instead): goldtune writes none of these keys and no CRI "
    "table, so the Operator's copy is the only one. SystemdCgroup comes from runc's options in "
    "config.toml, which must have it true to match kubelet's cgroupDriver systemd"
)
OPERATOR_DOCKER = (
    "the GPU Operator's toolkit writes runtimes.nvidia and default-runtime into "
    "/etc/docker/daemon.json: goldtune leaves both out of its daemon.json, whose keys install.sh "
    "merges into the file in place, so the Operator's entries stay"
)


def containerd_major(facts: Facts) -> int | None:
    """The containerd major the target distribution ships (its table's containerd.major); None
    where no distribution is named or its table does not say: the portable version 2 form."""
    distro = facts.os.distro
    return distro.containerd.major if distro and distro.containerd else None


CONTAINERD_READ_V2 = (
    "containerd reads this drop-in only through an imports entry of "
    "/etc/containerd/config.toml (LoadConfig follows the imports of the files it "
    "loaded; 2.2 puts conf.d/*.toml only in what `containerd config default` prints, "
    "PR 12323): install.sh adds the entry (a minimal config.toml where there is none) "
    "and, since 1.x replaces a plugin's whole table with an imported file's "
    "(containerd issue 5837), carries config.toml's own "
    'plugins."io.containerd.grpc.v1.cri" tables into the drop-in; the cloud-init '
    "first boot does neither (the user-data's size): build the image with install.sh"
)
CONTAINERD_READ_V3 = (
    "the drop-in is version 3, containerd 2's own form (the CRI runtime options under "
    'plugins."io.containerd.cri.v1.runtime"); containerd reads it only through an imports entry '
    "of /etc/containerd/config.toml (LoadConfig): install.sh adds the entry (a minimal version 3 "
    "config.toml where there is none) and writes the drop-in as version 2 where the image's "
    "config.toml is version 2 (Debian packages one): containerd 2.0 to 2.2 migrate the merged "
    "configuration once, by the version of the last file read, so a version 3 drop-in would "
    "leave config.toml's CRI tables unmigrated, and 2.3 refuses a drop-in newer than its "
    "config.toml; a version 3 config.toml's CRI tables are not carried (2.x merges plugin "
    "tables key by key). The cloud-init first boot does none of this and installs the drop-in "
    "as version 3 (the user-data's size): build an image whose config.toml is version 2 with "
    "install.sh"
)


def containerd_nvidia_runtime(major: int | None, why: str) -> Output:
    """The NVIDIA runtime as the CRI default, in the configuration form of the target's
    containerd (generator/model/containerd.py: version 3 for 2.x, version 2 otherwise)."""
    cri = cri_runtime_table(major)
    yield containerd_option(f"{cri}.default_runtime_name", NVIDIA_RUNTIME, why)
    runtime = f"{cri}.runtimes.{NVIDIA_RUNTIME}"
    yield containerd_option(
        f"{runtime}.runtime_type",
        "io.containerd.runc.v2",
        "the runc shim v2, which the NVIDIA runtime wraps",
    )
    yield containerd_option(
        f"{runtime}.options.BinaryName",
        NVIDIA_RUNTIME_BINARY,
        "nvidia-container-runtime injects the driver's devices and libraries, then runs runc",
    )
    yield containerd_option(
        f"{runtime}.options.SystemdCgroup",
        True,
        "the systemd cgroup driver, the one kubelet's cgroupDriver names "
        "here: both sides of the CRI must agree or pods fail to start",
    )
    yield note(CONTAINERD_READ_V3 if config_version(major) == 3 else CONTAINERD_READ_V2)


def operator_owns_runtime(facts: Facts, profile: Profile) -> bool:
    """The GPU Operator's toolkit container writes the runtime's NVIDIA keys: the profile says so,
    or the Operator delivers the driver (os.driver) and the profile leaves runtime_config at its
    default. The Operator deploys its toolkit with the driver unless told not to (gpu-operator
    deployments/gpu-operator/values.yaml toolkit.enabled: true), and a driver in
    /run/nvidia/driver needs the toolkit that knows that root; a host runtime of goldtune's
    naming would compete with it."""
    if profile.runtime_config == "gpu-operator":
        return True
    return nvidia_operator_driver(facts) and profile.origins["runtime_config"] == DEFAULT_ORIGIN


@rule("containers.nvidia-runtime", vendors=(GpuVendor.NVIDIA,))
def nvidia_runtime(facts: Facts, profile: Profile) -> Output:
    """The NVIDIA container runtime as the default runtime, so GPU containers get their devices.

    Only where goldtune owns the runtime's configuration (knob runtime_config: goldtune). With the
    GPU Operator (gpu-operator) its toolkit container installs the runtime under
    /usr/local/nvidia/toolkit and writes the runtime keys itself; a default runtime of goldtune's
    naming /usr/bin/nvidia-container-runtime, absent there, would fail every pod sandbox, and a
    CRI table of goldtune's would compete with the Operator's copy. The runtime binary is a
    ``require`` of install.list where goldtune names it (install_list.image_requirements).
    """
    if profile.containers == "none":
        return
    if not facts.has_gpus:
        yield note("no NVIDIA GPU: the NVIDIA container runtime is not configured")
        return
    if operator_owns_runtime(facts, profile):
        knob = (
            "runtime_config: gpu-operator"
            if profile.runtime_config == "gpu-operator"
            else "os.driver: nvidia-gpu-operator (runtime_config left at its default; its "
            "toolkit container is on unless the ClusterPolicy turns it off: set "
            "runtime_config: goldtune to keep goldtune's)"
        )
        yield note(
            f"{knob}: "
            + (OPERATOR_CONTAINERD if profile.containers == "containerd" else OPERATOR_DOCKER)
        )
        return
    why = (
        "the NVIDIA device plugin hands GPUs to containers through the NVIDIA runtime, which "
        "must be the default (k8s-device-plugin README); non-GPU containers pass through it "
        "to runc unchanged"
    )
    if profile.containers == "containerd":
        yield from containerd_nvidia_runtime(containerd_major(facts), why)
        return
    yield docker_option(
        "default-runtime",
        NVIDIA_RUNTIME,
        "containers that choose GPUs by NVIDIA_VISIBLE_DEVICES (NGC images, "
        "compose files without device requests) get them only through the NVIDIA "
        "runtime; `docker run --gpus` works either way, other containers pass "
        "through to runc",
    )
    yield docker_option(
        f"runtimes.{NVIDIA_RUNTIME}.path",
        NVIDIA_RUNTIME_BINARY,
        "nvidia-container-runtime injects the driver's devices and libraries, then runs runc",
    )


AMD_RUNTIME = "amd"
# what `amd-ctk runtime configure` writes (ROCm/container-toolkit cmd/amd-ctk/runtime/configure:
# defaultAmdRuntimeName, defaultAmdRuntimeExecutable; the packages install /usr/bin/...)
AMD_RUNTIME_BINARY = "amd-container-runtime"


@rule("containers.amd-runtime", vendors=(GpuVendor.AMD,))
def amd_runtime(facts: Facts, profile: Profile) -> Output:
    """The AMD container runtime in Docker, as AMD's container toolkit configures it.

    ``amd-ctk runtime configure`` adds ``runtimes.amd.path = amd-container-runtime`` to
    /etc/docker/daemon.json and sets ``default-runtime`` only with ``--amd-set-as-default``
    (ROCm/container-toolkit cmd/amd-ctk/runtime/configure/configure.go, engine/docker/docker.go);
    containers ask for it with ``--runtime=amd``. It configures Docker alone ("target runtime
    engine, [docker for now]"; any other --runtime is "unsupported runtime engine"): containerd
    reaches AMD GPUs through the CDI spec ``amd-ctk cdi generate`` writes (/etc/cdi/amd.json;
    nerdctl and ctr --device, docs/container-runtime/running-workloads.rst), and Kubernetes pods
    through the AMD GPU device plugin, which hands them /dev/kfd and /dev/dri; neither needs a
    runtime entry in containerd's configuration, so goldtune writes none.
    """
    if profile.containers == "none" or not facts.has_gpus:
        return
    if profile.containers == "containerd":
        yield note(
            "containerd: no AMD runtime is configured: AMD's container toolkit configures Docker "
            'only (amd-ctk runtime configure: "unsupported runtime engine" for any other); '
            "containerd reaches AMD GPUs through the CDI spec amd-ctk cdi generate writes "
            "(/etc/cdi/amd.json), pods through the AMD GPU device plugin, which hands them "
            "/dev/kfd and /dev/dri"
        )
        return
    yield docker_option(
        f"runtimes.{AMD_RUNTIME}.path",
        AMD_RUNTIME_BINARY,
        "AMD's container toolkit registers its runtime under this name, as amd-ctk runtime "
        "configure does; containers ask for it with --runtime=amd (not the default runtime, "
        "which AMD sets only with --amd-set-as-default)",
    )


@rule("containers.amd-devices", vendors=(GpuVendor.AMD,))
def amd_devices(facts: Facts, profile: Profile) -> Output:
    """Say why no device permission rule is written for /dev/kfd and /dev/dri/renderD*.

    ROCm's runtimes use /dev/kfd, shared by all GPUs, and one /dev/dri/renderD<N> per GPU (ROCm
    docs, "Running ROCm Docker containers"); a container gets them with --device, a pod from the
    AMD GPU device plugin, which runs privileged and asks of the node only the amdgpu driver
    (ROCm/k8s-device-plugin README, "System Requirements"; k8s-ds-amdgpu-dp.yaml). AMD asks of
    the users who run containers membership of the render and video groups (ROCm/container-
    toolkit docs/container-runtime/requirements.rst, "User Permissions"). The groups are already
    the devices': systemd's udev rules give /dev/kfd and /dev/dri/renderD* group render with
    mode group-render-mode (rules.d/50-udev-default.rules.in; meson_options.txt: 0666 upstream,
    a distribution may build 0660), since v236 (PR 7112), so on Debian, Ubuntu and RHEL 8+
    nothing is left for a udev rule of goldtune's; who is in which group is the site's choice.
    """
    if not facts.has_gpus:
        return
    yield note(
        "no udev rule for /dev/kfd and /dev/dri/renderD*: systemd's 50-udev-default.rules "
        "already gives both to group render (mode 0666 upstream, 0660 where the distribution "
        "builds it so); the AMD GPU device plugin runs privileged and needs only the amdgpu "
        "driver on the node; users who run ROCm containers belong in the render and video groups "
        "(AMD Container Toolkit, System Requirements), which goldtune leaves to the site"
    )


def shm_size_gib(facts: Facts) -> int:
    return max(SHM_FLOOR_GIB, facts.memory_gib // SHM_RAM_SHARE)


@rule("containers.shm")
def shm(facts: Facts, profile: Profile) -> Output:
    """A /dev/shm large enough for DataLoader workers and NCCL's shared-memory transport."""
    if profile.containers == "docker":
        size = shm_size_gib(facts)
        yield docker_option(
            "default-shm-size",
            f"{size}G",
            "docker's 64M /dev/shm makes DataLoader workers and NCCL's intra-node "
            f"transport fail with 'No space left on device'; {size}G "
            f"({SHM_FLOOR_GIB}G or 1/{SHM_RAM_SHARE} of RAM) is a ceiling: tmpfs "
            "pages count against the container's memory only when written",
        )
        yield docker_option(
            "default-ulimits.memlock.Name",
            "memlock",
            "containers get the runtime's memlock limit only without a "
            "default-ulimits entry; stated so `docker run` needs no --ulimit",
        )
        yield docker_option(
            "default-ulimits.memlock.Soft",
            -1,
            "unlimited locked memory for pinned host buffers (the article's --ulimit memlock=-1)",
        )
        yield docker_option(
            "default-ulimits.memlock.Hard",
            -1,
            "unlimited locked memory for pinned host buffers (the article's --ulimit memlock=-1)",
        )
    if profile.kubernetes:
        yield note(
            "Kubernetes pods get the runtime's 64 MiB /dev/shm whatever the node says: a "
            "GPU pod must mount an emptyDir with medium: Memory (and a sizeLimit) at "
            "/dev/shm; its pages count against the pod's memory limit"
        )
    elif profile.containers == "containerd":
        yield note(
            "containerd has no default /dev/shm size: give `nerdctl run --shm-size` (or "
            "--ipc=host) to GPU containers"
        )
