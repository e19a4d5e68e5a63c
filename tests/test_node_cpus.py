"""CPU lists from the node (issue 38): NIC interrupts on the NIC's own node whatever the
firmware's CPU numbering, with as few processes as a matching node needs.

Fake sysfs trees of one machine (2 sockets x 8 cores x 2 threads, 4 NICs per node) numbered two
ways: Linux's usual order (node 0 = 0-7,16-23) and round-robin across sockets (node 0 = the even
CPUs), which some firmware uses. A list computed from the hardware file assumed the first, and
put half of each NIC's interrupts on the remote socket of the second.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from test_install import make_bin

from generator.cli import main
from generator.model import layout
from generator.model.cpulist import compress_cpus, expand_cpus
from generator.model.layout import in_overlay
from generator.paths import templates_dir

SCRIPTS = templates_dir() / layout.SCRIPTS_DIR
SOCKETS, CORES, THREADS = 2, 8, 2
CPUS = SOCKETS * CORES * THREADS
NICS_PER_NODE = 4
NUMBERINGS = ("usual", "round-robin")


def socket_of(cpu: int, numbering: str) -> int:
    """Each numbering's socket of a CPU; the SMT sibling of CPU c is c + 16 in both."""
    if numbering == "round-robin":
        return cpu % SOCKETS
    return (cpu % (SOCKETS * CORES)) // CORES


def core_of(cpu: int, numbering: str) -> int:
    first_thread = cpu % (SOCKETS * CORES)
    return first_thread // SOCKETS if numbering == "round-robin" else first_thread % CORES


def node_cpus(numbering: str) -> dict[int, list[int]]:
    return {
        node: [cpu for cpu in range(CPUS) if socket_of(cpu, numbering) == node]
        for node in range(SOCKETS)
    }


def nic_name(index: int) -> str:
    return f"ibp{index}s0"


def machine(root: Path, numbering: str, online: str = f"0-{CPUS - 1}") -> Path:
    """The machine's sysfs and procfs as the kernel lays them out for NUMBERING: per-CPU
    topology, node cpulists, CPU 0's siblings, and the NICs' PCI functions with numa_node,
    local_cpulist and 3 MSI interrupts each (their affinity every CPU, as at boot)."""
    nodes = node_cpus(numbering)
    system = root / "sys/devices/system"
    for cpu in range(CPUS):
        topology = system / f"cpu/cpu{cpu}/topology"
        topology.mkdir(parents=True)
        (topology / "physical_package_id").write_text(f"{socket_of(cpu, numbering)}\n")
        (topology / "core_id").write_text(f"{core_of(cpu, numbering)}\n")
        siblings = sorted({cpu % (SOCKETS * CORES) + t * SOCKETS * CORES for t in range(THREADS)})
        (topology / "thread_siblings_list").write_text(compress_cpus(siblings) + "\n")
    (system / "cpu/online").write_text(online + "\n")
    for node, cpus in nodes.items():
        (system / f"node/node{node}").mkdir(parents=True)
        (system / f"node/node{node}/cpulist").write_text(compress_cpus(cpus) + "\n")
    (root / "proc/self").mkdir(parents=True)
    (root / "proc/self/smaps").write_text("KernelPageSize:        4 kB\n")
    irq = 100
    for index in range(SOCKETS * NICS_PER_NODE):
        node = index // NICS_PER_NODE
        device = root / f"sys/devices/pci0000:00/0000:{index + 16:02x}:00.0"
        (device / "msi_irqs").mkdir(parents=True)
        (device / "numa_node").write_text(f"{node}\n")
        (device / "local_cpulist").write_text(compress_cpus(nodes[node]) + "\n")
        net = root / "sys/class/net" / nic_name(index)
        net.mkdir(parents=True)
        (net / "device").symlink_to(device)
        for _ in range(3):
            (device / "msi_irqs" / str(irq)).write_text("msix\n")
            (root / f"proc/irq/{irq}").mkdir(parents=True)
            (root / f"proc/irq/{irq}/smp_affinity_list").write_text(f"0-{CPUS - 1}\n")
            irq += 1
    return root


def hardware() -> dict[str, object]:
    """The hardware file of that machine: each NIC's numa_node stated, as gen detect writes."""
    return {
        "cpu": {
            "vendor": "intel",
            "sockets": SOCKETS,
            "cores_per_socket": CORES,
            "threads_per_core": THREADS,
        },
        "memory_gib": 256,
        "nics": [
            {
                "name": nic_name(index),
                "speed_gbps": 400,
                "role": "compute",
                "rdma": True,
                "numa_node": index // NICS_PER_NODE,
            }
            for index in range(SOCKETS * NICS_PER_NODE)
        ],
    }


def bundle_of(tmp_path: Path, profile: str = "training", **more: object) -> Path:
    path = tmp_path / "machine.yaml"
    path.write_text(yaml.safe_dump({**hardware(), **more}))
    out = tmp_path / "bundle"
    result = CliRunner().invoke(main, ["--hw", str(path), "--profile", profile, "-o", str(out)])
    assert result.exit_code == 0, result.output
    return out


def run_script(name: str, data: Path, tree: Path, path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [shutil.which("dash") or "/bin/sh", str(SCRIPTS / name), str(data)],
        capture_output=True,
        text=True,
        check=False,
        env={"PATH": str(path), "TEST_SYSROOT": str(tree), "LC_ALL": "C"},
        timeout=60,
    )


