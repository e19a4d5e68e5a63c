"""The shortcuts taken for speed (issue 17) give exactly what the slow, obvious code gives."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path, PurePosixPath
from typing import Any

import pytest
import yaml
from hypothesis import example, given
from hypothesis import strategies as st

from generator.bundle.write import bundle_entries
from generator.commands.generate import plan_for
from generator.model import layout, shellform
from generator.model.setting import Plan, Setting
from generator.paths import templates_dir
from generator.render import tuned
from generator.render.cloudinit import CloudInitOptions
from generator.render.contexts import delivery_context
from generator.render.engine import fixed_script
from generator.render.formats import comment_text, explain_row
from generator.render.manifest import file_digests, manifest_entry
from generator.render.outputs import FIXED_SCRIPTS
from generator.render.render import render_bundle
from tests.plans import FULL_SETTINGS, setting


def scan(plan: Plan, kind: str) -> tuple[Any, ...]:
    return tuple(s for s in plan.settings if s.kind == kind)


def test_of_kind_is_a_scan_of_the_plan_asked() -> None:
    first = Plan("hw", "profile", FULL_SETTINGS)
    kinds = {s.kind for s in FULL_SETTINGS} | {"no-such-kind"}
    assert all(first.of_kind(kind) == scan(first, kind) for kind in kinds)
    # another plan, then the first again: neither is answered from the other's groups
    other = Plan("hw", "profile", (setting("sysctl", "vm.swappiness", "10"),))
    assert other.of_kind("sysctl") == scan(other, "sysctl")
    assert other.of_kind("limit") == ()
    assert first.of_kind("sysctl") == scan(first, "sysctl")
    # a plan whose settings are equal but another tuple is grouped anew, with the same answer
    copy = Plan("hw", "profile", FULL_SETTINGS[:1] + FULL_SETTINGS[1:])
    assert copy.of_kind("sysctl") == scan(first, "sysctl")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("plain", "plain"),
        ("two\nlines\r\n\tand  tabs\x7f", "two lines and tabs"),
        ("  edges \x00 ", "edges"),
    ],
)
def test_comment_text_is_the_same_escaped_twice(text: str, expected: str) -> None:
    assert comment_text(text) == expected
    assert comment_text(text) == expected  # from the cache


def walked_entries(directory: Path) -> set[str]:
    """bundle_entries by os.walk: symlinked folders listed, not descended into, and a real
    folder with nothing in it listed as ``name/`` (issue 41: a bundle has none)."""
    found: set[str] = set()
    for parent, dirs, names in os.walk(directory):
        relative = PurePosixPath(Path(parent).relative_to(directory))
        found.update(str(relative / name) for name in names)
        found.update(
            str(relative / name) for name in dirs if os.path.islink(os.path.join(parent, name))
        )
        if not dirs and not names and parent != str(directory):
            found.add(f"{relative}/")
    return {path.removeprefix("./") for path in found}


def test_bundle_entries_lists_what_os_walk_listed(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    (outside / "deep").mkdir(parents=True)
    (outside / "deep" / "secret").write_text("x")
    tree = tmp_path / "bundle"
    (tree / "rootfs" / "etc" / "sysctl.d").mkdir(parents=True)
    (tree / "empty" / "folder").mkdir(parents=True)
    (tree / "manifest.json").write_text("{}")
    (tree / "rootfs" / "etc" / "sysctl.d" / "90-goldtune.conf").write_text("")
    (tree / "rootfs" / "etc" / "linked-folder").symlink_to(outside)  # listed, not entered
    (tree / "rootfs" / "linked-file").symlink_to(outside / "deep" / "secret")
    (tree / "dangling").symlink_to(tmp_path / "nothing")
    os.mkfifo(tree / "rootfs" / "fifo")
    assert bundle_entries(tree) == walked_entries(tree)
    assert "rootfs/etc/linked-folder" in bundle_entries(tree)
    assert not any("secret" in path for path in bundle_entries(tree))
    assert bundle_entries(tmp_path / "missing") == walked_entries(tmp_path / "missing") == set()


def test_tuned_table_reads_the_same_with_libyaml() -> None:
    assert tuned.TABLE_LOADER is getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    pure = tuned.parsed_options(tuned.profiles_files(), yaml.SafeLoader)
    assert pure  # the table is read at all
    assert tuned.shipped_options() == pure


def open_quote_by_character(line: str, quote: str | None) -> str | None:
    """shellform._open_quote as it was: one character at a time."""
    escaped = False
    previous = " "
    for char in line:
        at_word_start, previous = previous in " \t;&|(", char
        if quote == "'":
            if char == "'":
                quote = None
            continue
        if escaped:
            escaped = False
            continue
        if char == "\\":
            escaped = True
        elif quote == '"':
            if char == '"':
                quote = None
        elif char in "'\"":
            quote = char
        elif char == "#" and at_word_start:
            break
    return quote


SHELL_LINES = st.text(st.sampled_from(list("'\"\\# \t;&|(a$x\n")), max_size=24)


@given(SHELL_LINES, st.sampled_from([None, "'", '"']))
def test_the_quote_scan_jumps_to_what_the_character_scan_finds(
    line: str, quote: str | None
) -> None:
    assert shellform._open_quote(line, quote) == open_quote_by_character(line, quote)


@pytest.mark.parametrize(
    "line",
    ["a # 'x\n", "a#'x\n", "(#'\n", "\\#'\n", "\\\\#'\n", "'#'\"\n", '"\\"\'\n', "x\\", '|#"\n'],
)
@pytest.mark.parametrize("quote", [None, "'", '"'])
def test_each_known_quote_case_is_scanned_every_run(line: str, quote: str | None) -> None:
    assert shellform._open_quote(line, quote) == open_quote_by_character(line, quote)


def test_the_shipped_scripts_lose_the_same_lines_as_by_the_character_scan(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for script in sorted((templates_dir() / layout.SCRIPTS_DIR).iterdir()):
        text = script.read_text()
        fast = shellform.derived_without_comment_lines(text)
        with monkeypatch.context() as patched:
            patched.setattr(shellform, "_open_quote", open_quote_by_character)
            assert shellform.derived_without_comment_lines(text) == fast, script.name


# A first line, then the rest: what the shared forms of the lines after a first one are keyed by.
SHELL_TEXTS = st.lists(SHELL_LINES, min_size=1, max_size=4).map("".join) | st.sampled_from(
    ["", "a", "a\r\n# b\nc\n", "a\rb\n# c\n", "a\x0b# b\n", "a\x85# b\n", "# x <<EOF\n# y\n"]
)


@given(SHELL_TEXTS)
@example("'\n# x\n")  # the first line opens a quote: the lines after it are the quote's
@example('"\n# x\n')
@example("cat <<EOF\n# x\nEOF\n")  # the first line opens a here-document
@example("a\n\n# c\nb\n")  # the line after the first is blank: dropped, as any but the first
@example("a\n# c\n")
def test_the_lines_after_a_first_are_shared_as_the_scan_reads_them(text: str) -> None:
    """without_comment_lines keeps the form of a text's lines after its first for every text
    with the same ones (shellform._rest_without_comment_lines): the scan of the whole text."""
    expected = shellform.derived_without_comment_lines(text)
    assert shellform.without_comment_lines(text) == expected
    for first in ("# another bundle\n", "x\n"):  # the same rest after another first line
        rest = text.partition("\n")[2]
        other = first + rest
        assert shellform.without_comment_lines(other) == (
            shellform.derived_without_comment_lines(other)
        )


@pytest.mark.parametrize("script", FIXED_SCRIPTS, ids=lambda output: output.path)
def test_a_fixed_scripts_digests_are_those_of_the_bytes_given(script: Any) -> None:
    """The fixed scripts' manifest digests are kept (manifest.fixed_file_digests); other bytes at
    a fixed script's path, before and after the shipped ones, are digested as they are."""
    shipped = fixed_script(script.template)
    changed = shipped.replace(b"\n", b"\n# changed\n", 1)
    copy = bytes(bytearray(shipped))  # equal, another object
    for content in (changed, shipped, shipped, changed, copy):
        entry = manifest_entry(script.path, content, script.mode)
        mode = f"{script.mode:04o}"
        assert entry == {"path": script.path, "mode": mode, **file_digests(script.path, content)}
        assert entry["sha256"] == hashlib.sha256(content).hexdigest()


