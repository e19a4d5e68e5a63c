"""An option that takes one value, given twice, is refused (issue 41, family 8): click keeps the
last value silently (`gen --hw a --hw b` wrote b's bundle). Every command of the tree, every
such option, both spellings: exit status 2, one line naming the option, nothing written. An
option whose command means several (``multiple``: `gen matrix --os`) takes them all. On main
every case below exited 0 or 1 with the last value, or failed further on."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from generator import cli
from generator.commands.usage import OneValueOptions, repeated_option


def commands(
    group: click.Group, path: tuple[str, ...] = ()
) -> list[tuple[tuple[str, ...], click.Command]]:
    found: list[tuple[tuple[str, ...], click.Command]] = [(path, group)]
    for name, command in sorted(group.commands.items()):
        if isinstance(command, click.Group):
            found += commands(command, (*path, name))
        else:
            found.append(((*path, name), command))
    return found


def sample_value(option: click.Option) -> str:
    if isinstance(option.type, click.Choice):
        return str(option.type.choices[0])
    if isinstance(option.type, click.IntRange | click.types.IntParamType):
        return "1"
    return "x"


SINGLE_VALUE = [
    pytest.param(path, word, sample_value(param), id=" ".join((*path, word)) or word)
    for path, command in commands(cli.main)
    for param in command.params
    if isinstance(param, click.Option)
    and not param.multiple
    and not param.is_flag
    and not param.count
    for word in param.opts
]


def test_every_command_refuses_a_repeated_single_value_option() -> None:
    assert len(SINGLE_VALUE) > 20  # the tree's options were found
    for _, command in commands(cli.main):
        assert isinstance(command, OneValueOptions), command.name


@pytest.mark.parametrize(("path", "word", "value"), SINGLE_VALUE)
def test_a_single_value_option_given_twice_is_one_line_and_exit_2(
    path: tuple[str, ...], word: str, value: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli.main, [*path, word, value, word, value])
    assert result.exit_code == 2, result.output
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and word in lines[0] and "given twice" in lines[0], result.stderr
    assert "Traceback" not in result.output
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "args",
    [
        ["--hw", "dgx-h100", "--profile", "inference", "--hw", "l4-inference"],
        ["--hw=dgx-h100", "--profile", "inference", "--hw", "l4-inference"],
        ["-ox", "--hw", "dgx-h100", "--profile", "inference", "--output", "y"],
        [
            "explain",
            "--hw",
            "dgx-h100",
            "--profile",
            "inference",
            "--os=debian-12",
            "--os",
            "rhel-9",
        ],
        ["matrix", "--hw", "dgx-h100", "--profile", "inference", "-j", "1", "-j2"],
        ["diff", "a", "b", "--format", "json", "--format", "markdown"],
        ["verify", "b", "--snapshot", "s1", "--snapshot=s2"],
    ],
)
def test_each_spelling_of_a_repetition_is_refused(
    args: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli.main, args)
    assert result.exit_code == 2 and "given twice" in result.stderr, result.output
    assert list(tmp_path.iterdir()) == []


def test_a_value_that_looks_like_an_option_is_a_value() -> None:
    """`-o --hw` gives -o the value "--hw": one --hw, one -o, nothing repeated; options after
    `--` and after a group's command name are not the group's."""
    assert repeated_option(cli.main, ["-o", "--hw", "--hw", "a", "--profile", "p"]) is None
    assert repeated_option(cli.main, ["--hw", "a", "explain", "--hw", "b"]) is None
    assert repeated_option(cli.main, ["--hw", "a", "--", "--hw", "b"]) is None
    assert repeated_option(cli.main, ["--hw", "a", "--hw", "b"]) is not None


def test_options_that_mean_several_take_them_all(tmp_path: Path) -> None:
    out = tmp_path / "out"
    args = ["matrix", "--hw", "l4-inference", "--profile", "inference", "-o", str(out)]
    result = CliRunner().invoke(cli.main, [*args, "--os", "debian-12", "--os", "rhel-9"])
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in out.iterdir()) == [
        "l4-inference-inference-debian-12",
        "l4-inference-inference-rhel-9",
    ]


def test_completion_after_a_repeated_option_still_completes(tmp_path: Path) -> None:
    """Shell completion parses what is typed so far; a repetition there is no error (the run
    refuses it), else each <TAB> printed a traceback."""
    env = {
        **os.environ,
        "COMP_WORDS": "gen --hw a --hw ",
        "COMP_CWORD": "4",
        "_GEN_COMPLETE": "bash_complete",
    }
    done = subprocess.run(
        [sys.executable, "-c", "from generator.cli import main; main(prog_name='gen')"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        check=False,
    )
    assert "Traceback" not in done.stderr, done.stderr
    assert "plain,dgx-h100" in done.stdout.splitlines()
