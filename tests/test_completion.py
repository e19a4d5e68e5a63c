"""Shell completion (click's _GEN_COMPLETE): shipped names for --hw and --profile, files for
paths, through the real completion entry point and the callbacks themselves."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from generator.commands.completion import complete_hardware, complete_profile, name_or_file
from tests.conftest import PROFILES, REPO, SYSTEMS


def completions(words: str) -> list[tuple[str, str]]:
    """What bash's completion function receives for the command line ``words`` (last word
    incomplete): (type, value) pairs."""
    env = {
        "PYTHONPATH": str(REPO),
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "_GEN_COMPLETE": "bash_complete",
        "COMP_WORDS": words,
        "COMP_CWORD": str(len(words.split()) - (0 if words.endswith(" ") else 1)),
    }
    result = subprocess.run(
        [sys.executable, "-c", "from generator.cli import main; main(prog_name='gen')"],
        env=env,
        capture_output=True,
        text=True,
        check=False,
        cwd=REPO,
    )
    assert result.returncode == 0, result.stderr
    return [tuple(line.split(",", 1)) for line in result.stdout.splitlines()]  # type: ignore[misc]


def test_hw_completes_shipped_systems_and_files():
    offered = completions("gen check --hw dgx-h")
    names = [value for kind, value in offered if kind == "plain"]
    assert names == [name for name in SYSTEMS if name.startswith("dgx-h")] and names
    assert ("file", "dgx-h") in offered  # a file in the current directory is valid too


def test_profile_completes_shipped_profiles_on_every_command():
    for command in ("check", "explain", "matrix", "diff"):
        offered = completions(f"gen {command} --profile tr")
        names = [value for kind, value in offered if kind == "plain"]
        assert names == [name for name in PROFILES if name.startswith("tr")] and names, command


def test_commands_complete_including_the_new_ones():
    offered = {value for _, value in completions("gen ")}
    assert {"matrix", "package", "check", "verify"} <= offered


@pytest.mark.parametrize("value", ["./hw/", "fleet/a", "box.yaml", "box.yml"])
def test_a_path_is_left_to_the_shell(value):
    assert [(item.type, item.value) for item in name_or_file(["box"], value)] == [("file", value)]


def test_the_callbacks_offer_every_shipped_name_for_an_empty_word():
    hardware = complete_hardware(None, None, "")  # type: ignore[arg-type]
    profiles = complete_profile(None, None, "")  # type: ignore[arg-type]
    assert [i.value for i in hardware if i.type == "plain"] == SYSTEMS
    assert [i.value for i in profiles if i.type == "plain"] == PROFILES
