"""The fixed scripts' derived forms, kept between runs (generator/cache.py): their compact forms
(model/shellform.py). Used when nothing changed, derived again when anything did or the entry is
not one to trust, never required; what they hold is what a fresh derivation gives."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from generator.model import shellform
from generator.paths import templates_dir
from tests.conftest import unreadable_cache_entry

SCRIPTS = {
    "a.sh": "#!/bin/sh\n# what a does\nset -eu\n\necho a\n",
    "b.sh": "#!/bin/sh\necho b  # kept: not a full-line comment\n# gone\n",
}
FORMS = {
    "a.sh": "#!/bin/sh\nset -eu\necho a\n",
    "b.sh": "#!/bin/sh\necho b  # kept: not a full-line comment\n",
}


@pytest.fixture
def derivations(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The texts shellform derived a compact form of, call by call."""
    calls: list[str] = []
    derive_form = shellform.derived_without_comment_lines

    def counted_form(text: str, after_first: bool = False) -> str:
        calls.append(text)
        return derive_form(text, after_first)

    monkeypatch.setattr(shellform, "derived_without_comment_lines", counted_form)
    return calls


def forms_entry(scripts: dict[str, str], forms: object) -> bytes:
    """An entry of our shape holding ``forms`` as the compact forms (SCRIPTS are none of the
    UNINDENTED_SCRIPTS: no unindented forms)."""
    stored = {"compact": forms, "unindented": {}}
    return json.dumps({"key": shellform.forms_key(scripts), "forms": stored}).encode()


def changed_copy(module_file: str | None, tmp_path: Path) -> str:
    assert module_file is not None
    code = tmp_path / Path(module_file).name
    code.write_text(Path(module_file).read_text() + "# changed\n")
    return str(code)


# --- the compact forms --------------------------------------------------------------------------


def test_second_read_of_the_forms_comes_from_the_cache(
    tmp_path: Path, derivations: list[str], strict_umask: None
) -> None:
    """Written under a hardened umask, the entry still serves all users."""
    entry = tmp_path / "cache" / "scripts.json"
    assert shellform.script_forms(SCRIPTS, entry).compact == FORMS
    assert shellform.script_forms(SCRIPTS, entry).compact == FORMS
    assert len(derivations) == len(SCRIPTS)  # each derived once, by the first call
    assert stat.S_IMODE(os.lstat(entry).st_mode) == 0o644
    assert stat.S_IMODE(os.lstat(entry.parent).st_mode) == 0o755


@pytest.mark.parametrize("change", ["edit", "add", "remove", "rename", "code"])
def test_any_change_to_the_scripts_or_the_code_derives_the_forms_again(
    tmp_path: Path, derivations: list[str], monkeypatch: pytest.MonkeyPatch, change: str
) -> None:
    entry = tmp_path / "cache" / "scripts.json"
    shellform.script_forms(SCRIPTS, entry)
    scripts, expected = dict(SCRIPTS), dict(FORMS)
    if change == "edit":
        scripts["a.sh"] = SCRIPTS["a.sh"].replace("echo a", "echo edited")
        expected["a.sh"] = FORMS["a.sh"].replace("echo a", "echo edited")
    elif change == "add":
        scripts["c.sh"] = expected["c.sh"] = "#!/bin/sh\necho c\n"
    elif change == "remove":
        del scripts["b.sh"], expected["b.sh"]
    elif change == "rename":
        scripts["c.sh"], expected["c.sh"] = scripts.pop("b.sh"), expected.pop("b.sh")
    else:  # another shellform.py derives the forms of the same scripts
        monkeypatch.setattr(shellform, "__file__", changed_copy(shellform.__file__, tmp_path))
    derivations.clear()
    assert shellform.script_forms(scripts, entry).compact == expected
    assert len(derivations) == len(scripts)


@pytest.mark.parametrize(
    "content",
    [
        b"not json",
        b"\xff\xfe garbage",
        b"[" * 100_000,  # nested beyond json's recursion
        b'{"key": "another key", "forms": {}}',
        "the unindented forms missing",
        b"[]",
        "forms of the wrong shape",
        "a script missing",
        "a script more",
        "a form that is not text",
    ],
)
def test_a_damaged_or_foreign_forms_entry_is_ignored_and_replaced(
    tmp_path: Path, derivations: list[str], content: bytes | str
) -> None:
    entry = tmp_path / "cache" / "scripts.json"
    wrong_forms = {
        "forms of the wrong shape": [["a.sh", FORMS["a.sh"]], ["b.sh", FORMS["b.sh"]]],
        "a script missing": {"a.sh": FORMS["a.sh"]},
        "a script more": {**FORMS, "c.sh": "#!/bin/sh\n"},
        "a form that is not text": {"a.sh": FORMS["a.sh"], "b.sh": ["#!/bin/sh\n"]},
    }
    entry.parent.mkdir()
    if content == "the unindented forms missing":
        stored = {"compact": FORMS}
        content = json.dumps({"key": shellform.forms_key(SCRIPTS), "forms": stored}).encode()
    entry.write_bytes(
        forms_entry(SCRIPTS, wrong_forms[content]) if isinstance(content, str) else content
    )
    assert shellform.script_forms(SCRIPTS, entry).compact == FORMS
    assert len(derivations) == len(SCRIPTS)
    stored = {"compact": FORMS, "unindented": {}}  # none of SCRIPTS is carried unindented
    assert json.loads(entry.read_bytes()) == {"key": shellform.forms_key(SCRIPTS), "forms": stored}


