"""Semantic difference between two bundles or two plans: what changes on the machine.

Per setting (kind + key): added, removed or changed, with the rule and reason behind the new
value. Files whose text changed without any setting of theirs changing (a template or tool
upgrade) fall back to a unified text diff.
"""

from __future__ import annotations

import difflib
import json
import textwrap
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Literal

import click

from generator.bundle.bundle_set import MEMBERS_DIR, is_set
from generator.bundle.equal import comparable, differing_paths
from generator.bundle.read import Bundle, check_intact, read_bundle
from generator.commands.diff_summary import (
    CLAIM_KIND,
    STATUSES,
    claims_summary,
    node_summary,
    split_claims,
)
from generator.commands.nicpair import NicPair, key_translator, pair_nics
from generator.commands.terminal import stream_is_terminal
from generator.errors import InputError, Problem
from generator.model import layout
from generator.model.kinds import KINDS, Kind
from generator.model.layout import EXPLAIN, MANIFEST, PLAN_FILE, USER_DATA_FORMS, in_overlay
from generator.model.setting import KIND_ORDER, Plan, Setting
from generator.table import table_width
from generator.textsafe import (
    decoded,
    markdown_code,
    markdown_fence,
    markdown_text,
    printable,
    printable_lines,
)

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
    # A setting keyed on a renamed NIC: its key on the old side (None when it was removed),
    # and the NIC's role and position ("compute NIC 1"); None and "" otherwise.
    old_key: str | None = None
    nic: str = ""

    @property
    def shown_key(self) -> str:
        """The key, and for a renamed NIC's setting the pairing: ib0 → ibp24s0 (compute NIC 1);
        a removed one says where its NIC went: ens1f1np1 (management NIC 1, now eno1)."""
        if self.old_key is not None:
            return f"{self.old_key} → {self.key} ({self.nic})"
        return f"{self.key} ({self.nic})" if self.nic else self.key


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
    nic_pairs: tuple[NicPair, ...] = ()

    @property
    def same(self) -> bool:
        return not self.changes and not self.files


def diff_plans(old: Plan, new: Plan) -> tuple[Change, ...]:
    """Per setting, paired by kind and key; a setting keyed on a NIC renamed between the two
    (``nicpair``) is paired with the one keyed on its new name."""
    translate = key_translator(pair_nics(old.nics, new.nics))
    before: dict[tuple[str, str], tuple[Setting, NicPair | None]] = {}
    for setting in old.settings:
        key, pair = translate(setting.key)
        before[(setting.kind, key)] = (setting, pair)
    after = {s.target: s for s in new.settings}
    changes: list[Change] = []
    for target in sorted(before.keys() | after.keys(), key=_order):
        was, pair = before.get(target, (None, None))
        now = after.get(target)
        if was is not None and now is not None and was.value == now.value and pair is None:
            continue
        status: Status = "added" if was is None else "removed" if now is None else "changed"
        source: Setting = now or was  # type: ignore[assignment]
        changes.append(
            Change(
                status,
                target[0],
                now.key if now else source.key,
                was.value if was else None,
                now.value if now else None,
                source.rule,
                source.reason,
                was.key if was and now and pair else None,
                _where(pair, now),
            )
        )
    return tuple(changes) + diff_claims(old, new)


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


def _where(pair: NicPair | None, now: Setting | None) -> str:
    if pair is None:
        return ""
    return pair.where if now else f"{pair.where}, now {pair.new}"


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
    # the NCCL boot step: there when an NCCL (RCCL) value is resolved at boot (issue 38)
    **{
        in_overlay(target): (Kind.NCCL, Kind.RCCL)
        for target in (layout.NCCL_SCRIPT, layout.NCCL_DATA, layout.unit_file(layout.NCCL_UNIT))
    },
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
        if path
        in spec.files_for(
            plan.profile_name,
            (s.key for s in plan.of_kind(spec.kind)),
            plan.tuned_dir,
            plan.kubelet_dir,
        )
        or (
            spec.applied_at_boot_by
            and path == in_overlay(layout.unit_file(spec.applied_at_boot_by))
        )
    )
    return kinds or None


