"""The `gen` command line. Commands stay thin: each is a recipe of named steps."""

from __future__ import annotations

import atexit
import gc
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from generator import TOOL, __version__
from generator.commands.bundle_set import set_command
from generator.commands.completion import complete_hardware, complete_profile
from generator.commands.distro_option import matrix_os_option, os_option
from generator.commands.options import (
    PATH,
    cloud_init_options,
    diff_claims_option,
    report_option,
)
from generator.commands.signing import SIGN_HELP, provenance_check, run_sign, sign_options
from generator.commands.usage import JsonUsageErrors, OneValueGroup, reports_errors
from generator.errors import InputError, Problem
from generator.gcpause import CollectorPaused
from generator.model.layout import COLLECT_DATA, COLLECT_SCRIPT
from generator.model.setting import SETTING_KINDS
from generator.paths import SITE_CATALOG_ENV, use_site_catalog

F = TypeVar("F", bound=Callable[..., Any])

# Everything a run creates lives until the process ends. Freezing it at exit spares the
# interpreter's final garbage-collection passes over all of it.
atexit.register(gc.freeze)


HW_HELP = (
    "Hardware description: a file (a value with a / or ending in .yaml/.yml), or else "
    "the name of a shipped system (see `gen list`)."
)
PROFILE_HELP = (
    "Workload profile: a file (a value with a / or ending in .yaml/.yml), or else "
    "the name of a shipped profile (see `gen list`)."
)


def hw_and_profile(func: F) -> F:
    func = click.option(
        "--profile",
        "profile",
        required=True,
        metavar="FILE|NAME",
        help=PROFILE_HELP,
        shell_complete=complete_profile,
    )(func)
    return click.option(
        "--hw",
        "hardware",
        required=True,
        metavar="FILE|NAME",
        help=HW_HELP,
        shell_complete=complete_hardware,
    )(func)


@click.group(
    cls=OneValueGroup,
    invoke_without_command=True,
    context_settings={"help_option_names": ["-h", "--help"]},
)
@click.option(
    "--hw", "hardware", metavar="FILE|NAME", help=HW_HELP, shell_complete=complete_hardware
)
@click.option(
    "--profile", "profile", metavar="FILE|NAME", help=PROFILE_HELP, shell_complete=complete_profile
)
@click.option(
    "-o",
    "--output",
    type=PATH,
    metavar="DIR",
    help="Bundle directory to write (created, or replaced atomically if it is a goldtune bundle). "
    "Default: out/<hardware>-<profile>/.",
)
@os_option
@cloud_init_options
@click.option(
    "--catalog",
    "site_catalog",
    type=PATH,
    metavar="DIR",
    help="A site catalog read beside the shipped hardware_db/, for every command: gpus/, nics/, "
    "cpus/, systems/ and distros/ as there, same schema; its entries add models, systems and "
    "distributions (a distribution table may start from a shipped one with extends:), never "
    f"redefine a shipped one. Default: ${SITE_CATALOG_ENV}, else none.",
)
@click.version_option(__version__, prog_name=TOOL)
@click.pass_context
@reports_errors
def main(
    ctx: click.Context,
    hardware: str | None,
    profile: str | None,
    output: Path | None,
    os_name: str | None,
    cloud_init_reboot: bool,
    cloud_init_parts: tuple[Path, ...],
    require_fit: tuple[str, ...],
    site_catalog: Path | None,
) -> None:
    """Generate a golden-image tuning bundle for a GPU server.

    \b
    Main job:
      gen --hw dgx-h100 --profile inference -o out/dgx-h100-inference
    reads the hardware description and the workload profile, decides every setting with a rule
    that records why, and writes a bundle: a root-filesystem overlay (sysctl.d, limits.d,
    system.conf.d, GRUB drop-in, modprobe.d, tuned profile, udev rules, boot units), install.sh,
    cloud-init user-data, manifest.json and EXPLAIN.md.

    Exit status: 0 done, 1 failure, 2 bad input (nothing written).
    """
    if site_catalog is not None:
        use_site_catalog(site_catalog)
    if ctx.invoked_subcommand is not None:
        if hardware or profile or output or os_name:
            raise click.UsageError(
                "--hw/--profile/--os/-o go after the command name, e.g. `gen explain --hw …`"
            )
        if cloud_init_reboot or cloud_init_parts or require_fit:
            raise click.UsageError(
                "--cloud-init-reboot/--cloud-init-part/--require-fit go after the command name "
                "(gen matrix takes them)"
            )
        return
    if not hardware or not profile:
        click.echo(ctx.get_help())
        if hardware or profile:
            click.echo("\nerror: the main job needs both --hw and --profile", err=True)
            sys.exit(2)
        return
    with CollectorPaused():
        from generator.commands.generate import run_generate

        run_generate(
            hardware, profile, output, os_name, cloud_init_reboot, cloud_init_parts, require_fit
        )


