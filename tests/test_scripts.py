"""The fixed scripts of templates/scripts/: linted once here, the same bytes in every bundle, and
each run against fake tools (a recording nvidia-smi, a fake /sys + /proc tree, a scratch image)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest
from conftest import PROFILES, SYSTEMS, missing_tool
from plans import full_plan
from test_install import bundle_for, make_bin, run
from validators.run import MissingTool, find_udevadm

from generator import TOOL
from generator.commands.generate import plan_for, render_for
from generator.model import layout
from generator.model.layout import in_overlay
from generator.paths import templates_dir
from generator.render.outputs import FIXED_SCRIPTS, RenderedFiles
from generator.render.overlay import STEP_SUMMARIES
from generator.render.render import render_bundle

SCRIPTS = templates_dir() / layout.SCRIPTS_DIR
SCRIPT_NAMES = sorted(path.name for path in SCRIPTS.iterdir())


@cache
def rendered(system: str, profile: str) -> RenderedFiles:
    return render_for(system, profile)


def test_every_fixed_script_is_an_output() -> None:
    assert sorted(output.template.rsplit("/", 1)[-1] for output in FIXED_SCRIPTS) == SCRIPT_NAMES
    # the library install.sh and the first-boot script source is read, not run
    modes = {output.path: output.mode for output in FIXED_SCRIPTS}
    assert modes.pop(layout.INSTALL_LIB) == 0o644
    assert set(modes.values()) == {0o755}


@pytest.mark.parametrize("name", SCRIPT_NAMES)
def test_fixed_script_passes_shellcheck(name: str) -> None:
    if shutil.which("shellcheck") is None:  # skipped locally, a failure in CI
        missing_tool(FileNotFoundError("shellcheck"))
    result = subprocess.run(
        # -x: install.sh is checked with the library it sources (its source-path directive)
        ["shellcheck", "-x", "-s", "sh", str(SCRIPTS / name)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout


@pytest.mark.parametrize("name", SCRIPT_NAMES)
def test_fixed_script_names_no_tool_and_no_bundle(name: str) -> None:
    """Names come from the data files and the units (layout.py), not from the script."""
    text = (SCRIPTS / name).read_text()
    assert not re.search(r"goldtune(?!-snapshot)", text)
    assert "{{" not in text and "{%" not in text


def test_scripts_are_byte_identical_in_every_shipped_bundle() -> None:
    expected = {
        output.path: ((SCRIPTS / output.template.rsplit("/", 1)[-1]).read_bytes(), output.mode)
        for output in FIXED_SCRIPTS
    }
    for system in SYSTEMS:
        for profile in PROFILES:
            files = rendered(system, profile)
            for path, (content, mode) in expected.items():
                if path in files:
                    assert files[path] == (content, mode), f"{system}/{profile}: {path}"
            assert layout.INSTALL_SH in files and in_overlay(layout.COLLECT_SCRIPT) in files


def test_install_lib_has_one_function_per_step() -> None:
    """install.sh and the first-boot script run each step by run_step (install-lib.sh)."""
    text = (SCRIPTS / "install-lib.sh").read_text()
    functions = set(re.findall(r"^step_([a-z]+)\(\)", text, re.MULTILINE))
    assert functions == set(STEP_SUMMARIES)
    for name, summary in STEP_SUMMARIES.items():
        assert f"{name}) printf '%s' \"{summary}\" ;;" in text


def test_verify_imports_neither_jinja_nor_the_renderer() -> None:
    code = (
        "import sys, generator.verify, generator.verify.run, generator.verify.snapshot\n"
        "bad = sorted(m for m in sys.modules if m == 'jinja2' or m.startswith(('jinja2.', "
        "'generator.render')))\n"
        "print(bad)"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "[]"


# --- gpu-setup ------------------------------------------------------------------------------------


def gpu_setup(tmp_path: Path, data: str, smi_log: Path) -> subprocess.CompletedProcess[str]:
    data_file = tmp_path / "gpu.conf"
    data_file.write_text(data)
    smi = 'printf "%s\\n" "$*" >>"$STUB_LOG"\nexit 0\n'
    return run(
        SCRIPTS / "gpu-setup",
        str(data_file),
        path=make_bin(tmp_path, {"nvidia-smi": smi}),
        log=smi_log,
    )


@pytest.mark.parametrize(
    "line",
    [
        "ecc\ton; reboot",
        "clocks\t$(reboot)",
        "power-limit\t5%%",
        "mig\tmaybe",
        "reboot\tnow",
        "ecc on",
        "compute-mode\tANY",
    ],
)
def test_gpu_setup_refuses_bad_data_and_calls_nothing(tmp_path: Path, line: str) -> None:
    log = tmp_path / "smi.log"
    log.touch()
    result = gpu_setup(tmp_path, f"log-as\tgt-gpu\n# r: x\necc\ton\n{line}\n", log)
    assert result.returncode == 2
    assert "line 4" in result.stdout and "nothing done" in result.stdout
    assert log.read_text() == ""


# A fake nvidia-smi: --query-gpu prints $FAKE_INVENTORY; every other call is recorded in
# $STUB_LOG, then sleeps $FAKE_SLEEP seconds (a slow or wedged card) when that is set.
FAKE_SMI = """\
case $1 in --query-gpu=*) cat "$FAKE_INVENTORY"; exit 0 ;; esac
printf '%s\\n' "$*" >>"$STUB_LOG"
[ -z "${FAKE_SLEEP:-}" ] || exec sleep "$FAKE_SLEEP"
exit 0
"""
# index, name, clocks.max.sm, power.min_limit, power.max_limit, power.default_limit, ECC, MIG
A100_500W = "0, NVIDIA A100-SXM4-80GB, 1410, 100.00, 500.00, 500.00, Enabled, Disabled"
A100_400W = "1, NVIDIA A100-SXM4-80GB, 1410, 100.00, 400.00, 400.00, Enabled, Disabled"
L4_72W = "0, NVIDIA L4, 2040, 40.00, 72.00, 72.00, Enabled, [N/A]"
NO_DEFAULT = "0, NVIDIA A10, 1695, [N/A], [N/A], [N/A], Enabled, [N/A]"


def run_fake_gpus(
    tmp_path: Path, data: str, inventory: list[str], daemon_active: bool = False, **env: str
) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    """gpu-setup with DATA against fake GPUs; its output and the nvidia-smi calls it made
    (``daemon_active``: systemctl says nvidia-persistenced.service is active)."""
    (tmp_path / "gpu.conf").write_text(f"log-as\tgt-gpu\n{data}")
    (tmp_path / "inventory").write_text("".join(row + "\n" for row in inventory))
    log = tmp_path / "smi.log"
    log.touch()
    systemctl = "exit 0\n" if daemon_active else "exit 1\n"
    path = make_bin(tmp_path, {"nvidia-smi": FAKE_SMI, "systemctl": systemctl})
    for tool in ("timeout", "date", "sleep"):
        (path / tool).symlink_to(shutil.which(tool) or f"/bin/{tool}")
    result = subprocess.run(
        [str(SCRIPTS / "gpu-setup"), str(tmp_path / "gpu.conf")],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
        env={
            "PATH": str(path),
            "STUB_LOG": str(log),
            "FAKE_INVENTORY": str(tmp_path / "inventory"),
            "LC_ALL": "C",
            **env,
        },
    )
    return result, log.read_text().splitlines()


@pytest.mark.parametrize(
    ("percent", "inventory", "calls"),
    [
        # one model, two boards: 80 % of each card's own default, not 320 W for both
        ("80%", [A100_500W, A100_400W], ["-i 0 -pl 400", "-i 1 -pl 320"]),
        ("100%", [A100_500W, A100_400W], ["-i 0 -pl 500", "-i 1 -pl 400"]),
        # a power-capped part: 50 % of 72 W is below the card's 40 W minimum
        ("50%", [L4_72W], ["-i 0 -pl 40"]),
        ("90%", [L4_72W], ["-i 0 -pl 64"]),
        # no default reported: unchanged rather than guessed
        ("80%", [NO_DEFAULT], []),
    ],
)
def test_gpu_setup_power_percent_is_of_each_cards_own_default(
    tmp_path: Path, percent: str, inventory: list[str], calls: list[str]
) -> None:
    result, made = run_fake_gpus(tmp_path, f"power-limit\t{percent}\n", inventory)
    assert result.returncode == 0, result.stdout
    assert made == calls, result.stdout
    if not calls:
        assert "gt-gpu: GPU 0: default power limit unknown; power limit unchanged" in result.stdout


@pytest.mark.parametrize(
    ("daemon_active", "modes", "calls"),
    [
        # the daemon runs but left GPUs off (Ubuntu's packaged --no-persistence-mode, where the
        # bundle's drop-in did not take): reported and left to the daemon, never legacy -pm
        (True, ["Disabled", "Disabled"], []),
        (True, ["Enabled", "Disabled"], []),
        # the daemon keeps persistence on: nothing to do
        (True, ["Enabled", "Enabled"], []),
        # no daemon, persistence already on (set earlier, or by the driver): nothing to do
        (False, ["Enabled", "Enabled"], []),
        (False, ["Disabled", "Disabled"], ["-pm 1"]),
    ],
)
def test_gpu_setup_uses_legacy_persistence_only_where_no_daemon_runs(
    tmp_path: Path, daemon_active: bool, modes: list[str], calls: list[str]
) -> None:
    inventory = [f"{row}, {mode}" for row, mode in zip([A100_500W, A100_400W], modes, strict=True)]
    result, made = run_fake_gpus(tmp_path, "persistence\ton\n", inventory, daemon_active)
    assert result.returncode == 0, result.stdout
    assert made == calls, result.stdout
    state = "active" if daemon_active else "not active"
    assert f"(nvidia-persistenced {state})" in result.stdout
    if daemon_active and "Disabled" in modes:
        assert "left to the daemon, not forced with nvidia-smi -pm" in result.stdout


def test_gpu_setup_reset_undoes_a_clock_lock_on_every_card(tmp_path: Path) -> None:
    result, made = run_fake_gpus(tmp_path, "clocks\treset\n", [A100_500W, A100_400W])
    assert result.returncode == 0
    assert made == ["-i 0 -rgc", "-i 1 -rgc"]
    assert "GPU 1: graphics clock lock reset (clocks left to the driver): done" in result.stdout


def test_a_wedged_gpu_stops_every_later_call(tmp_path: Path) -> None:
    data = "persistence\ton\ncompute-mode\tDEFAULT\nclocks\treset\n"
    result, made = run_fake_gpus(
        tmp_path, data, [A100_500W, A100_400W], FAKE_SLEEP="30", TEST_CALL_LIMIT="1"
    )
    assert result.returncode == 0
    assert made == ["-pm 1"]
    assert "nvidia-smi did not answer within 1 s; the GPU or driver is wedged" in result.stdout
    assert "GPU 1: compute mode DEFAULT: failed or not supported: not run" in result.stdout


def test_slow_calls_stop_when_the_time_budget_is_spent(tmp_path: Path) -> None:
    inventory = [f"{i}, NVIDIA L4, 2040, 40.00, 72.00, 72.00, Enabled, [N/A]" for i in range(8)]
    result, made = run_fake_gpus(
        tmp_path, "clocks\treset\n", inventory, FAKE_SLEEP="1", TEST_BUDGET="2"
    )
    assert result.returncode == 0
    assert 1 <= len(made) <= 3, made
    assert "not run: the time budget of 2 s is spent" in result.stdout


def script_number(name: str, variable: str) -> int:
    match = re.search(
        rf"^{variable}=\$\{{TEST_{variable}:-(\d+)\}}$|^{variable}=(\d+)$",
        (SCRIPTS / name).read_text(),
        re.MULTILINE,
    )
    assert match, variable
    return int(match.group(1) or match.group(2))


def test_the_gpu_unit_bounds_the_boot_delay_to_the_stated_figure() -> None:
    """The script's own bound (budget + one last call + its kill grace) fits the unit's cap."""
    bound = sum(script_number("gpu-setup", v) for v in ("BUDGET", "CALL_LIMIT", "KILL_GRACE"))
    unit = (templates_dir() / "gpu.service.j2").read_text()
    (cap,) = re.findall(r"^TimeoutStartSec=(\d+)$", unit, re.MULTILINE)
    assert f"seconds ({bound})" in (SCRIPTS / "gpu-setup").read_text()
    assert f"bounds itself to {bound} s" in unit
    assert bound < int(cap) <= 150


def test_gpu_setup_without_data_file_is_a_usage_error(tmp_path: Path) -> None:
    result = run(SCRIPTS / "gpu-setup", str(tmp_path / "missing"), path=make_bin(tmp_path, {}))
    assert result.returncode == 2
    assert "usage" in result.stdout


# --- irq-affinity, against a fake /sys and /proc --------------------------------------------------


def fake_tree(root: Path, interfaces: dict[str, list[int]]) -> Path:
    for interface, irqs in interfaces.items():
        msi = root / "sys/class/net" / interface / "device/msi_irqs"
        msi.mkdir(parents=True)
        for irq in irqs:
            (msi / str(irq)).write_text("msix\n")
            (root / "proc/irq" / str(irq)).mkdir(parents=True)
            (root / "proc/irq" / str(irq) / "smp_affinity_list").write_text("0-127\n")
    (root / "sys/class/net/lo").mkdir(parents=True, exist_ok=True)
    return root


def test_irq_affinity_pins_every_msi_interrupt_of_each_interface(tmp_path: Path) -> None:
    tree = fake_tree(tmp_path / "tree", {"eth0": [40, 41], "ib0": [50]})
    shutil.rmtree(tree / "proc/irq/41")  # an interrupt that went away: refused, not fatal
    data = tmp_path / "irq.conf"
    data.write_text(
        "# layout: tag\nlog-as\tgt-irq\n# irq.pin: eth0\npin\teth0\t0-3\n# irq.pin: ib0\n"
        "pin\tib0\t4,6\n"
        "# irq.pin: lo\npin\tlo\t1\n# irq.pin: gone\npin\tgone0\t1\n"
    )
    env_path = make_bin(tmp_path, {"systemctl": "exit 1\n"})
    result = subprocess.run(
        [str(SCRIPTS / "irq-affinity"), str(data)],
        capture_output=True,
        text=True,
        check=False,
        env={"PATH": str(env_path), "TEST_SYSROOT": str(tree), "LC_ALL": "C"},
    )
    assert result.returncode == 0, result.stdout
    assert (tree / "proc/irq/40/smp_affinity_list").read_text() == "0-3\n"
    assert (tree / "proc/irq/50/smp_affinity_list").read_text() == "4,6\n"
    assert "gt-irq: eth0: 1 interrupts pinned to CPUs 0-3; 1 refused" in result.stdout
    assert "gt-irq: ib0: 1 interrupts pinned to CPUs 4,6; 0 refused" in result.stdout
    assert "gt-irq: lo: no MSI interrupts" in result.stdout
    assert "gt-irq: gone0: no such interface; skipped" in result.stdout
    assert "irqbalance" not in result.stdout


def test_irq_affinity_warns_of_a_running_irqbalance_without_starting_a_process(
    tmp_path: Path,
) -> None:
    """irqbalance found by its process (/proc/<pid>/comm), and the preflight's result read once
    with the shell's read: no process at all for fixed CPU lists, however many interfaces (as
    first merged: systemctl is-active, then an awk per interface)."""
    tree = fake_tree(tmp_path / "tree", {"eth0": [40], "ib0": [50]})
    (tree / "proc/4242").mkdir(parents=True)
    (tree / "proc/4242/comm").write_text("irqbalance\n")
    (tree / "run/goldtune").mkdir(parents=True)
    (tree / "run/goldtune/preflight").write_text(
        "state\tmismatch\nmismatch\tnic/ib0/present\tyes\tno such interface\tirq:ib0\n"
    )
    data = tmp_path / "irq.conf"
    data.write_text(
        "log-as\tgt-irq\npreflight\t/run/goldtune/preflight\npin\teth0\t0-3\npin\tib0\t4\n"
    )
    log = tmp_path / "started.log"
    log.touch()
    path = tmp_path / "bin"  # nothing but stubs that log being started
    path.mkdir()
    for tool in ("systemctl", "awk", "readlink", "cat", "head"):
        (path / tool).write_text(f'#!/bin/sh\necho {tool} >>"{log}"\nexit 1\n')
        (path / tool).chmod(0o755)
    result = subprocess.run(
        [str(SCRIPTS / "irq-affinity"), str(data)],
        capture_output=True,
        text=True,
        check=False,
        env={"PATH": str(path), "TEST_SYSROOT": str(tree), "LC_ALL": "C"},
    )
    assert result.returncode == 0, result.stdout
    assert "gt-irq: warning: irqbalance is running" in result.stdout
    assert "gt-irq: ib0: skipped: preflight: nic/ib0/present differs" in result.stdout
    assert "gt-irq: eth0: 1 interrupts pinned to CPUs 0-3; 0 refused" in result.stdout
    assert log.read_text() == ""


def test_gpu_setup_skips_by_the_preflight_without_starting_a_process(tmp_path: Path) -> None:
    """No GPU driver, a preflight mismatch the GPU actions depend on: the actions are skipped
    with the preflight's reason, and no process is started (as first merged: date for the time
    budget and an awk for the preflight's result, at every boot of every node)."""
    tree = tmp_path / "tree"
    (tree / "run/goldtune").mkdir(parents=True)
    (tree / "run/goldtune/preflight").write_text(
        "state\tmismatch\nmismatch\tgpu.count\t2\t0\tgpu:clocks,gpu:persistence\n"
    )
    data = tmp_path / "gpu.conf"
    data.write_text(
        "log-as\tgt-gpu\npreflight\t/run/goldtune/preflight\npersistence\ton\nclocks\treset\n"
    )
    log = tmp_path / "started.log"
    log.touch()
    path = tmp_path / "bin"  # nothing but stubs that log being started
    path.mkdir()
    for tool in ("date", "awk", "tr", "cat", "head"):
        (path / tool).write_text(f'#!/bin/sh\necho {tool} >>"{log}"\nexit 1\n')
        (path / tool).chmod(0o755)
    result = subprocess.run(
        [str(SCRIPTS / "gpu-setup"), str(data)],
        capture_output=True,
        text=True,
        check=False,
        env={"PATH": str(path), "TEST_SYSROOT": str(tree), "LC_ALL": "C"},
    )
    assert result.returncode == 0, result.stdout  # skipped: no nvidia-smi is no failure then
    assert "gt-gpu: every GPU action skipped: preflight: gpu.count differs" in result.stdout
    assert "gt-gpu: nvidia-smi not found" in result.stdout
    assert log.read_text() == ""


