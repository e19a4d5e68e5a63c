"""The shortcuts taken for speed (issue 17) give exactly what the slow, obvious code gives."""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path, PurePosixPath
from typing import Any

import jinja2
import pytest
import yaml
from hypothesis import example, given, settings
from hypothesis import strategies as st
from jinja2.filters import do_indent
from markupsafe import Markup

from generator.bundle.write import bundle_entries
from generator.commands.generate import plan_for
from generator.errors import GenerationError
from generator.model import jsontext, layout, shellform
from generator.model.jsontext import dumps_indented
from generator.model.planio import plan_to_data, plan_to_json
from generator.model.setting import Note, Plan, PlanWarning, Setting
from generator.paths import templates_dir
from generator.render import delivery, firstboot, tuned
from generator.render.delivery import (
    MERGE_HOW,
    STEP_COMMANDS,
    CloudInitOptions,
    OverlayFile,
    Step,
    check_user_data,
    first_boot_command,
    first_boot_files,
    overlay_files,
    reads_back_verbatim,
)
from generator.render.firstboot import (
    MAIN_MARKER,
    FirstBootScript,
    first_boot_script,
    first_boot_words,
)
from generator.render.formats import comment_text, explain_row, sh_quote
from generator.render.render import (
    FIXED_SCRIPTS,
    OUTPUTS,
    Output,
    bundle_context,
    delivery_context,
    file_digests,
    fixed_script,
    indent_lines,
    make_environment,
    manifest_entry,
    output_context,
    render_bundle,
    render_text,
)
from tests.plans import FULL_SETTINGS, setting

SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()  # NaN and the infinities too: json writes them by default
    | st.text()  # every code point, escaped to ASCII
)
JSON_VALUES = st.recursive(
    SCALARS,
    lambda children: (
        st.lists(children, max_size=4)
        | st.tuples(children, children)
        | st.dictionaries(st.text(max_size=6), children, max_size=4)
    ),
    max_leaves=30,
)


@given(JSON_VALUES)
def test_indented_json_is_json_dumps_byte_for_byte(value: Any) -> None:
    assert dumps_indented(value) == json.dumps(value, indent=2, sort_keys=True)


# Lists of flat objects, the shape jsontext hands to the C encoder whole (plan.json's settings):
# texts with the brackets, commas and newlines its splice looks for, and now and then an empty
# object or a nested one, which keep the list off that path.
RECORD_TEXT = st.text(alphabet=st.sampled_from('{}[],:" \n\t\\ab\x00\u00e9\U0001f600'), max_size=8)
RECORD = st.dictionaries(RECORD_TEXT, SCALARS | RECORD_TEXT, min_size=1, max_size=5)
RECORDS = st.lists(RECORD, min_size=1, max_size=5)
# The texts a splice on the wrong separator would cut: json's compact separators, a record
# boundary as the compact text has it, and one with the newline its separator has here.
SPLICE_TRAPS = ['a, "b": c', '"}, {"', "}, {", '"},\n    {"', "}\n{", "{}", "[]"]


@settings(max_examples=200)  # pure and cheap: more than the profile's dozen
@given(st.lists(RECORD | st.just({}) | st.just({"a": [1]}), max_size=5), st.integers(0, 3))
def test_indented_lists_of_records_are_json_dumps_byte_for_byte(
    records: list[Any], depth: int
) -> None:
    value: Any = records
    for _ in range(depth):
        value = {"records": value}
    assert dumps_indented(value) == json.dumps(value, indent=2, sort_keys=True)


@settings(max_examples=200)
@given(RECORDS, st.sampled_from(["\n", "\n  ", "\n    "]))
@example(
    [{"reason": trap, "key": trap} for trap in SPLICE_TRAPS] + [dict.fromkeys(SPLICE_TRAPS, 1)],
    "\n  ",
)
def test_records_from_the_c_encoder_are_the_indented_text(records: Any, newline: str) -> None:
    # the splice itself, at each depth: json.dumps's lines of the list, indented as if nested
    expected = json.dumps(records, indent=2, sort_keys=True).replace("\n", newline)
    assert jsontext._records_text(records, newline) == expected


