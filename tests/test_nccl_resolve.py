"""NCCL_IB_HCA and NCCL_SOCKET_IFNAME resolved at boot (issue 38): the fixed script nccl-resolve
run against fake sysfs trees (tests/detect_trees.py) with the data file and nccl.conf a bundle
renders for a hardware file whose names are not stated as real.

The node's interfaces are named otherwise than the file (ibp24s0 where the file says ib0), a
storage BlueField-3 sits beside the compute ConnectX-7 ports: NCCL_IB_HCA names exactly the
compute HCAs, never the BlueField's; a node where they cannot be told apart gets no list and a
line that says why; an interface that is down is never in NCCL_SOCKET_IFNAME."""

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
from test_install import run as run_install

from generator.bundle.read import read_bundle
from generator.cli import main
from generator.model import layout
from generator.model.layout import in_overlay
from generator.paths import templates_dir
from generator.verify.consumers import nccl_assignments
from generator.verify.run import verify_checks
from generator.verify.verdicts import Verdict
from tests import detect_trees as trees

SCRIPT = templates_dir() / layout.SCRIPTS_DIR / "nccl-resolve"
COMPUTE = ("0000:18:00.0", "0000:40:00.0", "0000:9a:00.0", "0000:c0:00.0")
BLUEFIELD = "0000:c1:00.0"
FRONTEND = "0000:a0:00.0"
NDR = "400 Gb/sec (4X NDR)"


def hardware(**nic_fields: dict[str, object]) -> dict[str, object]:
    """Four ConnectX-7 compute ports and a BlueField-3 storage port, named as placeholders
    (ib0...); ``nic_fields``: more fields by NIC name."""
    nics: list[dict[str, object]] = [
        {
            "name": f"ib{i}",
            "model": "ConnectX-7",
            "speed_gbps": 400,
            "role": "compute",
            "rdma": True,
        }
        for i in range(4)
    ]
    nics += [
        {"name": "ib8", "model": "BlueField-3", "speed_gbps": 400, "role": "storage", "rdma": True},
        {"name": "ens3f0np0", "speed_gbps": 100, "role": "frontend"},
    ]
    for entry in nics:
        entry.update(nic_fields.get(str(entry["name"]), {}))
    return {
        "cpu": {"model": "Xeon-8480C", "vendor": "intel", "sockets": 2},
        "memory_gib": 2048,
        "gpus": [{"model": "H100-SXM5-80GB", "count": 8}],
        "nics": nics,
    }


