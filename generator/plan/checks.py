"""Every check of a plan, in one pass: each setting on its own, then the plan as a whole.

Per setting: the grammar of its kind (``generator.model.kinds``), the traps of the source articles,
whether the target kernel has the key, and whether the CPU vendor has the argument. Across
settings: nofile limits within fs.nr_open, huge pages within RAM, the command line within the
architecture's limit, tuned and sysctl.d not setting the same key.

``check_plan`` only finds; ``generator.plan.build`` decides who is to blame: a bad profile override
is the user's input (exit 2), a bad value from a rule is a goldtune bug (exit 1).
"""

# No `from __future__ import annotations`: a NamedTuple turns each string annotation into
# a compiled ForwardRef, ~0.15 ms a record at import (bench/bench.py's cold gen).
import functools
import re
from collections import Counter
from collections.abc import Callable, Collection, Iterable
from typing import NamedTuple

from generator.inputs.facts import Facts
from generator.model import mig
from generator.model.cpulist import compress_cpus, expand_cpus
from generator.model.kinds import KIND_SPECS, Kind
from generator.model.setting import KIND_ORDER, PlanWarning, Setting, settings_by_kind
from generator.plan.distro import key_available
from generator.plan.known_keys import (
    COMMAND_LINE_SIZE,
    KNOWN_KERNEL_ARGS,
    KNOWN_SYSCTLS,
    NR_OPEN_DEFAULT,
    SHAPES,
    KnownKey,
)
from generator.plan.module_flavour import check_module_flavour
from generator.plan.preconditions import (
    HUGEPAGE_SIZE_ARGS,
    ISOLATING_ARGS,
    check_preconditions,
    isolated_cpus,
    memparse_bytes,
)

HUGEPAGE_MAX_FRACTION = 0.75
CMDLINE_WARN_FRACTION = 0.5  # leave the other half for the distribution's own arguments
KNOWN_TABLES: dict[str, tuple[dict[str, KnownKey], str]] = {
    Kind.SYSCTL: (KNOWN_SYSCTLS, "sysctl"),
    Kind.KERNEL_ARG: (KNOWN_KERNEL_ARGS, "kernel parameter"),
}
Target = tuple[str, str]


def kernel_int(text: str) -> int | None:
    """The integer the kernel reads from ``text`` (kstrtol, base 0: 0x.. hex, 0.. octal), or None.

    So ``00``, ``+0`` and ``0x0`` are all 0 to the kernel, and to the trap checks.
    """
    found = re.fullmatch(r"\s*([+-]?)(0[xX][0-9a-fA-F]+|0[0-7]*|[1-9][0-9]*)\s*", text, re.ASCII)
    if found is None:
        return None
    sign, digits = found.groups()
    number = (
        int(digits, 16)
        if digits[:2].lower() == "0x"
        else int(digits, 8 if digits[0] == "0" else 10)
    )
    return -number if sign == "-" else number


def _is_int(value: str, wanted: int) -> bool:
    return kernel_int(value) == wanted


# The traps of the source articles (TUNING.md): never emitted, whatever a rule or override says.
TRAPS: tuple[tuple[str, str, Callable[[str], bool], str], ...] = (
    (
        Kind.SYSCTL,
        "vm.transparent_hugepage",
        lambda v: True,
        "there is no such sysctl; THP is set with the transparent_hugepage= boot argument or sysfs",
    ),
    (
        Kind.KERNEL_ARG,
        "intel_idle.max_cstate",
        lambda v: _is_int(v, 0),
        "0 disables intel_idle and falls back to acpi_idle's firmware tables; use 1",
    ),
    (
        Kind.KERNEL_ARG,
        "transparent_hugepage",
        lambda v: v == "always",
        "'always' stalls allocating threads on compaction; use madvise",
    ),
    (
        Kind.SYSCTL,
        "vm.swappiness",
        lambda v: _is_int(v, 0),
        "0 reclaims no anonymous memory until the page cache is gone, "
        "ending in OOM kills in cgroups; use 1",
    ),
)