def virtio_nic(root: Path, irqs: list[int], modalias: str) -> Path:
    """eth0 as sysfs has a virtio NIC: its device link names the virtio device, whose parent is
    the virtio PCI function that holds msi_irqs (and numa_node)."""
    function = root / "sys/devices/pci0000:40/0000:40:01.0"
    (function / "virtio1").mkdir(parents=True)
    (function / "virtio1/modalias").write_text(modalias + "\n")
    (function / "numa_node").write_text("1\n")
    (function / "msi_irqs").mkdir()
    for irq in irqs:
        (function / "msi_irqs" / str(irq)).write_text("msix\n")
        (root / "proc/irq" / str(irq)).mkdir(parents=True)
        (root / "proc/irq" / str(irq) / "smp_affinity_list").write_text("0-3\n")
    (root / "sys/class/net/eth0").mkdir(parents=True)
    (root / "sys/class/net/eth0/device").symlink_to(function / "virtio1")
    return root


@pytest.mark.parametrize(
    ("modalias", "pinned"),
    [("virtio:d00000001v00001AF4", True), ("pci:v00008086d00001592", False)],
    ids=["virtio", "not-virtio"],
)
def test_irq_affinity_pins_a_virtio_nic_through_its_pci_function(
    tmp_path: Path, modalias: str, pinned: bool
) -> None:
    """Multi-queue virtio-net (the detect boot's NIC): the vectors are the PCI function's. A
    device that is not virtio is never taken for its parent (a bridge's AER/PME interrupts)."""
    tree = virtio_nic(tmp_path / "tree", [24, 25, 26], modalias)
    data = tmp_path / "irq.conf"
    data.write_text("pin\teth0\t2-3\n")
    result = subprocess.run(
        [str(SCRIPTS / "irq-affinity"), str(data)],
        capture_output=True,
        text=True,
        check=False,
        env={"PATH": str(make_bin(tmp_path, {"systemctl": "exit 1\n"})), "TEST_SYSROOT": str(tree)},
    )
    assert result.returncode == 0, result.stdout
    affinity = {(tree / f"proc/irq/{irq}/smp_affinity_list").read_text() for irq in (24, 25, 26)}
    if pinned:
        assert affinity == {"2-3\n"}
        assert "eth0: 3 interrupts pinned to CPUs 2-3; 0 refused" in result.stdout
    else:
        assert affinity == {"0-3\n"}
        assert "eth0: no MSI interrupts" in result.stdout


