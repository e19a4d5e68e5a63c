"""Usage errors of every command (imports click, json and goldtune's error types only: these
modules are loaded for every run): an option that takes one value given twice is refused, a
command's ``--json`` promise holds for a usage error too, and goldtune's own errors are one line
each."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from functools import wraps
from typing import IO, Any, TypeVar

import click

from generator import TOOL
from generator.errors import GoldtuneError
from generator.textsafe import printable

F = TypeVar("F", bound=Callable[..., Any])


def reports_errors(func: F) -> F:
    """Turn goldtune's errors into one line per problem on stderr and the right exit status."""

    @wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except GoldtuneError as error:
            for line in error.lines():  # a path or a key from a foreign file: no raw controls
                click.echo(f"{TOOL}: error: {printable(line)}", err=True)
            sys.exit(error.exit_code)

    return wrapper  # type: ignore[return-value]


class OneLineUsageError(click.UsageError):
    """A usage error said in one line on stderr (``gen: error: …``), exit status 2, without
    click's usage and help lines: for a mistake the line names whole."""

    def show(self, file: IO[Any] | None = None) -> None:
        click.echo(f"{TOOL}: error: {self.format_message()}", file=file, err=file is None)


def _takes_value(option: click.Option) -> bool:
    return not option.is_flag and not option.count


def _option_words(command: click.Command) -> dict[str, click.Option]:
    """Each way to write an option of ``command`` on the command line (``-o``, ``--output``)."""
    return {
        word: param
        for param in command.params
        if isinstance(param, click.Option)
        for word in param.opts
    }


def _given_options(command: click.Command, args: list[str]) -> list[tuple[click.Option, str]]:
    """The options of ``command`` that ``args`` give, with the value each got, in order, read
    as click's parser reads them: ``--name value``, ``--name=value``, ``-o value``, ``-ovalue``
    and clusters of short flags, nothing after ``--``, and for a group nothing after its first
    argument (the command name: what follows is that command's)."""
    words = _option_words(command)
    given: list[tuple[click.Option, str]] = []
    index = 0
    while index < len(args):
        word = args[index]
        index += 1
        if word == "--":
            break
        if word.startswith("--"):
            name, equals, value = word.partition("=")
            option = words.get(name)
            if option is None or not _takes_value(option):
                continue
            if not equals:
                value = args[index] if index < len(args) else ""
                index += 1
            given.append((option, value))
        elif word.startswith("-") and len(word) > 1:
            for at, letter in enumerate(word[1:], start=2):
                option = words.get(f"-{letter}")
                if option is None or not _takes_value(option):
                    continue
                value = word[at:]
                if not value:
                    value = args[index] if index < len(args) else ""
                    index += 1
                given.append((option, value))
                break
        elif not command.allow_interspersed_args:
            break
    return given


def repeated_option(command: click.Command, args: list[str]) -> str | None:
    """What is wrong when ``args`` give an option of ``command`` that takes one value more than
    once (click would keep the last silently), else None. Options whose command means several
    (``multiple``: `gen matrix --hw a --hw b`) take them all."""
    seen: dict[str, list[str]] = {}
    for option, value in _given_options(command, args):
        if option.multiple or option.name is None:
            continue
        seen.setdefault(option.name, []).append(value)
        values = seen[option.name]
        if len(values) > 1:
            shown = ", ".join(repr(printable(v)) for v in values)
            return f"{'/'.join(option.opts)} is given twice ({shown}): it takes one value"
    return None


class OneValueOptions(click.Command):
    """A command that refuses an option of one value given twice (exit status 2, one line)."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        # Shell completion parses resiliently, to complete what is typed: no error there.
        problem = None if ctx.resilient_parsing else repeated_option(self, args)
        if problem is not None:
            raise OneLineUsageError(problem, ctx)
        return super().parse_args(ctx, args)


class OneValueGroup(OneValueOptions, click.Group):
    """The `gen` group: its own options are held to one value each, and so is every command
    made with its ``command`` decorator (``command_class``)."""

    command_class = OneValueOptions


class JsonUsageErrors(OneValueOptions):
    """A command whose ``--json`` promise holds for a usage error too (a missing or unknown
    option): a script reading stdout gets the same error object, click's lines stay on stderr."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        as_json = "--json" in args
        try:
            return super().parse_args(ctx, args)
        except click.UsageError as error:
            if as_json:
                from generator.commands.check import usage_report

                click.echo(json.dumps(usage_report(error.format_message(), ctx), indent=2))
            raise
