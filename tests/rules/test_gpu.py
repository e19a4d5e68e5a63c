"""gpu.*: nouveau, persistence, boot unit, ECC, compute mode, clocks, power, MIG, fabric, DCGM,
peermem."""

from __future__ import annotations

import pytest

from generator.model.layout import GPU_UNIT
from generator.rules import gpu
from generator.rules.base import Rule

from .helpers import (
    GRACE,
    H100X8,
    L4X1,
    MI300X8,
    Case,
    case_ids,
    check_case,
    facts,
    nic,
    notes_of,
    profile,
    rdma_compute,
    settings_of,
)

NOUVEAU = {
    ("modprobe", "blacklist nouveau", ""),
    ("modprobe", "options nouveau modeset", "0"),
    ("kernel-arg", "modprobe.blacklist", "nouveau"),
    ("kernel-arg", "rd.driver.blacklist", "nouveau"),
}
PERSISTENCED = "nvidia-persistenced.service"


def persistence(command: str) -> set[tuple[str, str, str]]:
    """What gpu.persistence proposes: the daemon enabled and wanted at boot, running COMMAND."""
    return {
        ("service", PERSISTENCED, "enable"),
        ("unit-dropin", f"{PERSISTENCED} ExecStart", command),
        ("unit-dropin", f"{PERSISTENCED} WantedBy", "multi-user.target"),
        ("gpu", "persistence", "on"),
    }


DAEMON = "/usr/bin/nvidia-persistenced"
MODE = "--persistence-mode --verbose"
GH200X1 = {"model": "GH200", "count": 1}
LOCK = {"gpu_clocks": "lock-max"}
FABRIC = {("service", "nvidia-fabricmanager.service", "enable")}
PEERMEM = {("module-load", "nvidia-peermem", "")}
H100X4 = {"model": "H100-SXM5-80GB", "count": 4}
L40SX4 = {"model": "L40S", "count": 4}
B200X8 = {"model": "B200", "count": 8}  # no clock in hardware_db
GB200X4 = {"model": "GB200", "count": 4}  # one NVL72 compute tray
GB200_TRAY = {**GRACE, "cpu": {**GRACE["cpu"], "sockets": 2}, "gpus": [GB200X4]}
IB_UMAD = {("module-load", "ib_umad", "")}
MPS = {("service", "goldtune-cuda-mps.service", "enable")}
IMEX = {("service", "nvidia-imex.service", "enable")}
NO_GPU_KNOBS = {
    "gpu_clocks": "lock-max",
    "gpu_compute_mode": "exclusive-process",
    "gpu_power_limit_percent": 80,
}

