"""`gen verify`: is a bundle really in effect on a machine, an image, or in a collected snapshot?

Three sources, one comparison per planned setting (expected, actual, verdict):

- ``gen verify BUNDLE``: this machine, now. This package's own copy of the fixed collector (the
  same bytes every bundle ships, so no code from the bundle runs) is run here with ``sh`` on the
  bundle's collector data file, validated first; run it as root so that limits can be measured
  through a PAM session.
- ``gen verify BUNDLE --snapshot FILE``: the output of the collector, saved anywhere (a serial
  console log with other lines around it is fine). Golden images need no Python for this.
- ``gen verify BUNDLE --root DIR``: a mounted image. Files installed with the bundle's content and
  mode, the effective configuration of each consumer read offline (later drop-ins win as they do
  on the machine), units enabled or masked, boot arguments in the GRUB configuration.

Formats: a table (the default), ``--json`` (``--format json``), and ``--format prometheus``,
node_exporter's textfile format (generator/verify/prometheus.py), whatever the source.

Verdicts: ok, differs, missing, not-applicable (always with the reason: no GPU, no such interface,
tuned not installed…), warning (reported, not failed: an application's Xid). Live and snapshot
checks add the health of the boot (system state, failed units, the bundle's own units,
configuration warnings in the journal, NVIDIA Xid events classed by ``hardware_db/health/
xids.yaml``, which the command passes in). Exit status 0 when every applicable check is ok or a
warning, 1 when one differs or is missing, 2 on bad input.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from generator.bundle.bundle_set import chosen_member, is_set, member_of_snapshot
from generator.bundle.read import MAX_BUNDLE_FILE_BYTES, Bundle, check_intact, read_bundle
from generator.errors import InputError, Problem
from generator.foreign import read_beneath, read_foreign
from generator.model.collect_data import check_collect_data
from generator.model.layout import COLLECT_DATA, COLLECT_SCRIPT, PLAN_FILE, SCRIPTS_DIR, in_overlay
from generator.model.planio import content_digest
from generator.model.probes import Section
from generator.model.xids import XidTable
from generator.paths import templates_dir
from generator.table import format_table, table_width
from generator.textsafe import printable
from generator.verify.health import boot_timing, check_health, xid_events
from generator.verify.live import check_settings
from generator.verify.preflight import Mismatch, PreflightResult
from generator.verify.snapshot import parse_snapshot
from generator.verify.verdicts import Check, Verdict

if TYPE_CHECKING:  # each imported where its option asks for it: most runs judge a snapshot
    from generator.verify.prometheus import BundleIdentity, Preflight
    from generator.verify.strict import StrictFailure

COLLECT_TIMEOUT_S = 300
# A collector's output is tens of KiB; a console log of many boots around it a few MiB.
MAX_SNAPSHOT_BYTES = 64 * 1024 * 1024
CELL_WIDTH = 60


COLLECT_DATA_LIMIT = 1 << 20  # bytes; a plan's collector data is a few kB


def collector_script() -> Path:
    """The package's own fixed collector: byte for byte the one every bundle ships."""
    return templates_dir() / SCRIPTS_DIR / COLLECT_SCRIPT.rsplit("/", 1)[-1]


def read_collect_data(bundle: Bundle) -> str:
    """The bundle's collector data, validated as the collector would (InputError otherwise)."""
    path = bundle.root / in_overlay(COLLECT_DATA)
    # No link below the bundle is followed, only a regular file is read, up to the limit.
    raw = read_beneath(bundle.root, in_overlay(COLLECT_DATA), COLLECT_DATA_LIMIT)
    try:
        text = raw.decode("ascii")
    except UnicodeDecodeError:
        raise InputError(Problem(str(path), "", "not ASCII text")) from None
    check_collect_data(text, str(path))
    return text


def collect_here(bundle: Bundle) -> str:
    """Run the collector on this machine with the bundle's data and return what it printed.

    It runs as root here, so the bundle is first held to its manifest (as `gen diff` and `gen
    package` hold it): a collect.conf or plan.json changed after generation is refused."""
    import subprocess  # only here: a snapshot's verify runs no process
    import tempfile  # (nor shutil and random, which tempfile imports)

    check_intact(read_bundle(bundle.root))
    data = read_collect_data(bundle)
    with tempfile.TemporaryDirectory(prefix="gen-verify-") as scratch:
        data_file = Path(scratch) / "collect.conf"  # the validated copy, not the bundle's file
        data_file.write_text(data, encoding="ascii")
        try:
            done = subprocess.run(
                ["sh", str(collector_script()), str(data_file)],
                capture_output=True,
                timeout=COLLECT_TIMEOUT_S,
                check=False,
                stdin=subprocess.DEVNULL,
            )
        except (OSError, subprocess.TimeoutExpired) as error:
            raise InputError(Problem("collector", "", f"could not run here: {error}")) from None
    # Bytes, decoded as a saved snapshot is: a hostname or a sysfs value that is not UTF-8 is
    # a value to report (U+FFFD), not a decoding error.
    return done.stdout.decode("utf-8", errors="replace")


