"""Preflight (issue 28): the hardware file's claims judged at boot against the node.

The fixed script runs against fake sysfs trees (tests/detect_trees.py): the description `gen
detect` writes of a tree is the matching case; the same file with one NIC renamed, twice the NUMA
nodes and one GPU fewer is the case that must report exactly those three claims. The IRQ and GPU
units then skip what those claims carry. verify reads the result back (parse_preflight)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from test_install import make_bin
from validators.checks_system import check_units

from generator.cli import main
from generator.inputs.load import load_inputs
from generator.model import layout
from generator.model.layout import in_overlay
from generator.paths import templates_dir
from generator.plan.build import build_plan
from generator.verify.preflight import (
    Mismatch,
    PreflightError,
    PreflightResult,
    check_preflight,
    parse_preflight,
)
from generator.verify.snapshot import Snapshot
from generator.verify.verdicts import Verdict
from tests import detect_trees as trees

SCRIPTS = templates_dir() / layout.SCRIPTS_DIR
PREFLIGHT_DATA = in_overlay(layout.PREFLIGHT_DATA)
RESULT = layout.PREFLIGHT_RESULT.removeprefix("/")
DRIVERS = {"ib": "mlx5_core", "ens3f0np0": "ice", "eno1": "igb"}
RENAMED = ("ibp24s0", "ibp99s0")


def bind_driver(device: Path, driver: str) -> None:
    """The device's driver link, and the driver's directory it names, as sysfs has both (the
    script resolves the link with cd -P, which a dangling link fails)."""
    link = device / "driver"
    link.symlink_to(f"../../../bus/pci/drivers/{driver}")
    link.resolve().mkdir(parents=True, exist_ok=True)


def dgx_tree(root: Path) -> Path:
    """The DGX H100 tree with what the detector does not need: each NIC's bound driver (a link,
    as sysfs has it) and one link up, so that driver and speed claims are judged too."""
    tree = trees.dgx_h100().build(root)
    for net in sorted((tree / "sys/class/net").iterdir()):
        device = net / "device"
        if not device.exists():
            continue
        driver = next(d for prefix, d in DRIVERS.items() if net.name.startswith(prefix))
        bind_driver(device.resolve(), driver)
    (tree / "sys/class/net/ibp64s0").resolve().joinpath("operstate").write_text("up\n")
    return tree


def detected(tree: Path) -> dict:
    result = CliRunner().invoke(main, ["detect", "--root", str(tree)])
    assert result.exit_code == 0, result.output
    return yaml.safe_load(result.stdout)


def bundle(hardware: dict, tmp_path: Path, name: str) -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(hardware))
    out = tmp_path / name
    result = CliRunner().invoke(main, ["--hw", str(path), "--profile", "training", "-o", str(out)])
    assert result.exit_code == 0, result.output
    return out


def three_differences(hardware: dict) -> dict:
    """One NIC renamed, the NUMA nodes with CPUs doubled, one GPU fewer (the issue's case)."""
    changed = yaml.safe_load(yaml.safe_dump(hardware))
    nic = next(n for n in changed["nics"] if n["name"] == RENAMED[0])
    nic["name"] = RENAMED[1]
    changed["numa_nodes"] *= 2
    gpus = changed["gpus"][0]
    gpus["count"] -= 1
    gpus["numa_nodes"] = gpus["numa_nodes"][:-1]
    return changed


def run_script(name: str, data: Path, tree: Path, path: str | None = None) -> tuple[int, str]:
    env = {"PATH": path or os.environ["PATH"], "TEST_SYSROOT": str(tree), "LC_ALL": "C"}
    result = subprocess.run(
        [str(SCRIPTS / name), str(data)],
        capture_output=True,
        text=True,
        check=False,
        env=env,
        timeout=60,
    )
    return result.returncode, result.stdout + result.stderr


@pytest.fixture(scope="module")
def machine(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    tree = dgx_tree(tmp_path_factory.mktemp("dgx") / "tree")
    return tree, detected(tree)


def test_a_matching_node_has_no_mismatch(machine: tuple[Path, dict], tmp_path: Path) -> None:
    tree, hardware = machine
    made = bundle(hardware, tmp_path, "same")
    status, output = run_script("preflight", made / PREFLIGHT_DATA, tree)
    assert status == 0, output
    assert (tree / RESULT).read_text() == "state\tok\n"
    assert "this node matches the hardware file" in output
    # driver and speed were judged where the node shows them; a link not up has no speed
    assert "nic/ibp64s0/speed_mbps: not judged" not in output
    assert "nic/ibp24s0/speed_mbps: not judged (link state unknown" in output


def test_three_differences_are_three_mismatches_and_nothing_else(
    machine: tuple[Path, dict], tmp_path: Path
) -> None:
    tree, hardware = machine
    made = bundle(three_differences(hardware), tmp_path, "differs")
    status, output = run_script("preflight", made / PREFLIGHT_DATA, tree)
    assert status == 1, output
    result = parse_preflight((tree / RESULT).read_text())
    assert result.state == "mismatch"
    found = {(m.claim, m.expected, m.actual) for m in result.mismatches}
    assert found == {
        ("numa.nodes_with_cpus", "4", "2"),
        ("gpu.count", "7", "8"),
        ("nic/ibp99s0/present", "yes", "no such interface"),
    }
    by_claim = {m.claim: m for m in result.mismatches}
    assert "irq:ibp99s0" in by_claim["nic/ibp99s0/present"].depends
    assert "gpu:persistence" in by_claim["gpu.count"].depends
    assert "gpu.numa_nodes: not judged (the GPU count differs)" in output
    assert (
        "goldtune-preflight: gpu.count: the hardware file says 7, this node has 8; made from it: "
        in output
    )

    # the IRQ unit pins nothing by a wrong claim: the renamed NIC is skipped; the others' lists
    # are read from their devices, which no NUMA node count of the file changes
    status, output = run_script("irq-affinity", made / in_overlay(layout.IRQ_DATA), tree)
    assert status == 0, output
    (skipped,) = [
        line for line in output.splitlines() if line.startswith("goldtune-irq-affinity: ibp99s0")
    ]
    assert skipped == (
        "goldtune-irq-affinity: ibp99s0: skipped: preflight: nic/ibp99s0/present differs"
    )
    assert "ibp64s0: skipped" not in output
    assert "ibp99s0: no such interface" not in output

    # the GPU unit changes no GPU: these are not the GPUs the plan was made for (no nvidia-smi
    # on PATH: what it would have done is not reached either way)
    bin_dir = make_bin(tmp_path, {})
    status, output = run_script(
        "gpu-setup", made / in_overlay(layout.GPU_DATA), tree, path=str(bin_dir)
    )
    assert status == 0, output  # every GPU action skipped: no driver is then no failure
    assert "every GPU action skipped: preflight: gpu.count differs" in output


def test_only_the_renamed_nic_is_skipped(machine: tuple[Path, dict], tmp_path: Path) -> None:
    tree, hardware = machine
    changed = yaml.safe_load(yaml.safe_dump(hardware))
    next(n for n in changed["nics"] if n["name"] == RENAMED[0])["name"] = RENAMED[1]
    made = bundle(changed, tmp_path, "renamed")
    status, output = run_script("preflight", made / PREFLIGHT_DATA, tree)
    assert status == 1
    assert [m.claim for m in parse_preflight((tree / RESULT).read_text()).mismatches] == [
        "nic/ibp99s0/present"
    ]
    status, output = run_script("irq-affinity", made / in_overlay(layout.IRQ_DATA), tree)
    assert "ibp99s0: skipped: preflight: nic/ibp99s0/present differs" in output
    assert "ibp64s0: skipped" not in output
    # the GPU actions do not depend on a NIC's name
    status, output = run_script("gpu-setup", made / in_overlay(layout.GPU_DATA), tree)
    assert "skipped: preflight" not in output


# Every tool the preflight script ever started (on the script as first merged: head and tr per
# NUMA node, readlink per NIC, tr and wc per GPU claim), each wrapped to log that it ran.
COUNTED = ("awk", "head", "tr", "readlink", "wc", "cut", "cat", "mkdir", "mv", "udevadm")


def counting_bin(tmp_path: Path, log: Path, extra: dict[str, str] | None = None) -> Path:
    """A PATH of wrappers that log each tool started, then run the real one; ``extra``: stubs
    (name: body) that log too."""
    directory = tmp_path / "counting-bin"
    directory.mkdir()
    for tool in COUNTED:
        real = shutil.which(tool)
        body = (extra or {}).get(tool) or (f'exec {real} "$@"\n' if real else "exit 127\n")
        path = directory / tool
        path.write_text(f"#!/bin/sh\necho {tool} >>{log}\n{body}")
        path.chmod(0o755)
    return directory


def test_a_matching_node_starts_three_processes(machine: tuple[Path, dict], tmp_path: Path) -> None:
    """The unit runs at every boot of every node, where under emulation each process costs tens
    of milliseconds: one awk for the CPU and NUMA topology, mkdir and mv for the result, however
    many NUMA nodes, NICs and GPUs (as first merged: head and tr per node, readlink per NIC…)."""
    tree, hardware = machine
    made = bundle(hardware, tmp_path, "same")
    (tree / "run/udev").mkdir(parents=True, exist_ok=True)
    (tree / "run/udev/queue").write_text("")  # udev busy: a matching node still does not wait
    shutil.rmtree(tree / RESULT.rsplit("/", 1)[0], ignore_errors=True)  # as at boot: no /run dir
    log = tmp_path / "started.log"
    try:
        status, output = run_script(
            "preflight", made / PREFLIGHT_DATA, tree, str(counting_bin(tmp_path, log))
        )
    finally:
        (tree / "run/udev/queue").unlink()
    assert status == 0, output
    assert sorted(log.read_text().split()) == ["awk", "mkdir", "mv"]


def test_a_claim_that_differs_while_udev_is_busy_is_judged_again_after_udev(
    tmp_path: Path,
) -> None:
    """An interface udev has not named yet is not a mismatch: with events queued, the preflight
    waits for udev's queue (udevadm settle, bounded) and judges again (as first merged, it never
    waited in a test tree and reported nic/ibp99s0/present)."""
    tree = dgx_tree(tmp_path / "tree")
    hardware = detected(tree)
    changed = yaml.safe_load(yaml.safe_dump(hardware))
    next(n for n in changed["nics"] if n["name"] == RENAMED[0])["name"] = RENAMED[1]
    made = bundle(changed, tmp_path, "renamed")
    (tree / "run/udev").mkdir(parents=True)
    (tree / "run/udev/queue").write_text("")
    net = tree / "sys/class/net"
    # udev, once it gets to the event, names the interface as the file does
    mv, rm = shutil.which("mv"), shutil.which("rm")
    settle = f"{mv} {net / RENAMED[0]} {net / RENAMED[1]}; {rm} {tree / 'run/udev/queue'}\n"
    log = tmp_path / "started.log"
    path = counting_bin(tmp_path, log, {"udevadm": settle})
    status, output = run_script("preflight", made / PREFLIGHT_DATA, tree, str(path))
    assert status == 0, output
    assert "judging again once its queue is empty" in output
    assert "the hardware file says" not in output
    assert log.read_text().split().count("udevadm") == 1
    # udev idle: a claim that differs is a mismatch at once, with no wait
    log.unlink()
    (net / RENAMED[1]).rename(net / RENAMED[0])
    status, output = run_script("preflight", made / PREFLIGHT_DATA, tree, str(path))
    assert status == 1, output
    assert "udevadm" not in log.read_text().split()
    said = "nic/ibp99s0/present: the hardware file says yes, this node has no such interface"
    assert said in output


def test_without_a_result_everything_is_applied(machine: tuple[Path, dict], tmp_path: Path) -> None:
    """The unit did not run (a cloud-init delivery has none): nothing is skipped."""
    hardware = machine[1]
    changed = yaml.safe_load(yaml.safe_dump(hardware))
    next(n for n in changed["nics"] if n["name"] == RENAMED[0])["name"] = RENAMED[1]
    made = bundle(changed, tmp_path, "renamed")
    empty = tmp_path / "empty-root"
    empty.mkdir()
    (empty / "sys/class/net").mkdir(parents=True)
    status, output = run_script("irq-affinity", made / in_overlay(layout.IRQ_DATA), empty)
    assert status == 0
    assert "skipped: preflight" not in output
    assert "ibp99s0: no such interface; skipped" in output


@pytest.mark.parametrize(
    "line",
    [
        "claim\tcpu.sockets\t2",  # no depends field
        "claim\tcpu.bogus\t2\t-",  # a claim the script does not know
        "claim\tnic/../x/present\tyes\t-",  # not an interface name
        "claim\tcpu.sockets\t2\t-\textra",
        "claim\tnuma.nodes_at_most\teight\t-",  # not a count
        "result\t/etc/passwd",  # results live under /run
        "result\t/run/../etc/x",
        "nvswitch-ids\t0x22a3;rm",
        "unknown\tx",
    ],
)
def test_bad_data_is_refused_and_nothing_checked(tmp_path: Path, line: str) -> None:
    data = tmp_path / "preflight.conf"
    data.write_text(f"log-as\tgt\nresult\t/run/gt/preflight\n{line}\n")
    result = subprocess.run(
        [str(SCRIPTS / "preflight"), "--check", str(data)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 2, result.stdout
    assert "nothing checked" in result.stdout


def shipped(system: str, tmp_path: Path) -> Path:
    out = tmp_path / system
    result = CliRunner().invoke(main, ["--hw", system, "--profile", "training", "-o", str(out)])
    assert result.exit_code == 0, result.output
    return out


def test_every_shipped_data_file_passes_the_scripts_check(tmp_path: Path) -> None:
    made = shipped("dgx-h100", tmp_path)
    for script, data in (
        ("preflight", PREFLIGHT_DATA),
        ("irq-affinity", in_overlay(layout.IRQ_DATA)),
        ("gpu-setup", in_overlay(layout.GPU_DATA)),
    ):
        result = subprocess.run(
            [str(SCRIPTS / script), "--check", str(made / data)],
            capture_output=True,
            text=True,
            check=False,
        )
        assert result.returncode == 0, (script, result.stdout)


def test_the_preflight_unit_passes_systemd_analyze_verify(tmp_path: Path) -> None:
    made = shipped("dgx-h100", tmp_path)
    unit = made / in_overlay(layout.unit_file(layout.PREFLIGHT_UNIT))
    text = unit.read_text()
    assert "Type=oneshot" in text
    before = next(line for line in text.splitlines() if line.startswith("Before="))
    before = before.removeprefix("Before=")
    for runs_later in (layout.GPU_UNIT, layout.IRQ_UNIT, layout.ACS_UNIT, "containerd.service"):
        assert runs_later in before.split()
    # a mismatch fails the unit, never the boot: nothing requires it
    assert not re.search(r"^(Requires|RequiredBy|Wants|BindsTo)=", text, re.MULTILINE)
    assert "\nWantedBy=multi-user.target\n" in text
    assert check_units(made) == []


# --- the claims the plan carries ------------------------------------------------------------------


def test_unknown_claims_are_not_made() -> None:
    """dgx-a100 leaves GPU NUMA placement and most NICs' NUMA nodes out: no claim for them."""
    inputs = load_inputs("dgx-a100", "training")
    names = {claim.name for claim in build_plan(inputs.facts, inputs.profile).claims}
    assert "gpu.numa_nodes" not in names
    assert "nic/ib0/numa_node" not in names and "nic/ib8/numa_node" in names
    assert "os.kernel" not in names and "os.distro" not in names
    assert {"cpu.sockets", "gpu.count", "nvswitch", "nic/ib0/present"} <= names


def test_a_cpu_list_resolved_on_the_node_depends_on_no_numa_claim() -> None:
    """Every NIC's list is read from its device at boot ("local"): a wrong NUMA count or node
    in the file makes no pin wrong, so none is skipped for it; only the interface's name is
    claimed for it. On main ib8's list was made from its node and depended on both."""
    inputs = load_inputs("dgx-a100", "training")
    claims = {c.name: c for c in build_plan(inputs.facts, inputs.profile).claims}
    for nic in ("ib0", "ib8"):
        assert f"irq:{nic}" not in claims["numa.nodes_with_cpus"].depends
        assert f"irq:{nic}" in claims[f"nic/{nic}/present"].depends
    assert claims["nic/ib8/numa_node"].depends == ()


# --- verify: the result read back -----------------------------------------------------------------


def test_parse_preflight_reads_both_states() -> None:
    assert parse_preflight("state\tok\n") == PreflightResult("ok", ())
    text = "state\tmismatch\nmismatch\tgpu.count\t8\t7\tgpu:ecc,nccl:NCCL_IB_HCA\n"
    assert parse_preflight(text) == PreflightResult(
        "mismatch", (Mismatch("gpu.count", "8", "7", ("gpu:ecc", "nccl:NCCL_IB_HCA")),)
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "no state line"),
        ("state\tfine\n", "line 1: not state"),
        ("state\tok\nmismatch\tgpu.count\t8\t7\t-\n", "state ok with 1 mismatch line"),
        ("state\tmismatch\n", "state mismatch with 0 mismatch lines"),
        ("state\tmismatch\nmismatch\tgpu.count\t8\n", "line 2: not mismatch"),
        ("state\tmismatch\nmismatch\t\t8\t7\t-\n", "line 2: no claim"),
        ("state\tmismatch\n" + "mismatch\tx\t1\t2\t-\n" * 5000, "lines; a result has at most"),
    ],
)
def test_parse_preflight_refuses_malformed_results(text: str, message: str) -> None:
    with pytest.raises(PreflightError, match=message):
        parse_preflight(text)


def snapshot(records: dict[str, list[tuple[str, str]]]) -> Snapshot:
    found = Snapshot()
    for section, pairs in records.items():
        found.records[section].extend(pairs)
    return found


def test_verify_shows_each_mismatch_as_a_failing_check() -> None:
    lines = ["state\tmismatch", "mismatch\tnic/ib0/present\tyes\tno such interface\tirq:ib0"]
    checks = check_preflight(snapshot({"preflight": [("line", line) for line in lines]}), True)
    (check,) = checks
    assert (check.kind, check.key, check.expected, check.actual) == (
        "preflight",
        "nic/ib0/present",
        "yes",
        "no such interface",
    )
    assert check.verdict == Verdict.DIFFERS and check.verdict.fails()
    assert "irq:ib0" in check.reason


def test_verify_without_a_result_is_not_judged_and_without_the_unit_not_applicable() -> None:
    absent = snapshot({"preflight": [("-", "!absent")]})
    (check,) = check_preflight(absent, True)
    assert check.verdict == Verdict.NOT_JUDGED
    no_unit = snapshot({"unit-enabled": [(layout.PREFLIGHT_UNIT, "!absent")]})
    (check,) = check_preflight(no_unit, True)
    assert check.verdict == Verdict.NOT_APPLICABLE
    assert check_preflight(absent, False) == []
    ok = snapshot({"preflight": [("line", "state\tok")]})
    assert [c.verdict for c in check_preflight(ok, True)] == [Verdict.OK]


def test_gen_verify_shows_the_mismatches_of_a_snapshot(tmp_path: Path) -> None:
    """Through `gen verify --snapshot` (table and JSON): each mismatch one failing row."""
    from test_verify import make_bundle, write_snapshot

    bundle = make_bundle(
        tmp_path, [("sysctl", "vm.swappiness", "1"), ("service", layout.PREFLIGHT_UNIT, "enable")]
    )
    lines = ["state\tmismatch", "mismatch\tgpu.count\t8\t7\tgpu:ecc,gpu:persistence"]
    snap = write_snapshot(
        tmp_path,
        ("sysctl", "vm.swappiness", "1"),
        ("unit-enabled", layout.PREFLIGHT_UNIT, "enabled"),
        *(("preflight", "line", line) for line in lines),
    )
    table = CliRunner().invoke(main, ["verify", str(bundle), "--snapshot", str(snap)])
    assert table.exit_code == 1, table.output
    (row,) = [line for line in table.output.splitlines() if line.startswith("differs  preflight")]
    assert "gpu.count" in row and "8" in row and "7" in row
    report = CliRunner().invoke(main, ["verify", str(bundle), "--snapshot", str(snap), "--json"])
    checks = [c for c in json.loads(report.output)["checks"] if c["kind"] == "preflight"]
    assert [(c["key"], c["expected"], c["actual"], c["verdict"]) for c in checks] == [
        ("gpu.count", "8", "7", "differs")
    ]
    assert "gpu:ecc, gpu:persistence" in checks[0]["reason"]


def test_gen_verify_prometheus_carries_the_snapshots_preflight(tmp_path: Path) -> None:
    """`gen verify --format prometheus` reads the preflight result from the checks: the state
    gauge and one series per mismatch, as node_exporter's textfile would show them."""
    from test_verify import make_bundle, write_snapshot

    bundle = make_bundle(
        tmp_path, [("sysctl", "vm.swappiness", "1"), ("service", layout.PREFLIGHT_UNIT, "enable")]
    )
    lines = ["state\tmismatch", "mismatch\tgpu.count\t8\t7\tgpu:ecc"]
    snap = write_snapshot(
        tmp_path,
        ("sysctl", "vm.swappiness", "1"),
        ("unit-enabled", layout.PREFLIGHT_UNIT, "enabled"),
        *(("preflight", "line", line) for line in lines),
    )
    args = ["verify", str(bundle), "--snapshot", str(snap), "--format", "prometheus"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 1, result.output
    assert 'goldtune_preflight_mismatch{claim="gpu.count",expected="8",actual="7"} 1' in (
        result.output
    )
    assert 'goldtune_preflight_state{state="mismatch"} 1' in result.output


def test_an_amd_instinct_node_matches_its_own_description(tmp_path: Path) -> None:
    """MI300X functions are processing accelerators (class 0x1200), not display controllers:
    the preflight counts them as GPUs, so an 8x MI300X node made from its own `gen detect`
    description has no mismatch (on the preflight as first merged, gpu.count 8 -> 0)."""
    tree = trees.mi300x_epyc().build(tmp_path / "tree")
    for net in sorted((tree / "sys/class/net").iterdir()):
        if (net / "device").exists():  # each NIC's bound driver, as dgx_tree links them
            device = (net / "device").resolve()
            vendor = (device / "vendor").read_text().strip()
            driver = {"0x15b3": "mlx5_core", "0x14e4": "bnxt_en"}[vendor]
            bind_driver(device, driver)
    hardware = detected(tree)
    assert hardware["gpus"][0]["count"] == 8
    made = bundle(hardware, tmp_path, "mi300x")
    status, output = run_script("preflight", made / PREFLIGHT_DATA, tree)
    assert "gpu.count" not in output or "mismatch" not in output, output
    assert status == 0, output


def test_a_nic_is_judged_by_its_pci_address_whatever_its_name(
    machine: tuple[Path, dict], tmp_path: Path
) -> None:
    """pci_address (issue 38): the renamed NIC's PCI function is still where the file says, of
    the model's id; an address with no function, or another vendor's, is a mismatch."""
    tree, hardware = machine
    changed = yaml.safe_load(yaml.safe_dump(hardware))
    renamed = next(n for n in changed["nics"] if n["name"] == RENAMED[0])
    renamed["name"] = RENAMED[1]
    moved = next(n for n in changed["nics"] if n["name"] == "ibp64s0")
    moved["pci_address"] = "0000:63:00.0"
    frontend = next(n for n in changed["nics"] if n["name"] == "ens3f0np0")
    frontend["model"] = "ConnectX-7"  # the tree's is an E810 (8086:1593)
    made = bundle(changed, tmp_path, "by-address")
    data = (made / PREFLIGHT_DATA).read_text()
    assert f"claim\tnic/{RENAMED[1]}/pci_address\t{renamed['pci_address']}\t" in data
    assert "claim\tnic/ibp64s0/pci_id\t15b3:1021\t" in data
    status, output = run_script("preflight", made / PREFLIGHT_DATA, tree)
    assert status == 1, output
    found = {m.claim: m.actual for m in parse_preflight((tree / RESULT).read_text()).mismatches}
    assert found == {
        f"nic/{RENAMED[1]}/present": "no such interface",
        "nic/ibp64s0/pci_address": "no PCI function there",
        "nic/ens3f0np0/pci_id": f"8086:1593 at {frontend['pci_address']}",
        "nic/ens3f0np0/driver": "ice",
    }


@pytest.mark.parametrize(
    "line",
    [
        "claim\tnic/ib0/pci_address\t../../x\t-",
        "claim\tnic/ib0/pci_address\t0000:3b:00.0;x\t-",
        "claim\tnic/ib0/pci_id\t15b3:1021 x\t-",
    ],
)
def test_a_pci_claim_that_is_no_address_is_refused(tmp_path: Path, line: str) -> None:
    data = tmp_path / "preflight.conf"
    data.write_text(f"result\t/run/goldtune/preflight\n{line}\n")
    status, output = run_script("preflight", data, tmp_path)
    assert status == 2 and "nothing checked" in output, output
