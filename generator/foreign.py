"""Reading files other people made: inputs, bundles, snapshots, images.

Every foreign file goes through ``read_foreign`` (a path as given) or ``read_beneath`` (a path
inside a directory that must not be left). Both accept only a regular file, open it without
blocking (a FIFO or a device never hangs the run), check it again on the open descriptor (so a
swap between the check and the open is caught) and read at most ``limit`` bytes, so an endless or
huge file is refused instead of filling memory. ``read_beneath`` never follows a symbolic link,
in the file's name or in any directory on the way to it.

A tree that is a whole machine (an image, a captured /proc and /sys) has links that must be
followed, but only inside it: ``resolve_within`` resolves one component at a time as a chroot
would, an absolute target counting from the root.
"""

from __future__ import annotations

import errno
import os
import re
import stat
from pathlib import Path, PurePosixPath

from generator.errors import InputError, Problem

# A file descriptor read in chunks of this size: the cap is enforced without reading past it.
CHUNK = 1 << 16
# What PyYAML's safe loaders raise on foreign text besides yaml.YAMLError: RecursionError on
# deep nesting (its composer and constructor recurse), ValueError on an integer of more than
# 4,300 digits, and the rest from a constructor given a scalar its tag cannot hold.
YAML_VALUE_ERRORS = (RecursionError, ValueError, TypeError, OverflowError, LookupError)
# The most digits a number read from a foreign file may have: far more than any count, size,
# address or timestamp a machine prints (2**64 has 20 digits), far fewer than the 4,300 past
# which int() raises ValueError. A longer run of digits is bad input wherever it is.
MAX_NUMBER_DIGITS = 100
_KINDS = {
    stat.S_IFIFO: "a FIFO",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFSOCK: "a socket",
    stat.S_IFDIR: "a directory",
    stat.S_IFLNK: "a symbolic link",
}
_OPEN_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | getattr(os, "O_NOCTTY", 0)
_DIR_FLAGS = os.O_RDONLY | os.O_CLOEXEC | getattr(os, "O_DIRECTORY", 0) | os.O_NOFOLLOW


def kind_of(mode: int) -> str:
    """``a FIFO``, ``a directory``…: what a file that is not a regular file is."""
    return _KINDS.get(stat.S_IFMT(mode), "not a regular file")


def _size_text(limit: int) -> str:
    return f"{limit // (1024 * 1024)} MiB" if limit >= 2 * 1024 * 1024 else f"{limit // 1024} KiB"


def _refusal(error: OSError) -> str:
    if error.errno == errno.ENOENT:
        return "no such file"
    if error.errno == errno.ELOOP:
        return "is a symbolic link; refusing to follow it"
    if error.errno == errno.ENOTDIR:
        return "a directory on its path is a symbolic link or a file; refusing to follow it"
    if error.errno == errno.EISDIR:
        return "is a directory, expected a file"
    return f"cannot read: {error.strerror or error}"


def not_regular(source: str, mode: int) -> InputError:
    return InputError(Problem(source, "", f"is {kind_of(mode)}, expected a regular file"))


def _read_descriptor(fd: int, source: str, limit: int) -> bytes:
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        raise not_regular(source, info.st_mode)
    too_big = Problem(source, "", f"file is larger than {_size_text(limit)}; refusing to read it")
    if info.st_size > limit:
        raise InputError(too_big)
    chunks: list[bytes] = []
    total = 0
    while total <= limit:  # the size can grow after fstat: count what is really read
        chunk = os.read(fd, min(CHUNK, limit + 1 - total))
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        total += len(chunk)
    raise InputError(too_big)


def read_foreign(path: Path, limit: int, follow_links: bool = True) -> bytes:
    """The bytes of the regular file ``path`` (at most ``limit``); anything else: InputError."""
    source = str(path)
    try:
        info = os.stat(path, follow_symlinks=follow_links)
        if not stat.S_ISREG(info.st_mode):  # checked before open: a device is never opened
            raise not_regular(source, info.st_mode)
        fd = os.open(path, _OPEN_FLAGS | (0 if follow_links else os.O_NOFOLLOW))
    except OSError as error:
        raise InputError(Problem(source, "", _refusal(error))) from None
    except ValueError:  # an embedded NUL in the name
        raise InputError(Problem(source, "", "not a usable file name")) from None
    try:
        return _read_descriptor(fd, source, limit)
    except OSError as error:
        raise InputError(Problem(source, "", _refusal(error))) from None
    finally:
        os.close(fd)