class Finding(NamedTuple):
    """A problem with one setting of the plan (``setting`` None: the plan as a whole).

    ``plan_wide``: found by a check across settings, so it comes from the combination of the
    inputs (hardware, knobs, overrides), not from one setting's own origin.
    """

    setting: Setting | None
    message: str
    plan_wide: bool = False


class PlanChecks(NamedTuple):
    findings: list[Finding]
    warnings: list[PlanWarning]


# A matrix checks the same settings in most of its plans (~244 different ones over the 135
# plans of ~75 of every shipped system x profile): what a setting's own text is checked for (its
# grammar, the known traps) is found once per process, as nothing else is read: build_plan 0.81
# -> 0.71 ms of CPU (medians of interleaved runs over the 45 shipped plans).
@functools.lru_cache(maxsize=4096)
def check_grammar(setting: Setting) -> str | None:
    """The key and value have the form their file needs, as plain data (never escaped into it)."""
    spec = KIND_SPECS.get(setting.kind)
    if spec is None:
        return f"unknown setting kind {setting.kind!r}"
    if not spec.key_fits(setting.key):
        return f"key {setting.key!r} does not fit: a {setting.kind} setting is {spec.shape}"
    if not spec.value_fits(setting.key, setting.value):
        return (
            f"value {setting.value!r} cannot be written into the {setting.kind} file as plain "
            f"data: expected {spec.value_shape(setting.key)}"
        )
    return None


@functools.lru_cache(maxsize=4096)
def check_traps(setting: Setting) -> str | None:
    for kind, key, matches, why in TRAPS:
        if setting.kind == kind and setting.key == key and matches(setting.value):
            return f"{kind} {key}={setting.value} is a known trap: {why}"
    return None


def suggest(key: str, known: Iterable[str]) -> str:
    import difflib  # only to word an error: not in every run

    close = difflib.get_close_matches(key, list(known), n=1, cutoff=0.75)
    return f"; did you mean {close[0]!r}?" if close else ""


def check_known_key(setting: Setting, facts: Facts, unlisted: bool) -> str | None:
    """A key goldtune lists and the target kernel has; an override may name an unlisted key."""
    if setting.kind not in KNOWN_TABLES:
        return None
    table, what = KNOWN_TABLES[setting.kind]
    known = table.get(setting.key)
    if known is None:
        if unlisted:
            return None
        return (
            f"unknown {what} {setting.key!r} (not in goldtune's list of known keys"
            f"{suggest(setting.key, table)}; a profile override may set it with unlisted: true)"
        )
    if not key_available(known, setting.kind, setting.key, facts):
        kernel = ".".join(map(str, facts.os.kernel)) if facts.os.kernel else "current"
        return f"{what} {setting.key!r} does not exist on {facts.cpu.arch} kernel {kernel}"
    if setting.kind == Kind.SYSCTL:
        pattern, expected = SHAPES[known.shape]
        if re.fullmatch(pattern, setting.value.strip(), re.ASCII) is None:
            return f"value {setting.value!r} is not {expected}, which {setting.key} expects"
    return None


def check_vendor_args(setting: Setting, facts: Facts) -> str | None:
    if setting.kind != Kind.KERNEL_ARG or facts.cpu.vendor == "intel":
        return None
    if setting.key.startswith("intel_idle."):
        return f"{setting.key} on a {facts.cpu.vendor} CPU: intel_idle only drives Intel CPUs"
    if setting.key in {"intel_iommu", "intel_pstate"}:
        return f"{setting.key} on a {facts.cpu.vendor} CPU does nothing"
    return None


