"""A pam_limits-aware reading of /etc/security/limits.d/*.conf (Linux-PAM 1.5, Debian 12).

There is no offline checker for limits.d, and the real pam_limits only judges the lines whose
domain matches the user of the session (it silently skips the rest) and reports through syslog
with success. This module re-implements its line parser (``parse_config_file``, ``split``,
``parse_uid_range`` and ``process_limit`` in modules/pam_limits/pam_limits.c) for *every* line,
and is stricter where pam_limits silently accepts a mistake:

* a value with trailing garbage (``10k``): pam_limits takes the leading number, we refuse it;
* soft above hard for one domain and item: setrlimit() fails with EINVAL at login;
* nofile above fs.nr_open (1048576 unless the bundle's sysctl.d raises it): setrlimit() fails
  with EPERM at login, and ``unlimited`` becomes fs.nr_open.

Not covered: whether a user or group domain exists on the target, the order of files across
limits.d and limits.conf (the first file read wins per item), and what the kernel finally grants.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

ITEMS = {
    "core",
    "data",
    "fsize",
    "memlock",
    "nofile",
    "rss",
    "stack",
    "cpu",
    "nproc",
    "as",
    "maxlogins",
    "maxsyslogins",
    "nonewprivs",
    "priority",
    "locks",
    "sigpending",
    "msgqueue",
    "nice",
    "rtprio",
    "rttime",
}
NO_TYPE_ITEMS = {"maxlogins", "maxsyslogins", "nonewprivs"}  # pam_limits accepts any type for these
SIGNED_ITEMS = {"priority", "nice", "maxlogins", "maxsyslogins"}  # strtol, no "unlimited"
UNLIMITED = {"-1", "-", "unlimited", "infinity"}
TYPES = {"soft", "hard", "-"}
NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]*\$?$")
RANGE = re.compile(r"^[@%]?(\d*):(\d*)$")
INTEGER = re.compile(r"^\d+$")
SIGNED = re.compile(r"^-?\d+$")
NR_OPEN_DEFAULT = 1048576


@dataclass(frozen=True)
class LimitLine:
    number: int
    domain: str
    type: str
    item: str
    value: str


def check_domain(domain: str) -> str | None:
    if domain in {"*", "%"}:
        return None
    if ":" in domain:
        match = RANGE.match(domain)
        if match is None or not (match.group(1) or match.group(2)):
            return f"invalid uid range '{domain}' - skipped"
        return None
    name = domain[1:] if domain[0] in "@%" else domain
    return (
        None
        if NAME.match(name)
        else f"domain '{domain}' is not a user, @group, %group, * or uid range"
    )


def check_value(item: str, value: str) -> str | None:
    if item == "nonewprivs":
        return (
            None
            if value in {"0", "1"}
            else f"wrong limit value '{value}' (nonewprivs takes 0 or 1)"
        )
    if item in SIGNED_ITEMS:
        return None if SIGNED.match(value) else f"wrong limit value '{value}' for {item}"
    if value in UNLIMITED or INTEGER.match(value):
        return None
    return f"wrong limit value '{value}' for {item} (a number, or unlimited/infinity/-1)"


def check_fields(line: LimitLine) -> list[str]:
    problems = [problem for problem in [check_domain(line.domain)] if problem]
    if line.item not in ITEMS:
        problems.append(f"unknown limit item '{line.item}'")
    elif line.type not in TYPES and line.item not in NO_TYPE_ITEMS:
        problems.append(f"unknown limit type '{line.type}'")
    elif (problem := check_value(line.item, line.value)) is not None:
        problems.append(problem)
    elif line.domain.startswith("%") and line.item != "maxlogins":
        problems.append("a '%' domain is valid for maxlogins only; pam_limits ignores this line")
    return problems


def parse_limits(text: str) -> tuple[list[LimitLine], list[str]]:
    """The complete lines and, as "line N: message", every line pam_limits would skip or misread."""
    lines: list[LimitLine] = []
    problems: list[str] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        content = raw.split("#", 1)[0].strip()
        if not content:
            continue
        fields = content.split(None, 3)
        if len(fields) == 2 and fields[1].startswith("-"):
            continue  # "<domain> -": no limits for that domain
        if len(fields) != 4 or len(fields[3].split()) != 1:
            problems.append(f"line {number}: invalid line '{content}' - skipped")
            continue
        domain, type_, item, value = (
            fields[0],
            fields[1].lower(),
            fields[2].lower(),
            fields[3].lower(),
        )
        line = LimitLine(number, domain, type_, item, value)
        found = check_fields(line)
        problems += [f"line {number}: {problem}" for problem in found]
        if not found:
            lines.append(line)
    return lines, problems


def _number(value: str, nr_open: int, item: str) -> int | None:
    if value in UNLIMITED:
        return nr_open if item == "nofile" else None
    return int(value)


def check_semantics(lines: list[LimitLine], nr_open: int = NR_OPEN_DEFAULT) -> list[str]:
    """soft <= hard per domain and item; nofile <= fs.nr_open."""
    problems: list[str] = []
    soft: dict[tuple[str, str], tuple[int | None, int]] = {}
    hard: dict[tuple[str, str], tuple[int | None, int]] = {}
    for line in lines:
        if line.item in SIGNED_ITEMS or line.item == "nonewprivs":
            continue
        value = _number(line.value, nr_open, line.item)
        if line.item == "nofile" and value is not None and value > nr_open:
            problems.append(
                f"line {line.number}: nofile {value} is above fs.nr_open ({nr_open}): setrlimit "
                "fails at login"
            )
        key = (line.domain, line.item)
        if line.type in {"soft", "-"}:
            soft.setdefault(key, (value, line.number))
        if line.type in {"hard", "-"}:
            hard.setdefault(key, (value, line.number))
    for key, (soft_value, number) in soft.items():
        hard_value = hard.get(key, (None, 0))[0]
        if (
            key in hard
            and hard_value is not None
            and (soft_value is None or soft_value > hard_value)
        ):
            problems.append(
                f"line {number}: soft {key[1]} of {key[0]} "
                f"({soft_value if soft_value is not None else 'unlimited'}) "
                f"is above its hard limit ({hard_value}): setrlimit fails at login"
            )
    return problems
