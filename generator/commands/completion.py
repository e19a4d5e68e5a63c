"""Shell completion of --hw and --profile: the shipped names, and files for a path.

click completes every command and option by itself when the shell asks it through
``_GEN_COMPLETE`` (see the README); these callbacks add what click cannot know: the names of
the shipped systems and profiles. A value that looks like a path (a ``/``, a leading ``.``, a
.yaml/.yml ending) is a file, so the shell's own file completion takes it; otherwise the
shipped names that start with it are offered, and the shell's files beside them, since a
file in the current directory is a valid value too. Only the data folders' file names are
read: nothing is parsed, so a completion stays instant.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from generator.paths import hardware_db_dir, profiles_dir

if TYPE_CHECKING:  # imported when the shell asks: every other run of `gen` spares its 0.5 ms
    from click.shell_completion import CompletionItem

YAML_ENDINGS = (".yaml", ".yml")


def shipped_names(folder: Path) -> list[str]:
    """The stems of the .yaml files in ``folder``, sorted; none when it cannot be read."""
    try:
        return sorted(path.stem for path in folder.glob("*.yaml"))
    except OSError:
        return []


def looks_like_a_path(incomplete: str) -> bool:
    return "/" in incomplete or incomplete.startswith(".") or incomplete.endswith(YAML_ENDINGS)


def name_or_file(names: list[str], incomplete: str) -> list[CompletionItem]:
    from click.shell_completion import CompletionItem

    file_item = CompletionItem(incomplete, type="file")
    if looks_like_a_path(incomplete):
        return [file_item]
    return [CompletionItem(name) for name in names if name.startswith(incomplete)] + [file_item]


def complete_hardware(
    ctx: click.Context, param: click.Parameter, incomplete: str
) -> list[CompletionItem]:
    return name_or_file(shipped_names(hardware_db_dir() / "systems"), incomplete)


def complete_profile(
    ctx: click.Context, param: click.Parameter, incomplete: str
) -> list[CompletionItem]:
    return name_or_file(shipped_names(profiles_dir()), incomplete)