# systemd's parse_boolean: the words a boolean option is false with (a bare option is true)
SYSTEMD_FALSE = frozenset({"0", "no", "n", "false", "f", "off"})
# The kernel arguments that ask systemd for a cgroup v1 ('legacy' or 'hybrid') hierarchy: a
# false unified_cgroup_hierarchy, a true legacy_systemd_cgroup_controller (hybrid), and the
# override systemd 256 to 257 ask for before they boot v1 at all.
CGROUP_V1_ARGS = {
    "systemd.unified_cgroup_hierarchy": lambda value: value.lower() in SYSTEMD_FALSE,
    "systemd.legacy_systemd_cgroup_controller": lambda value: value.lower() not in SYSTEMD_FALSE,
    "SYSTEMD_CGROUP_ENABLE_LEGACY_FORCE": lambda value: value.lower() not in SYSTEMD_FALSE,
}


def check_cgroup_hierarchy(setting: Setting, facts: Facts) -> str | None:
    """A kernel argument asking for a cgroup v1 or hybrid hierarchy, on a distribution whose
    table says it boots cgroup v2 only (cgroups.v1_supported false): systemd 256 refuses to
    boot v1 without SYSTEMD_CGROUP_ENABLE_LEGACY_FORCE=1 and 258 removed v1 (systemd NEWS,
    "CHANGES WITH 256" and "258", read from Debian's systemd 262-1 NEWS.gz). Where the table does
    not say (or there is none), nothing is assumed either way."""
    distro = facts.os.distro
    asks = CGROUP_V1_ARGS.get(setting.key) if setting.kind == Kind.KERNEL_ARG else None
    if asks is None or distro is None or distro.cgroups is None:
        return None
    if distro.cgroups.v1_supported is not False or not asks(setting.value):
        return None
    return (
        f"{setting.key}{'=' + setting.value if setting.value else ''} asks for a cgroup v1 "
        f"hierarchy, which {distro.name} does not boot (cgroup v2 only: systemd 258 removed "
        "v1): leave the hierarchy to systemd; kubelet and containerd use the systemd driver"
    )


def check_setting(setting: Setting, facts: Facts, unlisted: bool = False) -> list[str]:
    """Everything wrong with one setting; the grammar first, since the rest reads the value."""
    grammar = check_grammar(setting)
    if grammar:
        return [grammar]
    found = [
        check_traps(setting),
        check_known_key(setting, facts, unlisted),
        check_vendor_args(setting, facts),
        check_cgroup_hierarchy(setting, facts),
        check_preconditions(setting, facts),
        check_module_flavour(setting, facts),
    ]
    return [error for error in found if error]


def risk_accepted(setting: Setting, error: str, facts: Facts) -> bool:
    """Whether ``error`` is one an override's accept_risk may waive: a known trap or a failed
    precondition (plan/preconditions.py), never the grammar or an unknown key."""
    return error in (check_traps(setting), check_preconditions(setting, facts))


def _int_limit(value: str) -> int | None:
    return int(value) if re.fullmatch(r"[0-9]+", value) else None


NR_OPEN_TARGET = (str(Kind.SYSCTL), "fs.nr_open")
# fs.nr_open and the nofile limits: the only settings check_nofile reads (a dict entry for each
# of a plan's other ninety-odd settings was 0.04 ms a plan)
NOFILE_READS = (NR_OPEN_TARGET, (str(Kind.SYSTEMD_MANAGER), "DefaultLimitNOFILE"))


def _reads_nofile(setting: Setting) -> bool:
    if setting.kind == Kind.LIMIT:
        return setting.key.endswith(" nofile")
    return setting.target in NOFILE_READS


def check_nofile(settings: Iterable[Setting]) -> list[Finding]:
    by_target = {s.target: s for s in settings if _reads_nofile(s)}
    nr_open_setting = by_target.pop(NR_OPEN_TARGET, None)
    nr_open = (_int_limit(nr_open_setting.value) if nr_open_setting else None) or NR_OPEN_DEFAULT
    nofile = list(by_target.values())
    findings = []
    for setting in nofile:
        values = [_int_limit(part) for part in setting.value.split(":")]
        if any(v is None or v > nr_open for v in values):
            findings.append(
                Finding(
                    setting,
                    f"{setting.kind} {setting.key}={setting.value} must be a "
                    "number no larger than "
                    f"fs.nr_open ({nr_open}), or logins and service starts fail",
                    plan_wide=True,
                )
            )
    return findings


