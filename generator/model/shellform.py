"""The first-boot form of a bundle's files: the same lines without the comment lines.

cloud-init user-data has a hard size limit (EC2: 16 KB, issue 13). Most of a bundle's bytes are
comments: each setting's reason (which EXPLAIN.md lists too) and the fixed scripts' explanations
(``templates/scripts/``), which do nothing on the machine. The user-data carries each file with
its full-line comments and blank lines left out (``layout.compact_in_user_data``); the bundle's
copy, which install.sh installs and reviewers read, keeps them. ``manifest.json`` records the
digest of both forms, so ``gen verify`` accepts either.

Every format goldtune writes that has comments takes ``#`` at a line's start as one (sh, sysctl.d,
limits.d, modprobe.d, systemd units, udev rules, tuned's INI, TOML, and YAML outside block
scalars, which goldtune's templates do not use).

The scan is conservative: a line is dropped only when it is a comment at the top level of the
script, never inside a here-document or a quoted string spanning lines (where a ``#`` line is
data), and the shebang and ``# shellcheck`` directives are kept.
"""

from __future__ import annotations

import functools
import re

_HEREDOC = re.compile(r"<<-?\s*(['\"]?)([A-Za-z_][A-Za-z0-9_]*)\1")


# Where a line's scan changes state, by the quote open before it: in plain text a quote, a
# backslash or a '#' at a word's start (sh starts a comment only there: after a blank, ; & | (
# or at the line's start); in double quotes the closing quote or a backslash; in single quotes
# only the closing quote. Jumping from one to the next, not stepping through every character,
# took without_comment_lines of install.sh (46 KB) from ~2.5 ms to ~1.5 ms of CPU.
_PLAIN_STOP = re.compile(r"""['"\\]|(?<![^ \t;&|(])#""")
_DOUBLE_QUOTED_STOP = re.compile(r'["\\]')


def _open_quote(line: str, quote: str | None) -> str | None:
    """The quote still open after ``line`` (None when none), given the one open before it."""
    at = 0
    while True:
        if quote == "'":
            end = line.find("'", at)
            if end < 0:
                return quote
            quote, at = None, end + 1
            continue
        found = (_DOUBLE_QUOTED_STOP if quote == '"' else _PLAIN_STOP).search(line, at)
        if found is None:
            return quote
        char, at = found.group(), found.end()
        if char == "\\":
            at += 1  # the next character is escaped
        elif char == "#":
            return None  # the rest of the line is a comment
        else:  # a double quote closes, or a quote opens
            quote = None if quote == '"' else char


# Asked twice per file and bundle (the user-data, the manifest's digest), and the fixed scripts are
# the same in every bundle of a matrix run.
@functools.lru_cache(maxsize=256)
def without_comment_lines(text: str) -> str:
    """``text`` with its top-level full-line comments and blank lines left out."""
    kept: list[str] = []
    quote: str | None = None
    heredoc: str | None = None
    for number, line in enumerate(text.splitlines(keepends=True)):
        stripped = line.strip()
        if heredoc is not None:
            kept.append(line)
            if line.rstrip("\n").lstrip("\t") == heredoc:
                heredoc = None
            continue
        if quote is None and number > 0 and not stripped:
            continue
        comment = stripped.startswith("#") and "shellcheck" not in stripped
        if quote is None and number > 0 and comment:
            continue
        kept.append(line)
        if quote is None and "<<" in line:
            found = _HEREDOC.search(line.split(" #", 1)[0])
            if found:
                heredoc = found.group(2)
        if quote is not None or "'" in line or '"' in line:  # else no quote opens or closes
            quote = _open_quote(line, quote)
    return "".join(kept)