def read_snapshot(path: Path) -> str:
    """A saved snapshot: a regular file of at most MAX_SNAPSHOT_BYTES (no FIFO, no /dev/zero)."""
    return read_foreign(path, MAX_SNAPSHOT_BYTES).decode("utf-8", errors="replace")


def verify_checks(
    bundle: Bundle,
    root: Path | None,
    snapshot: Path | None,
    xids: Callable[[], XidTable] | None = None,
    strict: bool = False,
) -> tuple[list[Check], dict[str, Any]]:
    """Every check for one source, and what the report says about that source. With
    ``strict``, ``source["strict"]`` holds the strict failures (generator/verify/strict.py).
    ``xids`` loads the table that classes the snapshot's Xid events, called only when it has
    some (loading and validating the table was two thirds of a verify that had none)."""
    if root is not None:
        if not root.is_dir():
            raise InputError(
                Problem(str(root), "", "not a directory", hint="the mounted image's root")
            )
        source: dict[str, Any] = {"source": "root", "root": str(root)}
        if strict:
            from generator.verify.strict import root_failures

            source["strict"] = root_failures(bundle, root)
        # imported here: the image's readers (YAML, TOML) are not needed to judge a snapshot
        from generator.verify.image import check_root

        return check_root(bundle, root), source
    text = read_snapshot(snapshot) if snapshot is not None else collect_here(bundle)
    parsed = parse_snapshot(text, str(snapshot) if snapshot else "the collector's output")
    source = {"source": "snapshot", "snapshot": str(snapshot)} if snapshot else {"source": "live"}
    source["host"] = parsed.value(Section.META, "hostname") or "?"
    source["kernel"] = parsed.value(Section.META, "kernel") or "?"
    source["boot"] = boot_timing(parsed)
    if strict:  # live: a required command is looked up on this machine, as install.sh would
        from generator.verify.imagefs import Image
        from generator.verify.strict import snapshot_failures

        source["strict"] = snapshot_failures(bundle, parsed, None if snapshot else Image(Path("/")))
    table = xids() if xids is not None and xid_events(parsed) else {}
    return check_settings(bundle, parsed) + check_health(bundle, parsed, table), source


def preflight_of(checks: list[Check]) -> PreflightResult | None:
    """The boot-time preflight's result as its checks (generator/verify/preflight.py) judged it:
    None when it was not judged here (no unit, no result, an image)."""
    judged = [
        c for c in checks if c.kind == "preflight" and c.verdict in (Verdict.OK, Verdict.DIFFERS)
    ]
    if not judged:
        return None
    mismatches = tuple(
        Mismatch(c.key, c.expected, c.actual, ()) for c in judged if c.verdict == Verdict.DIFFERS
    )
    return PreflightResult("mismatch" if mismatches else "ok", mismatches)


def summary(checks: list[Check]) -> dict[str, int]:
    return {str(verdict): sum(1 for c in checks if c.verdict == verdict) for verdict in Verdict}


def exit_status(checks: list[Check], failures: Sequence[StrictFailure] = ()) -> int:
    return 1 if failures or any(check.verdict.fails() for check in checks) else 0


def cell(text: str) -> str:
    """One table cell: one line, control characters of the snapshot or image escaped, cut short."""
    text = printable(" ".join(text.split()))
    return text if len(text) <= CELL_WIDTH else text[: CELL_WIDTH - 1] + "…"


