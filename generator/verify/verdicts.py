"""What `gen verify` says about each setting: the verdicts, one check's record, and the checks of
the bundle's own files that install.sh merges in place or that a delivery leaves out.

The bundle itself is read by ``generator.bundle.read`` (one ``Bundle``, one manifest reader).
"""

from __future__ import annotations

import hashlib
from enum import StrEnum
from typing import NamedTuple

from generator.bundle.read import ManifestFile
from generator.model.layout import (
    CONTAINERD_DROPIN,
    DOCKER_DAEMON_JSON,
    IMAGE_ONLY_TARGETS,
    NCCL_BOOT_BEGIN,
    NCCL_BOOT_END,
    NCCL_CONF,
    NCCL_STYLE_CONFS,
    NCCL_UNIT,
    RCCL_CONF,
    VERIFY_ONLY_TARGETS,
)
from generator.model.setting import Setting


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


class Check(NamedTuple):
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


def without_boot_lines(content: bytes) -> bytes:
    """nccl.conf (rccl.conf) without the lines NCCL_UNIT wrote between its marks at boot: the
    file as install.sh left it (issue 38)."""
    lines = content.split(b"\n")
    begin, end = NCCL_BOOT_BEGIN.encode(), NCCL_BOOT_END.encode()
    if begin not in lines:
        return content
    start = lines.index(begin)
    if end not in lines[start + 1 :]:
        return content
    stop = lines.index(end, start + 1)
    return b"\n".join(lines[: start + 1] + lines[stop:])


def filled_at_boot(item: ManifestFile, content: bytes) -> bool:
    """nccl.conf (rccl.conf) that is the bundle's (or install.sh's merge of it) once the lines
    its boot unit wrote between the marks are taken out."""
    if item.target not in NCCL_STYLE_CONFS.values():
        return False
    bare = without_boot_lines(content)
    if bare == content:
        return False
    return item.is_bundles(hashlib.sha256(bare).hexdigest()) or merged_nccl_conf(item, bare)


def filled_file_check(target: str, expected: str) -> Check:
    """The file check of an nccl.conf (rccl.conf) its boot unit wrote its lines into."""
    actual = f"the bundle's, with the lines {NCCL_UNIT} wrote between its marks"
    why = "NCCL_UNIT resolves those lines at boot; each NCCL setting is judged by itself"
    return Check("file", target, expected, actual, Verdict.OK, why.replace("NCCL_UNIT", NCCL_UNIT))


# The files install.sh merges with the image's own instead of replacing: what the file check says
# of one found merged, and why that is the bundle's file (each setting is judged by itself).
MERGED_IN_PLACE = {
    CONTAINERD_DROPIN: (
        "written in the version of the image's config.toml, its CRI tables carried into it",
        "install.sh writes it in the version of the image's config.toml (containerd 2.0-2.2 "
        "migrate the merged configuration by its last file's version) and carries a version 2 "
        "config.toml's own CRI tables into it (containerd 1.x replaces a plugin's whole table "
        "with an imported file's); each containerd setting is judged by itself",
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