def numa_machine(root: Path, online: str, device: dict[str, str]) -> Path:
    """2 nodes x 16 cores x 2 threads (node 0: 0-15,32-47), CPU 0's sibling 32; one NIC ib0
    whose device directory holds DEVICE (local_cpulist, numa_node)."""
    tree = fake_tree(root, {"ib0": [60, 61]})
    cpu = tree / "sys/devices/system/cpu"
    (cpu / "cpu0/topology").mkdir(parents=True)
    (cpu / "cpu0/topology/thread_siblings_list").write_text("0,32\n")
    (cpu / "online").write_text(online + "\n")
    for node, cpus in (("0", "0-15,32-47"), ("1", "16-31,48-63")):
        (tree / f"sys/devices/system/node/node{node}").mkdir(parents=True)
        (tree / f"sys/devices/system/node/node{node}/cpulist").write_text(cpus + "\n")
    for name, text in device.items():
        (tree / "sys/class/net/ib0/device" / name).write_text(text + "\n")
    return tree


@pytest.mark.parametrize(
    ("online", "device", "pinned", "source"),
    [
        ("0-63", {"local_cpulist": "0-15,32-47"}, "1-15,33-47", "local_cpulist"),
        # nosmt: the siblings 32-63 are offline, so they are not in the list
        ("0-31", {"local_cpulist": "0-15,32-47"}, "1-15", "local_cpulist"),
        ("0-63", {"numa_node": "1"}, "16-31,48-63", "NUMA node 1"),
        ("0-63", {"numa_node": "-1"}, "1-31,33-63", "every online CPU (no NUMA node)"),
        ("0-63", {}, "1-31,33-63", "every online CPU (no NUMA node)"),
    ],
    ids=["local-cpulist", "nosmt-siblings-offline", "numa-node", "no-node", "nothing"],
)
def test_irq_affinity_resolves_local_at_boot_from_the_device(
    tmp_path: Path, online: str, device: dict[str, str], pinned: str, source: str
) -> None:
    tree = numa_machine(tmp_path / "tree", online, device)
    data = tmp_path / "irq.conf"
    data.write_text("log-as\tgt-irq\npin\tib0\tlocal\n")
    path = make_bin(tmp_path, {"systemctl": "exit 1\n"})
    result = subprocess.run(
        [str(SCRIPTS / "irq-affinity"), str(data)],
        capture_output=True,
        text=True,
        check=False,
        env={"PATH": str(path), "TEST_SYSROOT": str(tree), "LC_ALL": "C"},
    )
    assert result.returncode == 0, result.stdout
    assert f"gt-irq: ib0: CPUs {pinned} from the device's {source}," in result.stdout
    for irq in (60, 61):
        assert (tree / f"proc/irq/{irq}/smp_affinity_list").read_text() == pinned + "\n"


