"""Compare a snapshot of a running machine (see ``generator.verify.snapshot``) with a bundle's plan.

One small function per setting kind reads what the collector recorded and says ok, differs,
missing, or not applicable here with the reason. What a kind measures:

- ``sysctl``: /proc/sys; ``kernel-arg``: /proc/cmdline, then its effect where the kernel shows it
  (module parameters, THP mode, "Unknown kernel command line parameters");
- ``limit``: /proc/self/limits inside a PAM session (runuser) of the domain's user, ``*`` as nobody;
- ``systemd-manager``: ``systemctl show`` of the manager; ``modprobe``: ``modprobe --showconfig``
  and /proc/modules; ``module-load``: /proc/modules; ``sysfs``: the file, ``[selected]`` value;
- ``udev``: the scheduler of every disk of that kind that the bundle's rules match;
- ``tuned``: the active profile, the live value where tuned's option has one, else
  ``tuned-adm verify``;
- ``gpu``: ``nvidia-smi --query-gpu``, and ``nvidia-smi mig -lgi`` for a MIG layout; ``irq``:
  smp_affinity_list of the interface's MSI IRQs;
- ``service``: ``systemctl is-enabled``, and ``is-active`` for a daemon of the bundle's own;
- ``unit-dropin``: ``systemctl show`` of the runtime's unit, then its process's /proc/<pid>/limits;
  a daemon's ExecStart: the arguments of its running process (/proc/<pid>/cmdline); WantedBy:
  ``systemctl is-enabled``;
  ``containerd``: ``containerd config dump``; ``docker``: ``docker info``'s default runtime;
  ``kubelet``: kubelet started with ``--config-dir`` on the drop-in directory, then the
  configuration it merged from the files it read and its flags (its /configz, rebuilt).
"""

from __future__ import annotations

import fnmatch
import json
import re
import tomllib
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from fnmatch import fnmatchcase
from functools import cache

import yaml

from generator.errors import InputError
from generator.foreign import YAML_VALUE_ERRORS, read_foreign
from generator.model.cpulist import expand_cpus
from generator.model.kinds import KIND_SPECS, TOML_KEY_SEGMENT
from generator.model.layout import (
    ACS_UNIT,
    CONTAINERD_DROPIN,
    DOCKER_DAEMON_JSON,
    GPU_UNIT,
    KUBELET_DROPIN_DIR,
    KUBELET_UNIT,
    MPS_UNIT,
    NCCL_CONF,
)
from generator.model.probes import (
    GOVERNOR,
    THP_DEFRAG,
    THP_ENABLED,
    acs_word,
    limit_user,
    module_param,
)
from generator.model.setting import Setting
from generator.model.vendors import NVIDIA
from generator.paths import hardware_db_dir
from generator.verify.snapshot import TIMED_OUT, Snapshot
from generator.verify.udevmatch import Disk, assigned_scheduler, disk_kind, parse_rules, selected
from generator.verify.verdicts import Bundle, Check, Verdict, check_of

OK, DIFFERS, MISSING, NA = Verdict.OK, Verdict.DIFFERS, Verdict.MISSING, Verdict.NOT_APPLICABLE
NOT_JUDGED = Verdict.NOT_JUDGED
NOT_COLLECTED = "not in the snapshot (was it collected with this bundle's collector?)"

