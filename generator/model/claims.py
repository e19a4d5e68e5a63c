"""The hardware file's claims that the plan depends on, as the boot-time preflight judges them.

A claim is one fact of the hardware file (or of the catalog entry it names) that a live node can
show: ``cpu.sockets``, ``gpu.count``, ``nic/<interface>/numa_node``. The plan carries them with
the value it assumed and the settings made from it (``kind:key``), and the fixed script
``preflight`` compares each with the node at boot (templates/scripts/preflight). A claim the file
leaves unknown (null) is not made, so it is never judged.
"""

# No `from __future__ import annotations`: a NamedTuple turns each string annotation into
# a compiled ForwardRef, ~0.15 ms a record at import (bench/bench.py's cold gen).
import re
from typing import NamedTuple

# A claim's name: the words the preflight script switches on. Interface and disk names are the
# hardware format's (no '/', no whitespace), so '/' separates them from the attribute.
CLAIM_NAME = re.compile(r"^[a-z_.]+$|^(nic|disk)/[A-Za-z0-9_][A-Za-z0-9_.-]{0,31}/[a-z_]+$")
# What a field of the result file and of the data file may hold: no TAB, no line break.
FIELD = re.compile(r"^[^\t\n\r]*$")


class Claim(NamedTuple):
    name: str  # cpu.sockets, nic/ib0/present, ...
    expected: str  # what the plan assumed, in the form the script reads from the node
    depends: tuple[str, ...]  # the settings made from it, as kind:key

    def as_json(self) -> dict[str, object]:
        return {"claim": self.name, "expected": self.expected, "depends": list(self.depends)}


def setting_ref(kind: str, key: str) -> str:
    """``kind:key``, as a depends list names a setting: one field, never a comma (the list's
    separator), TAB or line break."""
    return re.sub(r"[\t\n\r,]", ";", f"{kind}:{key}")


def claim_from_data(item: object) -> Claim:
    """One claim of plan.json; ValueError on anything malformed."""
    if not isinstance(item, dict):
        raise ValueError("a claim is not a mapping")
    name, expected, depends = item.get("claim"), item.get("expected"), item.get("depends")
    if not isinstance(name, str) or not CLAIM_NAME.fullmatch(name):
        raise ValueError(f"claim name {name!r} is not one")
    if not isinstance(expected, str) or not FIELD.fullmatch(expected):
        raise ValueError(f"claim {name}: expected value missing or not one line")
    if not isinstance(depends, list) or not all(
        isinstance(ref, str) and FIELD.fullmatch(ref) and "," not in ref for ref in depends
    ):
        raise ValueError(f"claim {name}: depends is not a list of setting names")
    return Claim(name, expected, tuple(depends))
