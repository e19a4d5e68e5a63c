"""A real kernel's sysfs: capture an emulated 2-socket, 2-node QEMU guest, describe it, tune it.

The cached Debian 12 root of tests/boot (build-rootfs.sh) boots with ``-smp 4,sockets=2``, two
NUMA nodes, a multi-queue virtio NIC (2 queue pairs on a tap, link speed 100 Gbit/s) behind a
PCI expander bridge on node 1, and an SSD, an HDD and an NVMe disk besides the virtio root. A
unit brings the NIC up (sysfs has no speed for a link that is down), runs the shipped capture
script (no Python in the guest) and writes the tarball, base64, onto ttyS1; the host unpacks it
and runs ``gen detect --root``: the result must be the YAML that describes this VM.

Then (issue 12's first live proof of IRQ pinning) a bundle generated for that YAML is installed
into the same image and the same emulated machine boots again (tests/boot/boot.sh with this
topology): ``gen verify`` on the collector's snapshot must find every interrupt of the NIC
pinned to node 1's CPUs less the first core. Two boots, not one with a reboot inside: the
guest has no Python, so the bundle is generated on the host between them. QEMU runs in a
network namespace of its own (the tap never reaches the host's). Marked ``boot``; skips
without root, QEMU or the cached root.
"""

from __future__ import annotations

import base64
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from generator.cli import main
from generator.commands.detect import CAPTURE_SCRIPT
from generator.model.layout import COLLECT_SCRIPT, in_overlay

pytestmark = pytest.mark.boot

BOOT = Path(__file__).resolve().parent / "boot"
BOOT_TIMEOUT_S = 900
HARNESS = """#!/bin/sh
timeout 600 systemctl is-system-running --wait >/dev/null 2>&1
udevadm settle --timeout=60
for link in /sys/class/net/en*; do ip link set dev "${link##*/}" up; done
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


REPO = Path(__file__).resolve().parents[1]
SMP = "4,sockets=2,cores=2,threads=1"
# The emulated machine besides the disks, as both boots have it. The NIC: 2 queue pairs (a tap
# is the netdev that has queues), 2 x 2 + 2 MSI-X vectors, and a link speed, so that the
# described NIC is one the IRQ rule pins (>= 100 Gbit/s, generator/rules/irq.py).
TOPOLOGY = [
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
    "tap,id=n1,ifname=gt0,script=no,downscript=no,queues=2",
    "-device",
    "virtio-net-pci,netdev=n1,bus=pxb1,addr=0x1,mq=on,vectors=6,speed=100000,duplex=full",
]
NIC_QUEUE_PAIRS = 2
# Node 1's CPUs, all of them: the first core (CPU 0), kept for housekeeping, is on node 0.
NIC_CPUS = "2-3"


def qemu_command(cache: Path, work: Path, accel: str) -> list[str]:
    return [
        "unshare",
        "-n",
        "qemu-system-x86_64",
        "-accel",
        accel,
        "-machine",
        "pc",
        "-cpu",
        "qemu64",
        "-smp",
        SMP,
        "-m",
        "2G",
        *TOPOLOGY,
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


@pytest.fixture(scope="module")
def cache() -> Path:
    if os.geteuid() != 0 or shutil.which("qemu-system-x86_64") is None:
        pytest.skip("needs root and qemu-system-x86_64")
    built = subprocess.run(
        [str(BOOT / "build-rootfs.sh")], capture_output=True, text=True, check=False
    )
    if built.returncode != 0:
        pytest.skip(f"no cached boot root: {built.stderr[-300:]}")
    return Path(built.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def detected(cache: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The hardware YAML `gen detect --root` writes for the capture of the emulated VM."""
    work = tmp_path_factory.mktemp("detect")
    accel = os.environ.get("GOLDTUNE_BOOT_ACCEL", "tcg")
    build_image(cache, work)
    subprocess.run(
        qemu_command(cache, work, accel),
        check=True,
        timeout=BOOT_TIMEOUT_S,
        stdin=subprocess.DEVNULL,
        capture_output=True,
    )
    tree = captured_tree((work / "capture.log").read_text(errors="replace"), work / "tree")
    result = CliRunner().invoke(main, ["detect", "--root", str(tree), "-o", str(work / "vm.yaml")])
    assert result.exit_code == 0, result.stderr
    return work / "vm.yaml"


