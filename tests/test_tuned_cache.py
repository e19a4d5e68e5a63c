"""The tuned table's cache (render/tuned.py, generator/cache.py): used when nothing changed, parsed
again when anything did or the entry is not one to trust, never required."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from generator.render import tuned
from generator.render.tuned import Options
from tests.conftest import unreadable_cache_entry

TABLE = "profiles:\n  throughput-performance:\n    sysctl:\n      vm.swappiness: 10\n"
EXPECTED = {("sysctl", "vm.swappiness"): ("throughput-performance",)}


@pytest.fixture
def tables(tmp_path: Path) -> list[Path]:
    folder = tmp_path / "tuned"
    folder.mkdir()
    (folder / "a.yaml").write_text(TABLE)
    return [folder / "a.yaml"]


@pytest.fixture
def parses(monkeypatch: pytest.MonkeyPatch) -> list[list[Path]]:
    """The tables parsed_options was asked to parse, call by call."""
    calls: list[list[Path]] = []
    real = tuned.parsed_options

    def counted(files: list[Path], loader: type = tuned.TABLE_LOADER) -> Options:
        calls.append(files)
        return real(files, loader)

    monkeypatch.setattr(tuned, "parsed_options", counted)
    return calls


def test_second_read_comes_from_the_cache(
    tables: list[Path], tmp_path: Path, parses: list[list[Path]], strict_umask: None
) -> None:
    """Written under a hardened umask, the entry still serves all users."""
    entry = tmp_path / "cache" / "tuned.json"
    assert tuned.cached_options(tables, entry) == EXPECTED
    assert tuned.cached_options(tables, entry) == EXPECTED
    assert len(parses) == 1
    assert stat.S_IMODE(os.lstat(entry).st_mode) == 0o644
    assert stat.S_IMODE(os.lstat(entry.parent).st_mode) == 0o755


@pytest.mark.parametrize("change", ["edit", "add", "remove", "code"])
def test_any_change_to_the_tables_or_the_code_parses_again(
    tables: list[Path],
    tmp_path: Path,
    parses: list[list[Path]],
    monkeypatch: pytest.MonkeyPatch,
    change: str,
) -> None:
    entry = tmp_path / "cache" / "tuned.json"
    tuned.cached_options(tables, entry)
    if change == "edit":
        tables[0].write_text(TABLE.replace("swappiness", "dirty_ratio"))
        expected = {("sysctl", "vm.dirty_ratio"): ("throughput-performance",)}
    elif change == "add":
        (tables[0].parent / "b.yaml").write_text(TABLE.replace("throughput", "latency"))
        tables = [*tables, tables[0].parent / "b.yaml"]
        expected = {("sysctl", "vm.swappiness"): ("latency-performance", "throughput-performance")}
    elif change == "remove":
        tables = []
        expected = {}
    else:  # another tuned.py reads the same tables
        code = tmp_path / "tuned.py"
        code.write_text(Path(tuned.__file__).read_text() + "# changed\n")
        monkeypatch.setattr(tuned, "__file__", str(code))
        expected = EXPECTED
    assert tuned.cached_options(tables, entry) == expected
    assert len(parses) == 2


def entry_of(tables: list[Path], rows: object) -> bytes:
    return json.dumps({"key": tuned.options_key(tables), "options": rows}).encode()


@pytest.mark.parametrize(
    "content",
    [
        b"not json",
        b"\xff\xfe garbage",
        b"[" * 100_000,  # nested beyond json's recursion
        b'{"key": "another key", "options": []}',
        b"[]",
        "rows of the wrong shape",
        "a name that is not text",
        "a row too short",
    ],
)
def test_a_damaged_or_foreign_entry_is_ignored_and_replaced(
    tables: list[Path], tmp_path: Path, parses: list[list[Path]], content: bytes | str
) -> None:
    entry = tmp_path / "cache" / "tuned.json"
    wrong_rows = {
        "rows of the wrong shape": {"sysctl": ["vm.swappiness"]},
        "a name that is not text": [["sysctl", "vm.swappiness", [1]]],
        "a row too short": [["sysctl", "vm.swappiness"]],
    }
    entry.parent.mkdir()
    entry.write_bytes(
        entry_of(tables, wrong_rows[content]) if isinstance(content, str) else content
    )
    assert tuned.cached_options(tables, entry) == EXPECTED
    assert len(parses) == 1
    assert json.loads(entry.read_bytes())["key"] == tuned.options_key(tables)  # replaced


def test_an_entry_of_our_shape_is_what_is_used(tables: list[Path], tmp_path: Path) -> None:
    # the other tests' entries are refused for their damage, not for anything else
    entry = tmp_path / "tuned.json"
    entry.write_bytes(entry_of(tables, [["vm", "dirty_ratio", ["a", "b"]]]))
    assert tuned.cached_options(tables, entry) == {("vm", "dirty_ratio"): ("a", "b")}


@pytest.mark.parametrize("link", ["entry", "folder"])
def test_an_entry_reached_through_a_link_is_not_read(
    tables: list[Path], tmp_path: Path, parses: list[list[Path]], link: str
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "tuned.json").write_bytes(entry_of(tables, [["vm", "planted", ["x"]]]))
    if link == "entry":
        (tmp_path / "cache").mkdir()
        (tmp_path / "cache" / "tuned.json").symlink_to(elsewhere / "tuned.json")
    else:
        (tmp_path / "cache").symlink_to(elsewhere)
    assert tuned.cached_options(tables, tmp_path / "cache" / "tuned.json") == EXPECTED
    assert len(parses) == 1
    assert json.loads((elsewhere / "tuned.json").read_bytes())["options"][0][1] == "planted"


@pytest.mark.parametrize("kind", ["fifo", "folder", "unreadable"])
def test_an_entry_that_cannot_be_read_is_ignored(
    tables: list[Path],
    tmp_path: Path,
    parses: list[list[Path]],
    monkeypatch: pytest.MonkeyPatch,
    kind: str,
) -> None:
    entry = tmp_path / "cache" / "tuned.json"
    unreadable_cache_entry(entry, kind, entry_of(tables, [["vm", "private", ["x"]]]), monkeypatch)
    assert tuned.cached_options(tables, entry) == EXPECTED
    assert len(parses) == 1


def test_an_unwritable_cache_only_means_parsing_every_time(
    tables: list[Path], tmp_path: Path, parses: list[list[Path]]
) -> None:
    (tmp_path / "blocker").write_text("a file where the cache folder would be")
    entry = tmp_path / "blocker" / "tuned.json"
    assert tuned.cached_options(tables, entry) == EXPECTED
    assert tuned.cached_options(tables, entry) == EXPECTED
    assert len(parses) == 2


def test_the_shipped_tables_read_the_same_from_the_cache(tmp_path: Path) -> None:
    files = tuned.profiles_files()
    assert files
    parsed = tuned.parsed_options(files)
    assert tuned.cached_options(files, tmp_path / "tuned.json") == parsed  # stored
    assert tuned.cached_options(files, tmp_path / "tuned.json") == parsed  # read back
    assert tuned.shipped_options() == parsed
