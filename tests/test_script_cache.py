"""The fixed scripts' derived forms, kept between runs (generator/cache.py): their compact forms
(model/shellform.py) and the first-boot body made from install.sh (render/firstboot.py). Used
when nothing changed, derived again when anything did or the entry is not one to trust, never
required; what they hold is what a fresh derivation gives."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from generator.errors import GenerationError
from generator.model import layout, shellform
from generator.paths import templates_dir
from generator.render import firstboot
from generator.render.firstboot import ENTRY_FUNCTIONS, first_boot_words
from tests.conftest import unreadable_cache_entry

SCRIPTS = {
    "a.sh": "#!/bin/sh\n# what a does\nset -eu\n\necho a\n",
    "b.sh": "#!/bin/sh\necho b  # kept: not a full-line comment\n# gone\n",
}
FORMS = {
    "a.sh": "#!/bin/sh\nset -eu\necho a\n",
    "b.sh": "#!/bin/sh\necho b  # kept: not a full-line comment\n",
}

INSTALL_SH = '#!/bin/sh\n# helpers\nmode=1\nhelper() { :; }\nentry() {\n    helper "$mode"\n}\n'
ENTRIES = ("entry",)
OWN: frozenset[str] = frozenset({"root"})
BODY = "#!/bin/sh\nset -eu\numask 022\nLC_ALL=C\nexport LC_ALL\nmode=1\nhelper() { :; }\n"
BODY += 'entry() {\nhelper "$mode"\n}\n'  # the user-data form: no indentation (shellform)


@pytest.fixture
def derivations(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The texts shellform derived a compact form of, and the bodies firstboot derived (as
    ``body:<entries>``), call by call."""
    calls: list[str] = []
    derive_form = shellform.derived_without_comment_lines
    derive_body = firstboot.derived_body

    def counted_form(text: str, after_first: bool = False) -> str:
        calls.append(text)
        return derive_form(text, after_first)

    def counted_body(install_sh: str, entries: tuple[str, ...], own: frozenset[str]) -> str:
        calls.append(f"body:{','.join(entries)}")
        return derive_body(install_sh, entries, own)

    monkeypatch.setattr(shellform, "derived_without_comment_lines", counted_form)
    monkeypatch.setattr(firstboot, "derived_body", counted_body)
    return calls


def bodies(calls: list[str]) -> list[str]:
    return [call for call in calls if call.startswith("body:")]


def forms_entry(scripts: dict[str, str], forms: object) -> bytes:
    return json.dumps({"key": shellform.forms_key(scripts), "forms": forms}).encode()


def body_entry(install_sh: str, rows: object) -> bytes:
    return json.dumps({"key": firstboot.body_key(install_sh), "bodies": rows}).encode()


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
    assert shellform.compact_forms(SCRIPTS, entry) == FORMS
    assert shellform.compact_forms(SCRIPTS, entry) == FORMS
    assert len(derivations) == len(SCRIPTS)  # each derived once, by the first call
    assert stat.S_IMODE(os.lstat(entry).st_mode) == 0o644
    assert stat.S_IMODE(os.lstat(entry.parent).st_mode) == 0o755


@pytest.mark.parametrize("change", ["edit", "add", "remove", "rename", "code"])
def test_any_change_to_the_scripts_or_the_code_derives_the_forms_again(
    tmp_path: Path, derivations: list[str], monkeypatch: pytest.MonkeyPatch, change: str
) -> None:
    entry = tmp_path / "cache" / "scripts.json"
    shellform.compact_forms(SCRIPTS, entry)
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
    assert shellform.compact_forms(scripts, entry) == expected
    assert len(derivations) == len(scripts)


@pytest.mark.parametrize(
    "content",
    [
        b"not json",
        b"\xff\xfe garbage",
        b"[" * 100_000,  # nested beyond json's recursion
        b'{"key": "another key", "forms": {}}',
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
    entry.write_bytes(
        forms_entry(SCRIPTS, wrong_forms[content]) if isinstance(content, str) else content
    )
    assert shellform.compact_forms(SCRIPTS, entry) == FORMS
    assert len(derivations) == len(SCRIPTS)
    assert json.loads(entry.read_bytes()) == {"key": shellform.forms_key(SCRIPTS), "forms": FORMS}


def test_a_forms_entry_of_our_shape_is_what_is_used(tmp_path: Path) -> None:
    # the other tests' entries are refused for their damage, not for anything else
    entry = tmp_path / "scripts.json"
    planted = {"a.sh": "planted a\n", "b.sh": "planted b\n"}
    entry.write_bytes(forms_entry(SCRIPTS, planted))
    assert shellform.compact_forms(SCRIPTS, entry) == planted


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
    assert shellform.compact_forms(SCRIPTS, tmp_path / "cache" / "scripts.json") == FORMS
    assert len(derivations) == len(SCRIPTS)
    assert json.loads((elsewhere / "scripts.json").read_bytes())["forms"]["a.sh"] == "x"


@pytest.mark.parametrize("kind", ["fifo", "folder", "unreadable"])
def test_a_forms_entry_that_cannot_be_read_is_ignored(
    tmp_path: Path, derivations: list[str], monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    entry = tmp_path / "cache" / "scripts.json"
    unreadable_cache_entry(
        entry, kind, forms_entry(SCRIPTS, {"a.sh": "x", "b.sh": "y"}), monkeypatch
    )
    assert shellform.compact_forms(SCRIPTS, entry) == FORMS
    assert len(derivations) == len(SCRIPTS)


def test_an_unwritable_cache_only_means_deriving_every_time(
    tmp_path: Path, derivations: list[str]
) -> None:
    (tmp_path / "blocker").write_text("a file where the cache folder would be")
    entry = tmp_path / "blocker" / "scripts.json"
    assert shellform.compact_forms(SCRIPTS, entry) == FORMS
    assert shellform.compact_forms(SCRIPTS, entry) == FORMS
    assert len(derivations) == 2 * len(SCRIPTS)


def test_every_shipped_script_reads_the_same_from_the_cache(tmp_path: Path) -> None:
    scripts = shellform.shipped_scripts()
    assert sorted(scripts) == sorted(p.name for p in (templates_dir() / "scripts").iterdir())
    derived = {
        name: shellform.derived_without_comment_lines(text) for name, text in scripts.items()
    }
    assert shellform.compact_forms(scripts, tmp_path / "scripts.json") == derived  # stored
    assert shellform.compact_forms(scripts, tmp_path / "scripts.json") == derived  # read back
    for name, text in scripts.items():  # and what the bundle's callers get
        assert shellform.shipped_compact_forms()[text] == derived[name], name
        assert shellform.without_comment_lines(text) == derived[name], name


def test_the_shipped_forms_are_kept_in_the_package_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(shellform, "CACHE_PATH", tmp_path / "cache" / "scripts.json")
    forms = shellform.shipped_compact_forms.__wrapped__()
    stored = json.loads((tmp_path / "cache" / "scripts.json").read_bytes())
    assert sorted(stored["forms"].values()) == sorted(forms.values())


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


# --- the first-boot body ------------------------------------------------------------------------


def test_second_body_comes_from_the_cache(
    tmp_path: Path, derivations: list[str], strict_umask: None
) -> None:
    entry = tmp_path / "cache" / "first-boot.json"
    assert firstboot.cached_body(INSTALL_SH, ENTRIES, OWN, entry) == BODY
    assert firstboot.cached_body(INSTALL_SH, ENTRIES, OWN, entry) == BODY
    assert bodies(derivations) == ["body:entry"]
    assert stat.S_IMODE(os.lstat(entry).st_mode) == 0o644
    assert stat.S_IMODE(os.lstat(entry.parent).st_mode) == 0o755


@pytest.mark.parametrize("change", ["install.sh", "firstboot.py", "shellform.py"])
def test_a_changed_install_sh_or_code_derives_the_body_again(
    tmp_path: Path, derivations: list[str], monkeypatch: pytest.MonkeyPatch, change: str
) -> None:
    entry = tmp_path / "cache" / "first-boot.json"
    firstboot.cached_body(INSTALL_SH, ENTRIES, OWN, entry)
    install_sh, expected = INSTALL_SH, BODY
    if change == "install.sh":
        install_sh = INSTALL_SH.replace("mode=1", "mode=2")
        expected = BODY.replace("mode=1", "mode=2")
    elif change == "firstboot.py":
        monkeypatch.setattr(firstboot, "__file__", changed_copy(firstboot.__file__, tmp_path))
    else:  # the compact form of install.sh the body is cut from is shellform's
        monkeypatch.setattr(shellform, "__file__", changed_copy(shellform.__file__, tmp_path))
    assert firstboot.cached_body(install_sh, ENTRIES, OWN, entry) == expected
    assert bodies(derivations) == ["body:entry", "body:entry"]


def test_each_entry_set_and_main_has_its_own_body_and_all_are_kept(
    tmp_path: Path, derivations: list[str]
) -> None:
    entry = tmp_path / "first-boot.json"
    helper_only = "#!/bin/sh\nset -eu\numask 022\nLC_ALL=C\nexport LC_ALL\nhelper() { :; }\n"
    main_sets_mode = BODY.replace("mode=1\n", "")
    cases = [
        (ENTRIES, OWN, BODY),
        (("helper",), OWN, helper_only),
        (ENTRIES, OWN | {"mode"}, main_sets_mode),
    ]
    for _ in range(2):  # derived the first time, then each read back beside the others
        for entries, own, body in cases:
            assert firstboot.cached_body(INSTALL_SH, entries, own, entry) == body
    assert bodies(derivations) == ["body:entry", "body:helper", "body:entry"]


def test_an_entry_keeps_at_most_its_newest_bodies(tmp_path: Path, derivations: list[str]) -> None:
    entry = tmp_path / "first-boot.json"
    mains = [OWN | {f"word{index}"} for index in range(firstboot.MAX_STORED_BODIES + 1)]
    for own in mains:
        firstboot.cached_body(INSTALL_SH, ENTRIES, own, entry)
    assert len(json.loads(entry.read_bytes())["bodies"]) == firstboot.MAX_STORED_BODIES
    derivations.clear()
    firstboot.cached_body(INSTALL_SH, ENTRIES, mains[-1], entry)  # the newest: kept
    assert bodies(derivations) == []
    firstboot.cached_body(INSTALL_SH, ENTRIES, mains[0], entry)  # the oldest: pushed out
    assert bodies(derivations) == ["body:entry"]


@pytest.mark.parametrize(
    "content",
    [
        b"not json",
        b"\xff\xfe garbage",
        b"[" * 100_000,
        b'{"key": "another key", "bodies": []}',
        b"[]",
        "rows of the wrong shape",
        "entries that are not text",
        "a body that is not text",
        "a row too short",
    ],
)
def test_a_damaged_or_foreign_body_entry_is_ignored_and_replaced(
    tmp_path: Path, derivations: list[str], content: bytes | str
) -> None:
    entry = tmp_path / "cache" / "first-boot.json"
    made_for = [list(ENTRIES), sorted(OWN)]
    wrong_rows = {
        "rows of the wrong shape": {"entry": BODY},
        "entries that are not text": [[[1], sorted(OWN), BODY]],
        "a body that is not text": [[*made_for, ["#!/bin/sh\n"]]],
        "a row too short": [made_for],
    }
    entry.parent.mkdir()
    entry.write_bytes(
        body_entry(INSTALL_SH, wrong_rows[content]) if isinstance(content, str) else content
    )
    assert firstboot.cached_body(INSTALL_SH, ENTRIES, OWN, entry) == BODY
    assert bodies(derivations) == ["body:entry"]
    stored = json.loads(entry.read_bytes())
    assert stored == {"key": firstboot.body_key(INSTALL_SH), "bodies": [[*made_for, BODY]]}


def test_a_body_entry_of_our_shape_is_what_is_used(tmp_path: Path) -> None:
    entry = tmp_path / "first-boot.json"
    entry.write_bytes(body_entry(INSTALL_SH, [[list(ENTRIES), sorted(OWN), "planted\n"]]))
    assert firstboot.cached_body(INSTALL_SH, ENTRIES, OWN, entry) == "planted\n"


@pytest.mark.parametrize("kind", ["link", "fifo", "folder", "unreadable"])
def test_a_body_entry_that_cannot_be_read_so_is_ignored(
    tmp_path: Path, derivations: list[str], monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    entry = tmp_path / "cache" / "first-boot.json"
    planted = body_entry(INSTALL_SH, [[list(ENTRIES), sorted(OWN), "planted\n"]])
    if kind == "link":
        (tmp_path / "elsewhere.json").write_bytes(planted)
        entry.parent.mkdir()
        entry.symlink_to(tmp_path / "elsewhere.json")
    else:
        unreadable_cache_entry(entry, kind, planted, monkeypatch)
    assert firstboot.cached_body(INSTALL_SH, ENTRIES, OWN, entry) == BODY
    assert bodies(derivations) == ["body:entry"]


def test_the_bundle_s_body_is_kept_in_the_package_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(firstboot, "BODY_CACHE_PATH", tmp_path / "cache" / "first-boot.json")
    assert firstboot.first_boot_body.__wrapped__(INSTALL_SH, ENTRIES, OWN) == BODY
    stored = json.loads((tmp_path / "cache" / "first-boot.json").read_bytes())
    assert stored["bodies"] == [[list(ENTRIES), sorted(OWN), BODY]]


def test_an_install_sh_lacking_an_entry_function_still_fails(tmp_path: Path) -> None:
    with pytest.raises(GenerationError, match="has no function missing"):
        firstboot.cached_body(INSTALL_SH, ("missing",), OWN, tmp_path / "first-boot.json")
    assert not (tmp_path / "first-boot.json").exists()


@pytest.mark.parametrize("with_install_file", [False, True])
def test_the_shipped_bodies_read_the_same_from_the_cache(
    tmp_path: Path, with_install_file: bool
) -> None:
    install_sh = (templates_dir() / layout.SCRIPTS_DIR / "install.sh").read_text()
    words = first_boot_words("iommu=pt", "goldtune-training", ["/etc/sysctl.d/90-goldtune.conf"])
    entries: tuple[str, ...] = ENTRY_FUNCTIONS
    if with_install_file:  # as first_boot_script calls it for a staged daemon.json
        entries = (*ENTRY_FUNCTIONS, "install_file")
        own = frozenset({*words, "bundle"})
    else:
        own = frozenset(words)
    derived = firstboot.derived_body(install_sh, entries, own)
    entry = tmp_path / "first-boot.json"
    assert firstboot.cached_body(install_sh, entries, own, entry) == derived  # stored
    assert firstboot.cached_body(install_sh, entries, own, entry) == derived  # read back
    assert firstboot.first_boot_body(install_sh, entries, own) == derived
