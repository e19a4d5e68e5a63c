"""The first-boot script: install.sh's own stale-file, tuned and boot-argument phases, for
cloud-init.

install.sh removes the files its install record says an earlier bundle installed and this one
does not carry, then writes the record; layers tuned on the selection it finds (the previous one
recorded once, to restore) and adds and removes the bundle's boot arguments per mechanism (GRUB
drop-in + update-grub; BLS: grubby --args/--remove-args and /etc/kernel/cmdline), remembering
what it added. cloud-init must do the same at first boot, and the bookkeeping must be the same
files, so that an image baked with install.sh and booted with another bundle's user-data (or the
reverse) removes what the earlier one installed and added. The record written here is the one
install.sh writes for the same bundle (install.list's file lines), so a later install.sh agrees.

One implementation: the user-data carries a script made of install.sh's own functions, copied
line for line from the bundle's fixed install.sh (the functions ``remove_stale_files``,
``write_text``, ``tuned_layer`` and ``boot_arguments`` need, found by name, in install.sh's
order), and a short main that sets the plan's words and calls them as install.sh does on a live
system. The whole install.sh does not fit EC2's 16 KB next to the overlay (about 7.5 KB
compressed); these functions are about two thirds of its code. The main is data and calls, not
logic: tests/test_first_boot.py runs the script in a RHEL-like and a Debian-like root.

The stale files are removed after cloud-init's other runcmd steps (this script runs last): an
image's earlier files were already read by this boot's early units (systemd-sysctl, udev,
modules-load) before cloud-init ran, so their removal takes effect at the next boot either way,
as the kernel arguments do; a stale unit is disabled with --now (install.sh's remove_stale).
"""

from __future__ import annotations

import functools
import json
import re
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import NamedTuple

from generator import TOOL, __version__
from generator.cache import contents_key, json_entry, read_entry, store_entry
from generator.errors import GenerationError
from generator.model import layout, shellform
from generator.model.shellform import without_comment_lines, without_indentation
from generator.paths import cache_dir
from generator.render.formats import sh_quote

# What install.sh runs on a live system besides its files and steps (its "2." stale files and
# record, its "5." phase); run_step calls step_<name> through a variable, so those are named.
ENTRY_FUNCTIONS = (
    "remove_stale_files",
    "write_text",
    "step_reload",
    "tuned_layer",
    "boot_arguments",
    "step_tuned",
    "step_bootloader",
)
# Functions the first boot never reaches although a carried function names them: install_file
# is carried only for the files the user-data stages (layout.INSTALLED_AT_FIRST_BOOT, daemon.json),
# so its nccl.conf branch (merge_nccl_conf, ~0.9 KB compressed) never runs there: the user-data
# writes nccl.conf itself; nor its containerd branch (carry_image_cri): the user-data writes the
# drop-in, and the wiring of config.toml's imports is install.sh's (carried, it costs ~1.9 KB
# compressed: a containerd bundle's user-data has ~1 KB left under EC2's 16 KB). The main checks
# instead that containerd reads the drop-in (containerd_read_check) and fails loudly where it
# does not. first_boot_script refuses a staged nccl.conf rather than carry less.
# boot_arguments reaches boot_image_grub (and through it the
# unit that regenerates an image's grub.cfg at its first boot) only for an image (--root): the
# first boot is the live system, which runs the bootloader step itself; service reaches
# service_offline (with unit_links) only for an image too (live is always yes there), and so does
# boot_arguments reach boot_check_unit (the image's boot check of its kernel arguments) and
# image_mechanism with boot_bootc (a bootc image's kargs.d); boot_bls edits the BLS entries and
# /etc/default/grub as text only offline (edit_bls_entry, edit_grub_default: live, grubby
# --update-kernel=ALL does both).
NOT_REACHED_AT_FIRST_BOOT = frozenset(
    {
        "merge_nccl_conf",
        "carry_image_cri",
        "boot_image_grub",
        "service_offline",
        "boot_check_unit",
        "kernel_args_check",
        "image_mechanism",
        "boot_bootc",
        "edit_grub_default",
        "edit_bls_entry",
    }
)
# The line after which the script is the main: what comes before it is install.sh's text.
MAIN_MARKER = f"# --- {TOOL} first boot: install.sh's phase 5, on this live system"

