"""Both caches serve every user who can run the package, and load in one read."""

from __future__ import annotations

import os
import stat
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import jinja2
import pytest

from generator.cache import read_entry
from generator.inputs import catalog_cache
from generator.paths import make_cache_dir
from generator.render.engine import TemplateCache, make_environment

NOBODY = 65534


def mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A directory another user can reach (pytest's tmp_path is 0700)."""
    directory = Path(tempfile.mkdtemp(prefix="goldtune-caches-"))
    os.chmod(directory, 0o755)  # noqa: S103 -- on purpose: a directory other users can reach
    try:
        yield directory
    finally:
        subprocess.run(["rm", "-rf", "--one-file-system", str(directory)], check=True)


def catalog_folder(root: Path) -> tuple[Path, tuple[Path, ...]]:
    data = root / "gpus"
    data.mkdir()
    (data / "a.yaml").write_text("key: a\n")
    (root / "model.py").write_text("# the model\n")
    return data, (root / "model.py",)


def test_the_catalog_cache_is_readable_by_all(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, strict_umask: None
) -> None:
    monkeypatch.setattr(catalog_cache, "CACHE_DIR", tmp_path / "cache")
    folder, code = catalog_folder(tmp_path)
    catalog_cache.cached(folder, code, lambda: "validated")
    assert mode(tmp_path / "cache") == 0o755
    assert mode(tmp_path / "cache" / "gpus.pickle") == 0o644
    assert sorted(os.listdir(tmp_path / "cache")) == ["gpus.pickle"]  # no temporary left


def test_a_private_cache_folder_we_own_is_opened_up(tmp_path: Path) -> None:
    (tmp_path / "cache").mkdir(mode=0o700)  # what an earlier version made under umask 077
    assert make_cache_dir(tmp_path / "cache")
    assert mode(tmp_path / "cache") == 0o755


def test_a_file_where_the_cache_folder_goes_is_not_a_cache(tmp_path: Path) -> None:
    (tmp_path / "cache").write_text("not a folder")
    assert not make_cache_dir(tmp_path / "cache")


def compiled_bucket(cache: TemplateCache, name: str = "sysctl.conf.j2") -> jinja2.bccache.Bucket:
    env = make_environment()
    source, filename, _ = env.loader.get_source(env, name)  # type: ignore[union-attr]
    bucket = cache.get_bucket(env, name, filename, source)
    bucket.code = compile("result = 42", filename, "exec")
    return bucket


def test_template_cache_entries_are_readable_by_all(tmp_path: Path, strict_umask: None) -> None:
    assert make_cache_dir(tmp_path / "jinja")
    cache = TemplateCache(str(tmp_path / "jinja"), pattern="%s.cache")
    cache.dump_bytecode(compiled_bucket(cache))
    entries = os.listdir(tmp_path / "jinja")
    assert len(entries) == 1 and entries[0].endswith(".cache")  # no temporary left
    assert mode(tmp_path / "jinja") == 0o755
    assert mode(tmp_path / "jinja" / entries[0]) == 0o644


@pytest.mark.parametrize("damage", ["garbage", "truncated", "stale"])
def test_a_damaged_or_stale_template_entry_is_ignored(tmp_path: Path, damage: str) -> None:
    cache = TemplateCache(str(tmp_path), pattern="%s.cache")
    bucket = compiled_bucket(cache)
    cache.dump_bytecode(bucket)
    entry = tmp_path / os.listdir(tmp_path)[0]
    if damage == "garbage":
        entry.write_bytes(b"not a cache entry")
    elif damage == "truncated":
        entry.write_bytes(entry.read_bytes()[:-10])
    loaded = compiled_bucket(cache)
    if damage == "stale":
        loaded.checksum = "the template changed"
    cache.load_bytecode(loaded)
    assert loaded.code is None


def read_as_nobody(root: Path) -> int:
    """In a child that became another user: 0 when both caches serve it without writing."""
    child = os.fork()
    if child:
        return os.waitstatus_to_exitcode(os.waitpid(child, 0)[1])
    try:
        os.setgroups([])
        os.setgid(NOBODY)
        os.setuid(NOBODY)
        catalog_cache.CACHE_DIR = root / "catalog"

        def must_not_validate() -> str:
            os._exit(3)  # validated again: the cache did not serve this user

        value = catalog_cache.cached(root / "gpus", (root / "model.py",), must_not_validate)
        assert value == "from-root"
        cache = TemplateCache(str(root / "jinja"), pattern="%s.cache")
        bucket = compiled_bucket(cache)
        bucket.reset()
        cache.load_bytecode(bucket)
        os._exit(0 if bucket.code is not None else 4)
    finally:
        os._exit(5)


@pytest.mark.skipif(os.geteuid() != 0, reason="becoming another user needs root")
def test_caches_root_filled_serve_another_user_who_cannot_write_them(
    shared_dir: Path, strict_umask: None
) -> None:
    folder, code = catalog_folder(shared_dir)
    catalog_cache.CACHE_DIR, saved = shared_dir / "catalog", catalog_cache.CACHE_DIR
    try:
        catalog_cache.cached(folder, code, lambda: "from-root")
    finally:
        catalog_cache.CACHE_DIR = saved
    assert make_cache_dir(shared_dir / "jinja")
    cache = TemplateCache(str(shared_dir / "jinja"), pattern="%s.cache")
    cache.dump_bytecode(compiled_bucket(cache))
    for path in (folder, *folder.iterdir(), *code):  # the inputs, as an installed package has them
        os.chmod(path, 0o755 if path.is_dir() else 0o644)
    assert read_as_nobody(shared_dir) == 0


# --- who may have written an entry: root, this user, the package folder's owner -----------------


def planted_entry(root: Path) -> Path:
    """``root``/package/cache/entry, as an install has it: the package folder holds the cache."""
    folder = root / "package" / "cache"
    folder.parent.mkdir(mode=0o755)
    assert make_cache_dir(folder)
    entry = folder / "entry.json"
    entry.write_bytes(b"{}")
    os.chmod(entry, 0o644)
    return entry


@pytest.mark.parametrize(
    ("where", "bits"),
    [("entry", 0o020), ("entry", 0o002), ("folder", 0o020), ("folder", 0o002)],
    ids=["entry-group", "entry-others", "folder-group", "folder-others"],
)
def test_an_entry_others_could_have_written_is_not_read(
    tmp_path: Path, where: str, bits: int
) -> None:
    entry = planted_entry(tmp_path)
    assert read_entry(entry) == b"{}"
    target = entry if where == "entry" else entry.parent
    os.chmod(target, stat.S_IMODE(os.stat(target).st_mode) | bits)
    assert read_entry(entry) is None


@pytest.mark.skipif(os.geteuid() != 0, reason="files of another owner need root")
@pytest.mark.parametrize("where", ["entry", "folder"])
def test_an_entry_of_another_user_is_read_only_when_that_user_owns_the_package(
    tmp_path: Path, where: str
) -> None:
    entry = planted_entry(tmp_path)
    os.chown(entry if where == "entry" else entry.parent, NOBODY, NOBODY)
    assert read_entry(entry) is None  # nobody: neither root, nor us, nor the package's owner
    os.chown(entry.parent.parent, NOBODY, NOBODY)  # nobody's package: nobody's cache serves it
    assert read_entry(entry) == b"{}"


def template_cache_with_one_entry(folder: Path) -> TemplateCache:
    """A template cache in ``folder`` (0755, in a 0755 package folder) holding one entry."""
    folder.parent.mkdir(mode=0o755)
    assert make_cache_dir(folder)
    cache = TemplateCache(str(folder), pattern="%s.cache")
    cache.dump_bytecode(compiled_bucket(cache))
    return cache


def test_a_template_entry_others_could_have_written_is_not_loaded(tmp_path: Path) -> None:
    folder = tmp_path / "package" / "jinja"
    cache = template_cache_with_one_entry(folder)
    loaded = compiled_bucket(cache)
    loaded.reset()
    cache.load_bytecode(loaded)
    assert loaded.code is not None
    os.chmod(folder / os.listdir(folder)[0], 0o666)  # noqa: S103 -- the hostile case under test
    loaded = compiled_bucket(cache)
    loaded.reset()
    cache.load_bytecode(loaded)
    assert loaded.code is None


def test_a_linked_template_entry_is_not_followed(tmp_path: Path) -> None:
    folder = tmp_path / "package" / "jinja"
    cache = template_cache_with_one_entry(folder)
    entry = folder / os.listdir(folder)[0]
    entry.rename(tmp_path / "elsewhere")
    entry.symlink_to(tmp_path / "elsewhere")
    loaded = compiled_bucket(cache)
    loaded.reset()
    cache.load_bytecode(loaded)
    assert loaded.code is None
