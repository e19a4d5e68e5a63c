"""Reading a machine's /proc, /sys and /etc, or a captured copy of them, without trusting it.

A captured tree may come from anyone. Every path is resolved here, one component at a time,
inside the root: a link is followed only while it stays inside (an absolute target counts from
the root, as in a chroot), a ``..`` above the root is refused, and after 40 hops resolution
stops (the kernel's ELOOP limit). Only regular files are read, opened non-blocking so a FIFO
cannot hang the reader, and never more than ``MAX_FILE_BYTES``: sysfs and procfs files say
4096 bytes or 0 in ``stat``, so the size is never trusted either.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from generator.errors import InputError, Problem
from generator.foreign import EscapesRootError, TooManyLinksError, resolve_within

MAX_FILE_BYTES = 256 * 1024  # /proc/cpuinfo of a 1024-CPU machine is about 1.5 KiB per CPU
MAX_DIR_ENTRIES = 4096
MAX_SHOWN_CHARS = 40
# Every count and size a machine reports (KiB of memory, CPU and node numbers, page sizes) fits
# in 64 bits: a longer number is forged, and Python's int() raises ValueError on one of more
# than 4,300 digits deep inside the parse.
MAX_DIGITS = 19


def shown(text: str, limit: int = MAX_SHOWN_CHARS) -> str:
    """A short, escaped rendering of a foreign value for an error or a comment."""
    escaped = text.encode("unicode_escape", "backslashreplace").decode("ascii")
    return escaped if len(escaped) <= limit else escaped[:limit] + "..."


def decimal(digits: str, source: str, field: str = "") -> int:
    """A decimal number read from a foreign file; bad input (one line, exit 2) when it is
    longer than any real count or size."""
    if len(digits) > MAX_DIGITS:
        what = f"a number of {len(digits)} digits ({shown(digits, 20)}); refused"
        raise InputError(Problem(source, field, what))
    return int(digits)


class Tree:
    """The files of one machine under ``root`` (``/`` for the machine this runs on)."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def label(self, path: str) -> str:
        """How a path of the tree is named in messages: as the user would find it."""
        return str(self.root / path.lstrip("/")) if str(self.root) != "/" else path

    def resolve(self, path: str) -> Path | None:
        """The host path of ``path`` with every link resolved inside the root; None if absent.

        Raises InputError when a link leads out of the root or loops.
        """
        try:
            return resolve_within(self.root, path)
        except EscapesRootError:
            reason = "a link leads out of the tree; refused"
        except TooManyLinksError:
            reason = "too many levels of links; refused"
        except OSError as error:
            reason = f"cannot read: {error.strerror}"
        raise InputError(Problem(self.label(path), "", reason))

    def read(self, path: str, limit: int = MAX_FILE_BYTES) -> str | None:
        """The text of a regular file (at most ``limit`` bytes); None if absent or unreadable.

        Sysfs files that exist but cannot be read (a link's ``speed`` while it is down gives
        EINVAL) also give None: to a description they are unknown, not an error.
        """
        host = self.resolve(path)
        if host is None:
            return None
        # Decided from lstat before any open: opening a device node can act (a watchdog node
        # arms the watchdog), so only a regular file is ever opened; fstat below catches a
        # swap between the two.
        try:
            if not stat.S_ISREG(os.lstat(host).st_mode):
                raise InputError(Problem(self.label(path), "", "not a regular file; refused"))
        except OSError:
            return None
        flags = os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC
        try:
            fd = os.open(host, flags)
        except OSError:
            return None
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise InputError(Problem(self.label(path), "", "not a regular file; refused"))
            data = _read_capped(fd, limit)
        except OSError:
            return None
        finally:
            os.close(fd)
        if data is None:
            raise InputError(
                Problem(self.label(path), "", f"larger than {limit // 1024} KiB; refused")
            )
        return data.decode("utf-8", errors="replace")

    def value(self, path: str) -> str | None:
        """A one-value sysfs file, stripped; None if absent, unreadable or empty."""
        text = self.read(path, limit=4096)
        stripped = text.strip() if text is not None else ""
        return stripped or None

    def entries(self, path: str) -> list[str]:
        """Sorted names in a directory of the tree; empty if it is absent."""
        host = self.resolve(path)
        if host is None or not host.is_dir():
            return []
        try:
            names = sorted(os.listdir(host))
        except OSError:
            return []
        if len(names) > MAX_DIR_ENTRIES:
            raise InputError(
                Problem(self.label(path), "", f"more than {MAX_DIR_ENTRIES} entries; refused")
            )
        return names

    def real_path(self, path: str) -> str | None:
        """The tree path that ``path`` resolves to (``/sys/devices/…``), or None if absent."""
        host = self.resolve(path)
        if host is None:
            return None
        relative = host.relative_to(self.root)
        return "/" + relative.as_posix() if relative.parts else "/"


def _read_capped(fd: int, limit: int) -> bytes | None:
    """Up to ``limit`` bytes from ``fd``; None if there is more."""
    chunks: list[bytes] = []
    size = 0
    while size <= limit:
        chunk = os.read(fd, min(65536, limit + 1 - size))
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        size += len(chunk)
    return None
