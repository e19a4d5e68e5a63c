"""gen matrix --check judges a bundle by its manifest when that records what this run would make
it from (issue 43): only the bundles whose inputs changed are rendered, and a hand edit is
still caught. Each test counts the renders of a one-process check."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from generator import cli
from generator.commands import fleet_check
from generator.inputs.load import file_digest
from tests.conftest import REPO

SYSTEM = "system: l4-inference\nmemory_gib: {memory}\n"
PARENT = "description: our base\nextends: inference\nthp: madvise\n"
CHILD = "description: our serving nodes\nextends: ./base.yaml\n"


def gen(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli.main, list(args))
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture
def renders(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The hardware names of the bundles the check renders (one process: -j 1)."""
    rendered: list[str] = []
    render = fleet_check.render_bundle

    def counted(plan, *options):
        rendered.append(plan.hardware_name)
        return render(plan, *options)

    monkeypatch.setattr(fleet_check, "render_bundle", counted)
    return rendered


@pytest.fixture
def fleet(tmp_path: Path) -> tuple[list[str], Path]:
    """Three hardware files over a shipped system and the shipped inference profile, committed."""
    hardware = []
    for index, memory in enumerate((128, 256, 512)):
        path = tmp_path / f"box{index}.yaml"
        path.write_text(SYSTEM.format(memory=memory))
        hardware += ["--hw", str(path)]
    args = ["matrix", *hardware, "--profile", "inference", "-j", "1"]
    code, _, err = gen(*args, "-o", str(tmp_path / "bundles"))
    assert code == 0, err
    return args, tmp_path / "bundles"


def test_unchanged_bundles_are_current_without_rendering(fleet, renders):
    args, bundles = fleet
    code, out, err = gen(*args, "--check", str(bundles))
    assert code == 0, (out, err)
    assert "3 current, 0 version-only, 0 stale" in out
    assert renders == []


def test_a_changed_input_renders_that_bundle_only(fleet, renders, tmp_path):
    args, bundles = fleet
    (tmp_path / "box1.yaml").write_text(SYSTEM.format(memory=1024))
    code, out, _ = gen(*args, "--check", str(bundles))
    assert code == 1
    assert "| `box1-inference` | stale |" in out and "2 current" in out
    assert renders == ["box1"]


def test_a_hand_edited_file_is_still_stale(fleet, renders):
    args, bundles = fleet
    sysctl = next((bundles / "box2-inference").rglob("*.conf"))
    sysctl.write_text(sysctl.read_text() + "kernel.panic = 1\n")
    code, out, _ = gen(*args, "--check", str(bundles))
    assert code == 1
    assert "| `box2-inference` | stale | files do not match its manifest.json" in out
    assert renders == []


def test_a_hand_edited_manifest_is_rendered_and_compared(fleet, renders):
    args, bundles = fleet
    manifest = bundles / "box0-inference" / "manifest.json"
    data = json.loads(manifest.read_text())
    manifest.write_text(json.dumps(data, indent=4) + "\n")  # the same data, not as gen writes it
    code, out, _ = gen(*args, "--check", str(bundles))
    assert code == 1
    assert "| `box0-inference` | stale | differs in manifest.json |" in out
    assert renders == ["box0"]


def test_an_edited_provenance_statement_is_rendered_and_compared(fleet, renders):
    """provenance.json is no file of the manifest: the shortcut compares it with the statement
    gen writes for the committed files, or an edit of it would pass the gate unseen."""
    args, bundles = fleet
    statement = bundles / "box2-inference" / "provenance.json"
    statement.write_text(statement.read_text().replace('"profile": "inference"', '"profile": "x"'))
    code, out, _ = gen(*args, "--check", str(bundles))
    assert code == 1
    assert "| `box2-inference` | stale | differs in provenance.json |" in out
    assert renders == ["box2"]


def test_a_changed_catalog_renders_every_bundle(fleet, renders, monkeypatch):
    """The shipped catalog's digest is in each statement, not in the manifest: a hardware_db
    edited in a checkout that was not reinstalled (the version unchanged) is not trusted."""
    args, bundles = fleet
    monkeypatch.setattr(fleet_check, "render_statement", lambda plan, files: b"{}\n")
    code, _, _ = gen(*args, "--check", str(bundles))
    assert code == 0  # rendered and compared: the bundles themselves are current
    assert sorted(renders) == ["box0", "box1", "box2"]


def test_a_manifest_of_other_inputs_is_rendered(fleet, renders):
    """A bundle copied over another's directory records the other hardware's digest."""
    args, bundles = fleet
    for name in ("manifest.json", "plan.json"):
        source = bundles / "box0-inference" / name
        (bundles / "box1-inference" / name).write_bytes(source.read_bytes())
    code, out, _ = gen(*args, "--check", str(bundles))
    assert code == 1 and "| `box1-inference` | stale |" in out
    assert renders == ["box1"]


def test_a_change_in_a_profile_that_one_extends_renders_its_bundles(tmp_path, renders):
    """The manifest has the digest of the profile named, not of a file it extends."""
    (tmp_path / "base.yaml").write_text(PARENT)
    (tmp_path / "team.yaml").write_text(CHILD)
    args = ["matrix", "--hw", "l4-inference", "--profile", str(tmp_path / "team.yaml"), "-j", "1"]
    assert gen(*args, "-o", str(tmp_path / "bundles"))[0] == 0
    (tmp_path / "base.yaml").write_text(PARENT.replace("thp: madvise", "thp: never"))
    code, out, _ = gen(*args, "--check", str(tmp_path / "bundles"))
    assert code == 1 and "| `l4-inference-team` | stale |" in out
    assert renders == ["l4-inference"]


def test_a_site_catalog_renders_every_bundle(fleet, renders, monkeypatch, tmp_path):
    """A site catalog can change a bundle and the manifest has no digest of it (the provenance
    statement has: the bundles are written again with it)."""
    args, bundles = fleet
    (tmp_path / "site").mkdir()
    monkeypatch.setenv("GOLDTUNE_CATALOG", str(tmp_path / "site"))
    assert gen(*args, "-o", str(bundles))[0] == 0
    code, out, err = gen(*args, "--check", str(bundles))
    assert code == 0, (out, err)
    assert sorted(renders) == ["box0", "box1", "box2"]


def test_the_shipped_profiles_extend_only_shipped_profiles():
    """What extends_only_shipped stands on for the shipped profiles themselves."""
    for path in sorted((REPO / "profiles").glob("*.yaml")):
        digest = file_digest(path)
        assert fleet_check.extends_only_shipped(path.resolve(), digest), path.name
