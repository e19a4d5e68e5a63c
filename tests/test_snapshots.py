"""One snapshot file per reviewed artifact of every shipped system x profile.

The snapshots in ``__snapshots__/test_snapshots/`` are the real config files, so a change in a rule
or a template shows up in review as a diff of the files an image would carry, once: one sysctl
change is a diff of sysctl.d and of EXPLAIN.md, not six restatements of it. What restates other
files is not snapshotted but proven equal to them here and in the render tests:

- the fixed scripts: the same bytes in every bundle (tests/test_scripts.py);
- plan.json: the plan the reviewed files print, read back here;
- manifest.json: every other file's digest and mode, checked here;
- cloud-init/user-data: the overlay file by file (render's round-trip check, the cloud-init
  validator);
- kernel-cmdline: the GRUB drop-in's line, checked here;
- the collector's data: word lists derived from plan.json (its validator runs ``collect --check``).

Update them with ``python3 -m pytest tests/test_snapshots.py --snapshot-update`` and read the diff
before committing.
"""

from __future__ import annotations

import hashlib
import json
import re
from functools import cache
from pathlib import Path

import pytest
from conftest import PROFILES, SYSTEMS
from syrupy.assertion import SnapshotAssertion
from syrupy.extensions.single_file import SingleFileSnapshotExtension, WriteMode

from generator.commands.diff import Difference, diff_plans, format_markdown, label
from generator.commands.generate import render_for
from generator.model.layout import (
    COLLECT_DATA,
    GRUB_FILE,
    KERNEL_CMDLINE,
    MANIFEST,
    PLAN_FILE,
    USER_DATA,
    USER_DATA_GZ,
    USER_DATA_MIME,
    USER_DATA_MIME_GZ,
    in_overlay,
)
from generator.model.planio import plan_from_data
from generator.render.outputs import FIXED_SCRIPTS, RenderedFiles

FIXED_PATHS = {output.path for output in FIXED_SCRIPTS}
DERIVED = {
    PLAN_FILE,
    MANIFEST,
    USER_DATA,
    USER_DATA_GZ,  # the user-data's other forms
    USER_DATA_MIME,
    USER_DATA_MIME_GZ,
    KERNEL_CMDLINE,
    in_overlay(COLLECT_DATA),
}


def reviewed(path: str) -> bool:
    return path not in FIXED_PATHS and path not in DERIVED


class ConfigFileExtension(SingleFileSnapshotExtension):
    """Each snapshot is the artifact's text, stored as one plain file."""

    _write_mode = WriteMode.TEXT
    file_extension = "txt"


@cache
def rendered(system: str, profile: str, distro: str | None = None) -> RenderedFiles:
    return render_for(system, profile, distro)


# What a named distribution changes (issue 16), for a reviewer: a small explicit list, not the
# whole matrix again. Only the reviewed files that differ from the portable bundle's are
# snapshotted; every other file is proven byte-equal to the portable one.
DISTRO_COMBINATIONS = [
    (system, "inference", distro)
    for system in ("dgx-h100", "l4-inference")
    for distro in ("ubuntu-22.04", "ubuntu-24.04", "debian-12", "rhel-9")
]


def distro_changed(system: str, profile: str, distro: str) -> list[str]:
    portable, targeted = rendered(system, profile), rendered(system, profile, distro)
    return [
        path
        for path in sorted(portable.keys() | targeted.keys())
        if reviewed(path) and portable.get(path) != targeted.get(path)
    ]


def artifact_params() -> list[pytest.param]:  # type: ignore[valid-type]
    return [
        pytest.param(system, profile, path, id=f"{system}-{profile}-{path.replace('/', '__')}")
        for system in SYSTEMS
        for profile in PROFILES
        for path in rendered(system, profile)
        if reviewed(path)
    ]


@pytest.mark.parametrize(("system", "profile", "path"), artifact_params())
def test_artifact(system: str, profile: str, path: str, snapshot: SnapshotAssertion) -> None:
    content, _ = rendered(system, profile)[path]
    assert snapshot(extension_class=ConfigFileExtension) == content.decode("utf-8")


# The shipped example hardware files (examples/, issue 12), each with the profile its header names:
# a machine the reference systems do not cover (Ampere Altra + A100 PCIe), reviewed like them.
EXAMPLES_DIR = Path(__file__).resolve().parents[1] / "examples"
EXAMPLES = [(path.stem, "training") for path in sorted(EXAMPLES_DIR.glob("*.yaml"))]


def example_artifact_params() -> list[pytest.param]:  # type: ignore[valid-type]
    return [
        pytest.param(
            example, profile, path, id=f"example-{example}-{profile}-{path.replace('/', '__')}"
        )
        for example, profile in EXAMPLES
        for path in rendered(str(EXAMPLES_DIR / f"{example}.yaml"), profile)
        if reviewed(path)
    ]