# The huge page size `hugepages=` counts in when no hugepagesz=/default_hugepagesz= names one: the
# architecture's default (HPAGE_SHIFT / the PMD size), which is 2 MiB on x86_64 and on arm64 with
# 4 KiB pages, 32 MiB with 16 KiB pages and 512 MiB with 64 KiB pages
# (Documentation/admin-guide/mm/hugetlbpage.rst, arch/arm64/include/asm/pgtable-hwdef.h).
DEFAULT_HUGEPAGE_MIB_BY_PAGE_KIB = {4: 2, 16: 32, 64: 512}


def hugepage_bytes(by_key: dict[str, Setting], page_size_kib: int) -> int | None:
    """The size of the pages ``hugepages=`` reserves: hugepagesz=, else default_hugepagesz=, else
    the architecture's default for the base page size (None when a size does not parse)."""
    for key in HUGEPAGE_SIZE_ARGS:
        if key in by_key:
            return memparse_bytes(by_key[key].value)
    return DEFAULT_HUGEPAGE_MIB_BY_PAGE_KIB.get(page_size_kib, 2) << 20


def check_hugepages(settings: Iterable[Setting], facts: Facts) -> list[Finding]:
    by_key = {s.key: s for s in settings if s.kind == Kind.KERNEL_ARG}
    count = by_key.get("hugepages")
    pages = _int_limit(count.value) if count else None
    size_bytes = hugepage_bytes(by_key, facts.os.page_size_kib)
    if count is None or pages is None or size_bytes is None:
        return []
    reserved = pages * size_bytes / (1 << 30)
    if reserved > facts.memory_gib * HUGEPAGE_MAX_FRACTION:
        return [
            Finding(
                count,
                f"hugepages={count.value} reserves {reserved:.0f} GiB, "
                f"more than {HUGEPAGE_MAX_FRACTION:.0%} of {facts.memory_gib} GiB RAM; "
                "the machine would not have memory left to boot services",
                plan_wide=True,
            )
        ]
    return []


def check_mig_layout(settings: Iterable[Setting], facts: Facts) -> list[Finding]:
    """The profile's MIG layout fits each MIG-capable GPU model here (generator.model.mig)."""
    layout = next((s for s in settings if s.kind == Kind.GPU and s.key == "mig-layout"), None)
    if layout is None:
        return []
    counts = dict(Counter(layout.value.split(",")))
    findings = []
    for model in {group.model.key: group.model for group in facts.gpus}.values():
        if not model.supports_mig:
            continue
        if not model.mig_profiles:
            problem = "its MIG profiles are not in hardware_db, so the layout cannot be checked"
        else:
            problem = mig.layout_problem(counts, model.mig_profiles) or ""
        if problem:
            findings.append(
                Finding(layout, f"gpu_mig_layout on {model.key}: {problem}", plan_wide=True)
            )
    return findings


AMD_PARTITION_KNOBS = {
    "compute-partition": ("gpu_compute_partition", "compute_partitions"),
    "memory-partition": ("gpu_memory_partition", "memory_partitions"),
}


def check_amd_partitions(settings: Iterable[Setting], facts: Facts) -> list[Finding]:
    """Each AMD partition mode the profile asks is one the catalog lists for every GPU model here
    (hardware_db/gpus/*.yaml compute_partitions, memory_partitions; unknown lists pass)."""
    findings = []
    for setting in settings:
        if setting.kind != Kind.GPU or setting.key not in AMD_PARTITION_KNOBS:
            continue
        knob, field = AMD_PARTITION_KNOBS[setting.key]
        for model in {group.model.key: group.model for group in facts.gpus}.values():
            modes = getattr(model, field)
            if modes is not None and setting.value not in modes:
                findings.append(
                    Finding(
                        setting,
                        f"{knob}: {setting.value} is not a mode of {model.key} "
                        f"(its {field}: {', '.join(modes)})",
                        plan_wide=True,
                    )
                )
    return findings


