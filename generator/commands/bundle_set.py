"""`gen set`: the bundles of several hardware files x one profile x one distribution as one set,
for one image whose nodes each choose their member at first boot (generator/bundle/bundle_set)."""

from __future__ import annotations

import os
from pathlib import Path

import click

from generator import TOOL
from generator.commands.options import PATH
from generator.commands.usage import OneValueOptions, reports_errors
from generator.textsafe import printable

# The planner and renderers are imported when the command runs: `gen --help` stays quick.


def write_set(
    hardware: tuple[str, ...],
    profile: str,
    os_name: str | None,
    output: Path,
    reboot: bool,
    with_common: bool = False,
) -> tuple[Path, dict[str, object]]:
    """Plan and render every member, then write the set to ``output``; returns it and its
    manifest's data. Any bad input: nothing written."""
    from generator.bundle.bundle_set import (
        check_distinguishable,
        link_duplicates,
        member_names,
        render_set_manifest,
        set_files,
    )
    from generator.commands.generate import plan_for
    from generator.model import layout
    from generator.render.render import render_bundle

    plans = [plan_for(name, profile, os_name) for name in hardware]
    names = member_names(plans, "gen set")
    members = {name: render_bundle(plan) for name, plan in zip(names, plans, strict=True)}
    check_distinguishable(members, "gen set")
    files, data = set_files(members, plans, reboot, os_name is not None, with_common)
    files[layout.MANIFEST] = (render_set_manifest(data, files), 0o644)
    written = replace_set(files, output)
    link_duplicates(written, files)
    return written, data


def replace_set(files: dict[str, tuple[bytes, int]], output: Path) -> Path:
    """write_bundle's atomic write; an earlier set at ``output`` is moved aside first and removed
    once the new one is in place (put back if the write fails)."""
    from generator.bundle.bundle_set import set_manifest
    from generator.bundle.read import present_entries
    from generator.bundle.write import write_bundle
    from generator.errors import InputError, Problem
    from generator.model import layout

    old = None if output.is_symlink() else set_manifest(output)
    if old is None:
        return write_bundle(files, output)
    # as write_bundle refuses a bundle holding files its manifest does not list: never removed
    entries = old.get("files")
    listed = (
        {e.get("path") for e in entries if isinstance(e, dict)}
        if isinstance(entries, list)
        else set()
    )
    unlisted = sorted(present_entries(output) - listed - {layout.MANIFEST})
    if unlisted:
        why = f"holds {printable(unlisted[0])}, which its set manifest does not list; not replaced"
        raise InputError(Problem(str(output), "", why))
    aside = output.with_name(f".{output.name}.{TOOL}-old-set")
    if aside.exists():
        raise InputError(Problem(str(aside), "", "is left from an earlier run; remove it first"))
    os.rename(output, aside)
    try:
        written = write_bundle(files, output)
    except BaseException:
        os.rename(aside, output)
        raise
    import shutil  # `gen set`'s only: every command's start imports this module

    shutil.rmtree(aside)
    return written


@click.command(name="set", cls=OneValueOptions)
@click.option(
    "--hw",
    "hardware",
    multiple=True,
    required=True,
    metavar="FILE|NAME",
    help="A member's hardware description (give it once per member, 2 to 8).",
)
@click.option("--profile", "profile", required=True, metavar="FILE|NAME", help="Workload profile.")
@click.option("--os", "os_name", metavar="DISTRO", help="Target distribution of every member.")
@click.option("-o", "--output", type=PATH, required=True, metavar="DIR", help="Set directory.")
@click.option(
    "--reboot-for-kernel-args",
    is_flag=True,
    help="The selector reboots the node once when the chosen member's kernel arguments are not "
    "in effect after it was applied (default: no reboot; they take effect at the next boot).",
)
@click.option(
    "--common",
    "with_common",
    is_flag=True,
    help="Install into the image the sysctl.d, limits.d and system.conf.d files that every "
    "member carries the same: in effect on every node, whichever member it chooses, or none.",
)
@reports_errors
def set_command(
    hardware: tuple[str, ...],
    profile: str,
    os_name: str | None,
    output: Path,
    reboot_for_kernel_args: bool,
    with_common: bool,
) -> None:
    """Write a bundle set: one image for several machine types, the member chosen on the node.

    \b
      gen set --hw dgx-h100 --hw l40s-4x-pcie --profile training-k8s --os ubuntu-24.04 -o out/set
      sudo out/set/install.sh --image-build --root /mnt/image

    install.sh installs every member and the selector unit into the image, nothing
    machine-specific; at boot the selector judges each member's claims with its preflight,
    applies the one member that matches through its install.sh, and records the choice.
    The cloud-init form of a set is not offered: a set is baked into an image.

    With --common the image also gets, at 89-goldtune-set.conf, each sysctl.d, limits.d and
    system.conf.d file that every member carries the same (its header aside): in effect on every
    node, even one that matches no member; manifest.json's "common" lists them and why.
    """
    written, data = write_set(
        hardware, profile, os_name, output, reboot_for_kernel_args, with_common
    )
    sizes = data["sizes"]
    assert isinstance(sizes, dict)
    click.echo(
        f"wrote {written}: {len(hardware)} members, {sizes['files']} files "
        f"({sizes['listed_bytes']} bytes), stored {sizes['stored_files']} "
        f"({sizes['stored_bytes']} bytes)"
    )
    if with_common:
        common = data["common"]
        assert isinstance(common, list)
        paths = ", ".join(str(entry["member_path"]) for entry in common)
        click.echo(
            f"common part: {paths}, the same in every member"
            if common
            else "common part: none (no sysctl.d, limits.d or system.conf.d file is the same "
            "in every member)"
        )
