"""What the collector reads and how its words look: shared by the renderer, which writes the
collector's data file, and by ``verify``, which validates that file and judges the snapshot.

The collector itself is the fixed script ``templates/scripts/collect``; its data file is
``SECTION`` or ``SECTION<TAB>WORD`` lines (``#`` lines are comments). Its output, a snapshot, is
``SECTION<TAB>KEY<TAB>VALUE`` records between the ``SNAPSHOT_BEGIN`` and ``SNAPSHOT_END`` lines.
"""

from __future__ import annotations

import re
from enum import StrEnum

from generator import TOOL
from generator.errors import InputError, Problem
from generator.model.layout import PREFLIGHT_RESULT, UNNAMED_TARGETS

# Everything a data word may contain once it reaches a script: no quotes, no blanks, no '$'.
# The scripts check the same alphabet (safe_word in collect).
SAFE_WORD = re.compile(r"[A-Za-z0-9_.:/*?\[\]@+%=,-]+")
TOOL_WORD = re.compile(r"[A-Za-z0-9_-]+")

# sysfs values the verdict of some kernel arguments and tuned options is read from.
THP_ENABLED = "/sys/kernel/mm/transparent_hugepage/enabled"
THP_DEFRAG = "/sys/kernel/mm/transparent_hugepage/defrag"
SMT_CONTROL = "/sys/devices/system/cpu/smt/control"
HUGEPAGES = "/sys/kernel/mm/hugepages/hugepages-*/nr_hugepages"
GOVERNOR = "/sys/devices/system/cpu/cpu*/cpufreq/scaling_governor"
EFFECT_PATHS = (THP_ENABLED, THP_DEFRAG, SMT_CONTROL, HUGEPAGES)
# A limits.conf domain is measured in a session of this user (``*`` does not apply to root).
WILDCARD_USER = "nobody"

SNAPSHOT_BEGIN = ("goldtune-snapshot", "begin")
SNAPSHOT_END = ("goldtune-snapshot", "end")


class Section(StrEnum):
    """The sections of a snapshot, as the collector prints them (templates/scripts/collect's
    header documents each). Verify reads a snapshot by these names only (``Snapshot`` takes a
    Section); tests/test_collector_contract.py ties them to the script's records."""

    META = "meta"
    CMDLINE = "cmdline"
    SYSCTL = "sysctl"
    SYSFS = "sysfs"
    MODPARAM = "modparam"
    MEMINFO = "meminfo"
    MODULE = "module"
    MODPROBE_CONFIG = "modprobe-config"
    MODPROBE_ERROR = "modprobe-error"
    LIMITS = "limits"
    MANAGER = "manager"
    BLOCK = "block"
    IRQ = "irq"
    ACS = "acs"
    GPU = "gpu"
    GPU_PCI = "gpu-pci"
    XID = "xid"
    XID_EVENT = "xid-event"
    GPU_MIG = "gpu-mig"
    GPU_AMD = "gpu-amd"
    TUNED = "tuned"
    TUNED_LOG = "tuned-log"
    UNIT_ENABLED = "unit-enabled"
    UNIT_ACTIVE = "unit-active"
    OWN_UNIT = "own-unit"
    OWN_UNIT_LOG = "own-unit-log"
    SYSTEM = "system"
    JOURNAL = "journal"
    KERNEL = "kernel"
    FILE = "file"
    RUNTIME_UNIT = "runtime-unit"
    RUNTIME_LIMITS = "runtime-limits"
    RUNTIME_CMDLINE = "runtime-cmdline"
    CONTAINERD_DUMP = "containerd-dump"
    KUBELET_FILE = "kubelet-file"
    KUBELET_CONFIG = "kubelet-config"
    DOCKER_INFO = "docker-info"
    CONF = "conf"
    CONF_LINE = "conf-line"
    PREFLIGHT = "preflight"


# The collector's data sections, in the order it reads them: those that take one word per line
# (one item to read each), and those named alone (read as a whole).
LIST_SECTIONS = (
    "sysctl",
    "sysfs",
    "modparams",
    "modules",
    "limits",
    "manager",
    "irq",
    "units",
    "runtimes",  # container runtime and kubelet units (issue 14)
    "confs",  # files the plan writes at paths without the tool's name: /etc/nccl.conf (issue 18)
    "acs",  # the devices pcie-acs clears ACS above: gpus, nic:<interface> (issue 18)
    "preflight",  # the preflight unit's result file (issue 28)
)
WHOLE_SECTIONS = ("block", "gpu", "gpu-amd", "tuned", "own_units", "system", "journal", "files")
NAME_SECTIONS = ("tool", "bundle")  # the tool's name, the bundle's label
# A GPU vendor's PCI id (0x10de, generator/model/vendors.py), one line each: the GPUs `acs gpus`,
# the `gpu` section's PCI count and the `gpu-amd` section look for; each needs one.
VENDOR_SECTION = "gpu-vendor"
# GPU actions only AMD's GPUs have (amd-smi set --compute-partition, --memory-partition): a plan
# with one is judged from the gpu-amd section whatever kind carries it.
AMD_ONLY_ACTIONS = frozenset({"compute-partition", "memory-partition"})
PCI_VENDOR_WORD = re.compile(r"0x[0-9a-f]{4}")