CASES: tuple[Case, ...] = (
    Case("nouveau-gpus", gpu.nouveau, NOUVEAU, hw={"gpus": [H100X8]}),
    Case("nouveau-no-gpu", gpu.nouveau, set()),
    # no distribution named: the program every table ships, and no --user (the packaged users
    # differ: Debian nvpd, Ubuntu nvidia-persistenced, NVIDIA's RHEL package none)
    Case("persistence-gpus", gpu.persistence, persistence(f"{DAEMON} {MODE}"), hw={"gpus": [L4X1]}),
    Case("persistence-no-gpu", gpu.persistence, set()),
    # Ubuntu's packaged unit is static and passes --no-persistence-mode: the drop-in replaces it
    # and keeps the packaged user
    Case(
        "persistence-ubuntu-24.04-drop-in-replaces-no-persistence-mode",
        gpu.persistence,
        persistence(f"{DAEMON} --user nvidia-persistenced {MODE}"),
        hw={"gpus": [L4X1], "os": {"distro": "ubuntu-24.04"}},
        note="the bundle's drop-in replaces ExecStart",
    ),
    Case(
        "persistence-debian-12-packaged-user-nvpd",
        gpu.persistence,
        persistence(f"{DAEMON} --user nvpd {MODE}"),
        hw={"gpus": [L4X1], "os": {"distro": "debian-12"}},
    ),
    # NVIDIA's RHEL package runs the daemon as root (no --user)
    Case(
        "persistence-rhel-9-as-packaged",
        gpu.persistence,
        persistence(f"{DAEMON} {MODE}"),
        hw={"gpus": [L4X1], "os": {"distro": "rhel-9"}},
    ),
    # a Grace superchip: root, whatever the distribution's package names (nvidia-persistenced#11)
    Case(
        "persistence-gh200-root",
        gpu.persistence,
        persistence(f"{DAEMON} --user root {MODE}"),
        hw={**GRACE, "gpus": [GH200X1], "os": {"distro": "ubuntu-24.04"}},
    ),
    Case(
        "persistence-gb200-root-portable",
        gpu.persistence,
        persistence(f"{DAEMON} --user root {MODE}"),
        hw=GB200_TRAY,
    ),
    Case(
        "boot-unit-gpus",
        gpu.boot_unit,
        {("service", "goldtune-gpu.service", "enable")},
        hw={"gpus": [L4X1]},
    ),
    Case("boot-unit-no-gpu", gpu.boot_unit, set()),
    Case("ecc-enable", gpu.ecc, {("gpu", "ecc", "on")}, hw={"gpus": [H100X8]}, intent="training"),
    Case("ecc-leave", gpu.ecc, set(), hw={"gpus": [H100X8]}, knobs={"gpu_ecc": "leave"}),
    Case("ecc-no-gpu", gpu.ecc, set()),
    # GDDR boards: ECC inline costs ~1/16 of VRAM; left as shipped unless an override asks
    Case("ecc-l4-gddr", gpu.ecc, set(), hw={"gpus": [L4X1]}, note="1/16 of VRAM"),
    Case("ecc-l40s-gddr", gpu.ecc, set(), hw={"gpus": [L40SX4]}, intent="training", note="L40S"),
    Case("ecc-mixed-gddr-hbm", gpu.ecc, set(), hw={"gpus": [L4X1, H100X4]}, note="L4"),
    Case("ecc-memory-type-unknown", gpu.ecc, {("gpu", "ecc", "on")}, hw={"gpus": [B200X8]}),
    Case("compute-mode-default", gpu.compute_mode, set(), hw={"gpus": [H100X8]}, note="DEFAULT"),
    Case(
        "compute-mode-exclusive",
        gpu.compute_mode,
        {("gpu", "compute-mode", "EXCLUSIVE_PROCESS")},
        hw={"gpus": [H100X8]},
        intent="training",
        knobs={"gpu_compute_mode": "exclusive-process"},
    ),
    Case(
        "compute-mode-no-gpu",
        gpu.compute_mode,
        set(),
        knobs={"gpu_compute_mode": "exclusive-process"},
    ),
    # clocks: the model's hardware_db value; max when unknown or when models disagree
    Case("clocks-h100", gpu.clocks, {("gpu", "clocks", "1980")}, hw={"gpus": [H100X8]}, knobs=LOCK),
    Case("clocks-l4", gpu.clocks, {("gpu", "clocks", "2040")}, hw={"gpus": [L4X1]}, knobs=LOCK),
    Case(
        "clocks-l40s-not-l4",
        gpu.clocks,
        {("gpu", "clocks", "2520")},
        hw={"gpus": [L40SX4]},
        knobs=LOCK,
    ),
    Case(
        "clocks-unknown-b200",
        gpu.clocks,
        {("gpu", "clocks", "max")},
        hw={"gpus": [B200X8]},
        knobs=LOCK,
    ),
    Case(
        "clocks-mixed-models",
        gpu.clocks,
        {("gpu", "clocks", "max")},
        hw={"gpus": [L4X1, L40SX4]},
        knobs=LOCK,
    ),
    Case(
        "clocks-same-clock-two-groups",
        gpu.clocks,
        {("gpu", "clocks", "1980")},
        hw={"gpus": [H100X4, {"model": "H200-SXM-141GB", "count": 4}]},
        knobs=LOCK,
    ),
    # boost: an earlier lock is reset, so a live switch to training does not keep it
    Case(
        "clocks-boost-resets-a-lock",
        gpu.clocks,
        {("gpu", "clocks", "reset")},
        hw={"gpus": [H100X8]},
        intent="training",
    ),
    Case("clocks-no-gpu", gpu.clocks, set(), knobs=LOCK),
    # power limit: always a percentage of each card's own default, read at boot (never catalog
    # watts: one A100 model has 400 W and 500 W boards)
    Case("power-unset", gpu.power_limit, set(), hw={"gpus": [H100X8]}),
    Case(
        "power-80pct-h100",
        gpu.power_limit,
        {("gpu", "power-limit", "80%")},
        hw={"gpus": [H100X8]},
        knobs={"gpu_power_limit_percent": 80},
    ),
    Case(
        "power-unknown-default",
        gpu.power_limit,
        {("gpu", "power-limit", "90%")},
        hw={"gpus": [L40SX4]},
        knobs={"gpu_power_limit_percent": 90},
    ),
    Case(
        "power-mixed-defaults",
        gpu.power_limit,
        {("gpu", "power-limit", "75%")},
        hw={"gpus": [L4X1, H100X4]},
        knobs={"gpu_power_limit_percent": 75},
    ),
    Case(
        "power-80pct-a100-not-320w",
        gpu.power_limit,
        {("gpu", "power-limit", "80%")},
        hw={"gpus": [{"model": "A100-SXM4-80GB", "count": 8}]},
        knobs={"gpu_power_limit_percent": 80},
    ),
    Case("power-no-gpu", gpu.power_limit, set(), knobs={"gpu_power_limit_percent": 80}),
    # MIG: only on request and on a MIG-capable model
    Case("mig-leave", gpu.mig, set(), hw={"gpus": [H100X8]}),
    Case(
        "mig-disable-h100",
        gpu.mig,
        {("gpu", "mig", "off")},
        hw={"gpus": [H100X8]},
        knobs={"gpu_mig": "disable"},
    ),
    Case(
        "mig-disable-l4",
        gpu.mig,
        set(),
        hw={"gpus": [L4X1]},
        knobs={"gpu_mig": "disable"},
        note="supports MIG",
    ),
    # a MIG layout: MIG on, then the instances largest first; nothing on GPUs without MIG
    Case(
        "mig-layout-h100",
        gpu.mig,
        {("gpu", "mig", "on"), ("gpu", "mig-layout", "3g.40gb,2g.20gb,1g.10gb,1g.10gb")},
        hw={"gpus": [H100X8]},
        knobs={"gpu_mig_layout": {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}},
    ),
    Case(
        "mig-layout-l4",
        gpu.mig,
        set(),
        hw={"gpus": [L4X1]},
        knobs={"gpu_mig_layout": {"1g.10gb": 1}},
        note="MIG layout requested, but no GPU here supports MIG",
    ),
    # MPS: only on request; the unit after the GPU unit; DEFAULT compute mode gets a note
    Case("mps-off-default", gpu.mps, set(), hw={"gpus": [H100X8]}),
    Case(
        "mps-on-compute-default",
        gpu.mps,
        MPS,
        hw={"gpus": [L4X1]},
        knobs={"gpu_mps": True},
        note="NVIDIA's MPS guide sets EXCLUSIVE_PROCESS",
    ),
    Case(
        "mps-on-exclusive",
        gpu.mps,
        MPS,
        hw={"gpus": [H100X8]},
        knobs={"gpu_mps": True, "gpu_compute_mode": "exclusive-process"},
    ),
    Case("mps-on-no-gpu", gpu.mps, set(), knobs={"gpu_mps": True}, note="no GPU"),
    # MPS with containers: the host daemon, and EXPLAIN says what a container must be given;
    # under Kubernetes the device plugin's own MPS daemon, never a second one on the host
    Case(
        "mps-on-docker",
        gpu.mps,
        MPS,
        hw={"gpus": [H100X8]},
        knobs={"gpu_mps": True, "gpu_compute_mode": "exclusive-process", "containers": "docker"},
        note="--ipc=host -v /run/nvidia-mps:/run/nvidia-mps -e CUDA_MPS_PIPE_DIRECTORY=",
    ),
    Case(
        "mps-on-kubernetes",
        gpu.mps,
        set(),
        hw={"gpus": [H100X8]},
        knobs={"gpu_mps": True, "containers": "containerd", "kubernetes": True},
        note="Configure sharing.mps in the device plugin",
    ),
    # fabric manager: NVSwitch only (stated, or the 8-GPU baseboard default)
    Case(
        "fabric-nvswitch-stated",
        gpu.fabric_manager,
        FABRIC,
        hw={"gpus": [H100X8], "nvswitch": True},
    ),
    Case("fabric-nvswitch-default-8x", gpu.fabric_manager, FABRIC, hw={"gpus": [H100X8]}),
    Case("fabric-4x-sxm-no-nvswitch", gpu.fabric_manager, set(), hw={"gpus": [H100X4]}),
    Case(
        "fabric-stated-false", gpu.fabric_manager, set(), hw={"gpus": [H100X8], "nvswitch": False}
    ),
    Case("fabric-pcie", gpu.fabric_manager, set(), hw={"gpus": [L40SX4]}),
    Case("fabric-no-gpu", gpu.fabric_manager, set(), hw={"nvswitch": True}),
    Case("fabric-nvlink5-baseboard", gpu.fabric_manager, FABRIC, hw={"gpus": [B200X8]}),
    # GB200 NVL72 compute tray: the switch trays run the fabric manager, even if nvswitch is claimed
    Case("fabric-gb200-tray", gpu.fabric_manager, set(), hw=GB200_TRAY, note="switch trays"),
    Case(
        "fabric-gb200-tray-nvswitch-claimed",
        gpu.fabric_manager,
        set(),
        hw={**GB200_TRAY, "nvswitch": True},
        note="nvidia-imex instead",
    ),
    # NVLSM needs ib_umad on NVLink 5 NVSwitch baseboards only (keyed on nvlink_generation)
    Case(
        "nvlsm-b200",
        gpu.nvlink_subnet_manager,
        IB_UMAD,
        hw={"gpus": [B200X8]},
        note="nvlsm package",
    ),
    Case(
        "nvlsm-b200-no-nvswitch",
        gpu.nvlink_subnet_manager,
        set(),
        hw={"gpus": [B200X8], "nvswitch": False},
    ),
    Case("nvlsm-h100-nvlink4", gpu.nvlink_subnet_manager, set(), hw={"gpus": [H100X8]}),
    Case("nvlsm-gb200-tray", gpu.nvlink_subnet_manager, set(), hw=GB200_TRAY),
    Case("nvlsm-no-gpu", gpu.nvlink_subnet_manager, set(), hw={"nvswitch": True}),
    # IMEX: GPUs whose NVLink domain spans trays
    Case("imex-gb200-tray", gpu.imex, IMEX, hw=GB200_TRAY),
    Case("imex-b200", gpu.imex, set(), hw={"gpus": [B200X8]}),
    Case("imex-gh200", gpu.imex, set(), hw={**GRACE, "gpus": [{"model": "GH200", "count": 1}]}),
    Case("imex-no-gpu", gpu.imex, set()),
    Case(
        "dcgm-gpus", gpu.dcgm, {("service", "nvidia-dcgm.service", "enable")}, hw={"gpus": [L4X1]}
    ),
    Case("dcgm-no-gpu", gpu.dcgm, set()),
    # peermem: GPUs AND RDMA NICs
    Case("peermem-gpu-rdma", gpu.peermem, PEERMEM, hw={"gpus": [H100X8], "nics": [rdma_compute()]}),
    Case(
        "peermem-gpu-rdma-storage",
        gpu.peermem,
        PEERMEM,
        hw={"gpus": [L4X1], "nics": [nic("ens1", "storage", 200, model="ConnectX-7")]},
    ),
    Case(
        "peermem-gpu-tcp-only",
        gpu.peermem,
        set(),
        hw={"gpus": [H100X8], "nics": [nic("eth0", "frontend", 100)]},
        note="no RDMA NIC",
    ),
    Case(
        "peermem-gpu-rdma-capable-frontend",
        gpu.peermem,
        set(),
        hw={"gpus": [H100X8], "nics": [nic("eth0", "frontend", 400, model="ConnectX-7")]},
        note="no RDMA NIC",
    ),
    Case("peermem-rdma-no-gpu", gpu.peermem, set(), hw={"nics": [rdma_compute()]}),
    # only the mlx5 PeerDirect stack; Broadcom/Intel RDMA use DMA-BUF, said in a note
    Case(
        "peermem-broadcom-dmabuf",
        gpu.peermem,
        set(),
        hw={
            "gpus": [H100X8],
            "nics": [nic("ens1f0np0", "compute", 200, rdma=True, model="BCM57508")],
        },
        note="ens1f0np0 (bnxt_re) goes through DMA-BUF",
    ),
    Case(
        "peermem-intel-dmabuf",
        gpu.peermem,
        set(),
        hw={"gpus": [L4X1], "nics": [nic("ens2", "storage", 100, rdma=True, model="E810")]},
        note="ens2 (irdma)",
    ),
    Case(
        "peermem-rdma-model-unknown",
        gpu.peermem,
        set(),
        hw={"gpus": [H100X8], "nics": [nic("ib0", "compute", 400, rdma=True)]},
        note="model not given",
    ),
    Case(
        "peermem-mixed-stacks",
        gpu.peermem,
        PEERMEM,
        hw={
            "gpus": [H100X8],
            "nics": [rdma_compute(), nic("ens1", "storage", 200, rdma=True, model="BCM57508")],
        },
        note="ens1 (bnxt_re)",
    ),
    # NVIDIA's own tuned profiles: what is left out is said, never silently absent
    Case("vendor-profiles-h100", gpu.vendor_profiles, set(), hw={"gpus": [H100X8]}, note="ib_umad"),
    Case(
        "vendor-profiles-multinode",
        gpu.vendor_profiles,
        set(),
        hw={"gpus": [H100X8]},
        intent="training",
        knobs={"multinode": True},
        note="rmem_default",
    ),
    Case("vendor-profiles-no-gpu", gpu.vendor_profiles, set()),
    Case(
        "peermem-bluefield",
        gpu.peermem,
        PEERMEM,
        hw={
            "gpus": [H100X8],
            "nics": [nic("ens3", "storage", 400, rdma=True, model="BlueField-3")],
        },
    ),
    # AMD Instinct (issue 31): the boot unit only when the profile asks an amd-smi setting
    Case("boot-unit-mi300x-nothing-asked", gpu.boot_unit, set(), hw={"gpus": [MI300X8]}),
    Case(
        "boot-unit-mi300x-partition",
        gpu.boot_unit,
        {("service", GPU_UNIT, "enable")},
        hw={"gpus": [MI300X8]},
        knobs={"gpu_compute_partition": "CPX"},
    ),
    Case(
        "power-mi300x",
        gpu.power_limit,
        {("gpu", "power-limit", "90%")},
        hw={"gpus": [MI300X8]},
        knobs={"gpu_power_limit_percent": 90},
    ),
    # issue 40 item 2: lock-max on AMD is said, never silently dropped (no AMD clock lock)
    Case(
        "amd-clocks-lock-max",
        gpu.amd_clocks,
        set(),
        hw={"gpus": [MI300X8]},
        knobs={"gpu_clocks": "lock-max"},
        note="gpu_clocks: lock-max sets no clock on 8x MI300X",
    ),
    Case("amd-clocks-boost", gpu.amd_clocks, set(), hw={"gpus": [MI300X8]}),
    Case(
        "amd-environment",
        gpu.amd_environment,
        set(),
        hw={"gpus": [MI300X8]},
        note="HSA_OVERRIDE_CPU_AFFINITY_DEBUG=0",
    ),
    Case(
        "amd-clocks-on-h100",
        gpu.amd_clocks,
        set(),
        hw={"gpus": [H100X8]},
        knobs={"gpu_clocks": "lock-max"},
    ),
    Case("partitions-unset", gpu.amd_partitions, set(), hw={"gpus": [MI300X8]}),
    Case(
        "partitions-cpx-nps4",
        gpu.amd_partitions,
        {("gpu", "compute-partition", "CPX"), ("gpu", "memory-partition", "NPS4")},
        hw={"gpus": [MI300X8]},
        knobs={"gpu_compute_partition": "CPX", "gpu_memory_partition": "NPS4"},
    ),
    # AMD's partitioning guide: NPS4 only with CPX on MI300X
    Case(
        "partitions-spx-nps4",
        gpu.amd_partitions,
        set(),
        hw={"gpus": [MI300X8]},
        knobs={"gpu_compute_partition": "SPX", "gpu_memory_partition": "NPS4"},
        note="allows NPS4 only with CPX",
    ),
    # a mode the catalog does not list for the model (MI300X: NPS1, NPS4): the rule asks both,
    # the plan refuses the request (plan/checks.py check_amd_partitions, test_gpu_setup_amd)
    Case(
        "partitions-mode-not-offered",
        gpu.amd_partitions,
        {("gpu", "compute-partition", "DPX"), ("gpu", "memory-partition", "NPS2")},
        hw={"gpus": [MI300X8]},
        knobs={"gpu_compute_partition": "DPX", "gpu_memory_partition": "NPS2"},
    ),
    Case(
        "partitions-on-h100",
        gpu.amd_partitions,
        set(),
        hw={"gpus": [H100X8]},
        knobs={"gpu_compute_partition": "CPX"},
    ),
)