def node(
    *,
    extra_compute_card: bool = False,
    frontend_state: str = "up",
    training_port: bool = False,
    bonded_frontend: bool = False,
) -> trees.FakeMachine:
    """The booted node: the compute ports named by udev's PCI path (ibp24s0...), not ib0...; their
    RDMA devices mlx5_0-3, the BlueField's mlx5_4; ``extra_compute_card``: a storage card of
    the compute model too (mlx5_5), which role facts cannot tell from a compute one;
    ``training_port``: mlx5_3's link still training at boot (Polling, 10 Gb/s shown);
    ``bonded_frontend``: the front-end port enslaved to bond0."""
    box = trees.FakeMachine(
        trees.x86_cpuinfo("GenuineIntel", "Intel(R) Xeon(R) Platinum 8480C"),
        2,
        56,
        2,
        trees.split_nodes(224, 2),
        2063 * trees.GIB,
    )
    for index, address in enumerate(COMPUTE):
        box.pci(address, "15b3", "1021", "0x020700", node=index // 2)
        box.nic(f"ibp{int(address[5:7], 16)}s0", address, speed=400000, link_type=32)
        if training_port and index == 3:
            box.rdma(f"mlx5_{index}", address, rate="10 Gb/sec (4X SDR)", phys_state="2: Polling")
        else:
            box.rdma(f"mlx5_{index}", address, rate=NDR)
    box.pci(BLUEFIELD, "15b3", "a2dc", "0x020700", node=1)
    box.nic("ibp193s0", BLUEFIELD, speed=400000, link_type=32)
    box.rdma("mlx5_4", BLUEFIELD, rate=NDR)
    if extra_compute_card:
        box.pci("0000:c2:00.0", "15b3", "1021", "0x020700", node=1)
        box.rdma("mlx5_5", "0000:c2:00.0", rate=NDR)
    box.pci(FRONTEND, "8086", "1593", "0x020000", node=1)
    box.nic("ens3f0np0", FRONTEND, speed=100000, operstate=frontend_state)
    if bonded_frontend:
        box.entries["sys/devices/virtual/net/bond0/operstate"] = "up\n"
        box.entries[f"{trees.pci_dir(FRONTEND)}/net/ens3f0np0/master"] = trees.Link(
            "../../../../virtual/net/bond0"
        )
    return box


def bundle(spec: dict[str, object], tmp_path: Path) -> Path:
    source = tmp_path / "hw.yaml"
    source.write_text(yaml.safe_dump(spec))
    out = tmp_path / "bundle"
    result = CliRunner().invoke(
        main, ["--hw", str(source), "--profile", "training", "-o", str(out)]
    )
    assert result.exit_code == 0, result.output
    return out


def boot(
    made: Path, box: trees.FakeMachine, root: Path, path: str | None = None
) -> tuple[str, str]:
    """The node booted with the bundle's nccl.conf in place: the script's output and the file."""
    tree = box.build(root)
    conf = tree / layout.NCCL_CONF.lstrip("/")
    conf.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(made / in_overlay(layout.NCCL_CONF), conf)
    return run(made / in_overlay(layout.NCCL_DATA), tree, path), conf.read_text()


def run(data: Path, tree: Path, path: str | None = None) -> str:
    env = {"PATH": path or os.environ["PATH"], "TEST_SYSROOT": str(tree), "LC_ALL": "C"}
    result = subprocess.run(
        [str(SCRIPT), str(data)], capture_output=True, text=True, env=env, timeout=60
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout + result.stderr


def test_renamed_ports_beside_a_bluefield_give_exactly_the_compute_hcas(tmp_path: Path) -> None:
    made = bundle(hardware(), tmp_path)
    data = (made / in_overlay(layout.NCCL_DATA)).read_text()
    assert "resolve\t/etc/nccl.conf\tNCCL_IB_HCA\tid=15b3:1021/gbps=400/count=4\n" in data
    output, conf = boot(made, node(), tmp_path / "node")
    assert nccl_assignments(conf)["NCCL_IB_HCA"] == "=mlx5_0,mlx5_1,mlx5_2,mlx5_3", output
    assert "mlx5_4" not in conf  # the storage BlueField-3, never
    # the lines sit between the marks, the bundle's own lines untouched around them
    bundled = (made / in_overlay(layout.NCCL_CONF)).read_text()
    assert conf == bundled.replace(
        layout.NCCL_BOOT_BEGIN + "\n",
        f"{layout.NCCL_BOOT_BEGIN}\nNCCL_IB_HCA==mlx5_0,mlx5_1,mlx5_2,mlx5_3\n",
    )


def test_by_pci_address_exactly_the_devices_there(tmp_path: Path) -> None:
    """Two of the four compute ports by address: their devices only, whatever the names."""
    spec = hardware(ib0={"pci_address": COMPUTE[0]}, ib1={"pci_address": COMPUTE[3]})
    spec["nics"] = [nic for nic in spec["nics"] if nic["name"] not in ("ib2", "ib3")]  # type: ignore[union-attr,index]
    made = bundle(spec, tmp_path)
    output, conf = boot(made, node(), tmp_path / "node")
    assert nccl_assignments(conf)["NCCL_IB_HCA"] == "=mlx5_0,mlx5_3", output


def test_ports_the_facts_cannot_tell_apart_get_no_list_and_a_reason(tmp_path: Path) -> None:
    """A storage card of the compute model: five ports match four compute NICs. No list (one
    naming the storage card would put collectives on it), and the journal says why."""
    made = bundle(hardware(), tmp_path)
    output, conf = boot(made, node(extra_compute_card=True), tmp_path / "node")
    assert "NCCL_IB_HCA" not in nccl_assignments(conf)
    assert "NCCL_IB_HCA not written: 5 RDMA devices of PCI id 15b3:1021 at 400 Gb/s" in output
    assert "the hardware file has 4 compute NICs" in output


def test_no_compute_hca_at_all_gets_no_list(tmp_path: Path) -> None:
    made = bundle(
        hardware(
            ib0={"pci_address": "0000:77:00.0"},
            ib1={"pci_address": COMPUTE[1]},
            ib2={"pci_address": COMPUTE[2]},
            ib3={"pci_address": COMPUTE[3]},
        ),
        tmp_path,
    )
    box = node()
    box.entries = {k: v for k, v in box.entries.items() if "/infiniband" not in k}
    output, conf = boot(made, box, tmp_path / "node")
    assert "NCCL_IB_HCA" not in nccl_assignments(conf)
    assert "NCCL_IB_HCA not written: no RDMA device at 0000:77:00.0" in output


@pytest.mark.parametrize("state", ["down", "lowerlayerdown", "dormant"])
def test_an_interface_that_is_not_up_is_never_a_socket_interface(
    tmp_path: Path, state: str
) -> None:
    made = bundle(hardware(ens3f0np0={"pci_address": FRONTEND}), tmp_path)
    data = (made / in_overlay(layout.NCCL_DATA)).read_text()
    assert f"resolve\t/etc/nccl.conf\tNCCL_SOCKET_IFNAME\tpci={FRONTEND}\n" in data
    output, conf = boot(made, node(frontend_state=state), tmp_path / "node")
    assert "NCCL_SOCKET_IFNAME" not in nccl_assignments(conf)
    assert f"NCCL_SOCKET_IFNAME not written: ens3f0np0 is {state}" in output
    # up: written, as a whole name
    output, conf = boot(made, node(), tmp_path / "up")
    assert nccl_assignments(conf)["NCCL_SOCKET_IFNAME"] == "=ens3f0np0", output


def test_each_boot_replaces_its_lines_and_a_file_without_marks_is_left(tmp_path: Path) -> None:
    made = bundle(hardware(), tmp_path)
    data = made / in_overlay(layout.NCCL_DATA)
    _, first = boot(made, node(), tmp_path / "node")
    tree = tmp_path / "node"
    conf = tree / "etc/nccl.conf"
    assert "unchanged" in run(data, tree) and conf.read_text() == first
    # the next boot finds a port gone: its list replaces the old one, nothing else moves
    shutil.rmtree(tree / trees.pci_dir(COMPUTE[3]) / "infiniband")
    (tree / "sys/class/infiniband/mlx5_3").unlink()
    output = run(data, tree)
    assert "NCCL_IB_HCA" not in nccl_assignments(conf.read_text()), output
    assert conf.read_text().count(layout.NCCL_BOOT_BEGIN) == 1
    # an image's own nccl.conf (no marks) is never touched
    conf.write_text("NCCL_TOPO_FILE=/etc/topo.xml\n")
    assert "without the marks" in run(data, tree)
    assert conf.read_text() == "NCCL_TOPO_FILE=/etc/topo.xml\n"


def test_a_matching_node_starts_no_process_once_written(tmp_path: Path) -> None:
    """The unit runs at every boot: every sysfs read is the shell's read, so a node whose lists
    did not change starts no process at all, and one that changed only mv (counted by wrappers
    for every tool it could start, and by strace where it is installed: forks too)."""
    made = bundle(hardware(ens3f0np0={"pci_address": FRONTEND}), tmp_path)
    log = tmp_path / "started.log"
    wrappers = tmp_path / "bin"
    wrappers.mkdir()
    for tool in ("mv", "cat", "head", "tr", "awk", "readlink", "sed", "grep", "cut", "ls"):
        real = shutil.which(tool)
        (wrappers / tool).write_text(f'#!/bin/sh\necho {tool} >>{log}\nexec {real} "$@"\n')
        (wrappers / tool).chmod(0o755)
    output, conf = boot(made, node(), tmp_path / "node", str(wrappers))
    assert "NCCL_IB_HCA==" in conf and "NCCL_SOCKET_IFNAME==ens3f0np0" in conf, output
    assert log.read_text().split() == ["mv"], output
    log.unlink()
    output = run(made / in_overlay(layout.NCCL_DATA), tmp_path / "node", str(wrappers))
    assert not log.exists(), (log.read_text(), output)
    strace = shutil.which("strace")
    if strace is None:
        return
    trace = tmp_path / "trace"
    subprocess.run(
        [
            strace,
            "-f",
            "-qq",
            "-e",
            "trace=fork,vfork,clone,clone3,execve",
            "-o",
            str(trace),
            "sh",
            str(SCRIPT),
            str(made / in_overlay(layout.NCCL_DATA)),
        ],
        env={"PATH": os.environ["PATH"], "TEST_SYSROOT": str(tmp_path / "node"), "LC_ALL": "C"},
        check=True,
        capture_output=True,
    )
    calls = re.findall(r"^\d+\s+(v?fork|clone3?|execve)\(", trace.read_text(), re.MULTILINE)
    assert calls == ["execve"], trace.read_text()  # sh itself: no fork, no other program


@pytest.mark.parametrize(
    "line",
    [
        "resolve\t/etc/passwd\tNCCL_IB_HCA\tpci=0000:18:00.0",
        "resolve\t/etc/nccl.conf\tNCCL_DEBUG\tpci=0000:18:00.0",
        "resolve\t/etc/nccl.conf\tNCCL_IB_HCA\tpci=../../x",
        "resolve\t/etc/nccl.conf\tNCCL_IB_HCA\tid=15b3:1021",  # no count
        "resolve\t/etc/nccl.conf\tNCCL_SOCKET_IFNAME\tid=15b3:1021/count=2",  # by id: HCAs only
        "resolve\t/etc/nccl.conf\tNCCL_IB_HCA\tpci=0000:18:00.0/count=1",
        "resolve\t/etc/nccl.conf\tNCCL_IB_HCA\tcmd=reboot",
        "resolve\t/etc/nccl.conf\tNCCL_IB_HCA",
        "resolve\t/etc/nccl.conf\tNCCL_SOCKET_IFNAME\tpci=,",  # an empty address
        "resolve\t/etc/nccl.conf\tNCCL_SOCKET_IFNAME\tpci=.",
        "resolve\t/etc/nccl.conf\tNCCL_IB_HCA\tid=15b3:1021/not=0000:18:00.0,/count=1",
    ],
)
def test_bad_data_is_refused_and_nothing_written(tmp_path: Path, line: str) -> None:
    data = tmp_path / "nccl-resolve.conf"
    data.write_text(f"log-as\tx\n{line}\n")
    result = subprocess.run(
        ["sh", str(SCRIPT), "--check", str(data)], capture_output=True, text=True, check=False
    )
    assert result.returncode == 2 and "nothing written" in result.stdout, result.stdout


def test_the_marks_are_the_ones_the_script_derives_from_its_tag() -> None:
    text = SCRIPT.read_text()
    assert 'begin="# $tag: the lines below, up to its end mark, are written at boot"' in text
    assert 'end="# $tag: end of the lines written at boot"' in text
    tag = layout.NCCL_LOG_TAG
    assert (
        f"# {tag}: the lines below, up to its end mark, are written at boot"
        == layout.NCCL_BOOT_BEGIN
    )
    assert f"# {tag}: end of the lines written at boot" == layout.NCCL_BOOT_END


def test_with_install_sh_the_boot_lines_win_over_the_images_and_verify_accepts_them(
    tmp_path: Path,
) -> None:
    """The image's own nccl.conf pins NCCL_IB_HCA to every mlx5 device and sets a topology file:
    install.sh keeps its lines after the bundle's, the boot step writes between the marks above
    them, so NCCL reads the compute HCAs first and still the image's NCCL_TOPO_FILE; gen verify
    --root judges the file and the setting OK."""
    made = bundle(hardware(), tmp_path)
    root = tmp_path / "root"
    (root / "etc").mkdir(parents=True)
    (root / "etc/nccl.conf").write_bytes(b"NCCL_IB_HCA=mlx5\nNCCL_TOPO_FILE=/opt/topo.xml\n")
    installed = run_install(made / "install.sh", "--root", str(root), path=make_bin(tmp_path, {}))
    assert installed.returncode == 0, installed.stdout + installed.stderr
    node().build(root)
    output = run(root / layout.NCCL_DATA.lstrip("/"), root)
    read = nccl_assignments((root / "etc/nccl.conf").read_text())
    assert read["NCCL_IB_HCA"] == "=mlx5_0,mlx5_1,mlx5_2,mlx5_3", output
    assert read["NCCL_TOPO_FILE"] == "/opt/topo.xml"
    checks, _ = verify_checks(read_bundle(made), root, None)
    nccl = [c for c in checks if c.kind == "nccl" or c.key == layout.NCCL_CONF]
    assert len(nccl) == 2 and all(c.verdict == Verdict.OK for c in nccl), nccl


def test_the_unit_runs_before_the_job_starters_waits_for_nothing_and_runs_again_live(
    tmp_path: Path,
) -> None:
    """Ordered before what starts NCCL jobs, after udev's trigger only (no settle: a matching
    node waits for nothing), never pulling a unit in; no RemainAfterExit, so a live install.sh
    that writes nccl.conf again starts it again (enable --now)."""
    made = bundle(hardware(), tmp_path)
    text = (made / in_overlay(layout.unit_file(layout.NCCL_UNIT))).read_text()
    after = re.search(r"^After=(.*)$", text, re.MULTILINE)
    before = re.search(r"^Before=(.*)$", text, re.MULTILINE)
    assert after is not None and "settle" not in after.group(1)
    assert before is not None and set(before.group(1).split()) >= {
        "containerd.service",
        "docker.service",
        "kubelet.service",
        "slurmd.service",
    }
    assert "Type=oneshot\n" in text and not re.search(r"^RemainAfterExit", text, re.MULTILINE)
    assert not re.search(r"^(Wants|Requires|BindsTo)=", text, re.MULTILINE)
    assert f"ExecStart={layout.NCCL_SCRIPT} {layout.NCCL_DATA}\n" in text


def test_a_name_nccl_would_misread_is_never_written(tmp_path: Path) -> None:
    """The kernel lets a renamed interface hold ',' or '=' (dev_valid_name forbids only '/',
    ':' and blanks): NCCL would read it as two names, so it is left out, and said."""
    made = bundle(hardware(ens3f0np0={"pci_address": FRONTEND}), tmp_path)
    box = node()
    box.entries = {k: v for k, v in box.entries.items() if "ens3f0np0" not in k}
    box.nic("ens3,x", FRONTEND, speed=100000, operstate="up")
    output, conf = boot(made, box, tmp_path / "node")
    assert "NCCL_SOCKET_IFNAME" not in nccl_assignments(conf)
    assert "NCCL_SOCKET_IFNAME not written: a name that is not one word" in output


def test_a_port_still_training_at_boot_is_counted_by_its_model(tmp_path: Path) -> None:
    """A compute port whose link is not up yet shows a rate it has not negotiated: it is not
    left out by speed (which would leave the whole list unwritten), NCCL skips it while down."""
    made = bundle(hardware(), tmp_path)
    output, conf = boot(made, node(training_port=True), tmp_path / "node")
    assert nccl_assignments(conf)["NCCL_IB_HCA"] == "=mlx5_0,mlx5_1,mlx5_2,mlx5_3", output


def test_a_bonded_port_is_never_a_socket_interface(tmp_path: Path) -> None:
    made = bundle(hardware(ens3f0np0={"pci_address": FRONTEND}), tmp_path)
    output, conf = boot(made, node(bonded_frontend=True), tmp_path / "node")
    assert "NCCL_SOCKET_IFNAME" not in nccl_assignments(conf)
    assert "NCCL_SOCKET_IFNAME not written: ens3f0np0 is a port of bond0" in output


def test_a_compute_hca_whose_name_is_refused_leaves_no_short_list(tmp_path: Path) -> None:
    """A port add refuses (not one word) is not counted: three of four compute HCAs written as
    the whole list would keep NCCL off the fourth without a word, so none is written."""
    made = bundle(hardware(), tmp_path)
    box = node()
    box.entries = {k: v for k, v in box.entries.items() if "mlx5_3" not in k}
    box.rdma("mlx5,3", COMPUTE[3], rate=NDR)
    output, conf = boot(made, box, tmp_path / "node")
    assert "NCCL_IB_HCA" not in nccl_assignments(conf), output
