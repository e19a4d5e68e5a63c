"""What a rule is, and the small constructors rules use to propose settings.

A rule is a pure function of (Facts, Profile) that returns settings and notes. It is tagged with
an id and an area by ``@rule`` and listed once in ``generator.rules.REGISTRY``. A rule that reads
GPU facts declares the GPU vendors it applies to (``vendors=``, rows of
``generator/model/vendors.py``), and is given only the GPUs of those vendors: on a machine whose
GPUs are another vendor's it sees no GPU, so a GPU rule does not fire there.
"""

# No `from __future__ import annotations`: a NamedTuple turns each string annotation into
# a compiled ForwardRef, ~0.15 ms a record at import (bench/bench.py's cold gen).
from collections.abc import Callable, Iterable
from typing import NamedTuple

from generator.inputs.facts import Facts
from generator.inputs.profile import Profile
from generator.model.setting import Note, Setting

Output = Iterable[Setting | Note]
RuleFunc = Callable[[Facts, Profile], Output]


class Rule(NamedTuple):
    id: str
    area: str
    func: RuleFunc
    overrides: tuple[str, ...] = ()
    # the GPU vendors whose GPUs the rule is given; none: it sees a machine without GPUs
    vendors: tuple[str, ...] = ()

    @property
    def summary(self) -> str:
        doc = (self.func.__doc__ or "").strip()
        return doc.splitlines()[0] if doc else ""

    def apply(self, facts: Facts, profile: Profile) -> list[Setting | Note]:
        stamped: list[Setting | Note] = []
        for item in self.func(facts.seen_by(self.vendors), profile):
            if isinstance(item, Setting):
                stamped.append(item._replace(rule=self.id))
            else:
                stamped.append(Note(item.text, rule=self.id))
        return stamped


def rule(
    rule_id: str, overrides: tuple[str, ...] = (), vendors: tuple[str, ...] = ()
) -> Callable[[RuleFunc], Rule]:
    """Declare a rule; the area is the id's first part (``memory.swappiness`` -> memory).

    ``vendors``: the GPU vendors it applies to, required of every rule that reads a GPU fact
    (``inputs.facts.GPU_FACTS``; tests/test_registry.py checks it).
    """

    def wrap(func: RuleFunc) -> Rule:
        return Rule(rule_id, rule_id.split(".", 1)[0], func, overrides, vendors)

    return wrap


def _text(value: object) -> str:
    return str(value)


def sysctl(key: str, value: object, reason: str) -> Setting:
    return Setting("sysctl", key, _text(value), reason)


def kernel_arg(key: str, value: object, reason: str) -> Setting:
    return Setting("kernel-arg", key, _text(value), reason)


def limit(domain: str, kind: str, item: str, value: object, reason: str) -> Setting:
    return Setting("limit", f"{domain} {kind} {item}", _text(value), reason)


def manager_default(option: str, value: object, reason: str) -> Setting:
    return Setting("systemd-manager", option, _text(value), reason)


def blacklist(module: str, reason: str) -> Setting:
    return Setting("modprobe", f"blacklist {module}", "", reason)


def module_option(module: str, param: str, value: object, reason: str) -> Setting:
    return Setting("modprobe", f"options {module} {param}", _text(value), reason)


def load_module(module: str, reason: str) -> Setting:
    return Setting("module-load", module, "", reason)


def sysfs(path: str, value: object, reason: str) -> Setting:
    return Setting("sysfs", path, _text(value), reason)


def io_scheduler(match: str, scheduler: str, reason: str) -> Setting:
    return Setting("udev", match, scheduler, reason)


def tuned(section: str, option: str, value: object, reason: str) -> Setting:
    return Setting("tuned", f"{section}.{option}", _text(value), reason)


def gpu_action(action: str, value: object, reason: str) -> Setting:
    return Setting("gpu", action, _text(value), reason)


def irq_pin(interface: str, cpulist: str, reason: str) -> Setting:
    return Setting("irq", interface, cpulist, reason)


def acs_off(target: str, reason: str) -> Setting:
    """PCIe ACS off above ``target``: ``gpus`` (every NVIDIA GPU) or ``nic <interface>``."""
    return Setting("pcie-acs", target, "off", reason)


def nccl_default(variable: str, value: object, reason: str) -> Setting:
    """One ``NCCL_X=value`` line of /etc/nccl.conf (a job's environment still wins over it)."""
    return Setting("nccl", variable, _text(value), reason)


def rccl_default(variable: str, value: object, reason: str) -> Setting:
    """One ``NCCL_X=value`` line of /etc/rccl.conf, the file RCCL reads instead of nccl.conf."""
    return Setting("rccl", variable, _text(value), reason)


def service(unit: str, action: str, reason: str, optional: bool = False) -> Setting:
    """A unit enabled, disabled or masked; ``optional``: enabled only where the image has it."""
    return Setting("service", unit, action, reason, optional=optional)


def unit_dropin(unit: str, option: str, value: object, reason: str) -> Setting:
    return Setting("unit-dropin", f"{unit} {option}", _text(value), reason)


def toml_string(text: str) -> str:
    return f'"{text}"'


def containerd_option(path: str, value: object, reason: str) -> Setting:
    """``path`` is the dotted TOML key; a str value is written as a TOML string, a bool as
    true/false."""
    return Setting("containerd", path, _literal(value), reason)


def docker_option(path: str, value: object, reason: str) -> Setting:
    """``path`` is the daemon.json key, dotted into nested objects; the value as JSON spells it."""
    return Setting("docker", path, _literal(value), reason)


def kubelet_field(field: str, value: object, reason: str) -> Setting:
    """A KubeletConfiguration field, or ``field/<map key>`` for a map entry."""
    return Setting("kubelet", field, _text(value), reason)


def _literal(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    return toml_string(str(value))


def note(text: str) -> Note:
    return Note(text)


GIB = 1024**3
MIB = 1024**2