# limits.conf item -> (/proc/self/limits row, units of limits.conf per unit of /proc)
LIMIT_ITEMS: dict[str, tuple[str, int]] = {
    "nofile": ("Max open files", 1),
    "memlock": ("Max locked memory", 1024),
    "nproc": ("Max processes", 1),
    "stack": ("Max stack size", 1024),
    "core": ("Max core file size", 1024),
    "data": ("Max data size", 1024),
    "fsize": ("Max file size", 1024),
    "as": ("Max address space", 1024),
    "rss": ("Max resident set", 1024),
    "cpu": ("Max cpu time", 60),
    "locks": ("Max file locks", 1),
    "sigpending": ("Max pending signals", 1),
    "msgqueue": ("Max msgqueue size", 1),
    "rtprio": ("Max realtime priority", 1),
    "nice": ("Max nice priority", 1),
}
SIZE_SUFFIXES = {"K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4, "P": 1024**5, "E": 1024**6}
TRUE_WORDS = {"1", "y", "yes", "true", "on", "enabled", "enable"}
FALSE_WORDS = {"0", "n", "no", "false", "off", "disabled", "disable"}
GPU_FIELDS = (
    "index",
    "pci.bus_id",
    "name",
    "persistence_mode",
    "ecc.mode.current",
    "ecc.mode.pending",
    "compute_mode",
    "power.limit",
    "power.default_limit",
    "clocks.gr",
    "clocks.max.gr",
    "mig.mode.current",
    "mig.mode.pending",
)


def normal(value: str) -> str:
    """Booleans as 1/0 and whitespace squeezed.

    So ``Y`` == ``1`` and ``4096\\t87380`` == ``4096 87380``.
    """
    text = " ".join(value.split())
    if text.lower() in TRUE_WORDS:
        return "1"
    if text.lower() in FALSE_WORDS:
        return "0"
    return text


def same(expected: str, actual: str) -> bool:
    return normal(expected) == normal(actual)


@dataclass
class Live:
    """The snapshot, with the parts several kinds read parsed once."""

    snapshot: Snapshot
    bundle: Bundle
    cmdline: dict[str, str | None] = field(default_factory=dict)
    disks: list[Disk] = field(default_factory=list)

    @classmethod
    def of(cls, snapshot: Snapshot, bundle: Bundle) -> Live:
        live = cls(snapshot, bundle, parse_cmdline(snapshot.value("cmdline", "-") or ""))
        attrs: dict[str, dict[str, str]] = {}
        for key, value in snapshot.section("block"):
            name, _, attr = key.partition(":")
            attrs.setdefault(name, {})[attr] = value
        live.disks = [Disk(name, values) for name, values in attrs.items()]
        return live


def arg_name(name: str) -> str:
    return name.replace("-", "_")


# Arguments whose value is a comma-separated list (install.sh list_keys, which cites the readers):
# kmod (libkmod-config.c kcmdline_parse_result) and dracut (parse-kernel.sh) read every
# occurrence of these two; the kernel keeps the last module_blacklist (a charp core_param).
ACCUMULATED_LISTS = frozenset({"modprobe.blacklist", "rd.driver.blacklist"})
LIST_ARGS = ACCUMULATED_LISTS | {"module_blacklist"}


def parse_cmdline(text: str) -> dict[str, str | None]:
    """Kernel parameters by name (``-`` and ``_`` alike, as the kernel compares them); last wins,
    except the lists their readers gather from every occurrence (ACCUMULATED_LISTS), joined."""
    found: dict[str, str | None] = {}
    for token in re.findall(r'(?:[^\s"]|"[^"]*")+', text):
        if token == "--":  # noqa: S105 -- the end of the kernel's parameters, not a password
            break
        name, equals, value = token.replace('"', "").partition("=")
        before = found.get(arg_name(name))
        if equals and before and arg_name(name) in ACCUMULATED_LISTS:
            value = f"{before},{value}"
        found[arg_name(name)] = value if equals else None
    return found


def arg_value_holds(name: str, actual: str | None, wanted: str) -> bool:
    """The argument's value on a command line gives what the plan wants: the same value, or for a
    list argument every element of the plan's (an image's own elements are merged, not lost)."""
    if arg_name(name) in LIST_ARGS and actual is not None:
        return set(wanted.split(",")) <= set(actual.split(","))
    return (actual or "") == wanted


def check_sysctl(setting: Setting, live: Live) -> Check:
    actual = live.snapshot.value("sysctl", setting.key)
    if actual is None:
        return check_of(setting, "?", MISSING, NOT_COLLECTED)
    if actual == "!absent":
        return check_of(
            setting, "no such key", MISSING, "the running kernel has no /proc/sys entry for it"
        )
    return check_of(setting, actual, OK if same(setting.value, actual) else DIFFERS)


def kernel_arg_effect(setting: Setting, live: Live) -> str | None:
    """What differs in the kernel's own view of an argument on the command line, if anything."""
    unknown = " ".join(live.snapshot.values("kernel", "unknown-params"))
    if re.search(rf'(?<![\w.-]){re.escape(setting.key)}(=|\s|"|$)', unknown):
        return "the kernel does not know this parameter (it passed it on to init)"
    if setting.key == "transparent_hugepage":
        thp = live.snapshot.value("sysfs", THP_ENABLED)
        if thp and not thp.startswith("!") and selected(thp) != setting.value:
            return f"{THP_ENABLED} is {thp}"
    item = module_param(setting.key)
    param = live.snapshot.value("modparam", item) if item else None
    if (
        param is not None
        and not param.startswith("!")
        and setting.value
        and not same(setting.value, param)
    ):
        return f"/sys/module/{item.replace('/', '/parameters/', 1)} is {param}" if item else None
    return None


def check_kernel_arg(setting: Setting, live: Live) -> Check:
    if not live.cmdline:
        return check_of(setting, "?", MISSING, NOT_COLLECTED)
    name = arg_name(setting.key)
    if name not in live.cmdline:
        return check_of(setting, "absent", MISSING, "not on /proc/cmdline")
    value = live.cmdline[name] or ""
    if not arg_value_holds(name, live.cmdline[name], setting.value):
        return check_of(
            setting, value or "(flag)", DIFFERS, "a different value is on /proc/cmdline"
        )
    effect = kernel_arg_effect(setting, live)
    return check_of(setting, value or "(set)", DIFFERS if effect else OK, effect or "")


def limit_values(rows: list[str], item: str) -> tuple[str, str] | None:
    name = LIMIT_ITEMS[item][0]
    for row in rows:
        if row[:26].strip() == name:
            return row[26:47].strip(), row[47:68].strip()
    return None


def expected_limit(item: str, value: str) -> str:
    if value in ("unlimited", "infinity", "-1"):
        return "unlimited"
    number = int(value)
    return str(20 - number) if item == "nice" else str(number * LIMIT_ITEMS[item][1])


def check_limit(setting: Setting, live: Live) -> Check:
    domain, kind, item = setting.key.split()
    user = limit_user(domain)
    if user is None:
        return check_of(
            setting, "-", NA, f"{domain} is a group: no single user's session to measure"
        )
    if item not in LIMIT_ITEMS:
        return check_of(
            setting, "-", NA, f"{item} is not a resource limit: pam_limits enforces it at login"
        )
    rows = live.snapshot.values("limits", user)
    if not rows:
        return check_of(setting, "?", MISSING, NOT_COLLECTED)
    if rows[0] == "!absent":
        return check_of(setting, "-", NA, f"no user {user} on this machine")
    if rows[0].startswith("!"):
        return check_of(
            setting, "-", NA, "the collector did not run as root (it measures through runuser)"
        )
    values = limit_values(rows, item)
    if values is None:
        return check_of(setting, "?", MISSING, f"/proc/self/limits has no {LIMIT_ITEMS[item][0]!r}")
    soft, hard = values
    expected = expected_limit(item, setting.value)
    measured = {"soft": [soft], "hard": [hard], "-": [soft, hard]}[kind]
    actual = f"soft {soft}, hard {hard} (session of {user})"
    return check_of(
        setting,
        actual,
        OK if all(v == expected for v in measured) else DIFFERS,
        ""
        if all(v == expected for v in measured)
        else f"expected {expected} in /proc/self/limits units",
    )


def limit_number(value: str) -> str:
    """A systemd resource value as the manager shows it: ``64M`` -> ``67108864``."""
    text = value.strip()
    if text in ("infinity", "unlimited"):
        return "infinity"
    found = re.fullmatch(r"(\d+)([KMGTPE]?)", text)
    if not found:
        return text
    return str(int(found.group(1)) * SIZE_SUFFIXES.get(found.group(2), 1))


def seconds(value: str) -> float | None:
    """A systemd time span (``90s``, ``1min 30s``, ``5``) in seconds."""
    units = {
        "us": 1e-6,
        "ms": 1e-3,
        "s": 1,
        "sec": 1,
        "min": 60,
        "m": 60,
        "h": 3600,
        "hr": 3600,
        "d": 86400,
    }
    parts = re.findall(r"(\d+(?:\.\d+)?)\s*([a-z]*)", value)
    if not parts or re.sub(r"[\d.\sa-z]", "", value):
        return None
    try:
        return sum(float(number) * units[unit or "s"] for number, unit in parts)
    except KeyError:
        return None


def check_manager(setting: Setting, live: Live) -> Check:
    actual = live.snapshot.value("manager", setting.key)
    if actual is None:
        return check_of(setting, "?", MISSING, NOT_COLLECTED)
    if actual.startswith("!"):
        return check_of(setting, "-", NA, "systemd is not the service manager here")
    if setting.key.startswith("DefaultLimit"):
        soft_text, _, hard_text = setting.value.partition(":")
        soft_actual = live.snapshot.value("manager", setting.key + "Soft") or "?"
        ok = (
            limit_number(hard_text or soft_text) == actual
            and limit_number(soft_text) == soft_actual
        )
        return check_of(setting, f"{soft_actual}:{actual}", OK if ok else DIFFERS)
    expected_s, actual_s = seconds(setting.value), seconds(actual)
    ok = same(setting.value, actual) or (expected_s is not None and expected_s == actual_s)
    return check_of(setting, actual, OK if ok else DIFFERS)


def module_state(live: Live, module: str) -> str | None:
    return live.snapshot.value("module", module)


def modprobe_lines(live: Live) -> list[str]:
    return [" ".join(value.split()) for _, value in live.snapshot.section("modprobe-config")]


def check_modprobe(setting: Setting, live: Live) -> Check:
    verb, module, *rest = setting.key.split()
    name = arg_name(module)
    state = module_state(live, module)
    if state is None:
        return check_of(setting, "?", MISSING, NOT_COLLECTED)
    lines = modprobe_lines(live)
    if verb == "blacklist":
        if f"blacklist {name}" not in lines:
            return check_of(
                setting, "not blacklisted", MISSING, "no such line in modprobe --showconfig"
            )
        if state == "loaded":
            return check_of(
                setting,
                "blacklisted, but loaded",
                DIFFERS,
                "something loaded it explicitly or as a dependency",
            )
        return check_of(
            setting, f"blacklisted, {'not installed' if state == 'absent' else 'not loaded'}", OK
        )
    param = rest[0]
    values = [
        word.partition("=")[2]
        for line in lines
        if line.startswith(f"options {name} ")
        for word in line.split()[2:]
        if word.partition("=")[0] == param
    ]
    if not values:
        return check_of(
            setting, "not configured", MISSING, f"no {param}= for {name} in modprobe --showconfig"
        )
    if values[-1] != setting.value:
        return check_of(setting, values[-1], DIFFERS, "modprobe --showconfig has another value")
    live_value = live.snapshot.value("modparam", f"{module}/{param}")
    if (
        state == "loaded"
        and live_value
        and not live_value.startswith("!")
        and not same(setting.value, live_value)
    ):
        return check_of(
            setting,
            live_value,
            DIFFERS,
            f"configured, but the loaded module has {param}={live_value}",
        )
    return check_of(
        setting, values[-1] + ("" if state == "loaded" else f" (configured; {name} not loaded)"), OK
    )


def check_module_load(setting: Setting, live: Live) -> Check:
    state = module_state(live, setting.key)
    kernel = live.snapshot.value("meta", "kernel") or "this kernel"
    if state is None:
        return check_of(setting, "?", MISSING, NOT_COLLECTED)
    if state == "absent":
        return check_of(
            setting,
            "not installed",
            NA,
            f"no module {setting.key} for {kernel} (its driver is not in this image)",
        )
    return check_of(setting, state, OK if state in ("loaded", "builtin") else DIFFERS)


def check_sysfs(setting: Setting, live: Live) -> Check:
    found = [
        (path, value)
        for path, value in live.snapshot.section("sysfs")
        if path == setting.key or fnmatchcase(path, setting.key)
    ]
    if not found:
        return check_of(setting, "?", MISSING, NOT_COLLECTED)
    present = [(path, value) for path, value in found if value != "!absent"]
    if not present:
        return check_of(
            setting,
            "no such file",
            NA,
            "this machine has no such sysfs file (driver or feature absent)",
        )
    wrong = [f"{path}: {value}" for path, value in present if selected(value) != setting.value]
    if wrong:
        return check_of(
            setting, "; ".join(wrong[:3]), DIFFERS, f"{len(wrong)} of {len(present)} files differ"
        )
    return check_of(
        setting, setting.value + (f" ({len(present)} files)" if len(present) > 1 else ""), OK
    )


def check_udev(setting: Setting, live: Live) -> Check:
    if not live.snapshot.has("block"):
        return check_of(setting, "no disks", NA, "the snapshot shows no disks with a scheduler")
    rules = parse_rules(live.bundle.udev_rules) if live.bundle.udev_rules is not None else None
    of_kind = [d for d in live.disks if disk_kind(d) == setting.key]
    matched = [d for d in of_kind if rules is None or assigned_scheduler(rules, d) is not None]
    if not matched:
        others = ", ".join(d.name for d in of_kind)
        why = f"{others}: not matched by the bundle's udev rules" if others else "none here"
        return check_of(setting, "-", NA, f"no {setting.key} disk the rules apply to ({why})")
    actual = {d.name: selected(d.attrs.get("queue/scheduler", "?")) for d in matched}
    text = ", ".join(f"{name}: {value}" for name, value in actual.items())
    return check_of(setting, text, OK if set(actual.values()) == {setting.value} else DIFFERS)


def check_tuned(setting: Setting, live: Live) -> Check:
    active = live.snapshot.value("tuned", "active")
    if active is None:
        return check_of(setting, "?", MISSING, NOT_COLLECTED)
    if active == "!absent" and live.snapshot.value("tuned", "verify") is None:
        return check_of(setting, "-", NA, "tuned is not installed here")
    wanted = live.bundle.tuned_profile
    # install.sh layers the bundle's profile on the selected one ("base goldtune-x"): tuned
    # merges them left to right, so the bundle's must be the last (tuned/profiles/merger.py).
    if wanted and active.split()[-1:] != [wanted]:
        return check_of(
            setting, f"profile {active}", DIFFERS, f"the last active tuned profile is not {wanted}"
        )
    section, _, option = setting.key.partition(".")
    if section == "sysctl":
        found = check_sysctl(Setting("sysctl", option, setting.value, "", setting.rule), live)
        return replace(found, kind="tuned", key=setting.key)
    path = {
        ("cpu", "governor"): GOVERNOR,
        ("vm", "transparent_hugepages"): THP_ENABLED,
        ("vm", "transparent_hugepage"): THP_ENABLED,
        ("vm", "transparent_hugepage.defrag"): THP_DEFRAG,
    }.get((section, option))
    if path:
        found = check_sysfs(Setting("sysfs", path, setting.value, "", setting.rule), live)
        return check_of(setting, found.actual, found.verdict, found.reason)
    verified = live.snapshot.value("tuned", "verify")
    if section == "main" or verified == "ok":
        return check_of(
            setting,
            f"profile {active} active" + (", tuned-adm verify ok" if verified == "ok" else ""),
            OK,
        )
    errors = "; ".join(
        value for _, value in live.snapshot.section("tuned-log") if " ERROR " in value
    )[:300]
    return check_of(setting, f"profile {active} active, tuned-adm verify failed", DIFFERS, errors)


def gpu_rows(live: Live) -> list[dict[str, str]]:
    rows = []
    for key, value in live.snapshot.section("gpu"):
        if key != "tool":
            parts = [part.strip() for part in value.split(",")]
            padded = parts + ["?"] * (len(GPU_FIELDS) - len(parts))
            # strict=False: fields past GPU_FIELDS (a newer nvidia-smi) are dropped, as before.
            rows.append(dict(zip(GPU_FIELDS, padded, strict=False)))
    return rows


def gpu_actual(action: str, row: dict[str, str], value: str) -> tuple[str, bool]:
    if action == "persistence":
        return row["persistence_mode"], normal(row["persistence_mode"]) == normal(value)
    if action == "ecc":
        current, pending = row["ecc.mode.current"], row["ecc.mode.pending"]
        return f"{current} (pending {pending})", normal(pending) == normal(value)
    if action == "mig":
        return row["mig.mode.current"], normal(row["mig.mode.current"]) == normal(value)
    if action == "compute-mode":
        return row["compute_mode"], row["compute_mode"].upper() == value.upper()
    if action == "power-limit":
        try:
            limit, default = float(row["power.limit"]), float(row["power.default_limit"])
        except ValueError:
            return row["power.limit"], False
        target = float(value[:-1]) * default / 100 if value.endswith("%") else float(value)
        return f"{row['power.limit']} W", abs(limit - target) <= 1
    return f"{row['clocks.gr']} MHz now (max {row['clocks.max.gr']})", True


def mig_layout_actual(row: dict[str, str], live: Live, planned: Counter[str]) -> tuple[str, bool]:
    """One GPU against the planned MIG instances: (what it has, whether that is the plan)."""
    mode = row["mig.mode.current"]
    if mode != "Enabled":
        return f"MIG {mode}", "N/A" in mode or "Supported" in mode
    found = live.snapshot.value("gpu-mig", row["index"])
    if found is None:
        return "instances not collected", False
    if found.startswith("!"):
        return found[1:], False
    names = Counter() if found == "none" else Counter(found.split(","))
    return found, names == planned


def check_mig_layout(setting: Setting, live: Live) -> Check:
    """Each MIG-capable GPU has exactly the planned GPU instances (GPUs without MIG: skipped)."""
    planned = Counter(setting.value.split(","))
    rows = gpu_rows(live)
    results = [(row["index"], *mig_layout_actual(row, live, planned)) for row in rows]
    text = "; ".join(f"GPU {index}: {actual}" for index, actual, _ in results)
    if not results:
        return check_of(setting, "no GPU rows", MISSING, NOT_COLLECTED)
    if all(ok for _, _, ok in results):
        return check_of(setting, text, OK)
    return check_of(
        setting, text, DIFFERS, f"{GPU_UNIT}'s log says why (a pending MIG mode, other instances)"
    )


def check_gpu(setting: Setting, live: Live) -> Check:
    tool = live.snapshot.value("gpu", "tool")
    if tool is None:
        return check_of(setting, "?", MISSING, NOT_COLLECTED)
    if tool == "!absent":
        return check_of(
            setting, "no GPU", NA, "no NVIDIA GPU here (nvidia-smi is absent or lists none)"
        )
    if tool.startswith(TIMED_OUT):
        return check_of(setting, tool[1:], DIFFERS, "nvidia-smi hung: nothing could be read")
    if tool.startswith("!"):
        return check_of(setting, tool[1:], DIFFERS, "nvidia-smi failed")
    if setting.key == "mig-layout":
        return check_mig_layout(setting, live)
    results = [gpu_actual(setting.key, row, setting.value) for row in gpu_rows(live)]
    if setting.key == "clocks":
        ok = own_unit_props(live, GPU_UNIT).get("Result") == "success"
        return check_of(
            setting,
            f"{'reset' if setting.value == 'reset' else 'locked'} by {GPU_UNIT}"
            if ok
            else "the GPU unit did not succeed",
            OK if ok else DIFFERS,
            "locked clocks are not readable through nvidia-smi --query-gpu",
        )
    text = "; ".join(f"GPU {i}: {actual}" for i, (actual, _) in enumerate(results))
    if results and all("N/A" in actual for actual, _ in results):
        return check_of(
            setting, text, NA, f"nvidia-smi reports {setting.key} as not supported by these GPUs"
        )
    return check_of(setting, text, OK if all(ok for _, ok in results) else DIFFERS)


def check_irq(setting: Setting, live: Live) -> Check:
    rows = live.snapshot.values("irq", setting.key)
    if not rows:
        return check_of(setting, "?", MISSING, NOT_COLLECTED)
    if rows[0] == "!absent":
        return check_of(
            setting, "no such interface", NA, f"no interface {setting.key} on this machine"
        )
    if rows[0] == "!no-msi-irqs":
        return check_of(setting, "no MSI IRQs", NA, f"{setting.key} has no MSI interrupts to pin")
    pairs = [row.split(" ", 1) for row in rows]
    if setting.value == "local":  # resolved at boot from the device: one list for every IRQ
        lists = {cpus for _, cpus in pairs}
        if len(lists) == 1 and not next(iter(lists)).startswith("!"):
            return check_of(setting, f"{next(iter(lists))} ({len(pairs)} IRQs, read at boot)", OK)
        return check_of(
            setting, "; ".join(sorted(lists)[:4]), DIFFERS, "IRQs not on one boot-time CPU list"
        )
    wanted = expand_cpus(setting.value)
    wrong = [
        f"IRQ {irq}: {cpus}"
        for irq, cpus in pairs
        if cpus.startswith("!") or expand_cpus(cpus) != wanted
    ]
    if wrong:
        return check_of(
            setting, "; ".join(wrong[:4]), DIFFERS, f"{len(wrong)} of {len(pairs)} IRQs elsewhere"
        )
    return check_of(setting, f"{setting.value} ({len(pairs)} IRQs)", OK)


# The bundle's own units that start a daemon: enabled is not enough, it must be running.
DAEMON_UNITS = frozenset({MPS_UNIT})

# What pcie-acs logs when it wrote nothing on purpose (templates/scripts/pcie-acs).
ACS_SKIPPED = ("virtual machine", "setpci (pciutils) is not installed", "no GPU of vendor")
# The ACS Control register's bits (PCIe base spec 7.7.11.3); pcie-acs clears them all (0000).
ACS_CONTROL_BITS = (
    "source validation",
    "translation blocking",
    "P2P request redirect",
    "P2P completion redirect",
    "upstream forwarding",
    "P2P egress control",
    "direct translated P2P",
)
_ACS_PORT = re.compile(
    r"([0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]) (root|downstream) ([0-9a-f]{4})"
)


def acs_bits(control: int) -> str:
    """``0x001d`` -> ``source validation, P2P request redirect, …``: the ACS controls on."""
    named = [name for bit, name in enumerate(ACS_CONTROL_BITS) if control >> bit & 1]
    return ", ".join(named + (["other bits"] if control >> len(ACS_CONTROL_BITS) else []))


def check_acs_registers(setting: Setting, rows: list[str]) -> Check:
    """The ACS Control register of each root and downstream port above the setting's devices,
    as the collector read it from config space: every bit pcie-acs cleared must still be clear."""
    if rows == ["!absent"]:
        return check_of(setting, "no such device", NA, f"no {setting.key} on this machine")
    if any(row.endswith("!unreadable") for row in rows):
        return check_of(
            setting,
            "config space unreadable",
            NOT_JUDGED,
            "the ACS registers lie beyond the first 64 bytes of a port's config space, which "
            "only root may read: run the collector as root",
        )
    ports = [found.groups() for row in rows if (found := _ACS_PORT.fullmatch(row))]
    # devices whose DMA the IOMMU translates: pcie-acs leaves ACS on above them, on purpose
    left_on = [row.split()[1] for row in rows if row.startswith("!iommu ") and len(row.split()) > 1]
    wrong = [
        f"{port}: {control} ({acs_bits(int(control, 16))})"
        for port, _, control in ports
        if int(control, 16)
    ]
    if wrong:
        return check_of(
            setting,
            "; ".join(wrong[:4]),
            DIFFERS,
            f"{len(wrong)} of {len(ports)} ports have ACS on again (set after {ACS_UNIT} ran: a "
            "hot-plug, a reset of the port, firmware?)",
        )
    left_on_note = (
        f"ACS left on above {', '.join(left_on)}: the IOMMU translates its DMA" if left_on else ""
    )
    if not ports:
        why = "no root or downstream port above it has ACS"
        return check_of(
            setting, "no port with ACS", NA, "; ".join(filter(None, [why, left_on_note]))
        )
    return check_of(
        setting,
        f"ACS control 0000 on {len(ports)} ports (read from config space)",
        OK,
        left_on_note,
    )


def check_pcie_acs(setting: Setting, live: Live) -> Check:
    """ACS off above the devices: the ACS Control registers the collector read from each port's
    config space; with an older collector, the ACS unit's run (its result and what it logged)."""
    props = own_unit_props(live, ACS_UNIT)
    rows = live.snapshot.values("acs", acs_word(setting.key))
    if not props and not rows:
        return check_of(setting, "?", MISSING, NOT_COLLECTED)
    log = live.snapshot.values("own-unit-log", ACS_UNIT)
    skipped = next((line for line in log for why in ACS_SKIPPED if why in line), None)
    if skipped is not None:
        return check_of(setting, skipped, NA, f"{ACS_UNIT} wrote nothing here, on purpose")
    if rows:
        return check_acs_registers(setting, rows)
    if props.get("Result") != "success" or props.get("ActiveState") != "active":
        state = f"{props.get('ActiveState', '?')}, result {props.get('Result', '?')}"
        return check_of(setting, f"{ACS_UNIT} {state}", DIFFERS, "the ACS unit did not succeed")
    summary = next((line for line in reversed(log) if "had ACS turned off" in line), "ran")
    return check_of(setting, f"{ACS_UNIT}: {summary}", OK)


def nccl_assignments(text: str) -> dict[str, str]:
    """The variables NCCL takes from an nccl.conf, as its setEnvFile reads it (src/misc/param.cc):
    '#' lines and lines without '=' are skipped, the value is the rest of the line, and the
    first assignment wins (setenv without overwrite)."""
    found: dict[str, str] = {}
    for line in text.split("\n"):
        name, equals, value = line.removesuffix("\r").partition("=")
        if line.startswith("#") or not equals:
            continue
        found.setdefault(name, value)
    return found


def check_nccl(setting: Setting, live: Live) -> Check:
    """/etc/nccl.conf as NCCL reads it when a job starts (the collector's conf-line records);
    NCCL_CONF_FILE or ~/.nccl.conf, read first, and a job's environment still win over it."""
    state = live.snapshot.value("conf", NCCL_CONF)
    if state is None:
        return check_of(setting, "-", NA, f"the snapshot has no {NCCL_CONF} record")
    if state != "present":
        return check_of(setting, state.removeprefix("!"), MISSING, f"{NCCL_CONF}: {state[1:]}")
    return check_nccl_text(setting, "\n".join(live.snapshot.values("conf-line", NCCL_CONF)))


def check_nccl_text(setting: Setting, text: str) -> Check:
    """One NCCL setting judged by nccl.conf's text: the first assignment of its name wins."""
    actual = nccl_assignments(text).get(setting.key)
    if actual is None:
        return check_of(setting, "not set", MISSING, f"{NCCL_CONF} does not set {setting.key}")
    good = actual == setting.value
    return check_of(
        setting, actual, OK if good else DIFFERS, "" if good else f"{NCCL_CONF} has another value"
    )


def gpu_evidence(live: Live) -> str | None:
    """What in the snapshot shows an NVIDIA GPU on this machine, or None when nothing does.

    Facts the collector recorded, never a hostname or a SKU: nvidia-smi's rows; the NVIDIA
    display/3D functions on the PCI bus (``gpu-pci``: also without a driver, which is when the
    NVIDIA packages are most likely absent); the PCI ports above the GPUs that the ACS read found.
    """
    rows = gpu_rows(live) if live.snapshot.value("gpu", "tool") == "ok" else []
    if rows:
        return f"nvidia-smi lists {len(rows)} GPU{'' if len(rows) == 1 else 's'}"
    on_pci = live.snapshot.value("gpu-pci", "count") or ""
    if on_pci.isdigit() and int(on_pci) > 0:
        return f"{on_pci} NVIDIA GPU{'' if on_pci == '1' else 's'} on the PCI bus"
    acs_rows = live.snapshot.values("acs", acs_word("gpus"))
    if acs_rows and acs_rows != ["!absent"]:
        return "NVIDIA GPUs on the PCI bus (the ACS read found them)"
    return None


# The NVIDIA units a distro table names with their package (hardware_db/distros/*.yaml nvidia).
PACKAGED_NVIDIA_UNITS = NVIDIA.packaged_units
DISTRO_KEY = re.compile(r"[a-z0-9][a-z0-9.-]{0,39}")


@cache
def distro_packages(distro_key: str) -> dict[str, str]:
    """Packaged NVIDIA unit -> the package that provides it, from the shipped distro table
    (hardware_db/distros/<key>.yaml ``nvidia``); empty for a portable bundle or a key the table
    lacks. Read as data with the safe loader: verify loads no inputs layer
    (tests/test_architecture.py), and the key comes from a foreign plan.json."""
    if not DISTRO_KEY.fullmatch(distro_key):
        return {}
    try:
        raw = read_foreign(hardware_db_dir() / "distros" / f"{distro_key}.yaml", 1 << 20)
        table = yaml.load(raw, Loader=SAFE_YAML)  # noqa: S506 -- a safe loader
    except (InputError, yaml.YAMLError):
        return {}
    nvidia = table.get("nvidia") if isinstance(table, dict) else None
    found: dict[str, str] = {}
    for name in PACKAGED_NVIDIA_UNITS:
        item = nvidia.get(name) if isinstance(nvidia, dict) else None
        if isinstance(item, dict) and isinstance(item.get("unit"), str) and item.get("package"):
            found[item["unit"]] = str(item["package"])
    return found


def check_required_absent(setting: Setting, live: Live) -> Check:
    """An absent unit the plan enables and install.list requires: missing on the machine the
    plan is for (its GPUs are here: without nvidia-fabricmanager NVLink does not come up),
    not applicable on a machine without them (a VM, a build host)."""
    seen = gpu_evidence(live)
    if seen is None:
        return check_of(
            setting,
            "not installed",
            NA,
            f"{setting.key} is not installed here: no NVIDIA GPU here (nvidia-smi lists none and "
            "the snapshot shows none on the PCI bus), so not the machine the plan is for",
        )
    return check_of(
        setting,
        "not installed",
        MISSING,
        f"{setting.key} is not installed, but {seen}: {provider_of(setting.key, live.bundle)}",
    )


def provider_of(unit: str, bundle: Bundle) -> str:
    """Where an absent unit the plan enables comes from: the bundle itself, or the package the
    distro table names (install.list requires it: install.sh --strict refuses a target without)."""
    if unit in bundle.units:
        return "the bundle's own unit: install the bundle (install.sh)"
    distro = bundle.plan.distro
    package = distro_packages(distro).get(unit)
    if package:
        where = f"{distro} packages it in {package}"
    elif DISTRO_KEY.fullmatch(distro):
        where = f"hardware_db/distros/{distro}.yaml names no package that provides it"
    elif distro:
        where = "no distro table names a package that provides it"
    else:
        where = "install the package that provides it (a portable bundle names none)"
    return f"the plan requires it (install.list require line); {where}"


def check_service(setting: Setting, live: Live) -> Check:
    state = live.snapshot.value("unit-enabled", setting.key)
    if state is None:
        return check_of(setting, "?", MISSING, NOT_COLLECTED)
    if state == "!unavailable":
        return check_of(setting, "-", NA, "systemd is not the service manager here")
    if state == "!absent":
        if setting.value == "mask":
            return check_of(setting, "not masked", MISSING, "no unit and no mask")
        if setting.optional:
            return check_of(
                setting,
                "not installed",
                NA,
                f"{setting.key} is not installed here (optional: enabled where the image has it)",
            )
        if setting.value == "enable":
            return check_required_absent(setting, live)
        return check_of(setting, "not installed", NA, f"{setting.key} is not installed here")
    active = live.snapshot.value("unit-active", setting.key) or "?"
    good = {
        "enable": {"enabled", "enabled-runtime", "alias", "static", "indirect", "generated"},
        "disable": {"disabled", "masked", "masked-runtime"},
        "mask": {"masked", "masked-runtime"},
    }[setting.value]
    if state in good and setting.value == "enable" and setting.key in DAEMON_UNITS:
        running = active == "active"
        return check_of(
            setting,
            f"{state}, {active}",
            OK if running else DIFFERS,
            "" if running else "the daemon this unit starts is not running",
        )
    return check_of(setting, f"{state}, {active}", OK if state in good else DIFFERS)


# --- container runtimes and kubelet (issue 14) -------------------------------------------------

RUNTIME_LIMIT_ROWS = {
    "LimitMEMLOCK": ("Max locked memory", 1),
    "LimitNOFILE": ("Max open files", 1),
}
# containerd 2.x migrates a version 2 file on load: the CRI runtime options move to this plugin.
CRI_V2_TO_V3 = (
    'plugins."io.containerd.grpc.v1.cri".containerd',
    'plugins."io.containerd.cri.v1.runtime".containerd',
)


def unit_prop(live: Live, unit: str, prop: str) -> str | None:
    return live.snapshot.value("runtime-unit", f"{unit}:{prop}")


def process_limit(live: Live, unit: str, option: str) -> tuple[str, str] | None:
    """(soft, hard) of the unit's running process for a LimitX option, from /proc/<pid>/limits."""
    row = RUNTIME_LIMIT_ROWS.get(option)
    rows = live.snapshot.values("runtime-limits", unit)
    if row is None or not rows:
        return None
    for line in rows:
        if line.startswith(row[0]):
            words = line[len(row[0]) :].split()
            return (words[0], words[1]) if len(words) >= 2 else None
    return None


def check_daemon_command(setting: Setting, live: Live) -> Check:
    """The drop-in's ExecStart against the arguments of the unit's running process
    (/proc/<MainPID>/cmdline): a daemon started with the packaged --no-persistence-mode, or
    before the drop-in, keeps persistence off whatever the unit file now says."""
    unit = setting.key.split(" ", 1)[0]
    state = unit_prop(live, unit, "ActiveState")
    if state is None:
        return check_of(setting, "?", MISSING, NOT_COLLECTED)
    if state.startswith("!"):
        return check_of(setting, "-", NA, "systemd is not the service manager here")
    if unit_prop(live, unit, "LoadState") == "not-found":
        return check_of(setting, "no such unit", NA, f"{unit} is not installed here")
    running = live.snapshot.values("runtime-cmdline", unit)
    if not running:
        return check_of(
            setting, f"not running ({state})", DIFFERS, "no daemon keeps persistence mode on"
        )
    words = running[0].split()
    planned = setting.value.split()
    if "--no-persistence-mode" in words:
        return check_of(
            setting,
            running[0].strip(),
            DIFFERS,
            f"the daemon runs with --no-persistence-mode: it was started before the drop-in "
            f"or a later drop-in wins (systemctl cat {unit}; then restart it)",
        )
    same_program = bool(words) and words[0].rsplit("/", 1)[-1] == planned[0].rsplit("/", 1)[-1]
    if not same_program or words[1:] != planned[1:]:
        return check_of(
            setting,
            running[0].strip(),
            DIFFERS,
            f"the running daemon has other options: started before the drop-in, or a later "
            f"drop-in wins (systemctl cat {unit}; then restart it)",
        )
    return check_of(setting, f"{setting.value} (running process)", OK)


def check_wanted_by(setting: Setting, live: Live) -> Check:
    """[Install] WantedBy= of the drop-in took effect when systemctl enable made the unit
    enabled; a unit without [Install] anywhere stays static and starts only when wanted."""
    unit = setting.key.split(" ", 1)[0]
    state = live.snapshot.value("unit-enabled", unit)
    if state is None:
        return check_of(setting, "?", MISSING, NOT_COLLECTED)
    if state == "!unavailable":
        return check_of(setting, "-", NA, "systemd is not the service manager here")
    if state == "!absent":
        return check_of(setting, "not installed", NA, f"{unit} is not installed here")
    good = state in ("enabled", "enabled-runtime")
    return check_of(
        setting,
        state,
        OK if good else DIFFERS,
        "" if good else f"{unit} is not enabled: the boot does not start it (systemctl enable)",
    )


def check_unit_dropin(setting: Setting, live: Live) -> Check:
    """The unit's configured limit (systemctl show), then the limit its running process has;
    a daemon's command line and [Install] by their own checks."""
    unit, option = setting.key.split(" ", 1)
    if option == "ExecStart":
        return check_daemon_command(setting, live)
    if option == "WantedBy":
        return check_wanted_by(setting, live)
    state = unit_prop(live, unit, "ActiveState")
    if state is None:
        return check_of(setting, "?", MISSING, NOT_COLLECTED)
    if state.startswith("!"):
        return check_of(setting, "-", NA, "systemd is not the service manager here")
    configured = unit_prop(live, unit, option)
    if configured is None or unit_prop(live, unit, "LoadState") == "not-found":
        return check_of(setting, "no such unit", NA, f"{unit} is not installed here")
    soft_text, _, hard_text = setting.value.partition(":")
    soft = unit_prop(live, unit, option + "Soft") if option.startswith("Limit") else None
    wanted = limit_number(hard_text or soft_text)
    if configured != wanted or (soft is not None and soft != limit_number(soft_text)):
        return check_of(
            setting,
            f"{soft}:{configured}" if soft else configured,
            DIFFERS,
            "a later drop-in or the unit sets another value (systemctl show)",
        )
    running = process_limit(live, unit, option)
    if running is not None:
        expected = tuple(
            "unlimited" if v in ("infinity", limit_number("infinity")) else v
            for v in (limit_number(soft_text), wanted)
        )
        if running != expected:
            return check_of(
                setting,
                f"running process: {running[0]}:{running[1]}",
                DIFFERS,
                f"configured, but {unit} was started before the drop-in: restart it",
            )
        return check_of(setting, f"{setting.value} (running process too)", OK)
    note = "" if state == "active" else f" (configured; {unit} is {state})"
    return check_of(setting, setting.value + note, OK)


def toml_value(text: str) -> object:
    return tomllib.loads(f"v = {text}")["v"]


def toml_lookup(document: dict[str, object], path: str) -> object | None:
    node: object = document
    for segment in TOML_KEY_SEGMENT.findall(path):
        if not isinstance(node, dict):
            return None
        node = node.get(segment.strip('"'))
    return node


def containerd_unread(document: dict[str, object]) -> str:
    """Why a key of the drop-in is not in containerd's merged configuration: the dump's imports
    list the files 1.x loaded (LoadConfig: "the list of config files loaded"), the globs 2.x
    followed."""
    loaded = document.get("imports")
    if isinstance(loaded, list) and not any(
        fnmatch.fnmatchcase(CONTAINERD_DROPIN, str(entry)) for entry in loaded
    ):
        return (
            f"not in effect: containerd did not read {CONTAINERD_DROPIN} (it loaded "
            f"{', '.join(map(str, loaded)) or 'no file'}): its config.toml must import it"
        )
    return "containerd did not take the drop-in's key (another file of its configuration?)"


def check_containerd(setting: Setting, live: Live) -> Check:
    """The value in `containerd config dump`: the configuration containerd merged (imports too)."""
    lines = live.snapshot.values("containerd-dump", "-")
    if not lines:
        return check_of(setting, "-", NA, "containerd is not installed here (no config dump)")
    try:
        document = tomllib.loads("\n".join(lines))
    except tomllib.TOMLDecodeError as error:
        return check_of(setting, "?", MISSING, f"containerd config dump did not parse: {error}")
    path = setting.key
    if document.get("version") == 3:
        path = path.replace(*CRI_V2_TO_V3)
    actual = toml_lookup(document, path)
    if actual is None:
        return check_of(setting, "not configured", MISSING, containerd_unread(document))
    good = actual == toml_value(setting.value)
    return check_of(
        setting,
        str(actual),
        OK if good else DIFFERS,
        "" if good else "another file of the merged configuration wins",
    )


def daemon_json_object(text: str) -> dict[str, object] | None:
    """daemon.json's top-level object; None when the text is not a JSON object (dockerd refuses
    to start with it)."""
    try:
        node: object = json.loads(text)
    except (ValueError, RecursionError):  # a 5,000-digit number; nesting past the parser's stack
        return None
    return node if isinstance(node, dict) else None


def daemon_json_value(config: dict[str, object], key: str) -> object:
    """The value of a dotted daemon.json key (``log-opts.max-size``); None when absent."""
    node: object = config
    for name in key.split("."):
        node = node.get(name) if isinstance(node, dict) else None
    return node


def check_daemon_json(setting: Setting, text: str, where: str) -> Check:
    config = daemon_json_object(text)
    if config is None:
        return check_of(setting, "not JSON", DIFFERS, "dockerd refuses to start with it")
    node = daemon_json_value(config, setting.key)
    good = node == json.loads(setting.value)
    return check_of(
        setting,
        json.dumps(node),
        OK if good else DIFFERS,
        "" if good else f"{where} has another value",
    )


def check_docker(setting: Setting, live: Live) -> Check:
    """What the running dockerd reports (its default runtime); the other daemon.json keys as the
    file on the machine says, which dockerd read when it started (it reads no drop-ins)."""
    if setting.key != "default-runtime":
        state = live.snapshot.value("conf", DOCKER_DAEMON_JSON)
        if state is None:
            return check_of(setting, "-", NA, f"the snapshot has no {DOCKER_DAEMON_JSON} record")
        if state != "present":
            return check_of(
                setting, state.removeprefix("!"), MISSING, f"{DOCKER_DAEMON_JSON}: {state[1:]}"
            )
        text = "\n".join(live.snapshot.values("conf-line", DOCKER_DAEMON_JSON))
        return check_daemon_json(setting, text, DOCKER_DAEMON_JSON)
    actual = live.snapshot.value("docker-info", "DefaultRuntime")
    if actual is None:
        return check_of(setting, "-", NA, "docker is not installed here")
    if actual.startswith("!") or not actual:
        return check_of(setting, "-", NA, "dockerd is not running")
    return check_of(setting, actual, OK if f'"{actual}"' == setting.value else DIFFERS)


# kubelet's effective configuration, as kubelet merged it at start. Its /configz endpoint shows it,
# but only through the API server with credentials (`kubectl get --raw
# /api/v1/nodes/NODE/proxy/configz`), which a node's verify does not have. The same result is
# rebuilt from what kubelet read (kubernetes.io/docs/tasks/administer-cluster/kubelet-config-file/,
# "Kubelet configuration merging order"): the --config file, then each *.conf file of
# --config-dir in name order, a later file's fields overriding, maps merged key by key and lists
# replaced whole (kubernetes.io/docs/reference/node/kubelet-config-directory-merging/); then
# command-line flags, which win over every file. The collector records those files line by line
# (kubelet-file, kubelet-config) from the running process's arguments.
KUBELET_FLAG_OF_FIELD = {
    "cgroupDriver": "--cgroup-driver",
    "cpuManagerPolicy": "--cpu-manager-policy",
    "topologyManagerPolicy": "--topology-manager-policy",
    "topologyManagerScope": "--topology-manager-scope",
    "memoryManagerPolicy": "--memory-manager-policy",
    "reservedSystemCPUs": "--reserved-cpus",
    "kubeReserved": "--kube-reserved",
    "systemReserved": "--system-reserved",
    "evictionHard": "--eviction-hard",
    "reservedMemory": "--reserved-memory",
    "maxPods": "--max-pods",
}


def merge_kubelet(base: dict[str, object], dropin: dict[str, object]) -> dict[str, object]:
    """DROPIN over BASE as kubelet merges a drop-in: maps key by key, anything else replaced."""
    merged = dict(base)
    for name, value in dropin.items():
        below = merged.get(name)
        if isinstance(value, dict) and isinstance(below, dict):
            merged[name] = merge_kubelet(below, value)
        else:
            merged[name] = value
    return merged


# libyaml's safe parser when PyYAML has it, else the pure one (as generator/verify/image.py).
SAFE_YAML: type = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def kubelet_yaml(text: str) -> dict[str, object] | str:
    """One kubelet configuration file: a mapping, or why not (the parser's words, never the
    file's). Aliases are refused before anything is built (billion laughs); kubelet's files
    have no use for them."""
    try:
        if any(isinstance(event, yaml.AliasEvent) for event in yaml.parse(text, Loader=SAFE_YAML)):
            return "YAML aliases (*name) are not read"
        data = yaml.load(text, Loader=SAFE_YAML)  # noqa: S506 - a safe loader
    except yaml.YAMLError as error:
        problem = getattr(error, "problem", None) or "not readable as YAML"
        return f"invalid YAML: {' '.join(str(problem).split())[:120]}"
    except YAML_VALUE_ERRORS:
        return "invalid YAML: nested too deeply, or a value its type cannot hold"
    if data is None:
        return {}
    return data if isinstance(data, dict) else "not a YAML mapping"


def kubelet_files(live: Live) -> list[tuple[str, dict[str, object]]] | str:
    """(path, mapping) of each file kubelet read, in merge order; or why they cannot be had."""
    files = []
    for path in live.snapshot.values("kubelet-file", "-"):
        if path.startswith("!"):
            return path[1:]
        parsed = kubelet_yaml("\n".join(live.snapshot.values("kubelet-config", path)))
        if isinstance(parsed, str):
            return f"{path}: {parsed}"
        files.append((path, parsed))
    return files


def kubelet_field(document: dict[str, object], key: str) -> object | None:
    """The value of a plan key (``field`` or ``field/entry``) in a merged configuration."""
    field_name, _, entry = key.partition("/")
    value = document.get(field_name)
    if not entry:
        return value
    if isinstance(value, list):  # reservedMemory: [{numaNode: N, limits: {memory: Q}}]
        for item in value:
            if isinstance(item, dict) and str(item.get("numaNode")) == entry:
                limits = item.get("limits")
                return limits.get("memory") if isinstance(limits, dict) else None
        return None
    return value.get(entry) if isinstance(value, dict) else None


def kubelet_flag(arguments: list[str], flag: str) -> str | None:
    """The value of ``--flag=V`` or ``--flag V`` on kubelet's command line (the last wins)."""
    found = None
    for index, word in enumerate(arguments):
        if word.startswith(flag + "="):
            found = word[len(flag) + 1 :]
        elif word == flag and index + 1 < len(arguments):
            found = arguments[index + 1]
    return found


def check_kubelet(setting: Setting, live: Live) -> Check:
    """kubelet must run with --config-dir on the drop-in directory, and the configuration it
    merged from its files and flags must hold the planned value."""
    state = unit_prop(live, KUBELET_UNIT, "ActiveState")
    if state is None:
        return check_of(setting, "?", MISSING, NOT_COLLECTED)
    if state != "active":
        return check_of(setting, "-", NA, "kubelet is not running here")
    arguments = " ".join(live.snapshot.values("runtime-cmdline", KUBELET_UNIT))
    if not re.search(rf"--config-dir[= ]{re.escape(KUBELET_DROPIN_DIR)}/?(\s|$)", arguments):
        return check_of(
            setting,
            "drop-in not read",
            DIFFERS,
            f"not in effect: kubelet runs without --config-dir={KUBELET_DROPIN_DIR}",
        )
    flag = KUBELET_FLAG_OF_FIELD.get(setting.key.partition("/")[0])
    flagged = kubelet_flag(arguments.split(), flag) if flag else None
    if flagged is not None:
        return check_of(
            setting,
            f"{flag}={flagged}",
            OK if flagged == setting.value and "/" not in setting.key else DIFFERS,
            f"kubelet's {flag} on its command line wins over every configuration file",
        )
    files = kubelet_files(live)
    if isinstance(files, str):
        return check_of(setting, "?", MISSING, f"kubelet's configuration files: {files}")
    if not files:
        return check_of(setting, "?", MISSING, NOT_COLLECTED)
    merged: dict[str, object] = {}
    last = ""
    for path, document in files:
        merged = merge_kubelet(merged, document)
        if kubelet_field(document, setting.key) is not None:
            last = path
    actual = kubelet_field(merged, setting.key)
    if actual is None:
        return check_of(setting, "not set", MISSING, "no file kubelet read sets it")
    good = str(actual) == setting.value
    return check_of(
        setting,
        f"{actual} (from {last})",
        OK if good else DIFFERS,
        "" if good else f"{last} is merged after the drop-in and wins",
    )


# Check name (``live_check`` of a row of generator.model.kinds.KINDS) -> how a snapshot judges it.
CHECKS: dict[str, Callable[[Setting, Live], Check]] = {
    "sysctl": check_sysctl,
    "kernel-arg": check_kernel_arg,
    "limit": check_limit,
    "systemd-manager": check_manager,
    "modprobe": check_modprobe,
    "module-load": check_module_load,
    "sysfs": check_sysfs,
    "udev": check_udev,
    "tuned": check_tuned,
    "gpu": check_gpu,
    "irq": check_irq,
    "pcie-acs": check_pcie_acs,
    "service": check_service,
    "unit-dropin": check_unit_dropin,
    "containerd": check_containerd,
    "docker": check_docker,
    "kubelet": check_kubelet,
    "nccl": check_nccl,
}


def own_unit_props(live: Live, unit: str) -> dict[str, str]:
    props = {}
    for value in live.snapshot.values("own-unit", unit):
        name, _, text = value.partition("=")
        props[name] = text
    return props


def check_settings(bundle: Bundle, snapshot: Snapshot) -> list[Check]:
    live = Live.of(snapshot, bundle)
    return [check_live(setting, live) for setting in bundle.plan.settings]


def check_live(setting: Setting, live: Live) -> Check:
    spec = KIND_SPECS.get(setting.kind)
    check = CHECKS.get(spec.live_check) if spec else None
    if check is None:  # a plan.json of another goldtune version; tests/test_kinds.py covers ours
        return check_of(
            setting, "?", MISSING, f"this goldtune cannot judge a {setting.kind} setting"
        )
    return check(setting, live)
