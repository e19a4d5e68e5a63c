"""The unit of the plan: one setting, with the rule that decided it and why."""

# No `from __future__ import annotations`: a NamedTuple turns each string annotation into
# a compiled ForwardRef, ~0.15 ms a record at import (bench/bench.py's cold gen).
from collections.abc import Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Literal, NamedTuple

from generator.model.claims import Claim
from generator.model.kinds import KIND_ORDER, KIND_TITLES, SETTING_KINDS, Kind
from generator.model.layout import KUBELET_DROPIN_DIR, TUNED_DIR
from generator.model.vendors import GPU_VENDORS

# The kinds as a Literal, for the pydantic model of a profile override (strict mode validates a
# Literal from YAML text; it would refuse a plain string for the StrEnum), made from the kinds
# table so that a kind added there needs no edit here. mypy cannot read a Literal built at run
# time: it sees a str, as Setting.kind is (every kind is checked against the table at plan time).
if TYPE_CHECKING:
    SettingKind = str
else:
    SettingKind = Literal[SETTING_KINDS]
__all__ = [
    "KIND_ORDER",
    "KIND_TITLES",
    "SETTING_KINDS",
    "Kind",
    "Note",
    "OperatorValue",
    "Plan",
    "PlanWarning",
    "Setting",
    "SettingKind",
    "is_driver_module",
]

# Modules that come with a GPU vendor's driver, not with the kernel (generator/model/vendors.py).
# systemd-modules-load fails the boot's module loading when one is missing (an image built before
# the driver is installed), so the GPU boot unit loads them, guarded, instead of modules-load.d.
DRIVER_MODULE_PREFIXES = tuple(
    prefix for spec in GPU_VENDORS.values() for prefix in spec.driver_module_prefixes
)


def is_driver_module(name: str) -> bool:
    return name.startswith(DRIVER_MODULE_PREFIXES)


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
    # A service the rule enables only where the image has it (DCGM, a separate package): no
    # install.list "require" line, so install.sh --strict does not fail without it, and verify
    # says the unit is optional when it is absent.
    optional: bool = False

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
        if self.optional:
            data["optional"] = True
        return data


class Note(NamedTuple):
    """Something a rule decided *not* to set, said out loud (e.g. RDMA paths need no TCP sysctl)."""

    text: str
    rule: str = ""


class PlanWarning(NamedTuple):
    """A cross-check that passed with a caveat the reviewer should read."""

    text: str
    check: str


class NicRole(NamedTuple):
    """A NIC of the hardware file, in its order: what `gen diff` pairs a renamed NIC by (the
    n-th NIC of a role on one side with the n-th of that role on the other)."""

    name: str
    role: str


class OperatorValue(NamedTuple):
    """A Helm value of the NVIDIA GPU Operator's chart that the plan decided (os.driver
    nvidia-gpu-operator): its dotted path, its value, and why."""

    path: str
    value: str | bool
    reason: str


class Plan(NamedTuple):
    """Everything the bundle will carry, in a stable order; the single source of truth."""

    hardware_name: str
    profile_name: str
    settings: tuple[Setting, ...]
    notes: tuple[Note, ...] = ()
    warnings: tuple[PlanWarning, ...] = ()
    inputs: Mapping[str, str] = MappingProxyType({})  # role -> sha256 of the input file
    distro: str = ""  # the target distribution's key; "" for a portable bundle
    # The NVIDIA GPUs the hardware file describes: what `gen verify --strict` expects to find
    # (on the PCI bus and listed by the driver's nvidia-smi); 0 for a machine without them.
    nvidia_gpus: int = 0
    # Likewise the AMD GPUs: verify --strict wants amdgpu in an image unless the AMD GPU
    # Operator delivers it (driver)
    amd_gpus: int = 0
    # The vendors of the machine's GPUs, in vendor-table order: the fixed scripts' data files list
    # only their PCI ids. Not in plan.json: nothing renders from a plan read back, and an NVIDIA
    # plan.json stays what it was before there was a second vendor.
    gpu_vendors: tuple[str, ...] = ()
    nics: tuple[NicRole, ...] = ()  # the hardware file's NICs, in order
    # Whether the target's grub-mkconfig sources /etc/default/grub.d (its distro table's
    # boot_args.reads): RHEL's does not, so its bundles carry no drop-in; a portable bundle may
    # land on Debian or Ubuntu and keeps it.
    grub_dropins: bool = True
    # Where the target's tuned reads the bundle's profile (its distro table's tuned.profiles_dir,
    # layout.TUNED_PROFILES_DIRS): /etc/tuned/profiles from tuned 2.23 on; a portable bundle
    # keeps /etc/tuned.
    tuned_dir: str = TUNED_DIR
    # Where the target's kubelet reads the bundle's KubeletConfiguration drop-in (its distro
    # table's kubelet.config_dir, layout.KUBELET_DROPIN_DIRS): the directory a node agent passes
    # as --config-dir (EKS's nodeadm), with no kubelet.service drop-in; elsewhere kubeadm's
    # kubelet.conf.d, wired by that drop-in.
    kubelet_dir: str = KUBELET_DROPIN_DIR
    # The profile's reboot_for_kernel_args, when the plan has kernel arguments: an image's boot
    # check reboots once when one is not in effect (install.list's kernel-args-reboot line).
    reboot_for_kernel_args: bool = False
    # the hardware file's claims the plan depends on, which the preflight unit judges at boot
    claims: tuple[Claim, ...] = ()
    # os.driver: who delivers the GPU driver (host: in the image); verify --strict follows it
    driver: str = "host"
    # nvidia-gpu-operator: the chart values the site applies (gpu-operator/values.yaml); not in
    # plan.json, as nothing on the node reads them
    operator_values: tuple[OperatorValue, ...] = ()

    def of_kind(self, kind: str) -> tuple[Setting, ...]:
        return settings_by_kind(self.settings).get(kind, ())

    def get(self, kind: str, key: str) -> Setting | None:
        return next((s for s in self.settings if s.kind == kind and s.key == key), None)


# The settings of the plan asked last, grouped by kind: rendering one bundle asks ``of_kind``
# about 150 times, and a scan of every setting each time was a measurable share of a matrix
# bundle. One entry, held (so its id cannot be reused) and matched by identity: a plan is
# rendered whole before the next one is asked about.
_grouped: list[tuple[tuple[Setting, ...], Mapping[str, tuple[Setting, ...]]]] = []


def settings_by_kind(settings: tuple[Setting, ...]) -> Mapping[str, tuple[Setting, ...]]:
    """``settings`` grouped by kind, each group in plan order; read-only, as every caller of the
    same plan is given the same grouping."""
    last = _grouped[0] if _grouped else None  # one read: another thread may replace it
    if last is not None and last[0] is settings:
        return last[1]
    groups: dict[str, list[Setting]] = {}
    for setting in settings:
        groups.setdefault(setting.kind, []).append(setting)
    by_kind = MappingProxyType({kind: tuple(members) for kind, members in groups.items()})
    _grouped[:] = [(settings, by_kind)]
    return by_kind
