"""cpu.*: governor, energy preference, C-states by vendor and architecture, SMT."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from generator.inputs.facts import Facts
from generator.model.setting import Setting
from generator.rules import cpu

from .helpers import (
    DUAL_EPYC,
    DUAL_XEON,
    GRACE,
    Case,
    case_ids,
    check_case,
    facts,
    profile,
    with_cpufreq_driver,
)

GOVERNOR = "/sys/devices/system/cpu/cpu*/cpufreq/scaling_governor"
EPP = "/sys/devices/system/cpu/cpu*/cpufreq/energy_performance_preference"
GOVERNOR_SETTINGS = {("sysfs", GOVERNOR, "performance"), ("tuned", "cpu.governor", "performance")}
EPP_SYSFS = {("sysfs", EPP, "performance")}
EPP_SETTINGS = EPP_SYSFS | {
    ("tuned", "cpu.energy_perf_bias", "performance")
}  # Intel: EPP and the bias register
INTEL_CSTATES = {
    ("kernel-arg", "intel_idle.max_cstate", "1"),
    ("kernel-arg", "processor.max_cstate", "1"),
}
ACPI_CSTATES = {("kernel-arg", "processor.max_cstate", "1")}
SHALLOW = {"cstates": "shallow"}
AMD_1S = {"cpu": {"vendor": "amd"}}
DEBIAN_12 = {"os": {"distro": "debian-12"}}
ROCKY_9 = {"os": {"distro": "rocky-9"}}  # an alias of rhel-9


def _driver(name: str | None) -> Callable[[Facts], Facts]:
    return lambda facts: with_cpufreq_driver(facts, name)


CASES: tuple[Case, ...] = (
    Case("governor-inference", cpu.governor, GOVERNOR_SETTINGS),
    Case("governor-training", cpu.governor, GOVERNOR_SETTINGS, intent="training"),
    Case("governor-grace", cpu.governor, GOVERNOR_SETTINGS, hw=GRACE),
    # the distribution table's governor services are disabled; without a distribution, every
    # table's (tuning-review-3 D-N16: a portable bundle on Ubuntu kept ondemand.service)
    Case(
        "governor-services-portable",
        cpu.governor_services,
        {("service", "ondemand.service", "disable")},
    ),
    Case(
        "governor-services-ubuntu-24.04",
        cpu.governor_services,
        {("service", "ondemand.service", "disable")},
        hw={"os": {"distro": "ubuntu-24.04"}},
    ),
    Case(
        "governor-services-ubuntu-22.04-training",
        cpu.governor_services,
        {("service", "ondemand.service", "disable")},
        hw={"os": {"distro": "ubuntu-22.04"}},
        intent="training",
    ),
    Case("governor-services-debian-12", cpu.governor_services, set(), hw=DEBIAN_12),
    Case("governor-services-rocky-9", cpu.governor_services, set(), hw=ROCKY_9),
    # EPP only where the driver has it; no shipped CPU states such a driver, so swap it in.
    # energy_perf_bias is Intel's register: only Intel CPUs get the tuned line.
    Case(
        "epp-intel-pstate",
        cpu.energy_preference,
        EPP_SETTINGS,
        hw=DUAL_XEON,
        tweak=_driver("intel_pstate"),
    ),
    Case(
        "epp-amd-pstate-epp-no-energy-perf-bias",
        cpu.energy_preference,
        EPP_SYSFS,
        hw=DUAL_EPYC,
        tweak=_driver("amd-pstate-epp"),
    ),
    Case("epp-acpi-cpufreq", cpu.energy_preference, set(), hw=DUAL_EPYC, note="acpi-cpufreq"),
    Case(
        "epp-intel-acpi-cpufreq-stated",
        cpu.energy_preference,
        set(),
        hw=DUAL_XEON,
        tweak=_driver("acpi-cpufreq"),
        note="cpufreq driver acpi-cpufreq",
    ),
    Case("epp-cppc-grace", cpu.energy_preference, set(), hw=GRACE, note="cppc_cpufreq"),
    # no driver stated: Intel CPUs run intel_pstate (the kernel default); others stay unknown
    Case(
        "epp-intel-no-driver-assumes-intel-pstate",
        cpu.energy_preference,
        EPP_SETTINGS,
        hw=DUAL_XEON,
    ),
    Case("epp-intel-no-model-assumes-intel-pstate", cpu.energy_preference, EPP_SETTINGS),
    Case(
        "epp-amd-no-driver",
        cpu.energy_preference,
        set(),
        hw=DUAL_EPYC,
        tweak=_driver(None),
        note="cpufreq driver unknown",
    ),
    Case(
        "epp-amd-no-model", cpu.energy_preference, set(), hw=AMD_1S, note="cpufreq driver unknown"
    ),
    Case(
        "epp-grace-no-driver",
        cpu.energy_preference,
        set(),
        hw=GRACE,
        tweak=_driver(None),
        note="cpufreq driver unknown",
    ),
    # C-states: intel_idle only on Intel; processor.max_cstate on x86; nothing on aarch64
    Case("cstates-shallow-intel", cpu.cstates, INTEL_CSTATES, hw=DUAL_XEON, knobs=SHALLOW),
    Case("cstates-shallow-intel-no-model", cpu.cstates, INTEL_CSTATES, knobs=SHALLOW),
    Case("cstates-shallow-amd", cpu.cstates, ACPI_CSTATES, hw=DUAL_EPYC, knobs=SHALLOW),
    Case("cstates-shallow-amd-no-model", cpu.cstates, ACPI_CSTATES, hw=AMD_1S, knobs=SHALLOW),
    Case("cstates-shallow-grace", cpu.cstates, set(), hw=GRACE, knobs=SHALLOW, note="aarch64"),
    Case("cstates-default-intel", cpu.cstates, set(), hw=DUAL_XEON, note="default"),
    Case(
        "cstates-default-training",
        cpu.cstates,
        set(),
        hw=DUAL_XEON,
        intent="training",
        note="default",
    ),
    # SMT: only on request, and only where there is SMT
    Case("smt-keep", cpu.smt, set(), hw=DUAL_XEON),
    Case(
        "smt-disable-intel",
        cpu.smt,
        {("kernel-arg", "nosmt", "")},
        hw=DUAL_XEON,
        knobs={"smt": "disable"},
    ),
    Case(
        "smt-disable-amd",
        cpu.smt,
        {("kernel-arg", "nosmt", "")},
        hw=DUAL_EPYC,
        knobs={"smt": "disable"},
    ),
    # the rule states the intent on aarch64 too; the plan drops nosmt there with a note (test_plan)
    Case(
        "smt-disable-arm-smt",
        cpu.smt,
        {("kernel-arg", "nosmt", "")},
        hw={"cpu": {"vendor": "nvidia", "threads_per_core": 2}},
        knobs={"smt": "disable"},
    ),
    Case(
        "smt-disable-no-smt",
        cpu.smt,
        set(),
        hw=GRACE,
        knobs={"smt": "disable"},
        note="one thread per core",
    ),
    # threads_per_core in neither the file nor hardware_db (Xeon-8570, DGX B200): not taken as 1;
    # nosmt is set and the kernel decides (it does nothing without SMT)
    Case(
        "smt-disable-threads-unknown",
        cpu.smt,
        {("kernel-arg", "nosmt", "")},
        hw={"cpu": {"model": "Xeon-8570", "cores_per_socket": 60, "threads_per_core": None}},
        knobs={"smt": "disable"},
    ),
    # NVIDIA's h100-inference CFS sysctls: gone from /proc/sys since 5.13, said so on GPU hosts
    Case(
        "cfs-tunables-gpu",
        cpu.cfs_tunables,
        set(),
        hw={"gpus": [{"model": "H100-SXM5-80GB", "count": 8}]},
        note="debugfs files, not sysctls",
    ),
    Case("cfs-tunables-no-gpu", cpu.cfs_tunables, set()),
)


def test_unknown_threads_per_core_says_the_kernel_decides() -> None:
    hw = {"cpu": {"model": "Xeon-8570", "cores_per_socket": 60, "threads_per_core": None}}
    (setting,) = cpu.smt.apply(facts(**hw), profile("inference", smt="disable"))
    assert isinstance(setting, Setting)
    assert "threads_per_core is not known" in setting.reason and "decides at boot" in setting.reason


@pytest.mark.parametrize("case", CASES, ids=case_ids(CASES))
def test_cpu_rule(case: Case) -> None:
    check_case(case)


@pytest.mark.parametrize("hw", [DUAL_EPYC, AMD_1S, GRACE], ids=["epyc", "amd", "grace"])
@pytest.mark.parametrize(
    "knobs",
    [{}, SHALLOW, {"cstates": "shallow", "smt": "disable"}],
    ids=["default", "shallow", "latency"],
)
def test_no_intel_idle_off_intel(hw: dict, knobs: dict) -> None:
    case = Case("any", cpu.cstates, set(), hw=hw, knobs=knobs)
    assert not [item for item in case.run() if getattr(item, "key", "").startswith("intel_idle")]


@pytest.mark.parametrize(
    ("hw", "driver", "named"),
    [
        (DUAL_XEON, None, "intel_pstate"),
        (DUAL_XEON, "intel_pstate", "intel_pstate"),
        (DUAL_EPYC, "amd-pstate-epp", "amd-pstate-epp"),
    ],
    ids=["intel-assumed", "intel-stated", "amd-stated"],
)
def test_epp_reason_names_the_driver(hw: dict, driver: str | None, named: str) -> None:
    case = Case("any", cpu.energy_preference, set(), hw=hw, tweak=_driver(driver))
    (sysfs,) = [item for item in case.run() if isinstance(item, Setting) and item.kind == "sysfs"]
    assert named in sysfs.reason


@pytest.mark.parametrize("hw", [DUAL_EPYC, GRACE], ids=["epyc", "grace"])
@pytest.mark.parametrize(
    "driver", [None, "intel_pstate", "amd-pstate-epp", "acpi-cpufreq", "cppc_cpufreq"]
)
def test_energy_perf_bias_only_on_intel(hw: dict, driver: str | None) -> None:
    """Whatever driver a non-Intel CPU states, the Intel bias register is never set."""
    case = Case("any", cpu.energy_preference, set(), hw=hw, tweak=_driver(driver))
    assert not [item for item in case.run() if getattr(item, "key", "") == "cpu.energy_perf_bias"]


def test_portable_governor_services_are_every_tables_union() -> None:
    """The constant a portable bundle uses is the union of what the distribution tables list."""
    from generator.inputs.distro import load_distros

    listed = {s.unit for d in load_distros().values() for s in d.governor_services}
    assert set(cpu.PORTABLE_GOVERNOR_SERVICES) == listed


TURIN_HOST = {"cpu": {"model": "EPYC-9965", "vendor": "amd", "sockets": 2}}


@pytest.mark.parametrize(
    ("kernel", "written"), [("6.14", True), ("6.13", True), ("6.8", False), (None, False)]
)
def test_epyc_9005_gets_epp_where_the_kernel_loads_amd_pstate(
    kernel: str | None, written: bool
) -> None:
    """Issue 40 item 3: EPYC 9005 (family 0x1A) runs amd-pstate in active mode (EPP) from Linux
    6.13 and acpi-cpufreq before; on main every EPYC 9005 bundle said 'driver unknown'."""
    hw = {**TURIN_HOST, "os": {"kernel": kernel}} if kernel else TURIN_HOST
    found = Case("x", cpu.energy_preference, set(), hw=hw).run()
    settings = [item for item in found if getattr(item, "kind", "") == "sysfs"]
    text = " ".join(getattr(item, "text", "") for item in found)
    if written:
        assert [(s.key, s.value) for s in settings] == [(EPP, "performance")]
        assert "amd-pstate-epp" in settings[0].reason and "0x1A" in settings[0].reason
    else:
        assert not settings
        assert "0x1A" in text
        assert ("acpi-cpufreq before; this plan's kernel is 6.8" in text) == (kernel == "6.8")


def test_epyc_9004_is_not_given_the_9005_rule() -> None:
    """Genoa's family is not stated as 0x1A: the stated driver (acpi-cpufreq) decides."""
    hw = {**DUAL_EPYC, "os": {"kernel": "6.14"}}
    found = Case("x", cpu.energy_preference, set(), hw=hw).run()
    assert not [item for item in found if getattr(item, "kind", "") == "sysfs"]


def test_epyc_9005_on_a_distribution_of_several_kernels_says_which_is_missing() -> None:
    """Ubuntu 24.04 ships 6.8 to 7.0: without os.kernel the driver is not known, and the note
    says that os.kernel, not --os, is what is missing."""
    hw = {**TURIN_HOST, "os": {"distro": "ubuntu-24.04"}}
    found = Case("x", cpu.energy_preference, set(), hw=hw).run()
    assert not [item for item in found if getattr(item, "kind", "") == "sysfs"]
    text = " ".join(getattr(item, "text", "") for item in found)
    assert "ubuntu-24.04 has several kernel lines and os.kernel names none" in text
