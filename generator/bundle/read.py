"""Read a bundle back: its manifest, its plan, and whether its files still match the manifest."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, NamedTuple

from generator.errors import InputError, Problem
from generator.model.layout import MANIFEST, PLAN_FILE
from generator.model.planio import plan_from_data
from generator.model.setting import Plan


class BundleFiles(NamedTuple):
    root: Path
    manifest: dict[str, Any]
    plan: Plan
    tampered: tuple[str, ...]  # files whose content or mode differs from the manifest, or are missing
    unlisted: tuple[str, ...]  # files in the directory the manifest does not list

    @property
    def entries(self) -> dict[str, dict[str, str]]:
        return {entry["path"]: entry for entry in self.manifest["files"]}

    def text(self, path: str) -> str:
        return (self.root / path).read_text(encoding="utf-8", errors="replace")


def _load_json(path: Path, what: str) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(Problem(str(path.parent), "", f"not a goldtune bundle: no {what}")) from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise InputError(Problem(str(path), "", f"unreadable {what}: {error}")) from None


def _check_manifest_shape(manifest: Any, source: str) -> None:
    files = manifest.get("files") if isinstance(manifest, dict) else None
    if not isinstance(files, list) or not all(
        isinstance(e, dict) and isinstance(e.get("path"), str) and isinstance(e.get("sha256"), str) for e in files
    ):
        raise InputError(Problem(source, "files", "manifest has no valid file list"))
    for entry in files:
        path = entry["path"]
        if path.startswith("/") or ".." in Path(path).parts:
            raise InputError(Problem(source, "files", f"manifest path {path!r} leaves the bundle"))


def _file_state(root: Path, entry: dict[str, str]) -> bool:
    """True when the file exists, is not a symlink and matches its digest and mode."""
    path = root / entry["path"]
    if path.is_symlink() or not path.is_file():
        return False
    if hashlib.sha256(path.read_bytes()).hexdigest() != entry["sha256"]:
        return False
    mode = entry.get("mode")
    return mode is None or f"{path.stat().st_mode & 0o7777:04o}" == mode


def read_bundle(root: Path) -> BundleFiles:
    """Load a bundle directory; bad or foreign directories raise InputError (exit 2)."""
    if not root.is_dir():
        raise InputError(Problem(str(root), "", "not a directory"))
    manifest = _load_json(root / MANIFEST, MANIFEST)
    _check_manifest_shape(manifest, str(root / MANIFEST))
    try:
        plan = plan_from_data(_load_json(root / PLAN_FILE, PLAN_FILE))
    except ValueError as error:
        raise InputError(Problem(str(root / PLAN_FILE), "", str(error))) from None
    listed = {entry["path"] for entry in manifest["files"]}
    tampered = tuple(sorted(e["path"] for e in manifest["files"] if not _file_state(root, e)))
    present = {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() or p.is_symlink()}
    unlisted = tuple(sorted(present - listed - {MANIFEST}))
    return BundleFiles(root, manifest, plan, tampered, unlisted)
