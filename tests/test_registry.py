"""Registry meta-test (issue 3): ids, areas, docstrings, purity, and every rule exercised."""

from __future__ import annotations

import ast
import inspect
import json
import re
import textwrap
import types
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner
from rules import (
    test_boot,
    test_containers,
    test_cpu,
    test_gpu,
    test_hygiene,
    test_irq,
    test_kubernetes,
    test_limits,
    test_memory,
    test_network,
    test_storage,
)
from rules.helpers import Case, facts, profile

import generator.rules as rules_package
from generator.cli import main
from generator.inputs.facts import GPU_FACTS, Facts
from generator.inputs.load import load_inputs
from generator.inputs.profile import Profile
from generator.model.setting import Note
from generator.model.vendors import GPU_VENDORS
from generator.plan.build import build_plan
from generator.rules import REGISTRY, RULES_BY_ID
from generator.rules.base import Output, Rule
from generator.rules.base import rule as declare_rule

ROOT = Path(__file__).resolve().parents[1]
RULES_DIR = ROOT / "generator" / "rules"
RULE_TESTS_DIR = Path(__file__).resolve().parent / "rules"
ID_FORMAT = re.compile(r"^[a-z]+\.[a-z0-9-]+$")
AREAS = (
    "memory",
    "cpu",
    "gpu",
    "boot",
    "network",
    "irq",
    "limits",
    "storage",
    "hygiene",
    "containers",
    "kubernetes",
)
TABLES = (
    test_memory,
    test_cpu,
    test_gpu,
    test_boot,
    test_network,
    test_irq,
    test_limits,
    test_storage,
    test_hygiene,
    test_containers,
    test_kubernetes,
)
# Rules that only ever explain why nothing is set
# (TUNING.md: "say so instead of emitting settings").
NOTE_ONLY = {
    "gpu.amd-clocks",  # a note for gpu_clocks: lock-max (NOTE_ONLY_KNOBS)
    "network.rdma-paths",
    "gpu.vendor-profiles",
    "cpu.cfs-tunables",
    "network.gpu-numa-hints",
    "gpu.amd-environment",  # names AMD's HIP/HSA variables, writes no host default (D-A8)
    "network.rccl-conf",
    "containers.amd-devices",
    "network.amd-gpu-rdma",
}
# Imports a rule module may use: no I/O, no environment, no clock.
ALLOWED_IMPORTS = re.compile(
    r"^(__future__|collections\.abc|typing|dataclasses|generator(\.[a-z_.]+)?)$"
)


def all_cases() -> list[Case]:
    return [case for table in TABLES for case in table.CASES]


def test_registry_is_not_empty_and_covers_every_area() -> None:
    assert {rule.area for rule in REGISTRY} == set(AREAS)


@pytest.mark.parametrize("rule", REGISTRY, ids=lambda r: r.id)
def test_rule_id_area_and_home(rule: Rule) -> None:
    assert ID_FORMAT.match(rule.id), rule.id
    assert rule.area == rule.id.split(".", 1)[0]
    assert rule.area in AREAS
    assert rule.func.__module__.split(".")[:3] == ["generator", "rules", rule.area]
    assert Path(inspect.getfile(rule.func)) in area_files(rule.area)


@pytest.mark.parametrize("rule", REGISTRY, ids=lambda r: r.id)
def test_rule_has_a_docstring_summary(rule: Rule) -> None:
    assert rule.func.__doc__ and rule.func.__doc__.strip()
    summary = rule.summary
    assert summary == rule.func.__doc__.strip().splitlines()[0]
    assert 15 <= len(summary) <= 120, summary
    assert summary.endswith(".") and not summary[0].isspace(), summary


@pytest.mark.parametrize("rule", REGISTRY, ids=lambda r: r.id)
def test_declared_overrides_name_registered_rules(rule: Rule) -> None:
    assert set(rule.overrides) <= set(RULES_BY_ID) - {rule.id}


def test_ids_are_unique() -> None:
    ids = [rule.id for rule in REGISTRY]
    assert len(ids) == len(set(ids))
    assert set(RULES_BY_ID) == set(ids)
    assert len({rule.func for rule in REGISTRY}) == len(REGISTRY)


def test_every_rule_defined_in_an_area_module_is_registered() -> None:
    defined = {
        value.id
        for area in AREAS
        for value in vars(getattr(rules_package, area)).values()
        if isinstance(value, Rule)
    }
    assert defined == set(RULES_BY_ID)
    areas = {path.stem for path in RULES_DIR.glob("*.py")} | {
        path.parent.name for path in RULES_DIR.glob("*/__init__.py")
    }
    assert areas - {"__init__", "base"} == set(AREAS)


