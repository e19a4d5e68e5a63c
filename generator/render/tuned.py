"""The bundle's tuned profile: the plan's tuned settings, and the plan's values restated for
every key a shipped tuned profile sets.

install.sh layers the bundle's profile on whatever the image already selected (RHEL's
throughput-performance, a vendor profile), and tuned merges an included or earlier profile's
sections into the later one option by option (redhat-performance/tuned, tuned/profiles/
merger.py). So a base's ``[sysctl] vm.swappiness=10`` stays in the merged profile: tuned writes
it at every start, ``reapply_sysctl`` then writes sysctl.d's value back, and ``tuned-adm verify``
compares the live value with the base's and fails. Restating the plan's value under the same
key makes the merged profile agree with sysctl.d.

Which base is selected is known only when install.sh runs in the image, so the restated keys are
those of every profile tuned ships, in every tuned version a target distribution ships
(``hardware_db/tuned/*.yaml``: Debian 12's tuned 2.20 package, and the upstream tags RHEL 8.10's
and RHEL 9's minor releases ship, each read by tests/validators/make_tuned_profiles.py): the
bundle stays one file for every base. A vendor profile outside those tables (NVIDIA's) is not
known here; EXPLAIN's tuned line says so.

From tuned 2.25 (RHEL 9.6 on) the shipped profiles set the dirty limits in ``[vm]``
(``dirty_ratio = 40``; from 2.26 ``dirty_bytes = 40%``), options the vm plugin writes to the same
/proc/sys/vm files as sysctl.d. Those options do not exist in older tuned (2.20's vm plugin would
warn "Unknown option"), so they are not restated: the bundle's ``[vm]`` drops them
(``drop=``, tuned/profiles/unit.py and merger.py since 2.13) wherever the plan sets that limit,
and sysctl.d's value, restated in ``[sysctl]``, is the one left.
"""

from __future__ import annotations

import functools
import json
import sys
from pathlib import Path

import yaml

from generator import __version__
from generator.cache import files_key, json_entry, read_entry, store_entry
from generator.model.setting import Plan, Setting
from generator.paths import cache_dir, hardware_db_dir
from generator.render.formats import unique_in_order

# tuned's vm plugin option for /sys/kernel/mm/transparent_hugepage/enabled, and the kernel
# argument the plan sets it with (tuned skips it when the command line sets THP: plugin_vm.py)
TUNED_THP_OPTION = "transparent_hugepages"
THP_KERNEL_ARG = "transparent_hugepage"
# A bytes limit and its ratio are one limit: writing one makes the other read 0
# (Documentation/admin-guide/sysctl/vm.rst, dirty_bytes and dirty_background_bytes). A base's
# vm.dirty_ratio=40 would replace the plan's vm.dirty_bytes at every tuned start, and verify
# would then expect 40 where sysctl.d's bytes leave 0: the ratio is restated as 0, which
# changes nothing while the bytes limit is set. (A plan ratio against a base's bytes is not
# restated: dirty_bytes refuses 0.)
RATIO_OF_BYTES = {
    "vm.dirty_bytes": "vm.dirty_ratio",
    "vm.dirty_background_bytes": "vm.dirty_background_ratio",
}


# The vm plugin's options for one dirty limit (tuned 2.25+, plugin_vm.py), by the sysctl pair they
# write: either option of a pair replaces the plan's value of either key.
VM_DIRTY_OPTIONS = {
    "vm.dirty_ratio": ("dirty_bytes", "dirty_ratio"),
    "vm.dirty_bytes": ("dirty_bytes", "dirty_ratio"),
    "vm.dirty_background_ratio": ("dirty_background_bytes", "dirty_background_ratio"),
    "vm.dirty_background_bytes": ("dirty_background_bytes", "dirty_background_ratio"),
}


def profiles_files() -> list[Path]:
    """Every tuned version's table: hardware_db/tuned/*.yaml."""
    return sorted((hardware_db_dir() / "tuned").glob("*.yaml"))


# libyaml's safe loader where PyYAML has it, as for the inputs (generator/inputs/yamlio.py):
# the pure-Python one took ~16 ms of every gen for this 8 KB table, libyaml's ~1.5 ms.
TABLE_LOADER: type = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


# ``(section, option)`` -> the shipped profiles that set it
Options = dict[tuple[str, str], tuple[str, ...]]

# Parsing the four tables (38 KB of YAML) took ~8.5 ms of every cold gen's CPU, with libyaml;
# their result is kept beside the validated catalog (generator/cache.py) as JSON: ~0.7 ms with
# the key's digest of the tables, and, unlike a pickle, loading it runs nothing someone else wrote.
CACHE_PATH = cache_dir("__catalog_cache__") / "tuned.json"
CACHE_FORMAT = 1


def parsed_options(files: list[Path], loader: type = TABLE_LOADER) -> Options:
    """``(section, option)`` -> the shipped profiles that set it, in any of the tables ``files``."""
    found: dict[tuple[str, str], set[str]] = {}
    for path in files:
        # shipped data, not an input: render does not import generator.inputs (test_architecture)
        text = path.read_text(encoding="utf-8")
        table = yaml.load(text, Loader=loader)  # noqa: S506 - a safe loader (SafeLoader or libyaml's)
        for name, profile in table["profiles"].items():
            for section in ("sysctl", "vm", "cpu"):
                for option in (profile or {}).get(section) or {}:
                    found.setdefault((section, str(option)), set()).add(str(name))
    return {key: tuple(sorted(names)) for key, names in sorted(found.items())}


