"""The setting kinds: one frozen row per kind, and every per-kind lookup derived from the table.

A setting's kind says which file carries it and how its key and value must look there. Everything
that differs between kinds is a field of its row in ``KINDS``:

- ``title``: the heading a reviewer sees (EXPLAIN.md, ``gen diff``);
- ``key`` / ``value``: the grammar, as regular expressions a key or value must match whole
  (ASCII only: the kernel, systemd and the boot scripts read ASCII digits, never Unicode ones);
  ``values`` narrows the value per key where the consumer switches on exact words (gpu actions);
- ``shape``: that grammar in words, for error messages;
- ``file`` / ``template``: the bundle file it renders into (``{profile}`` is the profile name;
  ``{unit}``, a file per unit: the unit the setting's key starts with) and
  the Jinja template under ``templates/`` that writes it (it gets the kind's settings as
  ``settings``); the renderer's table of outputs is derived from these two fields;
- ``live_step``: the step install.sh (``step_<name>``) and cloud-init run on a live system after
  the files are in place, or None when the consumer reads the file when it next starts;
- ``live_check`` / ``image_check``: the name of the check ``gen verify`` runs for it against a live
  snapshot (``generator.verify.live.CHECKS``) and a mounted image
  (``generator.verify.image.CHECKS``).
  Several kinds may share a check. ``applied_at_boot_by`` names the bundle's own unit when the
  setting is applied at boot by that unit rather than read by a consumer from a file: the image
  check then judges that unit.

Adding a kind (README, "Adding a setting kind", 6 files, carried out by tests/test_recipes.py): its
member and row here, its path in ``layout``, its constructor in ``generator.rules.base``, its
template, a setting of it in tests/plans.py and its name in tests/test_plan.py's vocabulary.
``tests/test_kinds.py`` fails, saying where, when a row names a check, a template or a step that
does not exist.
"""

# No `from __future__ import annotations`: a NamedTuple turns each string annotation into
# a compiled ForwardRef, ~0.15 ms a record at import (bench/bench.py's cold gen).
import functools
import re
from collections.abc import Callable, Iterable, Mapping
from enum import StrEnum
from types import MappingProxyType
from typing import NamedTuple

from generator.model import layout
from generator.model.layout import in_overlay
from generator.model.mig import PROFILE_NAME as MIG_PROFILE_NAME
from generator.model.probes import Section, WholeRead


class Kind(StrEnum):
    """The closed vocabulary of setting kinds (``gen explain --json``'s ``kind``, a stable API)."""

    SYSCTL = "sysctl"
    KERNEL_ARG = "kernel-arg"
    LIMIT = "limit"
    SYSTEMD_MANAGER = "systemd-manager"
    MODPROBE = "modprobe"
    MODULE_LOAD = "module-load"
    SYSFS = "sysfs"
    UDEV = "udev"
    TUNED = "tuned"
    GPU = "gpu"
    IRQ = "irq"
    PCIE_ACS = "pcie-acs"
    SERVICE = "service"
    UNIT_DROPIN = "unit-dropin"
    CONTAINERD = "containerd"
    DOCKER = "docker"
    KUBELET = "kubelet"
    NCCL = "nccl"
    RCCL = "rccl"


class GpuAction(StrEnum):
    """What the GPU boot unit does, in the order it must run (persistence first, power last)."""

    # where nvidia-smi runs: the GPU Operator's driver root (chroot), before any action
    DRIVER_ROOT = "driver-root"
    PERSISTENCE = "persistence"
    ECC = "ecc"
    MIG = "mig"
    MIG_LAYOUT = "mig-layout"  # GPU instances (with their default compute instance), after mig on
    # AMD Instinct (gpu-setup-amd): the memory partition is compared first, then the compute one
    MEMORY_PARTITION = "memory-partition"
    COMPUTE_PARTITION = "compute-partition"
    COMPUTE_MODE = "compute-mode"
    CLOCKS = "clocks"
    POWER_LIMIT = "power-limit"


class ServiceAction(StrEnum):
    ENABLE = "enable"
    DISABLE = "disable"
    MASK = "mask"


class DiskClass(StrEnum):
    """The disk classes the I/O scheduler rules match (by udev attributes, not by name)."""

    NVME = "nvme"
    SSD = "ssd"
    HDD = "hdd"


def _one_of(words: type[StrEnum] | tuple[str, ...]) -> str:
    return "|".join(re.escape(str(word)) for word in words)