@pytest.mark.parametrize("case", CASES, ids=case_ids(CASES))
def test_gpu_rule(case: Case) -> None:
    check_case(case)


@pytest.mark.parametrize(
    "rule", [r for r in vars(gpu).values() if getattr(r, "area", None) == "gpu"], ids=lambda r: r.id
)
def test_no_gpu_rule_sets_anything_without_gpus(rule: Rule) -> None:
    output = rule.apply(
        facts(nics=[rdma_compute()], nvswitch=True),
        profile("training", gpu_mig="disable", **NO_GPU_KNOBS),
    )
    assert settings_of(output) == {}


def test_clock_reason_names_the_source() -> None:
    (setting,) = gpu.clocks.apply(facts(gpus=[H100X8]), profile("inference", **LOCK))
    assert "hardware_db" in setting.reason and "H100-SXM5-80GB" in setting.reason
    assert "clamp" in setting.reason


def test_nvlink5_fabric_manager_reason_names_nvlsm() -> None:
    (setting,) = gpu.fabric_manager.apply(facts(gpus=[B200X8]), profile("training"))
    assert "nvlsm" in setting.reason and "nvidia-fabricmanager-start.sh" in setting.reason
    (older,) = gpu.fabric_manager.apply(facts(gpus=[H100X8]), profile("training"))
    assert "nvlsm" not in older.reason


