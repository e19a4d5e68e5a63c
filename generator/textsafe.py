"""Text from files other people made, made safe to print on a terminal.

A snapshot value, a profile's reason or a bundle's file can carry terminal escape sequences
(ESC [ … that move the cursor, retitle the window, or hide the lines before them) and bidi
controls that reorder what a reviewer reads. Everything goldtune prints that came from such a
file goes through ``printable`` (one line) or ``printable_lines`` (a text diff, a file).
"""

from __future__ import annotations

import re

# C0 controls, DEL, C1 controls (ESC's 8-bit forms: CSI is U+009B), and the Unicode bidi and
# line/paragraph separators that change how the rest of a line is shown. Patterns, not compiled
# ones: `re` compiles each on first use (and caches it), so a run that prints nothing from a
# foreign file does not pay the 0.8 ms these two classes take to compile.
_UNSAFE = "[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]"
# In multi-line text the line breaks and tabs are kept; every other control is escaped.
_UNSAFE_IN_LINES = "[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]"


def _escape(found: re.Match[str]) -> str:
    code = ord(found.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str) -> str:
    """``text`` as one line with every control character shown as ``\\xNN`` or ``\\uNNNN``."""
    return re.sub(_UNSAFE, _escape, text)


def printable_lines(text: str) -> str:
    """Like ``printable`` but keeps newlines and tabs (a diff or a file shown as it is)."""
    return re.sub(_UNSAFE_IN_LINES, _escape, text.replace("\r\n", "\n"))


def short_key(text: str, width: int = 40) -> str:
    """A key from a foreign file as an error may name it: escaped and cut to ``width``."""
    shown = printable(text)
    return shown if len(shown) <= width else shown[: width - 1] + "…"