def cpus_in(cpulist: str) -> set[int]:
    cpus: set[int] = set()
    for part in cpulist.strip().split(","):
        low, _, high = part.partition("-")
        cpus.update(range(int(low), int(high or low) + 1))
    return cpus


HOST_LISTS = (
    Path("/sys/devices/system/cpu/cpu0/topology/thread_siblings_list"),
    Path("/sys/devices/system/node/node0/cpulist"),
)


@pytest.mark.skipif(
    not all(path.is_file() for path in HOST_LISTS), reason="no CPU topology or NUMA node in /sys"
)
def test_irq_affinity_reads_the_kernels_binary_cpu_lists(tmp_path: Path) -> None:
    """A CPU's thread_siblings_list and a node's cpulist are binary sysfs attributes, from which
    dash's read gets nothing: the fake tree links this host's real ones. On the script before,
    the node's list read empty and nothing was pinned."""
    tree = numa_machine(tmp_path / "tree", "0-63", {"numa_node": "0"})
    siblings, node_cpus = HOST_LISTS
    online = Path("/sys/devices/system/cpu/online").read_text().strip()
    (tree / "sys/devices/system/cpu/online").write_text(online + "\n")
    for fake, real in (
        (tree / "sys/devices/system/cpu/cpu0/topology/thread_siblings_list", siblings),
        (tree / "sys/devices/system/node/node0/cpulist", node_cpus),
    ):
        fake.unlink()
        fake.symlink_to(real)
    wanted = (cpus_in(node_cpus.read_text()) & cpus_in(online)) - cpus_in(siblings.read_text())
    if not wanted:
        pytest.skip("node 0 of this host has only the first core")
    data = tmp_path / "irq.conf"
    data.write_text("log-as\tgt-irq\npin\tib0\tlocal\n")
    path = make_bin(tmp_path, {"systemctl": "exit 1\n"})
    result = subprocess.run(
        [shutil.which("dash") or "/bin/sh", str(SCRIPTS / "irq-affinity"), str(data)],
        capture_output=True,
        text=True,
        check=False,
        env={"PATH": str(path), "TEST_SYSROOT": str(tree), "LC_ALL": "C"},
    )
    assert result.returncode == 0, result.stdout
    pinned = (tree / "proc/irq/60/smp_affinity_list").read_text().strip()
    assert cpus_in(pinned) == wanted, result.stdout


