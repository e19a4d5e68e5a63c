"""What a diff changes on the node, said before any row, and the preflight claims kept apart.

A generation diff (dgx-h100 -> dgx-b200) is mostly claims: what the preflight unit expects of
the hardware (85 of 108 rows for that pair), which change with the hardware file and change
nothing on the node themselves (each setting made from a claim is a change of its own). A
reviewer reads first how many settings are added, removed and changed, by kind, then the
settings, then the claims apart, or without them (``gen diff --no-claims``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from typing import Protocol, TypeVar

CLAIM_KIND = "claim"  # a change of the hardware file's claims (preflight.conf), not a setting
STATUSES = ("added", "removed", "changed")


class Row(Protocol):
    """What a summary reads of a diff's change (generator.commands.diff.Change)."""

    @property
    def status(self) -> str: ...

    @property
    def kind(self) -> str: ...


Change = TypeVar("Change", bound=Row)


def split_claims(changes: Iterable[Change]) -> tuple[list[Change], list[Change]]:
    """(the settings' changes, the claims' changes), each in the diff's order."""
    settings: list[Change] = []
    claims: list[Change] = []
    for change in changes:
        (claims if change.kind == CLAIM_KIND else settings).append(change)
    return settings, claims


def status_counts(changes: Iterable[Row]) -> str:
    """ "2 added, 11 changed": the statuses present, in a fixed order."""
    counted = Counter(change.status for change in changes)
    return ", ".join(f"{counted[status]} {status}" for status in STATUSES if counted[status])


def by_kind(changes: list[Row], escape: Callable[[str], str]) -> str:
    """ "irq: 1 removed, 11 changed; nccl: 1 changed": each kind's statuses, kinds in the order
    they first appear (the diff's order: the plan's); ``escape`` shows a kind's name (a bundle's
    plan.json is foreign text) where the line lands."""
    kinds = list(dict.fromkeys(change.kind for change in changes))
    return "; ".join(
        f"{escape(kind)}: {status_counts(c for c in changes if c.kind == kind)}" for kind in kinds
    )


def node_summary(changes: Iterable[Row], escape: Callable[[str], str]) -> str:
    """One sentence: what changes on the node, by kind."""
    settings, _ = split_claims(changes)
    if not settings:
        return "On the node: no setting changes."
    noun = "setting" if len(settings) == 1 else "settings"
    counts = f"{status_counts(settings)} ({by_kind(settings, escape)})"
    return f"On the node: {len(settings)} {noun}, {counts}."


def claims_summary(changes: Iterable[Row], shown: bool) -> str:
    """One sentence on the claims, "" when none changed."""
    _, claims = split_claims(changes)
    if not claims:
        return ""
    where = "listed apart below" if shown else "left out (--no-claims)"
    return (
        f"Preflight claims (what the preflight unit expects of the hardware at boot): "
        f"{len(claims)}, {status_counts(claims)}, {where}."
    )
