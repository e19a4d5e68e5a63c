"""The preflight unit's result (``layout.PREFLIGHT_RESULT``), read back and judged.

At boot, the fixed script ``preflight`` compares the hardware file's claims with the node and
writes ``state<TAB>ok`` or ``state<TAB>mismatch``, then one
``mismatch<TAB>claim<TAB>file says<TAB>node has<TAB>depends`` line per claim that differs
(templates/scripts/preflight). The collector copies that file into the snapshot, a line a
record; ``gen verify`` shows each mismatch as a failing check, live and from a snapshot.
"""

from __future__ import annotations

from typing import NamedTuple

from generator.model.layout import PREFLIGHT_RESULT, PREFLIGHT_UNIT
from generator.model.probes import Section
from generator.verify.snapshot import Snapshot, why_not
from generator.verify.verdicts import Check, Verdict

STATES = ("ok", "mismatch")
MAX_LINES = 4096  # a claim a line: far more than any hardware file makes
MAX_LINE_CHARS = 4096


class PreflightError(ValueError):
    """The result is not what the preflight script writes; the message says where and why."""


class Mismatch(NamedTuple):
    claim: str
    expected: str  # what the hardware file says
    actual: str  # what the node has
    depends: tuple[str, ...]  # the settings made from the claim, as kind:key


class PreflightResult(NamedTuple):
    state: str  # ok | mismatch
    mismatches: tuple[Mismatch, ...]


def parse_preflight(text: str) -> PreflightResult:
    """The result file's text, read whole; PreflightError on a malformed line (its number and
    what is wrong), on more than MAX_LINES lines, and on a state that its lines contradict."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if len(lines) > MAX_LINES:
        raise PreflightError(f"{len(lines)} lines; a result has at most {MAX_LINES}")
    if not lines:
        raise PreflightError("empty: no state line")
    state = _state(lines[0])
    mismatches = tuple(_mismatch(number, line) for number, line in enumerate(lines[1:], start=2))
    if (state == "ok") != (not mismatches):
        raise PreflightError(
            f"state {state} with {len(mismatches)} mismatch line"
            + ("s" if len(mismatches) != 1 else "")
        )
    return PreflightResult(state, mismatches)


def _state(line: str) -> str:
    fields = line.split("\t")
    if len(fields) != 2 or fields[0] != "state" or fields[1] not in STATES:
        raise PreflightError(f"line 1: not state<TAB>ok or state<TAB>mismatch: {line[:80]!r}")
    return fields[1]


def _mismatch(number: int, line: str) -> Mismatch:
    if len(line) > MAX_LINE_CHARS:
        raise PreflightError(f"line {number}: longer than {MAX_LINE_CHARS} characters")
    fields = line.rstrip("\r").split("\t")
    if len(fields) != 5 or fields[0] != "mismatch":
        raise PreflightError(
            f"line {number}: not mismatch<TAB>claim<TAB>file says<TAB>node has<TAB>depends: "
            f"{line[:80]!r}"
        )
    _, claim, expected, actual, depends = fields
    if not claim:
        raise PreflightError(f"line {number}: no claim")
    refs = () if depends in ("", "-") else tuple(depends.split(","))
    return Mismatch(claim, expected, actual, refs)


def _check(key: str, expected: str, actual: str, verdict: Verdict, reason: str) -> Check:
    return Check("preflight", key, expected, actual, verdict, reason, rule="boot.preflight")


def check_preflight(snapshot: Snapshot, planned: bool) -> list[Check]:
    """The preflight result of the snapshot as checks: one per mismatch (differs), or one ok;
    not-judged when the unit is installed but left no result, not-applicable where the bundle
    or the machine has no preflight unit."""
    if not planned:
        return []
    records = snapshot.section(Section.PREFLIGHT)
    if snapshot.absent(Section.UNIT_ENABLED, PREFLIGHT_UNIT):
        why = f"{PREFLIGHT_UNIT} is not installed here (delivered without it)"
        return [_check("state", "ok", "no unit", Verdict.NOT_APPLICABLE, why)]
    lines = [value for key, value in records if key == "line"]
    if not lines:
        found = next((value for _, value in records), "not collected")
        why = f"{PREFLIGHT_RESULT}: {why_not(found) or found}: the unit has not run on this boot"
        return [_check("state", "ok", "no result", Verdict.NOT_JUDGED, why)]
    try:
        result = parse_preflight("\n".join(lines))
    except PreflightError as error:
        return [
            _check("state", "ok", "malformed", Verdict.NOT_JUDGED, f"{PREFLIGHT_RESULT}: {error}")
        ]
    if not result.mismatches:
        return [_check("state", "ok", "ok", Verdict.OK, "every claim of the hardware file holds")]
    return [
        _check(
            mismatch.claim,
            mismatch.expected,
            mismatch.actual,
            Verdict.DIFFERS,
            "this node differs from the hardware file; made from it: "
            + (", ".join(mismatch.depends) or "nothing"),
        )
        for mismatch in result.mismatches
    ]