@pytest.mark.parametrize(
    "value",
    [
        {1: "a", "b": 2},  # a key json converts to text
        {"when": object()},  # not JSON at all
        [float("nan"), float("-inf"), 1e300, -0.0],
    ],
)
def test_indented_json_leaves_the_rest_to_json(value: Any) -> None:
    try:
        expected = json.dumps(value, indent=2, sort_keys=True)
    except (TypeError, ValueError) as error:
        with pytest.raises(type(error), match=str(error)):
            dumps_indented(value)
        return
    assert dumps_indented(value) == expected


def test_indented_json_reports_a_cycle_as_json_does() -> None:
    looped: list[Any] = []
    looped.append(looped)
    with pytest.raises(ValueError, match="Circular reference"):
        dumps_indented(looped)


def encoded_parts(value: Any, draw: Any) -> Any:
    """``value`` with some of its lists' items and objects' members replaced by their text."""
    if draw(st.booleans()):
        return jsontext.Encoded(dumps_indented(value))
    if isinstance(value, list):
        return [encoded_parts(item, draw) for item in value]
    if isinstance(value, dict):
        return {key: encoded_parts(item, draw) for key, item in value.items()}
    return value


@settings(max_examples=100)
@given(st.lists(JSON_VALUES | RECORD, max_size=4), st.integers(0, 2), st.data())
@example([{"a": [1, {"b": "c"}]}, [], {}], 1, None)  # None: every item encoded
def test_encoded_values_are_written_as_the_values_themselves(
    items: list[Any], depth: int, data: Any
) -> None:
    """An Encoded value is written as its value would be, at any depth (jsontext.Encoded)."""
    value: Any = items
    for _ in range(depth):
        value = {"nested": value}
    if data is None:
        parts: Any = [jsontext.Encoded(dumps_indented(item)) for item in items]
        for _ in range(depth):
            parts = {"nested": parts}
    else:
        parts = encoded_parts(value, data.draw)
    assert dumps_indented(parts) == json.dumps(value, indent=2, sort_keys=True)


def test_an_encoded_value_json_would_have_to_write_is_refused() -> None:
    # a value this encoder leaves to json.dumps (a key json converts): json cannot write one
    with pytest.raises(TypeError, match="Encoded"):
        dumps_indented({1: jsontext.Encoded('"a"')})


def test_plan_json_is_json_dumps_of_the_plan_data() -> None:
    """plan.json's settings, notes and warnings are encoded once each (planio.encoded): the
    text is json.dumps of plan_to_data's, for any plan, a note and a warning of the same two
    texts included (equal tuples)."""
    note, warning = Note("same text", "same-id"), PlanWarning("same text", "same-id")
    assert note == warning
    plans = [
        plan_for("dgx-h100", "training-k8s"),
        Plan("hw", "p", FULL_SETTINGS, (note,), (warning,), distro="ubuntu-22.04"),
        Plan("hw", "p", FULL_SETTINGS[:3], (), (warning,)),
        Plan("hw", "p", (), (note,), ()),
    ]
    for plan in plans:
        expected = json.dumps(plan_to_data(plan), indent=2, sort_keys=True) + "\n"
        assert plan_to_json(plan) == expected


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
    """bundle_entries as it was: os.walk, symlinked folders listed, not descended into."""
    found: set[str] = set()
    for parent, dirs, names in os.walk(directory):
        relative = PurePosixPath(Path(parent).relative_to(directory))
        found.update(str(relative / name) for name in names)
        found.update(
            str(relative / name) for name in dirs if os.path.islink(os.path.join(parent, name))
        )
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


def user_data_with(item: OverlayFile) -> bytes:
    """user-data.j2 rendered with ``item`` as its only file, as render_bundle renders it."""
    context = {
        "header": "test",
        "tool": "goldtune",
        "merge_how": MERGE_HOW,
        "first_boot_overlay": [item],
        "tuned_files": [],
        "steps": [],
        "power_state": None,
        # the first-boot entry user-data.j2 writes after the overlay (issue 16)
        "first_boot_path": layout.FIRST_BOOT_SCRIPT,
        "first_boot_script": FirstBootScript("#!/bin/sh\n", "set -eu\n"),
        "first_boot_command": first_boot_command(),
    }
    return make_environment().get_template("user-data.j2").render(context).encode("utf-8")


def parses_back(item: OverlayFile) -> bool:
    try:
        check_user_data(user_data_with(item), [item])
    except GenerationError:
        return False
    return True


LINE_TEXT = st.text(st.characters(codec="utf-8"), max_size=30)
FILE_TEXTS = st.lists(LINE_TEXT, min_size=1, max_size=5).map("\n".join) | st.sampled_from(
    ["a\n", "a\n\n", "\n", "", " a\n", "\ta\n", "a\rb\n", "a\x85b\n", "a\u2028\n", "\ufeffa\n"]
)


@given(
    FILE_TEXTS,
    st.sampled_from(["/etc/x.conf", "/usr/local/sbin/x-y_z", "/etc/a b", '/etc/"q"']),
    st.sampled_from(["0644", "0755", "644", "0o644"]),
)
def test_a_file_said_to_read_back_verbatim_does(text: str, target: str, mode: str) -> None:
    """reads_back_verbatim may say False of a file that parses back, never True of one that
    does not: check_user_data's parse of the real template is the judge."""
    item = OverlayFile(f"rootfs{target}", target, mode, text)
    if reads_back_verbatim(item):
        assert parses_back(item)


@pytest.mark.parametrize(
    "text", ["a\n", " a\n", "\ta\n", "a\rb\n", "a\x85b\n", "a\u2028\n", "a\u2029\n", "\ufeffa\n"]
)
def test_each_known_odd_text_is_judged_every_run(text: str) -> None:
    # the property above draws 12 examples in the ci profile: these are checked every time
    item = OverlayFile("rootfs/etc/x.conf", "/etc/x.conf", "0644", text)
    assert not reads_back_verbatim(item) or parses_back(item)


def test_shipped_files_read_back_verbatim() -> None:
    # the shortcut is taken for the bundles gen writes (else it would save nothing)
    files = render_bundle(plan_for("dgx-h100", "training-k8s"))
    overlay = [item for item in overlay_files(files) if item.text]
    assert overlay
    assert all(reads_back_verbatim(item) for item in first_boot_files(overlay))


def test_the_first_user_data_of_a_process_is_parsed_whole_and_any_odd_file_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(delivery._WholeParse, "done", False)
    good = OverlayFile("rootfs/etc/x.conf", "/etc/x.conf", "0644", "x = 1\n")
    with pytest.raises(GenerationError, match="round-trip"):
        delivery.check_rendered_user_data(b"#cloud-config\nwrite_files: []\n", [good])
    delivery.check_rendered_user_data(user_data_with(good), [good])
    assert delivery._WholeParse.done
    odd = good._replace(text="  leading spaces\n\n\n")
    broken = user_data_with(good)  # not odd's text: only a parse can tell
    with pytest.raises(GenerationError, match="round-trip"):
        delivery.check_rendered_user_data(broken, [odd])
    with pytest.raises(GenerationError, match="not valid YAML"):
        delivery.check_rendered_user_data(user_data_with(good) + b"x: \x7f\n", [good])


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