# What each list section's word may name, so that a bundle's data file makes the collector read
# only what that kind reads (it runs as root): a /proc/sys key, a /sys path, a module parameter
# under /sys/module, an interface under /sys/class/net, a unit or user name, one of the fixed
# configuration paths. A path component never starts with a dot ('.', '..', '.*' stay inside
# the tree) and a name never starts with '-' (an option to the command it is given to).
_PART = r"[A-Za-z0-9_:@+%=,*?\[\]-][A-Za-z0-9_.:@+%=,*?\[\]-]*"
_NAME = r"[A-Za-z0-9_][A-Za-z0-9_.-]*"
_INTERFACE = r"[A-Za-z0-9_][A-Za-z0-9_.:@+-]*"
_UNIT = r"[A-Za-z0-9_:][A-Za-z0-9_.:@-]*\.[a-z]+"
SECTION_WORDS = {
    "sysctl": re.compile(rf"{_PART}(/{_PART})*"),  # /proc/sys/<key, dots as slashes>
    "sysfs": re.compile(rf"/sys(/{_PART})+"),
    "modparams": re.compile(rf"{_NAME}/{_NAME}"),  # /sys/module/<module>/parameters/<param>
    "modules": re.compile(_NAME),
    "limits": re.compile(r"[A-Za-z_][A-Za-z0-9_.-]*"),  # a user name (limit_user)
    "manager": re.compile(r"[A-Za-z][A-Za-z0-9]*"),  # a systemd manager property
    "irq": re.compile(_INTERFACE),  # /sys/class/net/<interface>
    "units": re.compile(_UNIT),
    "runtimes": re.compile(_UNIT),
    "confs": re.compile("|".join(re.escape(path) for path in sorted(UNNAMED_TARGETS))),
    "acs": re.compile(rf"gpus|nic:{_INTERFACE}"),
    "preflight": re.compile(re.escape(PREFLIGHT_RESULT)),
}
WHAT = {
    "sysctl": "not a kernel parameter under /proc/sys",
    "sysfs": "not a path under /sys without '.' or '..' components",
    "modparams": "not <module>/<parameter>",
    "modules": "not a module name",
    "limits": "not a user name",
    "manager": "not a service manager property",
    "irq": "not a network interface name",
    "units": "not a unit name",
    "runtimes": "not a unit name",
    "confs": f"not one of {', '.join(sorted(UNNAMED_TARGETS))}",
    "acs": "not gpus or nic:<interface>",
    "preflight": f"not {PREFLIGHT_RESULT}",
}


def acs_word(key: str) -> str:
    """A pcie-acs setting's key as one collector word: ``gpus``; ``nic ib0`` -> ``nic:ib0``."""
    return key.replace(" ", ":", 1)


def module_param(key: str) -> str | None:
    """``nvidia-drm.modeset`` -> ``nvidia-drm/modeset``; None for a parameter of the kernel."""
    module, dot, param = key.partition(".")
    if not dot or module in ("rd", "modprobe", "systemd", "udev"):
        return None
    return f"{module}/{param}"


def limit_user(domain: str) -> str | None:
    """The user whose session shows a limits.conf domain; None for groups (no single user)."""
    if domain == "*":
        return WILDCARD_USER
    if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.-]*", domain):
        return domain
    return None


def data_line_problem(line: str) -> str | None:
    """What is wrong with one line of the collector's data file, or None: the script's rules,
    and (stricter: verify runs the collector as root) what each section's kind may read."""
    if not line or line.startswith("#"):
        return None
    section, tab, word = line.partition("\t")
    if section == VENDOR_SECTION:
        return (
            None if PCI_VENDOR_WORD.fullmatch(word) else "not a PCI vendor id (0x and 4 hex digits)"
        )
    if section == "tool" and word != TOOL:
        return f"tool is {TOOL}: the collector reads {TOOL}'s units and files only"
    if section in NAME_SECTIONS:
        pattern = TOOL_WORD if section == "tool" else SAFE_WORD
        return None if pattern.fullmatch(word) else f"{section} needs one safe word"
    if section in LIST_SECTIONS:
        if not SAFE_WORD.fullmatch(word):
            return f"{section} needs one safe word"
        if not SECTION_WORDS[section].fullmatch(word):
            return f"{section}: {WHAT[section]}"
        globbed = [part for part in word.split("/") if any(c in part for c in "*?[")]
        # one globbed component (cpu*): the matches of one directory, not a walk of all /sys
        if section == "sysfs" and len(globbed) > 1:
            return "sysfs: a glob in more than one path component"
        return None
    if section in WHOLE_SECTIONS:
        return None if not tab else f"section {section} takes no word"
    return "unknown section"


def check_collect_data(text: str, source: str) -> None:
    """Refuse a collector data file the script would refuse (InputError naming each bad line)."""
    lines = text.split("\n")
    problems = [
        Problem(source, f"line {number}", problem)
        for number, line in enumerate(lines, start=1)
        if (problem := data_line_problem(line)) is not None
    ]
    present = {line.partition("\t")[0] for line in lines}
    problems += [
        Problem(source, "", f"no {name} line") for name in NAME_SECTIONS if name not in present
    ]
    if ({"acs\tgpus", "gpu", "gpu-amd"} & set(lines)) and VENDOR_SECTION not in present:
        problems.append(Problem(source, "", f"acs gpus or gpu without a {VENDOR_SECTION} line"))
    if problems:
        raise InputError(problems[:5])
