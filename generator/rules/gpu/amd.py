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
