"""Parsers that read what a consumer reads the way it reads it: the kernel's command line,
the units of /proc/<pid>/limits (its rows: records.py), systemd's time spans, NCCL's nccl.conf,
containerd's TOML, dockerd's daemon.json and kubelet's configuration files merged with its flags.
Pure functions of text: the live checks (checks_*.py) and verify --root (image.py) share them."""

from __future__ import annotations

import json
import re
from typing import Any

from generator.foreign import YAML_VALUE_ERRORS
from generator.model.kinds import TOML_KEY_SEGMENT

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


def expected_limit(item: str, value: str) -> str:
    if value in ("unlimited", "infinity", "-1"):
        return "unlimited"
    number = int(value)
    return str(20 - number) if item == "nice" else str(number * LIMIT_ITEMS[item][1])


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


def toml_value(text: str) -> object:
    import tomllib  # here, as yaml below: a snapshot without containerd settings reads no TOML

    return tomllib.loads(f"v = {text}")["v"]


def toml_lookup(document: dict[str, object], path: str) -> object | None:
    node: object = document
    for segment in TOML_KEY_SEGMENT.findall(path):
        if not isinstance(node, dict):
            return None
        node = node.get(segment.strip('"'))
    return node


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


def safe_yaml() -> tuple[Any, type]:
    """PyYAML and libyaml's safe loader where PyYAML has it, else the pure one (as
    generator/verify/image.py). Imported when a YAML file is read: most snapshots have none,
    and the import was about a sixth of `gen verify --snapshot`'s CPU."""
    import yaml

    return yaml, getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def kubelet_yaml(text: str) -> dict[str, object] | str:
    """One kubelet configuration file: a mapping, or why not (the parser's words, never the
    file's). Aliases are refused before anything is built (billion laughs); kubelet's files
    have no use for them."""
    yaml, loader = safe_yaml()
    try:
        if any(isinstance(event, yaml.AliasEvent) for event in yaml.parse(text, Loader=loader)):
            return "YAML aliases (*name) are not read"
        data = yaml.load(text, Loader=loader)
    except yaml.YAMLError as error:
        problem = getattr(error, "problem", None) or "not readable as YAML"
        return f"invalid YAML: {' '.join(str(problem).split())[:120]}"
    except YAML_VALUE_ERRORS:
        return "invalid YAML: nested too deeply, or a value its type cannot hold"
    if data is None:
        return {}
    return data if isinstance(data, dict) else "not a YAML mapping"


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
