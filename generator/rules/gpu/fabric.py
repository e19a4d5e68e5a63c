"""The GPU fabric: NVSwitch fabric manager, NVLink subnet manager, IMEX, GPUDirect RDMA."""

from __future__ import annotations

from generator.inputs.facts import Facts, NicFacts
from generator.inputs.profile import Profile
from generator.model.layout import GPU_UNIT
from generator.model.vendors import GpuVendor
from generator.rules.base import Output, load_module, note, rule, service
from generator.rules.gpu.common import (
    DRIVER_CONTAINER,
    OPERATOR_VALUES,
    models_of,
    nvidia_operator_driver,
    nvlink5_baseboard,
)


def _multi_node_nvlink(facts: Facts) -> str:
    """The GPU models here that join a rack-wide NVLink domain (GB200 NVL72 trays), or ""."""
    return ", ".join(group.model.key for group in facts.gpus if group.model.multi_node_nvlink)


@rule("gpu.fabric-manager", vendors=(GpuVendor.NVIDIA,))
def fabric_manager(facts: Facts, profile: Profile) -> Output:
    """Run nvidia-fabricmanager on NVSwitch systems; NVLink does not come up without it.

    Not on a GB200 NVL72 compute tray: its NVLink switches sit in the rack's switch trays, whose
    NVOS runs the fabric manager and NVLSM (DGX GB200 user guide, networking; NVIDIA DeepOps
    ubuntu-24.04 platform table: GB200 "nvswitch: false, imex: true").
    """
    if not facts.has_gpus:
        return
    if trays := _multi_node_nvlink(facts):
        yield note(
            f"nvidia-fabricmanager not enabled: {trays} reach the rack's NVLink domain "
            "through external NVLink switch trays, which run the fabric manager and NVLSM; "
            "a compute tray runs nvidia-imex instead"
        )
        return
    if not facts.nvswitch:
        return
    if nvidia_operator_driver(facts):
        yield note(
            "nvidia-fabricmanager not enabled in the image: the GPU Operator's driver container "
            "runs nv-fabricmanager (and NVLSM) on NVSwitch systems "
            f"(_start_daemons, {DRIVER_CONTAINER})"
        )
        return
    why = (
        f"{models_of(facts)} connect through NVSwitch: without the fabric manager NVLink "
        "all-to-all never comes up and CUDA reports no peer access"
    )
    if nvlink5_baseboard(facts):
        why += (
            "; on NVLink 5 baseboards its start script (nvidia-fabricmanager-start.sh) also "
            "starts the NVLink subnet manager from the nvlsm package"
        )
    yield service("nvidia-fabricmanager.service", "enable", why)


@rule("gpu.nvlink-subnet-manager", vendors=(GpuVendor.NVIDIA,))
def nvlink_subnet_manager(facts: Facts, profile: Profile) -> Output:
    """Load ib_umad for the NVLink subnet manager on NVLink 5 NVSwitch baseboards.

    Fabric Manager user guide r2.3 ("Systems Using Fourth Generation NVSwitches", "What is NVLink
    Subnet Manager?"): DGX/HGX B200 and later need NVLSM besides the fabric manager, and the
    package's nvidia-fabricmanager-start.sh starts both, so NVLSM has no unit of its own.
    NVLSM is an OpenSM that reaches the NVSwitch management ports through /dev/infiniband/umad*;
    without ib_umad the fabric manager's precheck fails and GPUs stay in fabric state "In
    Progress" (spectrocloud/CanvOS PR #700 on HGX B200; NVIDIA's nvidia-base tuned profile loads
    ib_umad). Keyed on the GPU model's NVLink generation in hardware_db, not on a name.
    """
    if not facts.has_gpus or not nvlink5_baseboard(facts):
        return
    yield load_module(
        "ib_umad",
        f"{models_of(facts)} use 4th-gen NVSwitch: the NVLink subnet manager (NVLSM) "
        "reaches the switches through /dev/infiniband/umad*, and the fabric "
        "manager's precheck fails without it",
    )
    yield note(
        "NVLSM is not enabled as a unit: nvidia-fabricmanager.service starts it through "
        "nvidia-fabricmanager-start.sh; the image needs the nvlsm package (same release "
        "train as the driver) installed"
    )


