"""One `gen matrix` run for several distributions (issue 37): --os is repeatable, `--os all` is
every distribution table, and a bundle made for a named distribution is written to
<hardware>-<profile>-<distro key>/, so the forms never overwrite each other. Without --os the
names stay <hardware>-<profile>/ (fleet repositories made without it do not churn)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml
from pydantic import TypeAdapter, ValidationError
from test_matrix import gen

from generator.commands.matrix import ALL_DISTROS, target_distros
from generator.errors import InputError
from generator.inputs.catalog import Catalog, load_catalog
from generator.inputs.distro import DistroKey, load_distros
from generator.paths import hardware_db_dir

ARGS = ("matrix", "--hw", "l4-inference", "--profile", "inference")


def shipped_keys() -> list[str]:
    return sorted({distro.key for distro in load_distros().values()})


def planned_distro(bundle: Path) -> str | None:
    distro: str | None = json.loads((bundle / "plan.json").read_text()).get("distro")
    return distro


def test_several_os_write_one_bundle_each_named_after_the_distribution(tmp_path: Path) -> None:
    """Before: --os took one value (a second replaced the first); one name for every form."""
    result = gen(*ARGS, "--os", "debian-12", "--os", "rocky-9", "-o", str(tmp_path))
    assert result.returncode == 0, result.stderr
    names = sorted(path.name for path in tmp_path.iterdir())
    # an alias is its table's key
    assert names == ["l4-inference-inference-debian-12", "l4-inference-inference-rhel-9"]
    for name in names:
        assert planned_distro(tmp_path / name) == name.removeprefix("l4-inference-inference-")
    assert "2 written, 0 failed" in result.stdout
    header = result.stdout.splitlines()[0].split()
    assert header[:3] == ["HARDWARE", "PROFILE", "OS"], header


def test_without_os_the_names_are_unchanged(tmp_path: Path) -> None:
    result = gen(*ARGS, "-o", str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert [path.name for path in tmp_path.iterdir()] == ["l4-inference-inference"]
    assert "OS" not in result.stdout.splitlines()[0].split()


def test_an_alias_and_its_key_make_one_bundle(tmp_path: Path) -> None:
    result = gen(*ARGS, "--os", "rocky-9", "--os", "RHEL-9", "-o", str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert [path.name for path in tmp_path.iterdir()] == ["l4-inference-inference-rhel-9"]


def test_os_all_makes_every_distribution_table_and_check_takes_several(tmp_path: Path) -> None:
    result = gen(*ARGS, "--os", "all", "-o", str(tmp_path))
    assert result.returncode == 0, result.stderr
    names = sorted(path.name for path in tmp_path.iterdir())
    assert names == [f"l4-inference-inference-{key}" for key in shipped_keys()]
    assert gen(*ARGS, "--os", "all", "--check", str(tmp_path)).returncode == 0
    shutil.rmtree(tmp_path / "l4-inference-inference-rhel-8")
    check = gen(*ARGS, "--os", "debian-12", "--os", "rhel-8", "--check", str(tmp_path))
    assert check.returncode == 1
    assert "1 current" in check.stdout, check.stdout
    assert "`l4-inference-inference-rhel-8` | missing" in check.stdout, check.stdout
    # the other distributions' bundles are not this run's
    assert "`l4-inference-inference-ubuntu-24.04` | extra" in check.stdout, check.stdout


def test_an_unknown_os_among_several_is_one_line_and_nothing_written(tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = gen(*ARGS, "--os", "debian-12", "--os", "beos-5", "-o", str(out))
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "unknown distribution 'beos-5'" in result.stderr
    assert not out.exists()


def test_all_names_every_table_of_the_run_the_site_catalogs_too(tmp_path: Path) -> None:
    site = tmp_path / "site"
    (site / "distros").mkdir(parents=True)
    table = {
        "extends": "debian-12",
        "key": "acmedeb-12",
        "name": "Acme Debian 12",
        "sources": ["acme's image build, read 2026-11"],
    }
    (site / "distros/acmedeb-12.yaml").write_text(yaml.safe_dump(table))
    with_site = Catalog(hardware_db_dir(), site)
    assert target_distros((ALL_DISTROS,), with_site) == sorted([*shipped_keys(), "acmedeb-12"])
    assert target_distros(("debian-12", "all"), load_catalog())[0] == "debian-12"
    with pytest.raises(InputError):
        target_distros(("centos-7",), load_catalog())


def test_no_distribution_can_be_called_all() -> None:
    """`--os all` is never a table's name: keys and aliases end in -<version>."""
    with pytest.raises(ValidationError):
        TypeAdapter(DistroKey).validate_python(ALL_DISTROS)
    assert ALL_DISTROS not in load_distros()


def test_the_help_says_how_to_name_every_distribution() -> None:
    result = gen("matrix", "--help")
    text = " ".join(result.stdout.split())
    assert "--os all" in text and "<hardware>-<profile>-<distro>" in text