def diff_files(old: Bundle, new: Bundle, changes: tuple[Change, ...]) -> tuple[FileDiff, ...]:
    """Text diffs of files that changed while no setting of theirs did."""
    changed_kinds = {c.kind for c in changes}
    old_entries, new_entries = old.entries, new.entries
    diffs = []
    for path in sorted(old_entries.keys() | new_entries.keys()):
        if path in DERIVED_FILES:
            continue
        was, now = old_entries.get(path), new_entries.get(path)
        if was and now and was.sha256 == now.sha256 and was.mode == now.mode:
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
        if was and now and before == after and was.mode == now.mode:
            continue  # only the bundle's own name differs (file headers)
        text = "".join(difflib.unified_diff(before, after, f"a/{path}", f"b/{path}"))
        if not text and was and now:
            text = f"mode {was.mode_text} -> {now.mode_text}\n"
        diffs.append(FileDiff(path, text))
    return tuple(diffs)


def _identity_free(bundle: Bundle, path: str) -> list[str]:
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


def diff_bundles(old: Bundle, new: Bundle) -> Difference:
    """The difference of two intact bundles; a tampered one is an InputError, nothing shown."""
    check_intact(old)
    check_intact(new)
    return bundle_difference(old, new, str(old.root), str(new.root))


def bundle_difference(
    old: Bundle,
    new: Bundle,
    old_label: str,
    new_label: str,
    differing_bytes: tuple[str, ...] = (),
) -> Difference:
    """Settings first, then files no setting explains; when neither shows anything yet the
    bundles are not equal (``generator.bundle.equal``, the fleet gate's test: a reason's text,
    a note, a header), the whole text diff of each file that differs, so that no diff of
    bundles the gate calls stale says "No change". ``differing_bytes``: the files the caller
    found different byte for byte (the gate: a reformatted manifest.json), shown last."""
    changes = diff_plans(old.plan, new.plan)
    files = diff_files(old, new, changes)
    if not changes and not files:
        paths = differing_paths(old, new) or list(differing_bytes)
        files = tuple(whole_file_diff(old, new, path) for path in paths)
    pairs = pair_nics(old.plan.nics, new.plan.nics)
    return Difference(old_label, new_label, changes, files, nic_pairs=pairs)


def whole_file_diff(old: Bundle, new: Bundle, path: str) -> FileDiff:
    """One file's text diff, comments included, as the equality test compares it (its raw
    bytes where only they differ: a reformatted plan.json)."""
    sides = [_side(bundle, path) for bundle in (old, new)]
    if any(b"\0" in side for side in sides) or path.endswith(".gz"):
        return FileDiff(path, "binary content differs\n")
    text = _unified(path, *sides)
    if not text:
        text = _unified(path, *(_side(bundle, path, raw=True) for bundle in (old, new)))
    if not text:
        entries = (bundle.entries.get(path) for bundle in (old, new))
        modes = (None if entry is None else entry.mode_text for entry in entries)
        text = "mode {} -> {}\n".format(*modes)
    return FileDiff(path, text)


def _side(bundle: Bundle, path: str, raw: bool = False) -> bytes:
    if path not in bundle.entries and path != MANIFEST:
        return b""
    if raw:
        return bundle.data(path)
    try:
        return comparable(bundle, path)
    except (ValueError, AttributeError, TypeError, KeyError):  # a JSON file's shape
        return bundle.data(path)


def _unified(path: str, before: bytes, after: bytes) -> str:
    old_lines, new_lines = (decoded(side).splitlines(keepends=True) for side in (before, after))
    return "".join(difflib.unified_diff(old_lines, new_lines, f"a/{path}", f"b/{path}"))


def label(plan: Plan) -> str:
    target = f" on {plan.distro}" if plan.distro else ""
    return f"{plan.hardware_name}/{plan.profile_name}{target}"


def format_json(difference: Difference, show_claims: bool = True) -> str:
    return json.dumps(diff_data(difference, show_claims), indent=2) + "\n"


