"""The distribution list is made from the tables (issue 37): `--os`'s help, `gen schema
hardware`'s os.distro and README.md's list name exactly the tables of hardware_db/distros/, keys
and aliases. A table added without them fails here; README.md's list is rewritten with
`python tests/test_distro_list.py --write`."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from generator.cli import main
from generator.commands.distro_option import names_text, shipped_tables
from generator.inputs.distro import Distro, load_distros, tables

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"
BEGIN = "<!-- distributions: made from hardware_db/distros/ by tests/test_distro_list.py -->"
END = "<!-- end of distributions -->"
HEADER = "| `--os` | Aliases | Distribution |\n| --- | --- | --- |\n"


def shipped() -> list[Distro]:
    return tables(load_distros())


def readme_block(distros: list[Distro]) -> str:
    """README.md's list as the tables make it: one row per table, by key."""
    rows = "".join(
        f"| `{d.key}` | {', '.join(f'`{a}`' for a in d.aliases)} | {d.name} |\n" for d in distros
    )
    return f"{BEGIN}\n{HEADER}{rows}{END}"


def written_block(text: str) -> str:
    match = re.search(re.escape(BEGIN) + ".*?" + re.escape(END), text, re.DOTALL)
    assert match, f"README.md has no list between {BEGIN} and {END}"
    return match.group(0)


def test_readme_lists_every_distribution_table() -> None:
    """Fails when a table is added, renamed or given an alias and README.md is not updated."""
    expected = readme_block(shipped())
    assert written_block(README.read_text()) == expected, (
        "README.md's distribution list is not the tables': run python tests/test_distro_list.py "
        "--write"
    )


def test_readme_names_are_the_tables_names() -> None:
    """The same, read back as names: every key and alias, nothing else."""
    names = set(re.findall(r"`([^`]+)`", written_block(README.read_text())))
    assert names - {"--os"} == set(load_distros()), (
        "README.md's distribution list is not the tables': run python tests/test_distro_list.py "
        "--write"
    )


def help_text(*args: str) -> str:
    result = CliRunner().invoke(main, [*args, "--help"])
    assert result.exit_code == 0, result.output
    return " ".join(result.output.split())


EXPECTED = "Target distribution ({})"


@pytest.mark.parametrize("command", [(), ("check",), ("explain",), ("matrix",)])
def test_the_os_help_lists_the_tables(command: tuple[str, ...]) -> None:
    listed = names_text((d.key, d.aliases) for d in shipped())
    # click wraps help at hyphens too (amazon-linux-|2023): compared without any whitespace, so
    # that a table whose name moves a line break does not fail here (issue 43)
    unwrapped = "".join(help_text(*command).split())
    assert "".join(EXPECTED.format(listed).split()) in unwrapped, (
        "--os's help is made from hardware_db/distros/ by generator/commands/distro_option.py: "
        "a table its fast reader (shipped_tables) misses, or a help text written by hand"
    )


def test_the_help_reads_the_tables_as_the_loader_does() -> None:
    """The help reads the YAML unvalidated (start-up cost): the same keys and aliases."""
    assert sorted(shipped_tables()) == sorted((d.key, d.aliases) for d in shipped())


def test_the_hardware_schema_lists_the_tables() -> None:
    result = CliRunner().invoke(main, ["schema", "hardware"])
    assert result.exit_code == 0, result.output
    distro = json.loads(result.output)["$defs"]["OsSpec"]["properties"]["distro"]
    assert distro["anyOf"][0]["enum"] == sorted(load_distros())
    listed = names_text((d.key, d.aliases) for d in shipped())
    assert f"({listed})" in distro["description"]
    pattern = re.compile(distro["anyOf"][1]["pattern"])
    assert all(pattern.match(name.upper()) for name in load_distros())
    assert not pattern.match("centos-7")


def test_no_distribution_is_listed_by_hand_in_the_code() -> None:
    """The lists the tables replaced: the help and the format's description named them."""
    for path in (REPO / "generator/cli.py", REPO / "generator/inputs/hardware_spec.py"):
        text = path.read_text()
        assert "ubuntu-22.04, ubuntu-24.04" not in text, path
        assert "rocky-9 and almalinux-9" not in text, path


def write_readme() -> None:
    text = README.read_text()
    README.write_text(text.replace(written_block(text), readme_block(shipped())))


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        sys.exit("usage: python tests/test_distro_list.py --write  (rewrites README.md's list)")
    write_readme()
