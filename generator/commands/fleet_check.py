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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import click

from generator import TOOL, __version__
from generator.bundle.bundle_set import is_set
from generator.bundle.equal import differing_paths
from generator.bundle.read import (
    Bundle,
    check_intact,
    parse_bundle_json,
    parse_manifest,
    read_bundle,
    read_bundle_file,
)
from generator.commands.diff import Difference, Excerpt, bundle_difference
from generator.commands.diff import format_markdown as diff_markdown
from generator.commands.generate import cloud_init_options
from generator.commands.matrix import (
    Combination,
    MatrixRequest,
    default_jobs,
    in_batches,
    matrix_names,
    plan_combinations,
    run_with_progress,
    target_distros,
)
from generator.commands.terminal import progress_on_stderr, stream_is_terminal
from generator.errors import GoldtuneError, InputError, Problem
from generator.inputs.catalog import load_catalog, site_catalog_dir
from generator.inputs.load import Inputs
from generator.inputs.profile import profile_files
from generator.model.layout import MANIFEST
from generator.model.setting import Plan
from generator.paths import profiles_dir
from generator.plan.build import build_plan
from generator.render.cloudinit import CloudInitOptions
from generator.render.manifest import MANIFEST_FORMAT
from generator.render.outputs import RenderedFiles
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


@dataclass(frozen=True)
class RenderedBundle(Bundle):
    """A bundle regenerated in memory, read through the same interface as one on disk."""

    contents: RenderedFiles = field(default_factory=dict)

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
    return {path: bundle.data(path) for path in [*bundle.entries, MANIFEST]}


def hand_edited(name: str, old: Bundle) -> BundleState | None:
    """Stale, naming them, when the bundle's files are not exactly its manifest's; else None."""
    try:
        check_intact(old)
    except InputError as error:
        files = ", ".join(p.source.rsplit("/", 1)[-1] for p in error.problems)
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
    if version != __version__ and not differing_paths(old, regenerated):
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


def check_one(combination: Combination, cloud_init: CloudInitOptions | None = None) -> BundleState:
    """Judge one combination's directory: by its manifest where that records these inputs and
    this goldtune (``made_from``), else by regenerating it in memory (with gen's cloud-init
    options, as it was written) and comparing."""
    inputs, target = combination.inputs, combination.target
    assert inputs is not None  # input errors are reported before any comparison
    old = committed_bundle(target)
    if isinstance(old, Bundle) and made_from(old, inputs, cloud_init or CloudInitOptions()):
        return hand_edited(target.name, old) or BundleState(target.name, "current")
    plan = build_plan(inputs.facts, inputs.profile)._replace(inputs=inputs.digests)
    files = render_bundle(plan, cloud_init)
    return old if isinstance(old, BundleState) else compare(target.name, old, plan, files)


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
        and raw == (json.dumps(manifest, indent=2, sort_keys=True) + "\n").encode("utf-8")
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
    """Every entry of DIR that no combination writes (links listed, never followed)."""
    with os.scandir(root) as entries:
        names = sorted(entry.name for entry in entries)
    return [
        BundleState(printable(name), "extra", "no hardware x profile (x --os) writes it")
        for name in names
        if name not in expected and not name.startswith(".")
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
    combinations: list[Combination], jobs: int = 1, cloud_init: CloudInitOptions | None = None
) -> Iterator[BundleState]:
    """One state per combination, in order, regenerated in ``jobs`` workers as `gen matrix`
    writes them; a failure to render is the caller's input."""
    results = in_batches(combinations, jobs, functools.partial(check_batch, cloud_init=cloud_init))
    for combination, result in zip(combinations, results, strict=True):
        if isinstance(result, str):
            where = f"{combination.hardware} x {combination.profile}"
            raise InputError(Problem(where, "", result))
        yield result


def check_batch(
    combinations: list[Combination], cloud_init: CloudInitOptions | None = None
) -> list[BundleState | str]:
    """Each combination's state, or the text of the error that stopped its rendering (what a
    worker hands back: text, not the exception)."""
    results: list[BundleState | str] = []
    for combination in combinations:
        try:
            results.append(check_one(combination, cloud_init))
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


def format_report(root: Path, states: list[BundleState]) -> str:
    """Markdown a pull-request comment can carry: a table, then each stale bundle's diff. Every
    string from the committed tree is escaped for Markdown (``markdown_text``/``markdown_code``)
    and the report is bounded (``REPORT_CHARS``; each file's diff ``DIFF_EXCERPT``)."""
    counts = summary_counts(states)
    verdict = "stale" if failed(states) else "current"
    head = (
        f"## {TOOL} fleet check of {markdown_code(str(root))}: {verdict}\n\n"
        + ", ".join(f"{count} {state}" for state, count in counts.items())
        + ".\n"
    )
    blocks = [head]
    listed = [s for s in states if s.state != "current"]
    if listed:
        blocks.append("\n| Bundle | State | Detail |\n| --- | --- | --- |\n")
        blocks += [f"| {markdown_code(s.name)} | {s.state} | {_cell(s.detail)} |\n" for s in listed]
    if counts["version-only"]:
        blocks.append(
            f"\nBundles marked version-only differ only in the {TOOL} version they record; "
            "regenerate them to refresh the stamp (not a change on any machine).\n"
        )
    for state in states:
        if state.difference is not None:
            blocks.append("\n" + diff_markdown(state.difference, DIFF_EXCERPT).rstrip("\n") + "\n")
    return bounded(blocks, REPORT_CHARS)


def bounded(blocks: list[str], limit: int) -> str:
    """The blocks in order while they fit in ``limit`` characters; the first that does not and
    every later one are left out, and a note says so. Whole blocks only: a table row, a
    bundle's diff, so no code fence or ``<details>`` is left open."""
    report, used = [], 0
    for index, block in enumerate(blocks):
        if used + len(block) > limit:
            left = len(blocks) - index
            report.append(
                f"\n… truncated: {left} more parts of this report (over {limit:,} characters); "
                "`--json` lists every bundle, and stderr every one not current.\n"
            )
            break
        report.append(block)
        used += len(block)
    return "".join(report)


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


def run_matrix_check(request: MatrixRequest, root: Path, as_json: bool) -> int:
    """Regenerate in memory and compare with the bundles in ``root``; the report on stdout."""
    catalog = load_catalog()
    distros = target_distros(request.os_names, catalog)
    options = cloud_init_options(request.cloud_init_reboot, request.cloud_init_parts)
    systems, chosen = matrix_names(request, catalog)
    check_directory(root)
    combinations = plan_combinations(systems, chosen, root, catalog, distros)
    input_errors(combinations)
    checked = check_combinations(combinations, request.jobs or default_jobs(), options)
    states = run_with_progress(
        len(combinations),
        checked,
        stream_is_terminal("stderr"),
        progress_on_stderr,
        label="checking",
    )
    states += extra_entries(root, {c.target.name for c in combinations})
    if as_json:
        click.echo(json.dumps(json_report(root, states), indent=2))
    else:
        click.echo(format_report(root, states), nl=False)
    for line in describe(states):
        click.echo(f"{TOOL}: {line}", err=True)
    return 1 if failed(states) else 0
