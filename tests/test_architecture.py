"""The pipeline visible in the tree: imports go one way, and verify never needs the renderer.

Packages, in the order of ``../shared/DESIGN.md``'s five steps, each importing only what is to its
left: model <- inputs <- rules <- plan <- render <- bundle <- commands <- cli. ``verify`` reads a
bundle and a source, so it imports only model, bundle and the leaf modules, and never Jinja.
Function-level imports count too (they are how the cycle of old hid).
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Callable
from functools import cache
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "generator"
# below everything
LEAVES = {
    "errors",
    "paths",
    "cache",
    "table",
    "textsafe",
    "foreign",
    "gcpause",
    "__init__",
    "release",  # the declared release (RELEASE), read by __init__ where _version is missing
    "_version",  # written at build time by hatch-vcs (pyproject.toml): the version string alone
}
ALLOWED: dict[str, set[str]] = {
    "model": set(),
    "inputs": {"model"},
    "rules": {"model", "inputs"},
    "plan": {"model", "inputs", "rules"},
    "render": {"model"},
    "bundle": {"model"},
    "verify": {"model", "bundle"},
    "detect": {"model", "inputs"},  # describes a machine in the input format
    "commands": {"model", "inputs", "rules", "plan", "render", "bundle", "verify", "detect"},
    "cli": {"model", "inputs", "rules", "plan", "render", "bundle", "verify", "detect", "commands"},
    "__main__": {"console"},
    "console": {"cli"},
}


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@cache
def imports_of() -> dict[str, set[str]]:
    """Every module of the package -> the generator modules it imports, anywhere in its body."""
    found: dict[str, set[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        name = module_name(path)
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if (
                isinstance(node, ast.ImportFrom)
                and node.module
                and node.module.startswith("generator")
            ):
                targets.add(node.module)
                targets.update(
                    f"{node.module}.{alias.name}"
                    for alias in node.names
                    if (PACKAGE.parent / f"{node.module}.{alias.name}".replace(".", "/"))
                    .with_suffix(".py")
                    .exists()
                    or (PACKAGE.parent / f"{node.module}.{alias.name}".replace(".", "/")).is_dir()
                )
            elif isinstance(node, ast.Import):
                targets.update(a.name for a in node.names if a.name.startswith("generator"))
        found[name] = targets
    return found


def layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def third_party(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module.split(".")[0])
        elif isinstance(node, ast.Import):
            names.update(a.name.split(".")[0] for a in node.names)
    return names


def test_every_package_is_in_the_table() -> None:
    layers = {layer(m) for m in imports_of()}
    assert layers - set(ALLOWED) - LEAVES == set()


def wrong_imports(module: str, targets: set[str]) -> list[str]:
    """The imports of ``module`` that go against the pipeline's direction."""
    own = layer(module)
    allowed = ALLOWED.get(own, set()) | LEAVES | {own}
    if own in LEAVES:
        allowed = LEAVES  # leaves import only leaves (errors, mostly); the cycle test still holds
    return sorted(t for t in targets if layer(t) not in allowed and t != "generator")


@pytest.mark.parametrize("module", sorted(imports_of()))
def test_imports_go_one_way(module: str) -> None:
    wrong = wrong_imports(module, imports_of()[module])
    assert wrong == [], (
        f"{module} may not import {wrong}: see ALLOWED in tests/test_architecture.py"
    )


def test_no_import_cycle() -> None:
    graph = {
        m: {t for t in targets if t in imports_of() and t != m}
        for m, targets in imports_of().items()
    }

    # Tarjan-free: a cycle exists iff some module reaches itself.
    def reaches(start: str) -> bool:
        seen: set[str] = set()
        stack = list(graph[start])
        while stack:
            current = stack.pop()
            if current == start:
                return True
            if current not in seen:
                seen.add(current)
                stack.extend(graph.get(current, ()))
        return False

    assert [m for m in graph if reaches(m)] == []


def test_verify_never_imports_jinja() -> None:
    for path in (PACKAGE / "verify").rglob("*.py"):
        assert "jinja2" not in third_party(path), path


def test_verify_at_run_time_loads_neither_the_renderer_nor_jinja() -> None:
    code = (
        "import sys, generator.verify.run; "
        "bad = sorted(m for m in sys.modules "
        "if m == 'jinja2' or m.startswith('generator.render')); "
        "print(bad); sys.exit(1 if bad else 0)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize(
    ("module", "target"),
    [
        ("generator.verify.run", "generator.render.render"),  # the cycle of old: verify re-rendered
        (
            "generator.rules.limits",
            "generator.plan.known_keys",
        ),  # a rule reaching into the plan step
        ("generator.model.kinds", "generator.inputs.catalog"),  # the records below everything
        ("generator.errors", "generator.model.setting"),  # a leaf
    ],
)
def test_the_checker_sees_a_back_edge(module: str, target: str) -> None:
    assert wrong_imports(module, {target}) == [target]


