"""boot.*: IOMMU passthrough (GPUs with RDMA NICs only), init_on_alloc, PCIe ACS, ACPI power cap."""

from __future__ import annotations

import pytest

from generator.model.layout import ACS_UNIT, PREFLIGHT_UNIT
from generator.rules import boot

from .helpers import (
    DUAL_EPYC,
    DUAL_XEON,
    GRACE,
    H100X8,
    L4X1,
    MI300X8,
    Case,
    case_ids,
    check_case,
    nic,
    rdma_compute,
)

GH200X1 = {"model": "GH200", "count": 1}
MI300A4 = {"model": "MI300A", "count": 4}
AMD_EPYC = {**DUAL_EPYC, "gpus": [MI300X8]}  # no NIC: AMD's pass-through does not hinge on RDMA
# Arm servers that are not Grace: the arm64 IOMMU form, but no Grace-only parameter
AMPERE = {"cpu": {"vendor": "ampere", "sockets": 1, "cores_per_socket": 128}, "numa_nodes": 1}
GRAVITON = {"cpu": {"vendor": "other", "arch": "aarch64", "sockets": 1, "cores_per_socket": 64}}
A100X1 = {"model": "A100-PCIe-80GB", "count": 1}
INTEL_PT = {("kernel-arg", "iommu", "pt"), ("kernel-arg", "intel_iommu", "on")}
TCP_ONLY = [nic("eth0", "frontend", 100)]
ACS_UNIT_ON = ("service", ACS_UNIT, "enable")
ACS_GPUS = {("pcie-acs", "gpus", "off"), ACS_UNIT_ON}
POWER_METER = {("kernel-arg", "acpi_power_meter.force_cap_on", "y")}