def test_irq_affinity_leaves_a_nic_with_only_the_first_core_alone(tmp_path: Path) -> None:
    tree = numa_machine(tmp_path / "tree", "0-63", {"local_cpulist": "0,32"})
    data = tmp_path / "irq.conf"
    data.write_text("pin\tib0\tlocal\n")
    path = make_bin(tmp_path, {"systemctl": "exit 1\n"})
    result = subprocess.run(
        [str(SCRIPTS / "irq-affinity"), str(data)],
        capture_output=True,
        text=True,
        check=False,
        env={"PATH": str(path), "TEST_SYSROOT": str(tree), "LC_ALL": "C"},
    )
    assert result.returncode == 0
    assert "ib0: no online CPU besides the first core in its local_cpulist" in result.stdout
    assert (tree / "proc/irq/60/smp_affinity_list").read_text() == "0-127\n"


@pytest.mark.parametrize(
    "line",
    [
        "pin\teth0\t0-3; reboot",
        "pin\teth0\tlocal-ish",
        "pin\t../../x\t1",
        "pin\teth0",
        "unpin\teth0\t1",
    ],
)
def test_irq_affinity_refuses_bad_data_and_pins_nothing(tmp_path: Path, line: str) -> None:
    tree = fake_tree(tmp_path / "tree", {"eth0": [40]})
    data = tmp_path / "irq.conf"
    data.write_text(f"pin\teth0\t0-3\n{line}\n")
    result = subprocess.run(
        [str(SCRIPTS / "irq-affinity"), str(data)],
        capture_output=True,
        text=True,
        check=False,
        env={"PATH": str(make_bin(tmp_path, {})), "TEST_SYSROOT": str(tree)},
    )
    assert result.returncode == 2
    assert "line 2" in result.stdout
    assert (tree / "proc/irq/40/smp_affinity_list").read_text() == "0-127\n"


# --- pcie-acs, against a fake /sys and a fake setpci -------------------------------------------

# A fake setpci: each register of the one device in turn, as setpci does (pciutils setpci.c
# exec_op: a value read is printed on its own line; the first capability the device lacks ends
# the run with status 1, after the values printed before it).
FAKE_SETPCI = """[ "$1" = -s ] || exit 1
bdf=$2
shift 2
for register; do
    case $register in
        *=*)
            name=${register%%=*}
            [ -f "$FAKE_PCI/$bdf/$name" ] || exit 1
            printf '%s\\n' "${register#*=}" >"$FAKE_PCI/$bdf/$name"
            printf '%s\\n' "$bdf $register" >>"$FAKE_PCI/writes"
            continue
            ;;
    esac
    [ -f "$FAKE_PCI/$bdf/$register" ] || { echo "setpci: capability not found" >&2; exit 1; }
    cat "$FAKE_PCI/$bdf/$register"
done
"""
# root port -> switch upstream port -> two downstream ports -> a GPU and a NIC (ib0); a second
# GPU under a root port without ACS; a NIC that is not NVIDIA's display class stays unlisted.
ROOT_PORT, UPSTREAM, DOWN_GPU, DOWN_NIC, BARE_ROOT = (
    "0000:00:01.0",
    "0000:01:00.0",
    "0000:02:00.0",
    "0000:02:01.0",
    "0000:00:02.0",
)
GPU0, NIC0, GPU1 = "0000:03:00.0", "0000:04:00.0", "0000:05:00.0"
PORTS = {  # bridge -> (PCI Express capabilities register, ACS control or None: no capability)
    ROOT_PORT: ("0042", "001d"),
    UPSTREAM: ("0052", "001d"),  # type 5, an upstream port: never written
    DOWN_GPU: ("0062", "001d"),
    DOWN_NIC: ("0062", "0000"),  # already off
    BARE_ROOT: ("0042", None),
}
PATHS = {
    GPU0: [ROOT_PORT, UPSTREAM, DOWN_GPU],
    NIC0: [ROOT_PORT, UPSTREAM, DOWN_NIC],
    GPU1: [BARE_ROOT],
}


