"""The collector a bundle ships, and the snapshot it prints.

``templates/collect.sh.j2`` is a POSIX sh script that reads the live state a plan cares about and
prints it as ``SECTION<TAB>KEY<TAB>VALUE`` records (the format is documented in the template).
``collector_context`` turns a plan into the template's words, each already a quoted shell word;
``parse_snapshot`` reads the records back, also out of a serial console log with other lines
around them.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from generator import TOOL, __version__
from generator.errors import InputError, Problem
from generator.model.setting import Plan

COLLECTOR_TEMPLATE = "collect.sh.j2"
COLLECTOR_PATH = f"/usr/local/libexec/{TOOL}/collect"
BEGIN = ("goldtune-snapshot", "begin")
END = ("goldtune-snapshot", "end")

# Everything a plan word may contain once it reaches the collector: no quotes, no spaces, no '$'.
_SAFE_WORD = re.compile(r"[A-Za-z0-9_.:/*?\[\]@+%=,-]+")
# sysfs values the verdict of some kernel arguments and tuned options is read from.
THP_ENABLED = "/sys/kernel/mm/transparent_hugepage/enabled"
THP_DEFRAG = "/sys/kernel/mm/transparent_hugepage/defrag"
SMT_CONTROL = "/sys/devices/system/cpu/smt/control"
HUGEPAGES = "/sys/kernel/mm/hugepages/hugepages-*/nr_hugepages"
GOVERNOR = "/sys/devices/system/cpu/cpu*/cpufreq/scaling_governor"
EFFECT_PATHS = (THP_ENABLED, THP_DEFRAG, SMT_CONTROL, HUGEPAGES)
# A limits.conf domain is measured in a session of this user (``*`` does not apply to root).
WILDCARD_USER = "nobody"


def shell_words(items: list[str], source: str) -> str:
    """Quoted, space-separated shell words; a word outside the safe alphabet is bad input."""
    bad = [item for item in items if not _SAFE_WORD.fullmatch(item)]
    if bad:
        raise InputError([Problem(source, "", f"{item!r} cannot be passed to the collector") for item in bad])
    return " ".join(f"'{item}'" for item in dict.fromkeys(items))


def module_param(key: str) -> str | None:
    """``nvidia-drm.modeset`` -> ``nvidia-drm/modeset``; None for a parameter of the kernel itself."""
    module, dot, param = key.partition(".")
    return f"{module}/{param}" if dot and module not in ("rd", "modprobe", "systemd", "udev") else None


def limit_user(domain: str) -> str | None:
    """The user whose session shows a limits.conf domain; None for groups (no single user)."""
    if domain == "*":
        return WILDCARD_USER
    if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.-]*", domain):
        return domain
    return None


def tuned_sysctl_keys(plan: Plan) -> list[str]:
    return [s.key.removeprefix("sysctl.") for s in plan.of_kind("tuned") if s.key.startswith("sysctl.")]


def collector_context(plan: Plan, source: str = "plan") -> dict[str, Any]:
    """The words ``collect.sh.j2`` prints: what to read for this plan, and where it came from."""
    sysfs = [s.key for s in plan.of_kind("sysfs")] + list(EFFECT_PATHS)
    if any(s.key == "cpu.governor" for s in plan.of_kind("tuned")):
        sysfs.append(GOVERNOR)
    modparams = [module_param(s.key) for s in plan.of_kind("kernel-arg")]
    modparams += [f"{s.key.split()[1]}/{s.key.split()[2]}" for s in plan.of_kind("modprobe")
                  if s.key.startswith("options ")]
    modules = [s.key.split()[1] for s in plan.of_kind("modprobe")] + [s.key for s in plan.of_kind("module-load")]
    users = [limit_user(s.key.split()[0]) for s in plan.of_kind("limit")]
    label = f"{plan.hardware_name} / {plan.profile_name}"
    lists = [
        ("collect_sysctl", [s.key for s in plan.of_kind("sysctl")] + tuned_sysctl_keys(plan)),
        ("collect_sysfs", sysfs),
        ("collect_modparams", [m for m in modparams if m]),
        ("collect_modules", modules),
        ("collect_limits", [u for u in users if u]),
        ("collect_manager", [s.key for s in plan.of_kind("systemd-manager")]),
        ("collect_block", None),
        ("collect_irq", [s.key for s in plan.of_kind("irq")]),
        ("collect_gpu", None if plan.of_kind("gpu") else []),
        ("collect_tuned", None if plan.of_kind("tuned") else []),
        ("collect_units", [s.key for s in plan.of_kind("service")]),
        ("collect_own_units", None),
        ("collect_system", None),
        ("collect_journal", None),
        ("collect_files", None),
    ]
    return {
        "tool": TOOL,
        "tool_word": shell_words([TOOL], source),
        "version": __version__,
        "bundle_label": " ".join(re.sub(r"[\x00-\x1f\x7f]", " ", label).split()),
        "bundle_word": shell_words([re.sub(r"[^A-Za-z0-9_.-]+", "_", f"{plan.hardware_name}/{plan.profile_name}")],
                                   source),
        # one line per call, arguments quoted; a function with nothing to read is not called
        "calls": [" ".join([name, shell_words(words, source)] if words else [name])
                  for name, words in lists if words is None or words],
    }


def render_collector(plan: Plan, source: str = "plan") -> str:
    from generator.render.render import make_environment  # render imports this module

    return make_environment().get_template(COLLECTOR_TEMPLATE).render(collector_context(plan, source))


@dataclass
class Snapshot:
    """The records of one collector run: ``records[section]`` is a list of (key, value)."""

    records: dict[str, list[tuple[str, str]]] = field(default_factory=lambda: defaultdict(list))

    def values(self, section: str, key: str) -> list[str]:
        return [value for k, value in self.records.get(section, []) if k == key]

    def value(self, section: str, key: str) -> str | None:
        found = self.values(section, key)
        return found[-1] if found else None

    def section(self, section: str) -> list[tuple[str, str]]:
        return list(self.records.get(section, []))

    def has(self, section: str) -> bool:
        return bool(self.records.get(section))


def parse_snapshot(text: str, source: str = "snapshot") -> Snapshot:
    """The records between the begin and end markers; a log around them is ignored.

    When the text holds several snapshots (a console log of several boots), the last one counts.
    """
    lines = [line.rstrip("\r") for line in text.replace("\r\n", "\n").split("\n")]
    begins = [i for i, line in enumerate(lines) if tuple(line.split("\t")[:2]) == BEGIN]
    if not begins:
        raise InputError(Problem(source, "", "no snapshot in it (no 'goldtune-snapshot<TAB>begin' line)",
                                 hint=f"run {COLLECTOR_PATH} on the machine and save its output"))
    snapshot = Snapshot()
    bad: list[Problem] = []
    for number, line in enumerate(lines[begins[-1] + 1:], start=begins[-1] + 2):
        fields = line.split("\t", 2)
        if tuple(fields[:2]) == END:
            if bad:
                raise InputError(bad[:5])
            return snapshot
        if len(fields) == 3:
            snapshot.records[fields[0]].append((fields[1], fields[2]))
        elif line.strip():
            bad.append(Problem(source, f"line {number}", f"not a SECTION<TAB>KEY<TAB>VALUE record: {line[:80]!r}"))
    raise InputError(Problem(source, "", "the snapshot is truncated (no 'goldtune-snapshot<TAB>end' line)",
                             hint="the collector was interrupted, or the log was cut"))
