"""`gen check`: both inputs validated and planned, nothing written."""

from __future__ import annotations

import json
from typing import Any

import click

from generator.errors import GoldtuneError, InputError
from generator.inputs.catalog import load_catalog
from generator.inputs.catalog_whole import check_site_whole
from generator.inputs.load import Inputs, load_inputs
from generator.model.setting import Plan
from generator.plan.build import build_plan


def run_check(
    hardware: str, profile: str, os_name: str | None = None, as_json: bool = False
) -> Inputs:
    """Validate both inputs and plan them: the same checks `gen` runs, nothing written.

    With ``as_json`` the result is one JSON object on stdout, warnings included; bad input is
    one too (``error_report``), beside one line a problem on stderr and exit status 2.
    """
    try:
        catalog = load_catalog()
        check_site_whole(catalog)  # `gen check` validates the site catalog whole
        inputs = load_inputs(hardware, profile, catalog, os_name=os_name)
        plan = build_plan(inputs.facts, inputs.profile)
    except GoldtuneError as error:
        if as_json:  # a script reads stdout: it gets an object whatever happened
            click.echo(json.dumps(error_report(error), indent=2))
        raise
    facts = inputs.facts
    distro = facts.os.distro
    if as_json:
        click.echo(json.dumps(check_report(inputs, plan), indent=2))
        return inputs
    click.echo(
        f"ok: {inputs.hardware_path} ({facts.name}: {facts.cpu.sockets}x {facts.cpu.vendor} "
        f"{facts.cpu.cores_per_socket} cores, {facts.memory_gib} GiB, {facts.gpu_count} GPUs, "
        f"{len(facts.nics)} NICs, {facts.numa_nodes} NUMA nodes)"
    )
    chain = " -> ".join(inputs.profile.chain)
    click.echo(f"ok: {inputs.profile_path} (profile {chain}, intent {inputs.profile.intent})")
    target = f"for {distro.name}" if distro else "portable: no distribution named (--os)"
    click.echo(f"ok: plan of {len(plan.settings)} settings, {target}")
    for warning in plan.warnings:
        click.echo(f"warning ({warning.check}): {warning.text}", err=True)
    return inputs


def check_report(inputs: Inputs, plan: Plan) -> dict[str, Any]:
    """What `gen check` found, for scripts: the same facts its lines print."""
    facts = inputs.facts
    distro = facts.os.distro
    return {
        "ok": True,
        "hardware": {
            "file": str(inputs.hardware_path),
            "name": facts.name,
            "cpu": {
                "sockets": facts.cpu.sockets,
                "vendor": facts.cpu.vendor,
                "cores_per_socket": facts.cpu.cores_per_socket,
            },
            "memory_gib": facts.memory_gib,
            "gpus": facts.gpu_count,
            "nics": len(facts.nics),
            "numa_nodes": facts.numa_nodes,
        },
        "profile": {
            "file": str(inputs.profile_path),
            "name": inputs.profile.name,
            "chain": list(inputs.profile.chain),
            "intent": inputs.profile.intent,
        },
        "distro": distro.name if distro else None,
        "settings": len(plan.settings),
        "warnings": [{"check": w.check, "text": w.text} for w in plan.warnings],
    }


def error_report(error: GoldtuneError) -> dict[str, Any]:
    """`gen check --json` on bad input (exit 2) or a failure (exit 1): each problem with its
    file, dotted field path, message and hint, as the stderr lines say them. json.dumps escapes
    every control character, so nothing of a foreign file reaches a terminal raw."""
    if isinstance(error, InputError):
        problems = [
            {"file": p.source, "field": p.path, "message": p.message, "hint": p.hint}
            for p in error.problems
        ]
    else:
        problems = [
            {"file": "", "field": "", "message": line, "hint": ""} for line in error.lines()
        ]
    return {"ok": False, "exit_status": error.exit_code, "errors": problems}


def usage_report(message: str, ctx: click.Context) -> dict[str, Any]:
    """`gen check --json` on a usage error (exit 2): the object error_report gives, with click's
    message and where the options are explained."""
    hint = f"see '{ctx.command_path} --help'"
    problem = {"file": "", "field": "", "message": message, "hint": hint}
    return {"ok": False, "exit_status": 2, "errors": [problem]}
