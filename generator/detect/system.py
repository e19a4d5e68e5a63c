"""The operating system side: distribution, kernel release, page size."""

from __future__ import annotations

import os
import re
import shlex
from typing import NamedTuple

from generator.detect.tree import Tree, decimal, shown

KERNEL_RELEASE = re.compile(r"\d+\.\d+[0-9A-Za-z._+~-]{0,60}")  # fullmatch: no newline


class OsInfo(NamedTuple):
    distribution: str | None  # for a comment: the format has no field for it yet
    kernel: str | None
    kernel_note: str
    page_size_kib: int | None
    page_note: str


def read_os_release(tree: Tree) -> str | None:
    """``PRETTY_NAME (ID VERSION_ID)`` from /etc/os-release (or /usr/lib/os-release)."""
    text = tree.read("/etc/os-release") or tree.read("/usr/lib/os-release")
    if text is None:
        return None
    fields: dict[str, str] = {}
    for line in text.splitlines()[:200]:
        key, equals, value = line.partition("=")
        if equals and re.fullmatch(r"[A-Z_]{1,32}", key):
            try:
                words = shlex.split(value)
            except ValueError:
                continue
            fields[key] = words[0] if words else ""
    pretty = fields.get("PRETTY_NAME") or fields.get("NAME")
    ident = " ".join(fields[k] for k in ("ID", "VERSION_ID") if fields.get(k))
    if not pretty and not ident:
        return None
    return shown(f"{pretty} ({ident})" if pretty and ident else pretty or ident, limit=100)


def read_kernel(tree: Tree) -> tuple[str | None, str]:
    release = tree.value("/proc/sys/kernel/osrelease")
    if release is None:
        return None, "/proc/sys/kernel/osrelease missing"
    if not KERNEL_RELEASE.fullmatch(release):
        return (
            None,
            f"/proc/sys/kernel/osrelease {shown(release)!r} is not a kernel release; left out",
        )
    return release, "/proc/sys/kernel/osrelease"


def read_page_size(tree: Tree, live: bool) -> tuple[int | None, str]:
    """The base page size: sysconf here, KernelPageSize of /proc/self/smaps in a capture."""
    if live:
        return os.sysconf("SC_PAGE_SIZE") // 1024, "sysconf(PAGESIZE)"
    match = re.search(
        r"^KernelPageSize:\s+(\d+) kB", tree.read("/proc/self/smaps") or "", re.MULTILINE
    )
    if match is None:
        return None, "no KernelPageSize in /proc/self/smaps of the capture; the default 4 applies"
    page = decimal(match.group(1), tree.label("/proc/self/smaps"), "os.page_size_kib")
    return page, "KernelPageSize in /proc/self/smaps of the capture"


def read_os(tree: Tree, live: bool) -> OsInfo:
    kernel, kernel_note = read_kernel(tree)
    page, page_note = read_page_size(tree, live)
    return OsInfo(read_os_release(tree), kernel, kernel_note, page, page_note)
