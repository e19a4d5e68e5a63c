"""The few escapes the rendered formats need: comments, shell words, tmpfiles.d fields, Markdown.

Templates only loop and print. Whether a key or value fits its file at all is decided once, at
plan time, by the grammar of its kind (``generator.model.kinds``, checked in
``generator.plan.checks``): a value that does not fit is refused there, never escaped into working.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable

from generator.model.setting import Setting

CONTROL_CHARACTERS = re.compile(r"[\x00-\x1f\x7f]")


# A bundle escapes the same reasons in several files (its config file, EXPLAIN.md, the data
# files, user-data), and a matrix the same ones in every bundle: each text is escaped once.
@functools.lru_cache(maxsize=4096)
def comment_text(text: str) -> str:
    """One line of comment text: control characters (newlines above all) become spaces."""
    return " ".join(CONTROL_CHARACTERS.sub(" ", text).split())


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


def explain_row(setting: Setting) -> str:
    """The setting's row of its kind's table in EXPLAIN.md: ``| Key | Value | Rule | Reason |``.

    One string a row, not the ~11 template pieces and 5 filter calls it took as template text
    (~75 rows a bundle)."""
    rule = f"`{md_cell(setting.rule)}`"
    if setting.override:
        original = "none" if setting.original_value is None else setting.original_value
        rule += f" (profile override; rule value {md_code(original)})"
    key, value, reason = md_code(setting.key), md_code(setting.value), md_cell(setting.reason)
    return f"| {key} | {value} | {rule} | {reason} |"


def kernel_arg_text(setting: Setting) -> str:
    return setting.key if setting.value == "" else f"{setting.key}={setting.value}"


def unique_in_order(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(items))
