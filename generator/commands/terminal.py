"""Where a verb's output goes: whether a stream is a terminal, and a progress bar off stdout."""

from __future__ import annotations

import sys
from typing import IO, Any, Literal

import click


def stream_is_terminal(name: Literal["stdout", "stderr"]) -> bool:
    """Whether the process's stream of that name is a terminal (colour, progress)."""
    stream: IO[str] = sys.stdout if name == "stdout" else sys.stderr
    return stream.isatty()


def progress_on_stderr(**options: Any) -> Any:
    """click's progress bar on stderr: its default is stdout, where the table goes."""
    return click.progressbar(file=sys.stderr, **options)
