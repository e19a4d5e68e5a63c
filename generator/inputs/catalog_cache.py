"""Validated catalog entries kept between runs, as ``__pycache__`` keeps compiled modules.

Reading and validating the shipped ``hardware_db/`` files is a fixed cost of every run that grows
with the catalog. The validated entries of one folder are pickled under
``generator/__catalog_cache__/`` together with a key: the digest of every file's name and bytes
in the folder, of the source files that define, read and validate the entries, and the versions
of goldtune, pydantic, PyYAML and Python. A changed, added or removed file, or a changed model,
changes the key, and the folder is validated again. A cache that cannot be read, or is reached
through a link, is ignored (generator/cache.py reads and stores the entries); a read-only install
simply validates every time. Files are 0644 and the folder 0755, so that a cache root filled
serves every user. Like ``__pycache__``, whoever can write the package can change what it runs.
"""

from __future__ import annotations

import contextlib
import pickle
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pydantic
import yaml

from generator import __version__
from generator.cache import files_key, read_entry, store_entry
from generator.paths import cache_dir, files_ending

CACHE_DIR = cache_dir("__catalog_cache__")
FORMAT = 1

T = TypeVar("T")


def cache_key(folder: Path, code: tuple[Path, ...]) -> str:
    salt = f"{FORMAT}\0{__version__}\0{pydantic.VERSION}\0{yaml.__version__}\0{sys.version}"
    return files_key(salt, [*code, *files_ending(folder, ".yaml")])


def cached(folder: Path, code: tuple[Path, ...], load: Callable[[], T]) -> T:
    """``load()``'s result for ``folder``, from the cache when neither the folder's YAML files
    nor the ``code`` files that define its models changed since it was stored."""
    key = cache_key(folder, code)
    path = CACHE_DIR / f"{folder.name}.pickle"
    stored = read_entry(path)
    if stored is not None:
        try:
            stored_key, value = pickle.loads(stored)
            if stored_key == key:
                return value  # type: ignore[no-any-return]
        except Exception:  # noqa: S110 -- an unreadable or foreign cache is ignored: validated again
            pass
    value = load()
    with contextlib.suppress(pickle.PicklingError):
        store_entry(path, pickle.dumps((key, value), protocol=pickle.HIGHEST_PROTOCOL))
    return value