def pci_machine(
    root: Path, iommu_type: str | None = None, gpu_vendor: str = "0x10de"
) -> tuple[Path, Path]:
    """The fake tree and the fake config space (FAKE_PCI) of the machine above."""
    pci = root / "pci"
    devices = root / "sys/bus/pci/devices"
    devices.mkdir(parents=True)
    classes = {GPU0: "0x030200", GPU1: "0x030000", NIC0: "0x020700"}
    vendors = {GPU0: gpu_vendor, GPU1: gpu_vendor, NIC0: "0x15b3"}
    for device, bridges in PATHS.items():
        directory = root / "sys/devices/pci0000:00" / "/".join([*bridges, device])
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "class").write_text(classes[device] + "\n")
        (directory / "vendor").write_text(vendors[device] + "\n")
        if iommu_type is not None:
            (directory / "iommu_group").mkdir()
            (directory / "iommu_group/type").write_text(iommu_type + "\n")
        (devices / device).symlink_to(directory)
        for depth, bridge in enumerate(bridges):
            port = root / "sys/devices/pci0000:00" / "/".join(bridges[: depth + 1])
            (port / "class").write_text("0x060400\n")
            if not (devices / bridge).exists():
                (devices / bridge).symlink_to(port)
    (root / "sys/class/net/ib0").mkdir(parents=True)
    (root / "sys/class/net/ib0/device").symlink_to(devices / NIC0)
    for bridge, (flags, control) in PORTS.items():
        (pci / bridge).mkdir(parents=True)
        (pci / bridge / "CAP_EXP+0x2.w").write_text(flags + "\n")
        if control is not None:
            (pci / bridge / "ECAP_ACS+0x6.w").write_text(control + "\n")
    return root, pci


def run_acs(
    tmp_path: Path, tree: Path, pci: Path, stubs: dict[str, str], data: str
) -> subprocess.CompletedProcess[str]:
    conf = tmp_path / "pcie-acs.conf"
    conf.write_text(data)
    path = make_bin(tmp_path, stubs)
    for tool in ("readlink", "grep", "cat"):
        if not (path / tool).exists():
            (path / tool).symlink_to(shutil.which(tool) or f"/usr/bin/{tool}")
    return subprocess.run(
        [str(SCRIPTS / "pcie-acs"), str(conf)],
        capture_output=True,
        text=True,
        check=False,
        env={"PATH": str(path), "TEST_SYSROOT": str(tree), "FAKE_PCI": str(pci), "LC_ALL": "C"},
    )


BARE_METAL = {"systemd-detect-virt": "echo none\nexit 1\n", "setpci": FAKE_SETPCI}
ACS_DATA = (
    "# layout\nlog-as\tgt-acs\n# vendors\ngpu-vendor\t0x10de\n"
    "# boot.acs: r\nacs-off\tgpus\nacs-off\tnic\tib0\n"
)


def writes(pci: Path) -> list[str]:
    log = pci / "writes"
    return log.read_text().splitlines() if log.exists() else []


@pytest.mark.parametrize("iommu", [None, "identity"], ids=["iommu-off", "iommu-passthrough"])
def test_pcie_acs_clears_the_root_and_downstream_ports_above_gpus_and_nics(
    tmp_path: Path, iommu: str | None
) -> None:
    tree, pci = pci_machine(tmp_path / "tree", iommu)
    result = run_acs(tmp_path, tree, pci, BARE_METAL, ACS_DATA)
    assert result.returncode == 0, result.stdout
    # the root port once (two devices below it), the GPU's downstream port; never the upstream
    # port, the port already off, or the root port without an ACS capability
    assert sorted(writes(pci)) == [
        f"{ROOT_PORT} ECAP_ACS+0x6.w=0000",
        f"{DOWN_GPU} ECAP_ACS+0x6.w=0000",
    ]
    assert (pci / UPSTREAM / "ECAP_ACS+0x6.w").read_text() == "001d\n"
    assert f"gt-acs: {ROOT_PORT}: ACS control 001d -> 0000" in result.stdout
    assert f"gt-acs: {DOWN_NIC}: ACS already off" in result.stdout
    assert f"gt-acs: {BARE_ROOT}: no ACS capability" in result.stdout
    assert "gt-acs: 2 ports had ACS turned off" in result.stdout


@pytest.mark.parametrize(
    ("stubs", "iommu", "said"),
    [
        (
            {"systemd-detect-virt": "echo kvm\n", "setpci": FAKE_SETPCI},
            None,
            "virtual machine (kvm)",
        ),
        ({"systemd-detect-virt": "echo none\nexit 1\n"}, None, "setpci (pciutils) is not"),
        (BARE_METAL, "DMA-FQ", "the IOMMU translates its DMA (group type DMA-FQ)"),
    ],
    ids=["vm", "no-setpci", "iommu-translates"],
)
def test_pcie_acs_writes_nothing_where_acs_isolates_devices(
    tmp_path: Path, stubs: dict[str, str], iommu: str | None, said: str
) -> None:
    tree, pci = pci_machine(tmp_path / "tree", iommu)
    result = run_acs(tmp_path, tree, pci, stubs, ACS_DATA)
    assert result.returncode == 0, result.stdout
    assert said in result.stdout
    assert writes(pci) == []


