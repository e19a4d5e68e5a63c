"""Plain-text tables for the terminal."""

from __future__ import annotations


def format_table(headers: list[str], rows: list[list[str]], indent: str = "") -> str:
    widths = [len(h) for h in headers]
    for row in rows:
        widths = [max(w, len(cell)) for w, cell in zip(widths, row, strict=True)]
    lines = []
    for row in [headers, *rows]:
        cells = [cell.ljust(width) for cell, width in zip(row, widths, strict=True)]
        lines.append((indent + "  ".join(cells)).rstrip())
    return "\n".join(lines)
