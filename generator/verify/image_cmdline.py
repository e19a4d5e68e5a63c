"""`gen verify --root`: the kernel command line an image boots with.

Read from what the image's boot loader reads: on a BLS system (RHEL 9) the entries' ``options``
lines and ``/etc/kernel/cmdline``; otherwise the GRUB drop-ins (parsed, never executed:
``grubvars``; what cannot be judged without running the image's code is ``not-judged``); and,
when the image has one, the ``linux`` lines of ``/boot/grub/grub.cfg`` or ``grub2/grub.cfg``."""

from __future__ import annotations

import re

from generator.model.setting import Setting
from generator.verify.consumers import arg_name, arg_value_holds, parse_cmdline
from generator.verify.grubvars import GrubVars, parse_grub_files
from generator.verify.imagefs import Image
from generator.verify.verdicts import Check, Verdict, check_of

OK, DIFFERS, MISSING = Verdict.OK, Verdict.DIFFERS, Verdict.MISSING
NOT_JUDGED = Verdict.NOT_JUDGED


def grub_cmdline(image: Image) -> GrubVars:
    """GRUB_CMDLINE_LINUX(_DEFAULT) of /etc/default/grub, then grub.d/*.cfg, as grub-mkconfig
    sources them (Debian 12's /usr/sbin/grub-mkconfig, lines 160-166): /etc/default/grub only
    when ``test -f`` holds, each ``*.cfg`` (sh's glob: no hidden name) when ``[ -e ]`` does. A
    grub.d entry that is there but cannot be read (a FIFO, which would hang update-grub, a file
    over the read cap) is recorded unread: the verdict is then not judged."""
    names = []
    main = image.resolve("/etc/default/grub")
    if main is not None and main.is_file():
        names.append("/etc/default/grub")
    directory = image.resolve("/etc/default/grub.d")
    if directory is not None and directory.is_dir():
        cfgs = sorted(p.name for p in directory.iterdir() if not p.name.startswith("."))
        names += [f"/etc/default/grub.d/{name}" for name in cfgs if name.endswith(".cfg")]
    files = [(name, text) for name in names if (text := image.read(name)) is not None]
    return parse_grub_files(files)


BLS_DIR = "/boot/loader/entries"


KERNEL_CMDLINE_FILE = "/etc/kernel/cmdline"  # what kernel-install gives kernels installed later


GRUB_CFGS = ("/boot/grub/grub.cfg", "/boot/grub2/grub.cfg")


def bls_entries(image: Image) -> list[tuple[str, str]]:
    """(path, text) of the Boot Loader Specification entries, in name order."""
    directory = image.resolve(BLS_DIR)
    if directory is None or not directory.is_dir():
        return []
    names = sorted(p.name for p in directory.iterdir() if p.name.endswith(".conf"))
    found = [(f"{BLS_DIR}/{name}", image.read(f"{BLS_DIR}/{name}")) for name in names]
    return [(path, text) for path, text in found if text is not None]


def bls_options(text: str) -> str:
    """An entry's kernel command line: its ``options`` lines, joined (the BLS key may repeat)."""
    lines = [line.split(None, 1) for line in text.splitlines()]
    return " ".join(f[1] if len(f) > 1 else "" for f in lines if f and f[0] == "options")


def boots_from_bls(image: Image, grub: GrubVars) -> bool:
    """RHEL 9: GRUB_ENABLE_BLSCFG=true, or entries in /boot/loader/entries (hardware_db/distros)."""
    return bool(bls_entries(image)) or grub.values.get("GRUB_ENABLE_BLSCFG") == "true"


def grub_cfg_lines(image: Image) -> list[tuple[str, str]]:
    """(file, command line) of each ``linux`` line of the generated GRUB configurations."""
    found = []
    for path in GRUB_CFGS:
        for line in (image.read(path) or "").splitlines():
            if re.match(r"\s*linux(efi)?\s", line):
                found.append((path, " ".join(line.split()[2:])))
    return found


def arg_verdict(setting: Setting, cmdlines: list[tuple[str, str]]) -> tuple[str, str] | None:
    """(source, what is wrong) for the first command line lacking the argument or its value."""
    name = arg_name(setting.key)
    for source, cmdline in cmdlines:
        args = parse_cmdline(cmdline)
        if name not in args:
            return source, "absent"
        if not arg_value_holds(name, args[name], setting.value):
            return source, f"{args[name] or '(flag)'}"
    return None


def check_bls_arg(setting: Setting, image: Image) -> Check:
    """What a BLS system boots with: each entry's options; later kernels: /etc/kernel/cmdline.

    The Debian drop-in is not read here (Red Hat's grub2-mkconfig sources /etc/default/grub
    only, and with BLS it leaves the entries' options alone: hardware_db/distros/rhel-9.yaml).
    """
    entries = [(path, bls_options(text)) for path, text in bls_entries(image)]
    if not entries:
        return check_of(setting, "no BLS entry", MISSING, f"GRUB_ENABLE_BLSCFG but no {BLS_DIR}")
    unread = [path for path, options in entries if "$" in options]
    if unread:
        why = f"{unread[0]}: options use a grubenv variable ($kernelopts), which is not read"
        return check_of(setting, "not judged", NOT_JUDGED, why)
    kernel_cmdline = image.read(KERNEL_CMDLINE_FILE)
    later = [] if kernel_cmdline is None else [(KERNEL_CMDLINE_FILE, kernel_cmdline)]
    wrong = arg_verdict(setting, entries + later + grub_cfg_lines(image))
    if wrong is not None:
        source, value = wrong
        verdict = MISSING if value == "absent" else DIFFERS
        return check_of(setting, f"{value} ({source})", verdict, "the boot loader reads it there")
    if kernel_cmdline is None:
        why = f"no {KERNEL_CMDLINE_FILE}: kernels installed later will not carry it"
        return check_of(setting, "in the BLS entries only", DIFFERS, why)
    return check_of(setting, setting.value or "(set)", OK, f"BLS entries, {KERNEL_CMDLINE_FILE}")


def check_kernel_arg(setting: Setting, image: Image) -> Check:
    grub = grub_cmdline(image)
    if boots_from_bls(image, grub):
        return check_bls_arg(setting, image)
    cmdline = grub.cmdline()
    if cmdline is None:
        return check_of(setting, "not judged", NOT_JUDGED, "; ".join(grub.unjudged[:2]))
    args = parse_cmdline(cmdline)
    name = arg_name(setting.key)
    if name not in args:
        where = ", ".join(grub.files) or "no /etc/default/grub or grub.d drop-in"
        return check_of(
            setting, "absent", MISSING, f"not in GRUB_CMDLINE_LINUX(_DEFAULT) ({where})"
        )
    value = args[name] or ""
    if not arg_value_holds(name, args[name], setting.value):
        return check_of(
            setting, value or "(flag)", DIFFERS, "another value in the GRUB configuration"
        )
    generated = grub_cfg_lines(image)
    lacking = [path for path, line in generated if name not in parse_cmdline(line)]
    if lacking:
        return check_of(
            setting,
            "in the drop-in only",
            DIFFERS,
            f"{lacking[0]} lacks it: run update-grub in the image",
        )
    return check_of(setting, value or "(set)", OK, "GRUB configuration")
