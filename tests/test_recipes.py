"""README's recipes, carried out (issue 43): "Adding a setting kind" and "Adding a distribution"
are followed step by step for a made-up kind and a made-up distribution, in a temporary copy of
the tree, editing exactly the files the recipe lists. The copy's own meta-tests then run and a
bundle renders with the new kind and for the new distribution. A registration the recipe does
not name (a hand list beside a table) fails here, in the copy; a recipe step this test does not
carry out fails the first test, which reads the README's list.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"
# What the copy needs to import, render and run its meta-tests; caches and snapshots are left.
COPIED = (
    "generator",
    "templates",
    "hardware_db",
    "profiles",
    "tests",
    "pyproject.toml",
    "README.md",
)
IGNORED = shutil.ignore_patterns("__pycache__", "__*_cache__", "__snapshots__", "*.pickle")

# --- the made-up kind: a journald.conf.d drop-in -----------------------------------------------

KIND = "journald"
KIND_ROW = """    KindSpec(
        Kind.JOURNALD,
        "journald settings (journald.conf.d)",
        key=r"[A-Z][A-Za-z]+",
        value=r"[A-Za-z0-9_.%]+",
        shape="a journald.conf(5) option with a value without spaces",
        file=in_overlay(layout.JOURNALD_FILE),
        template="journald.conf.j2",
        # a made-up kind judged by an existing check, as rccl is by nccl's
        live_check="systemd-manager",
        collector_sections=(Section.MANAGER,),
        image_check="systemd-manager",
    ),
"""
TEMPLATE = """{% set what = "journald settings, read when systemd-journald starts" %}
{{ file_header(what) }}

