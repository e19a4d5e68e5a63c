"""Run the main job of `gen` in-process: the same command line, without a Python start per call."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner, Result

from generator.cli import main


def generate(hardware: str | Path, profile: str | Path, output: Path) -> Result:
    """`gen --hw HARDWARE --profile PROFILE -o OUTPUT`; exit_code, stdout and stderr as seen."""
    return CliRunner().invoke(
        main, ["--hw", str(hardware), "--profile", str(profile), "-o", str(output)]
    )
