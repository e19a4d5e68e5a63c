"""`--os`: the target distribution option, whose help lists the distribution tables.

The list is read from hardware_db/distros/ when help is shown, never on an ordinary run: the
keys are the file names, the aliases are in the tables' YAML. Help reads that YAML without
validating it (about 25 ms for YAML and the files; validating the tables would add about 80 ms
of model definitions and checks to every `--help`); the tables' own tests validate them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])

# Each help text starts with this; the tables' names follow it in parentheses when shown.
LEAD = "Target distribution"
OS_HELP = (
    f"{LEAD}, over the hardware file's os.distro: a table of hardware_db/distros/ (its key or "
    "an alias) or of the site catalog (--catalog). Without either the bundle is portable and "
    "uses no distribution's defaults."
)
# `all` is generator/commands/matrix.py's ALL_DISTROS (not imported: help must not load the
# command's modules); no distribution key or alias can be "all" (they end in -<version>).
MATRIX_OS_HELP = (
    f"{LEAD}, repeatable: every combination is made for each one named, into "
    "DIR/<hardware>-<profile>-<distro>/ (the table's key, also for an alias); `--os all` is "
    "every distribution table (shipped and --catalog's). Without --os: DIR/<hardware>-<profile>/, "
    "for the hardware file's os.distro (portable without one)."
)


def with_names(help_text: str, names: str) -> str:
    """``help_text`` with the distribution names after its lead words."""
    return help_text.replace(LEAD, f"{LEAD} ({names})", 1)


def names_text(tables: Iterable[tuple[str, list[str]]]) -> str:
    """Each table's key with its aliases, sorted by key, as help and `gen schema` list them:
    "debian-12, rhel-8 (rocky-8, almalinux-8), ..."."""
    return ", ".join(
        key + (f" ({', '.join(aliases)})" if aliases else "") for key, aliases in sorted(tables)
    )


def shipped_tables() -> list[tuple[str, list[str]]]:
    """(key, aliases) of every shipped table, from its file name and its YAML, unvalidated: a
    table that does not read is listed by its key alone (loading it reports the problem)."""
    from generator.errors import GoldtuneError
    from generator.inputs.yamlio import read_catalog_entry
    from generator.paths import files_ending, hardware_db_dir

    tables = []
    for path in files_ending(hardware_db_dir() / "distros", ".yaml"):
        try:
            aliases = read_catalog_entry(path.parent.parent, path).get("aliases") or []
        except GoldtuneError:
            aliases = []
        tables.append((path.stem, [str(alias) for alias in aliases if isinstance(alias, str)]))
    return tables


class DistroOption(click.Option):
    """An --os option whose help names every shipped distribution table, read when shown."""

    def get_help_record(self, ctx: click.Context) -> tuple[str, str] | None:
        record = super().get_help_record(ctx)
        if record is None:
            return None
        return record[0], with_names(record[1], names_text(shipped_tables()))


def os_option(func: F) -> F:
    return click.option("--os", "os_name", metavar="DISTRO", help=OS_HELP, cls=DistroOption)(func)


def matrix_os_option(func: F) -> F:
    option = click.option(
        "--os", "os_names", multiple=True, metavar="DISTRO", help=MATRIX_OS_HELP, cls=DistroOption
    )
    return option(func)
