"""Tracebacks instead of one line (issue 29, family 7): the shared readers of foreign text bound.

Each case failed on the integration base of issue 29 with a traceback (ValueError of Python's
4,300-digit int limit, OverflowError, RecursionError), a raw newline written into the YAML, a
made-up value, or "a bug" (exit 1). Now: exit 2 with one line naming the file, the field and
what is wrong, or the value left out with a comment saying why.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from generator.cli import main
from tests import detect_trees as trees
from tests.test_detect_driver import SMI_XML
from tests.test_hostile import gen

DIGITS = "9" * 5000
CAPTURED_SMI = "goldtune-capture/nvidia-smi-q-x.xml"


def detect(root: Path) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, ["detect", "--root", str(root)])
    crashed = result.exception is not None and not isinstance(result.exception, SystemExit)
    assert not crashed, repr(result.exception)
    return result.exit_code, result.stdout, result.stderr


def one_line(status: int, text: str, errors: str) -> str:
    assert status == 2 and text == "", (status, text, errors)
    lines = errors.strip().splitlines()
    assert len(lines) == 1 and len(lines[0]) < 400, errors
    return lines[0]


@pytest.mark.parametrize(
    ("path", "text", "needle"),
    [
        ("proc/meminfo", f"MemTotal: {DIGITS} kB\n", "proc/meminfo: memory_gib: a number of 5000"),
        ("proc/meminfo", "MemTotal: 5 kB\n", "memory_gib: MemTotal 5 kB is not 1-65536 GiB"),
        ("proc/meminfo", f"MemTotal: {10**17} kB\n", "is not 1-65536 GiB"),
        ("proc/self/smaps", f"KernelPageSize: {DIGITS} kB\n", "os.page_size_kib: a number of"),
    ],
    ids=["huge-memtotal", "tiny-memtotal", "absurd-memtotal", "page-size"],
)
def test_absurd_numbers_in_a_capture_are_one_line(
    tmp_path: Path, path: str, text: str, needle: str
) -> None:
    root = trees.dgx_h100().build(tmp_path / "tree")
    (root / path).write_text(text)
    line = one_line(*detect(root))
    assert needle in line and str(root / path) in line, line


def test_an_absurd_number_on_a_cpu_less_node_is_one_line(tmp_path: Path) -> None:
    root = trees.gh200().build(tmp_path / "tree")
    meminfo = next(p for p in (root / "sys/devices/system/node").glob("node*/meminfo"))
    meminfo.write_text(f"Node 1 MemTotal: {DIGITS} kB\n")
    for node in (root / "sys/devices/system/node").glob("node*"):
        (node / "meminfo").write_text(f"Node {node.name[4:]} MemTotal: {DIGITS} kB\n")
    assert "a number of 5000 digits" in one_line(*detect(root))


@pytest.mark.parametrize("number", [DIGITS, "1e999", "nan"])
def test_absurd_numbers_in_the_captured_nvidia_smi_xml_ignore_it_with_why(
    tmp_path: Path, number: str
) -> None:
    machine = trees.dgx_h100()
    machine.entries[CAPTURED_SMI] = SMI_XML.decode().replace("81559", number)
    status, text, _ = detect(machine.build(tmp_path / "tree"))
    assert status == 0
    assert "fb_memory_usage/total is" in text and "no GPU reports that; ignored" in text
    assert DIGITS not in text


@pytest.mark.parametrize("kind", ["disk", "interface"])
def test_a_name_ending_in_a_newline_never_reaches_the_yaml_raw(tmp_path: Path, kind: str) -> None:
    """Python's $ matches before a final newline: 'nvme0n1\\n' passed the name check and was
    written raw into the YAML (a disk), the interface name through the same check."""
    machine = trees.dgx_h100()
    root = machine.build(tmp_path / "tree")
    folder = root / ("sys/block" if kind == "disk" else "sys/class/net")
    original = sorted(p for p in folder.iterdir() if not p.name.startswith(("loop", "lo")))[0]
    original.rename(folder / f"{original.name}\n")
    status, text, errors = detect(root)
    assert status == 0, errors
    data = yaml.safe_load(text)
    names = [item["name"] for item in data["disks" if kind == "disk" else "nics"]]
    assert all("\n" not in name for name in names), names
    assert f"{kind} {original.name}\\n: not a name the format accepts; left out" in text


# --- bundles and cloud-init parts --------------------------------------------------------------


def nest(directory: Path, depth: int) -> None:
    """``depth`` directories, one in the other, below ``directory`` (no path is longer than
    PATH_MAX: each is made relative to the one before)."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(depth):
            os.mkdir("d", dir_fd=fd)
            inner = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = inner
    finally:
        os.close(fd)


def unnest(directory: Path) -> None:
    """Remove what ``nest`` made, one level a step (rmtree, pytest's too, recurses)."""
    while (directory / "d").is_dir():
        inner = directory / "d" / "d"
        if inner.is_dir():
            inner.rename(directory / "up")
        (directory / "d").rmdir()
        if (directory / "up").is_dir():
            (directory / "up").rename(directory / "d")


@pytest.fixture
def nested(tmp_path: Path) -> Iterator[list[Path]]:
    """Where a test nested directories; removed level by level after it."""
    made: list[Path] = []
    yield made
    for directory in made:
        unnest(directory)


def test_a_bundle_of_1100_nested_directories_is_one_line(
    tmp_path: Path, nested: list[Path]
) -> None:
    """diff, package and matrix --check read bundles with read_bundle, which walked them with
    os.walk: RecursionError. The walk is a loop now, bounded in depth and entries."""
    clean, deep = tmp_path / "clean", tmp_path / "deep"
    for bundle in (clean, deep):
        made = gen("--hw", "l4-inference", "--profile", "inference", "-o", str(bundle))
        assert made.returncode == 0, made.stderr
    (deep / "rootfs/x").mkdir()
    nested.append(deep / "rootfs/x")
    nest(deep / "rootfs/x", 1100)
    for args in (
        ("diff", str(clean), str(deep)),
        ("package", str(deep), "--deb", "-o", str(tmp_path / "dist")),
    ):
        done = gen(*args)
        assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-500:]
        assert "directories nested more than 32 deep; not a goldtune bundle" in done.stderr
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    fleet = tmp_path / "fleet"
    made = gen("matrix", "--hw", "l4-inference", "--profile", "inference", "-o", str(fleet))
    assert made.returncode == 0, made.stderr
    nested.append(next(fleet.iterdir()))
    nest(nested[-1], 1100)
    check = gen("matrix", "--hw", "l4-inference", "--profile", "inference", "--check", str(fleet))
    assert check.returncode in (1, 2) and "Traceback" not in check.stderr, check.stderr[-500:]
    assert "nested more than 32 deep" in check.stdout + check.stderr


@pytest.mark.parametrize(
    "body",
    ["a: " + "[" * 3000 + "]" * 3000 + "\n", f"a: {DIGITS}\n"],
    ids=["nested", "digits"],
)
def test_a_hostile_cloud_init_part_is_one_line(tmp_path: Path, body: str) -> None:
    part = tmp_path / "part.yaml"
    part.write_text("#cloud-config\n" + body)
    args = ("--hw", "l4-inference", "--profile", "inference", "-o", str(tmp_path / "b"))
    done = gen(*args, "--cloud-init-part", str(part))
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-500:]
    assert done.stderr.strip() == (
        f"goldtune: error: {part}: not valid YAML: nested too deeply, or a value its type "
        "cannot hold"
    )
    assert not (tmp_path / "b").exists()
