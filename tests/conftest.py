"""Shared fixtures: paths of the shipped data and a writer for temporary input files."""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SYSTEMS = sorted(p.stem for p in (REPO / "hardware_db" / "systems").glob("*.yaml"))
PROFILES = sorted(p.stem for p in (REPO / "profiles").glob("*.yaml"))

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