# What a plain `gen --hw … --profile … -o DIR` (a portable bundle) never uses, so never loads:
# each is imported inside the function that needs it (the cold run's CPU is issue 17's goal).
NOT_LOADED_BY_THE_MAIN_JOB = (
    "click.shell_completion",  # only when a shell asks for completions
    "generator.table",  # the tables of list, explain, rules and matrix
    "generator.inputs.distro",  # a portable bundle reads no distribution's tables
    "generator.commands.diff",
    "generator.commands.matrix",
    "generator.verify",
    "generator.detect",
)


def loaded_by_the_main_job(out: Path) -> set[str]:
    """The modules a fresh interpreter holds after writing a portable bundle to ``out``."""
    code = (
        "import sys\n"
        "from generator.cli import main\n"
        f"sys.argv = ['gen', '--hw', 'dgx-h100', '--profile', 'inference', '-o', {str(out)!r}]\n"
        "try:\n    main()\nexcept SystemExit as done:\n    assert not done.code, done.code\n"
        "print(' '.join(sorted(sys.modules)))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return set(done.stdout.splitlines()[-1].split())


def test_the_main_job_loads_nothing_only_other_commands_use(tmp_path: Path) -> None:
    loaded = loaded_by_the_main_job(tmp_path / "bundle")
    assert "generator.render.render" in loaded  # it did run
    eager = [
        name
        for name in NOT_LOADED_BY_THE_MAIN_JOB
        if any(m == name or m.startswith(f"{name}.") for m in loaded)
    ]
    assert eager == []


# The steps split by job (code-review-3 §3.5, W5): no module of theirs grows back past this.
MAX_MODULE_LINES = 600


def test_no_module_is_over_600_lines() -> None:
    """On main before the splits, render/delivery.py had 691 lines; before issue 25's last round
    inputs/hardware.py 789, verify/image.py 757, rules/gpu.py 709 and cli.py 663."""
    long = {
        str(path.relative_to(PACKAGE)): lines
        for path in sorted(PACKAGE.rglob("*.py"))
        if (lines := len(path.read_text().splitlines())) > MAX_MODULE_LINES
    }
    assert long == {}, f"split by job: {long}"


# One reader of a bundle's manifest and one Bundle type (code-review-3 W8).
BUNDLE_READER = PACKAGE / "bundle" / "read.py"


def manifest_parsers(path: Path) -> list[str]:
    """Calls in ``path`` that read and parse manifest.json themselves: ``json.loads`` (or the
    bundle JSON loader) of anything naming ``MANIFEST``. Copying its bytes (gen package) is not
    parsing it."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if not isinstance(node, ast.Call):
            continue
        name = getattr(node.func, "attr", getattr(node.func, "id", ""))
        if name not in ("loads", "load_bundle_json"):
            continue
        names = {n.id for arg in node.args for n in ast.walk(arg) if isinstance(n, ast.Name)}
        if "MANIFEST" in names:
            found.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}")
    return found


def outside_the_reader(finds: Callable[[Path], list[str]]) -> list[str]:
    """What ``finds`` finds in every module but bundle/read.py."""
    return [
        where
        for path in sorted(PACKAGE.rglob("*.py"))
        if path != BUNDLE_READER
        for where in finds(path)
    ]


def test_only_bundle_read_parses_a_manifest() -> None:
    """On main before the merge, verify/verdicts.py (load_manifest), bundle/write.py
    (read_manifest_paths), commands/fleet_check.py and commands/generate.py parsed it too."""
    others = outside_the_reader(manifest_parsers)
    assert others == [], f"read it with generator.bundle.read.read_manifest: {others}"


def bundle_classes(path: Path) -> list[str]:
    """Classes in ``path`` that stand for a bundle or a manifest entry and do not derive from
    bundle.read's Bundle (a rendered bundle read through its interface does)."""
    return [
        f"{path.relative_to(PACKAGE.parent)}:{node.name}"
        for node in ast.walk(ast.parse(path.read_text(), str(path)))
        if isinstance(node, ast.ClassDef)
        and (node.name.endswith(("Bundle", "BundleFiles")) or node.name.startswith("Manifest"))
        and not any(getattr(base, "id", "") == "Bundle" for base in node.bases)
    ]


def test_one_bundle_type() -> None:
    """On main before the merge, bundle/read.py had BundleFiles and verify/verdicts.py had Bundle
    and ManifestFile."""
    outside = outside_the_reader(bundle_classes)
    assert outside == [], f"use generator.bundle.read's Bundle and ManifestFile: {outside}"
