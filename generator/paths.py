"""Where the shipped data lives, installed or in a source checkout."""

from __future__ import annotations

from pathlib import Path

_PACKAGE_DIR = Path(__file__).resolve().parent


def cache_dir(name: str) -> Path:
    """A cache folder inside the installed package (like __pycache__), never in the data folders."""
    return _PACKAGE_DIR / name


def data_dir(name: str) -> Path:
    """Return the shipped data folder ``name`` (templates, hardware_db, profiles).

    A wheel carries the folders inside the package; a source checkout (editable install or
    PYTHONPATH) has them beside the package at the top of the repository.
    """
    installed = _PACKAGE_DIR / name
    if installed.is_dir():
        return installed
    return _PACKAGE_DIR.parent / name


def templates_dir() -> Path:
    return data_dir("templates")


def hardware_db_dir() -> Path:
    return data_dir("hardware_db")


def profiles_dir() -> Path:
    return data_dir("profiles")
