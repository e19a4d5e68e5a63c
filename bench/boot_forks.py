"""The processes each boot script starts on a fake matching node (issue 43), for `bench.py`.

Every process a boot unit starts is paid at every boot of every node, so the figure is a count,
not a time: `strace -f -e trace=process` runs each shipped script (templates/scripts/) with its
bundle's data file against a fake node, and the bench prints per script the processes it forked
(every clone/fork/vfork: `$(...)` subshells and pipelines included) and the programs it ran (every
successful execve but the script's own, by name).

The node: the DGX H100 tree of tests/detect_trees.py with each NIC's driver bound and 32 MSI
vectors per NIC; `gen detect --root` writes its hardware file and `gen --profile training` the
bundle, so the preflight finds the node matching. For pcie-acs a DGX-like PCIe tree stands
beside it (4 root ports, 4 switches of 4 downstream ports, the 8 GPUs and the 8 InfiniBand
ports of the data file below them, ACS on everywhere: 20 ports to write). The tools that would
touch the host (nvidia-smi, setpci, modprobe, systemctl, systemd-detect-virt) are stubs first on
PATH, written with shell builtins only, so that each stub call is one process. gpu-setup-amd runs
against 8 MI300X bound to amdgpu (SPX, NPS1) with a CPX, NPS4 and 90 % power cap plan.

Needs strace (apt-get install strace); without it the figures are skipped and it says so.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import NamedTuple

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests import detect_trees  # noqa: E402  (the fake machines the detector tests use)

SCRIPTS = REPO / "templates/scripts"
GOAL = 100  # forks per boot of a DGX H100 training bundle on a matching node (issue 43)
DRIVERS = {"ib": "mlx5_core", "ens": "ice", "eno": "igb"}
VECTORS = 32  # MSI vectors per NIC
STUBS = {
    "nvidia-smi": """case $1 in --query-gpu=*)
    while IFS= read -r row; do printf '%s\\n' "$row"; done <"$FAKE_INVENTORY"; exit 0 ;; esac
exit 0
""",
    "setpci": """[ "$1" = -s ] || exit 1
bdf=$2
shift 2
for register; do
    case $register in
        *=*)
            [ -f "$FAKE_PCI/$bdf/${register%%=*}" ] || exit 1
            printf '%s\\n' "${register#*=}" >"$FAKE_PCI/$bdf/${register%%=*}"
            continue
            ;;
    esac
    [ -f "$FAKE_PCI/$bdf/$register" ] || { echo "setpci: $bdf: $register not found" >&2; exit 1; }
    read -r value <"$FAKE_PCI/$bdf/$register"
    printf '%s\\n' "$value"
done
""",
    "modprobe": "exit 0\n",
    "systemctl": "exit 0\n",  # nvidia-persistenced active, as the bundle's drop-in makes it
    "systemd-detect-virt": "echo none\nexit 1\n",
    "amd-smi": "exit 0\n",
}
H100 = "{}, NVIDIA H100 80GB HBM3, 1980, 200.00, 700.00, 700.00, Enabled, Disabled, Enabled"
# an execve line, whole or split by strace: the pid, the program (absent in the resumed half),
# and its result ("" while unfinished)
EXECVE = re.compile(
    r'^ *(\d+) +(?:execve\("([^"]+)".*?|<\.\.\. execve resumed>.*?)'
    r"(?:= (-?\d+)(?: \w+ \(.*\))?|<unfinished \.\.\.>)$",
    re.MULTILINE,
)
AMD_DATA = "log-as\tgt-gpu\ncompute-partition\tCPX\nmemory-partition\tNPS4\npower-limit\t90%\n"


class Count(NamedTuple):
    script: str
    status: int
    forks: int
    programs: Counter[str]


def stub_bin(directory: Path) -> Path:
    directory.mkdir(parents=True)
    for name, body in STUBS.items():
        (directory / name).write_text(f"#!/bin/sh\n{body}")
        (directory / name).chmod(0o755)
    return directory


def dgx_node(root: Path) -> Path:
    """The DGX H100 tree, each NIC's driver bound and its MSI vectors with their affinity."""
    tree = detect_trees.dgx_h100().build(root)
    irq = 100
    for net in sorted((tree / "sys/class/net").iterdir()):
        if not (net / "device").exists():
            continue
        device = (net / "device").resolve()
        driver = next(d for prefix, d in DRIVERS.items() if net.name.startswith(prefix))
        (device / "driver").symlink_to(f"../../../bus/pci/drivers/{driver}")
        (device / "driver").resolve().mkdir(parents=True, exist_ok=True)
        (device / "msi_irqs").mkdir()
        for _ in range(VECTORS):
            (device / "msi_irqs" / str(irq)).write_text("msix\n")
            (tree / f"proc/irq/{irq}").mkdir(parents=True)
            (tree / f"proc/irq/{irq}/smp_affinity_list").write_text("0-223\n")
            irq += 1
    return tree


