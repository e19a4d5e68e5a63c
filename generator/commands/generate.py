"""The main job, as a recipe: load the inputs, plan, render, write."""

from __future__ import annotations

from pathlib import Path

from generator.bundle.write import write_bundle
from generator.foreign import read_foreign
from generator.inputs.load import load_inputs
from generator.model.setting import Plan
from generator.plan.build import build_plan
from generator.render.cloudinit import TEAM_PART_LIMIT, CloudInitOptions, team_part
from generator.render.render import RenderedFiles, render_bundle

DEFAULT_OUTPUT_DIR = Path("out")


def generate_bundle(
    hardware: str,
    profile: str,
    output: Path | None,
    os_name: str | None = None,
    cloud_init: CloudInitOptions | None = None,
) -> Path:
    """Write the ``hardware`` x ``profile`` bundle to ``output`` (default out/<hw>-<profile>)."""
    plan = plan_for(hardware, profile, os_name)
    files = render_bundle(plan, cloud_init)
    return write_bundle(files, output or default_output(plan))


def cloud_init_options(reboot: bool, part_files: tuple[Path, ...]) -> CloudInitOptions:
    """`--cloud-init-reboot` and the `--cloud-init-part` files, read as foreign files (a regular
    file, at most TEAM_PART_LIMIT bytes) and checked before anything is planned or written."""
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
