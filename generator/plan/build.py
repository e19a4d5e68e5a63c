"""From facts and profile to the plan: run the rules, settle conflicts, apply overrides, check.

The plan is the single source of truth: `explain`, `diff`, the renderers and `verify` read it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from generator.errors import GenerationError, InputError, Problem
from generator.inputs.facts import Facts
from generator.inputs.profile import Override, Profile
from generator.model.layout import GRUB_FILE, KUBELET_DROPIN_DIR, TUNED_DIR
from generator.model.setting import KIND_ORDER, NicRole, Note, Plan, Setting
from generator.model.vendors import GpuVendor, vendor_table
from generator.plan.checks import KNOWN_TABLES, Finding, check_plan
from generator.plan.claims import plan_claims
from generator.plan.distro import DISTRO_RULE, apply_distro_defaults, backport_of, key_available
from generator.plan.operator_values import operator_values
from generator.rules import REGISTRY, RULES_BY_ID
from generator.rules.base import Rule

if TYPE_CHECKING:  # the tables' models, for annotations only
    from generator.inputs.distro import Backport


def run_rules(
    facts: Facts, profile: Profile, rules: Iterable[Rule] = REGISTRY
) -> tuple[list[Setting], list[Note]]:
    """Every rule's settings and notes. Each rule is given only the GPUs of the vendors it
    declares (``Rule.apply``): where none of them has a GPU here, a GPU rule does not fire."""
    settings: list[Setting] = []
    notes: list[Note] = []
    for rule in rules:
        for item in rule.apply(facts, profile):
            (settings if isinstance(item, Setting) else notes).append(item)  # type: ignore[arg-type]
    return settings, notes


def _declares_override(winner: str, loser: str) -> bool:
    rule = RULES_BY_ID.get(winner)
    return rule is not None and loser in rule.overrides


def resolve_conflicts(settings: list[Setting], source: str) -> list[Setting]:
    """One setting per target; two rules that disagree is an error unless one declares it wins."""
    chosen: dict[tuple[str, str], Setting] = {}
    problems: list[Problem] = []
    for setting in settings:
        previous = chosen.get(setting.target)
        if previous is None or previous.value == setting.value:
            chosen.setdefault(setting.target, setting)
        elif _declares_override(setting.rule, previous.rule):
            chosen[setting.target] = setting
        elif not _declares_override(previous.rule, setting.rule):
            problems.append(
                Problem(
                    source,
                    f"{setting.kind} {setting.key}",
                    f"rules {previous.rule} ({previous.value!r}) and {setting.rule} "
                    f"({setting.value!r}) disagree and neither declares that it overrides "
                    "the other",
                )
            )
    if problems:
        raise InputError(problems)
    return list(chosen.values())


def _override_setting(override: Override, current: Setting | None, profile: Profile) -> Setting:
    value = str(override.value)
    reason = f"profile {profile.name} override: {override.reason}"
    if override.accept_risk:
        reason = f"RISK ACCEPTED ({override.accept_risk}): {reason}"
    if current is None:
        return Setting(
            override.kind,
            override.key,
            value,
            reason + " (no rule sets this)",
            rule=f"profile:{profile.name}",
            override=True,
        )
    return Setting(
        override.kind,
        override.key,
        value,
        reason + f" (rule {current.rule} chose {current.value!r}: {current.reason})",
        rule=current.rule,
        override=True,
        original_value=current.value,
        original_rule=current.rule,
        optional=current.optional,
    )


def apply_overrides(settings: list[Setting], profile: Profile) -> list[Setting]:
    by_target = {s.target: s for s in settings}
    for index, override in enumerate(profile.overrides):
        if override.kind == "tuned" and profile.tuned == "off":
            raise InputError(
                Problem(
                    profile.source or profile.name,
                    f"overrides[{index}].kind",
                    "a tuned override, but the profile says tuned: off (no tuned profile is "
                    "written)",
                    hint="set tuned: layered, or override the sysfs or sysctl setting instead",
                )
            )
        target = (override.kind, override.key)
        by_target[target] = _override_setting(override, by_target.get(target), profile)
    return list(by_target.values())


def drop_unavailable(settings: list[Setting], facts: Facts) -> tuple[list[Setting], list[Note]]:
    """Rules state intent; a known key the target kernel or arch lacks is dropped with a note.

    Unknown keys and profile overrides are not dropped: the cross-checks reject them. A key the
    named distribution's kernel carries as a backport (its table's kernel_backports) is kept on
    the releases that have it, with a note naming the backport.
    """
    kept: list[Setting] = []
    notes: list[Note] = []
    distro = facts.os.distro
    for setting in settings:
        table = KNOWN_TABLES.get(setting.kind)
        known = table[0].get(setting.key) if table else None
        if known is None or known.available(facts.os.kernel, facts.cpu.arch):
            kept.append(setting)
            continue
        backport = backport_of(distro, setting.kind, setting.key)
        if backport is not None and key_available(known, setting.kind, setting.key, facts):
            kept.append(setting)
            notes.append(Note(_kept(setting, backport, facts), rule=DISTRO_RULE))
            continue
        notes.append(Note(_dropped(setting, backport, facts), rule=setting.rule))
    return kept, notes


def _kept(setting: Setting, backport: Backport, facts: Facts) -> str:
    """Why a key newer than the kernel's mainline base stays: the build it was judged on has
    the backport, stated as os.kernel or (unstated) the build the distribution's table names."""
    distro = facts.os.distro.key if facts.os.distro else ""
    release = facts.os.kernel_release
    kept = f"{setting.kind} {setting.key} kept on {release or facts.os.assumed_release}"
    backported = (
        f"mainline has it from {backport.mainline}, {distro} backported it in "
        f"{backport.kernel_release}"
    )
    if release is not None:
        return f"{kept}: {backported}"
    minor = facts.os.distro.assumed_minor_release if facts.os.distro else None
    of_minor = f" ({minor}'s kernel)" if minor else ""
    return (
        f"{kept}{of_minor}, the build {distro} plans for when os.kernel is not stated: "
        f"{backported}; set os.kernel to the release as uname -r prints it to plan for another "
        "build (an older one leaves it out)"
    )


