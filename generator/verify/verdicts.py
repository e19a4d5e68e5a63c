"""What `gen verify` reads from a bundle, and what it says about each setting.

A bundle is read through three files: ``plan.json`` (every setting, in the ``gen explain --json``
vocabulary), ``manifest.json`` (every file with its sha256 and mode) and the overlay itself under
``rootfs/`` (the udev rules, to know which disks they match; the tuned profile's name). Like
``gen diff``, it reads the bundle as foreign: no symbolic link below the bundle directory is
followed, only regular files are read, each with a size cap (``generator.bundle.read``).
"""

from __future__ import annotations

import hashlib
import os
import stat
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from generator.bundle.read import MAX_BUNDLE_FILE_BYTES, load_bundle_json, load_plan
from generator.errors import InputError, Problem
from generator.foreign import read_beneath
from generator.model.layout import (
    CONTAINERD_DROPIN,
    DOCKER_DAEMON_JSON,
    IMAGE_ONLY_TARGETS,
    MANIFEST,
    NCCL_CONF,
    NCCL_STYLE_CONFS,
    RCCL_CONF,
    TUNED_DIR,
    UDEV_FILE,
    UNIT_DIR,
    VERIFY_ONLY_TARGETS,
    in_overlay,
    target_of,
)
from generator.model.setting import Plan, Setting


class Verdict(StrEnum):
    OK = "ok"
    DIFFERS = "differs"
    MISSING = "missing"
    NOT_APPLICABLE = "not-applicable"
    # The source cannot be judged without running foreign code (an image's GRUB file with a
    # command substitution): not proven in effect, so it fails, with the reason.
    NOT_JUDGED = "not-judged"
    # A finding that does not fail the node: reported, with the reason, and the exit status stays
    # 0 (an application's Xid: the application faulted, the GPU is still usable).
    WARNING = "warning"

    def fails(self) -> bool:
        return self in (Verdict.DIFFERS, Verdict.MISSING, Verdict.NOT_JUDGED)


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
        return {
            "kind": self.kind,
            "key": self.key,
            "expected": self.expected,
            "actual": self.actual,
            "verdict": str(self.verdict),
            "reason": self.reason,
            "rule": self.rule,
        }


NOT_APPLICABLE = Verdict.NOT_APPLICABLE


def check_of(setting: Setting, actual: str, verdict: Verdict, reason: str = "") -> Check:
    expected = setting.value if setting.value != "" else "(set)"
    return Check(setting.kind, setting.key, expected, actual, verdict, reason, setting.rule)


VERIFY_ONLY_REASON = "verify-side tooling: gen verify runs its own collector with the bundle's data"
IMAGE_ONLY_REASON = (
    "installed by install.sh only: the cloud-init user-data leaves the preflight unit out "
    "(EC2's 16 KB)"
)


def file_not_installed(target: str, expected: str) -> Check:
    """An overlay file the machine lacks: missing, unless it is verify-side tooling
    (``layout.VERIFY_ONLY_TARGETS``), which first-boot tuning never reads, or the preflight unit
    (``layout.IMAGE_ONLY_TARGETS``), which the cloud-init delivery leaves out."""
    if target in VERIFY_ONLY_TARGETS:
        return Check("file", target, expected, "not installed", NOT_APPLICABLE, VERIFY_ONLY_REASON)
    if target in IMAGE_ONLY_TARGETS:
        return Check("file", target, expected, "not installed", NOT_APPLICABLE, IMAGE_ONLY_REASON)
    return Check("file", target, expected, "not installed", Verdict.MISSING)


@dataclass(frozen=True)
class ManifestFile:
    path: str  # in the bundle: rootfs/etc/sysctl.d/90-goldtune.conf
    sha256: str
    mode: int
    # the file's digest as the cloud-init user-data writes it, without its comment lines
    # (layout.compact_in_user_data); either form is the bundle's file
    first_boot_sha256: str | None = None

    def is_bundles(self, digest: str) -> bool:
        return digest == self.sha256 or (
            self.first_boot_sha256 is not None and digest == self.first_boot_sha256
        )

    @property
    def target(self) -> str | None:
        """Where the file lands on the machine, or None for a delivery file (install.sh…)."""
        return target_of(self.path)


# The line install.sh's merge_nccl_conf writes between the bundle's nccl.conf and the image's own
# lines it keeps after them (templates/scripts/install.sh; tests/test_install.py ties the two).
NCCL_MERGE_MARK = b"\n\n# The image's own lines, kept by "


def merged_nccl_conf(item: ManifestFile, content: bytes) -> bool:
    """nccl.conf (or rccl.conf) whose first lines are the bundle's file, then install.sh's mark
    and the image's own lines: NCCL takes a name's first value, so ours win; each setting is
    judged by itself."""
    if item.target not in NCCL_STYLE_CONFS.values():
        return False
    ours, mark, _ = content.partition(NCCL_MERGE_MARK)
    return bool(mark) and item.is_bundles(hashlib.sha256(ours + b"\n").hexdigest())


