"""A non-editable install carries templates/, hardware_db/ and profiles/ inside the package."""

from __future__ import annotations

import os
import shutil
import site
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    target = tmp_path_factory.mktemp("site")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--target",
            str(target),
            str(REPO),
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    return target


def run_installed(target: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    # The installed copy first, then the dependencies of the running interpreter; never the repo.
    paths = [str(target), *site.getsitepackages()]
    env = {"PYTHONPATH": os.pathsep.join(paths), "PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    return subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True)


def test_installed_package_finds_its_data_from_elsewhere(installed: Path, tmp_path: Path):
    where = run_installed(installed, tmp_path, "-c", "import generator; print(generator.__file__)")
    assert where.stdout.startswith(str(installed)), where.stdout + where.stderr
    for folder in ("templates", "hardware_db/systems", "hardware_db/gpus", "profiles"):
        assert (installed / "generator" / folder).is_dir(), folder
    help_text = run_installed(installed, tmp_path, "-m", "generator", "--help")
    assert help_text.returncode == 0 and "--profile" in help_text.stdout
    listing = run_installed(installed, tmp_path, "-m", "generator", "list")
    assert listing.returncode == 0 and "dgx-h100" in listing.stdout, listing.stderr
    check = run_installed(
        installed, tmp_path, "-m", "generator", "check", "--hw", "dgx-b200", "--profile", "training"
    )
    assert check.returncode == 0, check.stderr


def test_caches_are_not_shipped_but_built_where_installed(installed: Path, tmp_path: Path):
    package = installed / "generator"
    record = next(installed.glob("*.dist-info/RECORD")).read_text()
    for cache in ("__jinja_cache__", "__catalog_cache__"):
        assert cache not in record, f"{cache} was shipped in the wheel"
        shutil.rmtree(package / cache, ignore_errors=True)  # made by the other tests' runs
    first = run_installed(
        installed,
        tmp_path,
        "-m",
        "generator",
        "--hw",
        "dgx-h100",
        "--profile",
        "inference",
        "-o",
        str(tmp_path / "a"),
    )
    assert first.returncode == 0, first.stderr
    assert sorted(p.name for p in (package / "__catalog_cache__").iterdir()) == [
        "cpus.pickle",
        "gpus.pickle",
        "nics.pickle",
        "scripts.json",
        "tuned.json",
    ]
    second = run_installed(
        installed,
        tmp_path,
        "-m",
        "generator",
        "--hw",
        "dgx-h100",
        "--profile",
        "inference",
        "-o",
        str(tmp_path / "b"),
    )
    assert second.returncode == 0, second.stderr
    assert (tmp_path / "a" / "manifest.json").read_bytes() == (
        tmp_path / "b" / "manifest.json"
    ).read_bytes()


def test_console_script_is_declared():
    text = (REPO / "pyproject.toml").read_text()
    assert 'gen = "generator.console:main"' in text