def test_a_forms_entry_of_our_shape_is_what_is_used(tmp_path: Path) -> None:
    # the other tests' entries are refused for their damage, not for anything else
    entry = tmp_path / "scripts.json"
    planted = {"a.sh": "planted a\n", "b.sh": "planted b\n"}
    entry.write_bytes(forms_entry(SCRIPTS, planted))
    assert shellform.script_forms(SCRIPTS, entry).compact == planted


@pytest.mark.parametrize("link", ["entry", "folder"])
def test_a_forms_entry_reached_through_a_link_is_not_read(
    tmp_path: Path, derivations: list[str], link: str
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "scripts.json").write_bytes(forms_entry(SCRIPTS, {"a.sh": "x", "b.sh": "y"}))
    if link == "entry":
        (tmp_path / "cache").mkdir()
        (tmp_path / "cache" / "scripts.json").symlink_to(elsewhere / "scripts.json")
    else:
        (tmp_path / "cache").symlink_to(elsewhere)
    assert shellform.script_forms(SCRIPTS, tmp_path / "cache" / "scripts.json").compact == FORMS
    assert len(derivations) == len(SCRIPTS)
    assert json.loads((elsewhere / "scripts.json").read_bytes())["forms"]["compact"]["a.sh"] == "x"


@pytest.mark.parametrize("kind", ["fifo", "folder", "unreadable"])
def test_a_forms_entry_that_cannot_be_read_is_ignored(
    tmp_path: Path, derivations: list[str], monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    entry = tmp_path / "cache" / "scripts.json"
    unreadable_cache_entry(
        entry, kind, forms_entry(SCRIPTS, {"a.sh": "x", "b.sh": "y"}), monkeypatch
    )
    assert shellform.script_forms(SCRIPTS, entry).compact == FORMS
    assert len(derivations) == len(SCRIPTS)


def test_an_unwritable_cache_only_means_deriving_every_time(
    tmp_path: Path, derivations: list[str]
) -> None:
    (tmp_path / "blocker").write_text("a file where the cache folder would be")
    entry = tmp_path / "blocker" / "scripts.json"
    assert shellform.script_forms(SCRIPTS, entry).compact == FORMS
    assert shellform.script_forms(SCRIPTS, entry).compact == FORMS
    assert len(derivations) == 2 * len(SCRIPTS)


def test_every_shipped_script_reads_the_same_from_the_cache(tmp_path: Path) -> None:
    scripts = shellform.shipped_scripts()
    assert sorted(scripts) == sorted(p.name for p in (templates_dir() / "scripts").iterdir())
    derived = {
        name: shellform.derived_without_comment_lines(text) for name, text in scripts.items()
    }
    entry = tmp_path / "scripts.json"
    assert shellform.script_forms(scripts, entry).compact == derived  # stored
    assert shellform.script_forms(scripts, entry).compact == derived  # read back
    unindented = {
        name: shellform.derived_without_indentation(form)
        for name, form in derived.items()
        if name in shellform.UNINDENTED_SCRIPTS
    }
    assert sorted(unindented) == sorted(shellform.UNINDENTED_SCRIPTS)  # every one is shipped
    assert shellform.script_forms(scripts, entry).unindented == unindented
    for name, text in scripts.items():  # and what the bundle's callers get
        assert shellform.shipped_compact_forms()[text] == derived[name], name
        assert shellform.without_comment_lines(text) == derived[name], name
        expected = unindented.get(name, shellform.derived_without_indentation(derived[name]))
        assert shellform.without_indentation(derived[name]) == expected, name


def test_the_shipped_forms_are_kept_in_the_package_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(shellform, "CACHE_PATH", tmp_path / "cache" / "scripts.json")
    forms = shellform.shipped_forms.__wrapped__()
    stored = json.loads((tmp_path / "cache" / "scripts.json").read_bytes())["forms"]
    assert sorted(stored["compact"].values()) == sorted(forms.compact.values())
    assert sorted(stored["unindented"].values()) == sorted(forms.unindented.values())


def test_a_shipped_script_is_not_derived_again_by_the_bundle(
    derivations: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    text = "#!/bin/sh\n# as if shipped\necho shipped\n"
    monkeypatch.setattr(shellform, "shipped_compact_forms", lambda: {text: "from the cache\n"})
    assert shellform.without_comment_lines.__wrapped__(text) == "from the cache\n"
    assert derivations == []


def test_a_text_that_is_no_shipped_script_is_derived_from_itself(derivations: list[str]) -> None:
    shellform.shipped_compact_forms()  # the shipped forms, derived here if the cache has none
    derivations.clear()
    text = "#!/bin/sh\n# not shipped\necho one of a kind\n"
    assert shellform.without_comment_lines(text) == "#!/bin/sh\necho one of a kind\n"
    # its lines after the first, which any text with the same ones shares
    assert derivations == ["# not shipped\necho one of a kind\n"]
