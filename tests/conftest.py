"""Shared fixtures: paths of the shipped data and a writer for temporary input files."""

from __future__ import annotations

import os
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import NoReturn

import pytest

# Registers and loads the hypothesis profiles, once per process: pytest imports this file as
# `conftest` (tests/ on sys.path) and test modules import it again as `tests.conftest`.
try:
    import hypothesis_profiles
except ModuleNotFoundError:
    from tests import hypothesis_profiles  # noqa: F401

REPO = Path(__file__).resolve().parent.parent
SYSTEMS = sorted(p.stem for p in (REPO / "hardware_db" / "systems").glob("*.yaml"))
PROFILES = sorted(p.stem for p in (REPO / "profiles").glob("*.yaml"))
IN_CI = os.environ.get("CI", "").lower() in {"1", "true", "yes"}


def missing_tool(missing: Exception) -> NoReturn:
    """A real consumer tool is not installed: fail in CI (which installs them all), else skip."""
    if IN_CI:
        pytest.fail(f"CI must have every validator tool: {missing}")
    pytest.skip(str(missing))


MINIMAL_HW = """\
cpu:
  vendor: intel
  sockets: 2
  cores_per_socket: 8
  threads_per_core: 2
memory_gib: 256
gpus:
  - model: L4
    count: 2
nics:
  - {name: eth0, speed_gbps: 25, numa_node: 0, role: frontend}
disks:
  - {name: nvme0n1, kind: nvme, role: os}
"""


@pytest.fixture
def strict_umask() -> Iterator[None]:
    """A root shell's hardened umask: whatever the tool creates would be private without care."""
    previous = os.umask(0o077)
    try:
        yield
    finally:
        os.umask(previous)


@pytest.fixture
def write(tmp_path: Path) -> Callable[[str, str], Path]:
    """write("hw.yaml", text) -> path of a dedented file in a temporary directory."""

    def _write(name: str, text: str | bytes) -> Path:
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(text, bytes):
            path.write_bytes(text)
        else:
            path.write_text(textwrap.dedent(text))
        return path

    return _write


def unreadable_cache_entry(
    entry: Path, kind: str, content: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Make ``entry`` a FIFO, a folder, or a file whose open is refused."""
    entry.parent.mkdir()
    if kind == "fifo":
        os.mkfifo(entry)  # opened without blocking, and not a regular file
    elif kind == "folder":
        entry.mkdir()
    else:  # EACCES, as for another user's private file (root reads any mode: simulated)
        entry.write_bytes(content)
        real_open = os.open

        def refused(path: str, flags: int, *args: object, **kwargs: object) -> int:
            if path == entry.name:
                raise PermissionError(13, "Permission denied", path)
            return real_open(path, flags, *args, **kwargs)  # type: ignore[arg-type]

        monkeypatch.setattr(os, "open", refused)
