"""A staging root for `systemd-analyze verify --root`: the host's unit directory, the bundle's
overlay, and stub executables for the programs the bundle's units run but do not ship.

With --root, verify resolves every unit and every ExecStart= path inside the staging root, so a
unit that points at a script the bundle forgot fails ("is not executable"). Programs a unit
expects from the target system (nvidia-smi, a shell) get an empty executable stub when the host
has them or when they are known driver tools; anything else must come from the bundle.
"""

from __future__ import annotations

import atexit
import os
import re
import shutil
import tempfile
from functools import cache
from pathlib import Path

from tests.packaged_units import PERSISTENCED, UBUNTU_PERSISTENCED

HOST_UNITS = Path("/usr/lib/systemd/system")
# Provided on a GPU node by the NVIDIA driver, DCGM or Fabric Manager packages, never by the bundle.
DRIVER_TOOLS = {
    "nvidia-smi",
    "nvidia-persistenced",
    "nv-hostengine",
    "nv-fabricmanager",
    "nvidia-modprobe",
    "nvidia-cuda-mps-control",  # the MPS control daemon (driver utils package)
}
EXEC_LINE = re.compile(r"^\s*Exec[A-Za-z]*\s*=\s*(.*)$")
EXEC_PREFIXES = "@-:+!|"


@cache
def host_base() -> Path:
    """Built once per process: usr/lib/systemd/system of the host plus the merged-/usr links."""
    base = Path(tempfile.mkdtemp(prefix="goldtune-systemd-base-"))
    atexit.register(shutil.rmtree, base, True)
    shutil.copytree(HOST_UNITS, base / "usr/lib/systemd/system", symlinks=True)
    for directory in ("usr/bin", "usr/sbin", "etc/systemd/system"):
        (base / directory).mkdir(parents=True, exist_ok=True)
    for link in ("bin", "sbin", "lib"):
        (base / link).symlink_to(f"usr/{link}")
    return base


def executables(unit: Path) -> set[str]:
    """Absolute program paths of the Exec*= lines of a unit file."""
    found = set()
    for line in unit.read_text(errors="replace").splitlines():
        match = EXEC_LINE.match(line)
        words = match.group(1).strip().lstrip(EXEC_PREFIXES).split() if match else []
        if words and words[0].startswith("/"):
            found.add(words[0])
    return found


def add_stub(root: Path, program: str) -> None:
    target = root / program.lstrip("/")
    if target.exists() or target.is_symlink():
        return
    if not (Path(program).exists() or Path(program).name in DRIVER_TOOLS):
        return  # neither a host program nor a driver tool: the bundle must ship it
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text("#!/bin/sh\n")
    target.chmod(0o755)


# Units the target's packages install, staged as they ship (tests/packaged_units.py) so verify
# judges a drop-in against the unit it extends: Ubuntu's persistenced is Type=forking and has
# its own ExecStart=, which the drop-in must reset.
PACKAGED_UNITS = {PERSISTENCED: UBUNTU_PERSISTENCED}


def stub_missing_units(root: Path, units: list[Path]) -> None:
    """A drop-in for a unit the target installs (nvidia-persistenced.service.d/) gets that unit
    as its package ships it, or else a minimal unit to extend, so verify judges the drop-in."""
    for unit in units:
        if unit.suffix == ".conf" and unit.parent.name.endswith(".d"):
            name = unit.parent.name[:-2]
            packaged = [root / d / name for d in ("etc/systemd/system", "usr/lib/systemd/system")]
            for path in (p for p in packaged if p.is_file()):
                # the host's unit (containerd.service) runs its own programs, which the stage lacks
                for program in executables(path):
                    add_stub(root, program)
            if not any(path.exists() for path in packaged):
                stub = root / "usr/lib/systemd/system" / name
                if name in PACKAGED_UNITS:
                    stub.write_text(PACKAGED_UNITS[name])
                    for program in executables(stub):
                        add_stub(root, program)
                    continue
                stub.write_text(
                    "[Service]\nExecStart=/usr/bin/true\n"
                    if name.endswith(".service")
                    else "[Unit]\n"
                )
                add_stub(root, "/usr/bin/true")


def replace_copy(source: str, target: str) -> None:
    """Never write through a hard link into the shared base."""
    if os.path.lexists(target):
        os.unlink(target)
    shutil.copy2(source, target)


def stage_root(overlay: Path, root: Path, units: list[Path]) -> Path:
    """Hard-linked copy of the host base, the overlay on top, stubs for missing programs."""
    shutil.copytree(host_base(), root, symlinks=True, copy_function=os.link)
    shutil.copytree(overlay, root, symlinks=True, dirs_exist_ok=True, copy_function=replace_copy)
    stub_missing_units(root, units)
    for unit in units:
        for program in executables(unit):
            add_stub(root, program)
    return root