_FUNCTION_START = re.compile(r"^([a-z_][a-z0-9_]*)\(\) \{")
_ASSIGNMENT = re.compile(r"^([a-z_][a-z0-9_]*)=")
# A word where a command starts: not part of a longer word, a unit name (tuned.service), an
# option (--args=), a path or a variable.
_COMMAND_WORD = re.compile(r"(?<![\w.$/=-])([a-z_][a-z0-9_]*)(?![\w.=/-])")
# A variable a function reads: $name or ${name...}
_READ_VARIABLE = re.compile(r"\$\{?([a-z_][a-z0-9_]*)")


class Piece(NamedTuple):
    """A top-level function definition or variable assignment of install.sh."""

    name: str
    text: str
    function: bool


def _one_line_function(line: str) -> bool:
    """``name() { ...; }`` on one line (a trailing ``# comment`` allowed)."""
    code = line.split(" # ", 1)[0].rstrip()
    return code.endswith("}") and not code.endswith("{")


def top_level_pieces(script: str) -> list[Piece]:
    """install.sh's top-level functions (from ``name() {`` to the ``}`` at column 0) and simple
    assignments, in the script's order."""
    pieces: list[Piece] = []
    lines = script.splitlines(keepends=True)
    index = 0
    while index < len(lines):
        line = lines[index]
        start = _FUNCTION_START.match(line)
        if start and _one_line_function(line):
            pieces.append(Piece(start.group(1), line, function=True))
        elif start:
            end = index
            while end < len(lines) and lines[end].rstrip("\n") != "}":
                end += 1
            pieces.append(Piece(start.group(1), "".join(lines[index : end + 1]), function=True))
            index = end
        elif assigned := _ASSIGNMENT.match(line):
            pieces.append(Piece(assigned.group(1), line, function=False))
        index += 1
    return pieces


def needed_pieces(
    pieces: Iterable[Piece],
    entries: tuple[str, ...],
    own: Iterable[str],
    not_reached: frozenset[str] = frozenset(),
) -> list[Piece]:
    """The functions ``entries`` reach (``not_reached``: names never called on this path), and the
    assignments of the variables they read that the main (``own``) does not set, in the
    script's order."""
    functions = {piece.name: piece for piece in pieces if piece.function}
    missing = [name for name in entries if name not in functions]
    if missing:
        raise GenerationError(f"install.sh has no function {missing[0]} (firstboot.py)")
    assignments = {piece.name: piece for piece in pieces if not piece.function}
    wanted: set[str] = set()
    todo = list(entries)
    while todo:
        name = todo.pop()
        if name in wanted:
            continue
        wanted.add(name)
        todo += [
            word
            for word in _COMMAND_WORD.findall(functions[name].text)
            if word in functions and word not in not_reached
        ]
    read = {word for name in wanted for word in _READ_VARIABLE.findall(functions[name].text)}
    variables = (read & set(assignments)) - set(own)
    return [
        piece
        for piece in pieces
        if (piece.function and piece.name in wanted)
        or (not piece.function and piece.name in variables)
    ]


def ere_literal(text: str) -> str:
    """``text`` as a POSIX extended regular expression matching it literally (grep -E)."""
    return re.sub(r"([.*+?^${}()|[\]\\])", r"\\\1", text)


def containerd_read_check(dropin: str) -> list[str]:
    """Lines failing the first boot, named, when containerd does not read ``dropin``: the
    imports of `containerd config dump` list the files 1.x loaded and the globs 2.x followed
    (LoadConfig); an image whose config.toml lacks the import (containerd < 2.2, which has no
    default one) would otherwise run every pod without the bundle's runtime settings."""
    directory, _, name = dropin.rpartition("/")
    pattern = f"{ere_literal(directory)}/({ere_literal(name)}|\\*\\.toml|\\*)[\"']"
    dump = "timeout 30 containerd config dump 2>/dev/null"
    unread = (
        f"containerd: {dropin} is not in effect: its config.toml does not import it; "
        "install.sh (in the image) wires that import, cloud-init does not"
    )
    return [
        "if command -v containerd >/dev/null 2>&1 &&",
        f"    ! {dump} | grep -Eq {sh_quote('^imports = .*' + pattern)}; then",
        f"    say {sh_quote(unread)}",
        "    failed=$((failed + 1))",
        "fi",
    ]