@pytest.mark.parametrize(("example", "profile", "path"), example_artifact_params())
def test_example_artifact(
    example: str, profile: str, path: str, snapshot: SnapshotAssertion
) -> None:
    content, _ = rendered(str(EXAMPLES_DIR / f"{example}.yaml"), profile)[path]
    assert snapshot(extension_class=ConfigFileExtension) == content.decode("utf-8")


def distro_artifact_params() -> list[pytest.param]:  # type: ignore[valid-type]
    return [
        pytest.param(
            system,
            profile,
            distro,
            path,
            id=f"{system}-{profile}-on-{distro}-{path.replace('/', '__')}",
        )
        for system, profile, distro in DISTRO_COMBINATIONS
        for path in distro_changed(system, profile, distro)
    ]


@pytest.mark.parametrize(("system", "profile", "distro", "path"), distro_artifact_params())
def test_distro_artifact(
    system: str, profile: str, distro: str, path: str, snapshot: SnapshotAssertion
) -> None:
    """A file the distribution's bundle leaves out (RHEL: the GRUB drop-in) is shown as absent."""
    found = rendered(system, profile, distro).get(path)
    text = found[0].decode("utf-8") if found else "(not in this distribution's bundle)\n"
    assert snapshot(extension_class=ConfigFileExtension) == text


@pytest.mark.parametrize(
    ("system", "profile", "distro"),
    DISTRO_COMBINATIONS,
    ids=[f"{s}-{p}-on-{d}" for s, p, d in DISTRO_COMBINATIONS],
)
def test_distro_diff(system: str, profile: str, distro: str, snapshot: SnapshotAssertion) -> None:
    """`gen diff` of the portable plan and the distribution's: the summary a reviewer reads."""
    portable = plan_from_data(json.loads(rendered(system, profile)[PLAN_FILE][0]))
    targeted = plan_from_data(json.loads(rendered(system, profile, distro)[PLAN_FILE][0]))
    difference = Difference(label(portable), label(targeted), diff_plans(portable, targeted))
    assert snapshot(extension_class=ConfigFileExtension) == format_markdown(difference)


@pytest.mark.parametrize(
    ("system", "profile", "distro"),
    DISTRO_COMBINATIONS,
    ids=[f"{s}-{p}-on-{d}" for s, p, d in DISTRO_COMBINATIONS],
)
def test_distro_changes_only_what_its_snapshots_show(
    system: str, profile: str, distro: str
) -> None:
    """The reviewed files without a distro snapshot are the portable bundle's, byte for byte."""
    portable, targeted = rendered(system, profile), rendered(system, profile, distro)
    changed = set(distro_changed(system, profile, distro))
    same = {p for p in portable.keys() & targeted.keys() if reviewed(p) and p not in changed}
    assert all(portable[p] == targeted[p] for p in same)
    plan = plan_from_data(json.loads(targeted[PLAN_FILE][0]))
    assert plan.distro == distro


def test_no_stale_snapshot_files() -> None:
    """A snapshot whose artifact is no longer rendered is removed, not left to mislead reviewers."""
    folder = Path(__file__).parent / "__snapshots__" / "test_snapshots"
    expected = (
        {f"test_artifact[{p.id}].txt" for p in artifact_params()}
        | {f"test_distro_artifact[{p.id}].txt" for p in distro_artifact_params()}
        | {f"test_example_artifact[{p.id}].txt" for p in example_artifact_params()}
        | {f"test_distro_diff[{s}-{p}-on-{d}].txt" for s, p, d in DISTRO_COMBINATIONS}
    )
    assert sorted(path.name for path in folder.iterdir()) == sorted(expected)


COMBINATIONS = [(system, profile) for system in SYSTEMS for profile in PROFILES]


@pytest.mark.parametrize(
    ("system", "profile"), COMBINATIONS, ids=[f"{s}-{p}" for s, p in COMBINATIONS]
)
def test_the_derived_files_follow_from_the_reviewed_ones(system: str, profile: str) -> None:
    files = rendered(system, profile)
    plan = plan_from_data(json.loads(files[PLAN_FILE][0]))
    explain = files["EXPLAIN.md"][0].decode()
    assert all(f"`{s.key}`" in explain or s.key in explain for s in plan.settings)
    manifest = json.loads(files[MANIFEST][0])
    listed = {entry["path"]: entry for entry in manifest["files"]}
    assert set(listed) == set(files) - {MANIFEST}
    for path, (content, mode) in files.items():
        if path != MANIFEST:
            assert listed[path]["sha256"] == hashlib.sha256(content).hexdigest()
            assert listed[path]["mode"] == f"{mode:04o}"
    grub = in_overlay(GRUB_FILE)
    if grub in files:
        line = re.search(
            r'^GRUB_CMDLINE_LINUX_DEFAULT=".*\}(.*)"$', files[grub][0].decode(), re.MULTILINE
        )
        assert line is not None and files[KERNEL_CMDLINE][0].decode() == line.group(1) + "\n"
