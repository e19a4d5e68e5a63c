"""Sharing a GPU: MIG layouts, AMD Instinct partitions, MPS."""

from __future__ import annotations

from generator import TOOL
from generator.inputs.facts import Facts
from generator.inputs.profile import Profile
from generator.model import mig as mig_layouts
from generator.model.layout import (
    DCM_CONFIG,
    DCM_CONFIG_MAP,
    DCM_PROFILE_LABEL,
    GPU_CLIENT_UNITS,
    GPU_UNIT,
    MIG_CONFIG_LABEL,
    MIG_PARTED_CONFIG,
    MPS_PIPE_DIR,
    MPS_UNIT,
)
from generator.model.vendors import GpuVendor
from generator.rules.base import Output, gpu_action, note, rule, service
from generator.rules.gpu.common import models_of, nvidia_operator_driver


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
    if nvidia_operator_driver(facts):
        yield note(
            f"MIG is the GPU Operator's MIG manager's: the plan's MIG settings below go to "
            f"{MIG_PARTED_CONFIG} (mig-parted config {TOOL}-{profile.name}), not to the boot "
            f"unit; apply it and label the node {MIG_CONFIG_LABEL}={TOOL}-{profile.name}"
        )
    else:
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


@rule("gpu.amd-partitions", vendors=(GpuVendor.AMD,))
def amd_partitions(facts: Facts, profile: Profile) -> Output:
    """AMD Instinct compute and memory partition modes, only when the profile asks.

    AMD's MI300X partitioning overview and quick-start guide (ROCm/amdgpu-docs
    docs/gpu-partitioning/mi300x/): the compute partition returns to SPX at every boot and every
    amdgpu reload, so the boot unit sets it each time; a memory partition change restarts the
    amdgpu driver with every GPU workload stopped, so the boot unit compares it and reports the
    command, never changes it; on MI300X the memory partitions may not outnumber the compute
    ones (NPS4 needs CPX).

    A mode the catalog does not list for a GPU here is bad input, as a MIG layout the GPU cannot
    hold is (plan/checks.py check_amd_partitions, exit 2): a note would leave the valid half of
    the request silently unset too (tuning-review-4 W-A3).
    """
    compute, memory = profile.gpu_compute_partition, profile.gpu_memory_partition
    if not facts.has_gpus or (compute is None and memory is None):
        return
    if facts.os.driver == "amd-gpu-operator":
        yield note(amd_operator_partitions_note(profile))
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
            f"the profile asks memory partition {memory} on {models_of(facts)}: compared at boot, "
            "a GPU in another mode reported with the amd-smi command; changing it restarts the "
            "amdgpu driver with every GPU workload stopped (AMD's MI300X partitioning "
            "quick-start guide), so the boot unit does not",
        )
    if compute is not None:
        yield gpu_action(
            "compute-partition",
            compute,
            f"the profile asks compute partition {compute} on {models_of(facts)}: set at each "
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


def amd_operator_partitions_note(profile: Profile) -> str:
    """With the AMD GPU Operator's driver (os.driver amd-gpu-operator) partitions are its device
    config manager's: it applies the profile of a ConfigMap that a node label names, stopping
    the GPU clients listed there first (ROCm/gpu-operator@6df13c17 docs/dcm/). The plan's modes
    go to that ConfigMap, not to the boot unit, which runs before KMM loads amdgpu."""
    return (
        f"AMD partitions are the AMD GPU Operator's device config manager's: the partition modes "
        f"below go to {DCM_CONFIG} (profile {TOOL}-{profile.name}), not to the boot unit; apply "
        f"it, set the DeviceConfig's spec.configManager.config.name to {DCM_CONFIG_MAP} and "
        f"label the node {DCM_PROFILE_LABEL}={TOOL}-{profile.name}"
    )