def diff_data(difference: Difference, show_claims: bool = True) -> dict[str, object]:
    settings, claims = split_claims(difference.changes)
    shown = difference.changes if show_claims else tuple(settings)
    data: dict[str, object] = {
        "old": difference.old_label,
        "new": difference.new_label,
        "same": difference.same,
        "summary": {
            "settings": {s: sum(c.status == s for c in settings) for s in STATUSES},
            "kinds": sorted({c.kind for c in settings}),
            "claims": {s: sum(c.status == s for c in claims) for s in STATUSES},
        },
        "changes": [_change_data(c) for c in shown],
        "files": [asdict(f) for f in difference.files],
        "tampered": list(difference.tampered),
    }
    if difference.nic_pairs:
        data["nic_pairs"] = [pair._asdict() for pair in difference.nic_pairs]
    return data


def _change_data(change: Change) -> dict[str, object]:
    """A change for JSON: the pairing fields only where a NIC was renamed (every other change
    reads as it did before NICs were paired)."""
    data = asdict(change)
    for name in ("old_key", "nic"):
        if not data[name]:
            del data[name]
    return data


def nic_pairing_line(difference: Difference) -> str:
    """One line naming every renamed NIC and its partner; "" when none was renamed."""
    if not difference.nic_pairs:
        return ""
    pairs = ", ".join(printable(pair.label) for pair in difference.nic_pairs)
    return f"NICs paired by role and position: {pairs}."


def _shown(value: str | None) -> str:
    return "" if value is None else (value if value != "" else '""')


def summary_lines(
    difference: Difference, show_claims: bool, escape: Callable[[str], str]
) -> list[str]:
    """What a reviewer reads first: the settings that change on the node by kind, the files
    that differ without a setting, the preflight claims."""
    lines = [node_summary(difference.changes, escape)]
    if difference.files:
        count = len(difference.files)
        lines.append(f"{count} file{'s' if count > 1 else ''} differ without a setting change.")
    claims = claims_summary(difference.changes, show_claims)
    return [*lines, claims] if claims else lines


