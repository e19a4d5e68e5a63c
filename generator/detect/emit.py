"""Writing the description as YAML by hand, so every value can carry its source as a comment.

Values are plain: integers, booleans, short lists of integers and strings. Strings are written
as JSON strings, which YAML reads as double-quoted scalars with the same escapes, so a foreign
name can never become YAML syntax. Comments are escaped and cut short for the same reason.
"""

from __future__ import annotations

import json
import re

COMMENT_COLUMN = 32
MAX_COMMENT_CHARS = 200
# Plain words a YAML 1.1 reader (PyYAML) turns into booleans or null.
YAML_WORDS = frozenset({"true", "false", "yes", "no", "on", "off", "y", "n", "null"})


def scalar(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, list):
        return "[" + ", ".join(scalar(item) for item in value) + "]"
    if (
        isinstance(value, str)
        and re.fullmatch(r"[A-Za-z][A-Za-z0-9_.-]{0,63}", value)
        and value.lower() not in YAML_WORDS
    ):
        return value
    return json.dumps(str(value), ensure_ascii=True)


def comment_text(text: str) -> str:
    """One line of printable ASCII, short enough to read beside a value."""
    flat = " ".join(text.encode("ascii", "backslashreplace").decode("ascii").split())
    flat = "".join(c if c.isprintable() else "?" for c in flat)
    return flat if len(flat) <= MAX_COMMENT_CHARS else flat[: MAX_COMMENT_CHARS - 3] + "..."


def line(indent: int, text: str, comment: str = "") -> str:
    body = " " * indent + text
    if not comment:
        return body
    return f"{body:<{COMMENT_COLUMN}}  # {comment_text(comment)}"


def field(indent: int, key: str, value: object, comment: str = "") -> str:
    return line(indent, f"{key}: {scalar(value)}", comment)


def comment(indent: int, text: str) -> str:
    return " " * indent + "# " + comment_text(text)
