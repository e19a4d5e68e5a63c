"""The preflight unit's data (templates/scripts/preflight): where it writes what it found, the
ids it finds GPUs and NVSwitches by, and one line per claim of the plan
(generator/model/claims.py) with the settings made from it."""

from __future__ import annotations

from generator.model import layout
from generator.model.setting import Plan
from generator.model.vendors import NVSWITCH_DEVICE_IDS
from generator.render.datafile import DataLine, fixed_line, gpu_vendor_lines


def preflight_enabled(plan: Plan) -> bool:
    return any(s.key == layout.PREFLIGHT_UNIT for s in plan.of_kind("service"))


def result_line(plan: Plan) -> list[DataLine]:
    """``preflight<TAB>/run/<tool>/preflight`` for the units that skip what depends on a claim
    that failed; none when the plan has no preflight unit (then nothing is ever skipped)."""
    if not preflight_enabled(plan):
        return []
    why = (
        f"layout: what {layout.PREFLIGHT_UNIT} found at this boot; skip what a failed claim carries"
    )
    return [fixed_line(why, ("preflight", layout.PREFLIGHT_RESULT))]


def preflight_lines(plan: Plan) -> list[DataLine]:
    header = [
        fixed_line(
            f"layout: messages are tagged {layout.PREFLIGHT_LOG_TAG}",
            ("log-as", layout.PREFLIGHT_LOG_TAG),
        ),
        fixed_line(
            f"layout: what this boot found, for {layout.IRQ_UNIT}, {layout.GPU_UNIT} and verify",
            ("result", layout.PREFLIGHT_RESULT),
        ),
        *gpu_vendor_lines(plan.gpu_vendors),
        fixed_line(
            "vendors: NVSwitch PCI device ids (LR10, LS10: open-gpu-kernel-modules "
            "src/common/nvswitch/kernel/nvswitch.c)",
            ("nvswitch-ids", ",".join(f"0x{device}" for device in sorted(NVSWITCH_DEVICE_IDS))),
        ),
    ]
    claims = [
        fixed_line(
            f"hardware: {claim.name}, as the plan assumed it, and the settings made from it",
            ("claim", claim.name, claim.expected, ",".join(claim.depends) or "-"),
        )
        for claim in plan.claims
    ]
    return header + claims
