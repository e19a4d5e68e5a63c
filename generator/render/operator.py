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


# The host's AMD GPU clients (layout.AMD_GPU_CLIENT_UNITS), never the workloads': the manager
# runs as a pod, and stopping kubelet or the container runtime would stop it too. In the order
# of AMD's own config (the exporter, After=gpuagent.service, before gpuagent: ROCm/gpu-operator
# internal/configmanager/default_dcm_config.json), then the ROCm Data Center daemon.
DCM_STOPPED_CLIENTS = ("amd-metrics-exporter.service", "gpuagent.service", "rdc.service")


def dcm_owns(plan: Plan) -> bool:
    """The plan has AMD partition modes and the AMD GPU Operator's device config manager applies
    them (os.driver amd-gpu-operator)."""
    return plan.driver == "amd-gpu-operator" and any(
        s.key in layout.DCM_ACTIONS for s in plan.of_kind("gpu")
    )


def dcm_context(plan: Plan) -> dict[str, Any]:
    """The device config manager's config.json: one profile, the plan's modes on every GPU
    (numGPUsAssigned: the node's GPU count, as its profile checks want), and the GPU clients it
    stops around a change (gpuClientSystemdServices: unit names without .service, as in its
    default config, internal/configmanager/default_dcm_config.json)."""
    partitions = {s.key: s for s in plan.of_kind("gpu") if s.key in layout.DCM_ACTIONS}
    entry: dict[str, Any] = {}
    if compute := partitions.get("compute-partition"):
        entry["computePartition"] = compute.value
    if memory := partitions.get("memory-partition"):
        entry["memoryPartition"] = memory.value
    entry["numGPUsAssigned"] = plan.amd_gpus
    name = mig_config_name(plan)
    config = {
        "gpu-config-profiles": {name: {"profiles": [entry]}},
        "gpuClientSystemdServices": {
            "names": [unit.removesuffix(".service") for unit in DCM_STOPPED_CLIENTS]
        },
    }
    return {
        "dcm_config_json": json.dumps(config, indent=2).splitlines(),
        "dcm_config_map": layout.DCM_CONFIG_MAP,
        "dcm_profile": name,
        "dcm_label": layout.DCM_PROFILE_LABEL,
        "dcm_reasons": list(partitions.values()),
        "dcm_missing": [key for key in ("computePartition", "memoryPartition") if key not in entry],
    }
