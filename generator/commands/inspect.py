"""What each `gen` command does, as plain functions (the click layer only parses options)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import IO, Any, Literal

import click

from generator import TOOL
from generator.textsafe import printable

# Each command imports what it needs when it runs: `gen diff` of two bundles never builds the
# input models, which keeps start-up close to the bare import of the dependencies.


def run_check(
    hardware: str, profile: str, os_name: str | None = None, as_json: bool = False
) -> Any:
    """Validate both inputs and plan them: the same checks `gen` runs, nothing written.

    With ``as_json`` the result is one JSON object on stdout, warnings included; bad input is
    still one line a problem on stderr and exit status 2, as without it.
    """
    from generator.inputs.load import load_inputs
    from generator.plan.build import build_plan

    inputs = load_inputs(hardware, profile, os_name=os_name)
    plan = build_plan(inputs.facts, inputs.profile)
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


def check_report(inputs: Any, plan: Any) -> dict[str, Any]:
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


def shipped_inventory() -> dict[str, list[dict[str, Any]]]:
    from generator.inputs.catalog import load_catalog
    from generator.inputs.hardware import load_hardware
    from generator.inputs.profile import load_profile
    from generator.paths import profiles_dir

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
    from generator.table import format_table

    inventory = shipped_inventory()
    if as_json:
        click.echo(json.dumps(inventory, indent=2, sort_keys=True))
        return
    for section, rows in inventory.items():
        click.echo(f"{section.upper()}")
        columns = list(rows[0]) if rows else []
        click.echo(
            format_table(columns, [[str(row[c]) for c in columns] for row in rows], indent="  ")
        )
        click.echo()


def input_schema(which: str) -> dict[str, Any]:
    from generator.inputs.hardware import json_schema
    from generator.inputs.profile import ProfileFile

    schema = json_schema() if which == "hardware" else ProfileFile.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = f"goldtune {which} description"
    return schema


def run_generate(
    hardware: str,
    profile: str,
    output: Path | None,
    os_name: str | None = None,
    cloud_init_reboot: bool = False,
    cloud_init_parts: tuple[Path, ...] = (),
) -> None:
    from generator.commands.generate import cloud_init_options, generate_bundle

    options = cloud_init_options(cloud_init_reboot, cloud_init_parts)
    bundle_dir = generate_bundle(hardware, profile, output, os_name, options)
    click.echo(f"wrote {bundle_dir}")
    for line in bundle_size_warnings(bundle_dir):
        click.echo(f"{TOOL}: warning: {line}", err=True)


def bundle_size_warnings(bundle_dir: Path) -> list[str]:
    """The providers whose user-data limit no cloud-init form of the bundle just written fits
    (its manifest, written by this run, records the sizes)."""
    from generator.model.layout import MANIFEST
    from generator.render.providers import size_warnings

    manifest = json.loads((bundle_dir / MANIFEST).read_text())
    return size_warnings(manifest["user_data"])


def run_explain(
    hardware: str,
    profile: str,
    keys: tuple[str, ...],
    kinds: tuple[str, ...],
    as_json: bool,
    os_name: str | None = None,
) -> None:
    from generator.inputs.load import load_inputs
    from generator.plan.build import build_plan
    from generator.plan.distro import portable_notes
    from generator.table import format_table

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


def stream_is_terminal(name: Literal["stdout", "stderr"]) -> bool:
    """Whether the process's stream of that name is a terminal (colour, progress)."""
    stream: IO[str] = sys.stdout if name == "stdout" else sys.stderr
    return stream.isatty()


def run_rules(as_json: bool) -> None:
    from generator.rules import REGISTRY
    from generator.table import format_table

    rows: list[dict[str, Any]] = [
        {"id": r.id, "area": r.area, "summary": r.summary, "overrides": list(r.overrides)}
        for r in REGISTRY
    ]
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    click.echo(
        format_table(["ID", "AREA", "SUMMARY"], [[r["id"], r["area"], r["summary"]] for r in rows])
    )


def _plan_side(hardware: str, profile: str, os_name: str | None = None):  # type: ignore[no-untyped-def]
    from generator.inputs.load import load_inputs
    from generator.plan.build import build_plan

    inputs = load_inputs(hardware, profile, os_name=os_name)
    return build_plan(inputs.facts, inputs.profile)


def compute_diff(  # type: ignore[no-untyped-def]
    bundles: tuple[Path, ...],
    hardware: tuple[str, ...],
    profiles: tuple[str, ...],
    systems: tuple[str, ...] = (),
):
    """Two bundle directories, or --hw/--profile/--os sides: exactly one of them given twice."""
    from generator.bundle.read import read_bundle
    from generator.commands.diff import Difference, diff_bundles, diff_plans, label

    if bundles:
        if len(bundles) != 2 or hardware or profiles or systems:
            raise click.UsageError(
                "give two bundle directories, or --hw/--profile/--os sides, not both"
            )
        return diff_bundles(read_bundle(bundles[0]), read_bundle(bundles[1]))
    sides = (hardware, profiles, systems)
    if not (
        hardware
        and profiles
        and all(len(side) <= 2 for side in sides)
        and sum(len(side) == 2 for side in sides) == 1
    ):
        raise click.UsageError(
            "compare two hardware files with one profile (--hw A --hw B --profile P), "
            "one hardware file with two profiles (--hw A --profile P --profile Q), "
            "or two distributions (--hw A --profile P --os D --os E)"
        )
    pairs = [
        (
            hardware[index % len(hardware)],
            profiles[index % len(profiles)],
            systems[index % len(systems)] if systems else None,
        )
        for index in range(2)
    ]
    old, new = (_plan_side(hw, profile, os_name) for hw, profile, os_name in pairs)
    return Difference(label(old), label(new), diff_plans(old, new))


