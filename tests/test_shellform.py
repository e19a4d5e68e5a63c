"""The first-boot form of the fixed scripts (generator/model/shellform.py): comments out, code
kept byte for byte, checked by the real shellcheck."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from generator.model.layout import COMPACT_IN_USER_DATA, LIBEXEC
from generator.model.shellform import without_comment_lines
from tests.conftest import REPO

SCRIPTS = sorted(target.removeprefix(f"{LIBEXEC}/") for target in COMPACT_IN_USER_DATA)


def test_comment_lines_go_and_code_stays() -> None:
    script = (
        "#!/bin/sh\n"
        "# why this script exists\n"
        "\n"
        "# shellcheck disable=SC2086\n"
        "x=${1#prefix} # trailing comment stays\n"
        "    # indented comment\n"
        "cat <<EOF\n"
        "# a heredoc line is data\n"
        "\n"
        "EOF\n"
        "echo 'a string\n"
        "# spanning lines is data too\n"
        "'\n"
        'echo "$#" "it\'s" \\\n'
        "    done\n"
    )
    assert without_comment_lines(script) == (
        "#!/bin/sh\n"
        "# shellcheck disable=SC2086\n"
        "x=${1#prefix} # trailing comment stays\n"
        "cat <<EOF\n"
        "# a heredoc line is data\n"
        "\n"
        "EOF\n"
        "echo 'a string\n"
        "# spanning lines is data too\n"
        "'\n"
        'echo "$#" "it\'s" \\\n'
        "    done\n"
    )


def test_only_whole_comment_and_blank_lines_are_removed() -> None:
    for name in SCRIPTS:
        text = (REPO / "templates" / "scripts" / name).read_text()
        compact = without_comment_lines(text).splitlines()
        removed = list(text.splitlines())
        for line in compact:  # the compact form is the original with some lines left out
            removed.remove(line)
        assert all(not line.strip() or line.strip().startswith("#") for line in removed), name


@pytest.mark.skipif(shutil.which("shellcheck") is None, reason="shellcheck not installed")
@pytest.mark.parametrize("name", SCRIPTS)
def test_the_first_boot_form_passes_shellcheck(name: str, tmp_path: Path) -> None:
    text = (REPO / "templates" / "scripts" / name).read_text()
    compact = tmp_path / name
    compact.write_text(without_comment_lines(text))
    assert len(compact.read_text()) < len(text) * 0.8
    result = subprocess.run(
        ["shellcheck", "-s", "sh", str(compact)], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout
