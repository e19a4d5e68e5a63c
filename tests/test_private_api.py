"""goldtune uses only the public API of the standard library, Jinja, pydantic and atexit (issue
25): a private name is not kept when a library changes, and the code that used it breaks
silently. ``_replace`` and the other underscore names of a named tuple are its documented API.

Fails on 241e11f, which used atexit._run_exitfuncs, pydantic.plugin._loader, json.encoder's
c_make_encoder and Jinja's root_render_func / new_context / make_globals.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

GENERATOR = Path(__file__).resolve().parent.parent / "generator"
# Names without a leading underscore that are still internals: not in the libraries'
# documentation, changed between their releases.
INTERNAL_NAMES = frozenset(
    {
        "c_make_encoder",  # json.encoder: the C accelerator behind JSONEncoder
        "root_render_func",  # jinja2.Template: the compiled body, called by render
        "new_context",  # jinja2.Template: render's own context
        "make_globals",  # jinja2.Environment: how a template's globals are chained
    }
)
NAMED_TUPLE_API = frozenset({"_replace", "_asdict", "_fields", "_make", "_field_defaults"})


def is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__") and name not in NAMED_TUPLE_API


def foreign(module: str | None) -> bool:
    return module is not None and module.split(".")[0] not in ("generator", "__future__")


def private_uses(tree: ast.AST) -> list[str]:
    """Each private or internal name of another package that ``tree`` imports or reads."""
    found: list[str] = []
    foreign_modules: set[str] = set()  # local names bound to another package's modules
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if foreign(alias.name):
                    foreign_modules.add(alias.asname or alias.name.split(".")[0])
                    found += [alias.name] if any(map(is_private, alias.name.split("."))) else []
        elif isinstance(node, ast.ImportFrom) and foreign(node.module) and node.level == 0:
            module = node.module or ""
            if any(map(is_private, module.split("."))):
                found.append(module)
            found += [
                f"{module}.{alias.name}"
                for alias in node.names
                if is_private(alias.name) or alias.name in INTERNAL_NAMES
            ]
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            if node.attr in INTERNAL_NAMES:
                found.append(node.attr)
            elif (
                is_private(node.attr)
                and isinstance(node.value, ast.Name)
                and node.value.id in foreign_modules
            ):
                found.append(f"{node.value.id}.{node.attr}")
    return found


@pytest.mark.parametrize(
    "path", sorted(GENERATOR.rglob("*.py")), ids=lambda path: str(path.relative_to(GENERATOR))
)
def test_no_private_api_of_another_package(path: Path) -> None:
    assert private_uses(ast.parse(path.read_text(encoding="utf-8"))) == []


@pytest.mark.parametrize(
    "source",
    [
        "import atexit\natexit._run_exitfuncs()",
        "from pydantic.plugin._loader import get_plugins",
        "from json.encoder import c_make_encoder",
        "t.root_render_func(t.new_context(c, shared=True))",
        "import os.path as p\np._joinrealpath",
    ],
)
def test_the_check_sees_each_kind_of_private_use(source: str) -> None:
    assert private_uses(ast.parse(source))


def test_the_check_lets_named_tuples_and_own_names_be() -> None:
    source = "from generator.x import _own\nplan._replace(a=1)\nself._cache\n"
    assert private_uses(ast.parse(source)) == []
