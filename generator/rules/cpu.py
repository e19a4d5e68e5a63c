"""CPU: frequency governor, energy preference, C-states, SMT."""

from __future__ import annotations

from generator.inputs.facts import Facts
from generator.inputs.profile import Profile
from generator.model.vendors import GpuVendor
from generator.rules.base import Output, kernel_arg, note, rule, service, sysfs, tuned

EPP_DRIVERS = {"intel_pstate", "amd-pstate-epp"}
# The kernel's default scaling driver on Intel CPUs it supports (Documentation/admin-guide/pm/
# intel_pstate.rst); used when the CPU model does not name its driver.
DEFAULT_DRIVER_BY_VENDOR = {"intel": "intel_pstate"}
# Every unit some distribution table (hardware_db/distros/*.yaml, ``governor_services``) lists as
# resetting the governor, for bundles made without --os. Kept here rather than read from the
# tables so that a portable run does not load every distribution table; a test holds it equal to
# the tables' union.
PORTABLE_GOVERNOR_SERVICES = ("ondemand.service",)


# The Intel energy/performance bias of each CPU (arch/x86/kernel/cpu/intel_epb.c): a write takes
# a number 0-15 or a name, a read gives the number, and "performance" is 0
# (energy_perf_bias_store, ENERGY_PERF_BIAS_PERFORMANCE), so the number is written and verified.
EPB_PATH = "/sys/devices/system/cpu/cpu*/power/energy_perf_bias"
EPB_PERFORMANCE = 0


@rule("cpu.governor")
def governor(facts: Facts, profile: Profile) -> Output:
    """Run every core at its performance governor (sysfs at boot, and in the tuned profile)."""
    if profile.intent == "inference":
        why = "reactive frequency scaling adds 5-15% to time-to-first-token after idle"
    else:
        why = "training keeps cores busy feeding GPUs; the performance governor loses nothing"
    yield sysfs("/sys/devices/system/cpu/cpu*/cpufreq/scaling_governor", "performance", why)
    if profile.tuned == "layered":
        yield tuned("cpu", "governor", "performance", why + " (same value as the tmpfiles.d line)")


@rule("cpu.governor-services")
def governor_services(facts: Facts, profile: Profile) -> Output:
    """Disable the distribution's services that reset the CPU governor after boot.

    Which services those are is the distribution table's ``governor_services`` (with their
    sources, hardware_db/distros/); cpu.governor sets performance for every intent, so each of
    them would undo it. A bundle made without --os disables every unit any table lists
    (``PORTABLE_GOVERNOR_SERVICES``): it may land on any of them. install.sh skips a unit the
    image does not have.
    """
    distro = facts.os.distro
    if distro is None:
        for unit in PORTABLE_GOVERNOR_SERVICES:
            yield service(
                unit,
                "disable",
                "a portable bundle may land on any distribution goldtune knows, and a table "
                "lists it as resetting the CPU governor after boot, undoing the performance "
                "governor cpu.governor sets (install.sh skips it where the image lacks the unit)",
            )
        return
    for fighting in distro.governor_services:
        yield service(
            fighting.unit,
            "disable",
            f"{distro.key}'s table lists it: {fighting.effect}, undoing the performance "
            "governor cpu.governor sets (install.sh skips it where the image lacks the unit)",
        )


# amd_pstate_init() (drivers/cpufreq/amd-pstate.c) loads on an ACPI server profile only for
# CPU family 0x1A and later, from Linux 6.13 ("amd-pstate: Switch to amd-pstate by default on some
# Server platforms", Swapnil Sapkal, Oct 2024: "switch to amd-pstate as the default driver on the
# AMD EPYC server platforms with CPU family 0x1A or higher. The default mode will be active
# mode"), in CONFIG_X86_AMD_PSTATE_DEFAULT_MODE, whose Kconfig default 3 is active (amd-pstate-epp;
# drivers/cpufreq/Kconfig.x86, Linux 6.5). Older families and kernels keep acpi-cpufreq there.
AMD_PSTATE_SERVER_FAMILY = 0x1A
AMD_PSTATE_SERVER_KERNEL = (6, 13)


def amd_pstate_driver(facts: Facts) -> tuple[str | None, str]:
    """The scaling driver an AMD server CPU of a known family gets from the plan's kernel, and
    why; (None, why) where the kernel is not known, ("", "") where the rule does not apply."""
    family = facts.cpu.model.x86_family if facts.cpu.model else None
    if facts.cpu.vendor != "amd" or family is None or family < AMD_PSTATE_SERVER_FAMILY:
        return "", ""
    kernel = facts.os.kernel
    rule_text = (
        f"CPU family 0x{family:X}: from Linux 6.13 the kernel loads amd-pstate on server "
        "platforms of family 0x1A and later, in its default mode active (amd-pstate-epp, "
        "Kconfig default; a distribution that builds another default mode is not read here)"
    )
    if kernel is None:
        distro = facts.os.distro
        unnamed = (
            f"{distro.key} has several kernel lines and os.kernel names none"
            if distro
            else "the plan names no kernel (os.kernel or --os)"
        )
        return None, rule_text + f", acpi-cpufreq before; {unnamed}"
    if kernel >= AMD_PSTATE_SERVER_KERNEL:
        return "amd-pstate-epp", rule_text + f"; this plan's kernel is {kernel[0]}.{kernel[1]}"
    return (
        "acpi-cpufreq",
        rule_text + f", acpi-cpufreq before; this plan's kernel is {kernel[0]}.{kernel[1]}",
    )


