"""`gen explain`: every planned setting with its value, the rule that set it and why."""

from __future__ import annotations

import json

import click

from generator.inputs.load import load_inputs
from generator.plan.build import build_plan
from generator.plan.distro import portable_notes
from generator.table import format_table
from generator.textsafe import printable


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
    click.echo(format_table(["KIND", "KEY", "VALUE", "RULE", "REASON"], rows))
    # Not part of the plan: a portable bundle stays byte for byte what it was before --os existed.
    unapplied = () if inputs.facts.os.distro else portable_notes()
    for note in (*plan.notes, *unapplied):
        click.echo(printable(f"note ({note.rule}): {note.text}"))
    for warning in plan.warnings:
        click.echo(printable(f"warning ({warning.check}): {warning.text}"), err=True)