@pytest.mark.parametrize(
    ("listed", "written"),
    [
        ("0x1234", [f"{ROOT_PORT} ECAP_ACS+0x6.w=0000", f"{DOWN_GPU} ECAP_ACS+0x6.w=0000"]),
        ("0x10de", []),
    ],
    ids=["vendor-listed", "vendor-not-listed"],
)
def test_pcie_acs_finds_gpus_by_the_vendor_ids_of_its_data(
    tmp_path: Path, listed: str, written: list[str]
) -> None:
    """GPUs of PCI vendor 0x1234: found only where the data lists 0x1234 (on main the script
    knew 0x10de alone, and found none)."""
    tree, pci = pci_machine(tmp_path / "tree", gpu_vendor="0x1234")
    data = f"gpu-vendor\t0x1d0f\ngpu-vendor\t{listed}\nacs-off\tgpus\n"
    result = run_acs(tmp_path, tree, pci, BARE_METAL, data)
    assert result.returncode == 0, result.stdout
    assert sorted(writes(pci)) == written
    if not written:
        assert "no GPU of vendor 0x1d0f 0x10de on the PCI bus" in result.stdout


@pytest.mark.parametrize(
    "line",
    [
        "acs-off\tgpus; reboot",
        "acs-off\tnic\t../../x",
        "acs-off\tnic",
        "acs-on\tgpus",
        "gpu-vendor\t10de",
        "gpu-vendor\t0x10DE",
        "gpu-vendor\t0x10de; reboot",
    ],
)
def test_pcie_acs_refuses_bad_data_and_writes_nothing(tmp_path: Path, line: str) -> None:
    tree, pci = pci_machine(tmp_path / "tree")
    data = f"gpu-vendor\t0x10de\nacs-off\tgpus\n{line}\n"
    result = run_acs(tmp_path, tree, pci, BARE_METAL, data)
    assert result.returncode == 2
    assert "line 3" in result.stdout
    assert writes(pci) == []


def test_pcie_acs_refuses_gpus_without_a_vendor_id(tmp_path: Path) -> None:
    tree, pci = pci_machine(tmp_path / "tree")
    result = run_acs(tmp_path, tree, pci, BARE_METAL, "acs-off\tnic\tib0\nacs-off\tgpus\n")
    assert result.returncode == 2
    assert "acs-off gpus without a gpu-vendor line" in result.stdout
    assert writes(pci) == []


# --- the units and the udev hook ------------------------------------------------------------------

WORKLOADS = ("kubelet.service", "containerd.service", "docker.service", "slurmd.service")


@pytest.mark.parametrize("unit", [layout.GPU_UNIT, layout.IRQ_UNIT, layout.ACS_UNIT])
def test_boot_units_run_before_the_workloads(unit: str) -> None:
    files = rendered("dgx-h100", "training")
    text = files[in_overlay(layout.unit_file(unit))][0].decode()
    (before,) = re.findall(r"^Before=(.*)$", text, re.MULTILINE)
    # the GPU unit also runs before the GPU's other clients (tests/test_render.py GPU_CLIENTS)
    assert set(before.split()) - set(layout.GPU_CLIENT_UNITS) == set()
    assert set(before.split()) >= set(WORKLOADS)
    assert unit == layout.GPU_UNIT or set(before.split()) == set(WORKLOADS)
    assert not re.search(r"^(Wants|Requires)=", text, re.MULTILINE), "orders, never pulls in"


def irq_hook(system: str, profile: str) -> str | None:
    found = rendered(system, profile).get(in_overlay(layout.IRQ_UDEV_FILE))
    return found[0].decode() if found else None


@pytest.mark.parametrize("system", SYSTEMS)
def test_the_udev_hook_re_pins_exactly_the_pinned_interfaces(system: str) -> None:
    plan = plan_for(system, "training")
    pinned = {s.key for s in plan.of_kind("irq")}
    hook = irq_hook(system, "training")
    assert (hook is not None) == bool(pinned)
    if hook is None:
        return
    rules = [line for line in hook.splitlines() if line and not line.startswith("#")]
    assert len(rules) == 2
    for rule in rules:
        assert rule.startswith('ACTION=="add", SUBSYSTEM=="net", ')
        (names,) = re.findall(r'(?:NAME|KERNEL)=="([^"]*)"', rule)
        assert set(names.split("|")) == pinned
        assert rule.endswith(f'RUN+="/usr/bin/systemctl --no-block try-restart {layout.IRQ_UNIT}"')


def test_udevadm_verify_accepts_the_hook_and_refuses_a_broken_one(tmp_path: Path) -> None:
    try:
        udevadm = find_udevadm()
    except MissingTool:
        pytest.skip("no udevadm with verify")
    hook = irq_hook("dgx-h100", "training")
    assert hook is not None
    good, broken = tmp_path / "99-good.rules", tmp_path / "99-broken.rules"
    good.write_text(hook)
    broken.write_text(hook.replace('NAME=="', 'NAME="', 1).replace("ACTION==", "ACTION=", 1))
    ok = subprocess.run([udevadm, "verify", "--no-summary", str(good)], capture_output=True)
    bad = subprocess.run([udevadm, "verify", "--no-summary", str(broken)], capture_output=True)
    assert ok.returncode == 0, ok.stderr
    assert bad.returncode != 0


# --- install.sh --root never reaches outside the image -------------------------------------------


def install(
    tmp_path: Path, root: Path, bundle: Path | None = None
) -> subprocess.CompletedProcess[str]:
    bundle = bundle or bundle_for(tmp_path, full_plan())
    return run(bundle / "install.sh", "--root", str(root), path=make_bin(tmp_path, {}))


def tree_of(directory: Path) -> list[str]:
    return sorted(str(p.relative_to(directory)) for p in directory.rglob("*"))


@pytest.mark.parametrize("link", ["etc/sysctl.d", "usr/lib/goldtune", "etc"])
def test_a_relative_link_that_climbs_out_of_the_image_is_refused(tmp_path: Path, link: str) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    root = tmp_path / "image"
    (root / link).parent.mkdir(parents=True)
    (root / link).symlink_to(os.path.relpath(outside, (root / link).parent))
    result = install(tmp_path, root)
    assert result.returncode == 1
    assert "symbolic link that leaves the image" in result.stderr
    assert tree_of(outside) == []