CASES: tuple[Case, ...] = (
    Case(
        "iommu-intel-gpu-rdma",
        boot.iommu_passthrough,
        INTEL_PT,
        hw={**DUAL_XEON, "gpus": [H100X8], "nics": [rdma_compute()]},
    ),
    Case(
        "iommu-amd-gpu-rdma",
        boot.iommu_passthrough,
        {("kernel-arg", "iommu", "pt")},
        hw={**DUAL_EPYC, "gpus": [H100X8], "nics": [rdma_compute()]},
    ),
    Case(
        "iommu-grace-gpu-rdma",
        boot.iommu_passthrough,
        {("kernel-arg", "iommu.passthrough", "1")},
        hw={**GRACE, "gpus": [GH200X1], "nics": [rdma_compute()]},
    ),
    Case(
        "iommu-ampere-gpu-rdma",
        boot.iommu_passthrough,
        {("kernel-arg", "iommu.passthrough", "1")},
        hw={**AMPERE, "gpus": [A100X1], "nics": [rdma_compute()]},
    ),
    Case(
        "iommu-graviton-gpu-rdma",
        boot.iommu_passthrough,
        {("kernel-arg", "iommu.passthrough", "1")},
        hw={**GRAVITON, "gpus": [A100X1], "nics": [rdma_compute()]},
    ),
    Case(
        "iommu-gpu-rdma-storage-nic",
        boot.iommu_passthrough,
        INTEL_PT,
        hw={"gpus": [L4X1], "nics": [nic("ens1", "storage", 200, model="ConnectX-7")]},
    ),
    Case(
        "iommu-gpu-no-rdma",
        boot.iommu_passthrough,
        set(),
        hw={**DUAL_XEON, "gpus": [H100X8], "nics": TCP_ONLY},
    ),
    Case("iommu-gpu-no-nic", boot.iommu_passthrough, set(), hw={"gpus": [H100X8]}),
    Case(
        "iommu-rdma-no-gpu",
        boot.iommu_passthrough,
        set(),
        hw={**DUAL_XEON, "nics": [rdma_compute()]},
    ),
    Case(
        "init-on-alloc-gpus",
        boot.init_on_alloc,
        {("kernel-arg", "init_on_alloc", "0")},
        hw={"gpus": [L4X1]},
    ),
    Case("init-on-alloc-no-gpu", boot.init_on_alloc, set()),
    # the hardening default kept when the profile asks (failed on main: the knob did not exist)
    Case(
        "init-on-alloc-keep",
        boot.init_on_alloc,
        set(),
        hw={"gpus": [L4X1]},
        knobs={"init_on_alloc": "keep"},
        note="init_on_alloc: keep",
    ),
    Case(
        "init-on-alloc-off",
        boot.init_on_alloc,
        {("kernel-arg", "init_on_alloc", "0")},
        hw={"gpus": [L4X1]},
        knobs={"init_on_alloc": "off"},
    ),
    # ACS off above GPUs (and the compute RDMA NICs) for training on multi-GPU machines, applied
    # by the pcie-acs boot unit; the knob decides either way
    Case(
        "acs-training-multi-gpu-rdma",
        boot.acs,
        ACS_GPUS | {("pcie-acs", "nic ib0", "off"), ACS_UNIT_ON},
        intent="training",
        hw={"gpus": [H100X8], "nics": [rdma_compute(), nic("stor0", "storage", 200, rdma=True)]},
        note="pci=disable_acs_redir",
    ),
    Case(
        "acs-training-multi-gpu-no-rdma",
        boot.acs,
        ACS_GPUS,
        intent="training",
        hw={"gpus": [H100X8], "nics": TCP_ONLY},
    ),
    Case(
        "acs-inference-keeps-it",
        boot.acs,
        set(),
        hw={"gpus": [H100X8], "nics": [rdma_compute()]},
        note="pcie_acs: disable-p2p turns it off",
    ),
    Case(
        "acs-knob-keep",
        boot.acs,
        set(),
        intent="training",
        knobs={"pcie_acs": "keep"},
        hw={"gpus": [H100X8], "nics": [rdma_compute()]},
        note="pcie_acs: keep",
    ),
    Case(
        "acs-knob-disable-inference",
        boot.acs,
        ACS_GPUS | {("pcie-acs", "nic ib0", "off"), ACS_UNIT_ON},
        knobs={"pcie_acs": "disable-p2p"},
        hw={"gpus": [H100X8], "nics": [rdma_compute()]},
    ),
    Case("acs-training-single-gpu", boot.acs, set(), intent="training", hw={"gpus": [L4X1]}),
    # NVIDIA's gb200 profiles leave ACS alone (nvidia-base, not nvidia-acs-disable)
    Case(
        "acs-training-grace-keeps-it",
        boot.acs,
        set(),
        intent="training",
        hw={**GRACE, "gpus": [{"model": "GB200", "count": 4}], "nics": [rdma_compute()]},
        note="NVIDIA's Grace profiles",
    ),
    Case(
        "acs-knob-disable-grace",
        boot.acs,
        ACS_GPUS,
        knobs={"pcie_acs": "disable-p2p"},
        hw={**GRACE, "gpus": [{"model": "GB200", "count": 4}]},
    ),
    Case(
        "acs-knob-disable-no-gpu",
        boot.acs,
        set(),
        knobs={"pcie_acs": "disable-p2p"},
        hw={"nics": [rdma_compute()]},
    ),
    # AMD Instinct follows AMD's own guide (gpu-cluster-networking, single-node configuration:
    # disable PCI ACS after each reboot): the same decision, the same boot script and guards
    Case(
        "acs-training-mi300x-rdma",
        boot.acs,
        ACS_GPUS | {("pcie-acs", "nic ib0", "off"), ACS_UNIT_ON},
        intent="training",
        hw={**AMD_EPYC, "nics": [rdma_compute()]},
        note="pci=disable_acs_redir",
    ),
    Case(
        "acs-inference-mi300x-keeps-it",
        boot.acs,
        set(),
        hw=AMD_EPYC,
        note="AMD's single-node network configuration guide",
    ),
    # Grace (NVIDIA's Grace guide): the ACPI power meter's cap, on every Grace platform
    Case("power-meter-grace", boot.acpi_power_meter, POWER_METER, hw=GRACE),
    Case("power-meter-gh200", boot.acpi_power_meter, POWER_METER, hw={**GRACE, "gpus": [GH200X1]}),
    Case("power-meter-xeon", boot.acpi_power_meter, set(), hw={**DUAL_XEON, "gpus": [H100X8]}),
    Case("power-meter-epyc", boot.acpi_power_meter, set(), hw=DUAL_EPYC),
    # aarch64 is not Grace: Ampere and Graviton have no NVIDIA guide asking for the cap
    Case("power-meter-ampere", boot.acpi_power_meter, set(), hw={**AMPERE, "gpus": [A100X1]}),
    Case("power-meter-graviton", boot.acpi_power_meter, set(), hw={**GRAVITON, "gpus": [A100X1]}),
    # AMD Instinct (AMD's MI300X system optimization guide, GRUB settings): pass-through on every
    # Instinct host, RDMA NICs or not; Intel hosts add intel_iommu=on
    Case("iommu-mi300x-epyc", boot.iommu_passthrough, {("kernel-arg", "iommu", "pt")}, hw=AMD_EPYC),
    Case(
        "iommu-mi300x-xeon", boot.iommu_passthrough, INTEL_PT, hw={**DUAL_XEON, "gpus": [MI300X8]}
    ),
    Case(
        "pci-realloc-mi300x", boot.pci_realloc, {("kernel-arg", "pci", "realloc=off")}, hw=AMD_EPYC
    ),
    Case("pci-realloc-h100", boot.pci_realloc, set(), hw={**DUAL_EPYC, "gpus": [H100X8]}),
    Case("amd-firmware-mi300x", boot.amd_firmware, set(), hw=AMD_EPYC, note="APBDIS 1"),
    Case(
        "amd-firmware-mi300x-c2",
        boot.amd_firmware,
        set(),
        hw=AMD_EPYC,
        intent="training",
        note="cpupower idle-set -d 2",
    ),
    Case("amd-firmware-h100", boot.amd_firmware, set(), hw={**DUAL_EPYC, "gpus": [H100X8]}),
    # D-A1: multi-node over RDMA NICs is the low-latency network AMD's C2 advice names
    Case(
        "amd-firmware-mi300x-multinode-c2-off",
        boot.amd_firmware,
        {("kernel-arg", "processor.max_cstate", "1")},
        hw={**AMD_EPYC, "nics": [rdma_compute()]},
        intent="training",
        knobs={"multinode": True},
        note="APBDIS 1",
    ),
    # W-A2: an APU node follows AMD's MI300A guide, not the MI300X firmware list
    Case(
        "amd-firmware-mi300a",
        boot.amd_firmware,
        set(),
        hw={**DUAL_EPYC, "gpus": [MI300A4]},
        note="preconfigured by the platform vendor",
    ),
    Case(
        "iommu-mi300a-says-off",
        boot.iommu_passthrough,
        {("kernel-arg", "iommu", "pt")},
        hw={**DUAL_EPYC, "gpus": [MI300A4]},
    ),
    # issue 28: every bundle checks its hardware file's claims at boot, GPUs or not
    Case(
        "preflight-gpu-server",
        boot.preflight,
        {("service", PREFLIGHT_UNIT, "enable")},
        hw={"gpus": [H100X8]},
    ),
    Case("preflight-cpu-only", boot.preflight, {("service", PREFLIGHT_UNIT, "enable")}),
)