def area_files(area: str) -> list[Path]:
    """An area's module, or every module of its package (rules/gpu/: one per concept)."""
    package = RULES_DIR / area
    return sorted(package.glob("*.py")) if package.is_dir() else [RULES_DIR / f"{area}.py"]


@pytest.mark.parametrize(
    "path",
    [path for area in AREAS for path in area_files(area)],
    ids=lambda path: str(path.relative_to(RULES_DIR)),
)
def test_rule_modules_do_no_io(path: Path) -> None:
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = [node.module or ""]
        else:
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                assert node.func.id not in {"open", "print", "input", "exec", "eval"}, node.func.id
            continue
        assert all(ALLOWED_IMPORTS.match(name) for name in names), names


@pytest.mark.parametrize("rule", REGISTRY, ids=lambda r: r.id)
def test_rules_are_pure(rule: Rule) -> None:
    for case in [case for case in all_cases() if case.rule is rule]:
        machine, intent = case.facts(), case.profile()
        assert rule.apply(machine, intent) == rule.apply(machine, intent)


# --- GPU vendors: declared beside each rule that reads a GPU fact (cloud-init's module meta) ---


def gpu_facts_read(func: Callable[..., object], seen: set[object] | None = None) -> set[str]:
    """The GPU facts (``GPU_FACTS``) ``func`` reads, itself or through the functions of its own
    module and of the rule modules that it names (``coherent_gpu_models``): "function: .fact"."""
    seen = set() if seen is None else seen
    if func in seen:
        return set()
    seen.add(func)
    found: set[str] = set()
    for node in ast.walk(ast.parse(textwrap.dedent(inspect.getsource(func)))):
        if isinstance(node, ast.Attribute) and node.attr in GPU_FACTS:
            found.add(f"{func.__name__}: .{node.attr}")
            continue
        if isinstance(node, ast.Name):
            named = getattr(func, "__globals__", {}).get(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            owner = getattr(func, "__globals__", {}).get(node.value.id)
            named = getattr(owner, node.attr, None) if isinstance(owner, types.ModuleType) else None
        else:
            continue
        if isinstance(named, types.FunctionType) and (
            named.__module__.startswith("generator.rules") or named.__module__ == func.__module__
        ):
            found |= gpu_facts_read(named, seen)
    return found


def vendor_declaration_problem(checked: Rule) -> str | None:
    """What is wrong with a rule's ``vendors``, or None: a rule that reads a GPU fact names the
    GPU vendors it applies to, from the vendor table, and a rule that reads none names none."""
    reads = sorted(gpu_facts_read(checked.func))
    if reads and not checked.vendors:
        return (
            f"rule {checked.id} reads GPU facts ({'; '.join(reads)}) but declares no GPU "
            "vendor: add vendors=(GpuVendor.X, ...) to its @rule, the vendors whose GPUs it "
            "knows (generator/model/vendors.py)"
        )
    if checked.vendors and not reads:
        return f"rule {checked.id} declares vendors {checked.vendors} but reads no GPU fact"
    if unknown := set(checked.vendors) - set(GPU_VENDORS):
        return f"rule {checked.id}: {sorted(unknown)} not in generator/model/vendors.py"
    return None


@pytest.mark.parametrize("checked", REGISTRY, ids=lambda r: r.id)
def test_every_gpu_rule_declares_its_vendors(checked: Rule) -> None:
    assert vendor_declaration_problem(checked) is None


def _gpu_helper(facts: Facts) -> bool:
    return facts.gpu_count > 1


@declare_rule("gpu.undeclared")
def _undeclared(facts: Facts, profile: Profile) -> Output:
    """A broken rule: it reads a GPU fact, through a helper, and declares no vendor."""
    if _gpu_helper(facts):
        yield Note("many GPUs")


@declare_rule("gpu.declared", vendors=("nvidia",))
def _declared(facts: Facts, profile: Profile) -> Output:
    """The same rule, declaring the vendor whose GPUs it knows."""
    if _gpu_helper(facts):
        yield Note("many GPUs")


def test_the_vendor_check_catches_a_rule_that_declares_none() -> None:
    """The meta-test above, shown failing on a broken rule (and passing on its fixed twin)."""
    problem = vendor_declaration_problem(_undeclared)
    assert problem is not None
    assert "reads GPU facts (_gpu_helper: .gpu_count) but declares no GPU vendor" in problem
    assert vendor_declaration_problem(_declared) is None
    assert "declares vendors ('nvidia',) but reads no GPU fact" in str(
        vendor_declaration_problem(RULES_BY_ID["memory.swappiness"]._replace(vendors=("nvidia",)))
    )
    unknown = vendor_declaration_problem(_declared._replace(vendors=("acme",)))
    assert "['acme'] not in" in str(unknown)


# --- every rule exercised ------------------------------------------------------------------


def rule_test_sources() -> str:
    return "\n".join(path.read_text() for path in sorted(RULE_TESTS_DIR.glob("test_*.py")))


@pytest.mark.parametrize("rule", REGISTRY, ids=lambda r: r.id)
def test_every_rule_is_named_in_a_rule_test(rule: Rule) -> None:
    """The id, or the module attribute that holds the rule (``memory.thp_mode``)."""
    sources = rule_test_sources()
    reference = f"{rule.area}.{rule.func.__name__}"
    assert rule.id in sources or re.search(rf"\b{re.escape(reference)}\b", sources), (
        f"{rule.id} is named in no test of tests/rules/: add its cases to "
        f"tests/rules/test_{rule.area}.py"
    )


@pytest.mark.parametrize("rule", REGISTRY, ids=lambda r: r.id)
def test_every_rule_has_a_table(rule: Rule) -> None:
    mine = [case for case in all_cases() if case.rule is rule]
    assert mine, f"{rule.id} has no case in tests/rules/test_{rule.area}.py"
    assert all(case in TABLES[AREAS.index(rule.area)].CASES for case in mine), (
        f"{rule.id}: a case outside tests/rules/test_{rule.area}.py CASES: move it there"
    )


def emitted_in_shipped_plans() -> tuple[set[str], set[str]]:
    settings_from, notes_from = set(), set()
    for system in sorted((ROOT / "hardware_db" / "systems").glob("*.yaml")):
        for prof in sorted((ROOT / "profiles").glob("*.yaml")):
            inputs = load_inputs(system.stem, prof.stem)
            built = build_plan(inputs.facts, inputs.profile)
            settings_from |= {setting.rule for setting in built.settings}
            notes_from |= {note.rule for note in built.notes}
    return settings_from, notes_from


def test_every_rule_emits_something_somewhere() -> None:
    settings_from, notes_from = emitted_in_shipped_plans()
    for case in all_cases():
        for item in case.run():
            (notes_from if isinstance(item, Note) else settings_from).add(item.rule)
    assert set(RULES_BY_ID) - (settings_from | notes_from) == set()
    assert set(RULES_BY_ID) - settings_from == NOTE_ONLY


# The knobs under which a note-only rule speaks, where the training defaults do not ask it.
NOTE_ONLY_KNOBS: dict[str, dict[str, str]] = {"gpu.amd-clocks": {"gpu_clocks": "lock-max"}}


def test_note_only_rules_really_set_nothing() -> None:
    machine = facts(
        # both vendors: each note-only rule declares one of them (gpu.amd-environment: AMD)
        gpus=[{"model": "H100-SXM5-80GB", "count": 8}, {"model": "MI300X", "count": 8}],
        nics=[
            {"name": f"ib{i}", "role": "compute", "rdma": True, "speed_gbps": 400} for i in range(2)
        ],
    )
    for rule_id in NOTE_ONLY:
        knobs = NOTE_ONLY_KNOBS.get(rule_id, {})
        output = RULES_BY_ID[rule_id].apply(machine, profile("training", **knobs))
        assert output and all(isinstance(item, Note) for item in output)


# --- `gen rules` ---------------------------------------------------------------------------


def test_gen_rules_lists_every_rule() -> None:
    result = CliRunner().invoke(main, ["rules"])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["ID", "AREA", "SUMMARY"]
    listed = [line.split()[0] for line in lines[1:] if line.strip()]
    assert listed == [rule.id for rule in REGISTRY]
    for rule, line in zip(REGISTRY, lines[1:], strict=False):  # the count is asserted above
        assert line.split()[1] == rule.area and rule.summary in line


def test_gen_rules_json() -> None:
    result = CliRunner().invoke(main, ["rules", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert [row["id"] for row in data] == [rule.id for rule in REGISTRY]
    assert all(row["area"] and row["summary"] for row in data)