def test_ecc_reason_says_what_it_knows_of_the_memory() -> None:
    (known,) = gpu.ecc.apply(facts(gpus=[H100X8]), profile("training"))
    assert "HBM keeps ECC in separate bits" in known.reason
    (unknown,) = gpu.ecc.apply(facts(gpus=[B200X8]), profile("training"))
    assert "memory type of B200 not in hardware_db" in unknown.reason


def test_vendor_profile_notes_cover_nvidias_settings() -> None:
    """Every setting of NVIDIA's profiles that goldtune leaves out is named in a note."""
    texts = " ".join(
        notes_of(
            gpu.vendor_profiles.apply(
                facts(gpus=[H100X8], memory_gib=2048), profile("training", multinode=True)
            )
        )
    )
    for key in (
        "ib_umad",
        "pci=realloc=off",
        "earlycon",
        "kernel.threads-max",
        "vm.min_free_kbytes",
        "LimitSTACK",
        "rmem_default",
    ):
        assert key in texts, key
    assert "about 185363 KiB" in texts  # sqrt(16 x 2 TiB in KiB): above NVIDIA's 65536
    assert "goldtune writes no container-runtime drop-ins" in texts
    b200 = notes_of(gpu.vendor_profiles.apply(facts(gpus=[B200X8]), profile("training")))
    assert not any("ib_umad" in text for text in b200)  # loaded there, by gpu.nvlink-subnet-manager