@pytest.mark.parametrize("case", CASES, ids=case_ids(CASES))
def test_boot_rule(case: Case) -> None:
    check_case(case)


def test_single_gpu_acs_is_silent() -> None:
    assert Case("x", boot.acs, set(), hw={"gpus": [L4X1], "nics": [rdma_compute()]}).run() == []


def test_acs_off_enables_its_boot_unit() -> None:
    machine = Case("x", boot.acs, set(), intent="training", hw={"gpus": [H100X8]})
    services = [item for item in machine.run() if getattr(item, "kind", "") == "service"]
    assert [(s.key, s.value) for s in services] == [(ACS_UNIT, "enable")]


def test_acs_on_amd_cites_amds_guide_not_nccls() -> None:
    machine = Case("x", boot.acs, set(), intent="training", hw=AMD_EPYC)
    (gpus,) = [item for item in machine.run() if getattr(item, "key", "") == "gpus"]
    assert "AMD's single-node network configuration guide" in gpus.reason
    assert "every AMD GPU" in gpus.reason and "NCCL" not in gpus.reason


def test_an_apu_nodes_firmware_note_is_not_the_mi300x_list() -> None:
    """W-A2: on main the MI300A bundle told the site to enable the IOMMU and change BIOS options
    the MI300A guide says the platform vendor preconfigures."""
    found = Case("x", boot.amd_firmware, set(), hw={**DUAL_EPYC, "gpus": [MI300A4]}).run()
    text = " ".join(getattr(item, "text", "") for item in found)
    assert "MI300A system optimization guide" in text and "IVRS" in text
    assert "APBDIS" not in text and "EPYC 9004" not in text and "cpupower" not in text
    (iommu,) = Case("x", boot.iommu_passthrough, set(), hw={**DUAL_EPYC, "gpus": [MI300A4]}).run()
    assert "IOMMU is off by default" in iommu.reason


