"""NCCL's own reading of nccl.conf, ported from NVIDIA/nccl src/misc/param.cc (setEnvFile):

each line loses its newline (and, in newer releases, a CR); a line starting with '#' is skipped
(older releases do not skip it: a '#' line with '=' in it sets a variable named after the comment);
a line without '=' is skipped; otherwise the name is everything before the first '=' and the value
everything after it, spaces included, and the first assignment wins (setenv without overwrite).
The NCCL User Guide, "Environment Variables", documents the files and the NAME=value form.
"""

from __future__ import annotations

import re

NAME = re.compile(r"NCCL_[A-Z0-9_]+")
MAX_FIELD = 1023  # envVar[1024] / envValue[1024]: longer names and values are cut
# NCCL_IB_HCA as src/transport/net_ib.cc and src/misc/utils.cc parseStringList read it: an
# optional '^' then '=', then entries split on ',', each NAME[:port]; NAME lands in a 64-byte
# prefix (63 kept) and entries past MAX_IB_DEVS (32 now, 16 in older releases) are dropped.
MAX_IB_DEVS = 16
MAX_PREFIX = 63


def hca_problems(value: str) -> list[str]:
    """What NCCL would cut or misread in an NCCL_IB_HCA list."""
    entries = [entry for entry in value.removeprefix("^").removeprefix("=").split(",") if entry]
    problems = []
    if len(entries) > MAX_IB_DEVS:
        problems.append(f"{len(entries)} devices: older NCCL keeps the first {MAX_IB_DEVS}")
    for entry in entries:
        device, _, port = entry.partition(":")
        if not device or len(device) > MAX_PREFIX:
            problems.append(f"device {device!r} is empty or longer than {MAX_PREFIX} bytes")
        if port and not port.isdigit():
            problems.append(f"port {port!r} of {device} is not a number")
    return problems


def problems_of(text: str) -> list[str]:
    """What NCCL would misread in this file, one line each (empty: it reads what is meant)."""
    problems: list[str] = []
    seen: set[str] = set()
    for number, line in enumerate(text.split("\n"), start=1):
        if line.startswith("#"):
            if "=" in line:
                problems.append(f"line {number}: a comment with '=' (older NCCL sets it)")
            continue
        if "=" not in line:
            if line.strip():
                problems.append(f"line {number}: no '=': NCCL skips it")
            continue
        name, _, value = line.partition("=")
        if not NAME.fullmatch(name):
            problems.append(f"line {number}: {name!r} is not an NCCL_* variable name")
        elif name in seen:
            problems.append(f"line {number}: {name} again: NCCL keeps the first")
        seen.add(name)
        if value != value.strip() or not value:
            problems.append(f"line {number}: {name}'s value is empty or has blanks at its ends")
        if len(name) > MAX_FIELD or len(value) > MAX_FIELD:
            problems.append(f"line {number}: longer than NCCL's {MAX_FIELD}-byte fields")
        if name == "NCCL_IB_HCA":
            problems += [f"line {number}: NCCL_IB_HCA: {p}" for p in hca_problems(value)]
    return problems