@rule("gpu.imex", vendors=(GpuVendor.NVIDIA,))
def imex(facts: Facts, profile: Profile) -> Output:
    """Run nvidia-imex on trays of a multi-node NVLink domain (GB200 NVL72 compute trays).

    IMEX guide (docs.nvidia.com/multi-node-nvlink-systems/imex-guide): GPU memory is exported and
    imported across the trays of an NVLink domain only through the IMEX daemon; NVIDIA DeepOps
    enables nvidia-imex.service on GB200/GB300 (roles/nvidia-dgx/vars/ubuntu-24.04.yml).
    """
    if not facts.has_gpus or not (trays := _multi_node_nvlink(facts)):
        return
    yield service(
        "nvidia-imex.service",
        "enable",
        f"{trays} share GPU memory with the other trays of the NVLink domain only "
        "through IMEX; the daemon also needs the domain's node list "
        "(/etc/nvidia-imex/nodes_config.cfg), which is site-specific and not generated",
    )


# RDMA drivers that MLNX_OFED / DOCA-OFED extend with the PeerDirect API
# (ib_register_peer_memory_client) that nvidia-peermem plugs into: ConnectX and BlueField (mlx5).
PEERDIRECT_DRIVERS = frozenset({"mlx5_core"})


def _peerdirect(nic: NicFacts) -> bool:
    return nic.model is not None and nic.model.driver in PEERDIRECT_DRIVERS


def peerdirect_nics(facts: Facts) -> list[str]:
    """The RDMA NICs nvidia-peermem serves (the mlx5 PeerDirect stack), by name."""
    return [nic.name for nic in facts.rdma_nics if _peerdirect(nic)]


def _stack(nic: NicFacts) -> str:
    """The NIC and its RDMA driver as the catalog knows it."""
    if nic.model is None:
        return f"{nic.name} (model not given)"
    return f"{nic.name} ({nic.model.rdma_driver or nic.model.driver})"


@rule("gpu.peermem", vendors=(GpuVendor.NVIDIA,))
def peermem(facts: Facts, profile: Profile) -> Output:
    """Load nvidia-peermem for GPUDirect RDMA, only for NICs on NVIDIA's PeerDirect stack.

    nvidia-peermem is a client of the PeerDirect API that MLNX_OFED / DOCA-OFED add to the mlx5
    (ConnectX, BlueField) RDMA stack; other RDMA NICs (Broadcom bnxt_re, Intel irdma) reach GPU
    memory through DMA-BUF (Linux >= 5.12, open GPU kernel modules, CUDA >= 11.7), which NVIDIA
    now recommends over nvidia-peermem everywhere (GPU Operator docs, "GPUDirect RDMA and GPUDirect
    Storage"). Keyed on the catalog's NIC driver, not on `rdma: true`.
    """
    if not facts.has_gpus:
        return
    rdma = facts.rdma_nics
    if not rdma:
        yield note("no RDMA NIC: GPUDirect RDMA (nvidia-peermem) does not apply")
        return
    others = [nic for nic in rdma if not _peerdirect(nic)]
    if others:
        yield note(
            f"GPUDirect RDMA for {', '.join(_stack(nic) for nic in others)} goes through "
            "DMA-BUF (Linux >= 5.12 with the open GPU kernel modules), not nvidia-peermem, "
            "which only serves the mlx5 PeerDirect stack of MLNX_OFED/DOCA-OFED"
        )
    peerdirect = peerdirect_nics(facts)
    if peerdirect and nvidia_operator_driver(facts):
        yield note(
            f"nvidia-peermem for NICs {', '.join(peerdirect)} is the GPU Operator's: set "
            f"driver.rdma.enabled=true in its ClusterPolicy (default false, {OPERATOR_VALUES}) "
            f"and its driver container loads it ({DRIVER_CONTAINER})"
        )
    elif peerdirect:
        yield load_module(
            "nvidia-peermem",
            f"GPUDirect RDMA: NICs {', '.join(peerdirect)} (mlx5) read and write GPU "
            "memory without a bounce through host RAM via MLNX_OFED/DOCA-OFED "
            "PeerDirect; with the inbox mlx5 stack the module does not load and "
            f"DMA-BUF applies instead; loaded by {GPU_UNIT} once the "
            "NVIDIA driver provides it",
        )