def test_the_firmware_note_names_the_cpu_the_box_has() -> None:
    """D-A3: an MI355X on EPYC 9005 was told the EPYC 9004 list with no word of its own CPU."""
    turin = {"cpu": {"model": "EPYC-9575F", "vendor": "amd", "sockets": 2}}
    found = Case(
        "x", boot.amd_firmware, set(), hw={**turin, "gpus": [{"model": "MI355X", "count": 8}]}
    ).run()
    text = " ".join(getattr(item, "text", "") for item in found)
    assert "8x MI355X on 2x AMD EPYC 9575F" in text
    # issue 40 item 1/4: MI355X follows its own system acceptance page, for EPYC 9004 and 9005
    assert "MI355X system acceptance guide" in text and "9004 or 9005 series" in text
    assert "written for EPYC 9004 hosts" not in text and "DF C-states disabled" in text
    # an MI300X on Turin is told its CPU's series is not the one the MI300X list was written for
    found = Case("x", boot.amd_firmware, set(), hw={**turin, "gpus": [MI300X8]}).run()
    text = " ".join(getattr(item, "text", "") for item in found)
    assert "written for EPYC 9004 hosts; this host's EPYC 9005" in text
    found = Case("x", boot.amd_firmware, set(), hw=AMD_EPYC).run()
    text = " ".join(getattr(item, "text", "") for item in found)
    assert "written for EPYC 9004 hosts, this host's series" in text


TURIN = {"cpu": {"model": "EPYC-9575F", "vendor": "amd", "sockets": 2}}
RDMA8 = [nic(f"ib{i}", "compute", 400, rdma=True, model="ConnectX-7") for i in range(8)]


@pytest.mark.parametrize("model", ["MI325X", "MI355X"])
def test_acceptance_guided_gpus_add_pci_bfsort(model: str) -> None:
    """Issue 40 item 1: the MI325X and MI355X acceptance pages require pci=bfsort beside
    pci=realloc=off; the MI300X guide does not (its bundle keeps realloc=off alone)."""
    hw = {**TURIN, "gpus": [{"model": model, "count": 8}]}
    pci, blacklist = Case("x", boot.pci_realloc, set(), hw=hw).run()
    assert (pci.key, pci.value) == ("pci", "realloc=off,bfsort")
    assert "modprobe.blacklist=amdgpu" in blacklist.text and "optional" in blacklist.text
    assert f"{model} system acceptance guide, Kernel parameters" in pci.reason
    (iommu,) = Case("x", boot.iommu_passthrough, set(), hw=hw).run()
    assert f"{model} system acceptance guide" in iommu.reason
    (mi300x,) = Case("x", boot.pci_realloc, set(), hw=AMD_EPYC).run()
    assert mi300x.value == "realloc=off" and "MI300X system optimization guide" in mi300x.reason


def test_multinode_rdma_on_amd_disables_c2() -> None:
    """D-A1: AMD disables C2 for high-performance networks; a multi-node profile over RDMA NICs
    is that case, unless the profile itself set cstates."""
    hw = {**AMD_EPYC, "nics": RDMA8}
    found = Case(
        "x", boot.amd_firmware, set(), hw=hw, intent="training", knobs={"multinode": True}
    ).run()
    args = [(i.key, i.value) for i in found if getattr(i, "kind", "") == "kernel-arg"]
    assert args == [("processor.max_cstate", "1")]
    own = Case(
        "x",
        boot.amd_firmware,
        set(),
        hw=hw,
        intent="training",
        knobs={"multinode": True, "cstates": "default"},
    ).run()
    assert not [i for i in own if getattr(i, "kind", "") == "kernel-arg"]
    single = Case("x", boot.amd_firmware, set(), hw=hw, intent="training").run()
    assert not [i for i in single if getattr(i, "kind", "") == "kernel-arg"]
