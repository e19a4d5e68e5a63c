"""A command's ``--json`` promise kept for click's usage errors (imports click and json only:
the command line's modules are loaded for every run)."""

from __future__ import annotations

import json

import click


class JsonUsageErrors(click.Command):
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
