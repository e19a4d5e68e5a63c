"""The first-boot form of a bundle's files: the same lines without the comment lines.

cloud-init user-data has a hard size limit (EC2: 16 KB, issue 13). Most of a bundle's bytes are
comments: each setting's reason (which EXPLAIN.md lists too) and the fixed scripts' explanations
(``templates/scripts/``), which do nothing on the machine. The user-data carries each file with
its full-line comments and blank lines left out (``layout.compact_in_user_data``); the bundle's
copy, which install.sh installs and reviewers read, keeps them. ``manifest.json`` records the
digest of both forms, so ``gen verify`` accepts either.

Every format goldtune writes that has comments takes ``#`` at a line's start as one (sh, sysctl.d,
limits.d, modprobe.d, systemd units, udev rules, tuned's INI, TOML, and YAML outside block
scalars, which goldtune's templates do not use).

A generated file's first line (``# goldtune bundle for <hardware> / <profile>: what the file
is.``, render/formats.py file_header) keeps only the bundle's name: what the file is, the bundle's
copy and EXPLAIN.md say.

The scan is conservative: a line is dropped only when it is a comment at the top level of the
script, never inside a here-document or a quoted string spanning lines (where a ``#`` line is
data), and the shebang and ``# shellcheck`` directives are kept.
"""

# No `from __future__ import annotations`: a NamedTuple turns each string annotation into
# a compiled ForwardRef, ~0.15 ms a record at import (bench/bench.py's cold gen).
import functools
import json
import re
import sys
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import NamedTuple

from generator import TOOL, __version__
from generator.cache import contents_key, json_entry, read_entry, store_entry
from generator.model import layout
from generator.paths import cache_dir, templates_dir

# Compiled at its first use (re keeps it): only the fixed scripts have here-documents, and their
# forms come from the cache (shipped_compact_forms); compiling it at import took ~0.1-0.2 ms of
# every cold gen (the module's import time, -X importtime).
_HEREDOC = r"<<-?\s*(['\"]?)([A-Za-z_][A-Za-z0-9_]*)\1"


# Where a line's scan changes state, by the quote open before it: in plain text a quote, a
# backslash or a '#' at a word's start (sh starts a comment only there: after a blank, ; & | (
# or at the line's start); in double quotes the closing quote or a backslash; in single quotes
# only the closing quote. Jumping from one to the next, not stepping through every character,
# took without_comment_lines of install.sh (46 KB) from ~2.5 ms to ~1.5 ms of CPU.
_PLAIN_STOP = re.compile(r"""['"\\]|(?<![^ \t;&|(])#""")
_DOUBLE_QUOTED_STOP = re.compile(r'["\\]')


def _open_quote(line: str, quote: str | None) -> str | None:
    """The quote still open after ``line`` (None when none), given the one open before it."""
    at = 0
    while True:
        if quote == "'":
            end = line.find("'", at)
            if end < 0:
                return quote
            quote, at = None, end + 1
            continue
        found = (_DOUBLE_QUOTED_STOP if quote == '"' else _PLAIN_STOP).search(line, at)
        if found is None:
            return quote
        char, at = found.group(), found.end()
        if char == "\\":
            at += 1  # the next character is escaped
        elif char == "#":
            return None  # the rest of the line is a comment
        else:  # a double quote closes, or a quote opens
            quote = None if quote == '"' else char


# Asked twice per file and bundle (the user-data, the manifest's digest), and the fixed scripts are
# the same in every bundle of a matrix run.
# A generated file's header line: the bundle's name, then ": " and what the file is.
HEADER_LINE = re.compile(rf"(# {TOOL} bundle for [^:\n]*): [^\n]*")


def header_name_only(first: str) -> str:
    """A generated file's first line cut to the bundle's name; any other line as it is."""
    found = HEADER_LINE.fullmatch(first.rstrip("\n"))
    return found.group(1) + first[len(first.rstrip("\n")) :] if found else first


@functools.lru_cache(maxsize=256)
def without_comment_lines(text: str) -> str:
    """``text`` with its top-level full-line comments and blank lines left out; a shipped
    script's form comes from the cache (shipped_compact_forms), a generated file's lines after
    its first from those of any file with the same ones (_rest_without_comment_lines)."""
    kept = shipped_compact_forms().get(text)
    if kept is not None:
        return kept
    first, newline, rest = text.partition("\n")
    first += newline
    if first.splitlines(keepends=True) != [first] or _may_leave_open(first):
        return derived_without_comment_lines(text)
    return header_name_only(first) + _rest_without_comment_lines(rest)