_INT = r"-?[0-9]+"
_WORD = r"[A-Za-z0-9_.:,/+-]+"
_MODULE = r"[A-Za-z0-9_-]+"
_UNIT_SUFFIXES = ("service", "socket", "timer", "target", "path", "mount", "slice")
_UNIT = rf"[A-Za-z0-9@_.:\\-]+\.(?:{_one_of(_UNIT_SUFFIXES)})"
_LIMIT_DOMAIN = r"\*|[A-Za-z_][A-Za-z0-9_.-]*|[@%][A-Za-z_][A-Za-z0-9_.-]*|%:[0-9]+|@?[0-9]*:[0-9]*"
LIMIT_ITEMS = (
    "core",
    "data",
    "fsize",
    "memlock",
    "nofile",
    "rss",
    "stack",
    "cpu",
    "nproc",
    "as",
    "maxlogins",
    "maxsyslogins",
    "nonewprivs",
    "priority",
    "locks",
    "sigpending",
    "msgqueue",
    "nice",
    "rtprio",
)
_SYSFS_PART = r"[A-Za-z0-9_.:*?%\[\]+-]+"
# An interface name as the kernel allows it (dev_valid_name: at most 15 bytes, no '/' or space).
IFNAME = r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,14}"
CPULIST = r"[0-9]+(?:-[0-9]+)?(?:,[0-9]+(?:-[0-9]+)?)*"
# The container runtimes whose units get a limits drop-in (issue 14).
RUNTIME_UNITS = layout.RUNTIME_UNITS
PERSISTENCED_UNIT = layout.PERSISTENCED_UNIT
# What a unit-dropin key may name: each unit with the options the bundle may set in it (an
# allow-list per unit, so a plan cannot write ExecStart into containerd's unit).
DROPIN_OPTIONS: Mapping[tuple[str, ...], str] = MappingProxyType(
    {
        RUNTIME_UNITS: r"Limit[A-Z]+|TasksMax",
        (PERSISTENCED_UNIT,): r"ExecStart|WantedBy",
    }
)
# The section of the unit file an option belongs to (systemd.unit(5), systemd.service(5)).
INSTALL_OPTIONS = ("WantedBy",)
# Options whose assignments add to a list: the drop-in first assigns the empty value, which
# resets what the packaged unit set (systemd.service(5), ExecStart=), then its own value.
RESET_OPTIONS = ("ExecStart",)
# no segment starts with a dot: the program is named, never reached through ".."
_PERSISTENCED_PROGRAM = r"(?:/(?:[A-Za-z0-9_][A-Za-z0-9_.-]*/)*)?nvidia-persistenced"
_ARGUMENT = r"[A-Za-z0-9_.=-]+"


def dropin_section(option: str) -> str:
    """The unit file section a drop-in option is written under."""
    return "Install" if option in INSTALL_OPTIONS else "Service"


# A TOML key path: bare or double-quoted segments joined by dots (containerd's plugin ids are
# quoted: plugins."io.containerd.grpc.v1.cri"); the last segment is the key of its table.
_TOML_SEGMENT = r'(?:[A-Za-z0-9_-]+|"[A-Za-z0-9_.-]+")'
# The segments of such a key path, as the renderer groups them and verify looks them up.
TOML_KEY_SEGMENT = re.compile(r'"[^"]*"|[^.]+')
# Values as the file spells them: a TOML or JSON string, boolean or integer, never a table.
_TOML_VALUE = r'"[A-Za-z0-9_./:-]*"|true|false|-?[0-9]+'
_JSON_VALUE = r'"[A-Za-z0-9_./:-]*"|true|false|-?[0-9]+'


# Compiled on first use, not at import (a cold `gen` checks a few kinds), then kept: every
# setting of every plan is checked against two of these.
@functools.cache
def whole_match(pattern: str) -> Callable[[str], re.Match[str] | None]:
    """``pattern``'s fullmatch, ASCII only."""
    return re.compile(pattern, re.ASCII).fullmatch


# No words per key: one shared, read-only empty mapping.
_NO_WORDS: Mapping[str, str] = MappingProxyType({})