def _dropped(setting: Setting, backport: Backport | None, facts: Facts) -> str:
    """Why a key is left out; for a distribution backport, the stated release it would need."""
    kernel = ".".join(map(str, facts.os.kernel)) if facts.os.kernel else "a current kernel"
    dropped = f"{setting.kind} {setting.key} dropped: "
    if backport is None or facts.os.distro is None or not _exists_on_arch(backport, facts):
        return dropped + f"it does not exist on {facts.cpu.arch} with {kernel}"
    release = facts.os.kernel_release
    minor = f" ({backport.minor_release})" if backport.minor_release else ""
    assumed = facts.os.assumed_release
    stated = (
        f"os.kernel {release} is older"
        if release
        else f"os.kernel is not stated and the build it plans for, {assumed}, is older"
        if assumed
        else "os.kernel is not stated"
    )
    return dropped + (
        f"mainline has it from {backport.mainline}, not {kernel}; {facts.os.distro.key} "
        f"backported it in {backport.kernel_release}{minor}, but {stated}: set os.kernel to "
        "the release as uname -r prints it to keep it there"
    )


def _exists_on_arch(backport: Backport, facts: Facts) -> bool:
    """Whether the backported key exists on this architecture at all (nosmt is x86 only)."""
    table = KNOWN_TABLES.get(backport.kind)
    known = table[0].get(backport.key) if table else None
    return known is not None and known.available(None, facts.cpu.arch)


# Kernel arguments the kernel reads in command-line order (mm/hugetlb.c): `hugepages=` counts
# pages of the size named by the `hugepagesz=` before it, and `default_hugepagesz=` may come
# first only while no count was given yet. Sorted by name they read "default_hugepagesz=1G
# hugepages=N hugepagesz=1G", and the kernel warns "hugepagesz=1G specified twice, ignoring".
ORDERED_KERNEL_ARGS: tuple[str, ...] = ("default_hugepagesz", "hugepagesz", "hugepages")


