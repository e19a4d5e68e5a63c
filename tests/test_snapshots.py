"""One snapshot file per rendered artifact of every shipped system x profile.

The snapshots in ``__snapshots__/test_snapshots/`` are the real config files, so a change in a rule
or a template shows up in review as a diff of the files an image would carry. The fixed scripts
are not snapshotted: they are the same bytes in every bundle (tests/test_scripts.py proves it),
so only their data files are. Update them with
``python3 -m pytest tests/test_snapshots.py --snapshot-update`` and read the diff before committing.
"""

from __future__ import annotations

from functools import cache

import pytest
from conftest import PROFILES, SYSTEMS
from syrupy.assertion import SnapshotAssertion
from syrupy.extensions.single_file import SingleFileSnapshotExtension, WriteMode

from generator.commands.generate import render_for
from generator.render.render import FIXED_SCRIPTS, RenderedFiles

FIXED_PATHS = {output.path for output in FIXED_SCRIPTS}


class ConfigFileExtension(SingleFileSnapshotExtension):
    """Each snapshot is the artifact's text, stored as one plain file."""

    _write_mode = WriteMode.TEXT
    file_extension = "txt"


@cache
def rendered(system: str, profile: str) -> RenderedFiles:
    return render_for(system, profile)


def artifact_params() -> list[pytest.param]:  # type: ignore[valid-type]
    return [
        pytest.param(system, profile, path, id=f"{system}-{profile}-{path.replace('/', '__')}")
        for system in SYSTEMS
        for profile in PROFILES
        for path in rendered(system, profile)
        if path not in FIXED_PATHS
    ]


@pytest.mark.parametrize(("system", "profile", "path"), artifact_params())
def test_artifact(system: str, profile: str, path: str, snapshot: SnapshotAssertion) -> None:
    content, _ = rendered(system, profile)[path]
    assert snapshot(extension_class=ConfigFileExtension) == content.decode("utf-8")


def test_no_stale_snapshot_files() -> None:
    """A snapshot whose artifact is no longer rendered is removed, not left to mislead a reviewer."""
    from pathlib import Path

    folder = Path(__file__).parent / "__snapshots__" / "test_snapshots"
    expected = {f"test_artifact[{p.id}].txt" for p in artifact_params()}
    assert sorted(path.name for path in folder.iterdir()) == sorted(expected)
