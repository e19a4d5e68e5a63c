"""Read a bundle back: its manifest, its plan, and whether its files still match the manifest.

A bundle may come from anyone, so it is read as hostile: every file through
``generator.foreign.read_beneath`` (a regular file, no symbolic link anywhere below the bundle
directory, a size cap), the JSON files checked for shape before use, and the directory walked
without following links. Readers (``gen diff``) check ``tampered``/``unlisted`` before they show
any file's content.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any, NamedTuple

from generator import TOOL
from generator.errors import InputError, Problem
from generator.foreign import read_beneath, read_beneath_with_mode, relative_parts
from generator.model.layout import MANIFEST, PLAN_FILE
from generator.model.planio import FORMAT, plan_from_data
from generator.model.setting import Plan
from generator.textsafe import printable, short_key

# The files named when a bundle does not match its manifest; the rest are counted.
MAX_TAMPERED_LINES = 10
# Far above any real bundle file (the largest, EXPLAIN.md of a big machine, is about 100 KiB).
MAX_BUNDLE_FILE_BYTES = 16 * 1024 * 1024
# A bundle is some 70 files at most 8 directories deep (rootfs/etc/systemd/system/…): far more
# is not a bundle, and is refused before it is walked to its end.
MAX_BUNDLE_DEPTH = 32
MAX_BUNDLE_ENTRIES = 10_000


class BundleFiles(NamedTuple):
    root: Path
    manifest: dict[str, Any]
    plan: Plan
    tampered: tuple[
        str, ...
    ]  # files whose content or mode differs from the manifest, or are missing
    unlisted: tuple[str, ...]  # files in the directory the manifest does not list

    @property
    def entries(self) -> dict[str, dict[str, str]]:
        return {entry["path"]: entry for entry in self.manifest["files"]}

    def data(self, path: str) -> bytes:
        return read_beneath(self.root, path, MAX_BUNDLE_FILE_BYTES)

    def text(self, path: str) -> str:
        return self.data(path).decode("utf-8", errors="replace")


def load_bundle_json(root: Path, name: str) -> Any:
    """``root/name`` parsed as JSON; a missing, linked, huge, deep or broken file: InputError."""
    source = str(root / name)
    try:
        raw = read_beneath(root, name, MAX_BUNDLE_FILE_BYTES)
    except InputError as error:
        if error.problems[0].message == "no such file":
            raise InputError(Problem(str(root), "", f"not a goldtune bundle: no {name}")) from None
        raise
    try:
        return json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as error:
        why = f"not UTF-8 (byte {error.start})"
    except json.JSONDecodeError as error:
        why = f"{error.msg} at line {error.lineno}"
    except (ValueError, RecursionError):  # a 5,000-digit number; nesting past the parser's stack
        why = "numbers too long or nested too deeply"
    raise InputError(Problem(source, "", f"unreadable {name}: {why}"))


def _is_list_of_mappings(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(item, dict) for item in value)


def check_plan_shape(data: Any) -> None:
    """What ``plan_from_data`` assumes of plan.json's containers; ValueError where it fails."""
    if not isinstance(data, dict):
        raise ValueError("plan.json is not a JSON object")
    for field in ("settings", "notes", "warnings", "nics"):
        if field in data and not _is_list_of_mappings(data[field]):
            raise ValueError(f"'{field}' is not a list of objects")
    for item in data.get("settings", []):
        for optional in ("original_value", "original_rule"):
            if item.get(optional) is not None and not isinstance(item[optional], str):
                raise ValueError(f"setting field {optional!r} is not a string")
        if not isinstance(item.get("optional", False), bool):
            raise ValueError("setting field 'optional' is not true or false")


def load_plan(root: Path) -> Plan:
    data = load_bundle_json(root, PLAN_FILE)
    try:
        check_plan_shape(data)
        return plan_from_data(data)
    except ValueError as error:
        raise InputError(
            Problem(
                str(root / PLAN_FILE),
                "",
                short_key(str(error), 120),
                "regenerate the bundle with this goldtune",
            )
        ) from None


def check_manifest_shape(manifest: Any, source: str) -> None:
    """A list of files, each a plain relative path with a sha256 (and an optional mode string)."""
    files = manifest.get("files") if isinstance(manifest, dict) else None
    if not isinstance(files, list) or not all(
        isinstance(e, dict)
        and isinstance(e.get("path"), str)
        and isinstance(e.get("sha256"), str)
        and isinstance(e.get("mode", ""), str)
        for e in files
    ):
        raise InputError(Problem(source, "files", "manifest has no valid file list"))
    for index, entry in enumerate(files):
        try:
            relative_parts(entry["path"])
        except ValueError:
            raise InputError(
                Problem(
                    source, f"files[{index}].path", "not a plain relative path inside the bundle"
                )
            ) from None