[Journal]
{% for s in settings %}
# {{ s | reason }}
{{ s.key }}={{ s.value }}
{% endfor %}
"""
JOURNALD_FILE = "/etc/systemd/journald.conf.d/90-goldtune.conf"


def insert_after(anchor: str, text: str) -> Callable[[str], str]:
    def edit(source: str) -> str:
        assert anchor in source, f"the recipe's anchor {anchor!r} is gone: update this test"
        return source.replace(anchor, anchor + text, 1)

    return edit


def insert_before(anchor: str, text: str) -> Callable[[str], str]:
    def edit(source: str) -> str:
        assert anchor in source, f"the recipe's anchor {anchor!r} is gone: update this test"
        return source.replace(anchor, text + anchor, 1)

    return edit


def new_file(text: str) -> Callable[[str], str]:
    return lambda _: text


# One edit per file of README's list, in its order.
KIND_STEPS: dict[str, Callable[[str], str]] = {
    "generator/model/kinds.py": lambda source: insert_before(
        "\n)\n\nKIND_SPECS", "\n" + KIND_ROW.rstrip("\n")
    )(insert_after('    RCCL = "rccl"\n', '    JOURNALD = "journald"\n')(source)),
    "generator/model/layout.py": insert_after(
        'MANAGER_FILE = f"/etc/systemd/system.conf.d/{DROP_IN}.conf"\n',
        'JOURNALD_FILE = f"/etc/systemd/journald.conf.d/{DROP_IN}.conf"\n',
    ),
    "generator/rules/base.py": lambda source: (
        source
        + "\n\ndef journald(option: str, value: object, reason: str) -> Setting:\n"
        + '    """One option of journald.conf.d."""\n'
        + '    return Setting("journald", option, _text(value), reason)\n'
    ),
    "templates/<template>.j2": new_file(TEMPLATE),
    "tests/plans.py": insert_after(
        "FULL_SETTINGS: tuple[Setting, ...] = (\n",
        '    setting("journald", "SystemMaxUse", "2G", "test.journald"),\n',
    ),
    "tests/test_plan.py": insert_after(
        '        "rccl",  # issue 31: /etc/rccl.conf, the file RCCL reads on AMD GPU nodes\n',
        '        "journald",\n',
    ),
}
TEMPLATE_PATH = "templates/journald.conf.j2"

# --- the made-up distribution: a rebuild of Debian 13 -------------------------------------------

DISTRO = "acmeos-13"
DISTRO_STEPS = ("hardware_db/distros/<key>.yaml", "README.md")


def recipe_files(heading: str, end: str) -> list[str]:
    """The first file each numbered step of a README recipe names."""
    text = README.read_text()
    start = text.index(heading)
    recipe = text[start : text.index(end, start)]
    steps = re.findall(r"^\d+\. `([^`]+)`", recipe, flags=re.MULTILINE)
    assert steps, f"README.md: {heading} has no numbered steps naming files"
    return steps


def kind_recipe() -> list[str]:
    return recipe_files("**Adding a setting kind**", "**Adding a GPU vendor**")


def distro_recipe() -> list[str]:
    return recipe_files("### Adding a distribution", "## Describing a machine")


def test_this_test_carries_out_every_step_of_the_recipes() -> None:
    assert kind_recipe() == list(KIND_STEPS), (
        "README.md's 'Adding a setting kind' steps and tests/test_recipes.py KIND_STEPS differ: "
        "a step added to one needs its edit (or its line) in the other"
    )
    count = re.search(r"\*\*Adding a setting kind\*\* touches (\d+) files", README.read_text())
    assert count and int(count.group(1)) == len(KIND_STEPS), "README.md says another number"
    # the third step of the distribution recipe is for a kernel version no list has yet
    assert distro_recipe()[: len(DISTRO_STEPS)] == list(DISTRO_STEPS)


def copy_tree(root: Path) -> Path:
    for name in COPIED:
        source = REPO / name
        if source.is_dir():
            shutil.copytree(source, root / name, ignore=IGNORED, symlinks=True)
        else:
            shutil.copy2(source, root / name)
    return root


def run(root: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(root), "PYTHONDONTWRITEBYTECODE": "1"}
    env.pop("GOLDTUNE_CATALOG", None)
    return subprocess.run(
        [sys.executable, *argv], cwd=root, env=env, capture_output=True, text=True, timeout=600
    )


def follow_the_kind_recipe(root: Path) -> None:
    for name, edit in KIND_STEPS.items():
        path = root / (TEMPLATE_PATH if name == "templates/<template>.j2" else name)
        path.write_text(edit(path.read_text() if path.exists() else ""))


def follow_the_distribution_recipe(root: Path) -> None:
    table = (root / "hardware_db/distros/debian-13.yaml").read_text()
    table = table.replace("key: debian-13\n", f"key: {DISTRO}\n", 1)
    table = table.replace("name: Debian GNU/Linux 13 (trixie)", "name: AcmeOS 13 (a test rebuild)")
    (root / f"hardware_db/distros/{DISTRO}.yaml").write_text(table)
    written = run(root, "tests/test_distro_list.py", "--write")
    assert written.returncode == 0, written.stderr


RENDER = f"""
from tests.plans import full_plan
from generator.render.render import render_bundle
from generator.commands.generate import render_for
files = render_bundle(full_plan())
text = files["rootfs{JOURNALD_FILE}"][0].decode()
assert "[Journal]" in text and "SystemMaxUse=2G" in text, text
bundle = render_for("dgx-h100", "inference", "{DISTRO}")
plan = bundle["plan.json"][0].decode()
assert '"{DISTRO}"' in plan, plan[:2000]
print("rendered")
"""


def test_a_made_up_kind_and_distribution_follow_the_readme(tmp_path: Path) -> None:
    root = copy_tree(tmp_path / "tree")
    follow_the_kind_recipe(root)
    follow_the_distribution_recipe(root)
    rendered = run(root, "-c", RENDER)
    assert rendered.returncode == 0 and "rendered" in rendered.stdout, rendered.stderr[-3000:]
    meta = run(
        root,
        "-m",
        "pytest",
        "-q",
        "-x",
        "-p",
        "no:cacheprovider",
        "-m",
        "not boot and not validators",
        "tests/test_kinds.py",
        "tests/test_checks.py",
        "tests/test_collector_contract.py",
        "tests/test_plan.py::test_explain_json_vocabulary_is_the_fixed_one",
        "tests/test_distro.py",
        "tests/test_distro_list.py",
        "tests/test_sysctl_lists.py",
        "tests/test_vendors.py::test_packaged_units_are_what_the_distro_tables_describe",
    )
    assert meta.returncode == 0, meta.stdout[-4000:]
