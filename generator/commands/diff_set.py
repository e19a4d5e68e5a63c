"""`gen diff` of two bundle sets (issue 44): their members paired by name, each pair diffed as
two bundles are (generator/commands/diff), a member only in one set added or removed, and the
set's own choices (the kernel-arguments reboot, the common part) compared.

A set's members are the machine types of one image: a reviewer of a new set reads, per machine
type, what changes on its nodes, in the forms `gen diff` gives two bundles (terminal, Markdown,
JSON, --no-claims), with diff(1)'s exit status over the whole set.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from generator.bundle.bundle_set import is_set, set_manifest, set_members
from generator.bundle.read import check_set_intact, read_bundle
from generator.commands.diff import (
    Difference,
    diff_bundles,
    diff_data,
    format_markdown,
    format_terminal,
)
from generator.errors import InputError, Problem
from generator.textsafe import markdown_code, markdown_text, printable

MemberStatus = Literal["added", "removed", "changed", "same"]
MEMBER_STATUSES: tuple[MemberStatus, ...] = ("changed", "added", "removed", "same")


@dataclass(frozen=True)
class MemberDifference:
    """One member name: on which sides, and for one on both the difference of its bundles."""

    name: str
    status: MemberStatus
    difference: Difference | None = None


@dataclass(frozen=True)
class SetDifference:
    old_label: str
    new_label: str
    members: tuple[MemberDifference, ...]
    # the set's own choices that differ, one sentence each (its members' diffs say the rest)
    set_changes: tuple[str, ...] = ()

    @property
    def same(self) -> bool:
        return not self.set_changes and all(m.status == "same" for m in self.members)


def two_sets(bundles: tuple[Path, ...]) -> bool:
    """`gen diff` was given two directories and both are bundle sets."""
    return len(bundles) == 2 and all(map(is_set, bundles))


def members_of(set_dir: Path) -> dict[str, Path]:
    """The set's members as its manifest lists them; a set listing none, or a member whose
    directory is a link or absent, is an InputError (nothing shown)."""
    members = set_members(set_dir)
    if not members:
        raise InputError(
            Problem(str(set_dir), "", "is a bundle set whose manifest lists no member")
        )
    for name, bundle in members.items():
        if bundle.is_symlink() or not bundle.is_dir():
            why = f"member {name}'s bundle is not a directory of the set (absent or a link)"
            raise InputError(Problem(str(bundle), "", why))
    return members


def set_choices(old_dir: Path, new_dir: Path) -> tuple[str, ...]:
    """The set's own settings that differ: the kernel-arguments reboot and the common part."""
    old, new = set_manifest(old_dir) or {}, set_manifest(new_dir) or {}
    changes = []
    was, now = old.get("kernel_args_reboot"), new.get("kernel_args_reboot")
    if was != now:
        changes.append(f"kernel-arguments reboot: {was} -> {now}")
    before, after = common_paths(old), common_paths(new)
    for path in sorted(before - after):
        changes.append(f"common part: {path} removed")
    for path in sorted(after - before):
        changes.append(f"common part: {path} added")
    return tuple(changes)


def common_paths(manifest: dict[str, object]) -> set[str]:
    listed = manifest.get("common")
    entries = listed if isinstance(listed, list) else []
    return {str(e.get("path")) for e in entries if isinstance(e, dict)}


def diff_sets(old_dir: Path, new_dir: Path) -> SetDifference:
    """Members paired by name, in the old set's order, then those only in the new one; each
    set checked whole first (a member's image copy is what its nodes get)."""
    old, new = members_of(old_dir), members_of(new_dir)
    check_set_intact(old_dir)
    check_set_intact(new_dir)
    members = []
    for name in [*old, *(name for name in new if name not in old)]:
        if name not in new:
            members.append(MemberDifference(name, "removed"))
        elif name not in old:
            members.append(MemberDifference(name, "added"))
        else:
            difference = diff_bundles(read_bundle(old[name]), read_bundle(new[name]))
            status: MemberStatus = "same" if difference.same else "changed"
            members.append(MemberDifference(name, status, difference))
    return SetDifference(str(old_dir), str(new_dir), tuple(members), set_choices(old_dir, new_dir))


def members_summary(difference: SetDifference) -> str:
    """ "Members: 1 changed, 1 added (b200), 1 same.": each status present, with the names of
    those added or removed."""
    counted = Counter(member.status for member in difference.members)
    parts = []
    for status in MEMBER_STATUSES:
        if not counted[status]:
            continue
        names = [m.name for m in difference.members if m.status == status]
        listed = f" ({', '.join(names)})" if status in ("added", "removed") else ""
        parts.append(f"{counted[status]} {status}{listed}")
    return f"Members: {', '.join(parts)}."


def format_set_json(difference: SetDifference, show_claims: bool = True) -> str:
    data = {
        "old": difference.old_label,
        "new": difference.new_label,
        "same": difference.same,
        "summary": {
            "members": {s: sum(m.status == s for m in difference.members) for s in MEMBER_STATUSES}
        },
        "set": list(difference.set_changes),
        "members": [
            {
                "name": member.name,
                "status": member.status,
                "diff": None
                if member.difference is None
                else diff_data(member.difference, show_claims),
            }
            for member in difference.members
        ],
    }
    return json.dumps(data, indent=2) + "\n"


def format_set_terminal(
    difference: SetDifference, colour: bool, width: int | None = None, show_claims: bool = True
) -> str:
    """The members' summary and the set's own changes, then each member: its status, and for a
    changed one its diff as `gen diff` shows two bundles."""
    if difference.same:
        return ""
    out = [f"--- {printable(difference.old_label)}", f"+++ {printable(difference.new_label)}"]
    out += [
        members_summary(difference),
        *(f"Set: {printable(line)}" for line in difference.set_changes),
    ]
    for member in difference.members:
        if member.status == "same":
            continue
        out.append(f"member {member.name}: {member.status}")
        if member.difference is not None:
            shown = format_terminal(member.difference, colour, width, show_claims)
            out.append(shown.rstrip("\n"))
    return "\n".join(out) + "\n"


def format_set_markdown(difference: SetDifference, show_claims: bool = True) -> str:
    old_label, new_label = (
        markdown_code(label) for label in (difference.old_label, difference.new_label)
    )
    lines = [f"## goldtune diff of bundle sets: {old_label} → {new_label}", ""]
    if difference.same:
        return "\n".join([*lines, "No change.", ""])
    lines += [markdown_text(members_summary(difference)), ""]
    lines += [f"- set: {markdown_text(line)}" for line in difference.set_changes]
    lines += [f"- member {markdown_code(m.name)}: {m.status}" for m in difference.members]
    lines.append("")
    for member in difference.members:
        if member.difference is not None and member.status == "changed":
            lines.append(format_markdown(member.difference, show_claims=show_claims))
    return "\n".join(lines)


def run_set_diff(old_dir: Path, new_dir: Path, output_format: str, show_claims: bool) -> int:
    """`gen diff SET SET`: exit status like diff(1), 0 when every member and the set's own
    choices are the same."""
    import click

    from generator.commands.terminal import stream_is_terminal
    from generator.table import table_width

    difference = diff_sets(old_dir, new_dir)
    if output_format == "json":
        click.echo(format_set_json(difference, show_claims), nl=False)
    elif output_format == "markdown":
        click.echo(format_set_markdown(difference, show_claims))
    else:
        colour = stream_is_terminal("stdout")
        text = format_set_terminal(difference, colour, table_width(), show_claims)
        click.echo(text, nl=False)
    return 0 if difference.same else 1
