"""A shipped bundle changes only with a CHANGELOG.md entry (issue 42).

Every shipped bundle's content is hashed (tests/bundle_digest.py); tests/bundle_digests.txt
records the digests, and CHANGELOG.md's Unreleased section records the digest of that record in
a ``Bundles digest:`` line. A change to any bundle fails here until the record is rewritten,
and rewriting it fails until the changelog's line is updated by hand, beside the entry that says
what changed. On main before this test nothing tied the changelog to the bundles: the nofile
soft limit, the NCCL interface pins, GB200's kubelet managers and the preflight unit reached
every fleet without an entry.
"""

from __future__ import annotations

import pytest

from generator import __version__
from tests import bundle_digest
from tests.bundle_digest import (
    CHANGELOG,
    LINE_PREFIX,
    RECORD,
    changed,
    digest_lines,
    entries,
    overall,
    sections,
)

HOW = (
    "add an entry to CHANGELOG.md's Unreleased section naming the settings and bundles that "
    "changed, then run `.venv/bin/python -m tests.bundle_digest --write` and put the line it "
    "prints in that section in place of its `Bundles digest:` line"
)


def unreleased() -> str:
    return sections(CHANGELOG.read_text(encoding="utf-8"))["Unreleased"]


def test_the_recorded_digests_are_the_shipped_bundles() -> None:
    differing = changed(bundle_digest.recorded(), bundle_digest.current())
    assert not differing, f"shipped bundles changed: {', '.join(differing)}: {HOW}"


def test_the_unreleased_section_records_the_digests() -> None:
    lines = digest_lines(unreleased())
    assert len(lines) == 1, f"CHANGELOG.md's Unreleased section needs one `{LINE_PREFIX}` line"
    expected = overall(RECORD.read_text(encoding="utf-8"))
    assert lines[0] == expected, f"tests/bundle_digests.txt changed: {HOW} ({expected})"


def test_bundles_that_changed_since_the_release_have_an_entry() -> None:
    """The newest release records its digest too: while Unreleased's differs, it has entries."""
    titles = list(sections(CHANGELOG.read_text(encoding="utf-8")))
    release = sections(CHANGELOG.read_text(encoding="utf-8"))[titles[1]]
    if digest_lines(unreleased()) != digest_lines(release):
        assert entries(unreleased()), f"bundles changed since {titles[1]} without an entry"


# --- the checks fail on a changed bundle --------------------------------------------------------


def test_a_changed_bundle_is_named() -> None:
    before = {"dgx-h100-training": "a" * 64, "l4-inference-inference": "b" * 64}
    after = {"dgx-h100-training": "c" * 64, "l4-inference-inference": "b" * 64, "new": "d" * 64}
    assert changed(before, after) == ["dgx-h100-training", "new"]


def test_one_changed_file_changes_its_bundles_digest() -> None:
    files = bundle_digest.render_for("l4-inference", "inference")
    edited = dict(files)
    content, mode = files["rootfs/etc/sysctl.d/90-goldtune.conf"]
    edited["rootfs/etc/sysctl.d/90-goldtune.conf"] = (content + b"vm.swappiness = 1\n", mode)
    assert bundle_digest.bundle_digest(edited) != bundle_digest.bundle_digest(files)
    edited["rootfs/etc/sysctl.d/90-goldtune.conf"] = (content, 0o755)
    assert bundle_digest.bundle_digest(edited) != bundle_digest.bundle_digest(files)


def test_the_version_alone_changes_no_digest() -> None:
    """An upgrade that changes only the version stamp needs no entry (the gate's version-only)."""
    files = bundle_digest.render_for("l4-inference", "inference")
    restamped = {
        path: (content.replace(__version__.encode(), b"9.9.9"), mode)
        for path, (content, mode) in files.items()
    }
    assert restamped != files
    assert bundle_digest.bundle_digest(restamped) == bundle_digest.bundle_digest(files)


@pytest.mark.parametrize(
    ("text", "found"),
    [
        (f"## Unreleased\n\n{LINE_PREFIX}{'a' * 64}\n\n## 0.2.0\n", ["a" * 64]),
        (f"## Unreleased\n\n{LINE_PREFIX}{'a' * 63}\n", []),  # not a digest
        ("## Unreleased\n\n- an entry\n", []),
    ],
)
def test_the_digest_line_is_read_from_its_section(text: str, found: list[str]) -> None:
    assert digest_lines(sections(text)["Unreleased"]) == found