def options_key(files: list[Path]) -> str:
    """The tables' names and bytes, this module (which reads them) and the versions involved."""
    salt = f"{CACHE_FORMAT}\0{__version__}\0{yaml.__version__}\0{sys.version}"
    return files_key(salt, [Path(__file__), *files])


def cached_options(files: list[Path], cache: Path) -> Options:
    """parsed_options(files), from ``cache`` when it was stored for these tables and this code."""
    key = options_key(files)
    stored = options_from_entry(read_entry(cache), key)
    if stored is not None:
        return stored
    options = parsed_options(files)
    rows = [[section, option, list(names)] for (section, option), names in options.items()]
    store_entry(cache, json.dumps({"key": key, "options": rows}).encode())
    return options


def options_from_entry(entry: bytes | None, key: str) -> Options | None:
    """The options a cache entry holds, or None: none, another key, or not what we write (a
    list of [section, option, [profile...]] rows of text)."""
    rows = json_entry(entry, key, "options")
    if not isinstance(rows, list) or not all(_is_row(row) for row in rows):
        return None
    return {(section, option): tuple(names) for section, option, names in rows}


def _is_row(row: object) -> bool:
    return (
        isinstance(row, list)
        and len(row) == 3
        and isinstance(row[0], str)
        and isinstance(row[1], str)
        and isinstance(row[2], list)
        and all(isinstance(name, str) for name in row[2])
    )


@functools.cache
def shipped_options() -> Options:
    """``(section, option)`` -> the shipped profiles that set it, in any tuned table."""
    return cached_options(profiles_files(), CACHE_PATH)


def _named(profiles: tuple[str, ...]) -> str:
    return ("profile " if len(profiles) == 1 else "profiles ") + ", ".join(profiles)


def restated(plan: Plan) -> list[Setting]:
    """The plan's values for the options a shipped tuned profile sets and the plan's own tuned
    settings do not: sysctl.d's values in [sysctl], the THP boot argument's in [vm]."""
    shipped = shipped_options()
    own = {s.key for s in plan.of_kind("tuned")}
    wanted = [("sysctl", s.key, s) for s in plan.of_kind("sysctl")]
    wanted += [
        ("vm", TUNED_THP_OPTION, s) for s in plan.of_kind("kernel-arg") if s.key == THP_KERNEL_ARG
    ]
    lines = []
    for section, option, source in wanted:
        profiles = shipped.get((section, option))
        if profiles is None or f"{section}.{option}" in own:
            continue
        where = "sysctl.d" if section == "sysctl" else "the kernel command line"
        reason = (
            f"restates {where}'s value: tuned's shipped {_named(profiles)} "
            f"{'sets' if len(profiles) == 1 else 'set'} {option}, and a profile layered on "
            "one of them inherits it; tuned-adm verify checks the merged value"
        )
        lines.append(Setting("tuned", f"{section}.{option}", source.value, reason, source.rule))
    return lines + _ratios_of_bytes(plan, shipped) + _vm_dirty_drops(plan, shipped)


def _vm_dirty_drops(plan: Plan, shipped: Options) -> list[Setting]:
    """``[vm] drop=`` of the base's dirty-limit options for each limit the plan sets."""
    dropped: list[str] = []
    profiles: set[str] = set()
    first: Setting | None = None
    for s in plan.of_kind("sysctl"):
        for option in VM_DIRTY_OPTIONS.get(s.key, ()):
            by = shipped.get(("vm", option))
            if by and option not in dropped:
                dropped.append(option)
                profiles.update(by)
                first = first or s
    if first is None:
        return []
    reason = (
        f"sysctl.d sets the dirty limits; tuned 2.25+'s shipped {_named(tuple(sorted(profiles)))} "
        "set them in [vm], which would replace sysctl.d's at every tuned start: a profile "
        "layered on one of them drops those options (older tuned has none to drop)"
    )
    return [Setting("tuned", "vm.drop", ",".join(sorted(dropped)), reason, first.rule)]


def _ratios_of_bytes(plan: Plan, shipped: Options) -> list[Setting]:
    lines = []
    planned = {s.key for s in plan.of_kind("sysctl")}
    for s in plan.of_kind("sysctl"):
        ratio = RATIO_OF_BYTES.get(s.key)
        profiles = shipped.get(("sysctl", ratio)) if ratio else None
        if ratio is None or profiles is None or ratio in planned:
            continue
        reason = (
            f"sysctl.d sets {s.key}, so {ratio} reads 0 (vm.rst: one of the pair at a time); "
            f"tuned's shipped {_named(profiles)} set {ratio}, which would replace the bytes "
            "limit: 0 here keeps it and agrees with tuned-adm verify"
        )
        lines.append(Setting("tuned", f"sysctl.{ratio}", "0", reason, s.rule))
    return lines


def tuned_sections(plan: Plan) -> list[tuple[str, list[tuple[str, Setting]]]]:
    """``[(section, [(option, setting)…])…]`` with [main] first, then sections in plan order."""
    settings = [*plan.of_kind("tuned"), *restated(plan)]
    sections = unique_in_order(s.key.split(".", 1)[0] for s in settings)
    sections.sort(key=lambda name: name != "main")
    return [
        (name, [(s.key.split(".", 1)[1], s) for s in settings if s.key.split(".", 1)[0] == name])
        for name in sections
    ]
