"""The bundle layout the checks rely on, and small helpers shared by them."""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOTFS = "rootfs"
LIBEXEC = "/usr/lib/goldtune"  # the fixed scripts (Debian Policy 9.1.2: not /usr/local)
USER_DATA = "cloud-init/user-data"
USER_DATA_GZ = "cloud-init/user-data.gz"
USER_DATA_MIME = "cloud-init/user-data.mime"
USER_DATA_MIME_GZ = "cloud-init/user-data.mime.gz"
KERNEL_CMDLINE = "kernel-cmdline"
INSTALL_SH = "install.sh"
INSTALL_LIB = "install-lib.sh"  # the functions install.sh and the first-boot script source
INSTALL_LIST = "install.list"
MANIFEST = "manifest.json"  # lists install-lib.sh's sha256, which install.sh checks


def files(bundle: Path, *patterns: str) -> list[Path]:
    """The regular files of ``bundle`` that match any of the glob ``patterns``, sorted."""
    return sorted({path for pattern in patterns for path in bundle.glob(pattern) if path.is_file()})


def relative(bundle: Path, path: Path) -> str:
    return str(path.relative_to(bundle))


def output_problems(result: subprocess.CompletedProcess[str], label: str) -> list[str]:
    """Every output line of a failed tool run, or its exit status when it printed nothing."""
    text = (result.stdout + result.stderr).strip()
    return [f"{label}: {line}" for line in text.splitlines()] or [
        f"{label}: exit status {result.returncode}"
    ]
