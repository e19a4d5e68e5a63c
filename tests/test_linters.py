"""Linters as tests, as mkosi does: ruff (the rule set in pyproject.toml), ruff's formatter and
mypy --strict run by the README's test command, so CI fails on a finding. The fixed shell scripts
are shellchecked once in the repository by tests/test_scripts.py."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PYTHON_TREES = ("generator", "tests", "bench")


def tool(name: str) -> str:
    """The linter installed beside this Python (the test extra), else one on PATH."""
    beside = Path(sys.executable).parent / name
    found = str(beside) if beside.is_file() else shutil.which(name)
    if found is None:
        pytest.fail(f"{name} is not installed: pip install -e '.[test]'")
    return found


def run(*command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        command, cwd=REPO, capture_output=True, text=True, timeout=600, check=False
    )


def test_ruff_check_is_clean() -> None:
    done = run(tool("ruff"), "check", "--no-cache", *PYTHON_TREES)
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]


def test_ruff_format_is_clean() -> None:
    done = run(tool("ruff"), "format", "--check", "--no-cache", *PYTHON_TREES)
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]


def test_mypy_strict_is_clean() -> None:
    """mypy --strict over the package (its settings live in pyproject.toml's [tool.mypy])."""
    done = run(tool("mypy"), "--no-incremental", "--cache-dir", "/dev/null")
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]


@pytest.mark.parametrize("broken", ["import os\n", "x = ( 1 )\n"], ids=["unused-import", "format"])
def test_the_linters_catch_a_broken_file(tmp_path: Path, broken: str) -> None:
    """The two ruff checks fail on a file with a finding (run on a scratch copy of the config)."""
    shutil.copy(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    (tmp_path / "bad.py").write_text(broken)
    check = subprocess.run(
        [tool("ruff"), "check", "--no-cache", "bad.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    fmt = subprocess.run(
        [tool("ruff"), "format", "--check", "--no-cache", "bad.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert (check.returncode, fmt.returncode) == ((1, 0) if "import" in broken else (0, 1))


def test_mypy_catches_a_type_error(tmp_path: Path) -> None:
    shutil.copy(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    (tmp_path / "bad.py").write_text("def f(x: int) -> str:\n    return x\n")
    done = subprocess.run(
        [tool("mypy"), "--strict", "--no-incremental", "--cache-dir", "/dev/null", "bad.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 1 and "Incompatible return value" in done.stdout
