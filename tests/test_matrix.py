"""gen matrix: every combination, each written atomically; one failure does not stop the rest."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.conftest import REPO


def gen(*args: str, cwd=REPO) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "generator", *args],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        cwd=cwd,
        timeout=120,
    )


def test_matrix_writes_every_combination(tmp_path):
    result = gen(
        "matrix",
        "--hw",
        "dgx-a100",
        "--hw",
        "l4-inference",
        "--profile",
        "inference",
        "--profile",
        "training",
        "-o",
        str(tmp_path),
    )
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "dgx-a100-inference",
        "dgx-a100-training",
        "l4-inference-inference",
        "l4-inference-training",
    ]
    assert all((p / "manifest.json").is_file() for p in tmp_path.iterdir())
    assert "4 written, 0 failed" in result.stdout


def test_matrix_partial_failure_still_writes_the_rest(tmp_path, write):
    bad = write(
        "broken.yaml",
        "cpu: {vendor: intel, sockets: 1, cores_per_socket: 4}\nmemory_gib: 64\ncolour: red\n",
    )
    result = gen(
        "matrix",
        "--hw",
        str(bad),
        "--hw",
        "l4-inference",
        "--profile",
        "inference",
        "-o",
        str(tmp_path / "out"),
    )
    assert result.returncode == 1
    assert "1 written, 1 failed" in result.stdout
    assert "colour: unknown field" in result.stdout
    assert [p.name for p in (tmp_path / "out").iterdir()] == ["l4-inference-inference"]


def test_all_systems_all_profiles(tmp_path):
    result = gen("matrix", "--all-systems", "--all-profiles", "-o", str(tmp_path))
    assert result.returncode == 0, result.stderr
    systems = len(list((REPO / "hardware_db" / "systems").glob("*.yaml")))
    profiles = len(list((REPO / "profiles").glob("*.yaml")))
    assert len(list(tmp_path.iterdir())) == systems * profiles


def test_matrix_needs_something_to_do(tmp_path):
    result = gen("matrix", "-o", str(tmp_path))
    assert result.returncode == 2 and "--all-systems" in result.stderr


def tree(root):
    return {
        str(p.relative_to(root)): (p.stat().st_mode, p.read_bytes() if p.is_file() else b"")
        for p in sorted(root.rglob("*"))
    }


def test_workers_write_the_same_bundles_in_the_same_order_as_one_process(tmp_path):
    args = ["matrix", "--all-systems", "--profile", "inference", "--profile", "training"]
    serial = gen(*args, "-j", "1", "-o", str(tmp_path / "serial"))
    forked = gen(*args, "-j", "2", "-o", str(tmp_path / "forked"))
    assert serial.returncode == forked.returncode == 0, serial.stderr + forked.stderr
    assert serial.stdout.replace("/serial/", "/X/") == forked.stdout.replace("/forked/", "/X/")
    assert tree(tmp_path / "serial") == tree(tmp_path / "forked")
    assert not [
        p for p in (tmp_path / "forked").iterdir() if p.name.startswith(".")
    ]  # no staging left


def test_two_combinations_that_would_write_one_directory_are_caught(tmp_path, write):
    first = write("a/rack.yaml", "system: dgx-a100\n")
    second = write("b/rack.yaml", "system: dgx-h100\n")
    result = gen(
        "matrix",
        "--hw",
        str(first),
        "--hw",
        str(second),
        "--profile",
        "inference",
        "-o",
        str(tmp_path / "out"),
    )
    assert result.returncode == 1
    assert "1 written, 1 failed" in result.stdout
    assert f"would write {tmp_path / 'out' / 'rack-inference'}" in result.stdout
    rows = {
        line.split()[0]: line.split()[2]
        for line in result.stdout.splitlines()
        if "rack.yaml" in line
    }
    assert rows == {str(first): "ok", str(second): "FAILED"}
    assert "A100" in (tmp_path / "out" / "rack-inference" / "EXPLAIN.md").read_text()


def test_jobs_must_be_positive(tmp_path):
    result = gen(
        "matrix", "--hw", "l4-inference", "--profile", "inference", "-j", "0", "-o", str(tmp_path)
    )
    assert result.returncode == 2 and "--jobs" in result.stderr


def test_each_input_file_is_read_and_hashed_once_however_many_bundles_use_it(tmp_path, monkeypatch):
    from pathlib import Path

    from generator.commands.matrix import generate_matrix
    from generator.inputs.catalog import load_catalog
    from generator.paths import hardware_db_dir, profiles_dir

    systems = ("dgx-a100", "l4-inference")
    inputs = [hardware_db_dir() / "systems" / f"{name}.yaml" for name in systems]
    inputs += [profiles_dir() / f"{name}.yaml" for name in ("inference", "training")]
    from generator.inputs import load

    reads: list[Path] = []
    real_read = load.read_foreign

    def counted_read(path: Path, limit: int) -> bytes:  # what file_digest hashes
        reads.append(path)
        return real_read(path, limit)

    monkeypatch.setattr(load, "read_foreign", counted_read)
    outcomes = list(
        generate_matrix(list(systems), ["inference", "training"], tmp_path, load_catalog(), jobs=1)
    )
    assert [outcome.error for outcome in outcomes] == [""] * 4
    assert sorted(path for path in reads if path in inputs) == sorted(inputs)


def test_a_matrix_over_its_own_bundles_leaves_no_replaced_tree(tmp_path):
    args = [
        "matrix",
        "--hw",
        "dgx-a100",
        "--hw",
        "l4-inference",
        "--all-profiles",
        "-j",
        "2",
        "-o",
        str(tmp_path),
    ]
    for _ in range(2):
        result = gen(*args)
        assert result.returncode == 0, result.stderr
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(".")]
