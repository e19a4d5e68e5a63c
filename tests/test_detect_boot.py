"""A real kernel's sysfs: capture an emulated 2-socket, 2-node QEMU guest, describe it, tune it.

The cached Debian 12 root of tests/boot (build-rootfs.sh) boots with ``-smp 4,sockets=2``, two
NUMA nodes, a multi-queue virtio NIC (2 queue pairs on a tap, link speed 100 Gbit/s) behind a
PCI expander bridge on node 1, and an SSD, a second (rotating) virtio disk and an NVMe disk
besides the virtio root (tests/boot/boot.sh with this topology). Two boots, not one with a
reboot inside: the guest has no Python for the generator, so bundles are made on the host.

The first boot carries a bundle made before it from what this VM is known to be (``KNOWN``)
with three claims planted wrong (issue 28): an interface that is not there, four NUMA nodes and
two GPUs. Its preflight must report exactly those three, in the journal, in `gen verify` on
the collector's snapshot and in Debian's node_exporter's ``/metrics`` (the bundle's
prometheus_textfile knob), and the IRQ and GPU units must skip what was made from them. After
the collector, the same boot brings the NIC up (sysfs has no speed for a link that is down),
runs the shipped capture script (no Python needed) and writes the tarball, base64, onto ttyS2;
the host unpacks it and runs ``gen detect --root``: the result must be the YAML that describes
this VM.

Then (issue 12's first live proof of IRQ pinning) a bundle generated for that detected YAML
boots on the same emulated machine: its preflight finds every claim true, and ``gen verify`` on
the collector's snapshot finds every interrupt of the NIC pinned to node 1's CPUs less the first
core. QEMU runs in a network namespace of its own (the tap never reaches the host's). Marked
``boot``; skips without root, QEMU or the cached root.
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
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from generator.cli import main
from generator.commands.detect import CAPTURE_SCRIPT
from generator.model.layout import COLLECT_SCRIPT, in_overlay

pytestmark = pytest.mark.boot

BOOT = Path(__file__).resolve().parent / "boot"
BOOT_TIMEOUT_S = 900
# Run by boot.sh's harness after the collector (a hook installs it as boottest-extra), its
# output on ttyS2: the goldtune units' journal, node_exporter's /metrics once the metrics unit
# has written its textfile, then the capture.
EXTRA = """#!/bin/sh
echo goldtune-journal-begin
journalctl -b -o cat --no-pager -u 'goldtune-*'
echo goldtune-journal-end
systemctl start goldtune-metrics.service prometheus-node-exporter.service
echo goldtune-metrics-begin
python3 - <<'PY'
import time, urllib.request
error = None
for attempt in range(600):
    try:
        print(urllib.request.urlopen("http://127.0.0.1:9100/metrics", timeout=60).read().decode())
        break
    except OSError as failed:
        error = failed
        time.sleep(1)
else:
    print("no /metrics:", error)
