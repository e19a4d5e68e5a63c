"""What each rendered format accepts, and how a value is written into it safely.

Templates only loop and print, so everything that could break a file out of its syntax is decided
here: a per-kind check of every key and value before anything is rendered (a value that does not
fit its file is refused, never "escaped into working"), and the few escapes the formats need
(comments, shell words, tmpfiles.d fields, Markdown table cells).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from generator.errors import GenerationError, InputError, Problem
from generator.model.setting import Plan, Setting

_TOKEN = r"[A-Za-z0-9_.,:=+/@%*-]+"
_MODULE = r"[A-Za-z0-9_-]+"
_UNIT = r"[A-Za-z0-9@_.:\\-]+\.(?:service|socket|timer|target|path|mount|slice)"
_LIMIT_DOMAIN = r"\*|root|[A-Za-z_][A-Za-z0-9_.-]*|[@%][A-Za-z_][A-Za-z0-9_.-]*|%:\d+|@?\d*:\d*"
_LIMIT_ITEMS = (
    "core|data|fsize|memlock|nofile|rss|stack|cpu|nproc|as|maxlogins|maxsyslogins|nonewprivs"
    "|priority|locks|sigpending|msgqueue|nice|rtprio"
)

# kind -> (key pattern, value pattern). Every pattern excludes newlines, quotes, '$', '`', '\\',
# '#' and ';' unless the format itself is quoted for them: a value never needs escaping to stay data.
SYNTAX: dict[str, tuple[str, str]] = {
    "sysctl": (r"[a-z0-9_]+(?:\.[A-Za-z0-9_-]+)+", r"[A-Za-z0-9_.:,/+-]+(?: [A-Za-z0-9_.:,/+-]+)*"),
    "kernel-arg": (r"[A-Za-z0-9_][A-Za-z0-9_.-]*", rf"(?:{_TOKEN})?"),
    "limit": (rf"(?:{_LIMIT_DOMAIN}) (?:soft|hard|-) (?:{_LIMIT_ITEMS})", r"-1|unlimited|infinity|-?\d+"),
    "systemd-manager": (r"[A-Z][A-Za-z]+", r"[A-Za-z0-9_.:%/+-]+"),
    "modprobe": (rf"blacklist {_MODULE}|options {_MODULE} [A-Za-z0-9_.-]+", r"[A-Za-z0-9_.,:+/-]*"),
    "module-load": (_MODULE, r""),
    "sysfs": (r"/sys(?:/[A-Za-z0-9_.:*?%\[\]+-]+)+", r"[A-Za-z0-9_.:,/+%\[\]-]+(?: [A-Za-z0-9_.:,/+%\[\]-]+)*"),
    "udev": (r"nvme|ssd|hdd", r"none|mq-deadline|bfq|kyber"),
    "tuned": (r"[A-Za-z0-9_-]+\.[A-Za-z0-9_.*/-]+", r"[A-Za-z0-9_.,:=+/@%*()\[\] -]*"),
    "gpu": (r"persistence|ecc|compute-mode|clocks|power-limit|mig", r".*"),  # values: GPU_VALUES
    "irq": (r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,14}", r"\d+(?:-\d+)?(?:,\d+(?:-\d+)?)*"),
    "service": (_UNIT, r"enable|disable|mask"),
}

# The GPU boot script switches on these exact values.
GPU_VALUES: dict[str, str] = {
    "persistence": r"on",
    "ecc": r"on|off",
    "compute-mode": r"DEFAULT|EXCLUSIVE_PROCESS|PROHIBITED",
    "clocks": r"max|[1-9]\d{1,4}",
    "power-limit": r"[1-9]\d{0,3}|(?:[1-9]\d?|100)%",
    "mig": r"on|off",
}


def check_plan(plan: Plan) -> None:
    """Refuse a plan with a key or value its file cannot carry as plain data.

    A bad value from a profile override is the user's input (exit 2); from a rule it is a bug.
    """
    bad = [setting for setting in plan.settings if not fits_format(setting)]
    overrides = [s for s in bad if s.override]
    if overrides:
        raise InputError([_problem(plan, s) for s in overrides])
    if bad:
        raise GenerationError("; ".join(str(_problem(plan, s)) for s in bad))


def fits_format(setting: Setting) -> bool:
    if setting.kind not in SYNTAX:
        return False
    key_pattern, value_pattern = SYNTAX[setting.kind]
    if setting.kind == "gpu":
        value_pattern = GPU_VALUES.get(setting.key, r"(?!)")
    if setting.kind == "sysfs" and "/../" in setting.key + "/":
        return False
    return bool(re.fullmatch(key_pattern, setting.key) and re.fullmatch(value_pattern, setting.value))


def _problem(plan: Plan, setting: Setting) -> Problem:
    source = f"profile {plan.profile_name} (override)" if setting.override else f"rule {setting.rule}"
    return Problem(source, f"{setting.kind} {setting.key}", f"value {setting.value!r} cannot be written "
                   f"into the {setting.kind} file as plain data")


def comment_text(text: str) -> str:
    """One line of comment text: control characters (newlines above all) become spaces."""
    return " ".join(re.sub(r"[\x00-\x1f\x7f]", " ", text).split())


def reason_comment(setting: Setting) -> str:
    """``<rule id>: <reason>``; a profile override also says so and gives the rule's own value."""
    label = setting.rule
    if setting.override:
        if setting.original_rule:
            original = setting.original_value if setting.original_value != "" else '""'
            label += f" [profile override; rule {setting.original_rule} value: {original}]"
        else:
            label += " [profile override; no rule sets this]"
    return comment_text(f"{label}: {setting.reason}")


def sh_quote(text: str) -> str:
    """A single POSIX shell word: ``it's`` -> ``'it'\\''s'``."""
    return "'" + text.replace("'", "'\\''") + "'"


def tmpfiles_field(text: str) -> str:
    """A tmpfiles.d(5) path or argument: C escapes for backslash, '%' doubled (specifiers)."""
    return text.replace("\\", "\\\\").replace("%", "%%")


def md_cell(text: str) -> str:
    """Text for a Markdown table cell: one line, pipes escaped."""
    return comment_text(text).replace("|", "\\|")


def md_code(text: str) -> str:
    """A value shown as inline code in a table cell (``""`` for the empty value)."""
    if text == "":
        return '`""`'
    return "`" + md_cell(text).replace("`", "'") + "`"


def kernel_arg_text(setting: Setting) -> str:
    return setting.key if setting.value == "" else f"{setting.key}={setting.value}"


def unique_in_order(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(items))
