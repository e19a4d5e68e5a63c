"""The fleet gate and the catalogs against hostile trees (issue 41, families 5 and 6).

Family 5: `gen matrix --check` fails on a committed hidden directory in the bundles tree (at the
top, and inside a bundle), and a site catalog is validated whole, once: a broken entry no
combination reads, or a file no reader lists, fails the gate (and `gen check`).
Family 6: a catalog entry read through a link (the file, or its kind's folder, leaving the
catalog) is refused, never followed, and nothing of its target is echoed: site catalogs,
hardware_db, the profiles folder. On main each case passed the gate, or echoed the target's
values ("key: invalid value 'SECRET…'")."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from generator.errors import InputError
from generator.inputs.catalog import Catalog
from generator.inputs.profile import load_profile
from generator.paths import hardware_db_dir, profiles_dir

ARGS = ["matrix", "--hw", "l4-inference", "--profile", "inference"]
SECRET = "SECRET-VALUE-42"


def gen(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "generator", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        check=False,
    )


@pytest.fixture
def fleet(tmp_path: Path) -> Path:
    """A fleet repository: its committed bundles (current), written with its empty site catalog
    (their provenance statements record the catalog's digest)."""
    for kind in ("gpus", "systems", "distros"):
        (tmp_path / "site" / kind).mkdir(parents=True)
    done = gen("--catalog", "site", *ARGS, "-o", "bundles", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert gen("--catalog", "site", *ARGS, "--check", "bundles", cwd=tmp_path).returncode == 0
    return tmp_path


def gate(fleet: Path) -> subprocess.CompletedProcess[str]:
    done = gen("--catalog", "site", *ARGS, "--check", "bundles", cwd=fleet)
    assert "Traceback" not in done.stderr
    return done


def test_a_hidden_directory_in_the_bundles_tree_fails_the_gate(fleet: Path) -> None:
    hidden = fleet / "bundles" / ".cache"
    hidden.mkdir()
    (hidden / "payload.sh").write_text("echo hi\n")
    done = gate(fleet)
    assert done.returncode == 1, done.stdout
    assert "extra: .cache" in done.stderr and "`.cache` | extra" in done.stdout


@pytest.mark.parametrize("inside", [".git-crypt", "rootfs/etc/.hidden", "empty"])
def test_a_directory_no_manifest_lists_inside_a_bundle_fails_the_gate(
    fleet: Path, inside: str
) -> None:
    (fleet / "bundles" / "l4-inference-inference" / inside).mkdir(parents=True)
    done = gate(fleet)
    assert done.returncode == 1, done.stdout
    assert "stale: l4-inference-inference" in done.stderr
    assert inside.rsplit("/", 1)[-1] in done.stderr


@pytest.mark.parametrize(
    ("path", "content", "named"),
    [
        ("systems/spare-box.yaml", "system: l4-inference\ncpu: banana\n", "cpu"),
        ("distros/our-os-1.yaml", "key: our-os-1\nextends: nosuch-9\n", "extends"),
        ("gpus/X9.yml", "key: X9\n", "not a <key>.yaml file"),
        ("gpus/.X9.yaml", "key: X9\n", "not a <key>.yaml file"),
        ("notes/readme.yaml", "x: 1\n", "not a folder of a catalog"),
    ],
)
def test_a_broken_site_entry_no_run_reads_fails_the_gate_and_check(
    fleet: Path, path: str, content: str, named: str
) -> None:
    (fleet / "site" / path).parent.mkdir(parents=True, exist_ok=True)
    (fleet / "site" / path).write_text(content)
    done = gate(fleet)
    assert done.returncode == 2, done.stdout + done.stderr
    shown = path if named != "not a folder of a catalog" else path.split("/")[0]
    assert f"site/{shown}" in done.stderr and named in done.stderr
    assert done.stdout == ""
    checked = gen(
        "--catalog", "site", "check", "--hw", "l4-inference", "--profile", "inference", cwd=fleet
    )
    assert checked.returncode == 2 and f"site/{shown}" in checked.stderr


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    path = tmp_path / "outside" / "entry.yaml"
    path.parent.mkdir()
    path.write_text(f"key: {SECRET}\nname: {SECRET}\n")
    return path


@pytest.mark.parametrize(
    ("entry", "args"),
    [
        ("gpus/X1.yaml", ["check", "--hw", "l4-inference", "--profile", "inference"]),
        ("systems/box.yaml", ["check", "--hw", "box", "--profile", "inference"]),
        (
            "distros/our-os-1.yaml",
            ["check", "--hw", "l4-inference", "--profile", "inference", "--os", "our-os-1"],
        ),
    ],
)
def test_a_site_entry_that_is_a_link_out_is_refused_unread(
    tmp_path: Path, outside: Path, entry: str, args: list[str]
) -> None:
    site = tmp_path / "site"
    (site / entry).parent.mkdir(parents=True)
    (site / entry).symlink_to(outside)
    done = gen("--catalog", str(site), *args, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert "symbolic link" in done.stderr and SECRET not in done.stderr + done.stdout
    assert "Traceback" not in done.stderr


def test_a_site_kind_folder_that_is_a_link_out_is_refused(tmp_path: Path, outside: Path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    (outside.parent / "X1.yaml").symlink_to(outside)
    (site / "gpus").symlink_to(outside.parent)
    args = ["check", "--hw", "l4-inference", "--profile", "inference"]
    done = gen("--catalog", str(site), *args, cwd=tmp_path)
    assert done.returncode == 2 and SECRET not in done.stderr + done.stdout, done.stderr


def test_a_hardware_db_entry_that_is_a_link_out_is_refused(tmp_path: Path, outside: Path) -> None:
    root = tmp_path / "hardware_db"
    shutil.copytree(hardware_db_dir(), root, ignore=shutil.ignore_patterns("__*"))
    (root / "nics" / "ZZ.yaml").symlink_to(outside)
    with pytest.raises(InputError) as caught:
        _ = Catalog(root).nics
    assert "symbolic link" in str(caught.value) and SECRET not in str(caught.value)


def test_a_shipped_profile_that_is_a_link_out_is_refused(tmp_path: Path, outside: Path) -> None:
    folder = tmp_path / "profiles"
    shutil.copytree(profiles_dir(), folder)
    (folder / "inference.yaml").unlink()
    (folder / "inference.yaml").symlink_to(outside)
    with pytest.raises(InputError) as caught:
        load_profile("inference", folder)
    assert "symbolic link" in str(caught.value) and SECRET not in str(caught.value)
