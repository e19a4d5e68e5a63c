"""The shortcuts of a cold `gen` (issue 17) give exactly what the plain code gives."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from generator.cache import file_bytes
from generator.paths import files_ending


def test_files_ending_lists_what_glob_lists(tmp_path: Path) -> None:
    for name in ("b.yaml", "a.yaml", ".hidden.yaml", ".yaml", "c.yml", "d.yaml.bak", "E.YAML"):
        (tmp_path / name).write_text("x: 1\n")
    (tmp_path / "folder.yaml").mkdir()
    assert files_ending(tmp_path, ".yaml") == sorted(tmp_path.glob("*.yaml"))
    assert files_ending(tmp_path / "missing", ".yaml") == sorted((tmp_path / "missing").glob("*"))
    (tmp_path / "file").write_text("")
    assert files_ending(tmp_path / "file", ".yaml") == []


@pytest.mark.parametrize("size", [0, 1, 4096, 70_000])
def test_file_bytes_reads_what_read_bytes_reads(tmp_path: Path, size: int) -> None:
    path = tmp_path / "f"
    path.write_bytes(os.urandom(size))
    assert file_bytes(path) == path.read_bytes()


def test_file_bytes_reads_a_file_that_grew_after_its_size_was_taken(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "f"
    path.write_bytes(os.urandom(200_000))
    real_fstat = os.fstat

    class Smaller:
        def __init__(self, fd: int) -> None:
            self.st_size = real_fstat(fd).st_size // 3

    monkeypatch.setattr(os, "fstat", Smaller)
    assert file_bytes(path) == path.read_bytes()
