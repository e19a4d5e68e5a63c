"""`gen rules`: every rule, its id, area and what it decides."""

from __future__ import annotations

import json
from typing import Any

import click

from generator.rules import REGISTRY
from generator.table import format_table, table_width


def run_rules(as_json: bool) -> None:
    rows: list[dict[str, Any]] = [
        {"id": r.id, "area": r.area, "summary": r.summary, "overrides": list(r.overrides)}
        for r in REGISTRY
    ]
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    click.echo(
        format_table(
            ["ID", "AREA", "SUMMARY"],
            [[r["id"], r["area"], r["summary"]] for r in rows],
            width=table_width(),
        )
    )