def acs_node(root: Path, interfaces: list[str]) -> tuple[Path, Path]:
    """A DGX-like PCIe tree: root port -> switch -> 4 downstream ports -> 2 GPUs and 2 NICs."""
    pci = root / "pci"
    devices = root / "sys/bus/pci/devices"
    devices.mkdir(parents=True)
    ports: dict[str, str] = {}  # bdf -> PCI Express capabilities register
    for switch in range(4):
        root_port, upstream = f"0000:{switch * 32:02x}:01.0", f"0000:{switch * 32 + 1:02x}:00.0"
        ports |= {root_port: "0042", upstream: "0052"}
        for slot in range(4):
            down = f"0000:{switch * 32 + 2:02x}:{slot:02x}.0"
            ports[down] = "0062"
            endpoint = f"0000:{switch * 32 + 3 + slot:02x}:00.0"
            chain = [root_port, upstream, down]
            directory = root / "sys/devices/pci0000:00" / "/".join([*chain, endpoint])
            directory.mkdir(parents=True)
            gpu = slot < 2
            (directory / "class").write_text("0x030200\n" if gpu else "0x020700\n")
            (directory / "vendor").write_text("0x10de\n" if gpu else "0x15b3\n")
            (devices / endpoint).symlink_to(directory)
            for depth, bridge in enumerate(chain):
                port = root / "sys/devices/pci0000:00" / "/".join(chain[: depth + 1])
                (port / "class").write_text("0x060400\n")
                (port / "vendor").write_text("0x10b5\n")
                if not (devices / bridge).exists():
                    (devices / bridge).symlink_to(port)
            if not gpu:
                name = interfaces.pop(0)
                (root / "sys/class/net" / name).mkdir(parents=True)
                (root / "sys/class/net" / name / "device").symlink_to(directory)
    for bdf, flags in ports.items():
        (pci / bdf).mkdir(parents=True)
        (pci / bdf / "CAP_EXP+0x2.w").write_text(flags + "\n")
        (pci / bdf / "ECAP_ACS+0x6.w").write_text("001d\n")
    return root, pci


def amd_node(root: Path) -> Path:
    for index in range(8):
        device = root / f"sys/bus/pci/drivers/amdgpu/0000:{index * 16 + 5:02x}:00.0"
        (device / "hwmon/hwmon3").mkdir(parents=True)
        (device / "current_compute_partition").write_text("SPX\n")
        (device / "available_compute_partition").write_text("SPX, DPX, QPX, CPX\n")
        (device / "current_memory_partition").write_text("NPS1\n")
        (device / "available_memory_partition").write_text("NPS1, NPS4\n")
        for name, watts in (("default", 750), ("min", 0), ("max", 750)):
            (device / f"hwmon/hwmon3/power1_cap_{name}").write_text(f"{watts * 1_000_000}\n")
    return root


def counted(script: str, data: Path, env: dict[str, str], work: Path) -> Count:
    """One run of SCRIPT under strace: the processes it forked and the programs it ran."""
    log = work / f"{script}.strace"
    command = ["strace", "-f", "-qq", "-e", "trace=process", "-o", str(log)]
    done = subprocess.run(
        [*command, str(SCRIPTS / script), str(data)],
        capture_output=True,
        text=True,
        check=False,
        env=env,
        timeout=120,
    )
    forks, programs = tally(log.read_text(), script)
    return Count(script, done.returncode, forks, programs)


