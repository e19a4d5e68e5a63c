"""The input models' validators kept between runs, beside the validated catalog.

Pydantic builds a model's validator in two steps: it generates the model's core schema from
the classes (in Python: ~2.7 ms for HardwareSpec, ~2.0 for ProfileFile, of every cold `gen`),
then pydantic-core compiles that schema (~0.02 ms). A ``SchemaValidator`` pickles as its core
schema and config, the model classes in it by name, so an entry holds what the first step made
and loading it (~0.15 ms) runs only the second. The key is the digest of every source file of
``generator/inputs`` and ``generator/model`` (the models, the names their fields are built from:
patterns, Literals, the setting kinds, the MIG profile pattern) and of the versions of goldtune,
pydantic, pydantic-core and Python; a change to any of them builds the validator again.

An entry is used only as generator/cache.py reads one (no link followed, written by a trusted
user), for its key, and only while no pydantic plugin is installed: with one, pydantic wraps
the validator in the plugin's hooks, so the model builds its own, as without this cache.
"""

from __future__ import annotations

import contextlib
import functools
import pickle
import sys
from pathlib import Path
from typing import Any, Protocol

import pydantic
import pydantic_core
from pydantic import BaseModel
from pydantic_core import SchemaValidator

from generator import __version__
from generator.cache import files_key, read_entry, store_entry
from generator.paths import cache_dir, files_ending

CACHE_DIR = cache_dir("__catalog_cache__")
FORMAT = 1
# The packages whose source shapes a model's schema: the models themselves and every name
# their fields are made of (hardware.BundleName in a profile, model.setting's kinds, ...).
CODE_DIRS = (Path(__file__).parent, Path(__file__).parent.parent / "model")


class Validator(Protocol):
    """pydantic-core's SchemaValidator, or pydantic's wrapper of it when plugins are installed."""

    def validate_python(self, input: Any, /) -> Any: ...


@functools.cache
def code_files() -> tuple[Path, ...]:
    """The source files the key covers (CODE_DIRS' modules; neither has subpackages)."""
    return tuple(sorted(path for folder in CODE_DIRS for path in files_ending(folder, ".py")))


@functools.cache
def cache_key() -> str:
    """The same for every model of one run: computed once (~0.4 ms for the 23 files)."""
    salt = (
        f"{FORMAT}\0{__version__}\0{pydantic.VERSION}\0{pydantic_core.__version__}\0{sys.version}"
    )
    return files_key(salt, list(code_files()))


def keyed(model: type[BaseModel]) -> bool:
    """Whether the key covers ``model``'s own source: a module file among code_files(). Not for
    a model defined elsewhere, nor an install without sources (bytecode or a zip only), where
    the key would hold the versions alone."""
    module = sys.modules.get(model.__module__)
    source = getattr(module, "__file__", None)
    return source is not None and Path(source) in code_files()


def entry_path(model: type[BaseModel]) -> Path:
    return CACHE_DIR / f"validator.{model.__module__}.{model.__qualname__}.pickle"


def plugins_installed() -> bool:
    """Whether pydantic would wrap a validator in plugins' hooks (its own test, by entry points:
    the floor of every pydantic program pays it anyway); True when that cannot be told."""
    try:
        from pydantic.plugin._loader import get_plugins
    except ImportError:
        return True
    return bool(get_plugins())


def stored_validator(model: type[BaseModel]) -> SchemaValidator | None:
    """The validator stored for ``model`` under this run's key, or None."""
    entry = read_entry(entry_path(model))
    if entry is None:
        return None
    try:
        key, validator = pickle.loads(entry)
    except Exception:  # an unreadable or foreign entry is no entry
        return None
    if key != cache_key() or not isinstance(validator, SchemaValidator):
        return None
    return validator


def store_validator(model: type[BaseModel], validator: object) -> None:
    """Keep ``validator`` for later runs when it is pydantic-core's own (not plugins' wrapper)
    and pickles (a schema holding an unnamed function does not: then nothing is stored)."""
    if type(validator) is not SchemaValidator:
        return
    with contextlib.suppress(pickle.PicklingError, TypeError, AttributeError):
        store_entry(entry_path(model), pickle.dumps((cache_key(), validator), protocol=5))


@functools.cache
def validator_of(model: type[BaseModel]) -> Validator:
    """``model``'s validator: from the cache when it holds one for this code, else built by
    pydantic (and stored). Once per model and process."""
    if not model.__pydantic_complete__ and keyed(model) and not plugins_installed():
        validator = stored_validator(model)
        if validator is not None:
            return validator
        model.model_rebuild()
        store_validator(model, model.__pydantic_validator__)
    else:
        model.model_rebuild()
    return model.__pydantic_validator__
