"""What `gen verify` reads from a bundle, and what it says about each setting.

A bundle is read through three files: ``plan.json`` (every setting, in the ``gen explain --json``
vocabulary), ``manifest.json`` (every file with its sha256 and mode) and the overlay itself under
``rootfs/`` (the udev rules, to know which disks they match; the tuned profile's name).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from generator.errors import InputError, Problem
from generator.model.layout import MANIFEST, OVERLAY, PLAN_FILE, TUNED_DIR, UNIT_DIR, UDEV_FILE, target_of
from generator.model.planio import plan_from_data
from generator.model.setting import Plan, Setting



class Verdict(StrEnum):
    OK = "ok"
    DIFFERS = "differs"
    MISSING = "missing"
    NOT_APPLICABLE = "not-applicable"

    def fails(self) -> bool:
        return self in (Verdict.DIFFERS, Verdict.MISSING)


@dataclass(frozen=True)
class Check:
    """One comparison: a planned setting (or a health check of the machine) and its verdict."""

    kind: str
    key: str
    expected: str
    actual: str
    verdict: Verdict
    reason: str = ""  # why not applicable, or what exactly differs
    rule: str = ""

    def as_json(self) -> dict[str, str]:
        return {"kind": self.kind, "key": self.key, "expected": self.expected, "actual": self.actual,
                "verdict": str(self.verdict), "reason": self.reason, "rule": self.rule}


def check_of(setting: Setting, actual: str, verdict: Verdict, reason: str = "") -> Check:
    expected = setting.value if setting.value != "" else "(set)"
    return Check(setting.kind, setting.key, expected, actual, verdict, reason, setting.rule)


@dataclass(frozen=True)
class ManifestFile:
    path: str  # in the bundle: rootfs/etc/sysctl.d/90-goldtune.conf
    sha256: str
    mode: int

    @property
    def target(self) -> str | None:
        """Where the file lands on the machine, or None for a delivery file (install.sh…)."""
        return target_of(self.path)


@dataclass(frozen=True)
class Bundle:
    path: Path
    plan: Plan
    files: tuple[ManifestFile, ...] = ()
    udev_rules: str | None = None  # the bundle's own I/O scheduler rules, None when it has none
    tuned_profile: str | None = None
    units: dict[str, str] = field(default_factory=dict)  # own unit name -> its text

    def overlay_files(self) -> list[ManifestFile]:
        return [f for f in self.files if f.target is not None]


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(Problem(str(path), "", "not found", hint="is this a goldtune bundle directory?")) from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise InputError(Problem(str(path), "", f"cannot be read as JSON: {error}")) from None


def load_plan(path: Path) -> Plan:
    try:
        return plan_from_data(_read_json(path))
    except ValueError as error:
        raise InputError(Problem(str(path), "", str(error), hint="regenerate the bundle with this goldtune")) from None


def load_manifest(path: Path) -> tuple[ManifestFile, ...]:
    data = _read_json(path)
    source = str(path)
    entries = data.get("files") if isinstance(data, dict) else None
    if not isinstance(entries, list):
        raise InputError(Problem(source, "files", "a manifest has a list of files"))
    files = []
    for i, entry in enumerate(entries):
        try:
            files.append(ManifestFile(str(entry["path"]), str(entry["sha256"]), int(str(entry["mode"]), 8)))
        except (TypeError, KeyError, ValueError):
            raise InputError(Problem(source, f"files[{i}]", "needs path, sha256 and an octal mode")) from None
    return tuple(files)


def load_bundle(path: Path) -> Bundle:
    if not path.is_dir():
        raise InputError(Problem(str(path), "", "not a directory", hint="give the bundle directory (gen -o DIR)"))
    plan = load_plan(path / PLAN_FILE)
    files = load_manifest(path / MANIFEST) if (path / MANIFEST).exists() else ()
    rules = sorted((path / OVERLAY / UDEV_FILE.removeprefix("/")).parent.glob("*.rules"))
    tuned = sorted((path / OVERLAY / TUNED_DIR.removeprefix("/")).glob("*/tuned.conf"))
    units = {p.name: p.read_text(encoding="utf-8", errors="replace")
             for p in sorted((path / OVERLAY / UNIT_DIR.removeprefix("/")).glob("*.service"))}
    return Bundle(
        path=path,
        plan=plan,
        files=files,
        udev_rules="\n".join(p.read_text(encoding="utf-8", errors="replace") for p in rules) if rules else None,
        tuned_profile=tuned[0].parent.name if tuned else None,
        units=units,
    )
