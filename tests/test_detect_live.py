"""`gen detect` on the machine the tests run on, and the capture script on it: real sysfs."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from generator.cli import main
from generator.commands.detect import CAPTURE_SCRIPT
from tests.conftest import missing_tool


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.stdout, result.stderr


@pytest.mark.skipif(not Path("/sys/devices/system/cpu").is_dir(), reason="needs a Linux /sys")
def test_this_machine_is_described_and_passes_gen_check(tmp_path: Path):
    out = tmp_path / "this-machine.yaml"
    status, _, errors = run("detect", "-o", str(out))
    assert status == 0, errors
    assert out.read_text().startswith("# Hardware description written by `gen detect` (goldtune")
    status, output, errors = run("check", "--hw", str(out), "--profile", "inference")
    assert status == 0, errors + "\n" + out.read_text()
    assert output.startswith(f"ok: {out} (this-machine: ")


def test_capture_script_is_printed_and_shipped_in_the_package():
    status, text, _ = run("detect", "--capture")
    assert status == 0 and text == CAPTURE_SCRIPT.read_text()
    assert text.startswith("#!/bin/sh\n") and "set -eu" in text
    assert (
        CAPTURE_SCRIPT.parent.name == "detect" and CAPTURE_SCRIPT.parent.parent.name == "generator"
    )


def test_capture_script_passes_shellcheck():
    if shutil.which("shellcheck") is None:
        missing_tool(FileNotFoundError("shellcheck"))
    result = subprocess.run(
        ["shellcheck", "-s", "sh", str(CAPTURE_SCRIPT)], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout


def test_capture_writes_the_script_with_o_and_refuses_root(tmp_path: Path):
    out = tmp_path / "capture-hw"
    assert run("detect", "--capture", "-o", str(out))[0] == 0
    assert os.access(out, os.X_OK) and out.read_text() == CAPTURE_SCRIPT.read_text()
    status, _, errors = run("detect", "--capture", "--root", str(tmp_path))
    assert status == 2 and "--capture writes the capture script" in errors


@pytest.mark.skipif(not Path("/sys/class/net").is_dir(), reason="needs a Linux /sys")
@pytest.mark.parametrize("shell", ["dash", "sh"])
def test_a_capture_of_this_machine_describes_it_as_detect_does(shell: str, tmp_path: Path):
    if shutil.which(shell) is None:
        pytest.skip(f"{shell} not installed")
    tarball = tmp_path / "capture.tar.gz"
    result = subprocess.run(
        [shell, str(CAPTURE_SCRIPT), str(tarball)],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    unpacked = tmp_path / "tree"
    unpacked.mkdir()
    with tarfile.open(tarball) as archive:
        members = archive.getmembers()
        assert all(not m.name.startswith("/") and ".." not in m.name.split("/") for m in members)
        archive.extractall(unpacked, filter="tar")
    assert (unpacked / "sys/class/net").is_dir()
    assert all(
        (unpacked / "sys/class/net" / name).is_symlink()
        for name in os.listdir(unpacked / "sys/class/net")
    ), "links must stay links"
    _, live, _ = run("detect")
    status, captured, errors = run("detect", "--root", str(unpacked))
    assert status == 0, errors
    assert _values(captured) == _values(live)


def _values(text: str) -> list[str]:
    """The description without the header line and the page size's source comment."""
    lines = [line for line in text.splitlines() if not line.startswith("# Hardware description")]
    return [re.sub(r"(page_size_kib: \d+)\s+#.*", r"\1", line) for line in lines]
