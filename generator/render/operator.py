"""What a bundle for an Operator-delivered NVIDIA driver hands to the GPU Operator.

The GPU Operator's MIG manager owns MIG on its nodes: it applies the mig-parted config that the
node label nvidia.com/mig.config names, from the ConfigMap the ClusterPolicy's
migManager.config.name names (key config.yaml; NVIDIA/gpu-operator@a22dbf67
controllers/state_manager.go migConfigLabelKey, deployments/gpu-operator/values.yaml
migManager.config, assets/state-mig-manager/0400_configmap.yaml for the format). So the plan's
MIG actions go there, not to the boot unit, which would fight it.
"""

from __future__ import annotations

import json
import textwrap
from collections import Counter
from typing import Any

from generator import TOOL
from generator.model import layout
from generator.model.setting import Plan

MIG_MANAGER_ACTIONS = layout.MIG_MANAGER_ACTIONS


def mig_manager_owns(plan: Plan) -> bool:
    """The plan has MIG actions and the Operator's MIG manager applies them."""
    return plan.driver == "nvidia-gpu-operator" and any(
        s.key in MIG_MANAGER_ACTIONS for s in plan.of_kind("gpu")
    )


def mig_config_name(plan: Plan) -> str:
    """The mig-parted config's name: the node label's value (a profile name is a label value)."""
    return f"{TOOL}-{plan.profile_name}"


def mig_parted_context(plan: Plan) -> dict[str, Any]:
    """The mig-parted config: MIG on with the layout's instances per profile, or MIG off."""
    layout_setting = plan.get("gpu", "mig-layout")
    mode = plan.get("gpu", "mig")
    counts = Counter(layout_setting.value.split(",")) if layout_setting else Counter[str]()
    return {
        "mig_config_name": mig_config_name(plan),
        "mig_config_map": layout.MIG_CONFIG_MAP,
        "mig_config_label": layout.MIG_CONFIG_LABEL,
        "mig_enabled": "true" if mode is not None and mode.value == "on" else "false",
        "mig_devices": sorted(counts.items()),
        "mig_reasons": [s for s in (mode, layout_setting) if s is not None],
    }


def values_lines(plan: Plan) -> list[str]:
    """The plan's GPU Operator chart values as YAML lines, each leaf after a comment with its
    reason; paths sorted, so keys under one parent stay together."""
    lines: list[str] = []
    opened: list[str] = []
    for value in sorted(plan.operator_values, key=lambda v: v.path):
        *parents, leaf = value.path.split(".")
        same = 0
        while same < min(len(parents), len(opened)) and parents[same] == opened[same]:
            same += 1
        lines += [f"{'  ' * depth}{parents[depth]}:" for depth in range(same, len(parents))]
        indent = "  " * len(parents)
        lines += [f"{indent}# {text}" for text in textwrap.wrap(value.reason, 96 - len(indent))]
        scalar = (
            str(value.value).lower() if isinstance(value.value, bool) else json.dumps(value.value)
        )
        lines.append(f"{indent}{leaf}: {scalar}")
        opened = parents
    return lines


def values_context(plan: Plan) -> dict[str, Any]:
    """The values file's lines and the chart they were checked against."""
    return {
        "operator_values_lines": values_lines(plan),
        "operator_chart": layout.OPERATOR_CHART,
        "operator_values_file": layout.OPERATOR_VALUES,
    }