def affinity_by_nic(tree: Path) -> dict[str, set[int]]:
    """Every CPU any interrupt of each NIC may land on."""
    found: dict[str, set[int]] = {}
    for net in sorted((tree / "sys/class/net").iterdir()):
        cpus: set[int] = set()
        for irq in (net / "device/msi_irqs").iterdir():
            cpus |= set(expand_cpus((tree / f"proc/irq/{irq.name}/smp_affinity_list").read_text()))
        found[net.name] = cpus
    return found


@pytest.mark.parametrize("numbering", NUMBERINGS)
def test_every_nic_interrupt_lands_on_the_nics_own_node(tmp_path: Path, numbering: str) -> None:
    """The bundle of the hardware file, run on the node: every interrupt of every NIC on its own
    node's CPUs but CPU 0's core. On main the round-robin node got 0-7,16-23 less 0 and 16 for
    node 0's NICs: half of them on the odd CPUs, socket 1."""
    made = bundle_of(tmp_path)
    tree = machine(tmp_path / "tree", numbering)
    result = run_script(
        "irq-affinity", made / in_overlay(layout.IRQ_DATA), tree, make_bin(tmp_path, {})
    )
    assert result.returncode == 0, result.stdout
    nodes = node_cpus(numbering)
    first_core = {0, SOCKETS * CORES}
    for index, cpus in enumerate(affinity_by_nic(tree).values()):
        assert cpus == set(nodes[index // NICS_PER_NODE]) - first_core, (index, result.stdout)
    # and the preflight finds this node as the file describes it: nothing numbering-dependent
    # is claimed, since no setting is made from a numbering
    status = run_script(
        "preflight", made / in_overlay(layout.PREFLIGHT_DATA), tree, make_bin(tmp_path, {}, "b2")
    )
    assert status.returncode == 0, status.stdout
    assert "this node matches the hardware file" in status.stdout


@pytest.mark.parametrize("numbering", NUMBERINGS)
def test_with_nosmt_the_offline_siblings_take_no_interrupt(tmp_path: Path, numbering: str) -> None:
    tree = machine(tmp_path / "tree", numbering, online=f"0-{SOCKETS * CORES - 1}")
    data = tmp_path / "irq.conf"
    data.write_text("".join(f"pin\t{nic_name(index)}\tlocal\n" for index in range(8)))
    result = run_script("irq-affinity", data, tree, make_bin(tmp_path, {}))
    assert result.returncode == 0, result.stdout
    nodes = node_cpus(numbering)
    for index, cpus in enumerate(affinity_by_nic(tree).values()):
        expected = {cpu for cpu in nodes[index // NICS_PER_NODE] if cpu < SOCKETS * CORES}
        assert cpus == expected - {0}, index


# The tools irq-affinity ever started: head (a binary CPU list per NIC) and awk (a CPU set per
# NIC), each wrapped to log that it ran.
COUNTED = ("awk", "head", "cat", "tr", "readlink", "cut", "udevadm", "systemctl")


def counting_bin(tmp_path: Path, log: Path) -> Path:
    directory = tmp_path / "counting-bin"
    directory.mkdir()
    for tool in COUNTED:
        real = shutil.which(tool)
        body = f'exec {real} "$@"\n' if real else "exit 127\n"
        (directory / tool).write_text(f"#!/bin/sh\necho {tool} >>{log}\n{body}")
        (directory / tool).chmod(0o755)
    return directory


def test_a_matching_node_starts_one_process_for_every_nic(tmp_path: Path) -> None:
    """One awk resolves every NIC's list (each distinct list once); everything else is the
    shell's own. The script before started head and awk per NIC (16 for these 8 NICs) and forked
    49 times in all (strace -f, below)."""
    tree = machine(tmp_path / "tree", "round-robin")
    data = tmp_path / "irq.conf"
    data.write_text("".join(f"pin\t{nic_name(index)}\tlocal\n" for index in range(8)))
    log = tmp_path / "started.log"
    result = run_script("irq-affinity", data, tree, counting_bin(tmp_path, log))
    assert result.returncode == 0, result.stdout
    assert log.read_text().split() == ["awk"]


@pytest.mark.skipif(shutil.which("strace") is None, reason="no strace")
def test_a_matching_node_forks_once(tmp_path: Path) -> None:
    """Forks counted by the kernel (clone, fork, vfork under strace -f): one, for the awk; a
    command substitution of the shell's own functions forks too, and the script has none left."""
    tree = machine(tmp_path / "tree", "usual")
    data = tmp_path / "irq.conf"
    data.write_text("".join(f"pin\t{nic_name(index)}\tlocal\n" for index in range(8)))
    trace = tmp_path / "trace"
    dash = shutil.which("dash") or "/bin/sh"
    result = subprocess.run(
        [
            *("strace", "-f", "-qq", "-e", "trace=fork,vfork,clone,clone3", "-o", str(trace)),
            *(dash, str(SCRIPTS / "irq-affinity"), str(data)),
        ],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "TEST_SYSROOT": str(tree), "LC_ALL": "C"},
        timeout=60,
    )
    if result.returncode != 0 and "ptrace" in result.stderr:
        pytest.skip(f"strace cannot trace here: {result.stderr.strip()}")
    assert result.returncode == 0, result.stdout + result.stderr
    forks = re.findall(r"\b(?:clone3?|v?fork)\(", trace.read_text())
    assert len(forks) == 1, trace.read_text()
