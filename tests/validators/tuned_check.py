"""Load tuned profiles with tuned's own loader, without the daemon (run by /usr/bin/python3).

    /usr/bin/python3 tuned_check.py ETC_TUNED:PROFILE...

ETC_TUNED stands in for /etc/tuned (a bundle's profiles); /usr/lib/tuned resolves include=.
For each profile this uses the daemon's code path up to the plugins: tuned.profiles.Loader
(INI parsing, include= resolution, merging, variable expansion), the plugin repository (a unit's
type must be a real plugin) and each plugin's option table (``_get_config_options``, the table the
daemon warns "Unknown option" from). Plugins with dynamic options (sysctl, sysfs, ...) accept any
name, as in the daemon; bootloader ``cmdline*`` keys likewise. Prints one JSON object:
{"ETC_TUNED:PROFILE": {"problems": [...], "sysctl": {key: value of [sysctl] units, includes
merged}, "layered": {BASE: {key: value}}}}: "layered" is the profile loaded after each of
LAYERED_ON, as install.sh selects it (active_profile "BASE PROFILE"; the later one wins).
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
# Bases an image may have selected before install.sh layers the bundle on them: RHEL's server
# default and the shipped profiles whose [sysctl] or [vm] a GPU server is likely to run.
LAYERED_ON = ("throughput-performance", "latency-performance", "hpc-compute", "virtual-guest")


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


def load(etc_tuned: str, names: list[str]):
    locator = Locator([SYSTEM_PROFILES, etc_tuned])
    loader = Loader(locator, Factory(), Merger(), GlobalConfig(), Variables())
    return loader.load(names)


def sysctl_values(profile) -> dict[str, str]:
    values: dict[str, str] = {}
    for unit in profile.units.values():
        if unit.type == "sysctl" and unit.enabled:
            values |= {key: str(value) for key, value in unit.options.items()}
    return values


def check_profile(etc_tuned: str, name: str) -> tuple[list[str], dict[str, str]]:
    try:
        profile = load(etc_tuned, [name])
    except InvalidProfileException as error:
        return [f"{name}: tuned: InvalidProfileException: {error}"], {}
    problems: list[str] = []
    for unit_name, unit in profile.units.items():
        problems += unit_problems(name, unit_name, unit)
    unknown_main = set(profile.options) - {"summary", "description"}
    problems += [
        f"{name}: [{consts.PLUGIN_MAIN_UNIT_NAME}]: unknown option '{option}'"
        for option in sorted(unknown_main)
    ]
    return problems, sysctl_values(profile)


def layered(etc_tuned: str, name: str) -> dict[str, dict[str, str]]:
    found = {}
    for base in LAYERED_ON:
        try:
            found[base] = sysctl_values(load(etc_tuned, [base, name]))
        except InvalidProfileException:
            continue  # not shipped by this tuned
    return found


def main(argv: list[str]) -> int:
    report = {}
    for argument in argv[1:]:
        etc_tuned, name = argument.rsplit(":", 1)
        problems, values = check_profile(etc_tuned, name)
        report[argument] = {
            "problems": problems,
            "sysctl": values,
            "layered": layered(etc_tuned, name) if not problems else {},
        }
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
