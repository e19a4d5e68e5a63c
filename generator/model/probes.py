"""What the collector reads and how its words look: shared by the renderer, which writes the
collector's data file, and by ``verify``, which validates that file and judges the snapshot.

The collector itself is the fixed script ``templates/scripts/collect``; its data file is
``SECTION`` or ``SECTION<TAB>WORD`` lines (``#`` lines are comments). Its output, a snapshot, is
``SECTION<TAB>KEY<TAB>VALUE`` records between the ``SNAPSHOT_BEGIN`` and ``SNAPSHOT_END`` lines.
"""

# No `from __future__ import annotations`: a NamedTuple turns each string annotation into
# a compiled ForwardRef, ~0.15 ms a record at import (bench/bench.py's cold gen).
import re
from enum import StrEnum
from typing import NamedTuple

from generator.model.layout import PREFLIGHT_RESULT, UNNAMED_TARGETS
from generator.model.vendors import GPU_VENDORS, GpuVendor

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


class WholeRead(NamedTuple):
    """A section the collector reads as a whole (named alone on its data line), and why: the
    comment above that line. A kind's row (``KindSpec.collector_whole``) or a GPU vendor's row
    (``VendorSpec.collector_section``) asks for one; generator/model/collect_data.py derives the
    list from those rows."""

    section: str
    reason: str


# The collector's data sections that take one word per line (one item to read each), in the
# order it reads them; those read as a whole come from the kind and vendor tables
# (generator/model/collect_data.py).
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
NAME_SECTIONS = ("tool", "bundle")  # the tool's name, the bundle's label
# A GPU vendor's PCI id (0x10de, generator/model/vendors.py), one line each: the GPUs `acs gpus`,
# the `gpu` section's PCI count and the `gpu-amd` section look for; each needs one.
VENDOR_SECTION = "gpu-vendor"
# GPU actions only AMD's GPUs have (its row's own_actions): a plan with one is judged from the
# gpu-amd section whatever vendor its GPUs are.
AMD_ONLY_ACTIONS = GPU_VENDORS[GpuVendor.AMD].own_actions
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
# Patterns, compiled where a data file is checked (re keeps them): gen verify of a snapshot
# checks none, and compiling them at import was ~1.5 ms of its CPU.
SECTION_WORDS = {
    "sysctl": rf"{_PART}(/{_PART})*",  # /proc/sys/<key, dots as slashes>
    "sysfs": rf"/sys(/{_PART})+",
    "modparams": rf"{_NAME}/{_NAME}",  # /sys/module/<module>/parameters/<param>
    "modules": _NAME,
    "limits": r"[A-Za-z_][A-Za-z0-9_.-]*",  # a user name (limit_user)
    "manager": r"[A-Za-z][A-Za-z0-9]*",  # a systemd manager property
    "irq": _INTERFACE,  # /sys/class/net/<interface>
    "units": _UNIT,
    "runtimes": _UNIT,
    "confs": "|".join(re.escape(path) for path in sorted(UNNAMED_TARGETS)),
    "acs": rf"gpus|nic:{_INTERFACE}",
    "preflight": re.escape(PREFLIGHT_RESULT),
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


_UNWORDED = sorted(set(LIST_SECTIONS) ^ set(SECTION_WORDS) | set(LIST_SECTIONS) ^ set(WHAT))
assert not _UNWORDED, (
    f"collector list sections {_UNWORDED}: each needs its entry in LIST_SECTIONS, SECTION_WORDS "
    "and WHAT in generator/model/probes.py"
)
