"""The validated-catalog cache: used when nothing changed, rebuilt when anything did, never
required."""

from __future__ import annotations

from pathlib import Path

import pytest

from generator.inputs import catalog_cache
from generator.inputs.catalog import GpuModel, _load_entries, load_catalog
from generator.paths import hardware_db_dir


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(catalog_cache, "CACHE_DIR", tmp_path / "cache")
    data = tmp_path / "gpus"
    data.mkdir()
    (data / "a.yaml").write_text("key: a\n")
    (tmp_path / "model.py").write_text("# the model\n")
    return data


def loader(calls: list[str], value: str):  # type: ignore[no-untyped-def]
    def load() -> str:
        calls.append(value)
        return value

    return load


def test_second_load_comes_from_the_cache(folder: Path) -> None:
    code = (folder.parent / "model.py",)
    calls: list[str] = []
    assert catalog_cache.cached(folder, code, loader(calls, "first")) == "first"
    assert catalog_cache.cached(folder, code, loader(calls, "second")) == "first"
    assert calls == ["first"]


@pytest.mark.parametrize("change", ["edit", "add", "remove", "code"])
def test_any_change_to_the_files_or_the_model_code_validates_again(
    folder: Path, change: str
) -> None:
    code = (folder.parent / "model.py",)
    calls: list[str] = []
    catalog_cache.cached(folder, code, loader(calls, "old"))
    if change == "edit":
        (folder / "a.yaml").write_text("key: a\nname: changed\n")
    elif change == "add":
        (folder / "b.yaml").write_text("key: b\n")
    elif change == "remove":
        (folder / "a.yaml").unlink()
    else:
        code[0].write_text("# the model, changed\n")
    assert catalog_cache.cached(folder, code, loader(calls, "new")) == "new"
    assert calls == ["old", "new"]


def test_a_damaged_cache_file_is_ignored_and_replaced(folder: Path) -> None:
    code = (folder.parent / "model.py",)
    calls: list[str] = []
    catalog_cache.cached(folder, code, loader(calls, "first"))
    (catalog_cache.CACHE_DIR / "gpus.pickle").write_bytes(b"not a pickle")
    assert catalog_cache.cached(folder, code, loader(calls, "again")) == "again"
    assert catalog_cache.cached(folder, code, loader(calls, "third")) == "again"
    assert calls == ["first", "again"]


def test_an_unwritable_cache_only_means_validating_every_time(
    folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = folder.parent / "blocker"
    blocker.write_text("a file where the cache directory would be")
    monkeypatch.setattr(catalog_cache, "CACHE_DIR", blocker / "cache")
    code = (folder.parent / "model.py",)
    calls: list[str] = []
    assert catalog_cache.cached(folder, code, loader(calls, "one")) == "one"
    assert catalog_cache.cached(folder, code, loader(calls, "two")) == "two"
    assert calls == ["one", "two"]


def test_a_failed_load_stores_nothing(folder: Path) -> None:
    code = (folder.parent / "model.py",)

    def broken() -> str:
        raise ValueError("bad entry")

    with pytest.raises(ValueError, match="bad entry"):
        catalog_cache.cached(folder, code, broken)
    assert not list(catalog_cache.CACHE_DIR.glob("*.pickle"))


def test_cached_shipped_entries_equal_freshly_validated_ones() -> None:
    load_catalog().gpus  # make sure the cache exists
    cached_entries = load_catalog().gpus.entries
    fresh = sorted(_load_entries(hardware_db_dir() / "gpus", GpuModel), key=lambda entry: entry.key)
    assert list(cached_entries) == fresh
    assert cached_entries[0].power == fresh[0].power


def test_a_cache_file_reached_through_a_link_is_not_read(folder: Path, tmp_path: Path) -> None:
    code = (folder.parent / "model.py",)
    calls: list[str] = []
    catalog_cache.cached(folder, code, loader(calls, "first"))
    planted = tmp_path / "planted.pickle"
    (catalog_cache.CACHE_DIR / "gpus.pickle").rename(planted)  # a valid entry, elsewhere
    (catalog_cache.CACHE_DIR / "gpus.pickle").symlink_to(planted)
    assert catalog_cache.cached(folder, code, loader(calls, "again")) == "again"
    assert calls == ["first", "again"]
    assert not (catalog_cache.CACHE_DIR / "gpus.pickle").is_symlink()  # replaced, not followed


def test_the_key_covers_the_code_and_versions_that_shape_the_entries(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What a validated entry is also depends on how its YAML is read (yamlio.py, PyYAML) and on
    the MIG profile-name pattern its model checks (model/mig.py): a change there must validate
    again, not serve entries the new code would refuse or read otherwise."""
    import yaml

    from generator.inputs import catalog, yamlio
    from generator.model import mig

    seen: list[tuple[Path, ...]] = []

    def record(folder: Path, code: tuple[Path, ...], load):  # type: ignore[no-untyped-def]
        seen.append(code)
        return load()

    monkeypatch.setattr(catalog, "cached", record)
    catalog._load_index(hardware_db_dir() / "gpus", "GPU", GpuModel)
    assert {Path(mig.__file__), Path(yamlio.__file__)} <= set(seen[0])
    versions = catalog_cache.cache_key(hardware_db_dir() / "gpus", seen[0])
    monkeypatch.setattr(yaml, "__version__", yaml.__version__ + ".other")
    assert catalog_cache.cache_key(hardware_db_dir() / "gpus", seen[0]) != versions
