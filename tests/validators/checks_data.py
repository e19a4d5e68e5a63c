"""The data files of the fixed scripts, judged by the script that reads each one.

Every fixed script has a ``--check`` mode that runs its own data parser (the same code a boot or an
install runs) and exits 0 only when every line is sound; it reads no system state and changes
nothing. Each runs here as nobody, on a readable copy of the bundle's files.
"""

from __future__ import annotations

from pathlib import Path

from generator.model.vendors import GPU_VENDORS

from .layout import (
    INSTALL_LIB,
    INSTALL_LIST,
    INSTALL_SH,
    MANIFEST,
    ROOTFS,
    files,
    output_problems,
    relative,
)
from .run import copy_readable, run, scratch, unprivileged

# data file -> the fixed script that reads it (bundle-relative); gpu.conf is read by the GPU
# vendor's script the bundle carries (one per vendor, generator/model/vendors.py)
GPU_READERS = tuple(
    f"{ROOTFS}/usr/lib/goldtune/{spec.setup_script}" for spec in GPU_VENDORS.values()
)
DATA_READERS = {
    f"{ROOTFS}/etc/goldtune/gpu.conf": GPU_READERS[0],
    f"{ROOTFS}/etc/goldtune/irq.conf": f"{ROOTFS}/usr/lib/goldtune/irq-affinity",
    f"{ROOTFS}/etc/goldtune/pcie-acs.conf": f"{ROOTFS}/usr/lib/goldtune/pcie-acs",
    f"{ROOTFS}/etc/goldtune/collect.conf": f"{ROOTFS}/usr/lib/goldtune/collect",
    f"{ROOTFS}/etc/goldtune/report.conf": f"{ROOTFS}/usr/lib/goldtune/report",
    f"{ROOTFS}/etc/goldtune/preflight.conf": f"{ROOTFS}/usr/lib/goldtune/preflight",
    f"{ROOTFS}/etc/goldtune/nccl-resolve.conf": f"{ROOTFS}/usr/lib/goldtune/nccl-resolve",
}
DATA_PATTERNS = (*DATA_READERS, INSTALL_LIST)


def check_data_files(bundle: Path) -> list[str]:
    problems = []
    with scratch("data") as tmp:
        for data, reader in DATA_READERS.items():
            if not (bundle / data).is_file():
                continue
            if reader in GPU_READERS:
                reader = next((r for r in GPU_READERS if (bundle / r).is_file()), reader)
            if not (bundle / reader).is_file():
                problems.append(f"{data}: its reader {reader} is not in the bundle")
                continue
            script = copy_readable(bundle / reader, tmp / data.replace("/", "_") / "script")
            copy = copy_readable(bundle / data, script.parent / "data")
            result = run(unprivileged(["sh", str(script), "--check", str(copy)]))
            if result.returncode != 0:
                problems += output_problems(result, data)
        if (bundle / INSTALL_LIST).is_file():
            problems += check_install_list(bundle, tmp)
    return problems


def check_install_list(bundle: Path, tmp: Path) -> list[str]:
    """install.sh --check reads install.list beside it and finds every listed file in rootfs/."""
    copy = tmp / "bundle"
    copy_readable(bundle / INSTALL_SH, copy / INSTALL_SH)
    copy_readable(bundle / INSTALL_LIB, copy / INSTALL_LIB)
    copy_readable(bundle / INSTALL_LIST, copy / INSTALL_LIST)
    if (bundle / MANIFEST).is_file():  # install.sh checks the library's digest in it
        copy_readable(bundle / MANIFEST, copy / MANIFEST)
    if (bundle / ROOTFS).is_dir():
        copy_readable(bundle / ROOTFS, copy / ROOTFS)
    result = run(unprivileged(["sh", str(copy / INSTALL_SH), "--check"]))
    return [] if result.returncode == 0 else output_problems(result, INSTALL_LIST)


def data_files(bundle: Path) -> list[str]:
    return [relative(bundle, path) for path in files(bundle, *DATA_PATTERNS)]
