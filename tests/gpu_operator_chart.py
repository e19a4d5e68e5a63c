# ruff: noqa: E501 -- quoted verbatim
"""Excerpts of the NVIDIA GPU Operator's Helm chart, quoted verbatim (lines cut out are marked),
so a test checks the values file a bundle writes against the chart it is for.

NVIDIA/gpu-operator@a22dbf671f2e26f9a1e342f8eea28e196235e110 deployments/gpu-operator/values.yaml,
lines 25-35, 134-166, 229-230, 370-371, 418-427; the enums from api/nvidia/v1/clusterpolicy_types.go
(kubebuilder:validation:Enum of kernelModuleType and mig.strategy).
"""

from __future__ import annotations

CHART_COMMIT = "a22dbf67"

VALUES_EXCERPT = """\
hostPaths:
  # rootFS represents the path to the root filesystem of the host.
  # This is used by components that need to interact with the host filesystem
  # and as such this must be a chroot-able filesystem.
  # Examples include the MIG Manager and Toolkit Container which may need to
  # stop, start, or restart systemd services
  rootFS: "/"

  # driverInstallDir represents the root at which driver files including libraries,
  # config files, and executables can be found.
  driverInstallDir: "/run/nvidia/driver"
mig:
  strategy: single

driver:
  enabled: true
  nvidiaDriverCRD:
    enabled: false
    deployDefaultCR: true
    driverType: gpu
    nodeSelector: {}
  kernelModuleType: "auto"

  # NOTE: useOpenKernelModules has been deprecated and made no-op. Please use kernelModuleType instead.
  # useOpenKernelModules: false

  # use pre-compiled packages for NVIDIA driver installation.
  # only supported for as a tech-preview feature on ubuntu22.04 kernels.
  usePrecompiled: false
  repository: nvcr.io/nvidia
  image: driver
  version: "595.91.07"
  imagePullPolicy: IfNotPresent
  imagePullSecrets: []
  startupProbe:
    initialDelaySeconds: 60
    periodSeconds: 10
    # nvidia-smi can take longer than 30s in some cases
    # ensure enough timeout is set
    timeoutSeconds: 60
    failureThreshold: 120
  rdma:
    enabled: false
    useHostMofed: false
toolkit:
  enabled: true
migManager:
  enabled: true
  # (lines 372-417 cut)
  config:
  config:
    default: "all-disabled"
    # Create a ConfigMap (default: false)
    create: false
    # ConfigMap name (either existing or to create with create=true)
    # If name is provided, mig-manager will use this config instead of auto-generated one.
    # REQUIREMENT: Custom ConfigMaps must contain a key named "config.yaml"
    name: ""
    # Data section for the ConfigMap (required only if create=true)
"""

ENUMS = {
    "driver.kernelModuleType": ("auto", "open", "proprietary"),
    "mig.strategy": ("none", "single", "mixed"),
}