@main.command(cls=JsonUsageErrors)
@hw_and_profile
@os_option
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print one JSON object (warnings included) instead of lines; on bad input an object "
    'with "ok": false and the problems, beside one line a problem on stderr, exit status 2.',
)
@reports_errors
def check(hardware: str, profile: str, os_name: str | None, as_json: bool) -> None:
    """Validate a hardware description and a profile, and the references between them."""
    from generator.commands.check import run_check

    run_check(hardware, profile, os_name, as_json)


@main.command(name="list")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of tables.")
@reports_errors
def list_command(as_json: bool) -> None:
    """Show the shipped systems, GPUs, NICs, CPUs and profiles."""
    from generator.commands.inventory import run_list

    run_list(as_json)


@main.command()
@click.argument("which", type=click.Choice(["hardware", "profile"]), default="hardware")
@reports_errors
def schema(which: str) -> None:
    """Print the JSON Schema of the hardware or profile format (for editors' YAML servers)."""
    from generator.commands.schema import input_schema

    click.echo(json.dumps(input_schema(which), indent=2, sort_keys=True))


@main.command()
@hw_and_profile
@click.option(
    "--key", "keys", multiple=True, help="Only settings whose key contains this text (repeatable)."
)
@click.option(
    "--kind",
    "kinds",
    multiple=True,
    type=click.Choice(SETTING_KINDS),
    help="Only settings of this kind (repeatable).",
)
@click.option(
    "--json", "as_json", is_flag=True, help="Print the stable JSON array instead of a table."
)
@os_option
@reports_errors
def explain(
    hardware: str,
    profile: str,
    keys: tuple[str, ...],
    kinds: tuple[str, ...],
    as_json: bool,
    os_name: str | None,
) -> None:
    """Print every planned setting with its value, the rule that set it and why.

    Then the notes: what a rule decided not to set. --kind keeps the notes of the rules that
    set a setting of that kind; --key keeps the notes whose text contains the key text. With
    both, a note must pass both, as a setting must.
    """
    from generator.commands.explain import run_explain

    run_explain(hardware, profile, keys, kinds, as_json, os_name)


@main.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@reports_errors
def rules(as_json: bool) -> None:
    """List every rule: id, area and what it decides."""
    from generator.commands.rules import run_rules

    run_rules(as_json)