def test_vendor_profile_stack_note_knows_the_runtime_drop_in() -> None:
    """With containers: the runtime drop-in exists (containers.runtime-limits): the note says it
    leaves LimitSTACK out rather than that no drop-in is written."""
    machine = facts(gpus=[H100X8], memory_gib=2048)
    knobs = profile("training", containers="containerd")
    (stack,) = [t for t in notes_of(gpu.vendor_profiles.apply(machine, knobs)) if "LimitSTACK" in t]
    assert "runtime drop-in of containers.runtime-limits leaves it out" in stack
    assert "writes no container-runtime drop-ins" not in stack


@pytest.mark.parametrize(
    "knobs",
    [{"gpu_mig": "disable"}, {"gpu_mig_layout": {"1g.10gb": 7}}],
    ids=["mig-off", "mig-layout"],
)
def test_a_mig_change_tells_the_site_to_order_its_own_gpu_clients(knobs: dict[str, object]) -> None:
    """EXPLAIN.md says which clients the boot unit runs before and what a site does for the others
    (After= in a drop-in); on main no note said either (issue 26 item 7)."""
    output = gpu.mig.apply(facts(gpus=[H100X8]), profile("inference", **knobs))
    (text,) = [n for n in notes_of(output) if "In use by another client" in n]
    assert "nvidia-dcgm.service" in text and "nvsm.service" in text
    assert "After=goldtune-gpu.service" in text


def test_amd_environment_variables_are_named_not_written() -> None:
    """D-A8: AMD's guides list HSA_OVERRIDE_CPU_AFFINITY_DEBUG=0 for /etc/environment; the bundle
    says why it writes no host default, and only on AMD machines."""
    (found,) = Case("x", gpu.amd_environment, set(), hw={"gpus": [MI300X8]}).run()
    assert "HSA_OVERRIDE_CPU_AFFINITY_DEBUG=0" in found.text and "pam_env" in found.text
    assert Case("x", gpu.amd_environment, set(), hw={"gpus": [H100X8]}).run() == []
    roce = {"name": "ens10np0", "role": "compute", "rdma": True, "model": "Pollara 400"}
    notes = Case("x", gpu.amd_environment, set(), hw={"gpus": [MI300X8], "nics": [roce]}).run()
    assert any("NCCL_IB_GID_INDEX not written" in getattr(n, "text", "") for n in notes)
