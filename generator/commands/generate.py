"""The main job, as a recipe: load the inputs, plan, render, write."""

from __future__ import annotations

from pathlib import Path

from generator.bundle.write import write_bundle
from generator.inputs.load import load_inputs
from generator.model.setting import Plan
from generator.plan.build import build_plan
from generator.render.render import RenderedFiles, render_bundle

DEFAULT_OUTPUT_DIR = Path("out")


def generate_bundle(
    hardware: str, profile: str, output: Path | None, os_name: str | None = None
) -> Path:
    """Write the ``hardware`` x ``profile`` bundle to ``output`` (default out/<hw>-<profile>)."""
    plan = plan_for(hardware, profile, os_name)
    files = render_bundle(plan)
    return write_bundle(files, output or default_output(plan))


def plan_for(hardware: str, profile: str, os_name: str | None = None) -> Plan:
    """The plan, carrying the digests of the two input files for the manifest."""
    inputs = load_inputs(hardware, profile, os_name=os_name)
    plan = build_plan(inputs.facts, inputs.profile)
    return plan._replace(inputs=inputs.digests)


def render_for(hardware: str, profile: str, os_name: str | None = None) -> RenderedFiles:
    return render_bundle(plan_for(hardware, profile, os_name))


def default_output(plan: Plan) -> Path:
    return DEFAULT_OUTPUT_DIR / f"{plan.hardware_name}-{plan.profile_name}"
