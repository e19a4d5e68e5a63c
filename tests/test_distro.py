"""The distribution tables: every shipped file loads, names resolve, a bad file is one line."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import Any

import pytest
import yaml

from generator.errors import InputError
from generator.inputs.distro import (
    GOLDTUNE_SYSCTL_FILE,
    Distro,
    distros_dir,
    load_distros,
    resolve_distro,
)
from generator.inputs.schema import validate_model
from generator.inputs.yamlio import read_yaml_file
from generator.render.outputs import OVERLAY_OUTPUTS
from tests.conftest import REPO

DISTRO_FILES = sorted((REPO / "hardware_db" / "distros").glob("*.yaml"))
REQUIRED = {"ubuntu-22.04", "ubuntu-24.04", "debian-12", "rhel-8", "rhel-9"}


@pytest.mark.parametrize("path", DISTRO_FILES, ids=[p.stem for p in DISTRO_FILES])
def test_shipped_distro_loads_and_cites_sources(path: Path) -> None:
    distro = validate_model(Distro, read_yaml_file(path), str(path))
    assert distro.key == path.stem, f"{path.name}: key must be its file name, {path.stem}"
    assert distro.sources and all(len(line) > 10 for line in distro.sources), (
        f'{path.name}: sources must cite what each fact was read from (README, "Adding a '
        'distribution")'
    )


def test_the_target_distributions_are_shipped() -> None:
    assert {path.stem for path in DISTRO_FILES} >= REQUIRED
    assert distros_dir() == REPO / "hardware_db" / "distros"


@pytest.mark.parametrize("alias", ["rocky-9", "almalinux-9", "RHEL-9", " rhel-9 "])
def test_rebuilds_resolve_to_rhel(alias: str) -> None:
    assert resolve_distro(alias, load_distros()).key == "rhel-9"


def test_every_key_and_alias_resolves_to_its_file() -> None:
    distros = load_distros()
    for path in DISTRO_FILES:
        data = read_yaml_file(path)
        for name in [data["key"], *data.get("aliases", [])]:
            assert distros[name].key == path.stem


def test_unknown_distribution_is_one_line_naming_the_known_ones() -> None:
    with pytest.raises(InputError) as raised:
        resolve_distro("centos-7", load_distros(), "dgx.yaml", "os.distro")
    assert raised.value.exit_code == 2
    [line] = raised.value.lines()
    assert line.startswith("dgx.yaml: os.distro: unknown distribution 'centos-7' (known: ")
    for name in [*REQUIRED, "rocky-9", "almalinux-9"]:
        assert name in line


def test_a_long_unknown_name_is_cut_short() -> None:
    with pytest.raises(InputError) as raised:
        resolve_distro("x" * 500, load_distros())
    line = raised.value.lines()[0]
    # the name is cut at 40 characters; the known names that follow grow with the tables
    assert "x" * 40 not in line
    assert len(line.split(" (known: ")[0]) < 200


def test_sysctl_default_lookup() -> None:
    distros = load_distros()
    # procps ships it on 24.04 (LP #2057792); 22.04 keeps the kernel's 65530
    raised = distros["ubuntu-24.04"].sysctl_default("vm.max_map_count")
    assert raised is not None and raised.value == "1048576"
    assert distros["ubuntu-22.04"].sysctl_default("vm.max_map_count") is None


def test_late_files_are_named_against_the_bundles_own_sysctl_file() -> None:
    sysctl_outputs = [o.path for o in OVERLAY_OUTPUTS if "/sysctl.d/" in o.path]
    assert [PurePosixPath(path).name for path in sysctl_outputs] == [GOLDTUNE_SYSCTL_FILE]


def test_packaged_persistenced_facts_match_their_command_line() -> None:
    """A unit that passes --no-persistence-mode must not be recorded as leaving persistence on."""
    for distro in {d.key: d for d in load_distros().values()}.values():
        unit = distro.nvidia.persistenced
        if unit is None or unit.exec_start is None:
            continue
        assert unit.persistence_mode is ("--no-persistence-mode" not in unit.exec_start), distro.key


# --- bad files: each one line naming the file, the field path and what is wrong ---------------

Edit = Callable[[dict[str, Any]], None]


def _set(path: str, value: object) -> Edit:
    def edit(data: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node = data
        for part in parents:
            node = node[int(part)] if part.isdigit() else node[part]
        if last.isdigit():
            node[int(last)] = value
        else:
            node[last] = value

    return edit


def _delete(path: str) -> Edit:
    def edit(data: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node = data
        for part in parents:
            node = node[int(part)] if part.isdigit() else node[part]
        del node[last]

    return edit


def _repeat_first_sysctl_default(data: dict[str, Any]) -> None:
    data["sysctl_defaults"].append(dict(data["sysctl_defaults"][0]))


def _two_lines_release_on_the_second(data: dict[str, Any]) -> None:
    """Two kernel lines, none marked default: no line is what an unstated os.kernel means."""
    second = {"track": "backports", "version": "6.12", "source": data["kernels"][0]["source"]}
    data["kernels"].append({**second, "release": "6.12.38+deb12-amd64"})


BAD_EDITS: dict[str, tuple[Edit, str]] = {
    "unknown-field": (_set("colour", "red"), "colour: unknown field"),
    # the message says "expected stringing" today (generator/inputs/schema.py), hence the two parts
    "unquoted-version": (_set("kernels.0.version", 6.1), "kernels[0].version: expected string"),
    "unquoted-version-got": (_set("kernels.0.version", 6.1), "got float 6.1"),
    "missing-source": (_delete("tuned.source"), "tuned.source: required field is missing"),
    "short-source": (_set("thp.source", "docs"), "thp.source: invalid value 'docs'"),
    "thp-mode": (_set("thp.enabled", "sometimes"), "thp.enabled: invalid value 'sometimes'"),
    "mechanism": (_set("boot_args.mechanism", "lilo"), "boot_args.mechanism: invalid value 'lilo'"),
    "no-kernels": (_set("kernels", []), "kernels: "),
    "relative-file": (
        _set("sysctl_defaults.0.file", "sysctl.d/x.conf"),
        "sysctl_defaults[0].file: invalid value",
    ),
    "early-late-file": (
        _set("late_sysctl_files.0.file", "/etc/sysctl.d/10-vendor.conf"),
        "late_sysctl_files[0].file: /etc/sysctl.d/10-vendor.conf is applied before "
        "90-goldtune.conf",
    ),
    "repeated-default": (
        _repeat_first_sysctl_default,
        "sysctl_defaults: names kernel.pid_max more than once",
    ),
    "multi-line-note": (_set("systemd.package", "a\nb"), "systemd.package: invalid value"),
    "release-of-another-line": (
        _set("kernels.0.release", "5.10.0-28-amd64"),
        "kernels[0].release: 5.10.0-28-amd64 is not a build of the 6.1 line",
    ),
    "release-not-a-build": (_set("kernels.0.release", "6.1"), "kernels[0].release: invalid value"),
    "release-on-a-line-not-assumed": (
        _two_lines_release_on_the_second,
        "kernels: names a release on a line an unstated os.kernel does not mean",
    ),
    "unit-name": (
        _set("nvidia.persistenced.unit", "persistenced; rm -rf /"),
        "nvidia.persistenced.unit: invalid value",
    ),
    "key-not-file-name": (
        _set("key", "debian-11"),
        "key: 'debian-11' does not match the file name",
    ),
}


@pytest.fixture
def table(tmp_path: Path) -> Callable[[Edit], Path]:
    """A copy of the shipped table with one edit applied to debian-12.yaml."""

    def make(edit: Edit) -> Path:
        folder = tmp_path / "distros"
        shutil.copytree(REPO / "hardware_db" / "distros", folder)
        target = folder / "debian-12.yaml"
        data = yaml.safe_load(target.read_text())
        edit(data)
        target.write_text(yaml.safe_dump(data, sort_keys=False))
        return folder

    return make


def test_the_unedited_copy_loads(table: Callable[[Edit], Path]) -> None:
    assert "debian-12" in load_distros(table(lambda data: None))


@pytest.mark.parametrize("case", sorted(BAD_EDITS))
def test_bad_distro_file_is_one_line_with_its_field_path(
    case: str, table: Callable[[Edit], Path]
) -> None:
    edit, needle = BAD_EDITS[case]
    folder = table(edit)
    with pytest.raises(InputError) as raised:
        load_distros(folder)
    [line] = raised.value.lines()
    assert line.startswith(str(folder / "debian-12.yaml") + ": "), line
    assert needle in line, line


def test_an_alias_claimed_twice_names_the_second_file(tmp_path: Path) -> None:
    folder = tmp_path / "distros"
    shutil.copytree(REPO / "hardware_db" / "distros", folder)
    target = folder / "debian-12.yaml"
    data = yaml.safe_load(target.read_text())
    data["aliases"] = ["rocky-9"]
    target.write_text(yaml.safe_dump(data, sort_keys=False))
    with pytest.raises(InputError) as raised:
        load_distros(folder)
    [line] = raised.value.lines()
    assert "aliases[0]: 'rocky-9' already names " in line
    assert line.startswith(str(folder)), line


def test_a_file_that_is_not_yaml_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "broken-1.yaml").write_text("key: [unclosed\n")
    with pytest.raises(InputError) as raised:
        load_distros(tmp_path)
    [line] = raised.value.lines()
    assert "broken-1.yaml" in line and "invalid YAML" in line
