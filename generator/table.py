"""Plain-text tables for the terminal.

On a terminal a table is fitted to its width: the widest columns are narrowed and their cells
wrapped onto continuation lines. Output to a pipe or a file is never wrapped (``width`` None):
scripts and snapshots get one line per row, as before.
"""

from __future__ import annotations

import sys

SEPARATOR = "  "
# A column is never narrowed below its header or this many characters: a narrower one would be
# unreadable, and a line over the terminal's width is the lesser evil.
MIN_COLUMN = 8


def table_width() -> int | None:
    """The width a table on stdout is wrapped to: the terminal's (COLUMNS first, as
    shutil.get_terminal_size reads it) while stdout is a terminal; None for a pipe or a file,
    which get one line per row whatever their length."""
    if not sys.stdout.isatty():
        return None
    import shutil  # a terminal's only: `gen verify` to a pipe does without it

    return shutil.get_terminal_size().columns


def format_table(
    headers: list[str], rows: list[list[str]], indent: str = "", width: int | None = None
) -> str:
    return "\n".join(line for lines in table_rows(headers, rows, indent, width) for line in lines)


def table_rows(
    headers: list[str], rows: list[list[str]], indent: str = "", width: int | None = None
) -> list[list[str]]:
    """The header's lines, then each row's: one line each, or several where a cell wraps to
    fit ``width`` columns."""
    natural = [len(h) for h in headers]
    for row in rows:
        natural = [max(w, len(cell)) for w, cell in zip(natural, row, strict=True)]
    widths = natural if width is None else fitted_widths(headers, natural, width - len(indent))
    return [_row_lines(row, widths, indent) for row in [headers, *rows]]


def fitted_widths(headers: list[str], natural: list[int], width: int) -> list[int]:
    """Column widths whose line fits ``width``: the widest columns capped at one width, the
    largest cap that fits (no column below its floor)."""
    budget = width - len(SEPARATOR) * (len(natural) - 1)
    if sum(natural) <= budget:
        return natural
    floors = [min(w, max(len(h), MIN_COLUMN)) for h, w in zip(headers, natural, strict=True)]

    def capped(cap: int) -> list[int]:
        return [max(floor, min(w, cap)) for w, floor in zip(natural, floors, strict=True)]

    low, high = 1, max(natural)
    while low < high:
        middle = (low + high + 1) // 2
        if sum(capped(middle)) <= budget:
            low = middle
        else:
            high = middle - 1
    return capped(low)


def _row_lines(row: list[str], widths: list[int], indent: str) -> list[str]:
    cells = [_wrapped(cell, width) for cell, width in zip(row, widths, strict=True)]
    height = max(len(lines) for lines in cells)
    return [
        (
            indent
            + SEPARATOR.join(
                (lines[index] if index < len(lines) else "").ljust(width)
                for lines, width in zip(cells, widths, strict=True)
            )
        ).rstrip()
        for index in range(height)
    ]


def _wrapped(cell: str, width: int) -> list[str]:
    if len(cell) <= width:
        return [cell]
    import textwrap  # a narrow terminal's only

    return textwrap.wrap(cell, width, break_long_words=True, break_on_hyphens=False) or [""]