@main.command()
@click.argument("bundles", nargs=-1, type=PATH)
@click.option(
    "--hw",
    "hardware",
    multiple=True,
    metavar="FILE|NAME",
    help="Hardware side (give twice to compare two machines).",
    shell_complete=complete_hardware,
)
@click.option(
    "--profile",
    "profiles",
    multiple=True,
    metavar="FILE|NAME",
    help="Profile side (give twice to compare two profiles).",
    shell_complete=complete_profile,
)
@click.option(
    "--os",
    "systems",
    multiple=True,
    metavar="DISTRO",
    help="Target distribution of both sides (give twice to compare two distributions).",
)
@click.option(
    "--format",
    "output_format",
    type=click.Choice(["terminal", "markdown", "json"]),
    default="terminal",
    show_default=True,
    help="terminal: a table (coloured on a terminal); markdown: a pull-request comment; "
    "json: for scripts.",
)
@diff_claims_option
@reports_errors
def diff(
    bundles: tuple[Path, ...],
    hardware: tuple[str, ...],
    profiles: tuple[str, ...],
    systems: tuple[str, ...],
    output_format: str,
    show_claims: bool,
) -> None:
    """Show what changes on the machine between two bundles or two plans.

    \b
      gen diff out/dgx-a100-training out/dgx-h100-training
      gen diff --hw dgx-a100 --hw dgx-h100 --profile training
      gen diff --hw dgx-h100 --profile inference --profile training
      gen diff --hw dgx-h100 --profile inference --os debian-12 --os ubuntu-24.04

    First what changes on the node (settings added, removed, changed, by kind), then per
    setting: added (+), removed (-), changed (~, old -> new) with the rule and reason of the
    new value; the preflight claims (what the preflight unit expects of the hardware) apart,
    or only counted with --no-claims. Files that changed without a setting change get a
    unified text diff. A bundle whose files do not match its manifest is reported. Nothing is
    written.

    NICs renamed between the sides (a new generation: ib0 -> ibp24s0) are paired by role and
    position in the hardware file, the n-th renamed NIC of a role with the n-th; a setting keyed
    on one shows as changed, "ib0 → ibp24s0 (compute NIC 1)". A NIC named on both sides is
    itself.

    Two bundle sets (gen set): members paired by name and diffed as two bundles, one only in
    one set added or removed, the sets' kernel-arguments reboot and common part compared.

    Exit status like diff(1): 0 same, 1 different, 2 trouble.
    """
    from generator.commands.diff_set import run_set_diff, two_sets

    if two_sets(bundles) and not (hardware or profiles or systems):
        sys.exit(run_set_diff(bundles[0], bundles[1], output_format, show_claims))
    from generator.commands.diff import run_diff

    # A click.UsageError raised inside exits 2 by itself (its exit_code), like bad input.
    sys.exit(run_diff(bundles, hardware, profiles, output_format, systems, show_claims))


