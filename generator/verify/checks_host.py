"""Live checks of the host's kernel and system files: sysctl, kernel arguments (and their effect),
limits, the systemd manager, modprobe, module loads, sysfs, udev schedulers and tuned."""

from __future__ import annotations

import re
from fnmatch import fnmatchcase

from generator.model.probes import (
    GOVERNOR,
    THP_DEFRAG,
    THP_ENABLED,
    Section,
    limit_user,
    module_param,
)
from generator.model.setting import Setting
from generator.verify.consumers import (
    LIMIT_ITEMS,
    arg_name,
    arg_value_holds,
    expected_limit,
    limit_number,
    seconds,
)
from generator.verify.live_state import DIFFERS, MISSING, NA, NOT_COLLECTED, OK, Live, same
from generator.verify.records import limit_rows
from generator.verify.snapshot import Why, is_absent, why_not
from generator.verify.udevmatch import assigned_scheduler, disk_kind, parse_rules, selected
from generator.verify.verdicts import Check, check_of


def check_sysctl(setting: Setting, live: Live) -> Check:
    actual = live.snapshot.value(Section.SYSCTL, setting.key)
    if actual is None:
        return check_of(setting, "?", MISSING, NOT_COLLECTED)
    if live.snapshot.absent(Section.SYSCTL, setting.key):
        return check_of(
            setting, "no such key", MISSING, "the running kernel has no /proc/sys entry for it"
        )
    return check_of(setting, actual, OK if same(setting.value, actual) else DIFFERS)


def kernel_arg_effect(setting: Setting, live: Live) -> str | None:
    """What differs in the kernel's own view of an argument on the command line, if anything."""
    unknown = " ".join(live.snapshot.values(Section.KERNEL, "unknown-params"))
    if re.search(rf'(?<![\w.-]){re.escape(setting.key)}(=|\s|"|$)', unknown):
        return "the kernel does not know this parameter (it passed it on to init)"
    if setting.key == "transparent_hugepage":
        thp = live.snapshot.value(Section.SYSFS, THP_ENABLED)
        if thp and why_not(thp) is None and selected(thp) != setting.value:
            return f"{THP_ENABLED} is {thp}"
    item = module_param(setting.key)
    param = live.snapshot.value(Section.MODPARAM, item) if item else None
    if (
        param is not None
        and why_not(param) is None
        and setting.value
        and not same(setting.value, param)
    ):
        return f"/sys/module/{item.replace('/', '/parameters/', 1)} is {param}" if item else None
    return None


def not_in_effect(setting: Setting) -> str:
    """The same words as the image's boot check (install.sh kernel_args_check)."""
    word = f"{setting.key}={setting.value}" if setting.value else setting.key
    return (
        f"kernel argument {word} not in effect: "
        "the bootloader config was not regenerated (not on /proc/cmdline)"
    )


def check_kernel_arg(setting: Setting, live: Live) -> Check:
    if not live.cmdline:
        return check_of(setting, "?", MISSING, NOT_COLLECTED)
    name = arg_name(setting.key)
    if name not in live.cmdline:
        return check_of(setting, "absent", MISSING, not_in_effect(setting))
    value = live.cmdline[name] or ""
    if not arg_value_holds(name, live.cmdline[name], setting.value):
        return check_of(
            setting, value or "(flag)", DIFFERS, "a different value is on /proc/cmdline"
        )
    effect = kernel_arg_effect(setting, live)
    return check_of(setting, value or "(set)", DIFFERS if effect else OK, effect or "")


