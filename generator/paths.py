"""Where the shipped data lives, installed or in a source checkout."""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path

_PACKAGE_DIR = Path(__file__).resolve().parent
# Caches are read by every user who can run the package (root often fills them), like
# __pycache__: files 0644, folders 0755, whatever the umask of the run that wrote them.
CACHE_FILE_MODE = 0o644
CACHE_DIR_MODE = 0o755


def cache_dir(name: str) -> Path:
    """A cache folder inside the installed package (like __pycache__), never in the data folders."""
    return _PACKAGE_DIR / name


def make_cache_dir(directory: Path) -> bool:
    """Create ``directory`` readable by all (or fix the mode of one we own); False if we cannot."""
    try:
        directory.mkdir(mode=CACHE_DIR_MODE, exist_ok=True)
        info = os.lstat(directory)
        if not stat.S_ISDIR(info.st_mode):
            return False
        if stat.S_IMODE(info.st_mode) != CACHE_DIR_MODE and info.st_uid == os.geteuid():
            os.chmod(directory, CACHE_DIR_MODE)
    except OSError:
        return False
    return True


def write_cache_file(path: Path, content: bytes) -> None:
    """Replace ``path`` with ``content``, mode 0644, atomically (a reader sees old or new).

    Raises OSError when the cache cannot be written (a read-only install).
    """
    import tempfile  # only when a cache is (re)written, not in every run

    fd, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as stream:
            stream.write(content)
            os.fchmod(stream.fileno(), CACHE_FILE_MODE)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


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


def files_ending(folder: Path, suffix: str) -> list[Path]:
    """``sorted(folder.glob("*" + suffix))``, by one listdir: pathlib's glob compiles its pattern
    and builds a path per entry it tests (~0.1 ms a folder; a cold `gen` lists seven). Like
    glob, a folder that is missing or cannot be listed has no files."""
    try:
        names = os.listdir(folder)
    except (FileNotFoundError, NotADirectoryError, PermissionError):
        return []
    return sorted(folder / name for name in names if name.endswith(suffix))


# The site catalog (generator/inputs/catalog.py): `gen --catalog DIR` (use_site_catalog), else
# this environment variable. Kept here, not beside the catalog's models, so that the command line
# sets it without importing them.
SITE_CATALOG_ENV = "GOLDTUNE_CATALOG"
_site_catalog: list[Path] = []  # what --catalog named, for every catalog of this run


def use_site_catalog(folder: Path) -> None:
    """Read ``folder`` as the site catalog for the rest of this run (`gen --catalog`)."""
    _site_catalog[:] = [folder]


def site_catalog_named() -> tuple[Path, str] | None:
    """The site catalog this run names and where it was named, or None."""
    if _site_catalog:
        return _site_catalog[0], "--catalog"
    named = os.environ.get(SITE_CATALOG_ENV)
    return (Path(named), f"${SITE_CATALOG_ENV}") if named else None