@main.command()
@click.option(
    "--hw",
    "hardware",
    multiple=True,
    metavar="FILE|NAME",
    help="A hardware side (repeatable).",
    shell_complete=complete_hardware,
)
@click.option(
    "--profile",
    "profiles",
    multiple=True,
    metavar="FILE|NAME",
    help="A profile (repeatable).",
    shell_complete=complete_profile,
)
@click.option("--all-systems", is_flag=True, help="Every shipped reference system.")
@click.option("--all-profiles", is_flag=True, help="Every shipped profile.")
@click.option(
    "-o",
    "--output",
    type=PATH,
    default=Path("out"),
    show_default=True,
    metavar="DIR",
    help="Root directory; each bundle goes to DIR/<hardware>-<profile>/ (-<distro> with --os).",
)
@click.option(
    "-j",
    "--jobs",
    type=click.IntRange(min=1),
    default=None,
    metavar="N",
    help="Worker processes writing bundles (with --check, regenerating them)  [default: the "
    "CPUs this process may use]",
)
@click.option(
    "--check",
    "check_dir",
    type=PATH,
    metavar="DIR",
    help="Write nothing: regenerate in memory and compare with the bundles committed in DIR "
    "(a Markdown report for a pull request on stdout).",
)
@click.option("--json", "as_json", is_flag=True, help="With --check: print JSON instead.")
@report_option
@matrix_os_option
@cloud_init_options
@click.pass_context
@reports_errors
def matrix(
    ctx: click.Context,
    hardware: tuple[str, ...],
    profiles: tuple[str, ...],
    all_systems: bool,
    all_profiles: bool,
    output: Path,
    jobs: int | None,
    check_dir: Path | None,
    as_json: bool,
    report_file: Path | None,
    os_names: tuple[str, ...],
    cloud_init_reboot: bool,
    cloud_init_parts: tuple[Path, ...],
    require_fit: tuple[str, ...],
) -> None:
    """Generate every hardware x profile combination in one call.

    \b
      gen matrix --hw dgx-a100 --hw dgx-h100 --profile training -o out/
      gen matrix --all-systems --all-profiles
      gen matrix --hw dgx-h100 --profile training --os ubuntu-24.04 --os rhel-9
      gen matrix --all-systems --profile inference --os all

    Each bundle is written atomically; a failed combination does not stop the others, and one
    that would write the same directory as an earlier one fails instead of overwriting it.
    Prints a summary table; exit status 1 when any combination failed. A progress bar goes to
    stderr while it is a terminal.

    \b
      gen matrix --hw fleet/hardware/a.yaml --profile training --check fleet/bundles

    --check DIR (a fleet repository's CI gate): exit 0 when every bundle in DIR is what this
    goldtune writes, 1 naming every stale, missing or extra bundle with its diff, 2 on bad
    input. A bundle that differs only in the goldtune version it records is reported as
    version-only and does not fail the gate. --report FILE writes the whole report there; stdout
    then gets a bounded summary naming every bundle that is not current.
    """
    # A click.UsageError raised here or inside exits 2 by itself (its exit_code), like bad input.
    if check_dir is None and (as_json or report_file):
        raise click.UsageError("--json and --report go with --check")
    output_given = ctx.get_parameter_source("output") is not click.core.ParameterSource.DEFAULT
    if check_dir is not None and output_given:
        raise click.UsageError("--check DIR writes nothing: leave -o out")
    from generator.commands.matrix import MatrixRequest, run_matrix

    request = MatrixRequest(
        hardware=hardware,
        profiles=profiles,
        all_systems=all_systems,
        all_profiles=all_profiles,
        jobs=jobs,
        os_names=os_names,
        cloud_init_reboot=cloud_init_reboot,
        cloud_init_parts=cloud_init_parts,
        require_fit=require_fit,
    )
    if check_dir is None:
        sys.exit(run_matrix(request, output))
    from generator.commands.fleet_check import run_matrix_check

    sys.exit(run_matrix_check(request, check_dir, as_json, report_file))


@main.command()
@click.option(
    "-o",
    "--output",
    type=PATH,
    metavar="FILE",
    help="Write to FILE (replaced atomically) instead of standard output.",
)
@click.option(
    "--root",
    "root",
    type=PATH,
    metavar="DIR",
    help="Describe the capture unpacked at DIR instead of this machine.",
)
@click.option(
    "--capture",
    is_flag=True,
    help="Print the POSIX sh script that captures what --root reads into a tarball.",
)
@reports_errors
def detect(output: Path | None, root: Path | None, capture: bool) -> None:
    """Describe this machine (or a captured tree) as a hardware YAML for `gen check`.

    \b
      gen detect -o my-box.yaml                 # this machine
      gen detect --capture > capture.sh         # on a build host: sh capture.sh box.tar.gz
      gen detect --root DIR -o my-box.yaml      # the tarball unpacked at DIR

    Every value names its source in a comment; a NIC's role is marked GUESS. Hardware the
    catalog lacks is written by PCI id and reported as a warning. GPU facts come from NVML
    (pip install 'goldtune[detect]'), else nvidia-smi, else PCI ids alone.
    """
    from generator.commands.detect import run_detect

    run_detect(output, root, capture)