def run_diff(
    bundles: tuple[Path, ...],
    hardware: tuple[str, ...],
    profiles: tuple[str, ...],
    output_format: str,
    systems: tuple[str, ...] = (),
) -> int:
    from generator.commands.diff import format_json, format_markdown, format_terminal

    difference = compute_diff(bundles, hardware, profiles, systems)
    if output_format == "json":
        click.echo(format_json(difference), nl=False)
    elif output_format == "markdown":
        click.echo(format_markdown(difference))
    else:
        click.echo(format_terminal(difference, colour=stream_is_terminal("stdout")), nl=False)
    return 0 if difference.same else 1


def matrix_names(
    hardware: tuple[str, ...],
    profiles: tuple[str, ...],
    all_systems_flag: bool,
    all_profiles_flag: bool,
    catalog: Any,
) -> tuple[list[str], list[str]]:
    """The hardware and profiles named, the shipped ones added by the --all flags, in order."""
    from generator.commands.matrix import all_profiles, all_systems

    systems = list(dict.fromkeys([*hardware, *(all_systems(catalog) if all_systems_flag else [])]))
    chosen = list(dict.fromkeys([*profiles, *(all_profiles() if all_profiles_flag else [])]))
    if not systems or not chosen:
        raise click.UsageError(
            "name at least one --hw (or --all-systems) and one --profile (or --all-profiles)"
        )
    return systems, chosen


def progress_on_stderr(**options: Any) -> Any:
    """click's progress bar on stderr: its default is stdout, where the table goes."""
    return click.progressbar(file=sys.stderr, **options)


def _known_distro(os_name: str | None) -> None:
    """An unknown --os is the command's error, not every combination's."""
    from generator.inputs.distro import load_distros, resolve_distro

    if os_name is not None:
        resolve_distro(os_name, load_distros())


def run_matrix(
    hardware: tuple[str, ...],
    profiles: tuple[str, ...],
    all_systems_flag: bool,
    all_profiles_flag: bool,
    output_root: Path,
    jobs: int | None = None,
    os_name: str | None = None,
    cloud_init_reboot: bool = False,
    cloud_init_parts: tuple[Path, ...] = (),
) -> int:
    from generator.commands.generate import cloud_init_options
    from generator.commands.matrix import default_jobs, generate_matrix, run_with_progress
    from generator.inputs.catalog import load_catalog
    from generator.table import format_table

    _known_distro(os_name)
    options = cloud_init_options(cloud_init_reboot, cloud_init_parts)
    catalog = load_catalog()
    systems, chosen = matrix_names(hardware, profiles, all_systems_flag, all_profiles_flag, catalog)
    generated = generate_matrix(
        systems, chosen, output_root, catalog, jobs or default_jobs(), os_name, options
    )
    outcomes = run_with_progress(
        len(systems) * len(chosen), generated, stream_is_terminal("stderr"), progress_on_stderr
    )
    rows = [
        [
            o.hardware,
            o.profile,
            "ok" if o.ok else "FAILED",
            str(o.bundle) if o.bundle else o.error,
            str(o.settings) if o.ok else "",
        ]
        for o in outcomes
    ]
    click.echo(format_table(["HARDWARE", "PROFILE", "RESULT", "BUNDLE / ERROR", "SETTINGS"], rows))
    failed = sum(not o.ok for o in outcomes)
    click.echo(f"{len(outcomes) - failed} written, {failed} failed")
    return 1 if failed else 0


def run_matrix_check(
    hardware: tuple[str, ...],
    profiles: tuple[str, ...],
    all_systems_flag: bool,
    all_profiles_flag: bool,
    root: Path,
    as_json: bool,
    os_name: str | None = None,
    jobs: int | None = None,
    cloud_init_reboot: bool = False,
    cloud_init_parts: tuple[Path, ...] = (),
) -> int:
    """Regenerate in memory and compare with the bundles in ``root``; the report on stdout."""
    from generator.commands import fleet_check
    from generator.commands.generate import cloud_init_options
    from generator.commands.matrix import default_jobs, plan_combinations, run_with_progress
    from generator.inputs.catalog import load_catalog

    _known_distro(os_name)
    options = cloud_init_options(cloud_init_reboot, cloud_init_parts)
    catalog = load_catalog()
    systems, chosen = matrix_names(hardware, profiles, all_systems_flag, all_profiles_flag, catalog)
    fleet_check.check_directory(root)
    combinations = plan_combinations(systems, chosen, root, catalog, os_name)
    fleet_check.input_errors(combinations)
    checked = fleet_check.check_combinations(combinations, jobs or default_jobs(), options)
    states = run_with_progress(
        len(combinations),
        checked,
        stream_is_terminal("stderr"),
        progress_on_stderr,
        label="checking",
    )
    states += fleet_check.extra_entries(root, {c.target.name for c in combinations})
    if as_json:
        click.echo(json.dumps(fleet_check.as_json(root, states), indent=2))
    else:
        click.echo(fleet_check.format_report(root, states), nl=False)
    for line in fleet_check.describe(states):
        click.echo(f"{TOOL}: {line}", err=True)
    return 1 if fleet_check.failed(states) else 0