def main_lines(
    words: Mapping[str, str],
    pending: str,
    installed: Iterable[tuple[str, str]] = (),
    containerd_dropin: str = "",
) -> list[str]:
    """The main: install.sh's globals for a live run on /, the plan's words, the two phases.

    ``pending`` (cloudinit.pending_command) writes the marker power_state reboots on, when the
    boot loader took the arguments: the run of boot_arguments failed nothing and the tool of
    its mechanism is here (install.sh's step_bootloader says, not fails, without update-grub).
    ``installed``: (mode, target) of the files install.sh's install_file installs from
    ``$bundle/rootfs`` (layout.INSTALLED_AT_FIRST_BOOT), as its phase 1 does."""
    lines = [f"{name}={sh_quote(value)}" for name, value in words.items()]
    lines += [f"install_file {mode} {sh_quote(target)}" for mode, target in installed]
    lines += [
        # install.sh's phase 2: what the record says an earlier bundle (this image's install.sh
        # or an earlier user-data) installed and this one does not carry, then the new record
        'remove_stale_files "$installed_paths"',
        'write_text "$record" "$installed_paths"',
        # runcmd's daemon-reload ran before this script: systemd reads what was removed again
        "run_step reload",
        *(containerd_read_check(containerd_dropin) if containerd_dropin else ()),
        "tuned_layer",
        "failed_before_boot=$failed",
        "boot_arguments",
    ]
    if pending:
        lines += [
            "case ${mechanism:-} in bls) loader=grubby ;; *) loader=update-grub ;; esac",
            'if [ -n "$kernel_args" ] && [ "$failed" -eq "$failed_before_boot" ] &&',
            '    command -v "$loader" >/dev/null 2>&1; then',
            f"    {pending}",
            "fi",
        ]
    lines += [
        'say "done: $installed written, $unchanged unchanged, $failed failed"',
        '[ "$failed" -eq 0 ]',
    ]
    return [line + "\n" for line in lines]


def first_boot_script(
    install_sh: str,
    words: Mapping[str, str],
    pending: str,
    installed: Iterable[tuple[str, str]] = (),
) -> str:
    """The script cloud-init runs after its other steps: install.sh's pieces without their
    comment lines (the user-data's size), then the main. install_file (and merge_daemon_json,
    which it calls) only when the main installs a file: they are 1 KB compressed."""
    return "".join(first_boot_parts(install_sh, words, pending, installed))


class FirstBootScript(NamedTuple):
    """The first-boot script in its two parts: user-data.j2 indents each apart."""

    body: str  # install.sh's pieces, the same in a matrix's bundles (first_boot_body)
    main: str  # from the marker line on: this plan's words


def first_boot_parts(
    install_sh: str,
    words: Mapping[str, str],
    pending: str,
    installed: Iterable[tuple[str, str]] = (),
    containerd_dropin: str = "",
) -> FirstBootScript:
    """first_boot_script as its body and its main. The body ends with a newline, so that each
    part indented apart is the whole script indented."""
    installed = list(installed)
    if installed:  # install_file's source is $bundle/rootfs<path>
        words = {**words, "bundle": layout.FIRST_BOOT_BUNDLE}
    if any(target in layout.NCCL_STYLE_CONFS.values() for _, target in installed):
        raise GenerationError("the first boot does not stage nccl.conf (firstboot.py)")
    entries = ENTRY_FUNCTIONS + (("install_file",) if installed else ())
    body = first_boot_body(install_sh, entries, frozenset(words))
    if not body.endswith("\n"):
        raise GenerationError("install.sh must end with a newline (the first-boot script's body)")
    main = "".join(main_lines(words, pending, installed, containerd_dropin))
    return FirstBootScript(body, MAIN_MARKER + "\n" + main)


# install.sh is the same fixed templates/scripts/install.sh in every bundle, and the words the
# main sets are the same names: a matrix run has one or two distinct bodies. Computing the body
# took ~1.3 ms of every bundle's CPU (pieces, the calls they reach, comment lines).
@functools.lru_cache(maxsize=16)
def first_boot_body(install_sh: str, entries: tuple[str, ...], own: frozenset[str]) -> str:
    """The script before its main: install.sh's shebang, a fixed prologue, and the pieces that
    ``entries`` need (the variables the main sets, ``own``, left out), without comment lines;
    kept between runs (cached_body)."""
    return cached_body(install_sh, entries, own, BODY_CACHE_PATH)