@rule("cpu.energy-preference")
def energy_preference(facts: Facts, profile: Profile) -> Output:
    """Ask the hardware-managed P-state driver for performance where it has EPP.

    The driver is the CPU model's, Intel's default, or for AMD server CPUs of family 0x1A and
    later (EPYC 9005) the one the plan's kernel loads (amd_pstate_driver). EPP 'performance' for
    every profile, as cpu.governor sets the performance governor for every intent.
    """
    driver = facts.cpu.cpufreq_driver or DEFAULT_DRIVER_BY_VENDOR.get(facts.cpu.vendor)
    derived, derivation = amd_pstate_driver(facts) if driver is None else ("", "")
    driver = driver or derived
    if driver not in EPP_DRIVERS:
        known = f"cpufreq driver {driver or 'unknown'}"
        if derivation:
            known += f" ({derivation})"
        yield note(f"{known}: no energy_performance_preference to set")
        return
    yield sysfs(
        "/sys/devices/system/cpu/cpu*/cpufreq/energy_performance_preference",
        "performance",
        f"{driver} picks frequencies in hardware; EPP 'performance' tells it not to save "
        "power at the cost of latency" + (f" ({derivation})" if derivation else ""),
    )
    if facts.cpu.vendor != "intel":
        return
    why = "same intent for Intel's energy/performance bias register"
    if profile.tuned == "layered":
        yield tuned("cpu", "energy_perf_bias", "performance", why)
    else:  # no tuned layer (profile knob tuned: off): the kernel's own attribute
        yield sysfs(EPB_PATH, EPB_PERFORMANCE, why + " (0 is 'performance'; tuned: off)")


@rule("cpu.cstates")
def cstates(facts: Facts, profile: Profile) -> Output:
    """Shallow C-states for latency profiles, by idle driver: intel_idle on Intel, ACPI elsewhere."""  # noqa: E501 -- the first line is the rule's summary (gen list)
    if profile.cstates != "shallow":
        yield note("C-states left at the default: throughput-bound work, and idle power adds up")
        return
    if facts.cpu.arch != "x86_64":
        yield note(
            f"{facts.cpu.arch}: no C-state boot argument exists; idle states stay at the default"
        )
        return
    why = "waking from deep C-states (C6) costs tens of microseconds of tail latency per request"
    if facts.cpu.vendor == "intel":
        yield kernel_arg(
            "intel_idle.max_cstate",
            1,
            why + "; 1 keeps intel_idle loaded (0 would disable it and fall back to "
            "firmware tables)",
        )
    yield kernel_arg("processor.max_cstate", 1, why + " (limit for the ACPI idle driver)")


@rule("cpu.smt")
def smt(facts: Facts, profile: Profile) -> Output:
    """Turn SMT off only when the profile asks (strict tail latency)."""
    if profile.smt != "disable":
        return
    if not facts.cpu.threads_known:
        yield kernel_arg(
            "nosmt",
            "",
            "the profile trades half the hardware threads for less jitter from sibling threads "
            "sharing a core; threads_per_core is not known (hardware file or hardware_db), so "
            "the kernel decides at boot: nosmt does nothing on a CPU without SMT",
        )
        return
    if facts.cpu.threads_per_core == 1:
        yield note("SMT off requested, but the CPU has one thread per core: nothing to do")
        return
    yield kernel_arg(
        "nosmt",
        "",
        "the profile trades half the hardware threads for less jitter from "
        "sibling threads sharing a core",
    )


# Linux 5.13 moved the CFS tunables from /proc/sys/kernel to debugfs (commit 8a99b6833c88)
CFS_SYSCTLS_MOVED = (5, 13)


@rule("cpu.cfs-tunables", vendors=(GpuVendor.NVIDIA,))
def cfs_tunables(facts: Facts, profile: Profile) -> Output:
    """Say why the CFS granularity sysctls of NVIDIA's inference profile are not set.

    nvidia-h100-inference (skyhook-packages 3f9169b) sets kernel.sched_latency_ns=1000000 and
    kernel.sched_min_granularity_ns=100000; NVIDIA's own newer revision drops them ("removed in
    kernel 6.8+ (EEVDF replaced CFS)", research/peer-systems.md 2.3). Linux 5.13 had already
    moved them from /proc/sys/kernel to debugfs (/sys/kernel/debug/sched/, commit 8a99b6833c88
    "sched: Move SCHED_DEBUG sysctl to debugfs"), which is why TuneD's scheduler plugin writes
    them there.
    """
    if not facts.has_gpus:
        return
    kernel = facts.os.kernel  # stated, or the named distribution's one version (RHEL 8: 4.18)
    if kernel is not None and kernel < CFS_SYSCTLS_MOVED:
        yield note(
            "kernel.sched_latency_ns and kernel.sched_min_granularity_ns (NVIDIA's "
            "h100-inference: 1000000/100000) not set: on "
            f"{'.'.join(map(str, kernel))} they are still sysctls (Linux 5.13 moved them to "
            "debugfs), but NVIDIA's newer profiles drop them, and the kernel's own scheduler "
            "defaults are kept"
        )
        return
    yield note(
        "kernel.sched_latency_ns and kernel.sched_min_granularity_ns (NVIDIA's h100-inference: "
        "1000000/100000) not set: since Linux 5.13 they are debugfs files, not sysctls, so "
        "sysctl.d cannot set them, and EEVDF (Linux 6.6) removed the granularity they tune; "
        "NVIDIA's newer profiles drop them too"
    )