def tally(log: str, script: str) -> tuple[int, Counter[str]]:
    """The processes a strace -f log shows forked (every pid but the first) and the programs run
    (each successful execve, whole or split by strace, but SCRIPT's own), by name."""
    pids = set(re.findall(r"^ *(\d+) ", log, re.MULTILINE))
    programs: Counter[str] = Counter()
    pending: dict[str, str] = {}  # pid -> its execve's program, where strace split the line
    for pid, path, result in EXECVE.findall(log):
        if path and result == "":
            pending[pid] = path
        elif result == "0":
            programs[Path(path or pending.pop(pid, "?")).name] += 1
    programs[script] -= 1  # the script's own execve
    return len(pids) - 1, +programs


def bundle(hardware: Path, out: Path) -> Path:
    gen = [sys.executable, "-m", "generator"]
    detect = [*gen, "detect", "--root", str(hardware.parent / "tree")]
    hardware.write_text(subprocess.run(detect, capture_output=True, text=True, check=True).stdout)
    made = [*gen, "--hw", str(hardware), "--profile", "training", "-o", str(out)]
    subprocess.run(made, capture_output=True, text=True, check=True, cwd=REPO)
    return out / "rootfs/etc/goldtune"


def acs_interfaces(conf: Path) -> list[str]:
    return [line.split("\t")[2] for line in conf.read_text().splitlines() if "\tnic\t" in line]


def measure(work: Path) -> list[Count]:
    tree = dgx_node(work / "tree")
    data = bundle(work / "hardware.yaml", work / "bundle")
    stubs = stub_bin(work / "bin")
    inventory = work / "inventory"
    inventory.write_text("".join(H100.format(index) + "\n" for index in range(8)))
    acs_tree, pci = acs_node(work / "acs", acs_interfaces(data / "pcie-acs.conf"))
    base = {"PATH": f"{stubs}:/usr/bin:/bin", "LC_ALL": "C", "TEST_SYSROOT": str(tree)}
    counts = [
        counted("preflight", data / "preflight.conf", base, work),
        counted("irq-affinity", data / "irq.conf", base, work),
        counted("gpu-setup", data / "gpu.conf", {**base, "FAKE_INVENTORY": str(inventory)}, work),
        counted(
            "pcie-acs",
            data / "pcie-acs.conf",
            {**base, "TEST_SYSROOT": str(acs_tree), "FAKE_PCI": str(pci)},
            work,
        ),
    ]
    amd_data = work / "amd-gpu.conf"
    amd_data.write_text(AMD_DATA)
    amd_env = {**base, "TEST_SYSROOT": str(amd_node(work / "amd"))}
    return [*counts, counted("gpu-setup-amd", amd_data, amd_env, work)]


def table(counts: list[Count]) -> list[str]:
    lines = [f"{'script':14} {'exit':>4} {'forks':>5} {'programs':>8}  which programs"]
    for count in counts:
        which = ", ".join(f"{name} x {n}" for name, n in count.programs.most_common()) or "-"
        total = sum(count.programs.values())
        lines.append(f"{count.script:14} {count.status:>4} {count.forks:>5} {total:>8}  {which}")
    dgx = sum(c.forks for c in counts if c.script != "gpu-setup-amd")
    verdict = "met" if dgx < GOAL else "NOT MET"
    lines.append(f"DGX H100 training bundle, one boot: {dgx} forks (goal: under {GOAL}): {verdict}")
    return lines


def run() -> list[str]:
    """The lines to print: forks and programs per boot script, and the DGX H100 boot's total."""
    if shutil.which("strace") is None:
        return ["boot forks: skipped: needs strace (apt-get install strace)"]
    if os.environ.get("PYTHONPATH"):
        os.environ.pop("PYTHONPATH")
    with tempfile.TemporaryDirectory(prefix="goldtune-boot-forks-") as scratch:
        counts = measure(Path(scratch))
    title = "boot forks: each boot script on a fake matching node (strace -f -e trace=process)"
    return [title, *table(counts)]


if __name__ == "__main__":
    print("\n".join(run()))
