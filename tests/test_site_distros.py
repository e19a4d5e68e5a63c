"""Distributions in the site catalog (issue 37): a team adds its own table under
`--catalog DIR` (DIR/distros/<key>.yaml), checked like a shipped one, or one that `extends:` a
shipped table and replaces some of its top-level fields. A key or alias a shipped table already
answers to is refused: exit 2, one line naming the file and the field, nothing written."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from generator.errors import InputError
from generator.inputs.distro import load_site_distros
from tests.conftest import REPO

SHIPPED = REPO / "hardware_db" / "distros"
SOURCES = ["acme's own image build, read from its kickstart (2026-11)"]


def shipped(key: str) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((SHIPPED / f"{key}.yaml").read_text())
    return data


# A made-up rebuild of RHEL 9 with a key of its own: every field validated as a shipped table's.
ACME = {**shipped("rhel-9"), "key": "acmeos-9", "name": "Acme OS 9", "aliases": ["acme-9"]}
# Ubuntu 24.04 as a site builds it, with BLS entries: only boot_args replaced.
EXTENDED = {
    "extends": "ubuntu-24.04",
    "key": "acmebuntu-24.04",
    "name": "Acme's Ubuntu 24.04 image",
    "boot_args": shipped("rhel-9")["boot_args"],
    "sources": SOURCES,
}


def catalog(tmp_path: Path, *tables: dict[str, Any], names: list[str] | None = None) -> Path:
    folder = tmp_path / "site" / "distros"
    folder.mkdir(parents=True)
    for index, table in enumerate(tables):
        name = names[index] if names else table["key"]
        (folder / f"{name}.yaml").write_text(yaml.safe_dump(table, sort_keys=False))
    return folder.parent


def gen(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "generator", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
        check=False,
    )


def test_a_site_distribution_makes_a_bundle_by_os_and_by_os_distro(tmp_path: Path) -> None:
    site = catalog(tmp_path, ACME)
    by_option = tmp_path / "a"
    done = gen(
        "--catalog", str(site), "--hw", "dgx-h100", "--profile", "training",
        "--os", "acme-9", "-o", str(by_option),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert '"distro": "acmeos-9"' in (by_option / "plan.json").read_text()
    hardware = tmp_path / "box.yaml"
    hardware.write_text("system: dgx-h100\nos:\n  distro: acmeos-9\n")
    by_file = tmp_path / "b"
    done = gen(
        "--catalog", str(site), "--hw", str(hardware), "--profile", "training", "-o", str(by_file)
    )
    assert done.returncode == 0, done.stderr
    # the table's facts are applied as rhel-9's are: BLS entries, no GRUB drop-in
    assert not (by_file / "rootfs/etc/default/grub.d").exists()
    assert "acmeos-9" in (by_file / "EXPLAIN.md").read_text()


def test_without_the_catalog_a_site_distribution_is_unknown(tmp_path: Path) -> None:
    catalog(tmp_path, ACME)
    done = gen("--hw", "dgx-h100", "--profile", "training", "--os", "acmeos-9", "-o", "x")
    assert done.returncode == 2 and "unknown distribution 'acmeos-9'" in done.stderr


def test_extends_replaces_the_fields_it_names_and_keeps_the_others(tmp_path: Path) -> None:
    distros = load_site_distros(catalog(tmp_path, EXTENDED))
    table, base = distros["acmebuntu-24.04"], distros["ubuntu-24.04"]
    assert table.boot_args.mechanism == "grubby-bls" != base.boot_args.mechanism
    assert table.sources == SOURCES
    assert table.systemd == base.systemd and table.sysctl_defaults == base.sysctl_defaults
    assert table.aliases == []  # the shipped aliases would name the shipped table


def distro_claim(bundle: Path) -> str:
    """The os.distro the boot preflight checks /etc/os-release against."""
    conf = (bundle / "rootfs/etc/goldtune/preflight.conf").read_text().splitlines()
    (line,) = [line for line in conf if line.startswith("claim\tos.distro\t")]
    return line.split("\t")[2]


def test_an_extending_table_makes_a_bundle(tmp_path: Path) -> None:
    out = tmp_path / "out"
    done = gen(
        "--catalog", str(catalog(tmp_path, EXTENDED)), "--hw", "dgx-h100",
        "--profile", "training", "--os", "acmebuntu-24.04", "-o", str(out),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert not (out / "rootfs/etc/default/grub.d").exists()  # its boot_args, not Ubuntu's
    assert '"distro": "acmebuntu-24.04"' in (out / "plan.json").read_text()
    # the image is Ubuntu 24.04: its /etc/os-release says ubuntu, 24.04, not acmebuntu
    assert distro_claim(out) == "ubuntu-24.04"


def test_a_table_extending_al2023_claims_what_its_nodes_os_release_says(tmp_path: Path) -> None:
    """AL2023's os-release says amzn 2023, not amazon-linux-2023: an extending table inherits
    the shipped table's os_release, so its nodes do not all report an os.distro mismatch."""
    table = {"extends": "amazon-linux-2023", "key": "acmelinux-2023", "name": "Acme AL2023"}
    out = tmp_path / "out"
    done = gen(
        "--catalog", str(catalog(tmp_path, {**table, "sources": SOURCES})), "--hw", "dgx-h100",
        "--profile", "training", "--os", "acmelinux-2023", "-o", str(out),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert distro_claim(out) == "amzn-2023"


@pytest.mark.parametrize(
    ("table", "claimed"),
    [
        ({**ACME, "aliases": []}, "acmeos-9"),
        ({**ACME, "aliases": ["acme-9"]}, "acmeos-9,acme-9"),
        ({**ACME, "os_release": "rhel-9"}, "rhel-9"),
    ],
)
def test_a_whole_site_table_claims_its_key_or_its_os_release(
    table: dict[str, Any], claimed: str, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    done = gen(
        "--catalog", str(catalog(tmp_path, table)), "--hw", "dgx-h100",
        "--profile", "training", "--os", "acmeos-9", "-o", str(out),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert distro_claim(out) == claimed


REFUSED = {
    "key of a shipped table": (
        [{**ACME, "key": "rhel-9", "aliases": []}],
        ["distros/rhel-9.yaml: key: 'rhel-9' is already the shipped distribution rhel-9"],
    ),
    "alias of a shipped table": (
        [{**ACME, "aliases": ["acme-9", "rocky-9"]}],
        ["distros/acmeos-9.yaml: aliases[1]: 'rocky-9' is already the shipped distribution"],
    ),
    "invalid field": (
        [{**ACME, "thp": {"enabled": "sometimes", "source": SOURCES[0]}}],
        ["distros/acmeos-9.yaml: thp.enabled: invalid value 'sometimes'"],
    ),
    "key not the file name": (
        [("acmeos-9", {**ACME, "key": "acmeos-10"})],
        ["distros/acmeos-9.yaml: key: 'acmeos-10' does not match the file name"],
    ),
    "extends an unknown table": (
        [{**EXTENDED, "extends": "centos-7"}],
        ["distros/acmebuntu-24.04.yaml: extends: 'centos-7' is not a shipped distribution"],
    ),
    "extends without its own sources": (
        [{k: v for k, v in EXTENDED.items() if k != "sources"}],
        ["distros/acmebuntu-24.04.yaml: sources: required field is missing"],
    ),
    "two site tables share a name": (
        [ACME, {**ACME, "key": "acmeos-10"}],
        ["distros/acmeos-9.yaml: aliases[0]: 'acme-9' already names acmeos-10"],
    ),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_a_bad_site_table_is_one_line_exit_2_nothing_written(case: str, tmp_path: Path) -> None:
    entries, expected = REFUSED[case]
    named = [entry if isinstance(entry, tuple) else (entry["key"], entry) for entry in entries]
    site = catalog(tmp_path, *(table for _, table in named), names=[name for name, _ in named])
    out = tmp_path / "out"
    done = gen(
        "--catalog", str(site), "--hw", "dgx-h100", "--profile", "training",
        "--os", "acmeos-9", "-o", str(out),
    )  # fmt: skip
    assert done.returncode == 2, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert all(part in lines[0] for part in expected), lines[0]
    assert lines[0].startswith(f"goldtune: error: {site}/distros/"), lines[0]
    assert not out.exists()


def test_a_bad_site_table_is_refused_in_process_too(tmp_path: Path) -> None:
    """The loader, not the command line, refuses it (gen detect, matrix, check read it too)."""
    with pytest.raises(InputError) as raised:
        load_site_distros(catalog(tmp_path, {**ACME, "key": "rhel-9", "aliases": []}))
    [line] = raised.value.lines()
    assert "already the shipped distribution rhel-9" in line
