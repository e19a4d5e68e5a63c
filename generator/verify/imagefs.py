"""The files of a mounted image, read as its consumers read them, never on the host's terms.

Symbolic links inside the image are resolved inside it, and only regular files are read, up to a
cap (``generator.foreign``). A file that is there but cannot be read so (a FIFO, a device, a file
over the cap, one the user may not read) is not taken for absent: it is recorded in
``Image.unread``, and a verdict that read it says it is not judged (``image.check_root``).
"""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath

from generator.errors import InputError
from generator.foreign import TooManyLinksError, read_foreign, resolve_within

# A configuration file is a few KiB; modules.dep of a distribution kernel about 1 MiB.
MAX_IMAGE_FILE_BYTES = 16 * 1024 * 1024
LIB_DIRS = ("/etc", "/run", "/usr/local/lib", "/usr/lib", "/lib")
MASKED = "/dev/null"  # a link to it masks a unit or a drop-in (systemd.unit(5), sysctl.d(5))


class Image:
    """Paths of a mounted image, with links resolved inside it."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.unread: list[str] = []  # "path: why", for each file there that could not be read

    def resolve(self, path: str) -> Path | None:
        """The host path of an image path, following links inside the image; None if absent."""
        try:
            return resolve_within(self.root, path, clamp_at_root=True)
        except (TooManyLinksError, OSError):
            return None

    def read(self, path: str) -> str | None:
        """The text of a regular file of the image; None when absent or not a regular file."""
        content = self.read_bytes(path)
        return None if content is None else content.decode("utf-8", errors="replace")

    def read_bytes(self, path: str) -> bytes | None:
        host = self.resolve(path)
        if host is None:
            return None
        try:  # a FIFO or a device planted in the image must not hang the check; nor a huge file
            return read_foreign(host, MAX_IMAGE_FILE_BYTES, follow_links=False)
        except InputError as error:
            if os.path.lexists(host):  # there, but not readable as a file of a few KiB
                self.unread.append(f"{path}: {error.problems[0].message}")
            return None

    def lexists(self, path: str) -> bool:
        directory = self.resolve(str(PurePosixPath(path).parent))
        return directory is not None and os.path.lexists(directory / PurePosixPath(path).name)

    def link_target(self, path: str) -> str | None:
        directory = self.resolve(str(PurePosixPath(path).parent))
        host = directory / PurePosixPath(path).name if directory else None
        return os.readlink(host) if host is not None and host.is_symlink() else None

    def dropins(
        self, subdir: str, suffix: str, dirs: tuple[str, ...] = LIB_DIRS
    ) -> list[tuple[str, str]]:
        """(path, text) of every drop-in, one per file name (earlier dirs win), in name order."""
        return self.dropins_of([subdir], suffix, dirs)

    def dropins_of(
        self, subdirs: list[str], suffix: str, dirs: tuple[str, ...] = LIB_DIRS
    ) -> list[tuple[str, str]]:
        """``dropins`` over several directory names, the earlier name winning within a dir.
        Hidden files are skipped, as systemd's conf_files_list skips them; a link to /dev/null
        masks the name without being read."""
        chosen: dict[str, str] = {}
        for base in dirs:
            for subdir in subdirs:
                directory = self.resolve(f"{base}/{subdir}")
                if directory is None or not directory.is_dir():
                    continue
                for entry in sorted(directory.iterdir()):
                    name = entry.name
                    if name.endswith(suffix) and not name.startswith(".") and name not in chosen:
                        chosen[name] = f"{base}/{subdir}/{name}"
        found = []
        for name in sorted(chosen):
            if self.link_target(chosen[name]) == MASKED:
                continue
            text = self.read(chosen[name])
            if text is not None:
                found.append((chosen[name], text))
        return found
