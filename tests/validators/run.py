"""Running the real tools: finding them, dropping privileges, scratch trees nobody can read.

Every check that executes or parses rendered content with a tool that could act on the host
(systemd-sysctl, systemd --test, systemd-tmpfiles, sh sourcing the GRUB drop-in, tuned's loader)
runs as ``nobody`` with no capabilities when the test runs as root, so a hostile file can neither
write /proc/sys or /sys nor touch anything outside its scratch directory.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

NOBODY = 65534
TIMEOUT_S = 60
TIMEOUT_MANY_S = 300  # one run over every bundle of the matrix
SYSTEM_PYTHON = "/usr/bin/python3"  # tuned and cloud-init live in Debian's Python, not a venv's
TOOLS_DIR = Path(os.environ.get("GOLDTUNE_TOOLS_DIR", "/usr/local/lib/goldtune-tools"))

# executable -> Debian package that provides it (named in the message of a missing tool)
PACKAGES = {
    "systemd-analyze": "systemd",
    "systemd-sysctl": "systemd",
    "systemd-tmpfiles": "systemd",
    "systemd": "systemd",
    "modprobe": "kmod",
    "cloud-init": "cloud-init",
    "shellcheck": "shellcheck",
    "setpriv": "util-linux",
    "sh": "dash",
    "udevadm": "udev 254+ (tests/tools/install-tools.sh unpacks it from bookworm-backports)",
    SYSTEM_PYTHON: "python3",
    "promtool": "prometheus",
    "tuned": "tuned",
    "containerd": "containerd",
    "containerd 2": "containerd 2.x (tests/tools/install-tools.sh unpacks it from forky)",
}
# executables outside $PATH
LOCATIONS = {
    "systemd-sysctl": ["/usr/lib/systemd/systemd-sysctl", "/lib/systemd/systemd-sysctl"],
    "systemd": ["/usr/lib/systemd/systemd", "/lib/systemd/systemd"],
}


class MissingTool(Exception):  # noqa: N818 -- a reason to skip, not an error
    """A real consumer tool is not installed here; the test skips (locally) or fails (CI)."""

    def __init__(self, tool: str, why: str = "not installed") -> None:
        self.tool = tool
        package = PACKAGES.get(tool, tool)
        super().__init__(
            f"{tool} {why} (Debian package: {package}; run tests/tools/install-tools.sh as root)"
        )


def find_tool(name: str) -> str:
    for candidate in LOCATIONS.get(name, []):
        if os.access(candidate, os.X_OK):
            return candidate
    found = (
        shutil.which(name)
        if not name.startswith("/")
        else (name if os.access(name, os.X_OK) else None)
    )
    if found is None:
        raise MissingTool(name)
    return found


def find_udevadm() -> str:
    """A udevadm with ``verify`` (systemd 254+): $GOLDTUNE_UDEVADM, the unpacked backport, $PATH."""
    candidates = [
        os.environ.get("GOLDTUNE_UDEVADM", ""),
        str(TOOLS_DIR / "udev" / "bin" / "udevadm"),
        shutil.which("udevadm") or "",
    ]
    for candidate in filter(None, candidates):
        if os.access(candidate, os.X_OK) and run([candidate, "verify", "--help"]).returncode == 0:
            return candidate
    raise MissingTool("udevadm", "with `verify` (systemd 254 or later) not found")


def find_containerd2() -> str:
    """containerd 2.x, which reads version 3 files: $GOLDTUNE_CONTAINERD2 or the unpacked .deb
    (the system's containerd is bookworm's 1.6)."""
    candidates = [
        os.environ.get("GOLDTUNE_CONTAINERD2", ""),
        str(TOOLS_DIR / "containerd2" / "usr" / "bin" / "containerd"),
    ]
    for candidate in filter(None, candidates):
        if os.access(candidate, os.X_OK):
            return candidate
    raise MissingTool("containerd 2")


def find_tuned_python() -> str:
    python = find_tool(SYSTEM_PYTHON)
    if run([python, "-c", "import tuned.profiles"]).returncode != 0:
        raise MissingTool("tuned", f"is not importable by {python}")
    return python


def unprivileged(command: Sequence[str]) -> list[str]:
    """``command`` as nobody without capabilities when running as root, else unchanged."""
    if os.geteuid() != 0:
        return list(command)
    return [
        find_tool("setpriv"),
        f"--reuid={NOBODY}",
        f"--regid={NOBODY}",
        "--clear-groups",
        "--inh-caps=-all",
        "--bounding-set=-all",
        "--no-new-privs",
        *command,
    ]


def run(
    command: Sequence[str], env: dict[str, str] | None = None, timeout: int = TIMEOUT_S
) -> subprocess.CompletedProcess[str]:
    base = {"PATH": os.environ.get("PATH", "/usr/sbin:/usr/bin:/sbin:/bin"), "LC_ALL": "C.UTF-8"}
    return subprocess.run(
        list(command),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env={**base, **(env or {})},
        cwd="/",
    )


@contextmanager
def scratch(prefix: str) -> Iterator[Path]:
    """A directory that ``nobody`` can read (pytest's tmp_path is 0700 under root)."""
    path = Path(tempfile.mkdtemp(prefix=f"goldtune-{prefix}-"))
    try:
        path.chmod(0o755)
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def copy_readable(source: Path, target: Path) -> Path:
    """Copy a file (or a tree) so that every user can read it."""
    if source.is_dir():
        shutil.copytree(source, target, symlinks=True, dirs_exist_ok=True)
    else:
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)
    for path in [target, *target.rglob("*")] if target.is_dir() else [target]:
        if not path.is_symlink():
            path.chmod(0o755 if path.is_dir() or os.access(path, os.X_OK) else 0o644)
    return target


def lines_naming(output: str, *needles: str) -> list[str]:
    """The lines of ``output`` that mention any of ``needles`` (tool messages about our files)."""
    return [line for line in output.splitlines() if any(needle in line for needle in needles)]
