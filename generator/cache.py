"""Results derived from shipped files, kept between runs beside the package, as ``__pycache__``
keeps compiled modules (the validated catalog: inputs/catalog_cache.py; the tuned table:
render/tuned.py; the fixed scripts' compact forms: model/shellform.py).

What is generic: the key (a digest of a salt, the caller's format and versions, and every file's
name and bytes: the data files and the source files that derive the result from them; or of
bytes the caller has read already), reading an entry, and storing one. An entry is opened
without following a link, neither its folder nor itself, and only as a regular file, and it is
used only when it and its folder could have been written by nobody but root, this user or the
owner of the package folder (who can change the code anyway): owned by one of them, not
writable by group or others. A pickle or marshal entry runs code when loaded, so a cache more
writable than the package would be a way around it. Anything that cannot be read so is no
entry, and the caller derives the result again. Storing is best effort: a read-only install
derives every time. Files are 0644 and the folder 0755 (paths.py), so that a cache root filled
serves every user. What an entry holds and how far it is trusted is the caller's.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import stat
from collections.abc import Iterable
from pathlib import Path

from generator.paths import make_cache_dir, write_cache_file

# A cache entry is small (the largest, the GPU catalog's pickle, is ~30 KB): a larger file is
# not one of ours.
MAX_ENTRY_BYTES = 16 * 1024 * 1024


def files_key(salt: str, files: Iterable[Path]) -> str:
    """The digest of ``salt`` and of each file's name and bytes, in the order given."""
    return contents_key(salt, ((path.name, file_bytes(path)) for path in files))


def file_bytes(path: Path) -> bytes:
    """``path.read_bytes()`` by one open, fstat and read: without io's buffered stream, ~7 us
    less a file (a cold `gen` keys its caches on some 80 files)."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        return read_all(fd, os.fstat(fd).st_size)
    finally:
        os.close(fd)


def read_all(fd: int, size: int) -> bytes:
    """Everything left to read from ``fd``, a file of ``size`` bytes when it was stat'ed: read
    until a read returns nothing (a file system may return less than asked for, as FUSE with
    direct_io or a network file system can; a file may have grown since)."""
    parts = [os.read(fd, size + 1)]
    while part := os.read(fd, 1 << 16):
        parts.append(part)
    return parts[0] if len(parts) == 1 else b"".join(parts)


def contents_key(salt: str, contents: Iterable[tuple[str, bytes]]) -> str:
    """files_key of ``(name, bytes)`` pairs the caller holds already (a file it has read): the
    same digest as files_key's of files with those names and bytes."""
    digest = hashlib.sha256(salt.encode())
    for name, content in contents:
        digest.update(f"\0{name}\0".encode())
        digest.update(content)
    return digest.hexdigest()


def read_entry(path: Path) -> bytes | None:
    """The bytes of the cache entry ``path``, or None: missing, unreadable, a link (the entry or
    its folder), not a regular file, too large, or not written by someone trusted (trusted())."""
    nofollow = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        folder = os.open(path.parent, nofollow | os.O_DIRECTORY)
    except OSError:
        return None
    try:
        if not trusted(os.fstat(folder), path.parent):
            return None
        fd = os.open(path.name, nofollow | os.O_NONBLOCK, dir_fd=folder)  # a FIFO does not block
    except OSError:
        return None
    finally:
        os.close(folder)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_ENTRY_BYTES:
            return None
        if not trusted(info, path.parent):
            return None
        data = os.read(fd, info.st_size + 1)
        # an entry is replaced by a rename, never written in place: one that grew is not ours
        return data if len(data) <= info.st_size else None
    except OSError:
        return None
    finally:
        os.close(fd)


def json_entry(entry: bytes | None, key: str, field: str) -> object:
    """``field`` of a JSON cache entry written for ``key`` (the caller checks its shape), or
    None: no entry, not JSON (or not UTF-8, or nested beyond the parser), not an object, or
    another key."""
    try:
        stored = json.loads(entry) if entry is not None else None
    except (ValueError, RecursionError):
        return None
    if not isinstance(stored, dict) or stored.get("key") != key:
        return None
    return stored.get(field)


def trusted(info: os.stat_result, folder: Path) -> bool:
    """Whether a cache file or folder with ``info`` could only have been written by root, this
    user or the owner of the folder holding the cache folder (the package's): owned by one of
    them and without group or other write permission."""
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return False
    if info.st_uid in (0, os.geteuid()):
        return True
    try:
        return info.st_uid == os.stat(folder.parent).st_uid
    except OSError:
        return False


def store_entry(path: Path, content: bytes) -> None:
    """Write the cache entry ``path`` (atomically, 0644, its folder 0755), or nothing where the
    cache cannot be written."""
    if not make_cache_dir(path.parent):
        return
    with contextlib.suppress(OSError):
        write_cache_file(path, content)