def check_limit(setting: Setting, live: Live) -> Check:
    domain, kind, item = setting.key.split()
    user = limit_user(domain)
    if user is None:
        return check_of(
            setting, "-", NA, f"{domain} is a group: no single user's session to measure"
        )
    if item not in LIMIT_ITEMS:
        return check_of(
            setting, "-", NA, f"{item} is not a resource limit: pam_limits enforces it at login"
        )
    rows = limit_rows(live.snapshot, user)
    if not rows:
        return check_of(setting, "?", MISSING, NOT_COLLECTED)
    why = live.snapshot.why_not(Section.LIMITS, user)
    if why == Why.ABSENT:
        return check_of(setting, "-", NA, f"no user {user} on this machine")
    if why is not None:
        return check_of(
            setting, "-", NA, "the collector did not run as root (it measures through runuser)"
        )
    name = LIMIT_ITEMS[item][0]
    row = next((row for row in rows if row.name == name), None)
    if row is None:
        return check_of(setting, "?", MISSING, f"/proc/self/limits has no {name!r}")
    soft, hard = row.soft, row.hard
    expected = expected_limit(item, setting.value)
    measured = {"soft": [soft], "hard": [hard], "-": [soft, hard]}[kind]
    actual = f"soft {soft}, hard {hard} (session of {user})"
    return check_of(
        setting,
        actual,
        OK if all(v == expected for v in measured) else DIFFERS,
        ""
        if all(v == expected for v in measured)
        else f"expected {expected} in /proc/self/limits units",
    )


def check_manager(setting: Setting, live: Live) -> Check:
    actual = live.snapshot.value(Section.MANAGER, setting.key)
    if actual is None:
        return check_of(setting, "?", MISSING, NOT_COLLECTED)
    if why_not(actual) is not None:
        return check_of(setting, "-", NA, "systemd is not the service manager here")
    if setting.key.startswith("DefaultLimit"):
        soft_text, _, hard_text = setting.value.partition(":")
        soft_actual = live.snapshot.value(Section.MANAGER, setting.key + "Soft") or "?"
        ok = (
            limit_number(hard_text or soft_text) == actual
            and limit_number(soft_text) == soft_actual
        )
        return check_of(setting, f"{soft_actual}:{actual}", OK if ok else DIFFERS)
    expected_s, actual_s = seconds(setting.value), seconds(actual)
    ok = same(setting.value, actual) or (expected_s is not None and expected_s == actual_s)
    return check_of(setting, actual, OK if ok else DIFFERS)


def module_state(live: Live, module: str) -> str | None:
    return live.snapshot.value(Section.MODULE, module)


def modprobe_lines(live: Live) -> list[str]:
    return [" ".join(value.split()) for _, value in live.snapshot.section(Section.MODPROBE_CONFIG)]


def check_modprobe(setting: Setting, live: Live) -> Check:
    verb, module, *rest = setting.key.split()
    name = arg_name(module)
    state = module_state(live, module)
    if state is None:
        return check_of(setting, "?", MISSING, NOT_COLLECTED)
    lines = modprobe_lines(live)
    if verb == "blacklist":
        if f"blacklist {name}" not in lines:
            return check_of(
                setting, "not blacklisted", MISSING, "no such line in modprobe --showconfig"
            )
        if state == "loaded":
            return check_of(
                setting,
                "blacklisted, but loaded",
                DIFFERS,
                "something loaded it explicitly or as a dependency",
            )
        return check_of(
            setting, f"blacklisted, {'not installed' if state == 'absent' else 'not loaded'}", OK
        )
    param = rest[0]
    values = [
        word.partition("=")[2]
        for line in lines
        if line.startswith(f"options {name} ")
        for word in line.split()[2:]
        if word.partition("=")[0] == param
    ]
    if not values:
        return check_of(
            setting, "not configured", MISSING, f"no {param}= for {name} in modprobe --showconfig"
        )
    if values[-1] != setting.value:
        return check_of(setting, values[-1], DIFFERS, "modprobe --showconfig has another value")
    live_value = live.snapshot.value(Section.MODPARAM, f"{module}/{param}")
    if (
        state == "loaded"
        and live_value
        and why_not(live_value) is None
        and not same(setting.value, live_value)
    ):
        return check_of(
            setting,
            live_value,
            DIFFERS,
            f"configured, but the loaded module has {param}={live_value}",
        )
    return check_of(
        setting, values[-1] + ("" if state == "loaded" else f" (configured; {name} not loaded)"), OK
    )


def check_module_load(setting: Setting, live: Live) -> Check:
    state = module_state(live, setting.key)
    kernel = live.snapshot.value(Section.META, "kernel") or "this kernel"
    if state is None:
        return check_of(setting, "?", MISSING, NOT_COLLECTED)
    if state == "absent":
        return check_of(
            setting,
            "not installed",
            NA,
            f"no module {setting.key} for {kernel} (its driver is not in this image)",
        )
    return check_of(setting, state, OK if state in ("loaded", "builtin") else DIFFERS)


