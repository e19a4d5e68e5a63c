"""The NVIDIA GPU Operator's Helm values that a plan for its driver decides (os.driver
nvidia-gpu-operator), written as gpu-operator/values.yaml for the site to apply with the chart.

What the Operator owns on such a node is set in its ClusterPolicy, not on the node: the driver's
kernel module flavour, GPUDirect RDMA (nvidia-peermem), how MIG devices are advertised, whether its
container toolkit is deployed, where the driver root is. Each path below is a key of
NVIDIA/gpu-operator@a22dbf67 deployments/gpu-operator/values.yaml (OPERATOR_CHART), with the
values the ClusterPolicy CRD accepts (api/nvidia/v1/clusterpolicy_types.go kubebuilder enums:
kernelModuleType auto|open|proprietary, mig.strategy none|single|mixed). A value the plan has no
reason to change is not written: the chart's default stands, and the values file says so.
"""

from __future__ import annotations

from collections.abc import Iterator

from generator import TOOL
from generator.inputs.facts import Facts
from generator.inputs.profile import Profile
from generator.model import layout
from generator.model.setting import OperatorValue, Setting
from generator.plan.module_flavour import open_module_models
from generator.rules.containers import operator_owns_runtime
from generator.rules.gpu.fabric import peerdirect_nics

OPERATOR_CHART = layout.OPERATOR_CHART
MIG_CONFIG_MAP = layout.MIG_CONFIG_MAP


def operator_values(
    facts: Facts, profile: Profile, settings: tuple[Setting, ...]
) -> tuple[OperatorValue, ...]:
    """The chart values of a plan whose NVIDIA driver the GPU Operator delivers; () otherwise."""
    if facts.os.driver != "nvidia-gpu-operator" or not facts.has_nvidia_gpus:
        return ()
    return tuple(_values(facts, profile, settings))


def _values(
    facts: Facts, profile: Profile, settings: tuple[Setting, ...]
) -> Iterator[OperatorValue]:
    yield OperatorValue(
        "hostPaths.driverInstallDir",
        layout.OPERATOR_DRIVER_ROOT,
        f"{TOOL}-gpu.service runs nvidia-smi in this driver root (the chart's default, restated: "
        "a site that moves it must regenerate the bundle)",
    )
    yield OperatorValue(
        "driver.enabled",
        True,
        "os.driver nvidia-gpu-operator: the image has no host driver, the Operator's driver "
        "container loads it",
    )
    if models := open_module_models(facts):
        yield OperatorValue(
            "driver.kernelModuleType",
            "open",
            f"{', '.join(models)}: only the open GPU kernel modules support Grace Hopper and "
            "Blackwell platforms (hardware_db kernel_modules; the chart's auto chooses by GPU "
            "and driver branch)",
        )
    if nics := peerdirect_nics(facts):
        yield OperatorValue(
            "driver.rdma.enabled",
            True,
            f"GPUDirect RDMA for NICs {', '.join(nics)} (mlx5 PeerDirect): the driver container "
            "then loads nvidia-peermem (chart default false); driver.rdma.useHostMofed is the "
            "site's: true where MLNX_OFED/DOCA-OFED is installed on the host",
        )
    yield from _mig_values(settings)
    owned = operator_owns_runtime(facts, profile)
    yield OperatorValue(
        "toolkit.enabled",
        owned,
        "its container toolkit configures the container runtime for the driver root"
        if owned
        else "runtime_config: goldtune: the bundle configures the host's NVIDIA container "
        "runtime, which the Operator's toolkit would overwrite",
    )


def _mig_values(settings: tuple[Setting, ...]) -> Iterator[OperatorValue]:
    """MIG on: the MIG manager reads the bundle's ConfigMap, and the strategy follows the layout
    (single: every MIG device of a node of one profile, advertised as nvidia.com/gpu; mixed: one
    resource per profile, nvidia.com/mig-<profile>; NVIDIA GPU Operator docs, "GPU Operator with
    MIG", and the k8s-device-plugin's MIG strategies)."""
    mode = next((s for s in settings if s.kind == "gpu" and s.key == "mig"), None)
    if mode is None:
        return
    yield OperatorValue(
        "migManager.config.name",
        MIG_CONFIG_MAP,
        f"the plan's MIG setting is in {layout.MIG_PARTED_CONFIG} (ConfigMap {MIG_CONFIG_MAP})",
    )
    layout_setting = next((s for s in settings if s.kind == "gpu" and s.key == "mig-layout"), None)
    if mode.value != "on" or layout_setting is None:
        return
    profiles = sorted(set(layout_setting.value.split(",")))
    strategy = "single" if len(profiles) == 1 else "mixed"
    yield OperatorValue(
        "mig.strategy",
        strategy,
        f"the layout has {'one profile' if strategy == 'single' else 'several profiles'} "
        f"({', '.join(profiles)}) on every GPU",
    )
