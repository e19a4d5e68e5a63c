"""Semantic difference between two bundles or two plans: what changes on the machine.

Per setting (kind + key): added, removed or changed, with the rule and reason behind the new
value. Files whose text changed without any setting of theirs changing (a template or tool
upgrade) fall back to a unified text diff.
"""

from __future__ import annotations

import difflib
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Literal

import click

from generator.bundle.read import BundleFiles, check_intact, read_bundle
from generator.commands.terminal import stream_is_terminal
from generator.model import layout
from generator.model.kinds import KINDS, Kind
from generator.model.layout import EXPLAIN, MANIFEST, PLAN_FILE, USER_DATA_FORMS, in_overlay
from generator.model.setting import KIND_ORDER, Plan, Setting
from generator.textsafe import printable, printable_lines

# Tampered files named in the error, one line each; the rest are counted.

Status = Literal["added", "removed", "changed"]
SYMBOL = {"added": "+", "removed": "-", "changed": "~"}
COLOUR = {"added": "green", "removed": "red", "changed": "yellow"}
# Files that only restate the plan: a change in them is already a change of settings.
DERIVED_FILES = {MANIFEST, PLAN_FILE, EXPLAIN, *USER_DATA_FORMS}


@dataclass(frozen=True)
class Change:
    status: Status
    kind: str
    key: str
    old: str | None
    new: str | None
    rule: str
    reason: str


@dataclass(frozen=True)
class FileDiff:
    path: str
    diff: str


@dataclass(frozen=True)
class Difference:
    old_label: str
    new_label: str
    changes: tuple[Change, ...]
    files: tuple[FileDiff, ...] = ()
    tampered: tuple[str, ...] = field(default=())

    @property
    def same(self) -> bool:
        return not self.changes and not self.files


def diff_plans(old: Plan, new: Plan) -> tuple[Change, ...]:
    before = {s.target: s for s in old.settings}
    after = {s.target: s for s in new.settings}
    changes: list[Change] = []
    for target in sorted(before.keys() | after.keys(), key=_order):
        was, now = before.get(target), after.get(target)
        if was is not None and now is not None and was.value == now.value:
            continue
        status: Status = "added" if was is None else "removed" if now is None else "changed"
        source: Setting = now or was  # type: ignore[assignment]
        changes.append(
            Change(
                status,
                target[0],
                target[1],
                was.value if was else None,
                now.value if now else None,
                source.rule,
                source.reason,
            )
        )
    return tuple(changes) + diff_claims(old, new)


CLAIM_KIND = "claim"  # a change of the hardware file's claims (preflight.conf), not a setting
CLAIM_REASON = "a claim of the hardware file the preflight unit judges at boot"


def diff_claims(old: Plan, new: Plan) -> tuple[Change, ...]:
    """The claims whose assumed value differs (the settings made from them are changes above)."""
    before = {c.name: c.expected for c in old.claims}
    after = {c.name: c.expected for c in new.claims}
    changes: list[Change] = []
    for name in sorted(before.keys() | after.keys()):
        was, now = before.get(name), after.get(name)
        if was == now:
            continue
        status: Status = "added" if was is None else "removed" if now is None else "changed"
        changes.append(Change(status, CLAIM_KIND, name, was, now, "boot.preflight", CLAIM_REASON))
    return tuple(changes)


def _order(target: tuple[str, str]) -> tuple[int, str]:
    return (KIND_ORDER.get(target[0], 99), target[1])


# Files rendered from the whole plan: any setting change explains a change of theirs.
WHOLE_PLAN_FILES = {
    layout.INSTALL_LIST,
    *layout.USER_DATA_FORMS,
    layout.EXPLAIN,
    in_overlay(layout.COLLECT_DATA),
    in_overlay(layout.PREFLIGHT_DATA),  # the claims and the settings made from each
}


