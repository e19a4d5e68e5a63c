"""Options that more than one command takes, or that a gate adds: defined once, here."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])
# One parameter type for every path option of every command: each click.Path looks its name up
# in gettext's catalogs (stat calls for .mo files) when it is made, and a type holds no state.
PATH = click.Path(path_type=Path)

# generator/render/providers.py's PROVIDER_LIMITS, by name (tests/test_fit_gate.py holds them
# equal): the option is made when the command line is, which loads no renderer.
PROVIDERS = ("ec2", "azure", "gcp")


def cloud_init_options(func: F) -> F:
    """--cloud-init-reboot, --cloud-init-part and --require-fit, of the main job and of
    `gen matrix`."""
    func = click.option(
        "--require-fit",
        "require_fit",
        multiple=True,
        type=click.Choice(PROVIDERS),
        metavar="PROVIDER",
        help="Fail, writing nothing, when no cloud-init form that carries every "
        "--cloud-init-part fits this provider's user-data limit (repeatable; "
        f"{', '.join(PROVIDERS)}; exit status 2). Without it an overrun is a warning.",
    )(func)
    func = click.option(
        "--cloud-init-part",
        "cloud_init_parts",
        multiple=True,
        type=PATH,
        metavar="FILE",
        help="A cloud-config of your own (repeatable): a part of cloud-init/user-data.mime(.gz), "
        "before the bundle's part, whose merge_how keeps your files and commands.",
    )(func)
    return click.option(
        "--cloud-init-reboot",
        is_flag=True,
        help="The cloud-init user-data reboots once after the first boot when the running kernel "
        "lacks one of the bundle's kernel arguments (cloud-init's power_state).",
    )(func)


def diff_claims_option(func: F) -> F:
    return click.option(
        "--no-claims",
        "show_claims",
        flag_value=False,
        default=True,
        help="Leave the preflight claims' rows out (their count stays in the summary).",
    )(func)


def report_option(func: F) -> F:
    return click.option(
        "--report",
        "report_file",
        type=PATH,
        metavar="FILE",
        help="With --check: write the whole Markdown report to FILE; stdout gets a summary "
        "bounded for a pull-request comment that still names every bundle not current.",
    )(func)
