"""The main job, as a recipe: load the inputs, plan, render, write."""

from __future__ import annotations

from pathlib import Path

import click

from generator import TOOL
from generator.bundle.read import read_user_data_sizes
from generator.bundle.write import write_bundle
from generator.errors import InputError, Problem
from generator.foreign import read_foreign
from generator.inputs.load import load_inputs
from generator.model.layout import USER_DATA
from generator.model.setting import Plan
from generator.plan.build import build_plan
from generator.render.budgets import budget_warnings, check_fit, overruns
from generator.render.cloudinit import (
    MAX_TEAM_PARTS,
    TEAM_PART_LIMIT,
    CloudInitOptions,
    team_part,
)
from generator.render.outputs import RenderedFiles
from generator.render.render import render_bundle

DEFAULT_OUTPUT_DIR = Path("out")


def run_generate(
    hardware: str,
    profile: str,
    output: Path | None,
    os_name: str | None = None,
    cloud_init_reboot: bool = False,
    cloud_init_parts: tuple[Path, ...] = (),
    require_fit: tuple[str, ...] = (),
) -> None:
    options = cloud_init_options(cloud_init_reboot, cloud_init_parts)
    names = tuple(str(path) for path in cloud_init_parts)
    bundle_dir = generate_bundle(hardware, profile, output, os_name, options, require_fit, names)
    click.echo(f"wrote {bundle_dir}")
    for line in bundle_size_warnings(bundle_dir, options, names):
        click.echo(f"{TOOL}: warning: {line}", err=True)


def bundle_size_warnings(
    bundle_dir: Path, options: CloudInitOptions | None = None, names: tuple[str, ...] = ()
) -> list[str]:
    """The providers whose user-data limit no cloud-init form of the bundle just written fits,
    among the forms that carry every --cloud-init-part (its manifest, written by this run,
    records the sizes), with what each part costs in the form."""
    sizes = read_user_data_sizes(bundle_dir)
    if not overruns(sizes):
        return []
    parts = (options or CloudInitOptions()).parts
    user_data = (bundle_dir / USER_DATA).read_bytes()
    return budget_warnings(sizes, user_data, parts, names)


def generate_bundle(
    hardware: str,
    profile: str,
    output: Path | None,
    os_name: str | None = None,
    cloud_init: CloudInitOptions | None = None,
    require_fit: tuple[str, ...] = (),
    part_names: tuple[str, ...] = (),
) -> Path:
    """Write the ``hardware`` x ``profile`` bundle to ``output`` (default out/<hw>-<profile>);
    nothing when a provider in ``require_fit`` gets no user-data form within its limit."""
    plan = plan_for(hardware, profile, os_name)
    files = render_bundle(plan, cloud_init)
    check_fit(files, (cloud_init or CloudInitOptions()).parts, part_names, require_fit)
    return write_bundle(files, output or default_output(plan))


def cloud_init_options(reboot: bool, part_files: tuple[Path, ...]) -> CloudInitOptions:
    """`--cloud-init-reboot` and the `--cloud-init-part` files, read as foreign files (a regular
    file, at most TEAM_PART_LIMIT bytes) and checked before anything is planned or written."""
    if len(part_files) > MAX_TEAM_PARTS:
        raise InputError(
            Problem(
                "--cloud-init-part",
                "",
                f"{len(part_files)} parts; at most {MAX_TEAM_PARTS} (their file names keep "
                "their order)",
            )
        )
    parts = tuple(team_part(read_foreign(path, TEAM_PART_LIMIT), str(path)) for path in part_files)
    return CloudInitOptions(reboot=reboot, parts=parts)


def plan_for(hardware: str, profile: str, os_name: str | None = None) -> Plan:
    """The plan, carrying the digests of the two input files for the manifest."""
    inputs = load_inputs(hardware, profile, os_name=os_name)
    plan = build_plan(inputs.facts, inputs.profile)
    return plan._replace(inputs=inputs.digests)


def render_for(hardware: str, profile: str, os_name: str | None = None) -> RenderedFiles:
    return render_bundle(plan_for(hardware, profile, os_name))


def default_output(plan: Plan) -> Path:
    return DEFAULT_OUTPUT_DIR / f"{plan.hardware_name}-{plan.profile_name}"
