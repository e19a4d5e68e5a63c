"""A unit of a mounted image as systemd loads it: its unit file, then every drop-in, in order.

systemd.unit(5): the unit file is the first found along the unit path (``/etc/systemd/system``
over ``/run`` over ``/usr/lib``, the ``.control`` directories of ``systemctl set-property``
first of all); a link to /dev/null there masks it. Drop-ins come from ``<unit>.d/``, from the
directories of the name cut after each dash (``goldtune-.service.d/`` for
``goldtune-gpu.service``) and from the type's ``service.d/``, merged by file name and applied in
name order; a line ending in a backslash continues on the next (systemd.syntax(7)).

For a unit the bundle ships, the image can undo the bundle without touching its files: a drop-in
that empties or replaces ``ExecStart=`` (the bundle's command no longer runs), or one that adds a
``Condition…=``/``Assert…=`` or any other option verify cannot evaluate offline. ``undone_by``
says which: the first is a difference, the others are not judged, never ``ok``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Collection

from generator.verify.imagefs import MASKED, Image
from generator.verify.verdicts import Verdict

UNIT_DIRS = (
    "/etc/systemd/system.control",
    "/etc/systemd/system",
    "/etc/systemd/system.attached",
    "/run/systemd/system",
    "/usr/local/lib/systemd/system",
    "/usr/lib/systemd/system",
    "/lib/systemd/system",
)
# Options of a drop-in that change nothing of what the unit runs, or when: shown text, and
# [Install], which systemctl enable reads, not the boot.
INERT_OPTIONS = frozenset({"Description", "Documentation"})
INERT_SECTIONS = frozenset({"Install"})
OPTION = re.compile(r"\s*([A-Za-z][A-Za-z0-9]*)\s*=\s*(.*)$")


def dropin_dir_names(unit: str) -> list[str]:
    """The drop-in directory names systemd reads for ``unit``, the most specific first."""
    stem, dot, kind = unit.rpartition(".")
    names = [f"{unit}.d"]
    if "@" in stem and not stem.endswith("@"):  # an instance also reads its template's
        names.append(f"{stem.partition('@')[0]}@.{kind}.d")
    cut = stem
    while "-" in cut.rstrip("-"):
        cut = cut.rstrip("-").rpartition("-")[0] + "-"
        names.append(f"{cut}.{kind}.d")
    return [*names, f"{kind}.d"] if dot else names


def unit_file(image: Image, unit: str) -> str | None:
    """The image path of the unit file systemd loads for ``unit``; None if it has none."""
    template = re.sub(r"@[^.]*\.", "@.", unit)
    for directory in UNIT_DIRS:
        for name in dict.fromkeys((unit, template)):
            if image.lexists(f"{directory}/{name}"):
                return f"{directory}/{name}"
    return None


def unit_files(image: Image, unit: str) -> list[tuple[str, str]]:
    """The unit file systemd loads, then its drop-ins in name order (systemd.unit(5))."""
    path = unit_file(image, unit)
    found = []
    if path is not None and image.link_target(path) != MASKED:
        text = image.read(path)
        found = [] if text is None else [(path, text)]
    return found + image.dropins_of(dropin_dir_names(unit), ".conf", UNIT_DIRS)


def unit_lines(files: list[tuple[str, str]], option: str) -> list[str]:
    """The values of OPTION= lines of a unit and its drop-ins, in the order systemd reads them
    (a line ending in a backslash continues on the next, systemd.syntax(7))."""
    prefix = re.compile(rf"^\s*{option}\s*=\s*(.*)$")
    return [
        found.group(1)
        for _, text in files
        for line in text.replace("\\\n", " ").splitlines()
        if (found := prefix.match(line))
    ]


def exec_start(files: list[tuple[str, str]]) -> list[str]:
    """The commands ExecStart= leaves: an empty assignment resets the list (systemd.service(5))."""
    commands: list[str] = []
    for value in unit_lines(files, "ExecStart"):
        commands = [*commands, value.strip()] if value.strip() else []
    return commands


def foreign_option(path: str, text: str) -> str | None:
    """The first option of a drop-in that verify cannot tell harmless: "Name=value"."""
    section = ""
    for line in text.replace("\\\n", " ").splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith(("#", ";")):
            continue
        if stripped.startswith("[") and stripped.endswith("]"):
            section = stripped[1:-1].strip()
            continue
        found = OPTION.match(stripped)
        name = found.group(1) if found else stripped
        if section in INERT_SECTIONS or name in INERT_OPTIONS or name == "ExecStart":
            continue
        return stripped[:80]
    return None


def undone_by(image: Image, unit: str, ours: Collection[str]) -> tuple[str, Verdict, str] | None:
    """(actual, verdict, reason) when the image keeps the bundle's unit ``unit`` from running
    the bundle's command, or changes it in a way not evaluated here; None when it does not.
    ``ours`` are the image paths the bundle installs."""
    path = unit_file(image, unit)
    if path is None:
        return None
    if image.link_target(path) == MASKED:
        return "masked", Verdict.DIFFERS, f"{path} links to /dev/null: the unit never starts"
    if path not in ours:
        why = f"{path} is loaded instead of the bundle's unit file"
        return "another unit file", Verdict.DIFFERS, why
    files = unit_files(image, unit)
    own = [(name, text) for name, text in files if name in ours]
    if exec_start(files) != exec_start(own):
        setter = [n for n, text in files if n not in ours and unit_lines([(n, text)], "ExecStart")]
        commands = exec_start(files)
        actual = "ExecStart emptied" if not commands else f"ExecStart={commands[-1][:60]}"
        why = f"{setter[-1] if setter else path} replaces the bundle's command"
        return actual, Verdict.DIFFERS, why
    for name, text in files:
        option = foreign_option(name, text) if name not in ours else None
        if option is not None:
            why = (
                f"{name} sets {option} on the bundle's unit; verify cannot evaluate it offline "
                "(a condition or assertion may skip the unit at boot)"
            )
            return "changed by the image", Verdict.NOT_JUDGED, why
    return None


def unit_exists(image: Image, unit: str) -> bool:
    return unit_file(image, unit) is not None


def unit_enabled(image: Image, unit: str) -> bool:
    directory = image.resolve("/etc/systemd/system")
    if directory is None:
        return False
    return any(os.path.lexists(d / unit) for d in directory.glob("*.wants")) or any(
        os.path.lexists(d / unit) for d in directory.glob("*.requires")
    )
