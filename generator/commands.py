"""What each `gen` command does, as plain functions (the click layer only parses options)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from generator.catalog import load_catalog
from generator.hardware import HardwareSpec, load_hardware
from generator.inputs import Inputs, load_inputs
from generator.paths import profiles_dir
from generator.profile import ProfileFile, load_profile
from generator.table import format_table


def run_check(hardware: str, profile: str) -> Inputs:
    inputs = load_inputs(hardware, profile)
    facts = inputs.facts
    click.echo(
        f"ok: {inputs.hardware_path} ({facts.name}: {facts.cpu.sockets}x {facts.cpu.vendor} "
        f"{facts.cpu.cores_per_socket} cores, {facts.memory_gib} GiB, {facts.gpu_count} GPUs, "
        f"{len(facts.nics)} NICs, {facts.numa_nodes} NUMA nodes)"
    )
    chain = " -> ".join(inputs.profile.chain)
    click.echo(f"ok: {inputs.profile_path} (profile {chain}, intent {inputs.profile.intent})")
    return inputs


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
        profiles.append({"name": resolved.name, "extends": " -> ".join(resolved.chain[1:]), "description": resolved.description})
    return {
        "systems": systems,
        "gpus": [{"key": g.key, "name": g.name, "pci": " ".join(g.pci_device_ids)} for g in catalog.gpus.entries],
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
        click.echo(format_table(columns, [[str(row[c]) for c in columns] for row in rows], indent="  "))
        click.echo()


def input_schema(which: str) -> dict[str, Any]:
    model = HardwareSpec if which == "hardware" else ProfileFile
    schema = model.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = f"goldtune {which} description"
    return schema


def run_generate(hardware: str, profile: str, output: Path | None) -> None:
    from generator.generate import generate_bundle

    bundle_dir = generate_bundle(hardware, profile, output)
    click.echo(f"wrote {bundle_dir}")


def run_explain(hardware: str, profile: str, keys: tuple[str, ...], kinds: tuple[str, ...], as_json: bool) -> None:
    from generator.plan import build_plan

    inputs = load_inputs(hardware, profile)
    plan = build_plan(inputs.facts, inputs.profile)
    settings = [
        s for s in plan.settings
        if (not kinds or s.kind in kinds) and (not keys or any(k in s.key for k in keys))
    ]
    if as_json:
        click.echo(json.dumps([s.as_json() for s in settings], indent=2))
        return
    rows = [[s.kind, s.key, s.value if s.value != "" else '""', s.rule, ("[override] " if s.override else "") + s.reason] for s in settings]
    click.echo(format_table(["KIND", "KEY", "VALUE", "RULE", "REASON"], rows))
    for note in plan.notes:
        click.echo(f"note ({note.rule}): {note.text}")
    for warning in plan.warnings:
        click.echo(f"warning ({warning.check}): {warning.text}", err=True)


def run_rules(as_json: bool) -> None:
    from generator.rules import REGISTRY

    rows = [{"id": r.id, "area": r.area, "summary": r.summary, "overrides": list(r.overrides)} for r in REGISTRY]
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    click.echo(format_table(["ID", "AREA", "SUMMARY"], [[r["id"], r["area"], r["summary"]] for r in rows]))
