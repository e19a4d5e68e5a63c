"""The first-boot form of the fixed scripts (generator/model/shellform.py): comments out, code
kept byte for byte, checked by the real shellcheck."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from generator.model.layout import FIXED_SCRIPTS, LIBEXEC
from generator.model.shellform import without_comment_lines
from tests.conftest import REPO

SCRIPTS = sorted(target.removeprefix(f"{LIBEXEC}/") for target in FIXED_SCRIPTS)


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


def test_structured_files_mean_the_same_without_their_comment_lines(tmp_path: Path) -> None:
    """YAML (kubelet) and TOML (containerd) parse to the same data in both forms: no block scalar
    or multi-line string of theirs holds a line that looks like a comment."""
    import tomllib

    import yaml
    from click.testing import CliRunner

    from generator.cli import main

    bundle = tmp_path / "bundle"
    args = ["--hw", "dgx-h100", "--profile", "training-k8s", "-o", str(bundle)]
    assert CliRunner().invoke(main, args).exit_code == 0
    kubelet = next((bundle / "rootfs/etc/kubernetes").rglob("*.conf")).read_text()
    containerd = next((bundle / "rootfs/etc/containerd").rglob("*.toml")).read_text()
    assert without_comment_lines(kubelet) != kubelet
    assert yaml.safe_load(without_comment_lines(kubelet)) == yaml.safe_load(kubelet)
    assert tomllib.loads(without_comment_lines(containerd)) == tomllib.loads(containerd)