def test_a_relative_link_inside_the_image_is_followed_inside_it(tmp_path: Path) -> None:
    root = tmp_path / "image"
    (root / "usr/etc").mkdir(parents=True)
    (root / "etc").symlink_to("usr/etc")
    result = install(tmp_path, root)
    assert result.returncode == 0, result.stderr
    assert (root / "usr/etc/sysctl.d/90-goldtune.conf").is_file()


def test_a_planted_temporary_name_is_not_written_through(tmp_path: Path) -> None:
    victim = tmp_path / "host-file"
    victim.write_text("keep")
    root = tmp_path / "image"
    (root / "etc/sysctl.d").mkdir(parents=True)
    for name in ("90-goldtune.conf.goldtune-new", ".90-goldtune.conf.XXXXXX"):
        (root / "etc/sysctl.d" / name).symlink_to(victim)
    result = install(tmp_path, root)
    assert result.returncode == 0, result.stderr
    assert victim.read_text() == "keep"
    assert not (root / "etc/sysctl.d/90-goldtune.conf").is_symlink()


def test_a_forged_install_record_never_deletes_through_a_link(tmp_path: Path) -> None:
    host = tmp_path / "host/etc"
    host.mkdir(parents=True)
    (host / "goldtune-precious").write_text("keep")
    root = tmp_path / "image"
    (root / "var/lib/goldtune").mkdir(parents=True)
    (root / "etc").mkdir()
    (root / "etc/escape-goldtune").symlink_to(os.path.relpath(host, root / "etc"))
    (root / "var/lib/goldtune/installed-files").write_text(
        "/etc/escape-goldtune/goldtune-precious\n/etc/../../host/etc/goldtune-precious\n$(reboot)\n/bin/sh\n"
    )
    result = install(tmp_path, root)
    assert (host / "goldtune-precious").read_text() == "keep"
    assert result.returncode == 1
    # removal passes no link at all (issue 41), one that leaves the image or not
    assert (
        "/etc/escape-goldtune/goldtune-precious: a directory on its path is a symbolic link; "
        "not removed" in result.stdout
    )


def test_a_malformed_install_record_is_reported_and_fails_the_run(tmp_path: Path) -> None:
    root = tmp_path / "image"
    (root / "var/lib/goldtune").mkdir(parents=True)
    (root / "bin").mkdir()
    (root / "bin/sh").write_text("keep")
    (root / "var/lib/goldtune/installed-files").write_text("/bin/sh\n../x\n")
    result = install(tmp_path, root)
    assert result.returncode == 1
    assert (root / "bin/sh").read_text() == "keep"
    assert (
        "line 1 of the install record" in result.stdout
        and "line 2 of the install record" in result.stdout
    )
    assert "/bin/sh" not in result.stdout.replace("/var/lib", "")


def test_a_record_that_is_a_link_is_not_read(tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.write_text("/etc/sysctl.d/90-goldtune-secret.conf\n")
    root = tmp_path / "image"
    (root / "var/lib/goldtune").mkdir(parents=True)
    (root / "var/lib/goldtune/installed-files").symlink_to(secret)
    result = install(tmp_path, root)
    assert result.returncode == 1
    assert "is not a plain file" in result.stdout
    assert "secret" not in result.stdout


def test_a_directory_where_a_file_goes_fails_loudly(tmp_path: Path) -> None:
    root = tmp_path / "image"
    (root / "etc/sysctl.d/90-goldtune.conf").mkdir(parents=True)
    result = install(tmp_path, root)
    assert result.returncode == 1
    assert "is a directory where the file /etc/sysctl.d/90-goldtune.conf goes" in result.stderr
    assert tree_of(root / "etc/sysctl.d") == ["90-goldtune.conf"]


def test_die_does_not_print_its_exit_status(tmp_path: Path) -> None:
    result = install(tmp_path, tmp_path / "nonexistent")
    assert result.returncode == 2
    assert result.stderr.rstrip().endswith(f"no such directory: {tmp_path / 'nonexistent'}")


@pytest.mark.parametrize(
    "line",
    [
        "file\t0644\t/etc/../x",
        "file\t644\t/etc/x",
        "service\tstart\tx.service",
        "step\tsh -c reboot",
        "text\t/etc/x\t$(reboot)",
        'kernel-arg\ta"b',
    ],
)
def test_install_sh_refuses_a_bad_install_list_and_writes_nothing(
    tmp_path: Path, line: str
) -> None:
    bundle = bundle_for(tmp_path, full_plan())
    with (bundle / "install.list").open("a") as handle:
        handle.write(line + "\n")
    root = tmp_path / "image"
    root.mkdir()
    result = install(tmp_path, root, bundle)
    assert result.returncode == 2
    assert "install.list: line" in result.stderr
    assert tree_of(root) == []


def test_install_sh_may_remove_every_overlay_file_it_installed() -> None:
    """install.sh takes back a file from its record only where stale_candidate says the tool
    could have installed it: a file under /etc whose own name carries the tool's, a file of
    /etc/<tool>, of its libexec or of its tuned profile's directory, and layout.UNNAMED_TARGETS
    (the files whose fixed paths cannot carry the tool's name). Every overlay file of a plan with
    every kind (the tuned profile in either directory tuned reads) is one of those, or a bundle
    that drops it fails on its own record; the function itself is run on each."""
    overlay = [path for path in render_bundle(full_plan()) if path.startswith(layout.OVERLAY)]
    targets = {"/" + path.removeprefix(layout.OVERLAY) for path in overlay}
    unnamed = {target for target in targets if TOOL not in target}
    assert unnamed == layout.UNNAMED_TARGETS
    targets |= {layout.other_tuned_place(t) for t in targets if layout.is_tuned_file(t)}
    targets |= {layout.kubelet_file(directory) for directory in layout.KUBELET_DROPIN_DIRS}
    library = templates_dir() / layout.SCRIPTS_DIR / layout.INSTALL_LIB
    script = f"tool={TOOL}\n. {library}\n" + "".join(
        f"stale_candidate '{target}' || echo '{target}'\n" for target in sorted(targets)
    )
    result = subprocess.run(["sh", "-c", script], capture_output=True, text=True, check=True)
    assert result.stdout == ""
