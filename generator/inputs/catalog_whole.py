"""A site catalog validated whole, once: every entry, and nothing else in it.

A run reads a site catalog lazily (a kind the first time something asks for it, a reference
system only when a hardware file names it), so an entry no run looks at could be broken, or a
file could sit where no reader lists it (``gpus/H100.yml``, a subdirectory, a link), and every
run still pass. The fleet gate (`gen matrix --check`) and `gen check` call ``check_site_whole``
first: each kind is loaded and each site system resolved as a hardware description, so the
first broken entry is bad input (exit 2) whichever combinations are checked.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from generator.errors import InputError, Problem
from generator.inputs.catalog import Catalog
from generator.paths import files_ending
from generator.textsafe import printable

# The folders of a catalog (hardware_db/'s layout); each holds <key>.yaml files only.
KINDS = ("gpus", "nics", "cpus", "systems", "distros")


def unexpected_entries(site: Path) -> list[Problem]:
    """What a site catalog holds that no reader reads: a top-level folder that is not a kind,
    a link anywhere (never followed), and in a kind's folder anything but a regular *.yaml file
    (hidden ones included). Regular files beside the kinds (a README) are the site's own."""
    problems: list[Problem] = []
    with os.scandir(site) as entries:
        top = sorted((entry.name, entry.is_dir(follow_symlinks=False), entry) for entry in entries)
    for name, is_dir, entry in top:
        where = str(site / printable(name))
        if entry.is_symlink():
            problems.append(Problem(where, "", "a symbolic link in a catalog: not followed"))
        elif is_dir and name not in KINDS:
            problems.append(Problem(where, "", f"not a folder of a catalog ({', '.join(KINDS)})"))
        elif is_dir:
            problems += _kind_entries(site / name)
    return problems


def _kind_entries(folder: Path) -> list[Problem]:
    problems = []
    with os.scandir(folder) as entries:
        for entry in sorted(entries, key=lambda e: e.name):
            mode = entry.stat(follow_symlinks=False).st_mode
            if (
                entry.name.endswith(".yaml")
                and not entry.name.startswith(".")
                and stat.S_ISREG(mode)
            ):
                continue
            why = (
                "a symbolic link in a catalog: not followed"
                if stat.S_ISLNK(mode)
                else "not a <key>.yaml file: no reader of the catalog reads it"
            )
            problems.append(Problem(str(folder / printable(entry.name)), "", why))
    return problems


def check_site_whole(catalog: Catalog) -> None:
    """Every entry of ``catalog``'s site catalog validated (InputError at the first broken
    one), and nothing else in it; nothing to do without a site catalog."""
    site = catalog.site
    if site is None:
        return
    problems = unexpected_entries(site)
    if problems:
        raise InputError(problems)
    _ = catalog.gpus, catalog.nics, catalog.cpus  # each validated as it is loaded
    if files_ending(site / "distros", ".yaml"):
        _ = catalog.distros
    from generator.inputs.hardware import load_facts

    for path in files_ending(site / "systems", ".yaml"):
        load_facts(path.stem, catalog)  # the system as a hardware file naming it is read