def format_report(bundle: Bundle, checks: list[Check], source: dict[str, Any]) -> str:
    rows = [
        [str(c.verdict), c.kind, cell(c.key), cell(c.expected), cell(c.actual), cell(c.reason)]
        for c in checks
    ]
    counts = summary(checks)
    where = source.get("root") or source.get("snapshot") or "this machine"
    headers = ["VERDICT", "KIND", "KEY", "EXPECTED", "ACTUAL", "NOTE"]
    lines = [format_table(headers, rows, width=table_width()), ""]
    boot = source.get("boot")
    if boot and boot["units"]:
        per_unit = ", ".join(
            f"{unit} {s:.2f} s" for unit, s in boot["units"].items() if s is not None
        )
        total = f"total {boot['units_total_s']:.2f} s"
        lines.append(printable(f"bundle units at boot: {per_unit} ({total}); {boot['startup']}"))
    lines.append(
        f"verify {printable(bundle.plan.hardware_name)} / {printable(bundle.plan.profile_name)} "
        f"against {printable(str(where))}: "
        f"{counts['ok']} ok, {counts['differs']} differ, {counts['missing']} missing, "
        f"{counts['not-applicable']} not applicable"
        + (f", {counts['not-judged']} not judged" if counts["not-judged"] else "")
        + (f", {counts['warning']} warning" if counts["warning"] else "")
        + ("s" if counts["warning"] > 1 else "")
    )
    if "strict" in source:
        failures: list[StrictFailure] = source["strict"]
        lines += [printable(failure.line()) for failure in failures]
        lines.append(
            f"strict: {len(failures)} requirement{'' if len(failures) == 1 else 's'} "
            "of the bundle and its hardware file not met"
            if failures
            else "strict: every requirement of the bundle and its hardware file is met"
        )
    return "\n".join(lines)


def report_json(bundle: Bundle, checks: list[Check], source: dict[str, Any]) -> str:
    failures: list[StrictFailure] = source.get("strict", [])
    data = {
        "bundle": str(bundle.root),
        "hardware": bundle.plan.hardware_name,
        "profile": bundle.plan.profile_name,
        **source,
        "summary": summary(checks),
        "status": "ok" if exit_status(checks, failures) == 0 else "differs",
        "checks": [check.as_json() for check in checks],
    }
    if "strict" in source:
        data["strict"] = [failure.as_json() for failure in failures]
    return json.dumps(data, indent=2, sort_keys=True)


def bundle_identity(bundle: Bundle) -> BundleIdentity:
    """Name, inputs, version and content digest of a bundle, from the plan.json it holds."""
    from generator.verify.prometheus import BundleIdentity

    raw = read_beneath(bundle.root, PLAN_FILE, MAX_BUNDLE_FILE_BYTES)
    version = json.loads(raw).get("version")  # read_bundle has parsed it already
    plan = bundle.plan
    return BundleIdentity(
        bundle=f"{plan.hardware_name}-{plan.profile_name}",
        hardware=plan.hardware_name,
        profile=plan.profile_name,
        version=version if isinstance(version, str) else "?",
        digest=content_digest(raw),
    )


FORMATS = ("table", "json", "prometheus")


def run_verify(
    bundle_dir: Path,
    root: Path | None = None,
    snapshot: Path | None = None,
    as_json: bool = False,
    xids: Callable[[], XidTable] | None = None,
    strict: bool = False,
    output_format: str = "table",
    preflight: Preflight | None = None,
) -> int:
    """`gen verify`: print the report and return the exit status (0 ok, 1 something differs).

    ``xids`` loads the table that classes the Xid events of the snapshot, when it has some;
    without it every Xid is unknown and fails.
    ``strict``: also 1 when something the bundle or its hardware file requires is not there.
    ``as_json`` is ``output_format="json"``. ``preflight``: the boot-time preflight's result,
    printed by the prometheus format."""
    if root is not None and snapshot is not None:
        raise InputError(Problem("gen verify", "", "--root and --snapshot exclude each other"))
    if is_set(bundle_dir) and snapshot is not None:  # the member whose collector took it
        label = parse_snapshot(read_snapshot(snapshot), str(snapshot)).value(Section.META, "bundle")
        bundle_dir = member_of_snapshot(bundle_dir, label, snapshot)
    elif is_set(bundle_dir):  # the member the node chose (its selector's record)
        bundle_dir = chosen_member(bundle_dir, root)
    bundle = read_bundle(bundle_dir, manifest_required=False)
    checks, source = verify_checks(bundle, root, snapshot, xids, strict)
    chosen = "json" if as_json else output_format
    if chosen == "prometheus":
        from generator.verify.prometheus import render_prometheus

        found = preflight if preflight is not None else preflight_of(checks)
        click.echo(render_prometheus(bundle_identity(bundle), checks, found), nl=False)
    elif chosen == "json":
        click.echo(report_json(bundle, checks, source))
    else:
        click.echo(format_report(bundle, checks, source))
    return exit_status(checks, source.get("strict", []))