# The files install.sh merges with the image's own instead of replacing: what the file check says
# of one found merged, and why that is the bundle's file (each setting is judged by itself).
MERGED_IN_PLACE = {
    CONTAINERD_DROPIN: (
        "the image's CRI tables carried into it",
        "install.sh carries the image's own CRI tables of config.toml into it (containerd 1.x "
        "replaces a plugin's whole table with an imported file's); each containerd setting is "
        "judged by itself",
    ),
    DOCKER_DAEMON_JSON: (
        "merged into the daemon.json in place",
        "install.sh merges the bundle's keys into it; each docker setting is judged by itself",
    ),
    NCCL_CONF: (
        "merged: the image's lines kept after the bundle's",
        "NCCL takes a name's first value, so the bundle's win; each NCCL setting is judged "
        "by itself",
    ),
    RCCL_CONF: (
        "merged: the image's lines kept after the bundle's",
        "RCCL takes a name's first value, so the bundle's win; each RCCL setting is judged "
        "by itself",
    ),
}


def merged_file_check(target: str, expected: str) -> Check:
    """The file check of a file install.sh merged in place (a key of MERGED_IN_PLACE)."""
    actual, note = MERGED_IN_PLACE[target]
    return Check("file", target, expected, actual, Verdict.OK, note)


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


def load_manifest(bundle_dir: Path) -> tuple[ManifestFile, ...]:
    data = load_bundle_json(bundle_dir, MANIFEST)
    source = str(bundle_dir / MANIFEST)
    entries = data.get("files") if isinstance(data, dict) else None
    if not isinstance(entries, list):
        raise InputError(Problem(source, "files", "a manifest has a list of files"))
    files = []
    for i, entry in enumerate(entries):
        try:
            first_boot = entry.get("first_boot_sha256")
            files.append(
                ManifestFile(
                    str(entry["path"]),
                    str(entry["sha256"]),
                    int(str(entry["mode"]), 8),
                    None if first_boot is None else str(first_boot),
                )
            )
        except (TypeError, KeyError, ValueError):
            raise InputError(
                Problem(source, f"files[{i}]", "needs path, sha256 and an octal mode")
            ) from None
    return tuple(files)


def _plain_directory(bundle_dir: Path, subdir: str) -> bool:
    """``bundle_dir/subdir`` exists and every component of ``subdir`` is a directory, not a link."""
    current = bundle_dir
    for part in subdir.split("/"):
        current = current / part
        try:
            if not stat.S_ISDIR(os.lstat(current).st_mode):
                return False
        except OSError:
            return False
    return True


def overlay_texts(bundle_dir: Path, subdir: str, suffix: str) -> dict[str, str]:
    """name -> text of each regular file ``subdir/*suffix`` of the bundle, in name order.

    No link is followed: a linked directory or file is not read (``read_beneath``).
    """
    if not _plain_directory(bundle_dir, subdir):
        return {}
    with os.scandir(bundle_dir / subdir) as entries:
        names = sorted(
            entry.name
            for entry in entries
            if entry.name.endswith(suffix) and entry.is_file(follow_symlinks=False)
        )
    texts = {
        name: read_beneath(bundle_dir, f"{subdir}/{name}", MAX_BUNDLE_FILE_BYTES) for name in names
    }
    return {name: content.decode("utf-8", "replace") for name, content in texts.items()}


def tuned_profiles(bundle_dir: Path) -> list[str]:
    """The bundle's tuned profile directories that hold a tuned.conf, in name order."""
    tuned_dir = in_overlay(TUNED_DIR)
    if not _plain_directory(bundle_dir, tuned_dir):
        return []
    with os.scandir(bundle_dir / tuned_dir) as entries:
        names = sorted(e.name for e in entries if e.is_dir(follow_symlinks=False))
    return [
        name for name in names if overlay_texts(bundle_dir, f"{tuned_dir}/{name}", "tuned.conf")
    ]


def load_bundle(path: Path) -> Bundle:
    if not path.is_dir():
        raise InputError(
            Problem(str(path), "", "not a directory", hint="give the bundle directory (gen -o DIR)")
        )
    plan = load_plan(path)
    files = load_manifest(path) if os.path.lexists(path / MANIFEST) else ()
    rules = overlay_texts(path, in_overlay(UDEV_FILE.rsplit("/", 1)[0]), ".rules")
    tuned = tuned_profiles(path)
    return Bundle(
        path=path,
        plan=plan,
        files=files,
        udev_rules="\n".join(rules.values()) if rules else None,
        tuned_profile=tuned[0] if tuned else None,
        units=overlay_texts(path, in_overlay(UNIT_DIR), ".service"),
    )