def _markdown_table(changes: list[Change]) -> list[str]:
    lines = [
        "| | Kind | Key | Old | New | Rule | Why |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for c in changes:
        cells = [
            SYMBOL[c.status],
            markdown_text(c.kind),
            markdown_code(c.shown_key),
            _code(c.old),
            _code(c.new),
            markdown_text(c.rule),
            markdown_text(c.reason),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return [*lines, ""]


def format_markdown(
    difference: Difference, excerpt: Excerpt | None = None, show_claims: bool = True
) -> str:
    """The difference as Markdown (a pull-request comment): what changes on the node first, the
    settings, then the preflight claims apart (left out without ``show_claims``). Every string
    from the bundles escaped for where it lands (``markdown_text``, ``markdown_code``, a fence no
    line closes), and with ``excerpt`` each file's text diff cut to its bounds."""
    old_label, new_label = markdown_code(difference.old_label), markdown_code(difference.new_label)
    lines = [f"### goldtune diff: {old_label} → {new_label}", ""]
    if difference.same:
        return "\n".join([*lines, "No change.", ""])
    settings, claims = split_claims(difference.changes)
    lines += [*summary_lines(difference, show_claims, markdown_text), ""]
    if difference.nic_pairs:
        lines += [nic_pairing_line(difference), ""]
    if settings:
        lines += _markdown_table(settings)
    if claims and show_claims:
        lines += [f"<details><summary>Preflight claims ({len(claims)})</summary>", ""]
        lines += [*_markdown_table(claims), "</details>", ""]
    for file_diff in difference.files:
        lines += _file_section(file_diff, excerpt)
    return "\n".join(lines)


@dataclass(frozen=True)
class Excerpt:
    """How much of one file's text diff a bounded report shows."""

    lines: int
    chars: int


def _file_section(file_diff: FileDiff, excerpt: Excerpt | None) -> list[str]:
    text = printable_lines(file_diff.diff.rstrip("\n"))
    shown = text if excerpt is None else _excerpt(text, excerpt)
    fence = markdown_fence(shown)
    summary = f"<details><summary>{markdown_text(file_diff.path)} (text diff)</summary>"
    section = [summary, "", f"{fence}diff", shown, fence, ""]
    if shown != text:
        left_out = text.count("\n") - shown.count("\n")
        note = f"… truncated: {left_out} more lines" if left_out else "… truncated"
        section += [f"{note} of this diff (`gen diff` shows it whole)", ""]
    return [*section, "</details>", ""]


def _excerpt(text: str, excerpt: Excerpt) -> str:
    """The first lines of ``text`` within both bounds (a first line longer than the whole
    excerpt cut, marked with "…")."""
    kept = text.split("\n")[: excerpt.lines]
    while len(kept) > 1 and sum(len(line) + 1 for line in kept) > excerpt.chars:
        kept.pop()
    if len(kept[0]) > excerpt.chars:
        kept = [kept[0][: excerpt.chars] + " …"]
    return "\n".join(kept)


def _code(value: str | None) -> str:
    return "" if value is None else markdown_code(_shown(value))


def _terminal_table(
    changes: list[Change], paint: Callable[[str, str], str], width: int | None
) -> list[str]:
    from generator.table import table_rows

    rows = [
        [
            SYMBOL[c.status],
            *map(printable, (c.kind, c.shown_key, _shown(c.old), _shown(c.new), c.rule, c.reason)),
        ]
        for c in changes
    ]
    header, *lines = table_rows(["", "KIND", "KEY", "OLD", "NEW", "RULE", "WHY"], rows, width=width)
    out = list(header)
    for row_lines, c in zip(lines, changes, strict=True):
        out += [paint(line, c.status) for line in row_lines]
    return out


def format_terminal(
    difference: Difference, colour: bool, width: int | None = None, show_claims: bool = True
) -> str:
    """The summary, the table of settings (cells wrapped to ``width`` columns when given), the
    preflight claims' table (without ``show_claims``, only their count), then text diffs."""
    import click

    if difference.same:
        return ""

    def paint(text: str, status: str) -> str:
        return click.style(text, fg=COLOUR[status]) if colour else text

    out = [f"--- {printable(difference.old_label)}", f"+++ {printable(difference.new_label)}"]
    for line in summary_lines(difference, show_claims, printable):
        out += textwrap.wrap(line, width, subsequent_indent="  ") if width else [line]
    if difference.nic_pairs:
        out.append("NICs paired by role and position:")
        out += [f"  {printable(pair.label)}" for pair in difference.nic_pairs]
    settings, claims = split_claims(difference.changes)
    if settings:
        out += _terminal_table(settings, paint, width)
    if claims and show_claims:
        out += [f"Preflight claims ({len(claims)}):", *_terminal_table(claims, paint, width)]
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
    show_claims: bool = True,
) -> int:
    difference = compute_diff(bundles, hardware, profiles, systems)
    if output_format == "json":
        click.echo(format_json(difference, show_claims), nl=False)
    elif output_format == "markdown":
        click.echo(format_markdown(difference, show_claims=show_claims))
    else:
        width = table_width()
        text = format_terminal(difference, stream_is_terminal("stdout"), width, show_claims)
        click.echo(text, nl=False)
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
        for bundle in bundles:  # a set's members are bundles of their own: compare those
            if is_set(bundle):
                raise InputError(
                    Problem(
                        str(bundle),
                        "",
                        "is a bundle set; compare its members' bundles, or two sets",
                        f"{bundle}/{MEMBERS_DIR}/<name>",
                    )
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
    renamed = pair_nics(old.nics, new.nics)
    return Difference(label(old), label(new), diff_plans(old, new), nic_pairs=renamed)


def plan_side(hardware: str, profile: str, os_name: str | None = None) -> Plan:
    """One side given as inputs, planned (the input models are imported here: a diff of two
    bundles never builds them)."""
    from generator.inputs.load import load_inputs
    from generator.plan.build import build_plan

    inputs = load_inputs(hardware, profile, os_name=os_name)
    return build_plan(inputs.facts, inputs.profile)
