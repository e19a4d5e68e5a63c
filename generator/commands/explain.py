"""`gen explain`: every planned setting with its value, the rule that set it and why."""

from __future__ import annotations

import json

import click

from generator.inputs.load import load_inputs
from generator.model.setting import Note, Plan
from generator.plan.build import build_plan
from generator.plan.distro import portable_notes
from generator.table import format_table, table_width
from generator.textsafe import printable


def shown_notes(
    notes: tuple[Note, ...], plan: Plan, kinds: tuple[str, ...], keys: tuple[str, ...]
) -> list[Note]:
    """The notes the filters keep. A note has no kind of its own: --kind keeps the notes of the
    rules that set a setting of that kind in this plan. A note has no key either: --key keeps
    the notes whose text names the key text (as a setting's key contains it)."""
    rules_of_kinds = {s.rule for s in plan.settings if s.kind in kinds}
    return [
        note
        for note in notes
        if (not kinds or note.rule in rules_of_kinds)
        and (not keys or any(k in note.text for k in keys))
    ]


def run_explain(
    hardware: str,
    profile: str,
    keys: tuple[str, ...],
    kinds: tuple[str, ...],
    as_json: bool,
    os_name: str | None = None,
) -> None:
    inputs = load_inputs(hardware, profile, os_name=os_name)
    plan = build_plan(inputs.facts, inputs.profile)
    settings = [
        s
        for s in plan.settings
        if (not kinds or s.kind in kinds) and (not keys or any(k in s.key for k in keys))
    ]
    if as_json:
        click.echo(json.dumps([s.as_json() for s in settings], indent=2))
        return
    # A profile's reason may carry terminal escape sequences: every cell is escaped (JSON
    # escapes its own).
    rows = [
        [
            printable(text)
            for text in (
                s.kind,
                s.key,
                s.value if s.value != "" else '""',
                s.rule,
                ("[override] " if s.override else "") + s.reason,
            )
        ]
        for s in settings
    ]
    click.echo(format_table(["KIND", "KEY", "VALUE", "RULE", "REASON"], rows, width=table_width()))
    # Not part of the plan: a portable bundle stays byte for byte what it was before --os existed.
    unapplied = () if inputs.facts.os.distro else portable_notes()
    for note in shown_notes((*plan.notes, *unapplied), plan, kinds, keys):
        click.echo(printable(f"note ({note.rule}): {note.text}"))
    for warning in plan.warnings:
        click.echo(printable(f"warning ({warning.check}): {warning.text}"), err=True)