def relative_parts(relative: str) -> list[str]:
    """The components of a plain relative path; ValueError for one that could leave its root."""
    parts = PurePosixPath(relative).parts
    leaves = relative.startswith("/") or "\0" in relative or any(p in ("..", ".") for p in parts)
    if not parts or leaves:
        raise ValueError(f"{relative!r} is not a plain relative path")
    return list(parts)


def open_beneath(root: Path, relative: str) -> int:
    """A descriptor of ``root/relative`` opened without following any link below ``root``.

    Each directory is opened relative to the one before it with O_NOFOLLOW, so a link planted
    anywhere on the way (``rootfs/etc -> /etc``) fails with ELOOP or ENOTDIR instead of leading out.
    """
    parts = relative_parts(relative)
    directory = os.open(root, os.O_RDONLY | os.O_CLOEXEC | getattr(os, "O_DIRECTORY", 0))
    try:
        for part in parts[:-1]:
            inner = os.open(part, _DIR_FLAGS, dir_fd=directory)
            os.close(directory)
            directory = inner
        info = os.stat(parts[-1], dir_fd=directory, follow_symlinks=False)
        if not stat.S_ISREG(info.st_mode):
            code = errno.ELOOP if stat.S_ISLNK(info.st_mode) else errno.EINVAL
            raise OSError(code, kind_of(info.st_mode))
        return os.open(parts[-1], _OPEN_FLAGS | os.O_NOFOLLOW, dir_fd=directory)
    finally:
        os.close(directory)


def read_beneath_with_mode(root: Path, relative: str, limit: int) -> tuple[bytes, int]:
    """The bytes and permission bits of the regular file ``root/relative``, never through a link."""
    source = str(root / relative)
    try:
        fd = open_beneath(root, relative)
    except ValueError as error:
        raise InputError(Problem(source, "", str(error))) from None
    except OSError as error:
        # EINVAL is open_beneath's "not a regular file"; its strerror names the kind of file
        reason = f"is {error.strerror}, expected a regular file"
        raise InputError(
            Problem(source, "", reason if error.errno == errno.EINVAL else _refusal(error))
        ) from None
    try:
        return _read_descriptor(fd, source, limit), stat.S_IMODE(os.fstat(fd).st_mode)
    except OSError as error:
        raise InputError(Problem(source, "", _refusal(error))) from None
    finally:
        os.close(fd)


def read_beneath(root: Path, relative: str, limit: int) -> bytes:
    """The bytes of the regular file ``root/relative``, never through a symbolic link."""
    return read_beneath_with_mode(root, relative, limit)[0]


# The kernel's limit on links followed in one lookup (MAXSYMLINKS): past it, ELOOP.
MAX_LINK_HOPS = 40


class EscapesRootError(Exception):
    """A ``..`` of a path or of a link's target climbs above the root."""


class TooManyLinksError(Exception):
    """More than MAX_LINK_HOPS links on the way: a loop, or a tree built to exhaust the reader."""


def resolve_within(root: Path, path: str, clamp_at_root: bool = False) -> Path | None:
    """The host path of the tree path ``path``, with every link resolved inside ``root``.

    None when a component is absent. An absolute link target counts from ``root``. A ``..``
    above the root stays at the root with ``clamp_at_root`` (what the kernel does in a chroot,
    right for an OS image), else raises EscapesRootError (a captured sysfs never needs it). Raises
    TooManyLinksError past MAX_LINK_HOPS, and OSError for a component that cannot be examined.
    """
    pending = [part for part in PurePosixPath(path).parts if part != "/"]
    resolved: list[str] = []
    hops = 0
    while pending:
        part = pending.pop(0)
        if part in ("", "."):
            continue
        if part == "..":
            if not resolved and not clamp_at_root:
                raise EscapesRootError(path)
            resolved = resolved[:-1]
            continue
        host = root.joinpath(*resolved, part)
        try:
            info = os.lstat(host)
        except (FileNotFoundError, NotADirectoryError):
            return None
        if stat.S_ISLNK(info.st_mode):
            hops += 1
            if hops > MAX_LINK_HOPS:
                raise TooManyLinksError(path)
            target = PurePosixPath(os.readlink(host))
            if target.is_absolute():
                resolved = []
            pending = [p for p in target.parts if p != "/"] + pending
            continue
        resolved.append(part)
    return root.joinpath(*resolved)


def overlong_number(text: str) -> int:
    """The length of the longest run of digits in ``text`` when it is over MAX_NUMBER_DIGITS
    (bad input: no int() of it can be made), else 0."""
    if not re.search(rf"\d{{{MAX_NUMBER_DIGITS + 1}}}", text):  # one pass, no list: most text
        return 0
    return max(map(len, re.findall(r"\d+", text)))
