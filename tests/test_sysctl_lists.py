"""The per-kernel sysctl key lists and the distribution table that says which judges which.

Each ``tests/validators/sysctl-keys-<version>.txt`` is read from a booted kernel (Debian's packages
by ``boot_sysctl_keys.sh``); ``hardware_db/distros/*.yaml`` maps every distribution kernel line to
the lists that judge it (tests/validators/sysctl.py). These tests keep the two consistent, and
check the lists against what the plan's key table claims about kernel versions.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from generator.cli import main
from generator.inputs.distro import load_distros
from generator.plan.known_keys import KNOWN_SYSCTLS
from tests.conftest import missing_tool
from tests.validators import sysctl
from tests.validators.checks_system import check_sysctl
from tests.validators.run import MissingTool

HEADER = re.compile(r"^# sysctl keys of Linux (\S+) \((x86_64|aarch64)\), read from /proc/sys$")
DEBIAN_RELEASE = re.compile(r"^\d+\.\d+\.\d+(-\d+)?(\+deb\d+)?-amd64$")


def version_of(path: Path) -> str:
    return path.name.removeprefix("sysctl-keys-").removesuffix(".txt")


def header(path: Path) -> list[str]:
    return [line for line in path.read_text().splitlines() if line.startswith("#")]


def test_every_list_a_distribution_names_is_committed_and_every_committed_list_is_named() -> None:
    named = {version for versions in sysctl.distro_lists().values() for version in versions}
    committed = {version_of(path) for path in sysctl.reference_lists()}
    assert named - committed == set(), (
        "named in hardware_db/distros/*.yaml sysctl_keys, but no tests/validators/"
        'sysctl-keys-<version>.txt: commit the list read from a booted kernel (README, "Adding a '
        'distribution")'
    )
    assert committed - named == set(), (
        "tests/validators/sysctl-keys-*.txt committed, but no kernel line of "
        "hardware_db/distros/*.yaml names it in sysctl_keys: name it there or remove the file"
    )


def test_every_distribution_kernel_line_is_judged_by_a_list() -> None:
    for distro in {d.key: d for d in load_distros().values()}.values():
        for kernel in distro.kernels:
            assert kernel.sysctl_keys, (
                f"hardware_db/distros/{distro.key}.yaml: kernel {kernel.track} {kernel.version} "
                "names no sysctl_keys list: add one"
            )
            exact = kernel.sysctl_keys == [kernel.version]
            # a list of another version is a stand-in: the table must say so
            assert exact or kernel.sysctl_keys_note, (
                f"hardware_db/distros/{distro.key}.yaml: kernel {kernel.version} is judged by "
                "another version's list: say why in its sysctl_keys_note"
            )


def test_the_validator_reads_the_table_as_the_loader_does() -> None:
    """tests/validators reads the YAML without goldtune: the same lists, aliases resolved."""
    for name, distro in load_distros().items():
        wanted = [v for kernel in distro.kernels for v in kernel.sysctl_keys]
        assert sysctl.distro_lists()[distro.key] == tuple(dict.fromkeys(wanted)), name


@pytest.mark.parametrize("path", sysctl.reference_lists(), ids=version_of)
def test_each_list_says_which_kernel_and_package_it_was_read_from(path: Path) -> None:
    lines = header(path)
    match = HEADER.match(lines[0])
    assert match, lines[0]
    release = match.group(1)
    assert re.match(re.escape(version_of(path)) + r"[.-]", release), (path.name, release)
    if DEBIAN_RELEASE.match(release):
        origin = f"# from Debian package linux-image-{release} "
        assert any(line.startswith(origin) for line in lines), "\n".join(lines)


def test_portable_bundles_are_judged_by_every_list_and_a_distribution_by_its_own() -> None:
    assert set(sysctl.lists_for("") or ()) == set(sysctl.reference_lists())
    assert [p.name for p in sysctl.lists_for("rhel-9") or ()] == [
        "sysctl-keys-5.10.txt",
        "sysctl-keys-6.1.txt",
    ]
    assert sysctl.lists_for("beos-5") is None


def test_the_lists_agree_with_the_plans_kernel_versions() -> None:
    """A key the plan's table has from version V on (and until U) is in each list of a kernel
    in [V, U), and absent from a list of a kernel at or past U: the table's versions hold on
    real kernels. Module keys count only where the list's boot loaded the module."""
    for path in sysctl.reference_lists():
        kernel = tuple(int(part) for part in version_of(path).split("."))
        shapes = sysctl.load_reference(path).shapes
        loaded = " ".join(line for line in header(path) if "modules loaded" in line)
        for key, known in KNOWN_SYSCTLS.items():
            if known.module and known.module not in loaded:
                continue
            if "x86_64" not in known.arches:
                continue
            expected = known.available((kernel[0], kernel[1]), "x86_64")
            assert (key in shapes) == expected, f"{key} on {path.name}: table says {expected}"


@pytest.mark.parametrize("distro", sorted(sysctl.distro_lists()))
def test_a_bundle_for_each_distribution_passes_its_own_lists(distro: str, tmp_path: Path) -> None:
    out = tmp_path / "bundle"
    args = ["--hw", "dgx-h100", "--profile", "training", "--os", distro, "-o", str(out)]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    try:
        assert check_sysctl(out) == []
    except MissingTool as missing:
        missing_tool(missing)
