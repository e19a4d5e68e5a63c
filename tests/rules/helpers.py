"""Small builders for rule tests: hardware facts, resolved profiles, and views of rule output.

``facts(**changes)`` deep-merges ``changes`` over a minimal machine (1 Intel socket, 8 cores x 2
threads, 64 GiB, no GPU, no NIC, no disk) and resolves it through the real validation path.
``profile(intent, **knobs)`` builds a resolved Profile whose other knobs are KNOB_DEFAULTS.
Each area test module lists its cases in ``CASES`` (a tuple of ``Case``); the registry meta-test
imports them to prove that every rule emits something somewhere.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from generator.inputs.catalog import Catalog, load_catalog
from generator.inputs.facts import Facts
from generator.inputs.hardware import deep_merge, resolve_facts
from generator.inputs.hardware_spec import HardwareSpec
from generator.inputs.profile import KNOB_DEFAULTS, KNOB_NAMES, Knobs, Override, Profile
from generator.model.setting import Note, Plan, Setting
from generator.rules.base import Rule

Triple = tuple[str, str, str]

BASE_HARDWARE: dict[str, Any] = {
    "name": "test",
    "cpu": {"vendor": "intel", "sockets": 1, "cores_per_socket": 8, "threads_per_core": 2},
    "memory_gib": 64,
}

# Reusable hardware fragments (lists replace, so a case states every GPU/NIC it wants).
H100X8 = {"model": "H100-SXM5-80GB", "count": 8}
L4X1 = {"model": "L4", "count": 1}
MI300X8 = {"model": "MI300X", "count": 8}  # AMD Instinct (issue 31)
DUAL_XEON = {
    "cpu": {
        "model": "Xeon-8480C",
        "vendor": "intel",
        "sockets": 2,
        "cores_per_socket": 56,
        "threads_per_core": 2,
    }
}
DUAL_EPYC = {
    "cpu": {
        "model": "EPYC-9654",
        "vendor": "amd",
        "sockets": 2,
        "cores_per_socket": 96,
        "threads_per_core": 2,
    }
}
GRACE = {
    "cpu": {
        "model": "Grace",
        "vendor": "nvidia",
        "sockets": 1,
        "cores_per_socket": 72,
        "threads_per_core": 1,
    }
}  # aarch64


def nic(
    name: str,
    role: str,
    speed: int | None = None,
    *,
    rdma: bool | None = None,
    numa: int | None = None,
    model: str | None = None,
) -> dict[str, Any]:
    """One entry of ``nics:`` as a user would write it (unset fields left out)."""
    entry: dict[str, Any] = {"name": name, "role": role}
    for key, value in (
        ("speed_gbps", speed),
        ("rdma", rdma),
        ("numa_node", numa),
        ("model", model),
    ):
        if value is not None:
            entry[key] = value
    return entry


def rdma_compute(
    name: str = "ib0", speed: int | None = 400, numa: int | None = 0
) -> dict[str, Any]:
    return nic(name, "compute", speed, rdma=True, numa=numa, model="ConnectX-7")


@cache
def catalog() -> Catalog:
    return load_catalog()


def hardware(**changes: Any) -> dict[str, Any]:
    return deep_merge(BASE_HARDWARE, changes)


def facts(**changes: Any) -> Facts:
    """Facts of the minimal machine with ``changes`` deep-merged (lists and scalars replace)."""
    spec = HardwareSpec.model_validate(hardware(**changes))
    return resolve_facts(spec, catalog(), "test.yaml")


def with_cpufreq_driver(base: Facts, driver: str | None) -> Facts:
    """The same facts with the CPU model's cpufreq driver replaced (no shipped CPU states EPP)."""
    assert base.cpu.model is not None, "give the case a cpu.model first"
    model = base.cpu.model.replace(cpufreq_driver=driver)
    return base._replace(cpu=base.cpu._replace(model=model))


def profile(
    intent: str, *, name: str = "test", overrides: Sequence[Mapping[str, Any]] = (), **knobs: Any
) -> Profile:
    """A resolved profile: ``intent`` is required, other knobs default to KNOB_DEFAULTS."""
    unknown = set(knobs) - set(KNOB_NAMES)
    assert not unknown, f"unknown knobs {unknown}"
    Knobs.model_validate({"intent": intent, **knobs})  # a typo in a test fails here, not silently
    values = {**KNOB_DEFAULTS, "intent": intent, **knobs}
    origins = {
        knob: ("test" if knob in knobs or knob == "intent" else "goldtune default")
        for knob in values
    }
    return Profile(
        name=name,
        description="test profile",
        chain=(name,),
        knobs=values,
        origins=origins,
        overrides=tuple(Override.model_validate(dict(o)) for o in overrides),
        source=f"{name}.yaml",
    )


Output = Plan | Iterable[Setting | Note]


def _items(output: Output) -> list[Setting | Note]:
    if isinstance(output, Plan):
        return [*output.settings, *output.notes]
    return list(output)


def settings_of(output: Output, kind: str | None = None) -> dict[str, str]:
    """``{key: value}`` of the settings of ``kind`` (all kinds keyed ``kind key`` when None)."""
    found: dict[str, str] = {}
    for item in _items(output):
        if isinstance(item, Setting) and (kind is None or item.kind == kind):
            found[item.key if kind else f"{item.kind} {item.key}"] = item.value
    return found


def triples(output: Output) -> set[Triple]:
    return {(s.kind, s.key, s.value) for s in _items(output) if isinstance(s, Setting)}


def notes_of(output: Output) -> list[str]:
    return [n.text for n in _items(output) if isinstance(n, Note)]


@dataclass(frozen=True)
class Case:
    """One row of an area table: a rule, a machine and a profile -> exactly these settings."""

    id: str
    rule: Rule
    expect: frozenset[Triple] | set[Triple]
    hw: Mapping[str, Any] = field(default_factory=dict)
    intent: str = "inference"
    knobs: Mapping[str, Any] = field(default_factory=dict)
    note: str | None = None  # a substring one of the rule's notes must contain
    tweak: Callable[[Facts], Facts] | None = None

    def facts(self) -> Facts:
        built = facts(**self.hw)
        return self.tweak(built) if self.tweak else built

    def profile(self) -> Profile:
        return profile(self.intent, **self.knobs)

    def run(self) -> list[Setting | Note]:
        return self.rule.apply(self.facts(), self.profile())


def check_case(case: Case) -> None:
    """Exactly the expected settings (nothing more), each stamped and explained."""
    output = case.run()
    assert triples(output) == set(case.expect)
    for item in output:
        assert item.rule == case.rule.id
        if isinstance(item, Setting):
            assert item.reason.strip(), f"{item.kind} {item.key} has no reason"
            assert not item.override
    if case.note is not None:
        assert any(case.note in text for text in notes_of(output)), notes_of(output)


def case_ids(cases: Iterable[Case]) -> list[str]:
    return [case.id for case in cases]
