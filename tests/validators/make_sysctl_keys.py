"""Record the sysctl keys of the running kernel, with the shape of each value, for the validators.

    python3 tests/validators/make_sysctl_keys.py [--from TEXT ...] \
        > tests/validators/sysctl-keys-$(uname -r | cut -d. -f1,2).txt

Run it as root on a reference kernel (reading a few entries needs root; nothing is written).
Each ``--from`` adds a header line saying where the kernel came from (its package and version).
The distribution kernels' lists are made by booting each Debian kernel package under QEMU with
``boot_sysctl_keys.sh``, which runs this script in the guest; a maintainer reruns them with

    apt-get download linux-image-5.10.0-46-amd64          # bullseye-security
    sudo tests/validators/boot_sysctl_keys.sh --deb linux-image-5.10.0-46-amd64_*.deb \
        --suite bullseye-security --out tests/validators/sysctl-keys-5.10.txt

(no ``--deb``: the boot test root's own bookworm kernel). Which list checks which distribution
is in ``hardware_db/distros/*.yaml`` (``sysctl_reference``).
Per-interface directories (net.ipv4.conf.<if>, net.ipv6.neigh.<if>, ...) are kept only as
``all`` and ``default``: the validator reads an interface name in a rendered key as ``default``.
The shape of a value is ``int`` (one integer), ``int*N`` (N integers), ``text``, or ``-`` when the
entry cannot be read (write-only); ``tools.check_sysctl`` compares rendered values with it.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import sys
import time
from pathlib import Path

PROC_SYS = Path("/proc/sys")
PER_INTERFACE = re.compile(r"^net\.(ipv4|ipv6|mpls)\.(conf|neigh)\.([^.]+)\.")
SKIP = ("fs.binfmt_misc.",)  # a separate filesystem mounted below /proc/sys, not sysctls
INTEGER = re.compile(r"^-?\d+$")


def key_of(path: Path) -> str:
    return ".".join(path.relative_to(PROC_SYS).parts)


def shape_of(path: Path) -> str:
    try:
        text = path.read_text(errors="replace").strip()
    except OSError:
        return "-"
    fields = text.split()
    if fields and all(INTEGER.match(field) for field in fields) and "\n" not in text:
        return "int" if len(fields) == 1 else f"int*{len(fields)}"
    return "text"


def keep(key: str) -> bool:
    if key.startswith(SKIP):
        return False
    match = PER_INTERFACE.match(key)
    return match is None or match.group(3) in {"all", "default"}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Print the sysctl keys of this kernel.")
    parser.add_argument("--from", dest="origins", action="append", default=[], metavar="TEXT")
    origins: list[str] = parser.parse_args(argv).origins
    entries = sorted(
        (key_of(path), shape_of(path)) for path in PROC_SYS.rglob("*") if path.is_file()
    )
    print(
        f"# sysctl keys of Linux {platform.release()} ({platform.machine()}), read from /proc/sys"
    )
    print(
        f"# by tests/validators/make_sysctl_keys.py as uid {os.geteuid()} on "
        f"{time.strftime('%Y-%m-%d')}."
    )
    for origin in origins:
        print(f"# from {' '.join(origin.split())}")
    print("# <key> <shape>: shape is int, int*N (N integers), text, or - (write-only entry)")
    for key, shape in entries:
        if keep(key):
            print(f"{key} {shape}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
