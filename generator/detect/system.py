"""The operating system side: distribution, kernel release, page size."""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Collection
from typing import NamedTuple

from generator.detect.tree import Tree, decimal, shown
from generator.errors import InputError

KERNEL_RELEASE = re.compile(r"\d+\.\d+[0-9A-Za-z._+~-]{0,60}")  # fullmatch: no newline


class OsInfo(NamedTuple):
    distribution: str | None  # for the header comment: PRETTY_NAME (ID VERSION_ID)
    kernel: str | None
    kernel_note: str
    page_size_kib: int | None
    page_note: str
    distro: str | None = None  # os.distro: a key of hardware_db/distros/, or None
    distro_note: str = ""


# os-release(5): ID and VERSION_ID are lower-case words (a-z, 0-9, ".", "_", "-")
OS_RELEASE_WORD = re.compile(r"[a-z0-9._-]{1,40}")


def os_release_fields(tree: Tree) -> dict[str, str]:
    """KEY -> value of /etc/os-release (or /usr/lib/os-release, as os-release(5) says)."""
    text = tree.read("/etc/os-release") or tree.read("/usr/lib/os-release")
    fields: dict[str, str] = {}
    for line in (text or "").splitlines()[:200]:
        key, equals, value = line.partition("=")
        if equals and re.fullmatch(r"[A-Z_]{1,32}", key):
            try:
                words = shlex.split(value)
            except ValueError:
                continue
            fields[key] = words[0] if words else ""
    return fields


def match_distro(fields: dict[str, str], known: Collection[str]) -> tuple[str | None, str]:
    """os.distro from ID and VERSION_ID: ``ID-VERSION_ID`` (ubuntu-24.04, debian-12), else
    ``ID-MAJOR`` (rhel 9.4 -> rhel-9, rocky 9.3 -> rocky-9), if ``known`` (the distribution
    tables' keys and aliases) has it; else None and why. ID_LIKE is not followed: a derivative's
    kernel and defaults are its own, and a wrong table is worse than a portable bundle."""
    ident, version = fields.get("ID", ""), fields.get("VERSION_ID", "")
    if not (OS_RELEASE_WORD.fullmatch(ident) and OS_RELEASE_WORD.fullmatch(version)):
        return None, "no ID and VERSION_ID in /etc/os-release; left out: a portable bundle"
    for name in (f"{ident}-{version}", f"{ident}-{version.split('.')[0]}"):
        if name in known:
            return name, f"/etc/os-release ID={ident} VERSION_ID={version}"
    return None, (
        f"left out: {ident} {version} (/etc/os-release) is none of {', '.join(sorted(known))}; "
        "without it the bundle is portable (or name one with --os)"
    )


def read_os_release(tree: Tree) -> str | None:
    """``PRETTY_NAME (ID VERSION_ID)`` from /etc/os-release (or /usr/lib/os-release)."""
    fields = os_release_fields(tree)
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


# The GPU Operator's driver container mounts its driver root at /run/nvidia/driver and its
# startup probe writes /run/nvidia/validations/.driver-ctr-ready once nvidia-smi works there;
# its validator treats a host nvidia-smi (/usr/bin/nvidia-smi and others) as a pre-installed
# driver (NVIDIA/gpu-operator@a22dbf67 cmd/nvidia-validator/main.go defaultDriverInstallDir,
# driverContainerStatusFilePath, resolveHostNvidiaSMI; assets/state-driver/0400_configmap.yaml).
OPERATOR_DRIVER_MARKERS = (
    "/run/nvidia/validations/.driver-ctr-ready",
    "/run/nvidia/driver/usr/bin/nvidia-smi",
)
HOST_NVIDIA_SMI = (
    "/usr/bin/nvidia-smi",
    "/usr/sbin/nvidia-smi",
    "/bin/nvidia-smi",
    "/sbin/nvidia-smi",
)


def present(tree: Tree, path: str) -> bool:
    """Whether ``path`` exists in the tree (a link out of it counts: something is there)."""
    try:
        return tree.resolve(path) is not None
    except InputError:
        return True


# The AMD GPU Operator loads amdgpu through KMM; with its DeviceConfig's spec.driver.blacklist
# its node labeller's init container keeps the distribution's amdgpu off with a file it writes
# into the host's /etc/modprobe.d, saying so on its first line (ROCm/gpu-operator@6df13c17
# internal/nodelabeller/nodelabeller.go defaultBlacklistFileName, openShiftBlacklistFileName,
# getNodeLabellerInitContainerCommand). Without that option it leaves no file on the host.
AMD_OPERATOR_BLACKLISTS = (
    "/etc/modprobe.d/blacklist-amdgpu.conf",
    "/etc/modprobe.d/blacklist-amdgpu-by-operator.conf",
)
AMD_OPERATOR_SIGN = "# added by gpu operator"


def amd_operator_sign(tree: Tree, path: str) -> bool:
    """Whether ``path`` is the AMD GPU Operator's blacklist (a link out of the tree, such as a
    file masked to /dev/null, is not)."""
    try:
        return (tree.read(path) or "").startswith(AMD_OPERATOR_SIGN)
    except InputError:
        return False


def read_driver(tree: Tree) -> tuple[str | None, str]:
    """os.driver where the node shows it: nvidia-gpu-operator when the Operator's driver root or
    readiness marker is there and no host nvidia-smi is; amd-gpu-operator when the AMD GPU
    Operator's amdgpu blacklist is; else None (host, the default)."""
    marker = next((path for path in OPERATOR_DRIVER_MARKERS if present(tree, path)), None)
    host = next((path for path in HOST_NVIDIA_SMI if present(tree, path)), None)
    if marker is not None and host is None:
        return "nvidia-gpu-operator", f"{marker} present, no host nvidia-smi (GPU Operator)"
    if marker is not None:
        return None, f"{marker} and {host} both present: left out (host, the default)"
    for path in AMD_OPERATOR_BLACKLISTS:
        if amd_operator_sign(tree, path):
            return "amd-gpu-operator", f"{path} written by the AMD GPU Operator's node labeller"
    return None, (
        "no GPU Operator driver root (/run/nvidia/driver) and no AMD GPU Operator amdgpu "
        "blacklist: left out (host, the default)"
    )


def read_os(tree: Tree, live: bool, known_distros: Collection[str] = ()) -> OsInfo:
    kernel, kernel_note = read_kernel(tree)
    page, page_note = read_page_size(tree, live)
    distro, distro_note = match_distro(os_release_fields(tree), known_distros)
    return OsInfo(read_os_release(tree), kernel, kernel_note, page, page_note, distro, distro_note)
