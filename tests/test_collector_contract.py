"""The contract between the collector and verify's live checks (code-review-3 W4, W7).

The collector (``templates/scripts/collect``) prints ``SECTION<TAB>KEY<TAB>VALUE`` records; the
live checks read them through ``Snapshot``, by ``generator.model.probes.Section`` only. Each row
of the kinds table (``generator.model.kinds``) names the sections its live check reads
(``KindSpec.collector_sections``). Here:

- every section the script prints is a ``Section``, and every ``Section`` is printed;
- each kind's live check reads only the sections its row declares (read from the check's code
  and every verify function it calls);
- each declared section is one the collector prints for a full plan, for each GPU vendor (its
  data file, as the renderer writes it, switches the script's sections on).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pytest

from generator.model.kinds import KINDS, KindSpec
from generator.model.probes import Section
from generator.model.vendors import GPU_VENDORS
from generator.render.collector import collect_lines
from generator.verify import live
from generator.verify.records import SMI_QUERY, GpuRecord
from tests.plans import full_plan

ROOT = Path(__file__).resolve().parent.parent
COLLECT = ROOT / "templates" / "scripts" / "collect"
VERIFY = ROOT / "generator" / "verify"
# The live side of verify: the image checks (image*.py) read an image, never a snapshot.
LIVE_MODULES = sorted(p for p in VERIFY.glob("*.py") if not p.name.startswith("image"))
# Live's fields parsed from a section once for every check (verify/live_state.py Live.of).
LIVE_FIELDS = {"cmdline": Section.CMDLINE, "disks": Section.BLOCK}
# The sections the vendor rows name (verify builds them: Section(spec.collector_section))
VENDOR_SECTIONS = {
    Section(spec.collector_section)
    for spec in GPU_VENDORS.values()
    if spec.collector_section in set(Section)
}

# --- the script ---------------------------------------------------------------------------------

FUNCTION = re.compile(r"^([a-z_]+)\(\) \{(.*?)^\}", re.M | re.S)
ONE_LINE_FUNCTION = re.compile(r"^([a-z_]+)\(\) \{(.*)\}$", re.M)
PRINTS = re.compile(r"(?:\brec|\beach_line) +([a-z][a-z-]*)\b|(?:printf \"|\\n)([a-z][a-z-]*)\\t")
# The main block: `[ -z "$sysctl" ] || collect_sysctl $sysctl`, `! wanted gpu || collect_gpu`.
GATED = re.compile(r'^\s*(?:\[ -z "\$([a-z_]+)" \]|! wanted ([a-z_-]+)) \|\| ([a-z_]+)', re.M)


@cache
def script_functions() -> dict[str, str]:
    text = COLLECT.read_text()
    found = dict(ONE_LINE_FUNCTION.findall(text))
    found.update(dict(FUNCTION.findall(text)))
    return found


def printed_by(function: str, seen: frozenset[str] = frozenset()) -> set[str]:
    """The sections ``function`` prints, through every script function it calls."""
    body = script_functions()[function]
    sections = {a or b for a, b in PRINTS.findall(body)}
    for callee in script_functions():
        if callee not in seen and callee != function and re.search(rf"\b{callee}\b", body):
            sections |= printed_by(callee, seen | {function})
    return sections - {"goldtune-snapshot"}


def main_block() -> str:
    text = COLLECT.read_text()
    return text[text.index("rec goldtune-snapshot begin 1") :]


def printed_for(data_sections: set[str]) -> set[str]:
    """What the script prints for a data file with these sections."""
    block = main_block()
    gated = {function for *_, function in GATED.findall(block)}
    always = {a or b for a, b in PRINTS.findall(block)} | printed_by("collect_meta")
    for list_section, whole_section, function in GATED.findall(block):
        if (list_section or whole_section) in data_sections:
            always |= printed_by(function)
    assert gated, "the collector's main block is not where this test looks"
    return always - {"goldtune-snapshot"}


@cache
def FULL_DATA_SECTIONS() -> tuple[str, ...]:  # noqa: N802 -- a constant, computed once
    """The data sections of a full plan's collect.conf, for each GPU vendor's GPUs."""
    plans = [full_plan(gpu_vendors=(vendor,)) for vendor in GPU_VENDORS]
    return tuple({line.fields[0] for plan in plans for line in collect_lines(plan)})


# --- the checks ---------------------------------------------------------------------------------


@cache
def verify_functions() -> dict[str, list[ast.FunctionDef]]:
    found: dict[str, list[ast.FunctionDef]] = {}
    for path in LIVE_MODULES:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.FunctionDef):
                found.setdefault(node.name, []).append(node)
    return found


@cache
def module_constants() -> dict[str, set[Section]]:
    """Module-level names bound to a Section (``SECTION = Section(...)``, gpu_amd.py)."""
    constants: dict[str, set[Section]] = {}
    for path in LIVE_MODULES:
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.Assign) and sections_named(node.value):
                for target in node.targets:
                    if isinstance(target, ast.Name):
                        constants[target.id] = sections_named(node.value)
    return constants


def sections_named(node: ast.AST) -> set[Section]:
    found = set()
    for child in ast.walk(node):
        if (
            isinstance(child, ast.Attribute)
            and isinstance(child.value, ast.Name)
            and child.value.id == "Section"
        ):
            found.add(Section[child.attr])
        elif isinstance(child, ast.Call) and getattr(child.func, "id", "") == "Section":
            found |= VENDOR_SECTIONS  # Section(<a vendor row's collector_section>): gpu_amd.SECTION
    return found


def called(node: ast.AST) -> Iterator[str]:
    for child in ast.walk(node):
        if isinstance(child, ast.Name) and child.id in verify_functions():
            yield child.id
        elif isinstance(child, ast.Attribute) and child.attr in verify_functions():
            yield child.attr


def sections_read(function: str) -> set[Section]:
    """Every Section named in ``function`` and the verify functions it reaches, and the
    sections behind the Live fields it reads."""
    found: set[Section] = set()
    pending, seen = [function], set()
    while pending:
        name = pending.pop()
        if name in seen:
            continue
        seen.add(name)
        for node in verify_functions()[name]:
            found |= sections_named(node)
            for child in ast.walk(node):
                if isinstance(child, ast.Name) and child.id in module_constants():
                    found |= module_constants()[child.id]
                if isinstance(child, ast.Attribute) and child.attr in LIVE_FIELDS:
                    found.add(LIVE_FIELDS[child.attr])
            pending.extend(called(node))
    return found


def live_check_name(spec: KindSpec) -> str:
    return live.CHECKS[spec.live_check].__name__


# --- the tests ----------------------------------------------------------------------------------


def test_every_section_the_script_prints_is_a_section() -> None:
    printed = set().union(*(printed_by(name) for name in script_functions()))
    printed |= {a or b for a, b in PRINTS.findall(main_block())}
    printed -= {"goldtune-snapshot"}
    assert printed == {str(section) for section in Section}, (
        "templates/scripts/collect and generator/model/probes.py Section differ: "
        f"only printed {sorted(printed - set(Section))}, "
        f"never printed {sorted(set(Section) - printed)}"
    )


@pytest.mark.parametrize("spec", KINDS, ids=lambda spec: spec.kind)
def test_a_live_check_reads_only_the_sections_its_row_declares(spec: KindSpec) -> None:
    read = sections_read(live_check_name(spec))
    undeclared = sorted(read - set(spec.collector_sections))
    assert not undeclared, (
        f"kind {spec.kind}: its live check reads {undeclared}, which its row in "
        "generator/model/kinds.py does not list in collector_sections: add them there"
    )


@pytest.mark.parametrize("spec", KINDS, ids=lambda spec: spec.kind)
def test_the_sections_a_row_declares_are_printed_for_a_full_plan(spec: KindSpec) -> None:
    printed = printed_for(set(FULL_DATA_SECTIONS()))
    missing = sorted(set(spec.collector_sections) - printed)
    assert not missing, (
        f"kind {spec.kind}: the collector prints no {missing} for a full plan "
        "(tests/plans.py full_plan, its collect.conf from generator/render/collector.py)"
    )


def test_the_checker_sees_a_section_read_that_a_row_leaves_out() -> None:
    """A broken row: the sysctl check reads the sysctl section, which this row does not list."""
    broken = next(spec for spec in KINDS if spec.kind == "sysctl")._replace(collector_sections=())
    with pytest.raises(AssertionError, match=r"reads \[<Section\.SYSCTL"):
        test_a_live_check_reads_only_the_sections_its_row_declares(broken)


def smi_query_of_the_script() -> tuple[str, ...]:
    """collect_gpu's ``fields=`` lines, joined as the script joins them."""
    body = script_functions()["collect_gpu"]
    lines = re.findall(r"^\s*fields=(\S+)$", body, re.M)
    return tuple(",".join(lines).replace("$fields,", "").split(","))


def test_the_gpu_record_names_the_fields_the_collector_queries() -> None:
    """GpuRecord's fields are nvidia-smi's, in order: a field added to the script's query and
    not to SMI_QUERY (or moved) would shift every field after it."""
    assert smi_query_of_the_script() == SMI_QUERY
    assert len(GpuRecord._fields) == len(SMI_QUERY)
