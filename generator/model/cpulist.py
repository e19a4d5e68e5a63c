"""CPU lists in the kernel's compressed form (``0-27,56-83``)."""

from __future__ import annotations

from collections.abc import Iterable


def compress_cpus(cpus: Iterable[int]) -> str:
    """``[0, 1, 2, 5]`` -> ``0-2,5``; sorted, duplicates dropped."""
    ordered = sorted(set(cpus))
    ranges: list[str] = []
    start = previous = None
    for cpu in ordered:
        if previous is not None and cpu == previous + 1:
            previous = cpu
            continue
        if start is not None:
            ranges.append(_span(start, previous))
        start = previous = cpu
    if start is not None:
        ranges.append(_span(start, previous))
    return ",".join(ranges)


def _span(start: int, end: int | None) -> str:
    return str(start) if start == end else f"{start}-{end}"


# Past any CPU number Linux has (x86's MAXSMP is 8,192 CPUs): a list from a foreign file
# naming more is refused before a range of it fills memory.
MAX_CPU = 65535


def expand_cpus(text: str) -> list[int]:
    """``0-2,5`` -> ``[0, 1, 2, 5]``; raises ValueError on malformed text, and on a CPU past
    MAX_CPU (``0-99999999999`` would fill memory, a 5,000-digit number break int())."""
    cpus: set[int] = set()
    for part in filter(None, text.split(",")):
        low, _, high = part.partition("-")
        if max(len(low), len(high)) > len(str(MAX_CPU)):
            raise ValueError(f"CPU number past {MAX_CPU} in {part[:20]!r}")
        first, last = int(low), int(high or low)
        if last < first:
            raise ValueError(f"descending range {part!r}")
        if last > MAX_CPU:
            raise ValueError(f"CPU number past {MAX_CPU} in {part!r}")
        cpus.update(range(first, last + 1))
    return sorted(cpus)