def test_detect_describes_an_emulated_two_socket_two_node_vm(detected: Path) -> None:
    text = detected.read_text()
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
    assert [nic.get("speed_gbps") for nic in data["nics"]] == [100], text
    # sda and sdb: the two AHCI ports are probed asynchronously, so which SATA disk the kernel
    # names first differs from boot to boot; the kinds and roles must still be these.
    found = {(d["name"], d["kind"], d["role"]) for d in data["disks"]}
    assert {d for d in found if not d[0].startswith("sd")} == {
        d for d in EXPECTED["disks"] if not d[0].startswith("sd")
    }, text
    assert sorted(d[1:] for d in found if d[0].startswith("sd")) == sorted(
        d[1:] for d in EXPECTED["disks"] if d[0].startswith("sd")
    ), text
    assert {d[0] for d in found if d[0].startswith("sd")} == {"sda", "sdb"}, text
    check = CliRunner().invoke(main, ["check", "--hw", str(detected), "--profile", "training"])
    assert check.exit_code == 0, check.stderr


def test_a_bundle_for_the_detected_vm_pins_its_nic_irqs_numa_locally_live(
    detected: Path, tmp_path: Path
) -> None:
    """The detected YAML, a bundle for it (training: irq pin), installed and booted on the same
    emulated machine: verify finds each MSI-X interrupt of the NIC on node 1's CPUs."""
    bundle = tmp_path / "bundle"
    hardware = ["--hw", str(detected), "--profile", "training"]
    generated = subprocess.run(
        [sys.executable, "-m", "generator", *hardware, "-o", str(bundle)],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    assert generated.returncode == 0, generated.stderr
    plan = json.loads((bundle / "plan.json").read_text())
    nic = yaml.safe_load(detected.read_text())["nics"][0]["name"]
    pins = {s["key"]: s["value"] for s in plan["settings"] if s["kind"] == "irq"}
    assert pins == {nic: NIC_CPUS}, pins
    arguments = tmp_path / "topology.args"
    arguments.write_text("\n".join(TOPOLOGY) + "\n")
    out = tmp_path / "boot"
    command = [str(BOOT / "boot.sh"), "--bundle", str(bundle), "--out", str(out)]
    command += ["--collector", str(bundle / in_overlay(COLLECT_SCRIPT))]
    command += ["--timeout", str(BOOT_TIMEOUT_S), "--smp", SMP, "--qemu-args", str(arguments)]
    booted = subprocess.run(
        command,
        capture_output=True,
        text=True,
        timeout=BOOT_TIMEOUT_S + 900,
        check=False,
    )
    assert booted.returncode == 0, booted.stderr[-4000:]
    code = (
        "import sys; from pathlib import Path; from generator.verify.run import run_verify; "
        "sys.exit(run_verify(Path(sys.argv[1]), snapshot=Path(sys.argv[2]), as_json=True))"
    )
    verified = subprocess.run(
        [sys.executable, "-c", code, str(bundle), str(out / "snapshot.log")],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    (out / "verify.json").write_text(verified.stdout)
    report = json.loads(verified.stdout)
    failing = [c for c in report["checks"] if c["verdict"] in ("differs", "missing")]
    assert verified.returncode == 0 and not failing, json.dumps(failing, indent=2)
    (irq,) = [c for c in report["checks"] if c["kind"] == "irq"]
    assert irq["verdict"] == "ok", irq
    # config + an input and an output vector per queue pair: every one of them pinned
    count = int(re.fullmatch(rf"{NIC_CPUS} \((\d+) IRQs\)", irq["actual"]).group(1))
    assert count == 2 * NIC_QUEUE_PAIRS + 1, irq