# Files that follow one kind's settings besides the file the kinds table names for it.
SIDE_FILES: dict[str, tuple[str, ...]] = {
    layout.KERNEL_CMDLINE: (Kind.KERNEL_ARG,),
    in_overlay(layout.IRQ_UDEV_FILE): (Kind.IRQ,),  # the re-pinning hook names the pinned NICs
}


def _kinds_of_file(path: str, plan: Plan) -> tuple[str, ...] | None:
    """The kinds a bundle file carries, from the kinds table (the reader needs no renderer);
    () for a file of the whole plan, None for one no setting explains (a fixed script)."""
    if path in WHOLE_PLAN_FILES:
        return ()
    if path in SIDE_FILES:
        return SIDE_FILES[path]
    kinds = tuple(
        spec.kind
        for spec in KINDS
        if path in spec.files_for(plan.profile_name, (s.key for s in plan.of_kind(spec.kind)))
        or (
            spec.applied_at_boot_by
            and path == in_overlay(layout.unit_file(spec.applied_at_boot_by))
        )
    )
    return kinds or None


def diff_files(
    old: BundleFiles, new: BundleFiles, changes: tuple[Change, ...]
) -> tuple[FileDiff, ...]:
    """Text diffs of files that changed while no setting of theirs did."""
    changed_kinds = {c.kind for c in changes}
    old_entries, new_entries = old.entries, new.entries
    diffs = []
    for path in sorted(old_entries.keys() | new_entries.keys()):
        if path in DERIVED_FILES:
            continue
        was, now = old_entries.get(path), new_entries.get(path)
        if was and now and was["sha256"] == now["sha256"] and was.get("mode") == now.get("mode"):
            continue
        kinds = _kinds_of_file(path, new.plan if now else old.plan)
        # A file rendered from the whole plan (install.sh) is explained by any setting change.
        explained_by = (
            set(kinds) if kinds else ({*KIND_ORDER, CLAIM_KIND} if kinds == () else set())
        )
        if changed_kinds & explained_by:
            continue
        before = _identity_free(old, path) if was else []
        after = _identity_free(new, path) if now else []
        if was and now and before == after and was.get("mode") == now.get("mode"):
            continue  # only the bundle's own name differs (file headers)
        text = "".join(difflib.unified_diff(before, after, f"a/{path}", f"b/{path}"))
        if not text and was and now:
            text = f"mode {was.get('mode')} -> {now.get('mode')}\n"
        diffs.append(FileDiff(path, text))
    return tuple(diffs)


def _identity_free(bundle: BundleFiles, path: str) -> list[str]:
    """The file's lines without comment lines (reasons, headers: the semantic diff covers them)
    and with the bundle's hardware/profile names replaced by placeholders."""
    text = bundle.text(path)
    for name, token in (
        (bundle.plan.hardware_name, "<hardware>"),
        (bundle.plan.profile_name, "<profile>"),
    ):
        if name:
            text = text.replace(name, token)
    lines = text.splitlines(keepends=True)
    return [
        line
        for index, line in enumerate(lines)
        if not line.lstrip().startswith("#") or (index == 0 and line.startswith("#!"))
    ]


def diff_bundles(old: BundleFiles, new: BundleFiles) -> Difference:
    """The difference of two intact bundles; a tampered one is an InputError, nothing shown."""
    check_intact(old)
    check_intact(new)
    changes = diff_plans(old.plan, new.plan)
    return Difference(str(old.root), str(new.root), changes, diff_files(old, new, changes))


def label(plan: Plan) -> str:
    target = f" on {plan.distro}" if plan.distro else ""
    return f"{plan.hardware_name}/{plan.profile_name}{target}"


def format_json(difference: Difference) -> str:
    data = {
        "old": difference.old_label,
        "new": difference.new_label,
        "same": difference.same,
        "changes": [asdict(c) for c in difference.changes],
        "files": [asdict(f) for f in difference.files],
        "tampered": list(difference.tampered),
    }
    return json.dumps(data, indent=2) + "\n"


