"""A captured tree may be foreign: links out, FIFOs, endless or huge files, names made to inject."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from generator.cli import main
from generator.detect.tree import MAX_FILE_BYTES, Tree
from generator.errors import InputError
from tests import detect_trees as trees
from tests.detect_trees import Link


def detect(root: Path) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, ["detect", "--root", str(root)])
    return result.exit_code, result.stdout, result.stderr


def one_error(root: Path) -> str:
    status, text, errors = detect(root)
    assert status == 2 and text == "", (status, text, errors)
    lines = errors.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in errors, errors
    return lines[0]


def test_a_link_out_of_the_tree_is_refused(tmp_path: Path):
    machine = trees.vm_without_gpus()
    outside = tmp_path / "secret"
    outside.mkdir()
    (outside / "type").write_text("1\n")
    machine.entries["sys/class/net/eth1"] = Link("../../../../secret")
    error = one_error(machine.build(tmp_path / "tree"))
    assert error.endswith("sys/class/net/eth1: a link leads out of the tree; refused"), error


def test_an_absolute_link_is_resolved_inside_the_tree(tmp_path: Path):
    machine = trees.vm_without_gpus()
    machine.entries["etc/os-release"] = Link("/usr/lib/os-release")
    (tmp_path / "usr" / "lib").mkdir(parents=True)
    (tmp_path / "usr" / "lib" / "os-release").write_text('PRETTY_NAME="Host OS"\n')
    status, text, _ = detect(machine.build(tmp_path / "tree"))
    assert status == 0 and "Debian GNU/Linux 12" in text and "Host OS" not in text


def test_a_link_loop_is_refused(tmp_path: Path):
    machine = trees.vm_without_gpus()
    machine.entries["sys/block/vdb"] = Link("vdb")
    error = one_error(machine.build(tmp_path / "tree"))
    assert "sys/block/vdb: too many levels of links; refused" in error


def test_a_fifo_is_refused_without_hanging(tmp_path: Path):
    root = trees.vm_without_gpus().build(tmp_path / "tree")
    (root / "proc" / "cpuinfo").unlink()
    os.mkfifo(root / "proc" / "cpuinfo")
    outcome: list[str] = []
    worker = threading.Thread(target=lambda: outcome.append(one_error(root)), daemon=True)
    worker.start()
    worker.join(timeout=20)
    assert not worker.is_alive(), "gen detect hung on a FIFO"
    assert outcome and outcome[0].endswith("proc/cpuinfo: not a regular file; refused")


def test_an_endless_device_is_refused():
    # /dev/zero never ends: only regular files are read, so it is refused before any read
    with pytest.raises(InputError, match="/dev/zero: not a regular file; refused"):
        Tree(Path("/")).read("/dev/zero")


def test_a_huge_file_is_refused(tmp_path: Path):
    root = trees.vm_without_gpus().build(tmp_path / "tree")
    (root / "proc" / "cpuinfo").write_text("vendor_id : GenuineIntel\n" * (MAX_FILE_BYTES // 10))
    assert one_error(root).endswith("proc/cpuinfo: larger than 256 KiB; refused")


def test_a_hostile_cpu_list_is_bounded(tmp_path: Path):
    machine = trees.vm_without_gpus()
    root = machine.build(tmp_path / "tree")
    (root / "sys/devices/system/cpu/online").write_text("0-4000000000\n")
    assert "CPU number above 16383" in one_error(root)


def test_foreign_strings_never_become_yaml(tmp_path: Path):
    machine = trees.vm_without_gpus()
    machine.cpuinfo = trees.x86_cpuinfo("GenuineIntel", "Evil\nmemory_gib: 1 # \x1b[31m")
    machine.kernel = "6.1.0\ninjected: true"
    machine.os_release = 'PRETTY_NAME="x\\ny"\nID="a\nnics: []"\n'
    machine.nic("bad$(reboot)", "0000:00:03.0")
    status, text, errors = detect(machine.build(tmp_path / "tree"))
    assert status == 0, errors
    data = yaml.safe_load(text)
    assert set(data) == {
        "cpu",
        "memory_gib",
        "numa_nodes",
        "memory_only_numa_nodes",
        "gpus",
        "nics",
        "disks",
        "os",
    }
    assert data["memory_gib"] == 16 and "kernel" not in data["os"]
    assert [nic["name"] for nic in data["nics"]] == ["eth0"]
    assert "\x1b" not in text and "interface bad$(reboot): not a name the format accepts" in text


def test_an_unreadable_sysfs_value_is_unknown_not_an_error(tmp_path: Path):
    machine = trees.dgx_h100()
    root = machine.build(tmp_path / "tree")
    speed = root / "sys/devices/pci0000:a0/0000:a0:00.0/net/ens3f0np0/speed"
    speed.write_text("banana\n")
    status, text, _ = detect(root)
    assert status == 0
    nic = next(n for n in yaml.safe_load(text)["nics"] if n["name"] == "ens3f0np0")
    assert "speed_gbps" not in nic and "sysfs speed unknown" in text


def test_a_fifo_is_never_opened(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Failed on main: the FIFO (or a watchdog node, which opening arms) was opened first and
    refused after fstat; the kind is now decided from lstat and only regular files are opened."""
    root = trees.vm_without_gpus().build(tmp_path / "tree")
    (root / "proc" / "cpuinfo").unlink()
    os.mkfifo(root / "proc" / "cpuinfo")
    opened: list[str] = []
    real_open = os.open

    def recording_open(path: object, *args: object, **kwargs: object) -> int:
        opened.append(str(path))
        return real_open(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "open", recording_open)
    with pytest.raises(InputError, match="not a regular file; refused"):
        Tree(root).read("/proc/cpuinfo")
    assert not any(path.endswith("proc/cpuinfo") for path in opened), opened


def _special_outputs(tmp_path: Path) -> list[tuple[str, Path]]:
    fifo = tmp_path / "fifo.yaml"
    os.mkfifo(fifo)
    target = tmp_path / "target.yaml"
    target.write_text("kept\n")
    link = tmp_path / "link.yaml"
    link.symlink_to(target)
    return [("fifo", fifo), ("link", link)]


def test_detect_o_never_renames_over_a_fifo_or_a_link(tmp_path: Path):
    """Failed on main: -o renamed its output over whatever was there (a FIFO, a link, a device
    node such as /dev/null when run as root)."""
    root = trees.vm_without_gpus().build(tmp_path / "tree")
    for kind, output in _special_outputs(tmp_path):
        result = CliRunner().invoke(main, ["detect", "--root", str(root), "-o", str(output)])
        assert result.exit_code == 2, (kind, result.output)
        assert "replaces only a regular file" in result.stderr and "Traceback" not in result.output
        assert output.is_symlink() if kind == "link" else output.is_fifo()
    assert (tmp_path / "target.yaml").read_text() == "kept\n"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")], "temporary file left"