def kernel_cmdline(settings: Iterable[Setting]) -> str:
    return " ".join(
        s.key if s.value == "" else f"{s.key}={s.value}"
        for s in settings
        if s.kind == Kind.KERNEL_ARG
    )


def check_cmdline(settings: Iterable[Setting], facts: Facts) -> PlanChecks:
    line = kernel_cmdline(settings)
    limit = COMMAND_LINE_SIZE[facts.cpu.arch]
    if len(line) >= limit:
        return PlanChecks(
            [
                Finding(
                    None,
                    f"the kernel arguments take {len(line)} bytes; "
                    f"{facts.cpu.arch} allows {limit - 1}",
                    plan_wide=True,
                )
            ],
            [],
        )
    if len(line) > limit * CMDLINE_WARN_FRACTION:
        return PlanChecks(
            [],
            [
                PlanWarning(
                    f"the kernel arguments take {len(line)} of {limit - 1} "
                    "bytes; the distribution's own arguments must fit in the "
                    "rest",
                    "cmdline-length",
                )
            ],
        )
    return PlanChecks([], [])


def same_sysctl_value(first: str, second: str) -> bool:
    """Two sysctl values the kernel reads alike: the same words (tcp_rmem's "4096  87380" and
    "4096 87380" are one value; sysctl(8) writes the line as given)."""
    return first.split() == second.split()


def check_tuned_overlap(settings: Iterable[Setting]) -> list[Finding]:
    """A tuned [sysctl] key that sysctl.d sets to another value: tuned writes its value at every
    start and ``reapply_sysctl`` writes sysctl.d's back, so the live value is sysctl.d's and
    `tuned-adm verify` fails on every boot. The same value in both is the restatement tuned.conf
    makes on purpose (render/tuned.py) and breaks nothing."""
    settings = list(settings)
    sysctl_values = {s.key: s.value for s in settings if s.kind == Kind.SYSCTL}
    findings = []
    for s in settings:
        key = s.key.removeprefix("sysctl.")
        if s.kind != Kind.TUNED or not s.key.startswith("sysctl.") or key not in sysctl_values:
            continue
        if same_sysctl_value(s.value, sysctl_values[key]):
            continue
        findings.append(
            Finding(
                s,
                f"tuned {s.key}={s.value} and sysctl.d {key}={sysctl_values[key]} differ: the "
                "live value is sysctl.d's and tuned-adm verify fails on every boot; set one "
                "value",
                plan_wide=True,
            )
        )
    return findings


# Sysctls that are one limit written two ways: writing one makes the other read 0, so a plan
# that sets both gets whichever sysctl.d writes last, and tuned's restatement of the other then
# fails `tuned-adm verify` (Documentation/admin-guide/sysctl/vm.rst, dirty_bytes: "Only one of
# them may be specified at a time").
EXCLUSIVE_SYSCTLS = (
    ("vm.dirty_bytes", "vm.dirty_ratio"),
    ("vm.dirty_background_bytes", "vm.dirty_background_ratio"),
)


def check_exclusive_sysctls(settings: Iterable[Setting]) -> list[Finding]:
    """Both sysctls of a pair the kernel keeps exclusive (a ratio override next to a rule's
    byte limit)."""
    by_key = {s.key: s for s in settings if s.kind == Kind.SYSCTL}
    findings = []
    for first, second in EXCLUSIVE_SYSCTLS:
        if first in by_key and second in by_key:
            blamed = by_key[second] if by_key[second].override else by_key[first]
            findings.append(
                Finding(
                    blamed,
                    f"{first} and {second} are one limit: writing one makes the other read 0, "
                    f"so only one may be set; override {first if blamed.key == second else second}"
                    " instead",
                    plan_wide=True,
                )
            )
    return findings


