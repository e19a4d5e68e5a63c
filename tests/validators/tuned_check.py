"""Load tuned profiles with tuned's own loader, without the daemon (run by /usr/bin/python3).

    /usr/bin/python3 tuned_check.py [--tree TUNED_TREE] [--machines JSON] ETC_TUNED:PROFILE...

ETC_TUNED stands in for /etc/tuned (a bundle's profiles); /usr/lib/tuned resolves include=.
With ``--tree``, another tuned's own code and profiles are used instead of the installed ones: a
source tree of github.com/redhat-performance/tuned at a tag (its tuned/ and profiles/), so a
bundle is judged by the tuned a distribution ships (RHEL 9.8: 2.27) and not only Debian's 2.20.
For each profile this uses the daemon's code path up to the plugins: tuned.profiles.Loader
(INI parsing, include= resolution, merging, variable expansion), the plugin repository (a unit's
type must be a real plugin) and each plugin's option table (``_get_config_options``, the table the
daemon warns "Unknown option" from). Plugins with dynamic options (sysctl, sysfs, ...) accept any
name, as in the daemon; bootloader ``cmdline*`` keys likewise. Prints one JSON object:
{"ETC_TUNED:PROFILE": {"problems": [...], "sysctl": {key: value of [sysctl] units, includes
merged}, "layered": {BASE: {key: value}}}}: "layered" is the profile loaded after each of
LAYERED_ON, as install.sh selects it (active_profile "BASE PROFILE"; the later one wins).
``--machines``: {ETC_TUNED: {"uname": TEXT, "cpuinfo": TEXT}} for the machine each bundle is
for, a value null where it is not known; the values are of the units tuned would create there
(unit_runs_on). Profile expansion can run ${f:exec:...}: the caller runs this as nobody.
"""

from __future__ import annotations

import importlib
import inspect
import json
import re
import sys

SYSTEM_PROFILES = "/usr/lib/tuned"
if sys.argv[1:2] == ["--tree"]:  # before tuned is imported: that tree's code, not the package's
    sys.path.insert(0, sys.argv[2])
    SYSTEM_PROFILES = f"{sys.argv[2]}/profiles"
    del sys.argv[1:3]
MACHINES: dict[str, dict[str, str | None]] = {}
if sys.argv[1:2] == ["--machines"]:
    MACHINES = json.loads(sys.argv[2])
    del sys.argv[1:3]

import tuned.plugins.base  # noqa: E402
from tuned import consts  # noqa: E402
from tuned.plugins.repository import Repository  # noqa: E402
from tuned.profiles.exceptions import InvalidProfileException  # noqa: E402
from tuned.profiles.factory import Factory  # noqa: E402
from tuned.profiles.loader import Loader  # noqa: E402
from tuned.profiles.locator import Locator  # noqa: E402
from tuned.profiles.merger import Merger  # noqa: E402
from tuned.profiles.variables import Variables  # noqa: E402
from tuned.utils.global_config import GlobalConfig  # noqa: E402

# The vm plugin's dirty-limit options (tuned 2.25+, plugin_vm.py) write these sysctls; a
# bytes option given in % writes the ratio (2.26+).
VM_DIRTY = {
    "dirty_ratio": "vm.dirty_ratio",
    "dirty_background_ratio": "vm.dirty_background_ratio",
    "dirty_bytes": "vm.dirty_bytes",
    "dirty_background_bytes": "vm.dirty_background_bytes",
}
# Bases an image may have selected before install.sh layers the bundle on them: RHEL's server
# default and the shipped profiles whose [sysctl] or [vm] a GPU server is likely to run.
LAYERED_ON = ("throughput-performance", "latency-performance", "hpc-compute", "virtual-guest")


def plugin_class(name: str) -> type[tuned.plugins.base.Plugin] | None:
    repository = Repository(None, None, None, None, None, None, None, None)
    try:
        if hasattr(repository, "load_plugin"):  # tuned 2.20
            return repository.load_plugin(name)
        # later tuned: the class of tuned/plugins/plugin_<name>.py
        module = importlib.import_module(f"tuned.plugins.plugin_{name}")
    except ImportError:
        return None
    found = [
        cls
        for _, cls in inspect.getmembers(module, inspect.isclass)
        if issubclass(cls, tuned.plugins.base.Plugin) and cls.__module__ == module.__name__
    ]
    return found[0] if found else None


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


def unit_runs_on(unit, machine: dict[str, str | None]) -> bool:
    """Whether tuned creates this unit's instance on ``machine``, as tuned/units/manager.py
    create() decides it (2.20, 2.25.1, 2.27.0 alike): a unit with a cpuinfo_regex or
    uname_regex (throughput-performance's [sysctl.thunderx]) runs only where re.search(regex,
    text, re.MULTILINE) finds it in /proc/cpuinfo and in " ".join(os.uname()). A text the
    caller does not know (null) keeps the conservative judgement: that gate counts as passed."""
    gates = (("cpuinfo", unit.cpuinfo_regex), ("uname", unit.uname_regex))
    return all(
        regex is None
        or machine.get(text) is None
        or re.search(regex, machine[text], re.MULTILINE) is not None
        for text, regex in gates
    )


def sysctl_values(profile, machine: dict[str, str | None] | None = None) -> dict[str, str]:
    """The sysctls the profile writes on ``machine`` (None: not known, every unit counts): its
    [sysctl] units, then its [vm] dirty-limit options, which win where both set a key
    (tuned-adm verify checks both; a [vm] value is the one the bundle cannot restate, so it is
    the one to judge)."""
    units = [
        unit
        for unit in profile.units.values()
        if unit.enabled and unit_runs_on(unit, machine or {})
    ]
    values: dict[str, str] = {}
    for unit in units:
        if unit.type == "sysctl":
            values |= {key: str(value) for key, value in unit.options.items()}
    for unit in units:
        if unit.type == "vm":
            for option, value in unit.options.items():
                text = str(value).strip()
                if option in VM_DIRTY and text.endswith("%"):
                    values[VM_DIRTY[option.replace("bytes", "ratio")]] = text.rstrip("%")
                elif option in VM_DIRTY:
                    values[VM_DIRTY[option]] = text
    return values


def check_profile(
    etc_tuned: str, name: str, machine: dict[str, str | None]
) -> tuple[list[str], dict[str, str]]:
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
    return problems, sysctl_values(profile, machine)


def layered(etc_tuned: str, name: str, machine: dict[str, str | None]) -> dict[str, dict[str, str]]:
    found = {}
    for base in LAYERED_ON:
        try:
            found[base] = sysctl_values(load(etc_tuned, [base, name]), machine)
        except InvalidProfileException:
            continue  # not shipped by this tuned
    return found


def main(argv: list[str]) -> int:
    report = {}
    for argument in argv[1:]:
        etc_tuned, name = argument.rsplit(":", 1)
        machine = MACHINES.get(etc_tuned, {})
        problems, values = check_profile(etc_tuned, name, machine)
        report[argument] = {
            "problems": problems,
            "sysctl": values,
            "layered": layered(etc_tuned, name, machine) if not problems else {},
        }
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