def derived_body(install_sh: str, entries: tuple[str, ...], own: frozenset[str]) -> str:
    """first_boot_body, derived from install.sh's text."""
    code = without_comment_lines(install_sh)
    header = "".join(code.splitlines(keepends=True)[:1]) if code.startswith("#!") else ""
    prologue = "set -eu\numask 022\nLC_ALL=C\nexport LC_ALL\n"
    pieces = needed_pieces(top_level_pieces(code), entries, own, NOT_REACHED_AT_FIRST_BOOT)
    return without_indentation(header + prologue + "".join(piece.text for piece in pieces))


# A cold gen derived the body anew: ~1.45 ms of its CPU (the pieces and the calls they reach,
# with install.sh's compact form from shellform's cache); from the entry ~0.5 ms (the key's
# digest, ~40 KB of JSON). The bodies are kept beside the catalog
# (generator/cache.py) as JSON, keyed by install.sh's text (the one the bundle carries: no second
# read), the code that derives the body (this module, shellform.py) and the versions; each body
# in the entry is found by the arguments it was made for. A matrix run makes one or two.
BODY_CACHE_PATH = cache_dir("__catalog_cache__") / "first-boot.json"
BODY_CACHE_FORMAT = 1
# Bodies an entry keeps, the newest first: a third main (another set of words) does not push out
# the two that every run uses.
MAX_STORED_BODIES = 8


def body_key(install_sh: str) -> str:
    """install.sh's bytes, the code that derives a body from them, and the versions."""
    salt = f"{BODY_CACHE_FORMAT}\0{__version__}\0{sys.version}"
    code = [Path(__file__), Path(shellform.__file__)]
    contents = [(path.name, path.read_bytes()) for path in code]
    return contents_key(salt, [*contents, ("install.sh", install_sh.encode())])


def cached_body(install_sh: str, entries: tuple[str, ...], own: frozenset[str], cache: Path) -> str:
    """derived_body(install_sh, entries, own), from ``cache`` when it holds the body made for
    these arguments by this code; else derived, and stored with the entry's other bodies."""
    key = body_key(install_sh)
    bodies = bodies_from_entry(read_entry(cache), key)
    made_for = [list(entries), sorted(own)]
    for stored_for, body in bodies:
        if stored_for == made_for:
            return body
    body = derived_body(install_sh, entries, own)
    kept = [[*made_for, body], *([*args, text] for args, text in bodies)][:MAX_STORED_BODIES]
    store_entry(cache, json.dumps({"key": key, "bodies": kept}).encode())
    return body


def bodies_from_entry(entry: bytes | None, key: str) -> list[tuple[list[list[str]], str]]:
    """The ``([entries, own], body)`` pairs a cache entry holds; none when there is no entry,
    it is for another key, or it is not what we write (rows of two lists of text, then a
    text)."""
    rows = json_entry(entry, key, "bodies")
    if not isinstance(rows, list) or not all(_is_body_row(row) for row in rows):
        return []
    return [([entries, own], body) for entries, own, body in rows]


def _is_body_row(row: object) -> bool:
    return (
        isinstance(row, list)
        and len(row) == 3
        and all(_is_texts(part) for part in row[:2])
        and isinstance(row[2], str)
    )


def _is_texts(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


def first_boot_words(
    kernel_args: str, tuned_profile: str, installed_paths: Iterable[str] = ()
) -> dict[str, str]:
    """install.sh's globals as its read_list, option parsing and counters leave them for a live
    run on / (the words are the plan's, of install.list's alphabet). ``installed_paths``: the
    targets of install.list's file lines, the record install.sh writes for this bundle."""
    return {
        "installed_paths": "\n".join(installed_paths),
        "tool": TOOL,
        "root": "/",
        "live": "yes",
        "record": layout.INSTALL_RECORD,
        "kernel_args": kernel_args,
        "tuned_profile": tuned_profile,
        "installed": "0",
        "unchanged": "0",
        "skipped": "0",
        "failed": "0",
        "deferred": "",
    }