class KindSpec(NamedTuple):
    """Everything that differs between setting kinds (see the module docstring).

    A NamedTuple, like the other value records: a frozen dataclass compiles its methods at
    import, in every run.
    """

    kind: Kind
    title: str
    key: str
    value: str
    shape: str
    file: str
    template: str
    live_check: str
    image_check: str
    live_step: str | None = None
    values: Mapping[str, str] = _NO_WORDS
    applied_at_boot_by: str | None = None
    # a per-key value in words, where ``values`` holds a pattern rather than a list of words
    value_shapes: Mapping[str, str] = _NO_WORDS
    # the snapshot sections the live check reads, each printed by the collector for a plan
    # with this kind (tests/test_collector_contract.py proves both from the code and the script)
    collector_sections: tuple[Section, ...] = ()
    # a data section the collector reads as a whole for a plan with this kind, and why (the
    # collector reads no such section unless a kind or a GPU vendor's row asks for it)
    collector_whole: WholeRead | None = None

    def key_fits(self, key: str) -> bool:
        return whole_match(self.key)(key) is not None

    def value_fits(self, key: str, value: str) -> bool:
        pattern = self.values.get(key, self.value) if self.values else self.value
        return whole_match(pattern)(value) is not None

    def files_for(
        self,
        profile: str,
        keys: Iterable[str],
        tuned_dir: str = layout.TUNED_DIR,
        kubelet_dir: str = layout.KUBELET_DROPIN_DIR,
    ) -> list[str]:
        """The bundle files that carry these keys of the kind: its one file, or for a ``{unit}``
        file one per unit the keys name (``containerd.service LimitNOFILE``), in key order.
        ``tuned_dir`` and ``kubelet_dir`` are the plan's (where the target's tuned reads a local
        profile, where its kubelet reads drop-ins)."""
        where = {
            "tuned_dir": tuned_dir.removeprefix("/"),
            "kubelet_dir": kubelet_dir.removeprefix("/"),
        }
        if "{unit}" not in self.file:
            return [self.file.format(profile=profile, **where)]
        units = dict.fromkeys(key.split(" ", 1)[0] for key in keys)
        return [self.file.format(profile=profile, unit=unit, **where) for unit in units]

    def value_shape(self, key: str) -> str:
        """What a value of this key may be, in words (the pattern itself for per-key words)."""
        if key in self.value_shapes:
            return self.value_shapes[key]
        if key in self.values:
            return f"one of {self.values[key].replace('|', ', ')}"
        return self.shape


