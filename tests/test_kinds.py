"""Meta-tests of the setting-kind table, in the style of the rule registry's
(tests/test_registry.py).

Every kind has a grammar, a title, a file that carries it, a constructor rules use, a check for a
live snapshot and a check for a mounted image (or names the unit that applies it at boot). A row
that names something that does not exist fails here with a message saying where to add it.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Collection, Iterable
from pathlib import Path

import pytest
from plans import full_plan

from generator.model.kinds import (
    KIND_SPECS,
    KIND_TITLES,
    KINDS,
    SETTING_KINDS,
    Kind,
    KindSpec,
)
from generator.render import overlay
from generator.render.render import render_bundle
from generator.verify import image, live

REPO = Path(__file__).resolve().parent.parent
BASE = REPO / "generator" / "rules" / "base.py"
TEMPLATES = REPO / "templates"
INSTALL_LIB = TEMPLATES / "scripts" / "install-lib.sh"


def missing_checks(
    kinds: Iterable[KindSpec], live_checks: Collection[str], image_checks: Collection[str]
) -> list[str]:
    """What a row names that verify does not have, each with the place to add it."""
    problems = []
    for spec in kinds:
        if spec.live_check not in live_checks:
            problems.append(
                f"kind {spec.kind}: live check {spec.live_check!r} is not in "
                "generator/verify/live.py CHECKS: add it there"
            )
        if spec.image_check not in image_checks:
            problems.append(
                f"kind {spec.kind}: image check {spec.image_check!r} is not in "
                "generator/verify/image.py CHECKS: add it there"
            )
        if (spec.image_check == "boot-unit") != (spec.applied_at_boot_by is not None):
            problems.append(
                f"kind {spec.kind}: image_check 'boot-unit' and applied_at_boot_by go "
                "together in generator/model/kinds.py: name the unit that applies it"
            )
    return problems


def test_every_kind_has_a_live_and_an_image_check() -> None:
    assert missing_checks(KINDS, live.CHECKS, image.CHECKS) == []


def test_a_kind_without_a_check_fails_with_where_to_add_it() -> None:
    broken = KINDS[0]._replace(live_check="no-such-check", image_check="no-such-check")
    problems = missing_checks([broken], live.CHECKS, image.CHECKS)
    assert len(problems) == 2
    assert "generator/verify/live.py CHECKS" in problems[0]
    assert "generator/verify/image.py CHECKS" in problems[1]
    unnamed = KIND_SPECS[Kind.GPU]._replace(applied_at_boot_by=None)
    assert "name the unit" in missing_checks([unnamed], live.CHECKS, image.CHECKS)[0]


@pytest.mark.parametrize("table", ["live", "image"])
def test_no_check_is_dead(table: str) -> None:
    used = {spec.live_check if table == "live" else spec.image_check for spec in KINDS}
    checks = live.CHECKS if table == "live" else image.CHECKS
    assert set(checks) - used == set(), f"checks in generator/verify/{table}.py no kind names"


def test_the_table_is_the_vocabulary() -> None:
    assert tuple(Kind) == SETTING_KINDS and set(KIND_TITLES) == set(Kind)
    assert [spec.kind for spec in KINDS] == list(Kind), (
        "generator/model/kinds.py: each Kind member needs its KindSpec row in KINDS, in order"
    )


@pytest.mark.parametrize("spec", KINDS, ids=lambda spec: str(spec.kind))
def test_every_kind_has_a_grammar_that_compiles(spec: KindSpec) -> None:
    for pattern in (spec.key, spec.value, *spec.values.values()):
        re.compile(pattern)
    assert spec.shape and spec.title, f"kind {spec.kind}: its row needs a shape and a title"
    assert all(spec.key_fits(key) for key in spec.values), (
        f"kind {spec.kind}: its row's values are only for keys of the kind"
    )


def constructed_kinds() -> set[str]:
    """The kinds rules/base.py's constructors build (the first argument of each Setting(...))."""
    tree = ast.parse(BASE.read_text())
    return {
        call.args[0].value
        for call in ast.walk(tree)
        if isinstance(call, ast.Call)
        and isinstance(call.func, ast.Name)
        and call.func.id == "Setting"
        and call.args
        and isinstance(call.args[0], ast.Constant)
        and isinstance(call.args[0].value, str)
    }


def test_every_kind_has_a_constructor_rules_use() -> None:
    assert set(Kind) - constructed_kinds() == set(), "add a constructor to generator/rules/base.py"


def test_every_kind_file_is_in_the_bundle() -> None:
    """The file each row names is rendered for a plan that uses the kind (full_plan uses all)."""
    plan = full_plan()
    files = set(render_bundle(plan))
    assert {s.kind for s in plan.settings} == set(Kind), (
        "tests/plans.py FULL_SETTINGS: one of each kind"
    )
    for spec in KINDS:
        # a {unit} file is one per unit the plan's keys name (unit-dropin: containerd, docker)
        keys = [s.key for s in plan.of_kind(spec.kind)]
        for path in spec.files_for(plan.profile_name, keys):
            assert path in files, f"{spec.kind}: {path}"


def missing_pieces(kinds: Iterable[KindSpec], templates: Path, install_lib: str) -> list[str]:
    """A row's template and live step must exist, each with the place to add it."""
    problems = []
    steps = set(re.findall(r"^step_([a-z_]+)\(\)", install_lib, flags=re.MULTILINE))
    for spec in kinds:
        if not (templates / spec.template).is_file():
            problems.append(
                f"kind {spec.kind}: template {spec.template!r}: add templates/{spec.template}"
            )
        if spec.live_step is None:
            continue
        if spec.live_step not in steps:
            problems.append(
                f"kind {spec.kind}: live step {spec.live_step!r}: add step_{spec.live_step}() "
                "to templates/scripts/install-lib.sh"
            )
        if spec.live_step not in overlay.STEP_SUMMARIES:
            problems.append(
                f"kind {spec.kind}: live step {spec.live_step!r}: add it to "
                "generator/render/overlay.py STEP_SUMMARIES"
            )
    return problems


def test_every_kind_has_its_template_and_live_step() -> None:
    assert missing_pieces(KINDS, TEMPLATES, INSTALL_LIB.read_text()) == []


def test_a_kind_without_template_or_step_fails_with_where_to_add_it() -> None:
    broken = KINDS[0]._replace(template="no-such.conf.j2", live_step="no_such")
    problems = missing_pieces([broken], TEMPLATES, INSTALL_LIB.read_text())
    assert len(problems) == 3
    assert "add templates/no-such.conf.j2" in problems[0]
    assert "add step_no_such() to templates/scripts/install-lib.sh" in problems[1]
    assert "overlay.py STEP_SUMMARIES" in problems[2]


def test_a_new_kind_template_gets_its_settings() -> None:
    """A kind's template reads ``settings``: adding a kind needs no context code in render."""
    from generator.render.contexts import output_context
    from generator.render.outputs import KIND_OUTPUTS

    plan = full_plan()
    for output in KIND_OUTPUTS:
        context = output_context(output, plan, {})
        assert context["settings"] == plan.of_kind(output.kinds[0])
