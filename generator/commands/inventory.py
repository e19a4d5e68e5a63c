"""`gen list`: the shipped systems, GPUs, NICs, CPUs and profiles."""

from __future__ import annotations

import json
from typing import Any

import click

from generator.inputs.catalog import load_catalog
from generator.inputs.hardware import load_hardware
from generator.inputs.profile import load_profile
from generator.paths import profiles_dir
from generator.table import format_table, table_width


def shipped_inventory() -> dict[str, list[dict[str, Any]]]:
    catalog = load_catalog()
    systems = []
    for name in catalog.system_files:
        spec, _ = load_hardware(name, catalog)
        gpus = ", ".join(f"{g.count}x {g.model}" for g in spec.gpus) or "none"
        systems.append({"name": name, "gpus": gpus, "description": spec.description or ""})
    profiles = []
    for path in sorted(profiles_dir().glob("*.yaml")):
        resolved, _ = load_profile(path.stem)
        profiles.append(
            {
                "name": resolved.name,
                "extends": " -> ".join(resolved.chain[1:]),
                "description": resolved.description,
            }
        )
    return {
        "systems": systems,
        "gpus": [
            {"key": g.key, "name": g.name, "pci": " ".join(g.pci_device_ids)}
            for g in catalog.gpus.entries
        ],
        "nics": [{"key": n.key, "name": n.name, "driver": n.driver} for n in catalog.nics.entries],
        "cpus": [{"key": c.key, "name": c.name, "vendor": c.vendor} for c in catalog.cpus.entries],
        "profiles": profiles,
    }


def run_list(as_json: bool) -> None:
    inventory = shipped_inventory()
    if as_json:
        click.echo(json.dumps(inventory, indent=2, sort_keys=True))
        return
    for section, rows in inventory.items():
        click.echo(f"{section.upper()}")
        columns = list(rows[0]) if rows else []
        click.echo(
            format_table(
                columns,
                [[str(row[c]) for c in columns] for row in rows],
                indent="  ",
                width=table_width(),
            )
        )
        click.echo()