def test_the_first_boot_body_is_made_again_for_another_script_or_main() -> None:
    """The body is cached (firstboot.first_boot_body): another install.sh, the install_file
    entry, or a global the main sets each give their own body, in any order."""
    install_sh = (templates_dir() / layout.SCRIPTS_DIR / "install.sh").read_text()
    changed = install_sh.replace("tuned_layer() {\n", "tuned_layer() {\n    echo changed\n", 1)
    assert changed != install_sh
    words = first_boot_words("", "")
    daemon = [("0644", layout.DOCKER_DAEMON_JSON)]
    own_mode = {**words, "tuned_mode": "/etc/tuned/profile_mode"}

    def body(script: str, main_words: dict[str, str], installed: list[tuple[str, str]]) -> str:
        return first_boot_script(script, main_words, "", installed).partition(MAIN_MARKER)[0]

    for _ in range(2):
        assert "echo changed" not in body(install_sh, words, [])
        assert "echo changed" in body(changed, words, [])
        assert "\ninstall_file() {" not in body(install_sh, words, [])
        assert "\ninstall_file() {" in body(install_sh, words, daemon)
        assert "\ntuned_mode=" in body(install_sh, words, [])
        assert "\ntuned_mode=" not in body(install_sh, own_mode, [])


@pytest.mark.parametrize(
    ("characters", "ascii_allowed"),
    [
        (delivery._NOT_YAML_TEXT, delivery._YAML_TEXT_ASCII),
        (delivery._NOT_IN_LITERAL_LINE, delivery._LITERAL_LINE_ASCII),
    ],
)
def test_the_ascii_shortcut_refuses_what_the_class_refuses(
    characters: str, ascii_allowed: bytes
) -> None:
    for code in range(128):
        text = f"a{chr(code)}b"
        by_class = re.search(characters, text) is None
        assert delivery.has_none_of(text.encode(), characters, ascii_allowed) == by_class, code
    # beyond ASCII the class itself is searched
    assert delivery.has_none_of("é\n".encode(), characters, ascii_allowed)
    assert not delivery.has_none_of("é\ufffe".encode(), characters, ascii_allowed)


@pytest.mark.parametrize("script", FIXED_SCRIPTS, ids=lambda output: output.path)
def test_a_fixed_scripts_digests_are_those_of_the_bytes_given(script: Any) -> None:
    """The fixed scripts' manifest digests are kept (render.fixed_file_digests); other bytes at
    a fixed script's path, before and after the shipped ones, are digested as they are."""
    shipped = fixed_script(script.template)
    changed = shipped.replace(b"\n", b"\n# changed\n", 1)
    copy = bytes(bytearray(shipped))  # equal, another object
    for content in (changed, shipped, shipped, changed, copy):
        entry = manifest_entry(script.path, content, script.mode)
        assert entry == {"path": script.path, "mode": "0755", **file_digests(script.path, content)}
        assert entry["sha256"] == hashlib.sha256(content).hexdigest()


# Every line boundary str.splitlines knows, the newline among them, and two plain characters.
LINE_BOUNDARIES = "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"
INDENTED_TEXTS = st.text(alphabet=st.sampled_from([*LINE_BOUNDARIES, "a", " "]), max_size=12)


@settings(max_examples=300)  # pure and cheap: more than the profile's dozen
@given(
    INDENTED_TEXTS | st.text(max_size=12),
    st.integers(0, 3) | st.sampled_from(["", "\t", "> ", "\\1", "\\g<0>"]),
    st.booleans(),
    st.booleans(),
)
@example("a\n\nb\n\n", 6, True, False)  # blank lines and a final newline: the pattern
@example("a\nb\n", 6, True, False)  # no blank line, a final newline: the replace
@example("\n", 2, False, False)
@example("a\n\nb", "\\g<0>", False, False)  # a backslash in the pattern's replacement
@example("", 0, True, True)
def test_the_indent_filter_is_jinjas(text: str, width: int | str, first: bool, blank: bool) -> None:
    assert indent_lines(text, width, first, blank) == do_indent(text, width, first, blank)