PY
echo goldtune-metrics-end
for link in /sys/class/net/en*; do ip link set dev "${link##*/}" up; done
cd /tmp && sh /usr/local/sbin/goldtune-capture /tmp/capture.tar.gz 2>/dev/null
echo goldtune-capture-begin
base64 /tmp/capture.tar.gz
echo goldtune-capture-end
"""
HOOK = """#!/bin/sh
set -eu
install -m 0755 "{capture}" "$1/usr/local/sbin/goldtune-capture"
install -m 0755 "{extra}" "$1/usr/local/sbin/boottest-extra"
"""
# What the VM is, in the hardware format (the CPU vendor and memory depend on QEMU's defaults;
# the kernel release is the cached root's), as gen detect writes it. The interface name is what
# udev gives a PCI function at bus 65 (0x41: the bus behind the expander bridge, bus_nr=64),
# slot 1; the root has no /etc/hosts, so the guest reaches node_exporter at 127.0.0.1.
KNOWN = {
    "description": "the detect test's emulated machine (tests/test_detect_boot.py)",
    "cpu": {"vendor": "amd", "sockets": 2, "cores_per_socket": 2, "threads_per_core": 1},
    "memory_gib": 1,
    "numa_nodes": 2,
    "memory_only_numa_nodes": 0,
    "nics": [{"name": "enp65s1", "speed_gbps": 100, "numa_node": 1, "role": "storage"}],
    "disks": [
        {"name": "vda", "kind": "hdd", "role": "os"},
        {"name": "vdb", "kind": "hdd", "role": "data"},
        {"name": "sda", "kind": "ssd", "role": "data"},
        {"name": "nvme0n1", "kind": "nvme", "role": "data"},
    ],
    "os": {"distro": "debian-12", "page_size_kib": 4},
}
# The three claims planted wrong, as the preflight names them: (claim, file says, node has).
PLANTED_NIC = "enp66s1"
PLANTED = {
    (f"nic/{PLANTED_NIC}/present", "yes", "no such interface"),
    ("numa.nodes_with_cpus", "4", "2"),
    ("gpu.count", "2", "0"),
}
PLANTED_PROFILE = "extends: training\nprometheus_textfile: true\n"
EXPECTED = {
    "sockets": 2,
    "cores_per_socket": 2,
    "threads_per_core": 1,
    "numa_nodes": 2,
    "nic_numa_node": 1,
    "disks": {(d["name"], d["kind"], d["role"]) for d in KNOWN["disks"]},
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


def generate(hardware: Path, profile: str, bundle: Path) -> Path:
    command = [sys.executable, "-m", "generator", "--hw", str(hardware), "--profile", profile]
    generated = subprocess.run(
        [*command, "-o", str(bundle)], cwd=REPO, capture_output=True, text=True, check=False
    )
    assert generated.returncode == 0, generated.stderr
    return bundle


def boot(bundle: Path, out: Path, hook: Path | None = None) -> Path:
    """boot.sh on this topology; its output directory (snapshot.log, extra.log, timings.txt)."""
    arguments = out.parent / f"{out.name}-topology.args"
    arguments.write_text("\n".join(TOPOLOGY) + "\n")
    command = [str(BOOT / "boot.sh"), "--bundle", str(bundle), "--out", str(out)]
    command += ["--collector", str(bundle / in_overlay(COLLECT_SCRIPT))]
    command += ["--timeout", str(BOOT_TIMEOUT_S), "--smp", SMP, "--qemu-args", str(arguments)]
    if hook is not None:
        command += ["--hook", str(hook)]
    booted = subprocess.run(
        command, capture_output=True, text=True, timeout=BOOT_TIMEOUT_S + 900, check=False
    )
    assert booted.returncode == 0, booted.stderr[-4000:]
    return out


def verify_json(bundle: Path, snapshot: Path, output_format: str = "json") -> tuple[int, str]:
    code = (
        "import sys; from pathlib import Path; from generator.verify.run import run_verify; "
        "sys.exit(run_verify(Path(sys.argv[1]), snapshot=Path(sys.argv[2]), "
        "output_format=sys.argv[3]))"
    )
    verified = subprocess.run(
        [sys.executable, "-c", code, str(bundle), str(snapshot), output_format],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    return verified.returncode, verified.stdout


def report_timing(name: str, report: dict[str, Any], out: Path) -> None:
    """The boot units' time and systemd-analyze's line, printed and kept (tests/boot/README.md)."""
    boot = report["boot"]
    units = ", ".join(f"{u} {t:.2f} s" for u, t in boot["units"].items() if t is not None)
    line = f"{name}: bundle units {boot['units_total_s']:.2f} s ({units}); {boot['startup']}"
    with (out / "timing.txt").open("a") as handle:
        handle.write(line + "\n")
    print(line)


def section(log: str, name: str) -> str:
    match = re.search(rf"goldtune-{name}-begin\s+(.*?)\s*goldtune-{name}-end", log, re.DOTALL)
    assert match, f"no {name} section on ttyS2"
    return match.group(1)


def captured_tree(log: str, into: Path) -> Path:
    data = base64.b64decode("".join(section(log, "capture").split()))
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


def planted_hardware(cache: Path) -> dict[str, object]:
    """KNOWN with the three claims of PLANTED made wrong, and nothing else."""
    data = json.loads(json.dumps(KNOWN))
    data["os"]["kernel"] = (cache / "kernel-version").read_text().strip()
    data["nics"][0]["name"] = PLANTED_NIC
    data["numa_nodes"] = 4
    data["gpus"] = [{"model": "L4", "count": 2}]
    data["nvswitch"] = False
    return data


@pytest.fixture(scope="module")
def planted(cache: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The first boot: the planted bundle (and the capture); its bundle and boot.sh's output."""
    work = tmp_path_factory.mktemp("planted")
    hardware = work / "planted.yaml"
    hardware.write_text(yaml.safe_dump(planted_hardware(cache), sort_keys=False))
    profile = work / "profile.yaml"
    profile.write_text(PLANTED_PROFILE)
    bundle = generate(hardware, str(profile), work / "bundle")
    extra = work / "boottest-extra"
    extra.write_text(EXTRA)
    hook = work / "hook.sh"
    hook.write_text(HOOK.format(capture=CAPTURE_SCRIPT, extra=extra))
    hook.chmod(0o755)
    return bundle, boot(bundle, work / "boot", hook)


@pytest.fixture(scope="module")
def detected(planted: tuple[Path, Path]) -> Path:
    """The hardware YAML `gen detect --root` writes for the capture of the emulated VM."""
    out = planted[1]
    tree = captured_tree((out / "extra.log").read_text(errors="replace"), out / "tree")
    result = CliRunner().invoke(main, ["detect", "--root", str(tree), "-o", str(out / "vm.yaml")])
    assert result.exit_code == 0, result.stderr
    return out / "vm.yaml"


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
    # KNOWN, from which the planted bundle was made, names the interface the VM has
    assert [nic["name"] for nic in data["nics"]] == [KNOWN["nics"][0]["name"]], text
    # one SATA disk: two on one AHCI host were probed in parallel and swapped names (boot.sh)
    found = {(d["name"], d["kind"], d["role"]) for d in data["disks"]}
    assert found == EXPECTED["disks"], text
    check = CliRunner().invoke(main, ["check", "--hw", str(detected), "--profile", "training"])
    assert check.exit_code == 0, check.stderr


