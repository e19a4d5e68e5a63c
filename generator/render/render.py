"""Render a plan into the bundle's files, in memory: the overlay's files, then the delivery files
that carry them (install.list, the cloud-init user-data and its MIME and gzip forms), then the
plan, the manifest and the provenance statement. What the bundle holds is the table in outputs.py.
"""

from __future__ import annotations

from generator.model import layout
from generator.model.layout import MANIFEST, PLAN_FILE, PROVENANCE
from generator.model.planio import plan_to_json
from generator.model.setting import Plan
from generator.render.cloudinit import (
    CloudInitOptions,
    check_user_data,
    in_block_form,
    mime_user_data,
)
from generator.render.contexts import bundle_context, delivery_context, output_context
from generator.render.engine import make_environment, render_text
from generator.render.gzipforms import compressed_forms
from generator.render.manifest import manifest_entries, render_manifest
from generator.render.outputs import DELIVERY_OUTPUTS, OVERLAY_OUTPUTS, RenderedFiles
from generator.render.provenance import render_statement


def render_bundle(plan: Plan, cloud_init: CloudInitOptions | None = None) -> RenderedFiles:
    """Every file of the bundle, keyed by its path in the bundle, with its mode.

    ``cloud_init``: `gen --cloud-init-reboot` (the user-data asks cloud-init to reboot when the
    first boot left kernel arguments waiting for one) and `--cloud-init-part` (a team's
    cloud-configs before ours in the MIME forms)."""
    options = cloud_init or CloudInitOptions()
    env = make_environment()
    context = bundle_context(plan)
    files: RenderedFiles = {}
    for output in OVERLAY_OUTPUTS:
        if output.applies_to(plan):
            text = render_text(env, output, output_context(output, plan, context))
            files[output.bundle_path(plan)] = (text, output.mode)
    context |= delivery_context(plan, files, options)
    for output in DELIVERY_OUTPUTS:
        if output.applies_to(plan):
            text = render_text(env, output, output_context(output, plan, context))
            files[output.bundle_path(plan)] = (text, output.mode)
    user_data = files[layout.USER_DATA][0]
    first_boot = context["first_boot"]
    plain = in_block_form(
        [*context["first_boot_overlay"], *context["first_boot_scripts"]],
        [first_boot.script, first_boot.library],
        context["header"],
    )
    check_user_data(user_data, context["first_boot_overlay"], plain)
    mime = mime_user_data(user_data, options.parts)
    files[layout.USER_DATA_MIME] = (mime, 0o644)
    plain_gz, mime_gz = compressed_forms(user_data, mime)
    files[layout.USER_DATA_GZ] = (plain_gz, 0o644)
    files[layout.USER_DATA_MIME_GZ] = (mime_gz, 0o644)
    files[PLAN_FILE] = (plan_to_json(plan).encode("utf-8"), 0o644)  # read back by diff and verify
    entries = manifest_entries(files)
    files[MANIFEST] = (render_manifest(plan, files, options, entries), 0o644)
    # last: its subjects are every other file, manifest.json included; the others' digests are
    # the manifest's (a third of the statement's cost was hashing them again)
    contents = {path: content for path, (content, _) in files.items()}
    digests = {entry["path"]: entry["sha256"] for entry in entries}
    files[PROVENANCE] = (render_statement(plan, contents, digests), 0o644)
    return dict(sorted(files.items()))
