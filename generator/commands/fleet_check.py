"""`gen matrix … --check DIR`: is every committed bundle in DIR what this goldtune writes?

A fleet repository commits the bundles of its own hardware files and profiles; CI regenerates
them in memory (nothing is written) and compares them with DIR/<hardware>-<profile>/ byte for
byte. Each expected bundle is current, stale (with the semantic diff of ``gen diff``), missing,
or differs only in the tool's version stamp (manifest.json, plan.json, EXPLAIN.md's header),
which is reported as such and does not fail the gate. Every other entry of DIR is extra.
Equal is ``generator.bundle.equal``'s, the test `gen diff` uses: a bundle the gate calls stale
never has a diff that says "No change".

The committed bundles are foreign: read with ``generator.bundle.read`` (no link followed, a
size cap, the manifest checked), and a hand-edited one is stale, never trusted.

A bundle whose manifest records what this run would make it from is judged without rendering
it (``made_from``): this goldtune's version, the digests of both input files, the hardware,
profile and distribution names, and the cloud-init options. It is then current when its files
are exactly its manifest's (``check_intact``: a hand-edited file is still stale). Everything
else a bundle depends on is this goldtune (its version): the shipped catalog, the profiles a
profile extends by name. So a run with a site catalog, or a profile that extends a file of its
own, renders every bundle, as does a manifest that is not in the form this goldtune writes.
What the shortcut cannot see is an edit of the manifest that keeps its form: a file's digest
changed together with the file, or the user-data sizes it records.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

import click

from generator import TOOL, __version__
from generator.bundle.bundle_set import is_set
from generator.bundle.equal import differing_paths
from generator.bundle.read import (
    Bundle,
    ManifestFile,
    check_intact,
    parse_bundle_json,
    parse_manifest,
    read_bundle,
    read_bundle_file,
)
from generator.commands.diff import Difference, Excerpt, bundle_difference, summary_lines
from generator.commands.diff import format_markdown as diff_markdown
from generator.commands.generate import cloud_init_options
from generator.commands.matrix import (
    NO_GATE,
    Combination,
    FitGate,
    MatrixRequest,
    default_jobs,
    in_batches,
    matrix_names,
    plan_combinations,
    run_with_progress,
    target_distros,
)
from generator.commands.terminal import progress_on_stderr, stream_is_terminal
from generator.errors import GenerationError, GoldtuneError, InputError, Problem
from generator.inputs.catalog import load_catalog, site_catalog_dir
from generator.inputs.catalog_whole import check_site_whole
from generator.inputs.load import Inputs
from generator.inputs.profile import profile_files
from generator.model.jsontext import dumps_indented
from generator.model.layout import MANIFEST, PROVENANCE
from generator.model.setting import Plan
from generator.paths import profiles_dir
from generator.plan.build import build_plan
from generator.render.budgets import check_fit
from generator.render.cloudinit import CloudInitOptions
from generator.render.manifest import MANIFEST_FORMAT
from generator.render.outputs import RenderedFiles
from generator.render.provenance import render_statement
from generator.render.render import render_bundle
from generator.textsafe import markdown_code, markdown_text, printable

State = Literal["current", "version-only", "stale", "missing", "extra"]
FAILING: frozenset[State] = frozenset({"stale", "missing", "extra"})


@dataclass(frozen=True)
class BundleState:
    name: str  # the directory's name in DIR
    state: State
    detail: str = ""  # why it is stale, or the versions of a version-only change
    difference: Difference | None = None  # the semantic diff of a stale bundle


class RenderedBundle(Bundle):
    """A bundle regenerated in memory, read through the same interface as one on disk."""

    def __init__(
        self,
        root: Path,
        plan: Plan,
        files: tuple[ManifestFile, ...],
        tool_version: str,
        contents: RenderedFiles,
    ) -> None:
        super().__init__(root, plan, files, tool_version)
        self.contents = contents

    def data(self, path: str) -> bytes:
        return self.contents[path][0]

    # Rendered by this run with its own manifest: nothing in it can differ from that manifest.
    @property
    def tampered(self) -> tuple[str, ...]:
        return ()

    @property
    def unlisted(self) -> tuple[str, ...]:
        return ()


def rendered_bundle(root: Path, plan: Plan, files: RenderedFiles) -> RenderedBundle:
    source = str(root / MANIFEST)
    manifest = parse_manifest(files[MANIFEST][0], source)
    return RenderedBundle(
        root, plan, manifest.files, tool_version=manifest.tool_version, contents=files
    )


def committed_files(bundle: Bundle) -> dict[str, bytes]:
    """The files the manifest lists, the manifest, and the provenance statement where there is
    one (a bundle of a goldtune before it has none: it gains the file, so it is stale)."""
    paths = [*bundle.entries, MANIFEST]
    if os.path.lexists(bundle.root / PROVENANCE):
        paths.append(PROVENANCE)
    return {path: bundle.data(path) for path in paths}


def hand_edited(name: str, old: Bundle) -> BundleState | None:
    """Stale, naming them, when the bundle's files are not exactly its manifest's; else None."""
    try:
        check_intact(old)
    except InputError as error:
        files = ", ".join(p.source.rstrip("/").rsplit("/", 1)[-1] for p in error.problems)
        return BundleState(name, "stale", f"files do not match its manifest.json: {files}")
    return None


def compare(name: str, old: Bundle, plan: Plan, new: RenderedFiles) -> BundleState:
    """One committed bundle against its regeneration."""
    edited = hand_edited(name, old)
    if edited is not None:
        return edited
    committed = committed_files(old)
    modes = {entry.path: entry.mode for entry in old.files}
    if committed.keys() == new.keys() and all(
        committed[path] == content and modes.get(path, mode) == mode
        for path, (content, mode) in new.items()
    ):
        return BundleState(name, "current")
    regenerated = rendered_bundle(old.root, plan, new)
    version = old.tool_version
    # The one definition of equal, shared with `gen diff` (generator.bundle.equal).
    # provenance.json restates the others' digests and the version: compared by its presence
    same_files = committed.keys() == new.keys()
    if version != __version__ and same_files and not differing_paths(old, regenerated):
        return BundleState(name, "version-only", f"{TOOL} {version} -> {__version__}")
    changed = sorted(
        path
        for path in committed.keys() | new.keys()
        if committed.get(path) != new.get(path, (b"",))[0]
    )
    difference = bundle_difference(
        old, regenerated, f"{name} (committed)", f"{name} (regenerated)", tuple(changed)
    )
    return BundleState(name, "stale", "differs in " + ", ".join(changed), difference)


def check_one(
    combination: Combination, cloud_init: CloudInitOptions | None = None, gate: FitGate = NO_GATE
) -> BundleState:
    """Judge one combination's directory: by its manifest where that records these inputs and
    this goldtune (``made_from``) and no ``gate`` (--require-fit) asks for the rendered forms'
    sizes, else by regenerating it in memory (with gen's cloud-init options, as it was written)
    and comparing; a regeneration the gate refuses is the caller's input (FitError)."""
    inputs, target = combination.inputs, combination.target
    assert inputs is not None  # input errors are reported before any comparison
    old = committed_bundle(target)
    options = cloud_init or CloudInitOptions()
    if isinstance(old, Bundle) and not gate.providers and made_from(old, inputs, options):
        edited = hand_edited(target.name, old)
        if edited is not None:
            return edited
        if sealed_as_made(old, inputs):
            return BundleState(target.name, "current")
    plan = build_plan(inputs.facts, inputs.profile)._replace(inputs=inputs.digests)
    files = render_bundle(plan, cloud_init)
    check_fit(files, options.parts, gate.part_names, gate.providers)
    return old if isinstance(old, BundleState) else compare(target.name, old, plan, files)


def sealed_as_made(old: Bundle, inputs: Inputs) -> bool:
    """Whether ``old``'s provenance.json is the statement gen writes today for its files. The
    statement carries the shipped catalog's digest, which the manifest's input digests do not:
    an edited hardware_db (a checkout not reinstalled, so the version is the same) or an edited
    statement sends the bundle to be rendered and compared, as does a bundle without one."""
    files = committed_files(old)
    statement = files.pop(PROVENANCE, None)
    if statement is None:
        return False
    return statement == render_statement(old.plan._replace(inputs=inputs.digests), files)


def committed_bundle(target: Path) -> Bundle | BundleState:
    """The bundle committed at ``target``, or its state when there is none to compare."""
    name = target.name
    if os.path.islink(target):
        return BundleState(name, "stale", "a symbolic link (not followed)")
    if not os.path.lexists(target):
        return BundleState(name, "missing", "not committed")
    try:
        return read_bundle(target)
    except InputError as error:
        return BundleState(name, "stale", printable(error.problems[0].message))


def made_from(old: Bundle, inputs: Inputs, options: CloudInitOptions) -> bool:
    """Whether ``old``'s manifest says this goldtune made it from these inputs with these
    options, and nothing else it depends on can have changed: no site catalog, and the profile
    extends only shipped profiles (the manifest has no digest of either)."""
    profile = inputs.profile_path.resolve()
    if site_catalog_dir() is not None or not extends_only_shipped(
        profile, inputs.digests["profile"]
    ):
        return False
    try:
        raw = read_bundle_file(old.root, MANIFEST)
        manifest = parse_bundle_json(raw, str(old.root / MANIFEST))
    except InputError:
        return False
    if not isinstance(manifest, dict) or not isinstance(manifest.get("user_data"), dict):
        return False
    distro = inputs.facts.os.distro
    recorded = {
        key: manifest.get(key) for key in ("format", "tool", "hardware", "profile", "inputs")
    }
    user_data = manifest["user_data"]
    return (
        recorded
        == {
            "format": MANIFEST_FORMAT,
            "tool": {"name": TOOL, "version": __version__},
            "hardware": inputs.facts.name,
            "profile": inputs.profile.name,
            "inputs": {role: {"sha256": digest} for role, digest in inputs.digests.items()},
        }
        and user_data.get("parts") == [hashlib.sha256(part).hexdigest() for part in options.parts]
        and user_data.get("reboot") is options.reboot
        and old.plan.hardware_name == inputs.facts.name
        and old.plan.profile_name == inputs.profile.name
        and old.plan.distro == (distro.key if distro else "")
        # the form render_manifest writes, so an edit of the manifest itself is not taken in
        and raw == (dumps_indented(manifest) + "\n").encode("utf-8")
    )


# Asked for every bundle; what a profile extends follows from its path and its bytes (``digest``)
# once the first profile it extends is a shipped one, whose own parents are shipped too.
@functools.lru_cache(maxsize=64)
def extends_only_shipped(profile: Path, digest: str) -> bool:
    """Whether every profile the profile file ``profile`` (of sha256 ``digest``) extends is a
    shipped one (this goldtune's version stands for it)."""
    shipped = profiles_dir().resolve()
    try:
        parents = profile_files(str(profile))[1:]
    except InputError:
        return False
    return all(parent.resolve().parent == shipped for parent in parents)


def extra_entries(root: Path, expected: set[str]) -> list[BundleState]:
    """Every entry of DIR that no combination writes (links listed, never followed), hidden
    ones included: a committed ``.name`` directory is as foreign to the gate as any other."""
    with os.scandir(root) as entries:
        names = sorted(entry.name for entry in entries)
    return [
        BundleState(printable(name), "extra", "no hardware x profile (x --os) writes it")
        for name in names
        if name not in expected
    ]


def input_errors(combinations: list[Combination]) -> None:
    """Bad hardware or profile files are the caller's input: exit 2, nothing compared."""
    lines = sorted({c.error for c in combinations if c.inputs is None})
    if lines:
        raise InputError([Problem(line, "", "cannot be checked") for line in lines])


def check_directory(root: Path) -> None:
    if os.path.islink(root) or not root.is_dir():
        raise InputError(Problem(str(root), "", "not a directory (the bundles to check)"))
    if is_set(root):  # its members are laid out as gen matrix writes them
        raise InputError(
            Problem(str(root), "", "is a bundle set; check its members", f"--check {root}/members")
        )


def check_combinations(
    combinations: list[Combination],
    jobs: int = 1,
    cloud_init: CloudInitOptions | None = None,
    gate: FitGate = NO_GATE,
) -> Iterator[BundleState]:
    """One state per combination, in order, regenerated in ``jobs`` workers as `gen matrix`
    writes them; a failure to render is the caller's input."""
    work = functools.partial(check_batch, cloud_init=cloud_init, gate=gate)
    results = in_batches(combinations, jobs, work)
    for combination, result in zip(combinations, results, strict=True):
        if isinstance(result, str):
            where = f"{combination.hardware} x {combination.profile}"
            raise InputError(Problem(where, "", result))
        yield result


def check_batch(
    combinations: list[Combination],
    cloud_init: CloudInitOptions | None = None,
    gate: FitGate = NO_GATE,
) -> list[BundleState | str]:
    """Each combination's state, or the text of the error that stopped its rendering (what a
    worker hands back: text, not the exception)."""
    results: list[BundleState | str] = []
    for combination in combinations:
        try:
            results.append(check_one(combination, cloud_init, gate))
        except GoldtuneError as error:
            results.append("; ".join(error.lines()))
    return results


def failed(states: list[BundleState]) -> bool:
    return any(state.state in FAILING for state in states)


def summary_counts(states: list[BundleState]) -> dict[str, int]:
    order: tuple[State, ...] = ("current", "version-only", "stale", "missing", "extra")
    return {state: sum(s.state == state for s in states) for state in order}


# GitHub refuses a comment body over 65,536 characters ("Body is too long"), and the report is
# posted as one (examples/fleet's workflow): the report stays below it, with room for a note.
REPORT_CHARS = 60_000
# Each stale bundle's text diff of one file: enough to see what changed, never the whole of a
# huge committed file (`gen diff` shows it whole).
DIFF_EXCERPT = Excerpt(lines=200, chars=8_000)
# A table cell's text (a list of a bundle's changed files can be long).
CELL_CHARS = 300


def format_report(root: Path, states: list[BundleState], whole: bool = False) -> str:
    """Markdown a pull-request comment can carry: the verdict, a table naming every bundle that
    is not current, a line per stale bundle saying what changes on its node, then each stale
    bundle's diff without the preflight claims, while they fit (``REPORT_CHARS``; each file's
    diff ``DIFF_EXCERPT``). ``whole``: every diff in full, claims included, unbounded (the
    --report file). Every string from the committed tree is escaped for Markdown
    (``markdown_text``/``markdown_code``)."""
    counts = summary_counts(states)
    verdict = "stale" if failed(states) else "current"
    head = (
        f"## {TOOL} fleet check of {markdown_code(str(root))}: {verdict}\n\n"
        + ", ".join(f"{count} {state}" for state, count in counts.items())
        + ".\n"
    )
    listed = [s for s in states if s.state != "current"]
    kept = [head, *_bundle_table(listed, None if whole else REPORT_CHARS // 2)]
    if counts["version-only"]:
        kept.append(
            f"\nBundles marked version-only differ only in the {TOOL} version they record; "
            "regenerate them to refresh the stamp (not a change on any machine).\n"
        )
    stale = [s for s in states if s.difference is not None]
    if whole:
        diffs = [
            "\n" + diff_markdown(s.difference).rstrip("\n") + "\n" for s in stale if s.difference
        ]
        return "".join(kept + diffs)
    if stale:
        kept.append("\n#### What changes on each stale bundle's node\n\n")
        kept += [
            f"- {markdown_code(s.name)}: {_node_line(s.difference)}\n"
            for s in stale
            if s.difference
        ]
    left = max(REPORT_CHARS - sum(map(len, kept)), 0)
    share = left // max(len(stale), 1)
    blocks = [_bounded_diff(s.difference, share) for s in stale if s.difference]
    return "".join(kept) + bounded(blocks, left)


def _bounded_diff(difference: Difference, share: int) -> str:
    """A stale bundle's diff for the bounded report, without the claims: whole (each file's
    text diff cut to ``DIFF_EXCERPT``) where it fits its ``share`` of the report, else its
    settings alone and a note, so one bundle's long diff never crowds out the next's."""
    block = "\n" + diff_markdown(difference, DIFF_EXCERPT, show_claims=False).rstrip("\n") + "\n"
    if len(block) <= share or not difference.files:
        return block
    settings_only = replace(difference, files=())
    count = len(difference.files)
    return (
        "\n"
        + diff_markdown(settings_only, show_claims=False).rstrip("\n")
        + f"\n\nText diffs of {count} files left out here (`--report FILE` has them).\n"
    )


def _node_line(difference: Difference) -> str:
    return " ".join(summary_lines(difference, True, markdown_text)).replace(
        ", listed apart below", ""
    )


LONG = "a row each is over the report's limit"


def _bundle_table(listed: list[BundleState], limit: int | None) -> list[str]:
    """A row per bundle that is not current; past ``limit`` characters only their names, by
    state: every stale, missing and version-only bundle (the combinations asked for), and the
    extra directories (any number, named by the committed tree) while they fit."""
    if not listed:
        return []
    rows = [f"| {markdown_code(s.name)} | {s.state} | {_cell(s.detail)} |\n" for s in listed]
    if limit is None or sum(map(len, rows)) <= limit:
        return ["\n| Bundle | State | Detail |\n| --- | --- | --- |\n", *rows]
    header = "\n| Bundle | State | Detail |\n| --- | --- | --- |\n"
    lines = [header]
    for state in dict.fromkeys(s.state for s in listed if s.state != "extra"):
        names = [markdown_code(s.name) for s in listed if s.state == state]
        lines.append(f"| {', '.join(names)} | {state} | {len(names)}, named only: {LONG} |\n")
    extra = [markdown_code(s.name) for s in listed if s.state == "extra"]
    budget, shown = limit - sum(map(len, lines)), []
    for name in extra:
        budget -= len(name) + 2
        if budget < 0:
            break
        shown.append(name)
    if extra:
        left = len(extra) - len(shown)
        more = f" and {left} more (`--json` lists them)" if left else ""
        lines.append(f"| {', '.join(shown)}{more} | extra | {len(extra)}, named only: {LONG} |\n")
    return lines


def bounded(blocks: list[str], limit: int) -> str:
    """The blocks in order while they fit in ``limit`` characters; the first that does not and
    every later one are left out, and a note says so. Whole blocks only: a bundle's diff, so no
    code fence or ``<details>`` is left open."""
    report, used = [], 0
    for index, block in enumerate(blocks):
        if used + len(block) > limit:
            left = len(blocks) - index
            report.append(
                f"\n… truncated: {left} more bundle diffs (the report's limit is "
                f"{REPORT_CHARS:,} characters); every bundle is named above, `--report FILE` "
                "writes the whole report, `--json` lists every bundle.\n"
            )
            break
        report.append(block)
        used += len(block)
    return "".join(report)


def write_report(path: Path, text: str) -> None:
    """The whole report, to a file the caller names (a new file, or one it replaces)."""
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as error:
        raise GenerationError(f"--report {path}: cannot write: {error.strerror}") from error


def _cell(text: str) -> str:
    shown = printable(text)
    return markdown_text(shown if len(shown) <= CELL_CHARS else shown[: CELL_CHARS - 1] + "…")


def describe(states: list[BundleState]) -> list[str]:
    """One line per bundle that is not current, for the terminal (stderr)."""
    return [f"{s.state}: {s.name}: {printable(s.detail)}" for s in states if s.state != "current"]


def json_report(root: Path, states: list[BundleState]) -> dict[str, Any]:
    return {
        "directory": str(root),
        "current": not failed(states),
        "bundles": [{"name": s.name, "state": s.state, "detail": s.detail} for s in states],
    }


def run_matrix_check(
    request: MatrixRequest, root: Path, as_json: bool, report_file: Path | None = None
) -> int:
    """Regenerate in memory and compare with the bundles in ``root``; the report on stdout, and
    the whole of it in ``report_file`` when given."""
    catalog = load_catalog()
    check_site_whole(catalog)  # a broken entry no combination reads still fails the gate
    distros = target_distros(request.os_names, catalog)
    options = cloud_init_options(request.cloud_init_reboot, request.cloud_init_parts)
    systems, chosen = matrix_names(request, catalog)
    check_directory(root)
    combinations = plan_combinations(systems, chosen, root, catalog, distros)
    input_errors(combinations)
    gate = FitGate(request.require_fit, request.part_names)
    checked = check_combinations(combinations, request.jobs or default_jobs(), options, gate)
    states = run_with_progress(
        len(combinations),
        checked,
        stream_is_terminal("stderr"),
        progress_on_stderr,
        label="checking",
    )
    states += extra_entries(root, {c.target.name for c in combinations})
    if report_file is not None:
        write_report(report_file, format_report(root, states, whole=True))
    if as_json:
        click.echo(json.dumps(json_report(root, states), indent=2))
    else:
        click.echo(format_report(root, states), nl=False)
    for line in describe(states):
        click.echo(f"{TOOL}: {line}", err=True)
    return 1 if failed(states) else 0