def _shown(value: str | None) -> str:
    return "" if value is None else (value if value != "" else '""')


def format_markdown(difference: Difference) -> str:
    from generator.render.formats import md_cell

    old_label, new_label = printable(difference.old_label), printable(difference.new_label)
    lines = [f"### goldtune diff: `{old_label}` → `{new_label}`", ""]
    if difference.same:
        return "\n".join([*lines, "No change.", ""])
    counts = {s: sum(c.status == s for c in difference.changes) for s in SYMBOL}
    lines += [
        f"{counts['added']} added, {counts['removed']} removed, {counts['changed']} changed.",
        "",
    ]
    if difference.changes:
        lines += [
            "| | Kind | Key | Old | New | Rule | Why |",
            "| --- | --- | --- | --- | --- | --- | --- |",
        ]
        for c in difference.changes:
            cells = [
                SYMBOL[c.status],
                printable(c.kind),
                f"`{printable(c.key)}`",
                _code(c.old),
                _code(c.new),
                printable(c.rule),
                md_cell(printable(c.reason)),
            ]
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
    for file_diff in difference.files:
        summary = f"<details><summary>{printable(file_diff.path)} (text diff)</summary>"
        lines += [
            summary,
            "",
            "```diff",
            printable_lines(file_diff.diff.rstrip("\n")),
            "```",
            "",
            "</details>",
            "",
        ]
    return "\n".join(lines)


def _code(value: str | None) -> str:
    return "" if value is None else f"`{printable(_shown(value))}`"


def format_terminal(difference: Difference, colour: bool) -> str:
    import click

    from generator.table import format_table

    if difference.same:
        return ""

    def paint(text: str, status: str) -> str:
        return click.style(text, fg=COLOUR[status]) if colour else text

    out = [f"--- {printable(difference.old_label)}", f"+++ {printable(difference.new_label)}"]
    if difference.changes:
        rows = [
            [
                SYMBOL[c.status],
                *map(printable, (c.kind, c.key, _shown(c.old), _shown(c.new), c.rule, c.reason)),
            ]
            for c in difference.changes
        ]
        table = format_table(["", "KIND", "KEY", "OLD", "NEW", "RULE", "WHY"], rows).splitlines()
        out.append(table[0])
        out += [
            paint(line, c.status) for line, c in zip(table[1:], difference.changes, strict=True)
        ]
    for file_diff in difference.files:
        out += [
            f"text diff of {printable(file_diff.path)}:",
            printable_lines(file_diff.diff.rstrip("\n")),
        ]
    return "\n".join(out) + "\n"


def run_diff(
    bundles: tuple[Path, ...],
    hardware: tuple[str, ...],
    profiles: tuple[str, ...],
    output_format: str,
    systems: tuple[str, ...] = (),
) -> int:
    difference = compute_diff(bundles, hardware, profiles, systems)
    if output_format == "json":
        click.echo(format_json(difference), nl=False)
    elif output_format == "markdown":
        click.echo(format_markdown(difference))
    else:
        click.echo(format_terminal(difference, colour=stream_is_terminal("stdout")), nl=False)
    return 0 if difference.same else 1


def compute_diff(
    bundles: tuple[Path, ...],
    hardware: tuple[str, ...],
    profiles: tuple[str, ...],
    systems: tuple[str, ...] = (),
) -> Difference:
    """Two bundle directories, or --hw/--profile/--os sides: exactly one of them given twice."""
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
    old, new = (plan_side(hw, profile, os_name) for hw, profile, os_name in pairs)
    return Difference(label(old), label(new), diff_plans(old, new))


def plan_side(hardware: str, profile: str, os_name: str | None = None) -> Plan:
    """One side given as inputs, planned (the input models are imported here: a diff of two
    bundles never builds them)."""
    from generator.inputs.load import load_inputs
    from generator.plan.build import build_plan

    inputs = load_inputs(hardware, profile, os_name=os_name)
    return build_plan(inputs.facts, inputs.profile)