def _may_leave_open(line: str) -> bool:
    """Whether the scan may find a here-document or a quote still open after ``line``, read
    first (the scan keeps a first line whatever it is)."""
    if "<<" in line:
        return True
    return ("'" in line or '"' in line) and _open_quote(line, None) is not None


# A generated file's first line names the bundle (file_header); the lines after it are the same in
# many bundles of a matrix (113 different ones in the 697 files of the shipped 45 system x
# profile bundles): each is scanned once, ~0.03 ms of a bundle's CPU against ~0.15 ms for
# scanning every file (medians of interleaved runs). A matrix renders a system's profiles in
# turn: the files of some ten bundles apart are kept.
@functools.lru_cache(maxsize=512)
def _rest_without_comment_lines(rest: str) -> str:
    """without_comment_lines of a text's lines after a first one the scan left nothing open in."""
    return derived_without_comment_lines(rest, after_first=True)


def derived_without_comment_lines(text: str, after_first: bool = False) -> str:
    """without_comment_lines of ``text``, derived from the text itself; ``after_first``: the
    lines of ``text`` follow a first line (kept whatever it is) the scan left nothing open in."""
    kept: list[str] = []
    quote: str | None = None
    heredoc: str | None = None
    for number, line in enumerate(text.splitlines(keepends=True), start=int(after_first)):
        stripped = line.strip()
        if heredoc is not None:
            kept.append(line)
            if line.rstrip("\n").lstrip("\t") == heredoc:
                heredoc = None
            continue
        if quote is None and number > 0 and not stripped:
            continue
        comment = stripped.startswith("#") and "shellcheck" not in stripped
        if quote is None and number > 0 and comment:
            continue
        kept.append(line)
        if quote is None and "<<" in line:
            found = re.search(_HEREDOC, line.split(" #", 1)[0])
            if found:
                heredoc = found.group(2)
        if quote is not None or "'" in line or '"' in line:  # else no quote opens or closes
            quote = _open_quote(line, quote)
    return "".join(kept)


def user_data_form(target: str, text: str) -> str:
    """The form of a bundle file the cloud-init user-data carries (layout.compact_in_user_data
    says which are compact): its comment lines left out, and a fixed script's indentation too."""
    compact = without_comment_lines(text)
    return without_indentation(compact) if target in layout.FIXED_SCRIPTS else compact


# A function definition's head with a comment after it (``name() { # its arguments``): a '#'
# after a blank starts a comment there, which sh drops (POSIX 2.3, rule 9).
_FUNCTION_HEAD_COMMENT = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*\(\) \{)[ \t]+#[^\n]*")


def without_indentation(script: str) -> str:
    """derived_without_indentation of ``script``: a shipped script's compact form's from the
    cache (shipped_forms), any other text's derived from itself."""
    kept = shipped_forms().unindented.get(script)
    return kept if kept is not None else derived_without_indentation(script)


def derived_without_indentation(script: str) -> str:
    """A shell script's lines without their leading blanks, where sh ignores them: every line
    the scan finds at the top level (no quote spanning lines open, not in a here-document, not
    continuing a word after a backslash); a function head's comment goes too. The user-data
    carries the scripts this way: their indentation was ~600 of EC2's 16,384 compressed bytes,
    the heads' comments ~560. Tests prove the parse unchanged with bash's own --pretty-print of
    both forms."""
    kept: list[str] = []
    quote: str | None = None
    heredoc: str | None = None
    joins_word = False  # the previous line ended in a backslash right after a word
    for line in script.splitlines(keepends=True):
        if heredoc is not None:
            kept.append(line)
            if line.rstrip("\n").lstrip("\t") == heredoc:
                heredoc = None
            continue
        if quote is None and not joins_word:
            line = line.lstrip(" \t")
            if "() {" in line:  # a function's head: the only lines the pattern can change
                line = _FUNCTION_HEAD_COMMENT.sub(r"\1", line)
        kept.append(line)
        if quote is None and "<<" in line:
            found = re.search(_HEREDOC, line.split(" #", 1)[0])
            if found:
                heredoc = found.group(2)
        if quote is not None or "'" in line or '"' in line:
            quote = _open_quote(line, quote)
        body = line.rstrip("\n")
        joins_word = body.endswith("\\") and not body[:-1].endswith((" ", "\t", ";", "|", "&"))
    return "".join(kept)


# --- the fixed scripts' compact forms, kept between runs -----------------------------------------

