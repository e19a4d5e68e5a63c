"""Load tuned profiles with tuned's own loader, without the daemon (run by /usr/bin/python3).

    /usr/bin/python3 tuned_check.py ETC_TUNED:PROFILE...

ETC_TUNED stands in for /etc/tuned (a bundle's profiles); /usr/lib/tuned resolves include=.
For each profile this uses the daemon's code path up to the plugins: tuned.profiles.Loader
(INI parsing, include= resolution, merging, variable expansion), the plugin repository (a unit's
type must be a real plugin) and each plugin's option table (``_get_config_options``, the table the
daemon warns "Unknown option" from). Plugins with dynamic options (sysctl, sysfs, ...) accept any
name, as in the daemon; bootloader ``cmdline*`` keys likewise. Prints one JSON object:
{"ETC_TUNED:PROFILE": {"problems": [...], "sysctl": [keys of [sysctl] units, includes merged]}}.
Profile expansion can run ${f:exec:...}: the caller runs this as nobody.
"""

from __future__ import annotations

import inspect
import json
import sys

import tuned.plugins.base
from tuned import consts
from tuned.plugins.repository import Repository
from tuned.profiles.exceptions import InvalidProfileException
from tuned.profiles.factory import Factory
from tuned.profiles.loader import Loader
from tuned.profiles.locator import Locator
from tuned.profiles.merger import Merger
from tuned.profiles.variables import Variables
from tuned.utils.global_config import GlobalConfig

SYSTEM_PROFILES = "/usr/lib/tuned"


def plugin_class(name: str) -> type[tuned.plugins.base.Plugin] | None:
    try:
        return Repository(None, None, None, None, None, None, None, None).load_plugin(name)
    except ImportError:
        return None


def has_dynamic_options(cls: type[tuned.plugins.base.Plugin]) -> bool:
    return any(
        "_has_dynamic_options = True" in inspect.getsource(klass)
        for klass in cls.__mro__
        if issubclass(klass, tuned.plugins.base.Plugin)
    )


def unit_problems(profile_name: str, unit_name: str, unit) -> list[str]:
    cls = plugin_class(unit.type)
    if cls is None:
        return [f"{profile_name}: unit [{unit_name}]: no tuned plugin named '{unit.type}'"]
    if has_dynamic_options(cls):
        return []
    known = cls._get_config_options()
    return [
        f"{profile_name}: unit [{unit_name}] (plugin {unit.type}): unknown option '{option}'"
        for option in unit.options
        if option not in known and not (unit.type == "bootloader" and option.startswith("cmdline"))
    ]


def check_profile(etc_tuned: str, name: str) -> tuple[list[str], list[str]]:
    locator = Locator([SYSTEM_PROFILES, etc_tuned])
    loader = Loader(locator, Factory(), Merger(), GlobalConfig(), Variables())
    try:
        profile = loader.load([name])
    except InvalidProfileException as error:
        return [f"{name}: tuned: InvalidProfileException: {error}"], []
    problems: list[str] = []
    sysctl_keys: list[str] = []
    for unit_name, unit in profile.units.items():
        problems += unit_problems(name, unit_name, unit)
        if unit.type == "sysctl" and unit.enabled:
            sysctl_keys += list(unit.options)
    unknown_main = set(profile.options) - {"summary", "description"}
    problems += [
        f"{name}: [{consts.PLUGIN_MAIN_UNIT_NAME}]: unknown option '{option}'"
        for option in sorted(unknown_main)
    ]
    return problems, sysctl_keys


def main(argv: list[str]) -> int:
    report = {}
    for argument in argv[1:]:
        etc_tuned, name = argument.rsplit(":", 1)
        problems, keys = check_profile(etc_tuned, name)
        report[argument] = {"problems": problems, "sysctl": keys}
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