def check_sysfs(setting: Setting, live: Live) -> Check:
    found = [
        (path, value)
        for path, value in live.snapshot.section(Section.SYSFS)
        if path == setting.key or fnmatchcase(path, setting.key)
    ]
    if not found:
        return check_of(setting, "?", MISSING, NOT_COLLECTED)
    present = [(path, value) for path, value in found if not is_absent(value)]
    if not present:
        return check_of(
            setting,
            "no such file",
            NA,
            "this machine has no such sysfs file (driver or feature absent)",
        )
    wrong = [f"{path}: {value}" for path, value in present if selected(value) != setting.value]
    if wrong:
        return check_of(
            setting, "; ".join(wrong[:3]), DIFFERS, f"{len(wrong)} of {len(present)} files differ"
        )
    return check_of(
        setting, setting.value + (f" ({len(present)} files)" if len(present) > 1 else ""), OK
    )


def check_udev(setting: Setting, live: Live) -> Check:
    if not live.snapshot.has(Section.BLOCK):
        return check_of(setting, "no disks", NA, "the snapshot shows no disks with a scheduler")
    rules = parse_rules(live.bundle.udev_rules) if live.bundle.udev_rules is not None else None
    of_kind = [d for d in live.disks if disk_kind(d) == setting.key]
    matched = [d for d in of_kind if rules is None or assigned_scheduler(rules, d) is not None]
    if not matched:
        others = ", ".join(d.name for d in of_kind)
        why = f"{others}: not matched by the bundle's udev rules" if others else "none here"
        return check_of(setting, "-", NA, f"no {setting.key} disk the rules apply to ({why})")
    actual = {d.name: selected(d.attrs.get("queue/scheduler", "?")) for d in matched}
    text = ", ".join(f"{name}: {value}" for name, value in actual.items())
    return check_of(setting, text, OK if set(actual.values()) == {setting.value} else DIFFERS)


def check_tuned(setting: Setting, live: Live) -> Check:
    active = live.snapshot.value(Section.TUNED, "active")
    if active is None:
        return check_of(setting, "?", MISSING, NOT_COLLECTED)
    installed = live.snapshot.value(Section.TUNED, "verify") is not None  # tuned-adm ran
    if live.snapshot.absent(Section.TUNED, "active") and not installed:
        return check_of(setting, "-", NA, "tuned is not installed here")
    wanted = live.bundle.tuned_profile
    # install.sh layers the bundle's profile on the selected one ("base goldtune-x"): tuned
    # merges them left to right, so the bundle's must be the last (tuned/profiles/merger.py).
    if wanted and active.split()[-1:] != [wanted]:
        return check_of(
            setting, f"profile {active}", DIFFERS, f"the last active tuned profile is not {wanted}"
        )
    section, _, option = setting.key.partition(".")
    if section == "sysctl":
        found = check_sysctl(Setting("sysctl", option, setting.value, "", setting.rule), live)
        return found._replace(kind="tuned", key=setting.key)
    path = {
        ("cpu", "governor"): GOVERNOR,
        ("vm", "transparent_hugepages"): THP_ENABLED,
        ("vm", "transparent_hugepage"): THP_ENABLED,
        ("vm", "transparent_hugepage.defrag"): THP_DEFRAG,
    }.get((section, option))
    if path:
        found = check_sysfs(Setting("sysfs", path, setting.value, "", setting.rule), live)
        return check_of(setting, found.actual, found.verdict, found.reason)
    verified = live.snapshot.value(Section.TUNED, "verify")
    if section == "main" or verified == "ok":
        return check_of(
            setting,
            f"profile {active} active" + (", tuned-adm verify ok" if verified == "ok" else ""),
            OK,
        )
    errors = "; ".join(
        value for _, value in live.snapshot.section(Section.TUNED_LOG) if " ERROR " in value
    )[:300]
    return check_of(setting, f"profile {active} active, tuned-adm verify failed", DIFFERS, errors)
