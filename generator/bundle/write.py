"""Write a rendered bundle to disk: atomically, deterministically, and only where it is ours.

The files are written into a fresh temporary directory beside the target and flushed to disk
(one sync for a whole batch of bundles in a matrix); then the old bundle is renamed aside, the
new one renamed into place and the old one removed. A failure at any point before the swap
leaves the previous bundle byte for byte as it was and removes the temporary directory. The target is never followed through a symbolic link, and an existing
directory is only replaced when it is empty or a goldtune bundle (our manifest.json, and no file
the manifest does not list).
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path, PurePosixPath

from generator import TOOL
from generator.bundle.read import MANIFEST, MAX_BUNDLE_FILE_BYTES, holds_own_plan
from generator.foreign import read_beneath
from generator.errors import GenerationError, GoldtuneError, InputError, Problem

DIR_MODE = 0o755
# NAME_MAX of Linux file systems, less what the staging and aside names add to the target's:
# ".<name>.goldtune-new-" and mkdtemp's 8 random characters.
MAX_NAME_BYTES = 255 - len(f"..{TOOL}-new-") - 8
MAX_LISTED = 5


def write_bundle(files: Mapping[str, tuple[bytes, int]], target: Path) -> Path:
    """Replace ``target`` with exactly ``files``; returns the absolute bundle directory."""
    outcome = write_bundles([(files, target)])[0]
    if isinstance(outcome, GoldtuneError):
        raise outcome
    return outcome


def write_bundles(bundles: Sequence[tuple[Mapping[str, tuple[bytes, int]], Path]]) -> list[Path | GoldtuneError]:
    """Write several bundles with one flush to disk: stage each, sync once, then swap each in.

    Each bundle still replaces its target atomically and only once its files are durable; a
    bundle that fails leaves its target as it was and does not stop the others. The result is,
    per bundle, its absolute directory or the error.
    """
    staged: list[tuple[Path, Path] | GoldtuneError] = []
    try:
        for files, target in bundles:
            try:
                staged.append(stage_bundle(files, Path(os.path.abspath(target))))
            except GoldtuneError as error:
                staged.append(error)
        # One flush of everything written instead of an fsync per file and directory: the new
        # trees are durable before they are swapped in, at a fraction of the cost.
        os.sync()
    except BaseException:
        for item in staged:
            if not isinstance(item, GoldtuneError):
                shutil.rmtree(item[0], ignore_errors=True)
        raise
    return [item if isinstance(item, GoldtuneError) else _swap_or_error(*item) for item in staged]


def stage_bundle(files: Mapping[str, tuple[bytes, int]], target: Path) -> tuple[Path, Path]:
    """Write ``files`` into a new temporary directory beside ``target``: (staging, target)."""
    check_bundle_paths(files)
    try:
        check_target(target)
    except OSError as error:
        raise GenerationError(f"{target}: cannot inspect the output directory: {error.strerror}") from error
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.{TOOL}-new-", dir=target.parent))
    except OSError as error:
        raise GenerationError(f"{target.parent}: cannot create the bundle here: {error.strerror}") from error
    try:
        write_tree(staging, files)
    except BaseException as error:
        shutil.rmtree(staging, ignore_errors=True)
        if isinstance(error, OSError):
            raise GenerationError(f"{target}: cannot write the bundle: {error.strerror or error}") from error
        raise
    return staging, target


def _swap_or_error(staging: Path, target: Path) -> Path | GoldtuneError:
    try:
        swap_in(staging, target)
    except BaseException as error:
        shutil.rmtree(staging, ignore_errors=True)
        if isinstance(error, OSError):
            return GenerationError(f"{target}: cannot write the bundle: {error.strerror or error}")
        raise
    return target


def check_target(target: Path) -> None:
    """Refuse a symlink, a non-directory, ``/``, or a directory that is not an empty dir or a bundle."""
    if target.parent == target:
        raise InputError(Problem(str(target), "", "refusing to replace the root directory"))
    if len(os.fsencode(target.name)) > MAX_NAME_BYTES:
        size = len(os.fsencode(target.name))
        raise InputError(Problem(str(target), "", f"the directory name is {size} bytes; at most "
                                 f"{MAX_NAME_BYTES} (the bundle is staged beside it under a longer "
                                 "name)"))
    try:
        info = os.lstat(target)
    except FileNotFoundError:
        return
    if stat.S_ISLNK(info.st_mode):
        raise InputError(Problem(str(target), "", "is a symbolic link; refusing to follow or replace it",
                                 "give the real directory with -o"))
    if not stat.S_ISDIR(info.st_mode):
        raise InputError(Problem(str(target), "", "exists and is not a directory; refusing to replace it"))
    with os.scandir(target) as children:
        if next(children, None) is None:
            return
    listed = read_manifest_paths(target)
    if listed is None:
        raise InputError(Problem(str(target), "", f"is a non-empty directory that is not a {TOOL} bundle "
                                 f"(no {TOOL} {MANIFEST}); refusing to replace it", "choose a new or empty directory with -o"))
    foreign = sorted(bundle_entries(target) - listed - {MANIFEST})
    if foreign:
        shown = ", ".join(foreign[:MAX_LISTED]) + (", ..." if len(foreign) > MAX_LISTED else "")
        raise InputError(Problem(str(target), "", f"holds files the {TOOL} manifest does not list ({shown}); "
                                 "refusing to replace it", "move them away or choose another directory with -o"))


def bundle_entries(directory: Path) -> set[str]:
    """Every non-directory entry below ``directory``, as bundle paths (symlinks not followed)."""
    found: set[str] = set()
    for parent, dirs, names in os.walk(directory):
        relative = PurePosixPath(Path(parent).relative_to(directory))
        found.update(str(relative / name) for name in names)
        found.update(str(relative / name) for name in dirs if os.path.islink(os.path.join(parent, name)))
    return {path.removeprefix("./") for path in found}


def read_manifest_paths(directory: Path) -> set[str] | None:
    """The paths a goldtune manifest in ``directory`` lists, or None when it is not ours."""
    try:  # a regular file, not a link, a FIFO or a huge file
        data = json.loads(read_beneath(directory, MANIFEST, MAX_BUNDLE_FILE_BYTES))
    except (InputError, ValueError, RecursionError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("tool"), dict) or data["tool"].get("name") != TOOL:
        return None
    files = data.get("files")
    if not isinstance(files, list) or not holds_own_plan(directory, files):
        return None
    return {entry["path"] for entry in files if isinstance(entry, dict) and isinstance(entry.get("path"), str)}


def check_bundle_paths(files: Mapping[str, tuple[bytes, int]]) -> None:
    """Every path is relative and stays inside the bundle (a renderer bug otherwise)."""
    for path in files:
        parts = path.split("/")
        if "\\" in path or any(part in {"", ".", ".."} for part in parts):
            raise GenerationError(f"refusing to write {path!r}: not a plain relative path inside the bundle")


def write_tree(root: Path, files: Mapping[str, tuple[bytes, int]]) -> None:
    os.chmod(root, DIR_MODE)
    for path, (content, mode) in sorted(files.items()):
        write_file(root, path, content, mode)


def write_file(root: Path, path: str, content: bytes, mode: int) -> None:
    """Create one new file (never through a symlink) with exactly ``mode``."""
    destination = root / path
    make_directories(root, destination.parent)
    fd = os.open(destination, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        view = memoryview(content)
        while view:
            view = view[os.write(fd, view):]
        os.fchmod(fd, mode)
    finally:
        os.close(fd)


def make_directories(root: Path, directory: Path) -> None:
    missing = []
    while directory != root and not directory.is_dir():
        missing.append(directory)
        directory = directory.parent
    for path in reversed(missing):
        path.mkdir()
        os.chmod(path, DIR_MODE)


def fsync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def swap_in(staging: Path, target: Path) -> None:
    """Rename the old bundle aside, the new one in, then remove the old one."""
    if not os.path.lexists(target):
        os.rename(staging, target)
        fsync_directory(target.parent)
        return
    aside = Path(tempfile.mkdtemp(prefix=f".{target.name}.{TOOL}-old-", dir=target.parent))
    os.rmdir(aside)  # only the unique name is needed
    os.rename(target, aside)
    try:
        os.rename(staging, target)
    except BaseException:
        os.rename(aside, target)
        raise
    fsync_directory(target.parent)
    shutil.rmtree(aside, ignore_errors=True)
