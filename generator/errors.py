"""One small exception hierarchy, caught once in the CLI.

``InputError`` means the user's input is wrong (exit status 2); ``GenerationError`` means goldtune
could not finish (exit status 1).  Each problem is one line: file, dotted field path, what is wrong.
"""

# No `from __future__ import annotations`: a NamedTuple turns each string annotation into
# a compiled ForwardRef, ~0.15 ms a record at import (bench/bench.py's cold gen).
from typing import NamedTuple


class Problem(NamedTuple):
    """One thing wrong with one input: where (file and dotted field path) and what."""

    source: str
    path: str
    message: str
    hint: str = ""

    def __str__(self) -> str:
        where = f"{self.source}: {self.path}" if self.path else self.source
        text = f"{where}: {self.message}"
        return f"{text} ({self.hint})" if self.hint else text


class GoldtuneError(Exception):
    """Base class of every error goldtune reports to the user."""

    exit_code = 1

    def lines(self) -> list[str]:
        return [str(self)]


class InputError(GoldtuneError):
    """Bad input: one or more problems, each on its own line. Exit status 2."""

    exit_code = 2

    def __init__(self, problems: list[Problem] | Problem) -> None:
        self.problems = [problems] if isinstance(problems, Problem) else list(problems)
        super().__init__("\n".join(str(p) for p in self.problems))

    def lines(self) -> list[str]:
        return [str(p) for p in self.problems]


class GenerationError(GoldtuneError):
    """goldtune could not finish (e.g. the output directory cannot be written). Exit status 1."""
