"""AMD Instinct decisions that have an NVIDIA counterpart the bundle cannot carry over as is."""

from __future__ import annotations

from generator.inputs.facts import Facts
from generator.inputs.profile import Profile
from generator.model.vendors import GpuVendor
from generator.rules.base import Output, note, rule
from generator.rules.gpu.common import models_of


@rule("gpu.amd-clocks", vendors=(GpuVendor.AMD,))
def amd_clocks(facts: Facts, profile: Profile) -> Output:
    """Say why ``gpu_clocks: lock-max`` sets no clock on AMD Instinct, and what AMD offers.

    NVIDIA's answer (gpu.clocks) locks the graphics clock at the model's maximum. AMD's nearest
    control is performance determinism: ``amd-smi set --perf-determinism <MHz>`` (amdgpu's
    ``perf_determinism`` performance level with a maximum graphics clock: Linux commit 6be6424,
    "drm/amd/pm: Enable performance determinism on aldebaran": "PMFW tries to maintain sustained
    performance level ... a max GFX frequency needs to be specified"; AMD SMI docs, conceptual
    "Performance levels and performance determinism"). It is a ceiling the firmware holds under
    the power cap, not a lock at the maximum, and its value is firmware-specific: AMD's MI300X
    training validation page sets 1900 MHz to lower the chance of a power-capping (PCC) event
    lowering the clocks, and says IFWI with PRC does not need it (ROCm docs 6.3.3, "Prerequisite
    system validation before training", as cited by tuning-review-4 D-A2; not re-read here). The
    hardware description does not carry the GPU's IFWI version, so a fixed value would be a
    guess: the bundle sets none and EXPLAIN.md says so, never dropping the request silently.
    """
    if not facts.has_gpus or profile.gpu_clocks != "lock-max":
        return
    yield note(
        f"gpu_clocks: lock-max sets no clock on {models_of(facts)}: NVIDIA's clock lock "
        "(nvidia-smi -lgc) has no AMD equal. AMD's nearest control is performance determinism "
        "(amd-smi set --perf-determinism <MHz>), a graphics-clock ceiling the firmware holds "
        "steady under the power cap, not a lock at the maximum; AMD's MI300X training "
        "validation sets 1900 MHz against power-capping (PCC) clock drops and says IFWI with "
        "PRC does not need it. The value depends on the GPU's firmware (IFWI), which the "
        "hardware description does not carry, so the bundle sets none: set it per firmware "
        "where AMD's page for that IFWI asks for it"
    )


@rule("gpu.amd-environment", vendors=(GpuVendor.AMD,))
def amd_environment(facts: Facts, profile: Profile) -> Output:
    """Say why the HIP/HSA variables AMD's guides list are not a host default here.

    AMD lists ``HIP_FORCE_DEV_KERNARG=1`` (ROCm's default since 6.2) and
    ``HSA_OVERRIDE_CPU_AFFINITY_DEBUG=0`` (ROCm's internal threads then keep the process's CPU
    affinity instead of all cores) as critical, to be made permanent in /etc/environment
    (ROCm/system-acceptance-docs docs/common/os-tuning.md, "Environment variables", 23e7312;
    mi300x.rst "Environment variables"). /etc/environment is read by pam_env for login sessions
    only: systemd services, container runtimes and Kubernetes pods take their environment from
    their unit or spec, so a host file would reach interactive shells and miss the jobs
    (tuning-review-4 D-A8). rccl.conf takes only NCCL_ variables. The note names them for the
    job or container environment, where a fleet sets them.

    RoCE (tuning-review-4 D-A8 names NCCL_IB_GID_INDEX and NCCL_IB_TC): RCCL picks the GID itself
    when NCCL_IB_GID_INDEX is unset (default -1: the RoCE v2 GID of an IPv4 address,
    NCCL_IB_ROCE_VERSION_NUM 2, NCCL_IB_ADDR_FAMILY AF_INET; ROCm/rccl src/transport/net_ib.cc
    ncclIbGetGidIndex, 0cbce2a), so no index is written; NCCL_IB_TC (default 0) is the fabric's
    lossless traffic class, a switch configuration the hardware description does not carry.
    """
    if not facts.has_gpus:
        return
    if roce := [nic.name for nic in facts.rdma_nics if nic.model and not nic.model.infiniband]:
        yield note(
            f"RoCE ports {', '.join(roce)}: NCCL_IB_GID_INDEX not written, RCCL picks the RoCE "
            "v2 GID of the port's IPv4 address itself (default -1; ROCm/rccl net_ib.cc "
            "ncclIbGetGidIndex); NCCL_IB_TC (default 0) is the fabric's lossless traffic "
            "class, set by the switch configuration, which the hardware description does "
            "not carry: set it in rccl.conf where the fabric needs one"
        )
    yield note(
        f"{models_of(facts)}: AMD's guides list HSA_OVERRIDE_CPU_AFFINITY_DEBUG=0 (ROCm's "
        "internal threads keep the process's CPU affinity) and HIP_FORCE_DEV_KERNARG=1 (the "
        "default since ROCm 6.2) for /etc/environment; the bundle writes no host default: that "
        "file reaches login sessions only (pam_env), not services, containers or pods, and "
        "rccl.conf takes only NCCL_ variables; set them in the job's or container's environment"
    )
