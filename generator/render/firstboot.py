"""The first-boot script: install.sh's run on a live system, for cloud-init.

install.sh removes the files its install record says an earlier bundle installed and this one
does not carry, then writes the record; enables, disables and masks the plan's units and runs the
activation steps; layers tuned on the selection it finds (the previous one recorded once, to
restore) and adds and removes the bundle's boot arguments per mechanism (GRUB drop-in +
update-grub; BLS: grubby --args/--remove-args and /etc/kernel/cmdline), remembering what it
added. cloud-init must do the same at first boot, and the bookkeeping must be the same files, so
that an image baked with install.sh and booted with another bundle's user-data (or the reverse)
removes what the earlier one installed and added. The record written here is the one install.sh
writes for the same bundle (install.list's file lines), so a later install.sh agrees.

One implementation: the functions both paths run are install-lib.sh's, a fixed script that
install.sh sources from its bundle. The user-data writes it (its ``library`` form, without comment
lines and indentation: EC2's 16 KB) to layout.FIRST_BOOT_LIB, and the first-boot script sources
it, sets install.sh's globals as its option parsing leaves them for a live run on / with the
plan's words, and calls the functions in install.sh's order. The script is data and calls, not
logic: tests/test_first_boot.py runs it in a RHEL-like and a Debian-like root.

cloud-init's other modules ran before this script (runcmd's last line): an image's earlier files
were already read by this boot's early units (systemd-sysctl, udev, modules-load), so their
removal takes effect at the next boot either way, as the kernel arguments do; a stale unit is
disabled with --now (install-lib.sh's remove_stale).
"""

# No `from __future__ import annotations`: a NamedTuple turns each string annotation into
# a compiled ForwardRef, ~0.15 ms a record at import (bench/bench.py's cold gen).
import functools
import re
from collections.abc import Iterable, Mapping
from typing import NamedTuple

from generator import TOOL
from generator.errors import GenerationError
from generator.model import layout
from generator.model.shellform import without_comment_lines, without_indentation
from generator.render.formats import sh_quote
from generator.render.overlay import Step

# install.sh's first lines, before it sources its library.
PROLOGUE = "#!/bin/sh\nset -eu\numask 022\nLC_ALL=C\nexport LC_ALL\n"


class FirstBootScript(NamedTuple):
    """What the user-data writes for the first boot: the library and the script that sources it."""

    library: str  # install-lib.sh without comment lines and indentation
    script: str  # sources it, sets this plan's words, calls its functions


# Every bundle of a run carries the same library: its form (~1 ms of CPU) is made once a run.
@functools.lru_cache(maxsize=4)
def library_form(install_lib: str) -> str:
    """install-lib.sh as the user-data carries it (shellform: the same parse, fewer bytes)."""
    return without_indentation(without_comment_lines(install_lib))


def ere_literal(text: str) -> str:
    """``text`` as a POSIX extended regular expression matching it literally (grep -E)."""
    return re.sub(r"([.*+?^${}()|[\]\\])", r"\\\1", text)


def containerd_read_check(dropin: str) -> list[str]:
    """Lines failing the first boot, named, when containerd does not read ``dropin``: the
    imports of `containerd config dump` list the files 1.x loaded and the globs 2.x followed
    (LoadConfig); an image whose config.toml lacks the import (containerd < 2.2, which has no
    default one) would otherwise run every pod without the bundle's runtime settings. install.sh
    wires that import (wire_containerd, ~1 KB compressed): the first boot reports, as the
    user-data has no room for it."""
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
    steps: Iterable[Step] = (),
) -> list[str]:
    """install.sh's run on a live system, as calls: its globals, the files it installs from
    ``$bundle/rootfs`` (``installed``: layout.installed_at_first_boot, its phase 1), the stale
    files and the record (2), the units and activation steps (4: ``steps``, daemon-reload
    first), the tuned selection and the boot arguments (5).

    ``pending`` (cloudinit.pending_command) writes the marker power_state reboots on, when the
    boot loader took the arguments: the run of boot_arguments failed nothing and the tool of
    its mechanism is here (step_bootloader says, not fails, without update-grub)."""
    lines = [f"{name}={sh_quote(value)}" for name, value in words.items()]
    lines += [f"install_file {mode} {sh_quote(target)}" for mode, target in installed]
    lines += [
        'remove_stale_files "$installed_paths"',
        'write_text "$record" "$installed_paths"',
        *(step.call for step in steps),
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
        'say "done: $installed written, $unchanged unchanged, $skipped skipped, $failed failed"',
        '[ "$failed" -eq 0 ]',
    ]
    return [line + "\n" for line in lines]


def first_boot_parts(
    install_lib: str,
    words: Mapping[str, str],
    pending: str,
    installed: Iterable[tuple[str, str]] = (),
    containerd_dropin: str = "",
    steps: Iterable[Step] = (),
) -> FirstBootScript:
    """The library the user-data writes and the script that sources it (main_lines)."""
    installed = list(installed)
    if any(target in layout.NCCL_STYLE_CONFS.values() for _, target in installed):
        raise GenerationError("the first boot does not stage nccl.conf (firstboot.py)")
    source = f". {layout.FIRST_BOOT_LIB}\n"
    main = "".join(main_lines(words, pending, installed, containerd_dropin, steps))
    return FirstBootScript(library_form(install_lib), PROLOGUE + source + main)


def first_boot_words(
    kernel_args: str, tuned_profile: str, installed_paths: Iterable[str] = ()
) -> dict[str, str]:
    """install.sh's globals as its read_list, option parsing and counters leave them for a live
    run on / (the words are the plan's, of install.list's alphabet). ``installed_paths``: the
    targets of install.list's file lines, the record install.sh writes for this bundle."""
    return {
        "installed_paths": "\n".join(installed_paths),
        "tool": TOOL,
        "bundle": layout.FIRST_BOOT_BUNDLE,  # install_file's source is $bundle/rootfs<path>
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