def check_isolated_irqs(settings: Iterable[Setting]) -> PlanChecks:
    """NIC interrupts pinned onto CPUs that isolcpus= or nohz_full= isolate: the isolated CPUs
    would take every completion interrupt of the NIC, which is what isolating them is to avoid
    (an isolcpus override next to irq pinning; tuning review D-N8). A list resolved at boot
    (``local``) is the device's local_cpulist, which may hold isolated CPUs: a warning."""
    settings = list(settings)
    findings: list[Finding] = []
    warnings: list[PlanWarning] = []
    for arg in (s for s in settings if s.kind == Kind.KERNEL_ARG and s.key in ISOLATING_ARGS):
        isolated = isolated_cpus(arg.value)
        if not isolated:
            continue
        for pin in (s for s in settings if s.kind == Kind.IRQ):
            if pin.value == "local":
                warnings.append(
                    PlanWarning(
                        f"irq {pin.key} is pinned at boot to its device's local CPUs, which may "
                        f"include CPUs {arg.key}={arg.value} isolates",
                        "irq-isolated",
                    )
                )
                continue
            overlap = isolated & set(expand_cpus(pin.value))
            if overlap:
                findings.append(
                    Finding(
                        arg,
                        f"{arg.key}={arg.value} isolates CPUs {compress_cpus(overlap)} that take "
                        f"the interrupts of {pin.key} (irq {pin.key} {pin.value}); override "
                        "the irq pin list too, or set irq: irqbalance, which skips isolated CPUs",
                        plan_wide=True,
                    )
                )
    return PlanChecks(findings, warnings)


def check_plan(
    settings: tuple[Setting, ...],
    facts: Facts,
    unlisted: Collection[Target] = (),
    accepted: Collection[Target] = (),
) -> PlanChecks:
    """Every finding and warning of a plan; ``unlisted``: targets an override names on purpose;
    ``accepted``: targets whose override accepts the risk of a trap or a failed precondition,
    which are then warnings, not findings."""
    findings = []
    waived = []
    for setting in settings:
        for error in check_setting(setting, facts, setting.target in unlisted):
            if (
                setting.override
                and setting.target in accepted
                and risk_accepted(setting, error, facts)
            ):
                waived.append(PlanWarning(f"risk accepted by the profile: {error}", "risk"))
            else:
                findings.append(Finding(setting, error))
    # The plan-wide checks read values, so only those the grammar has accepted.
    wrong = {finding.setting for finding in findings if finding.setting is not None}
    fitting = tuple(setting for setting in settings if setting not in wrong) if wrong else settings
    # Each plan-wide check reads a few kinds: it is given those (a pass over every setting per
    # check was ~0.08 ms a plan). The grouping is the one Plan.of_kind then finds for the render.
    by_kind = settings_by_kind(fitting)

    def of(*kinds: Kind) -> tuple[Setting, ...]:
        """The settings of ``kinds``, in the plan's order (kind, then key)."""
        return tuple(
            s for kind in sorted(kinds, key=KIND_ORDER.__getitem__) for s in by_kind.get(kind, ())
        )

    findings += check_nofile(of(Kind.SYSCTL, Kind.LIMIT, Kind.SYSTEMD_MANAGER))
    findings += check_hugepages(of(Kind.KERNEL_ARG), facts)
    findings += check_tuned_overlap(of(Kind.SYSCTL, Kind.TUNED))
    findings += check_mig_layout(of(Kind.GPU), facts)
    findings += check_amd_partitions(of(Kind.GPU), facts)
    findings += check_exclusive_sysctls(of(Kind.SYSCTL))
    cmdline = check_cmdline(of(Kind.KERNEL_ARG), facts)
    isolation = check_isolated_irqs(of(Kind.KERNEL_ARG, Kind.IRQ))
    warnings = [
        PlanWarning(
            f"{kind} {key} is not in goldtune's list of known keys; set by a profile "
            "override marked unlisted",
            "unlisted-key",
        )
        for kind, key in sorted(unlisted)
        if kind in KNOWN_TABLES and key not in KNOWN_TABLES[kind][0]
    ]
    return PlanChecks(
        findings + cmdline.findings + isolation.findings,
        waived + warnings + cmdline.warnings + isolation.warnings,
    )