def setting_order(setting: Setting) -> tuple[int, str, int]:
    """Kind, then key; the order-sensitive kernel arguments keep their sequence, as one block."""
    if setting.kind == "kernel-arg" and setting.key in ORDERED_KERNEL_ARGS:
        return (
            KIND_ORDER[setting.kind],
            ORDERED_KERNEL_ARGS[0],
            ORDERED_KERNEL_ARGS.index(setting.key),
        )
    return (KIND_ORDER[setting.kind], setting.key, 0)


def order_settings(settings: Iterable[Setting]) -> tuple[Setting, ...]:
    return tuple(sorted(settings, key=setting_order))


def build_plan(facts: Facts, profile: Profile) -> Plan:
    """The complete, ordered, checked plan.

    A bad profile override or a combination of the inputs the checks refuse raises InputError
    (exit 2, naming the profile); a bad value from a rule raises GenerationError (exit 1, naming
    the rule): that is a goldtune bug, not the user's input.
    """
    source = profile.source or profile.name
    proposed, notes = run_rules(facts, profile)
    available, dropped = drop_unavailable(resolve_conflicts(proposed, source), facts)
    distro = facts.os.distro
    targeted, redundant, lowered = apply_distro_defaults(
        apply_overrides(available, profile), distro
    )
    settings = order_settings(targeted)
    notes += dropped + redundant
    unlisted = {(o.kind, o.key) for o in profile.overrides if o.unlisted}
    accepted = {(o.kind, o.key) for o in profile.overrides if o.accept_risk}
    findings, warnings = check_plan(settings, facts, unlisted, accepted)
    raise_findings(findings, facts, source)
    return Plan(
        facts.name,
        profile.name,
        settings,
        tuple(notes),
        tuple(warnings + lowered),
        distro=distro.key if distro else "",
        nvidia_gpus=sum(g.count for g in facts.gpus if g.model.vendor == GpuVendor.NVIDIA),
        amd_gpus=sum(g.count for g in facts.gpus if g.model.vendor == GpuVendor.AMD),
        gpu_vendors=tuple(vendor for vendor in vendor_table() if facts.has_gpus_of(vendor)),
        nics=tuple(NicRole(nic.name, nic.role) for nic in facts.nics),
        grub_dropins=distro is None or reads_grub_dropins(distro.boot_args.reads),
        tuned_dir=(distro.tuned.profiles_dir if distro else None) or TUNED_DIR,
        kubelet_dir=(distro.kubelet.config_dir if distro and distro.kubelet else None)
        or KUBELET_DROPIN_DIR,
        reboot_for_kernel_args=profile.reboot_for_kernel_args
        and any(s.kind == "kernel-arg" for s in settings),
        claims=plan_claims(facts, settings),
        driver=facts.os.driver,
        operator_values=operator_values(facts, profile, settings),
    )


def reads_grub_dropins(reads: Iterable[str]) -> bool:
    """Whether a distribution's boot tools (its table's boot_args.reads) read the GRUB drop-ins."""
    dropin_dir = GRUB_FILE.rsplit("/", 1)[0]
    return any(path.startswith(dropin_dir + "/") for path in reads)


def raise_findings(findings: list[Finding], facts: Facts, source: str) -> None:
    """Blame each finding where it belongs: the user's inputs (exit 2) or a rule (exit 1).

    A setting's own problem belongs to its origin: a profile override is the user's, a rule's
    value is a goldtune bug. A plan-wide problem comes from the combination of the inputs.
    """
    from_inputs = [f for f in findings if f.plan_wide or f.setting is None or f.setting.override]
    if from_inputs:
        raise InputError(
            [
                Problem(source, _finding_path(f), f"for hardware {facts.name}: {f.message}")
                for f in from_inputs
            ]
        )
    if findings:
        raise GenerationError(
            "; ".join(
                f"rule {f.setting.rule} produced "
                f"{f.setting.kind} {f.setting.key}={f.setting.value!r}: "
                f"{f.message} (a goldtune bug: please report it)"
                for f in findings
                if f.setting
            )
        )


def _finding_path(finding: Finding) -> str:
    setting = finding.setting
    if setting is None:
        return ""
    return f"{'overrides' if setting.override else setting.rule}: {setting.kind} {setting.key}"