# The fixed scripts (templates/scripts/, ~112 KB) are the same text in every bundle: deriving
# their compact forms took ~4.1 ms of every cold gen's CPU (install.sh's for the first-boot
# script, the others for the user-data), and the user-data's forms of those it carries without
# indentation (install-lib.sh's and the boot scripts') ~5 ms more. Both are kept beside the
# validated catalog (generator/cache.py) as JSON, keyed by each script's name and bytes, this
# module and the versions: ~1 ms of a cold gen, of which reading the scripts again ~0.35 (the
# bundle's read of them is render's; which texts are shipped scripts is known from the folder),
# hashing ~0.2 and the JSON ~0.4.
CACHE_PATH = cache_dir("__catalog_cache__") / "scripts.json"
CACHE_FORMAT = 2


# The scripts the user-data carries without indentation (user_data_form, firstboot's library
# form): only theirs are kept (the cache entry is read whole by every cold gen).
UNINDENTED_SCRIPTS = frozenset(
    {*(target.rpartition("/")[2] for target in layout.FIXED_SCRIPTS), layout.INSTALL_LIB}
)


class ScriptForms(NamedTuple):
    """The derived forms of some scripts (by name) or of the shipped ones (by text)."""

    compact: dict[str, str]  # without comment lines (derived_without_comment_lines)
    # the compact form without indentation too, of the UNINDENTED_SCRIPTS (by compact form)
    unindented: dict[str, str]


def shipped_scripts() -> dict[str, str]:
    """Every fixed script (templates/scripts/) by name: its text."""
    folder = templates_dir() / layout.SCRIPTS_DIR
    # read_bytes, then decode: read_text's text stream took three times as long (0.28 ms)
    return {
        path.name: path.read_bytes().decode("utf-8")
        for path in sorted(folder.iterdir())
        if path.is_file()
    }


@functools.cache
def shipped_forms() -> ScriptForms:
    """A shipped script's text -> its compact form, and that form -> it without indentation;
    none when the scripts cannot be read (the bundle's own read of them then says why)."""
    try:
        scripts = shipped_scripts()
    except (OSError, UnicodeDecodeError):
        return ScriptForms({}, {})
    forms = script_forms(scripts, CACHE_PATH)
    return ScriptForms(
        {text: forms.compact[name] for name, text in scripts.items()},
        {forms.compact[name]: form for name, form in forms.unindented.items()},
    )


def shipped_compact_forms() -> dict[str, str]:
    """A shipped script's text -> its compact form (shipped_forms)."""
    return shipped_forms().compact


def forms_key(scripts: Mapping[str, str]) -> str:
    """The scripts' names and bytes, this module (which derives the forms) and the versions."""
    salt = f"{CACHE_FORMAT}\0{__version__}\0{sys.version}"
    code = Path(__file__)
    contents = [(code.name, code.read_bytes())]
    contents += [(f"{layout.SCRIPTS_DIR}/{name}", text.encode()) for name, text in scripts.items()]
    return contents_key(salt, contents)


def script_forms(scripts: Mapping[str, str], cache: Path) -> ScriptForms:
    """Each script's compact and unindented forms, by name: from ``cache`` when they were
    stored for these scripts and this code, else derived (and stored, where the cache can be
    written)."""
    key = forms_key(scripts)
    stored = forms_from_entry(read_entry(cache), key, scripts.keys())
    if stored is not None:
        return stored
    compact = {name: derived_without_comment_lines(text) for name, text in scripts.items()}
    unindented = {
        name: derived_without_indentation(form)
        for name, form in compact.items()
        if name in UNINDENTED_SCRIPTS
    }
    forms = {"compact": compact, "unindented": unindented}
    store_entry(cache, json.dumps({"key": key, "forms": forms}).encode())
    return ScriptForms(compact, unindented)


def forms_from_entry(entry: bytes | None, key: str, names: Collection[str]) -> ScriptForms | None:
    """The forms a cache entry holds, or None: none, another key, or not what we write (a text
    of each form for each of ``names``, and nothing else)."""
    forms = json_entry(entry, key, "forms")
    if not isinstance(forms, dict) or forms.keys() != set(ScriptForms._fields):
        return None
    unindented = UNINDENTED_SCRIPTS.intersection(names)
    if not _texts_of(names, forms["compact"]) or not _texts_of(unindented, forms["unindented"]):
        return None
    return ScriptForms(**forms)


def _texts_of(names: Collection[str], forms: object) -> bool:
    """Whether ``forms`` maps exactly ``names`` to texts."""
    if not isinstance(forms, dict) or forms.keys() != set(names):
        return False
    return all(isinstance(form, str) for form in forms.values())
