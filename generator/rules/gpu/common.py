"""What several GPU rules say of the machine's GPUs (their models, their NVLink baseboard)."""

from __future__ import annotations

from generator.inputs.facts import Facts


def models_of(facts: Facts) -> str:
    return ", ".join(f"{group.count}x {group.model.key}" for group in facts.gpus)


def nvlink5_baseboard(facts: Facts) -> bool:
    """An NVSwitch baseboard of NVLink 5 GPUs (HGX/DGX B200 and later): 4th-gen NVSwitch."""
    generations = [group.model.nvlink_generation or 0 for group in facts.gpus]
    return facts.nvswitch and max(generations, default=0) >= 5


# The NVIDIA GPU Operator's driver container (os.driver nvidia-gpu-operator), read at
# NVIDIA/gpu-driver-container@06a208ca ubuntu22.04/nvidia-driver: _start_daemons runs
# `nvidia-persistenced --persistence-mode` and, on NVSwitch systems, nv-fabricmanager (and NVLSM);
# with driver.rdma.enabled it loads nvidia-peermem (`chroot /run/nvidia/driver modprobe
# nvidia-peermem`); it installs with --no-nouveau-check and neither blacklists nor unloads nouveau.
DRIVER_CONTAINER = "NVIDIA/gpu-driver-container@06a208ca ubuntu22.04/nvidia-driver"
# ClusterPolicy values (NVIDIA/gpu-operator@a22dbf67 deployments/gpu-operator/values.yaml)
OPERATOR_VALUES = "NVIDIA/gpu-operator@a22dbf67 deployments/gpu-operator/values.yaml"


def nvidia_operator_driver(facts: Facts) -> bool:
    """The NVIDIA GPU Operator's driver container delivers the driver (os.driver)."""
    return facts.os.driver == "nvidia-gpu-operator"
