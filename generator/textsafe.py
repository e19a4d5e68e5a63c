"""Text from files other people made, made safe to print on a terminal.

A snapshot value, a profile's reason or a bundle's file can carry terminal escape sequences
(ESC [ … that move the cursor, retitle the window, or hide the lines before them) and bidi
controls that reorder what a reviewer reads, and bytes that are not UTF-8 (a file or directory
name, an os-release, a file's content decoded with ``decoded``): Python holds each as a lone
surrogate (U+DC80-U+DCFF, PEP 383), which a UTF-8 stream either writes back as the raw byte or
cannot write at all. Everything goldtune prints or reports that came from such a file goes
through ``printable`` (one line) or ``printable_lines`` (a text diff, a file), which show such a
byte as ``\\xNN``: a report stays UTF-8 whatever the tree held.
"""

from __future__ import annotations

import re

# C0 controls, DEL, C1 controls (ESC's 8-bit forms: CSI is U+009B), the Unicode bidi and
# line/paragraph separators that change how the rest of a line is shown, and every surrogate (a
# byte that was not UTF-8, U+DC80-U+DCFF, or a lone one no UTF-8 stream can write). Patterns, not
# compiled ones: `re` compiles each on first use (and caches it), so a run that prints nothing
# from a foreign file does not pay the 0.8 ms these two classes take to compile.
_UNSAFE = "[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]"
# In multi-line text the line breaks and tabs are kept; every other control is escaped.
_UNSAFE_IN_LINES = (
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]"
)


# The surrogates that stand for the bytes 0x80-0xff Python could not decode (surrogateescape).
_ESCAPED_BYTES = range(0xDC80, 0xDD00)


def _escape(found: re.Match[str]) -> str:
    code = ord(found.group())
    if code in _ESCAPED_BYTES:
        return f"\\x{code - 0xDC00:02x}"  # the byte itself, as a control byte is shown
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def decoded(raw: bytes) -> str:
    """Bytes from a foreign file as text to show: UTF-8, any byte that is not kept as a lone
    surrogate, which ``printable`` and ``printable_lines`` show as ``\\xNN`` (never U+FFFD,
    which would hide what the byte was, never the raw byte)."""
    return raw.decode("utf-8", "surrogateescape")


def utf8_text(text: str) -> str:
    """``text`` with only its surrogates escaped (``\\xNN`` for a byte that was not UTF-8): for a
    format that takes any other character as it is (a Prometheus label value), so that it is
    UTF-8 and nothing else changes."""
    return re.sub("[\ud800-\udfff]", _escape, text)


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


# What Markdown or the HTML inside it could read in a foreign string: `|` a table column, `<` a
# tag or an HTML comment that hides the rest, `&` an entity, a backtick a code span, `*` and `~`
# emphasis and strike-through, `[]` links and images (`![](…)`), `\` an escape. Each becomes a
# numeric character reference, which GitHub shows as the character itself in text, table cells
# and inline HTML. Left as they are: `_`, which GFM never reads as emphasis inside a word
# (`intel_pstate`) and which hides nothing elsewhere; `>`, which with every `<` escaped closes no
# tag, and quotes only at the start of a line, where no escaped text is put.
_MARKDOWN_SPECIAL = r"[\\`*~\[\]<&|]"


def markdown_text(text: str) -> str:
    """``text`` as Markdown that shows it literally, on one line (``printable``'s escapes for
    controls, newlines included), safe in a table cell and inside an inline HTML element."""
    return re.sub(_MARKDOWN_SPECIAL, lambda found: f"&#{ord(found.group())};", printable(text))


def markdown_code(text: str) -> str:
    """``text`` shown as code: a code span, which shows `*`, `[`, `\\`… literally, unless the text
    has a backtick (it would end the span), a `|` (it cuts a table row even inside a span), or
    a `<` or `&` (literal in a span too, but the report keeps no raw tag or entity of a foreign
    string anywhere); then ``<code>`` with its content escaped."""
    shown = printable(text)
    if not shown:
        return ""
    if not set(shown) & set("`|<&"):
        return f"`{shown}`"
    return f"<code>{markdown_text(shown)}</code>"


def markdown_fence(text: str) -> str:
    """A fence of backticks longer than any run in ``text`` (at least three), so that no line of
    it closes the block (CommonMark: a closing fence is at least as long as the opening)."""
    longest = max((len(run) for run in re.findall("`+", text)), default=0)
    return "`" * max(3, longest + 1)
