"""Pairing the NICs of two plans, so that a diff of two generations reads as renames.

A new generation of a system renames its NICs (ib0 -> ibp24s0): paired by name, every setting
keyed on a NIC would be one removed and one added. Per role, a NIC whose name is on both sides
is itself; the others pair in the hardware file's order, the n-th renamed NIC of a role on the
old side with the n-th on the new (``compute NIC 1``: the first compute NIC of the new side).
A setting keyed on an old NIC is compared with the one keyed on its partner.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import NamedTuple

from generator.model.setting import NicRole

# Beside a NIC's name in a key: start or end, or a character no interface name has next to it
# (a dot of a sysctl key, a space of "nic ib0"); ib1 is not the start of ib10.
NAME_EDGE = r"A-Za-z0-9_-"


class NicPair(NamedTuple):
    old: str
    new: str
    role: str
    position: int  # among the new side's NICs of its role, from 1

    @property
    def where(self) -> str:
        return f"{self.role} NIC {self.position}"

    @property
    def label(self) -> str:
        return f"{self.old} → {self.new} ({self.where})"


def pair_nics(old: tuple[NicRole, ...], new: tuple[NicRole, ...]) -> tuple[NicPair, ...]:
    """The renamed NICs, paired by role and position (see the module's docstring)."""
    roles = dict.fromkeys(nic.role for nic in (*old, *new))
    pairs: list[NicPair] = []
    for role in roles:
        before = [nic.name for nic in old if nic.role == role]
        after = [nic.name for nic in new if nic.role == role]
        renamed_before = [name for name in before if name not in after]
        renamed_after = [name for name in after if name not in before]
        pairs += [
            NicPair(was, now, role, after.index(now) + 1)
            for was, now in zip(renamed_before, renamed_after, strict=False)
        ]
    return tuple(pairs)


def key_translator(pairs: tuple[NicPair, ...]) -> Callable[[str], tuple[str, NicPair | None]]:
    """A function of an old key: the key it is compared under on the new side, and the pair
    that renamed it (None: not keyed on a renamed NIC)."""
    by_old = {pair.old: pair for pair in pairs}
    taken = {pair.new for pair in pairs}
    if not by_old:
        return lambda key: (key, None)
    names = "|".join(re.escape(name) for name in sorted(by_old, key=len, reverse=True))
    pattern = re.compile(rf"(?<![{NAME_EDGE}])(?:{names})(?![{NAME_EDGE}])")

    def translate(key: str) -> tuple[str, NicPair | None]:
        found = [by_old[m.group(0)] for m in pattern.finditer(key)]
        if not found:
            return key, None
        return pattern.sub(lambda m: by_old[m.group(0)].new, key), found[0]

    def translate_unpaired(key: str) -> tuple[str, NicPair | None]:
        new_key, pair = translate(key)
        # An old NIC left unpaired whose name a renamed NIC now has: its settings are not
        # that NIC's (compared under a key no new setting has).
        if pair is None and any(_names(key, name) for name in taken):
            return "\0" + key, None
        return new_key, pair

    return translate_unpaired


def _names(key: str, name: str) -> bool:
    return re.search(rf"(?<![{NAME_EDGE}]){re.escape(name)}(?![{NAME_EDGE}])", key) is not None
