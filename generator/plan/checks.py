"""Cross-checks on a finished plan: problems are errors (exit 2), caveats are warnings.

Each check is a small function of the settings and facts; ``check_plan`` runs them all and
reports every error at once.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

from generator.inputs.facts import Facts
from generator.plan.known_keys import (
    COMMAND_LINE_SIZE,
    KNOWN_KERNEL_ARGS,
    KNOWN_SYSCTLS,
    NR_OPEN_DEFAULT,
    SHAPES,
    KnownKey,
)
from generator.model.setting import Setting, Warning

HUGEPAGE_MAX_FRACTION = 0.75
CMDLINE_WARN_FRACTION = 0.5  # leave the other half for the distribution's own arguments

# The traps in the source articles (TUNING.md): never emitted, whatever a rule or override says.
TRAPS: tuple[tuple[str, str, Callable[[str], bool], str], ...] = (
    ("sysctl", "vm.transparent_hugepage", lambda v: True,
     "there is no such sysctl; THP is set with the transparent_hugepage= boot argument or sysfs"),
    ("kernel-arg", "intel_idle.max_cstate", lambda v: v == "0",
     "0 disables intel_idle and falls back to acpi_idle's firmware tables; use 1"),
    ("kernel-arg", "transparent_hugepage", lambda v: v == "always",
     "'always' stalls allocating threads on compaction; use madvise"),
    ("sysctl", "vm.swappiness", lambda v: v.strip() == "0",
     "0 reclaims no anonymous memory until the page cache is gone, ending in OOM kills in cgroups; use 1"),
)

SERVICE_ACTIONS = {"enable", "disable", "mask"}
UDEV_MATCHES = {"nvme", "ssd", "hdd"}
IO_SCHEDULERS = {"none", "mq-deadline", "bfq", "kyber"}
LIMIT_KEY = re.compile(r"^(\*|%?@?[a-z_][a-z0-9_.-]*|\d+(:\d*)?) (soft|hard|-) [a-z_]+$")
MODPROBE_KEY = re.compile(r"^(blacklist [A-Za-z0-9_-]+|options [A-Za-z0-9_-]+ [A-Za-z0-9_.]+)$")
MODULE_NAME = re.compile(r"^[A-Za-z0-9_-]+$")
SYSFS_PATH = re.compile(r"^/sys/[A-Za-z0-9_.*/:+-]+$")
TUNED_KEY = re.compile(r"^(main|cpu|vm|disk|net|scheduler|sysfs|bootloader|video|audio|modules)\.[a-z_]+$")
GPU_ACTIONS = {"persistence", "ecc", "compute-mode", "clocks", "power-limit", "mig"}
IFNAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,14}$")
CPULIST = re.compile(r"^\d+(-\d+)?(,\d+(-\d+)?)*$")
SAFE_VALUE = re.compile(r'^[^\n\r"\'`$\\]*$')


def _key_error(table: dict[str, KnownKey], what: str, setting: Setting, facts: Facts) -> str | None:
    known = table.get(setting.key)
    if known is None:
        return f"unknown {what} {setting.key!r} (not in goldtune's list of known keys)"
    if not known.available(facts.os.kernel, facts.cpu.arch):
        kernel = ".".join(map(str, facts.os.kernel)) if facts.os.kernel else "current"
        return f"{what} {setting.key!r} does not exist on {facts.cpu.arch} kernel {kernel}"
    return None


def check_sysctl_value(setting: Setting) -> str | None:
    """The kernel rejects (or silently misreads) a value of the wrong shape at boot."""
    pattern, expected = SHAPES[KNOWN_SYSCTLS[setting.key].shape]
    if re.match(pattern, setting.value.strip()):
        return None
    return f"value {setting.value!r} is not {expected}, which {setting.key} expects"


def check_known_key(setting: Setting, facts: Facts) -> str | None:
    if setting.kind == "sysctl":
        return _key_error(KNOWN_SYSCTLS, "sysctl", setting, facts) or check_sysctl_value(setting)
    if setting.kind == "kernel-arg":
        return _key_error(KNOWN_KERNEL_ARGS, "kernel parameter", setting, facts)
    return None


def check_shape(setting: Setting) -> str | None:
    """Keys and values of each kind have the form their target file needs."""
    kind, key, value = setting.kind, setting.key, setting.value
    if not SAFE_VALUE.match(value):
        return f"value {value!r} contains quotes, '$', '\\' or a line break"
    checks: dict[str, Callable[[], str | None]] = {
        "service": lambda: None if value in SERVICE_ACTIONS and key.endswith((".service", ".socket", ".timer"))
        else "a service setting is '<unit>.service|.socket|.timer' with enable, disable or mask",
        "udev": lambda: None if key in UDEV_MATCHES and value in IO_SCHEDULERS
        else f"udev matches one of {sorted(UDEV_MATCHES)} with a scheduler in {sorted(IO_SCHEDULERS)}",
        "limit": lambda: None if LIMIT_KEY.match(key) and value else "a limit key is '<domain> <soft|hard|-> <item>'",
        "modprobe": lambda: None if MODPROBE_KEY.match(key) else "a modprobe key is 'blacklist <module>' or 'options <module> <param>'",
        "module-load": lambda: None if MODULE_NAME.match(key) and not value else "a module-load key is a module name, value ''",
        "sysfs": lambda: None if SYSFS_PATH.match(key) and ".." not in key and value else "a sysfs key is a path under /sys",
        "tuned": lambda: None if TUNED_KEY.match(key) else "a tuned key is '<section>.<option>'",
        "gpu": lambda: None if key in GPU_ACTIONS else f"a gpu action is one of {sorted(GPU_ACTIONS)}",
        "irq": lambda: None if IFNAME.match(key) and CPULIST.match(value) else "an irq setting maps an interface name to a CPU list like 1-27,57-83",
        "systemd-manager": lambda: None if re.match(r"^Default[A-Za-z]+$", key) else "a systemd manager option is Default<Name>",
    }
    check = checks.get(kind)
    return check() if check else None


def check_traps(setting: Setting) -> str | None:
    for kind, key, matches, why in TRAPS:
        if setting.kind == kind and setting.key == key and matches(setting.value):
            return f"{kind} {key}={setting.value} is a known trap: {why}"
    return None


def check_vendor_args(setting: Setting, facts: Facts) -> str | None:
    if setting.kind == "kernel-arg" and setting.key.startswith("intel_idle.") and facts.cpu.vendor != "intel":
        return f"{setting.key} on a {facts.cpu.vendor} CPU: intel_idle only drives Intel CPUs"
    if setting.kind == "kernel-arg" and setting.key in {"intel_iommu", "intel_pstate"} and facts.cpu.vendor != "intel":
        return f"{setting.key} on a {facts.cpu.vendor} CPU does nothing"
    return None


def _int_limit(value: str) -> int | None:
    return int(value) if value.isdigit() else None


def check_nofile(settings: Iterable[Setting]) -> list[str]:
    by_target = {s.target: s for s in settings}
    nr_open_setting = by_target.get(("sysctl", "fs.nr_open"))
    nr_open = _int_limit(nr_open_setting.value) if nr_open_setting else NR_OPEN_DEFAULT
    errors = []
    nofile_settings = [s for s in by_target.values()
                       if (s.kind == "limit" and s.key.endswith(" nofile")) or s.target == ("systemd-manager", "DefaultLimitNOFILE")]
    for setting in nofile_settings:
        values = [_int_limit(part) for part in setting.value.split(":")]
        if any(v is None for v in values) or any(v > (nr_open or NR_OPEN_DEFAULT) for v in values if v):
            errors.append(f"{setting.kind} {setting.key}={setting.value} must be a number no larger than "
                          f"fs.nr_open ({nr_open}), or logins and service starts fail")
    return errors


def check_hugepages(settings: Iterable[Setting], facts: Facts) -> list[str]:
    by_key = {s.key: s for s in settings if s.kind == "kernel-arg"}
    count = by_key.get("hugepages")
    size = by_key.get("hugepagesz")
    if count is None or not count.value.isdigit():
        return []
    size_gib = 1.0 if size is None or size.value.upper() in {"1G", "1GB"} else 2 / 1024
    reserved = int(count.value) * size_gib
    if reserved > facts.memory_gib * HUGEPAGE_MAX_FRACTION:
        return [f"hugepages={count.value} reserves {reserved:.0f} GiB, more than "
                f"{HUGEPAGE_MAX_FRACTION:.0%} of {facts.memory_gib} GiB RAM; the machine would not have memory left to boot services"]
    return []


def kernel_cmdline(settings: Iterable[Setting]) -> str:
    return " ".join(s.key if s.value == "" else f"{s.key}={s.value}" for s in settings if s.kind == "kernel-arg")


def check_cmdline(settings: Iterable[Setting], facts: Facts) -> tuple[list[str], list[Warning]]:
    line = kernel_cmdline(settings)
    limit = COMMAND_LINE_SIZE[facts.cpu.arch]
    if len(line) >= limit:
        return [f"the kernel arguments take {len(line)} bytes; {facts.cpu.arch} allows {limit - 1}"], []
    if len(line) > limit * CMDLINE_WARN_FRACTION:
        return [], [Warning(f"the kernel arguments take {len(line)} of {limit - 1} bytes; the "
                            "distribution's own arguments must fit in the rest", "cmdline-length")]
    return [], []


def check_setting(setting: Setting, facts: Facts) -> list[str]:
    found = [check(setting) for check in (check_shape, check_traps)]
    found += [check_known_key(setting, facts), check_vendor_args(setting, facts)]
    return [f"{setting.kind} {setting.key} (rule {setting.rule}): {error}" for error in found if error]


def check_plan(settings: tuple[Setting, ...], facts: Facts) -> tuple[list[str], list[Warning]]:
    """All errors and warnings of a plan; the caller decides how to report them."""
    errors: list[str] = []
    for setting in settings:
        errors += check_setting(setting, facts)
    errors += check_nofile(settings)
    errors += check_hugepages(settings, facts)
    cmdline_errors, warnings = check_cmdline(settings, facts)
    return errors + cmdline_errors, warnings
