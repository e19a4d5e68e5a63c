"""Absurd numbers and names are bad input in one line, never a traceback (issue 41, family 7).

Python's int() refuses more than 4,300 digits with ValueError; a snapshot, a CPU list or any
other foreign text carrying such a number (or a range of billions of CPUs) is refused where it
is read. A bundle whose plan names a 300-character hardware, or an output DIR whose name is
over NAME_MAX, is exit 2 with one line, not exit 1 "File name too long". On main the snapshot
raised a traceback from verify --strict and the package exited 1."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from generator.foreign import MAX_NUMBER_DIGITS, overlong_number
from generator.model.cpulist import expand_cpus
from tests.test_verify import snapshot_text

HUGE = "9" * 5000


def gen(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "generator", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        check=False,
    )


def one_line_exit_2(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    return lines[0]


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("made")
    done = gen("--hw", "dgx-h100", "--profile", "inference", "-o", "bundle", cwd=root)
    assert done.returncode == 0, done.stderr
    return root / "bundle"


@pytest.mark.parametrize(
    "record",
    [
        ("gpu-pci", "count", HUGE),
        ("gpu", "tool", "ok"),  # with the huge number in a GPU row below
        ("sysctl", "vm.swappiness", HUGE),
        ("irq", "ib0", f"local-cpus 0-{HUGE}"),
    ],
)
@pytest.mark.parametrize("strict", [["--strict"], []])
def test_a_5000_digit_number_in_a_snapshot_is_one_line(
    made: Path, tmp_path: Path, record: tuple[str, str, str], strict: list[str]
) -> None:
    records = [record]
    if record[1] == "tool":
        records.append(("gpu", "0", f"0, 00000000:18:00.0, H100, Enabled, {HUGE}"))
    snapshot = tmp_path / "snap.txt"
    snapshot.write_text(snapshot_text(*records, noise=True))
    done = gen("verify", str(made), "--snapshot", str(snapshot), *strict, cwd=tmp_path)
    line = one_line_exit_2(done)
    assert "5000 digits" in line and "snap.txt" in line


def test_a_long_run_of_digits_is_found_and_a_short_one_is_not() -> None:
    assert overlong_number("x" + "1" * (MAX_NUMBER_DIGITS + 1)) == MAX_NUMBER_DIGITS + 1
    assert overlong_number("sha 0123456789" * 20) == 0


@pytest.mark.parametrize("text", [HUGE, f"0-{HUGE}", "0-99999999999", "70000"])
def test_a_cpu_list_past_any_cpu_is_a_value_error(text: str) -> None:
    with pytest.raises(ValueError, match="CPU number past"):
        expand_cpus(text)


def renamed_plan(bundle: Path, hardware: str) -> None:
    """The bundle's plan names ``hardware``, its manifest updated to match (intact)."""
    plan = json.loads((bundle / "plan.json").read_text())
    plan["hardware"] = hardware
    raw = (json.dumps(plan, indent=2, sort_keys=True) + "\n").encode()
    (bundle / "plan.json").write_bytes(raw)
    manifest = json.loads((bundle / "manifest.json").read_text())
    for entry in manifest["files"]:
        if entry["path"] == "plan.json":
            entry["sha256"] = hashlib.sha256(raw).hexdigest()
    (bundle / "manifest.json").write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")


@pytest.mark.parametrize("hardware", ["a" * 300, "../up", ""])
def test_a_bundle_naming_an_absurd_hardware_is_not_packaged(tmp_path: Path, hardware: str) -> None:
    done = gen("--hw", "l4-inference", "--profile", "inference", "-o", "b", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    renamed_plan(tmp_path / "b", hardware)
    line = one_line_exit_2(gen("package", "b", "--deb", "-o", "dist", cwd=tmp_path))
    assert "plan.json: hardware" in line
    assert not (tmp_path / "dist").exists()


def test_an_output_dir_name_over_name_max_is_bad_input(made: Path, tmp_path: Path) -> None:
    long_dir = tmp_path / ("d" * 300)
    line = one_line_exit_2(gen("package", str(made), "--deb", "-o", str(long_dir), cwd=tmp_path))
    assert "NAME_MAX" in line
    assert list(tmp_path.iterdir()) == []


def test_a_bundle_whose_plan_holds_a_5000_digit_value_is_one_line(
    made: Path, tmp_path: Path
) -> None:
    """verify's limit and manager checks read numbers from the plan's values: a plan.json with
    a 5,000-digit limit (its manifest updated) raised ValueError in verify; diff showed it."""
    bundle = tmp_path / "bundle"
    shutil.copytree(made, bundle)
    plan = json.loads((bundle / "plan.json").read_text())
    limit = next(s for s in plan["settings"] if s["kind"] == "limit")
    limit["value"] = HUGE
    raw = (json.dumps(plan, indent=2, sort_keys=True) + "\n").encode()
    (bundle / "plan.json").write_bytes(raw)
    manifest = json.loads((bundle / "manifest.json").read_text())
    for entry in manifest["files"]:
        if entry["path"] == "plan.json":
            entry["sha256"] = hashlib.sha256(raw).hexdigest()
    (bundle / "manifest.json").write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    snapshot = tmp_path / "snap.txt"
    snapshot.write_text(snapshot_text(("meta", "uid", "0")))
    for args in (["verify", "bundle", "--snapshot", "snap.txt"], ["diff", str(made), "bundle"]):
        line = one_line_exit_2(gen(*args, cwd=tmp_path))
        assert "plan.json" in line and "5000 digits" in line


@pytest.mark.parametrize(
    "args",
    [
        ["matrix", "--hw", "l4-inference", "--profile", "inference", "-o", "x/" + "d" * 300],
        ["--hw", "l4-inference", "--profile", "inference", "-o", "x/" + "d" * 300 + "/b"],
        ["detect", "--capture", "-o", "d" * 300],
    ],
)
def test_an_output_path_with_a_name_over_name_max_is_bad_input(
    tmp_path: Path, args: list[str]
) -> None:
    """On main `gen matrix` wrote nothing and exited 1 per combination ("File name too long"),
    and `gen -o` checked the last name only."""
    line = one_line_exit_2(gen(*args, cwd=tmp_path))
    assert "NAME_MAX" in line
    assert list(tmp_path.iterdir()) == []
