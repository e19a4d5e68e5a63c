"""MIG layouts: GPU instance profile names (``3g.40gb``, ``1g.10gb+me``) and what fits one GPU.

A layout is a count per profile name, as NVIDIA's mig-parted writes ``mig-devices``
(``{"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}``). A profile ``<N>g.<M>gb`` takes N compute slices
and a share of the memory slices; the largest profile of a model (``7g.80gb``, ``4g.24gb`` on A30)
takes them all (NVIDIA MIG user guide, "Supported MIG Profiles": fractions of SMs and memory).
So a layout fits when every count is within the model's per-profile maximum, the compute slices
and the memory slices add up to at most the whole GPU, and at most one profile has the media
extensions (+me). Placement (which slice each instance starts at) is checked by nvidia-smi at
boot, which the GPU unit reports.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

PROFILE_NAME = r"[1-7]g\.[0-9]{1,3}gb(?:\+me)?"
_PARTS = re.compile(r"([1-7])g\.([0-9]{1,3})gb(\+me)?")


def compute_slices(name: str) -> int:
    found = _PARTS.fullmatch(name)
    assert found, name
    return int(found.group(1))


def memory_gb(name: str) -> int:
    found = _PARTS.fullmatch(name)
    assert found, name
    return int(found.group(2))


def memory_slices(name: str, allowed: Mapping[str, int]) -> int:
    """Memory slices of a profile: its memory over the smallest profile's (1g.10gb = 1 of 8)."""
    smallest = min(memory_gb(profile) for profile in allowed)
    return round(memory_gb(name) / smallest)


def whole_gpu(allowed: Mapping[str, int]) -> tuple[int, int]:
    """(compute slices, memory slices) of the model's largest profile: the whole GPU."""
    largest = max(allowed, key=lambda profile: (compute_slices(profile), memory_gb(profile)))
    return compute_slices(largest), memory_slices(largest, allowed)


def layout_problem(layout: Mapping[str, int], allowed: Mapping[str, int]) -> str | None:
    """Why ``layout`` does not fit one GPU whose profiles (and their maximum counts) are
    ``allowed``, or None."""
    unknown = [name for name in layout if name not in allowed]
    if unknown:
        return f"{', '.join(unknown)} not among its profiles ({', '.join(allowed)})"
    too_many = [
        f"{name} x{count} (at most {allowed[name]})"
        for name, count in layout.items()
        if count > allowed[name]
    ]
    if too_many:
        return f"too many instances: {', '.join(too_many)}"
    if sum(count for name, count in layout.items() if name.endswith("+me")) > 1:
        return "at most one instance with media extensions (+me) per GPU"
    compute, memory = whole_gpu(allowed)
    used_compute = sum(compute_slices(name) * count for name, count in layout.items())
    used_memory = sum(memory_slices(name, allowed) * count for name, count in layout.items())
    if used_compute > compute or used_memory > memory:
        return (
            f"needs {used_compute} of {compute} compute slices and {used_memory} of {memory} "
            "memory slices"
        )
    return None


def expanded(layout: Mapping[str, int]) -> list[str]:
    """One name per instance, the largest first (nvidia-smi places them in the order given, and
    the large ones have the fewest possible starting slices)."""
    names = [name for name, count in layout.items() for _ in range(count)]
    return sorted(names, key=lambda name: (-compute_slices(name), -memory_gb(name), name))