@main.command()
@click.argument("bundle", type=PATH, metavar="BUNDLE")
@click.option(
    "--root",
    "root",
    type=PATH,
    metavar="DIR",
    help="Check the image mounted at DIR (files, units, boot arguments) instead of this machine.",
)
@click.option(
    "--snapshot",
    "snapshot",
    type=PATH,
    metavar="FILE",
    help=f"Check the output of the bundle's collector ({COLLECT_SCRIPT} {COLLECT_DATA}), "
    "saved anywhere; a serial console log around it is fine.",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@click.option(
    "--strict",
    is_flag=True,
    help="An acceptance gate: also fail (exit 1, a line each) on what the bundle's require "
    "lines and its hardware file say must be there and is not: units, commands, the NVIDIA "
    "driver, the GPUs.",
)
@click.option(
    "--format",
    "output_format",
    type=click.Choice(["table", "json", "prometheus"]),
    default="table",
    show_default=True,
    help="prometheus: node_exporter's textfile format (verdict counts, the bundle's digest).",
)
@reports_errors
@provenance_check
def verify(
    bundle: Path,
    root: Path | None,
    snapshot: Path | None,
    as_json: bool,
    strict: bool,
    output_format: str,
) -> None:
    """Compare this machine, a mounted image or a collected snapshot with a bundle.

    \b
      gen verify out/dgx-h100-inference                 # this machine, live
      gen verify out/dgx-h100-inference --root /mnt/img # a mounted image
      gen verify out/dgx-h100-inference --snapshot state.txt
      gen verify out/dgx-h100-inference --format prometheus > goldtune.prom

    Per setting: expected, actual and a verdict (ok, differs, missing, not-applicable with the
    reason; warning: reported, not failed, such as an application's Xid). Run it as root on a
    live machine: limits are measured through a PAM session.

    Without --strict an absent unit or driver is not applicable (a build host, a VM); with it,
    what install.list requires (require lines) and the hardware file's NVIDIA GPUs (the driver
    loaded and every GPU listed; in an image, the driver's module installed) must be there.

    Exit status: 0 every applicable setting is in effect, 1 something differs or is missing
    (or, with --strict, a requirement is not met), 2 bad input.
    """
    from generator.verify.run import run_verify

    if as_json and output_format not in ("table", "json"):
        raise InputError(Problem("gen verify", "--json", f"excludes --format {output_format}"))
    xids = shipped_xid_table if root is None else None  # an image has no kernel log to class
    sys.exit(
        run_verify(
            bundle,
            root=root,
            snapshot=snapshot,
            as_json=as_json,
            xids=xids,
            strict=strict,
            output_format=output_format,
        )
    )


def shipped_xid_table() -> dict[int, Any]:
    """hardware_db/health/xids.yaml, validated: imported only for a snapshot with Xid events."""
    from generator.inputs.xids import load_xid_table

    return load_xid_table()


@main.command(help=SIGN_HELP)
@sign_options
@reports_errors
def sign(bundle: Path, key: Path, output: Path | None) -> None:
    run_sign(bundle, key, output)


@main.command()
@click.argument("bundle", type=PATH, metavar="BUNDLE")
@click.option("--deb", "deb", is_flag=True, help="Build a .deb with dpkg-deb.")
@click.option("--rpm", "rpm", is_flag=True, help="Build an .rpm with rpmbuild.")
@click.option(
    "-o",
    "--output",
    type=PATH,
    default=Path("."),
    show_default=True,
    metavar="DIR",
    help="Directory the packages are written to (created).",
)
@reports_errors
def package(bundle: Path, deb: bool, rpm: bool, output: Path) -> None:
    """Build a .deb and/or an .rpm of a bundle for an image pipeline.

    \b
      gen package out/dgx-h100-inference --deb --rpm -o dist/

    The package holds the overlay's files at their paths on the machine and the bundle in
    /usr/share/goldtune/bundles/<package>/; its postinst (%post) runs the bundle's install.sh.
    Name goldtune-<hardware>-<profile>, version <goldtune version>+<manifest hash>; no
    dependencies (which packages hold the NVIDIA driver differs per repository).

    Exit status: 0 built, 1 a builder is missing or failed, 2 bad input (nothing written).
    """
    from generator.commands.package import package_bundle

    formats = [name for name, chosen in (("deb", deb), ("rpm", rpm)) if chosen]
    if not formats:
        raise click.UsageError("name at least one of --deb and --rpm")
    for path in package_bundle(bundle, formats, output):
        click.echo(f"wrote {path}")


main.add_command(set_command)