def test_each_indent_of_a_text_is_jinjas_in_any_order() -> None:
    """indent_lines keeps each text's indented form (render._indented): the same text with
    other arguments, after it, gets its own; Markup is still Jinja's own, not a kept str."""
    text = "a\n\n  b\nc\n"
    calls = [
        (6, True, False),
        (6, False, False),
        (4, True, False),
        (6, True, True),
        ("> ", True, False),
    ]
    for width, first, blank in calls + calls[::-1]:
        assert indent_lines(text, width, first, blank) == do_indent(text, width, first, blank)
    kept = Markup(text)  # noqa: S704 -- a constant text, nothing to escape
    markup = indent_lines(kept, 6, True)
    assert type(markup) is Markup
    assert markup == do_indent(kept, 6, True)


def test_the_indent_filter_is_the_environments() -> None:
    assert make_environment().filters["indent"] is indent_lines


@pytest.mark.parametrize("name", sorted(STEP_COMMANDS))
def test_a_steps_runcmd_line_is_its_own_name_and_words(name: str) -> None:
    """Each step's guarded command is kept by name and word (delivery.guarded_command): a step
    of another name or word, after it, gets its own."""
    for word in ("a.service", "b.service", ""):
        step = Step(name, word)
        command = STEP_COMMANDS[name].format(word=sh_quote(word), tool="goldtune")
        expected = (
            f"echo {sh_quote('goldtune: ' + step.summary)}; {{ {command}; }} "
            f"|| echo {sh_quote('goldtune: ' + step.summary + ': failed')}"
        )
        assert step.guarded == expected


def test_each_template_is_written_as_template_render_writes_it() -> None:
    """render_text gives a template the bundle's context as it is (no copy), which holds the
    environment's globals (bundle_context): what Template.render would have made of it."""
    env = make_environment()
    plan = plan_for("dgx-h100", "training-k8s")
    context = bundle_context(env, plan)
    assert all(context.get(name) is value for name, value in env.globals.items())
    context |= delivery_context(plan, render_bundle(plan), CloudInitOptions())
    for output in OUTPUTS:
        if output.verbatim or not output.applies_to(plan):
            continue
        own = output_context(output, plan, context)
        expected = env.get_template(output.template).render(own).encode("utf-8")
        assert render_text(env, output, own) == expected, output.path
    globals_used = jinja2.Environment(
        loader=jinja2.DictLoader({"t.j2": "{% for i in range(2) %}{{ i }}{% endfor %}"}),
        undefined=jinja2.StrictUndefined,
        autoescape=False,  # as the bundle's (plain text, not HTML)  # noqa: S701
    )
    template_output = Output("t", "t.j2", 0o644)
    assert render_text(globals_used, template_output, bundle_context(globals_used, plan)) == b"01"


def test_the_first_boot_entry_is_the_whole_script_indented() -> None:
    """user-data.j2 indents the first-boot script's body and main apart (the body is kept
    indented): the entry cloud-init writes is the whole script, byte for byte."""
    plan = plan_for("dgx-h100", "training-k8s")
    files = render_bundle(plan)
    script = delivery_context(plan, files, CloudInitOptions())["first_boot_script"]
    assert script.body.endswith("\n") and script.main.startswith(MAIN_MARKER)
    user_data = yaml.safe_load(files[layout.USER_DATA][0])
    entry = next(e for e in user_data["write_files"] if e["path"] == layout.FIRST_BOOT_SCRIPT)
    assert entry["content"] == script.body + script.main


def test_a_first_boot_body_without_its_last_newline_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # indented apart from the main, it would not be the whole script indented
    monkeypatch.setattr(firstboot, "first_boot_body", lambda *args: "#!/bin/sh\nset -eu")
    with pytest.raises(GenerationError, match="must end with a newline"):
        firstboot.first_boot_parts("#!/bin/sh\n", first_boot_words("", ""), "")


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
