"""A real kernel's sysfs: capture an emulated 2-socket, 2-node QEMU guest and describe it.

The cached Debian 12 root of tests/boot (build-rootfs.sh) boots with ``-smp 4,sockets=2``, two
NUMA nodes, a virtio NIC behind a PCI expander bridge on node 1, and an SSD, an HDD and an
NVMe disk besides the virtio root. A unit runs the shipped capture script (no Python in the
guest) and writes the tarball, base64, onto ttyS1; the host unpacks it and runs
``gen detect --root``: the result must be the YAML that describes this VM. Marked ``boot``;
skips without root, QEMU or the cached root.
"""

from __future__ import annotations

import base64
import io
import os
import re
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from generator.cli import main
from generator.commands.detect import CAPTURE_SCRIPT

pytestmark = pytest.mark.boot

BOOT = Path(__file__).resolve().parent / "boot"
BOOT_TIMEOUT_S = 900
HARNESS = """#!/bin/sh
timeout 600 systemctl is-system-running --wait >/dev/null 2>&1
udevadm settle --timeout=60
cd /tmp && sh /usr/local/sbin/goldtune-capture /tmp/capture.tar.gz 2>/dev/null
{ echo goldtune-capture-begin; base64 /tmp/capture.tar.gz; echo goldtune-capture-end; } >/dev/ttyS1
systemctl poweroff --no-block
"""
UNIT = """[Unit]
Description=detect boot test: capture onto ttyS1, then power off
After=multi-user.target

[Service]
Type=simple
ExecStart=/usr/local/sbin/detect-report

[Install]
WantedBy=multi-user.target
"""
# What the VM is, in the hardware format (the CPU vendor and memory depend on QEMU's defaults).
EXPECTED = {
    "sockets": 2,
    "cores_per_socket": 2,
    "threads_per_core": 1,
    "numa_nodes": 2,
    "nic_numa_node": 1,
    "disks": {
        ("vda", "hdd", "os"),
        ("sda", "ssd", "data"),
        ("sdb", "hdd", "data"),
        ("nvme0n1", "nvme", "data"),
    },
}


def qemu_command(cache: Path, work: Path, accel: str) -> list[str]:
    return [
        "qemu-system-x86_64",
        "-accel",
        accel,
        "-machine",
        "pc",
        "-cpu",
        "qemu64",
        "-smp",
        "4,sockets=2,cores=2,threads=1",
        "-m",
        "2G",
        "-object",
        "memory-backend-ram,id=m0,size=1G",
        "-object",
        "memory-backend-ram,id=m1,size=1G",
        "-numa",
        "node,nodeid=0,cpus=0-1,memdev=m0",
        "-numa",
        "node,nodeid=1,cpus=2-3,memdev=m1",
        "-device",
        "pxb,id=pxb1,bus_nr=64,numa_node=1,bus=pci.0",
        "-netdev",
        "user,id=n1",
        "-device",
        "virtio-net-pci,netdev=n1,bus=pxb1,addr=0x1",
        "-no-reboot",
        "-display",
        "none",
        "-monitor",
        "none",
        "-serial",
        f"file:{work}/console.log",
        "-serial",
        f"file:{work}/capture.log",
        "-kernel",
        str(cache / "vmlinuz"),
        "-initrd",
        str(cache / "initrd.img"),
        "-append",
        "root=/dev/vda rw console=ttyS0 panic=-1",
        # every device names its bus: after a pxb, QEMU would place the next one there
        "-drive",
        f"if=none,id=root,file={work}/disk.img,format=raw,snapshot=on",
        "-device",
        "virtio-blk-pci,drive=root,bus=pci.0",
        "-device",
        "ahci,id=ahci,bus=pci.0",
        "-drive",
        f"if=none,id=ssd,file={work}/ssd.img,format=raw",
        "-device",
        "ide-hd,drive=ssd,bus=ahci.0,rotation_rate=1",
        "-drive",
        f"if=none,id=hdd,file={work}/hdd.img,format=raw",
        "-device",
        "ide-hd,drive=hdd,bus=ahci.1",
        "-drive",
        f"if=none,id=nvme,file={work}/nvme.img,format=raw",
        "-device",
        "nvme,drive=nvme,serial=goldtune0,bus=pci.0",
    ]