def test_the_first_boot_entries_are_the_library_and_script_byte_for_byte() -> None:
    """user-data.j2 indents the library and the script: the entries cloud-init writes are
    them, byte for byte."""
    plan = plan_for("dgx-h100", "training-k8s")
    files = render_bundle(plan)
    first_boot = delivery_context(plan, files, CloudInitOptions())["first_boot"]
    user_data = yaml.safe_load(files[layout.USER_DATA][0])
    written = {entry["path"]: entry["content"] for entry in user_data["write_files"]}
    assert written[layout.FIRST_BOOT_LIB] == first_boot.library
    assert written[layout.FIRST_BOOT_SCRIPT] == first_boot.script


def test_an_explain_row_is_made_again_for_any_other_field() -> None:
    """explain_row is kept per setting (a matrix renders the same ones): a setting that differs
    from one already rendered in any field gets its own row, the one the function makes."""
    first = Setting("sysctl", "vm.x", "1", "why", "r.one", True, "0", "r.two", False)
    others = [
        first._replace(kind="kernel-arg"),
        first._replace(key="vm.y"),
        first._replace(value="2"),
        first._replace(reason="why not"),
        first._replace(rule="r.three"),
        first._replace(override=False),
        first._replace(original_value="9"),
        first._replace(original_rule="r.four"),
        first._replace(optional=True),
    ]
    for each in [first, *others, first, *others]:
        assert explain_row(each) == explain_row.__wrapped__(each), each


def test_a_plans_grouping_by_kind_cannot_be_changed_by_one_caller() -> None:
    # every caller of the same plan is handed the same grouping: one that wrote to it would
    # change what Plan.of_kind answers for the rest of the render
    from plans import full_plan

    from generator.model.setting import settings_by_kind

    plan = full_plan()
    grouping = settings_by_kind(plan.settings)
    with pytest.raises(TypeError):
        grouping["sysctl"] = ()  # type: ignore[index]
    assert settings_by_kind(plan.settings) is grouping
