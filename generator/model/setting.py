"""The unit of the plan: one setting, with the rule that decided it and why."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Literal, NamedTuple, get_args

# The fixed vocabulary of `gen explain --json` (a stable interface).
SettingKind = Literal[
    "sysctl", "kernel-arg", "limit", "systemd-manager", "modprobe", "module-load", "sysfs",
    "udev", "tuned", "gpu", "irq", "service",
]
SETTING_KINDS: tuple[str, ...] = get_args(SettingKind)
KIND_ORDER: dict[str, int] = {kind: index for index, kind in enumerate(SETTING_KINDS)}

# Modules that come with the NVIDIA driver, not with the kernel. systemd-modules-load fails the
# boot's module loading when one is missing (an image built before the driver is installed), so
# the GPU boot unit loads them, guarded, instead of modules-load.d.
DRIVER_MODULE_PREFIXES = ("nvidia",)


def is_driver_module(name: str) -> bool:
    return name.startswith(DRIVER_MODULE_PREFIXES)

# Files a setting of each kind ends up in (for EXPLAIN.md grouping and `gen diff`).
KIND_TITLES: dict[str, str] = {
    "sysctl": "Kernel parameters (sysctl.d)",
    "kernel-arg": "Kernel command line (GRUB drop-in)",
    "limit": "Login session limits (security/limits.d)",
    "systemd-manager": "systemd manager defaults (system.conf.d)",
    "modprobe": "Module blacklists and options (modprobe.d)",
    "module-load": "Modules loaded at boot (modules-load.d)",
    "sysfs": "sysfs values set at boot (tmpfiles.d)",
    "udev": "I/O schedulers (udev rules)",
    "tuned": "tuned profile",
    "gpu": "GPU settings applied at boot (nvidia-smi)",
    "irq": "NIC interrupt affinity",
    "service": "Services enabled, disabled or masked",
}
assert set(KIND_TITLES) == set(SETTING_KINDS)


class Setting(NamedTuple):
    """One value the bundle carries.

    ``kind``/``key``/``value`` follow the fixed vocabulary of ``gen explain --json``; ``value`` is
    always the text written to the target file (``""`` for a flag or a blacklist line).
    """

    kind: str
    key: str
    value: str
    reason: str
    rule: str = ""
    override: bool = False
    original_value: str | None = None  # the rule's value when a profile override won
    original_rule: str | None = None

    @property
    def target(self) -> tuple[str, str]:
        return (self.kind, self.key)

    def as_json(self) -> dict[str, object]:
        data: dict[str, object] = {
            "kind": self.kind,
            "key": self.key,
            "value": self.value,
            "rule": self.rule,
            "reason": self.reason,
        }
        if self.override:
            data["override"] = True
            data["original_value"] = self.original_value
            data["original_rule"] = self.original_rule
        return data


class Note(NamedTuple):
    """Something a rule decided *not* to set, said out loud (e.g. RDMA paths need no TCP sysctl)."""

    text: str
    rule: str = ""


class Warning(NamedTuple):
    """A cross-check that passed with a caveat the reviewer should read."""

    text: str
    check: str


class Plan(NamedTuple):
    """Everything the bundle will carry, in a stable order; the single source of truth."""

    hardware_name: str
    profile_name: str
    settings: tuple[Setting, ...]
    notes: tuple[Note, ...] = ()
    warnings: tuple[Warning, ...] = ()
    inputs: Mapping[str, str] = MappingProxyType({})  # role -> sha256 of the input file

    def of_kind(self, kind: str) -> tuple[Setting, ...]:
        return tuple(s for s in self.settings if s.kind == kind)

    def get(self, kind: str, key: str) -> Setting | None:
        return next((s for s in self.settings if s.kind == kind and s.key == key), None)