def build_image(cache: Path, work: Path) -> None:
    root = work / "root"
    subprocess.run(["cp", "-a", str(cache / "root"), str(root)], check=True)
    sbin = root / "usr/local/sbin"
    shutil.copy(CAPTURE_SCRIPT, sbin / "goldtune-capture")
    (sbin / "detect-report").write_text(HARNESS)
    (sbin / "detect-report").chmod(0o755)
    (root / "etc/systemd/system/detect-report.service").write_text(UNIT)
    wants = root / "etc/systemd/system/multi-user.target.wants"
    wants.mkdir(parents=True, exist_ok=True)
    os.symlink("../detect-report.service", wants / "detect-report.service")
    subprocess.run(
        [
            "mkfs.ext4",
            "-q",
            "-F",
            "-L",
            "goldtune-root",
            "-d",
            str(root),
            str(work / "disk.img"),
            "2048M",
        ],
        check=True,
    )
    shutil.rmtree(root)
    for disk in ("ssd", "hdd", "nvme"):
        with open(work / f"{disk}.img", "wb") as image:
            image.truncate(64 << 20)


def captured_tree(log: str, into: Path) -> Path:
    match = re.search(r"goldtune-capture-begin\s+(.*?)\s+goldtune-capture-end", log, re.DOTALL)
    assert match, "no capture on ttyS1"
    data = base64.b64decode("".join(match.group(1).split()))
    into.mkdir()
    with tarfile.open(fileobj=io.BytesIO(data)) as archive:
        archive.extractall(into, filter="tar")
    return into


def test_detect_describes_an_emulated_two_socket_two_node_vm(tmp_path: Path):
    if os.geteuid() != 0 or shutil.which("qemu-system-x86_64") is None:
        pytest.skip("needs root and qemu-system-x86_64")
    built = subprocess.run(
        [str(BOOT / "build-rootfs.sh")], capture_output=True, text=True, check=False
    )
    if built.returncode != 0:
        pytest.skip(f"no cached boot root: {built.stderr[-300:]}")
    cache = Path(built.stdout.strip().splitlines()[-1])
    accel = os.environ.get("GOLDTUNE_BOOT_ACCEL", "tcg")
    build_image(cache, tmp_path)
    subprocess.run(
        qemu_command(cache, tmp_path, accel),
        check=True,
        timeout=BOOT_TIMEOUT_S,
        stdin=subprocess.DEVNULL,
        capture_output=True,
    )
    tree = captured_tree((tmp_path / "capture.log").read_text(errors="replace"), tmp_path / "tree")
    result = CliRunner().invoke(
        main, ["detect", "--root", str(tree), "-o", str(tmp_path / "vm.yaml")]
    )
    assert result.exit_code == 0, result.stderr
    text = (tmp_path / "vm.yaml").read_text()
    data = yaml.safe_load(text)
    cpu = data["cpu"]
    assert (
        cpu["sockets"],
        cpu["cores_per_socket"],
        cpu["threads_per_core"],
        data["numa_nodes"],
    ) == (
        EXPECTED["sockets"],
        EXPECTED["cores_per_socket"],
        EXPECTED["threads_per_core"],
        EXPECTED["numa_nodes"],
    ), text
    assert [nic.get("numa_node") for nic in data["nics"]] == [EXPECTED["nic_numa_node"]], text
    assert {(d["name"], d["kind"], d["role"]) for d in data["disks"]} == EXPECTED["disks"], text
    check = CliRunner().invoke(
        main, ["check", "--hw", str(tmp_path / "vm.yaml"), "--profile", "training"]
    )
    assert check.exit_code == 0, check.stderr
