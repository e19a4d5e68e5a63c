"""Which disks a bundle's I/O scheduler rules match, decided the way udev decides it.

Only what the bundle's rules use is understood: ACTION, SUBSYSTEM, KERNEL, ENV{DEVTYPE} and
ATTR{...} comparisons (``==``/``!=``, glob patterns with ``|`` alternatives) and the
``ATTR{queue/scheduler}=`` assignment. A rule with any other match key is taken as not matching,
so verify never claims a disk the bundle may not touch.
"""

from __future__ import annotations

import re
from fnmatch import fnmatchcase
from typing import NamedTuple

SCHEDULER_ATTR = "ATTR{queue/scheduler}"
_TOKEN = re.compile(r'\s*([A-Z]+(?:\{[^}]*\})?)\s*(==|!=|\+=|-=|:=|=)\s*"([^"]*)"\s*(?:,|$)')


class Disk(NamedTuple):
    """A whole disk as the collector saw it: kernel name and its attributes."""

    name: str
    attrs: dict[str, str]


class UdevRule(NamedTuple):
    matches: tuple[tuple[str, str, str], ...]  # (key, operator, pattern)
    scheduler: str | None


def parse_rules(text: str) -> list[UdevRule]:
    rules = []
    for line in text.replace("\\\n", " ").splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        tokens: list[tuple[str, str, str]] = []
        position = 0
        while position < len(line):
            found = _TOKEN.match(line, position)
            if not found:
                tokens = []
                break
            key, operator, pattern = found.groups()
            tokens.append((key, operator, pattern))
            position = found.end()
        matches = tuple(t for t in tokens if t[1] in ("==", "!="))
        scheduler = next(
            (t[2] for t in tokens if t[0] == SCHEDULER_ATTR and t[1] in ("=", ":=")), None
        )
        if tokens:
            rules.append(UdevRule(matches, scheduler))
    return rules


def _pattern_matches(pattern: str, value: str) -> bool:
    return any(fnmatchcase(value, alternative) for alternative in pattern.split("|"))


def _device_value(key: str, disk: Disk) -> str | None:
    if key == "ACTION":
        return "add"
    if key in ("SUBSYSTEM", "SUBSYSTEMS"):
        return "block"
    if key in ("KERNEL", "KERNELS"):
        return disk.name
    if key == "ENV{DEVTYPE}":
        return "disk"
    if key.startswith("ATTR{"):
        return disk.attrs.get(key[5:-1])
    return None


def rule_matches(rule: UdevRule, disk: Disk) -> bool:
    for key, operator, pattern in rule.matches:
        value = _device_value(key, disk)
        if value is None:
            return False
        if _pattern_matches(pattern, value) != (operator == "=="):
            return False
    return True


def assigned_scheduler(rules: list[UdevRule], disk: Disk) -> str | None:
    """The scheduler the last matching rule writes for this disk, or None if no rule matches."""
    chosen = None
    for rule in rules:
        if rule.scheduler is not None and rule_matches(rule, disk):
            chosen = rule.scheduler
    return chosen


def disk_kind(disk: Disk) -> str:
    """The plan's vocabulary for a disk: nvme, ssd or hdd."""
    if re.fullmatch(r"nvme\d+n\d+", disk.name):
        return "nvme"
    return "hdd" if disk.attrs.get("queue/rotational") == "1" else "ssd"


def selected(value: str) -> str:
    """``none [mq-deadline] kyber`` -> ``mq-deadline``; a value without brackets is itself."""
    found = re.search(r"\[([^\]]*)\]", value)
    return found.group(1) if found else value.strip()