def test_a_bundle_from_a_wrong_hardware_file_reports_exactly_the_planted_mismatches(
    planted: tuple[Path, Path],
) -> None:
    """Issue 28's done-when: a NIC name, the NUMA node count and the GPU count planted wrong are
    the three mismatches (and the only ones) in the journal, in `gen verify` on the snapshot
    and in node_exporter's /metrics; the IRQ and GPU units skip what was made from them."""
    bundle, out = planted
    extra = (out / "extra.log").read_text(errors="replace")
    journal = section(extra, "journal")
    said = {
        line.split(": the hardware file says")[0].removeprefix("goldtune-preflight: ")
        for line in journal.splitlines()
        if line.startswith("goldtune-preflight: ") and ": the hardware file says" in line
    }
    assert said == {claim for claim, _, _ in PLANTED}, journal
    for claim, expected, actual in PLANTED:
        assert f"{claim}: the hardware file says {expected}, this node has {actual};" in journal
    assert "goldtune-preflight: 3 of " in journal, journal
    assert "goldtune-preflight.service: Failed with result 'exit-code'" in journal, journal
    # nothing applied to the interface that is not there, nor to GPUs that are not there
    assert re.search(
        rf"goldtune-irq-affinity: {PLANTED_NIC}: skipped: preflight: .*"
        rf"nic/{PLANTED_NIC}/present",
        journal,
    ), journal
    assert "goldtune-gpu: every GPU action skipped: preflight: gpu.count differs" in journal

    status, text = verify_json(bundle, out / "snapshot.log")
    (out / "verify.json").write_text(text)
    report = json.loads(text)
    report_timing("planted", report, out)
    preflight = {
        (c["key"], c["expected"], c["actual"], c["verdict"])
        for c in report["checks"]
        if c["kind"] == "preflight"
    }
    assert preflight == {(*m, "differs") for m in PLANTED}, preflight
    assert status == 1
    status, text = verify_json(bundle, out / "snapshot.log", "prometheus")
    (out / "verify.prom").write_text(text)
    assert mismatch_series(text) == PLANTED, text

    metrics = section(extra, "metrics")
    (out / "metrics.txt").write_text(metrics)
    assert mismatch_series(metrics) == PLANTED, metrics
    assert 'goldtune_preflight_state{state="mismatch"} 1' in metrics, metrics
    assert "goldtune_preflight_mismatches 3" in metrics, metrics
    assert "goldtune_bundle_info{" in metrics, metrics


def mismatch_series(text: str) -> set[tuple[str, str, str]]:
    """(claim, expected, actual) of each goldtune_preflight_mismatch series, in whatever label
    order (node_exporter sorts them by name)."""
    found = set()
    for labels in re.findall(r"^goldtune_preflight_mismatch\{(.*)\} 1$", text, re.MULTILINE):
        pairs = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', labels))
        found.add((pairs["claim"], pairs["expected"], pairs["actual"]))
    return found


def test_a_bundle_for_the_detected_vm_pins_its_nic_irqs_numa_locally_live(
    detected: Path, tmp_path: Path
) -> None:
    """The detected YAML, a bundle for it (training: irq pin), installed and booted on the same
    emulated machine: its preflight finds every claim true, and verify finds each MSI-X
    interrupt of the NIC on node 1's CPUs."""
    bundle = generate(detected, "training", tmp_path / "bundle")
    plan = json.loads((bundle / "plan.json").read_text())
    nic = yaml.safe_load(detected.read_text())["nics"][0]["name"]
    pins = {s["key"]: s["value"] for s in plan["settings"] if s["kind"] == "irq"}
    assert pins == {nic: "local"}, pins  # read on the node: the device's local_cpulist
    out = boot(bundle, tmp_path / "boot")
    status, text = verify_json(bundle, out / "snapshot.log")
    (out / "verify.json").write_text(text)
    report = json.loads(text)
    report_timing("matching", report, out)
    failing = [c for c in report["checks"] if c["verdict"] in ("differs", "missing")]
    assert status == 0 and not failing, json.dumps(failing, indent=2)
    preflight = [(c["key"], c["verdict"]) for c in report["checks"] if c["kind"] == "preflight"]
    assert preflight == [("state", "ok")], preflight
    (irq,) = [c for c in report["checks"] if c["kind"] == "irq"]
    assert irq["verdict"] == "ok", irq
    # config + an input and an output vector per queue pair: every one of them pinned
    shown = rf"{NIC_CPUS} \((\d+) IRQs, read at boot\) within the device's local_cpulist"
    count = int(re.fullmatch(shown, irq["actual"]).group(1))
    assert count == 2 * NIC_QUEUE_PAIRS + 1, irq
