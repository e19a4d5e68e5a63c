"""What several GPU rules say of the machine's GPUs (their models, their NVLink baseboard)."""

from __future__ import annotations

from generator.inputs.facts import Facts


def models_of(facts: Facts) -> str:
    return ", ".join(f"{group.count}x {group.model.key}" for group in facts.gpus)


def nvlink5_baseboard(facts: Facts) -> bool:
    """An NVSwitch baseboard of NVLink 5 GPUs (HGX/DGX B200 and later): 4th-gen NVSwitch."""
    generations = [group.model.nvlink_generation or 0 for group in facts.gpus]
    return facts.nvswitch and max(generations, default=0) >= 5