KINDS: tuple[KindSpec, ...] = (
    KindSpec(
        Kind.SYSCTL,
        "Kernel parameters (sysctl.d)",
        key=r"[a-z0-9_]+(?:\.[A-Za-z0-9_-]+)+",
        value=rf"{_WORD}(?: {_WORD})*",
        shape="a dotted /proc/sys key (vm.swappiness) with a value of words and numbers",
        file=in_overlay(layout.SYSCTL_FILE),
        template="sysctl.conf.j2",
        live_step="sysctl",
        live_check="sysctl",
        collector_sections=(Section.SYSCTL,),
        image_check="sysctl",
    ),
    KindSpec(
        Kind.KERNEL_ARG,
        "Kernel command line (GRUB drop-in)",
        key=r"[A-Za-z0-9_][A-Za-z0-9_.-]*",
        value=r"(?:[A-Za-z0-9_.,:=+/@%*-]+)?",
        shape="a kernel parameter name with an optional value without spaces or quotes",
        file=in_overlay(layout.GRUB_FILE),
        template="grub.cfg.j2",
        live_step="bootloader",
        live_check="kernel-arg",
        collector_sections=(Section.CMDLINE, Section.SYSFS, Section.MODPARAM, Section.KERNEL),
        image_check="kernel-arg",
    ),
    KindSpec(
        Kind.LIMIT,
        "Login session limits (security/limits.d)",
        key=rf"(?:{_LIMIT_DOMAIN}) (?:soft|hard|-) (?:{_one_of(LIMIT_ITEMS)})",
        value=rf"unlimited|infinity|{_INT}",
        shape="'<domain> <soft|hard|-> <item>' (limits.conf(5)) "
        "with a number, unlimited or infinity",
        file=in_overlay(layout.LIMITS_FILE),
        template="limits.conf.j2",
        live_check="limit",
        collector_sections=(Section.LIMITS,),
        image_check="limit",
    ),
    KindSpec(
        Kind.SYSTEMD_MANAGER,
        "systemd manager defaults (system.conf.d)",
        key=r"Default[A-Z][A-Za-z]+",
        value=r"[A-Za-z0-9_.:%/+-]+",
        shape="a systemd-system.conf(5) Default<Name> option with a value without spaces",
        file=in_overlay(layout.MANAGER_FILE),
        template="system.conf.j2",
        live_check="systemd-manager",
        collector_sections=(Section.MANAGER,),
        image_check="systemd-manager",
    ),
    KindSpec(
        Kind.MODPROBE,
        "Module blacklists and options (modprobe.d)",
        key=rf"blacklist {_MODULE}|options {_MODULE} [A-Za-z0-9_.-]+",
        value=r"[A-Za-z0-9_.,:+/-]*",
        shape="'blacklist <module>' (value \"\") or 'options <module> <parameter>' with a value",
        file=in_overlay(layout.MODPROBE_FILE),
        template="modprobe.conf.j2",
        live_check="modprobe",
        collector_sections=(Section.MODPARAM, Section.MODULE, Section.MODPROBE_CONFIG),
        image_check="modprobe",
    ),
    KindSpec(
        Kind.MODULE_LOAD,
        "Modules loaded at boot (modules-load.d)",
        key=_MODULE,
        value="",
        shape='a module name, with the value ""',
        file=in_overlay(layout.MODULES_LOAD_FILE),
        template="modules-load.conf.j2",
        live_step="modules",
        live_check="module-load",
        collector_sections=(Section.META, Section.MODULE),
        image_check="module-load",
    ),
    KindSpec(
        Kind.SYSFS,
        "sysfs values set at boot (tmpfiles.d)",
        key=rf"/sys(?:/(?!\.\.?(?:/|$)){_SYSFS_PART})+",
        value=r"[A-Za-z0-9_.:,/+%\[\]-]+(?: [A-Za-z0-9_.:,/+%\[\]-]+)*",
        shape="a path under /sys (globs allowed, no '..') with a value of words",
        file=in_overlay(layout.TMPFILES_FILE),
        template="tmpfiles.conf.j2",
        live_step="tmpfiles",
        live_check="sysfs",
        collector_sections=(Section.SYSFS,),
        image_check="sysfs",
    ),
    KindSpec(
        Kind.UDEV,
        "I/O schedulers (udev rules)",
        key=_one_of(DiskClass),
        value=_one_of(("none", "mq-deadline", "bfq", "kyber")),
        shape=f"a disk class ({', '.join(DiskClass)}) with none, mq-deadline, bfq or kyber",
        file=in_overlay(layout.UDEV_FILE),
        template="io-scheduler.rules.j2",
        live_step="udev",
        live_check="udev",
        collector_sections=(Section.BLOCK,),
        image_check="udev",
    ),
    KindSpec(
        Kind.TUNED,
        "tuned profile",
        key=r"[A-Za-z0-9_-]+\.[A-Za-z0-9_.*/-]+",
        value=r"[A-Za-z0-9_.,:=+/@%*()\[\] -]*",
        shape="'<section>.<option>' of tuned.conf (sysctl.vm.swappiness, cpu.governor)",
        # {tuned_dir}: the plan's tuned_dir less its leading '/' (where the target's tuned reads)
        file=in_overlay(layout.tuned_file("{profile}", "/{tuned_dir}")),
        template="tuned.conf.j2",
        live_step="tuned",
        live_check="tuned",
        collector_sections=(Section.SYSCTL, Section.SYSFS, Section.TUNED, Section.TUNED_LOG),
        collector_whole=WholeRead("tuned", "collect: the tuned profile the plan selects"),
        image_check="tuned",
    ),
    KindSpec(
        Kind.GPU,
        "GPU settings applied at boot (nvidia-smi)",
        key=_one_of(GpuAction),
        value=r"(?!)",
        values=MappingProxyType(
            {
                GpuAction.DRIVER_ROOT: re.escape(layout.OPERATOR_DRIVER_ROOT),
                GpuAction.PERSISTENCE: "on",
                GpuAction.ECC: "on|off",
                GpuAction.COMPUTE_MODE: "DEFAULT|EXCLUSIVE_PROCESS|PROHIBITED",
                GpuAction.CLOCKS: "max|reset|[1-9][0-9]{1,4}",
                GpuAction.POWER_LIMIT: "[1-9][0-9]{0,3}|(?:[1-9][0-9]?|100)%",
                GpuAction.MIG: "on|off",
                # the instances in nvidia-smi mig -cgi order: profile names, comma-separated
                GpuAction.MIG_LAYOUT: rf"{MIG_PROFILE_NAME}(?:,{MIG_PROFILE_NAME}){{0,6}}",
                GpuAction.MEMORY_PARTITION: "NPS1|NPS2|NPS4|NPS8",
                GpuAction.COMPUTE_PARTITION: "SPX|DPX|TPX|QPX|CPX",
            }
        ),
        shape=f"one of the GPU actions {', '.join(GpuAction)}",
        file=in_overlay(layout.GPU_DATA),
        template="gpu.conf.j2",
        live_check="gpu",
        collector_sections=(Section.GPU, Section.GPU_MIG, Section.GPU_AMD, Section.OWN_UNIT),
        # nvidia-smi's GPUs and the PCI functions of the plan's GPU vendors (every vendor's)
        collector_whole=WholeRead(
            "gpu", "collect: the GPUs the plan's nvidia-smi actions apply to"
        ),
        image_check="boot-unit",
        applied_at_boot_by=layout.GPU_UNIT,
    ),
    KindSpec(
        Kind.IRQ,
        "NIC interrupt affinity",
        key=IFNAME,
        value=rf"local|{CPULIST}",
        shape="an interface name mapped to a CPU list like 1-27,57-83, or local (read at boot)",
        file=in_overlay(layout.IRQ_DATA),
        template="irq.conf.j2",
        live_check="irq",
        collector_sections=(Section.IRQ,),
        image_check="boot-unit",
        applied_at_boot_by=layout.IRQ_UNIT,
    ),
    KindSpec(
        Kind.PCIE_ACS,
        "PCIe ACS turned off at boot (GPU peer-to-peer)",
        key=rf"gpus|nic {IFNAME}",
        value="off",
        shape="gpus (every NVIDIA GPU) or 'nic <interface>', with off: ACS of the PCIe root and "
        "downstream ports above them",
        file=in_overlay(layout.ACS_DATA),
        template="pcie-acs.conf.j2",
        live_check="pcie-acs",
        collector_sections=(Section.ACS, Section.OWN_UNIT, Section.OWN_UNIT_LOG),
        image_check="boot-unit",
        applied_at_boot_by=layout.ACS_UNIT,
    ),
    KindSpec(
        Kind.SERVICE,
        "Services enabled, disabled or masked",
        key=_UNIT,
        value=_one_of(ServiceAction),
        shape=f"a unit name (.{', .'.join(_UNIT_SUFFIXES)}) with enable, disable or mask",
        file=layout.INSTALL_LIST,
        template="install.list.j2",
        live_check="service",
        collector_sections=(
            Section.ACS,
            Section.GPU,
            Section.GPU_PCI,
            Section.UNIT_ENABLED,
            Section.UNIT_ACTIVE,
        ),
        image_check="service",
    ),
    KindSpec(
        Kind.UNIT_DROPIN,
        "Unit drop-ins for packaged units (systemd)",
        key="|".join(
            rf"(?:{_one_of(units)}) (?:{options})" for units, options in DROPIN_OPTIONS.items()
        ),
        value=r"infinity|[0-9]+(?::(?:[0-9]+|infinity))?|[0-9]+%",
        values=MappingProxyType(
            {
                # the program (absolute, or a bare name systemd >= 239 looks up in its own
                # search path) and its options: words, never a quote, '$', '%', ';' or '\\'
                f"{PERSISTENCED_UNIT} ExecStart": rf"{_PERSISTENCED_PROGRAM}(?: {_ARGUMENT})*",
                f"{PERSISTENCED_UNIT} WantedBy": _UNIT,
            }
        ),
        value_shapes=MappingProxyType(
            {
                f"{PERSISTENCED_UNIT} ExecStart": "nvidia-persistenced (or its absolute path) "
                "followed by options of letters, digits, '_', '.', '=' and '-'",
                f"{PERSISTENCED_UNIT} WantedBy": "one unit name",
            }
        ),
        shape=f"'<unit> <LimitX|TasksMax>' for {' or '.join(RUNTIME_UNITS)} with a number, "
        f"soft:hard or infinity; '{PERSISTENCED_UNIT} ExecStart' with the daemon's command "
        f"line, or '{PERSISTENCED_UNIT} WantedBy' with a unit",
        # one file per unit: {unit} is the unit the key names (the renderer writes each)
        file=in_overlay(layout.unit_dropin("{unit}")),
        template="unit-dropin.conf.j2",
        live_step="runtime",
        live_check="unit-dropin",
        collector_sections=(
            Section.UNIT_ENABLED,
            Section.RUNTIME_UNIT,
            Section.RUNTIME_LIMITS,
            Section.RUNTIME_CMDLINE,
        ),
        image_check="unit-dropin",
    ),
    KindSpec(
        Kind.CONTAINERD,
        "containerd configuration drop-in (conf.d)",
        key=rf"{_TOML_SEGMENT}(?:\.{_TOML_SEGMENT})+",
        value=_TOML_VALUE,
        shape='a dotted TOML key path (plugins."<id>".<table>.<key>) with a string, boolean or '
        "integer",
        file=in_overlay(layout.CONTAINERD_DROPIN),
        template="containerd.toml.j2",
        live_step="runtime",
        live_check="containerd",
        collector_sections=(Section.CONTAINERD_DUMP,),
        image_check="containerd",
    ),
    KindSpec(
        Kind.DOCKER,
        "Docker daemon configuration (daemon.json)",
        key=r"[a-z][a-z0-9-]*(?:\.[A-Za-z0-9_-]+)*",
        value=_JSON_VALUE,
        shape="a daemon.json key, dotted into nested objects (runtimes.nvidia.path), with a JSON "
        "string, boolean or integer",
        file=in_overlay(layout.DOCKER_DAEMON_JSON),
        template="daemon.json.j2",
        live_step="runtime",
        live_check="docker",
        collector_sections=(Section.DOCKER_INFO, Section.CONF, Section.CONF_LINE),
        image_check="docker",
    ),
    KindSpec(
        Kind.KUBELET,
        "kubelet configuration drop-in (kubelet.conf.d)",
        key=r"[a-z][A-Za-z0-9]*(?:/[A-Za-z0-9_.-]+)?",
        value=r"[A-Za-z0-9_.,:%+-]+",
        shape="a KubeletConfiguration field, or field/<map key> (kubeReserved/memory, "
        "reservedMemory/<NUMA node>), with a word, number or quantity",
        # {kubelet_dir}: the plan's kubelet_dir less its leading '/' (where the target's kubelet
        # reads drop-ins: kubeadm's kubelet.conf.d, or a node agent's --config-dir)
        file=in_overlay(layout.kubelet_file("/{kubelet_dir}")),
        template="kubelet.conf.j2",
        live_step="runtime",
        live_check="kubelet",
        collector_sections=(
            Section.RUNTIME_UNIT,
            Section.RUNTIME_CMDLINE,
            Section.KUBELET_FILE,
            Section.KUBELET_CONFIG,
        ),
        image_check="kubelet",
    ),
    KindSpec(
        Kind.NCCL,
        "NCCL defaults (/etc/nccl.conf)",
        key=r"NCCL_[A-Z0-9_]+",
        value=r"[A-Za-z0-9_.,:=^+/-]+",
        shape="an NCCL_* variable (NCCL_SOCKET_IFNAME) with a value without spaces, quotes or '#'",
        file=in_overlay(layout.NCCL_CONF),
        template="nccl.conf.j2",
        live_check="nccl",
        collector_sections=(Section.CONF, Section.CONF_LINE),
        image_check="nccl",
    ),
    KindSpec(
        Kind.RCCL,
        "RCCL defaults (/etc/rccl.conf)",
        key=r"NCCL_[A-Z0-9_]+",
        value=r"[A-Za-z0-9_.,:=^+/-]+",
        shape="an NCCL_* variable (NCCL_SOCKET_IFNAME) with a value without spaces, quotes or '#'",
        file=in_overlay(layout.RCCL_CONF),
        template="rccl.conf.j2",
        live_check="nccl",
        collector_sections=(Section.CONF, Section.CONF_LINE),
        image_check="nccl",
    ),
)

KIND_SPECS: Mapping[str, KindSpec] = MappingProxyType({spec.kind: spec for spec in KINDS})
SETTING_KINDS: tuple[str, ...] = tuple(str(spec.kind) for spec in KINDS)
KIND_ORDER: Mapping[str, int] = MappingProxyType({kind: i for i, kind in enumerate(SETTING_KINDS)})
KIND_TITLES: Mapping[str, str] = MappingProxyType({spec.kind: spec.title for spec in KINDS})
assert set(SETTING_KINDS) == set(Kind), "every Kind has exactly one row in KINDS"