def _file_state(root: Path, entry: dict[str, str]) -> bool:
    """True when the file is regular, below ``root`` (no link on the way), of its digest, mode."""
    try:
        content, mode = read_beneath_with_mode(root, entry["path"], MAX_BUNDLE_FILE_BYTES)
    except InputError:
        return False
    if hashlib.sha256(content).hexdigest() != entry["sha256"]:
        return False
    return entry.get("mode") is None or f"{mode:04o}" == entry["mode"]


def present_entries(root: Path) -> set[str]:
    """Every non-directory entry below ``root``, and every link to a directory (not followed).

    Walked with a list, not recursion (os.walk of Python 3.11 recurses, and 1,100 nested
    directories raised RecursionError in diff, package and matrix --check), and bounded: a tree
    deeper or larger than any bundle is refused as bad input before it is walked further.
    """
    found: set[str] = set()
    pending = [("", os.fspath(root), 0)]
    seen = 0
    while pending:
        prefix, folder, depth = pending.pop()
        if depth > MAX_BUNDLE_DEPTH:
            why = f"directories nested more than {MAX_BUNDLE_DEPTH} deep; not a {TOOL} bundle"
            raise InputError(Problem(f"{root}/{printable(prefix[:200])}", "", why))
        try:
            with os.scandir(folder) as entries:
                for entry in entries:
                    seen += 1
                    if seen > MAX_BUNDLE_ENTRIES:
                        why = f"more than {MAX_BUNDLE_ENTRIES} entries; not a {TOOL} bundle"
                        raise InputError(Problem(str(root), "", why))
                    if entry.is_dir(follow_symlinks=False):
                        pending.append((f"{prefix}{entry.name}/", entry.path, depth + 1))
                    else:
                        found.add(prefix + entry.name)
        except OSError:
            continue  # as os.walk: a folder that cannot be listed is skipped
    return found


def holds_own_plan(root: Path, files: list[Any]) -> bool:
    """True when ``files`` (a manifest's list) has plan.json with the sha256 of ``root/plan.json``,
    and that file is a goldtune plan: what a hand-made manifest naming goldtune does not have."""
    entry = next((e for e in files if isinstance(e, dict) and e.get("path") == PLAN_FILE), None)
    if entry is None:
        return False
    try:
        raw = read_beneath(root, PLAN_FILE, MAX_BUNDLE_FILE_BYTES)
        data = json.loads(raw)
    except (InputError, ValueError, RecursionError):
        return False
    return (
        hashlib.sha256(raw).hexdigest() == entry.get("sha256")
        and isinstance(data, dict)
        and data.get("tool") == TOOL
        and data.get("format") == FORMAT
    )


def read_bundle(root: Path) -> BundleFiles:
    """Load a bundle directory; bad or foreign directories raise InputError (exit 2)."""
    if not root.is_dir():
        raise InputError(Problem(str(root), "", "not a directory"))
    manifest = load_bundle_json(root, MANIFEST)
    check_manifest_shape(manifest, str(root / MANIFEST))
    plan = load_plan(root)
    listed = {entry["path"] for entry in manifest["files"]}
    tampered = tuple(sorted(e["path"] for e in manifest["files"] if not _file_state(root, e)))
    unlisted = tuple(sorted(present_entries(root) - listed - {MANIFEST}))
    return BundleFiles(root, manifest, plan, tampered, unlisted)


def check_intact(bundle: BundleFiles) -> None:
    """Refuse a bundle whose files are not exactly its manifest's, before any of it is read."""
    bad = [*bundle.tampered, *bundle.unlisted]
    if not bad:
        return
    why = "does not match the bundle's manifest.json (modified, missing, linked or unlisted)"
    problems = [
        Problem(f"{bundle.root}/{printable(path)}", "", why)
        for path in sorted(bad)[:MAX_TAMPERED_LINES]
    ]
    if len(bad) > MAX_TAMPERED_LINES:
        more = len(bad) - MAX_TAMPERED_LINES
        problems.append(Problem(str(bundle.root), "", f"and {more} more such files"))
    raise InputError(problems)
