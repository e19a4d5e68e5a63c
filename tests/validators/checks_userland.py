"""Checks of the files read by cloud-init, the shell, tuned and GRUB (see tools.py)."""

from __future__ import annotations

import email
import gzip
import hashlib
import json
import os
import re
import shlex
import subprocess
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import NamedTuple

from .checks_system import reads_grub_dropins, sysctl_assignments
from .layout import (
    INSTALL_LIB,
    INSTALL_SH,
    KERNEL_CMDLINE,
    LIBEXEC,
    ROOTFS,
    USER_DATA,
    USER_DATA_GZ,
    USER_DATA_MIME,
    USER_DATA_MIME_GZ,
    files,
    output_problems,
    relative,
)
from .run import (
    SYSTEM_PYTHON,
    TIMEOUT_MANY_S,
    copy_readable,
    find_tool,
    find_tuned_python,
    run,
    scratch,
    unprivileged,
)

HERE = Path(__file__).resolve().parent
SHELLS = {"sh", "bash", "dash", "ksh"}
COMMAND_LINE_SIZE = 2048  # arch/x86/include/asm/setup.h and arch/arm64/include/uapi/asm/setup.h
SHELLCHECK_BATCH = 4
# The two write_files entries that are not in rootfs/, checked on their own: the bundle's
# install-lib.sh and the first-boot script that sources it and calls its functions as install.sh
# does on a live system (generator/render/firstboot.py)
FIRST_BOOT_SCRIPT = "/run/goldtune/first-boot"
FIRST_BOOT_LIB = "/run/goldtune/install-lib.sh"
FIRST_BOOT_PROLOGUE = ["#!/bin/sh", "set -eu", "umask 022", "LC_ALL=C", "export LC_ALL"]
# rootfs/ files the user-data leaves out: the collector is for gen verify, not first-boot tuning
VERIFY_ONLY = {"/usr/lib/goldtune/collect", "/etc/goldtune/collect.conf"}
# the preflight unit, which install.sh installs and the user-data has no room for (issue 28)
IMAGE_ONLY = {
    "/usr/lib/goldtune/preflight",
    "/etc/goldtune/preflight.conf",
    "/etc/systemd/system/goldtune-preflight.service",
    # and the NCCL boot step (issue 38)
    "/usr/lib/goldtune/nccl-resolve",
    "/etc/goldtune/nccl-resolve.conf",
    "/etc/systemd/system/goldtune-nccl-resolve.service",
}
# rootfs/ files the user-data writes beside the first-boot script, which installs them with
# install.sh's install_file (daemon.json: merged into the one in place, not replaced; the tuned
# profile: put where the image's tuned reads it, install-lib.sh tuned_place)
STAGED_ROOTFS = "/run/goldtune/rootfs"
STAGED_AT_FIRST_BOOT = re.compile(
    r"/etc/docker/daemon\.json|/etc/tuned/(profiles/)?goldtune-[A-Za-z0-9_.-]+/tuned\.conf"
)


def staged_target(path: str) -> str:
    """The target of a file the user-data stages for the first-boot script, else ``path``."""
    target = path.removeprefix(STAGED_ROOTFS)
    return target if target != path and STAGED_AT_FIRST_BOOT.fullmatch(target) else path


# --- cloud-init ----------------------------------------------------------------------------------


def check_cloud_init(bundle: Path) -> list[str]:
    return check_cloud_init_many([bundle])[bundle]


def check_cloud_init_many(bundles: list[Path]) -> dict[Path, list[str]]:
    """cloudinit_check.py, as nobody, in one /usr/bin/python3 for all bundles: cloud-init's own
    schema validation (what `cloud-init schema --config-file` runs: exit 1 on schema errors,
    invalid YAML, a missing #cloud-config header), no unknown top-level key, write_files decoded
    as cc_write_files writes them equal rootfs/ file for file with the same mode, and runcmd and
    bootcmd as cloud-init writes them (shellify) pass shellcheck."""
    results: dict[Path, list[str]] = {bundle: [] for bundle in bundles}
    with_data = [bundle for bundle in bundles if (bundle / USER_DATA).is_file()]
    if not with_data:
        return results
    python = find_tool(SYSTEM_PYTHON)
    find_tool("cloud-init")
    with scratch("cloud-init") as tmp:
        helper = copy_readable(HERE / "cloudinit_check.py", tmp / "cloudinit_check.py")
        out = tmp / "out"
        out.mkdir(mode=0o777)
        out.chmod(0o777)
        copies = [
            str(copy_readable(bundle / USER_DATA, tmp / "in" / str(index) / "user-data"))
            for index, bundle in enumerate(with_data)
        ]
        decoded = run(
            unprivileged([python, str(helper), str(out), *copies]), timeout=TIMEOUT_MANY_S
        )
        if decoded.returncode != 0:
            return {
                **results,
                **{b: output_problems(decoded, "cloudinit_check.py") for b in with_data},
            }
        scripts: dict[Path, Path] = {}
        for index, (bundle, report) in enumerate(
            zip(with_data, json.loads(decoded.stdout), strict=True)
        ):
            results[bundle] += [
                f"{USER_DATA}: {problem}".replace(copies[index], USER_DATA)
                for problem in report["problems"]
            ]
            if report["files"] is not None:  # None: the schema check failed, nothing was decoded
                results[bundle] += compare_write_files(
                    bundle, out / str(index) / "files", report["files"]
                )
            scripts.update({Path(script): bundle for script in report["scripts"]})
            written = out / str(index) / "files"
            if report["files"] is not None and (written / FIRST_BOOT_SCRIPT.lstrip("/")).is_file():
                scripts[with_library_inlined(written)] = bundle
            results[bundle] += check_other_forms(bundle)
        for script, findings in shellcheck_many(list(scripts)).items():
            label = f"{USER_DATA} ({script.stem} as cloud-init writes it)"
            results[scripts[script]] += [f"{label}: {line.split(':', 1)[1]}" for line in findings]
    return results


def check_other_forms(bundle: Path) -> list[str]:
    """The gzip and MIME forms carry the user-data byte for byte (cloud-init's own reading of
    them: tests/test_cloud_scale.py)."""
    plain = (bundle / USER_DATA).read_bytes()
    problems = []
    packed = bundle / USER_DATA_GZ
    if packed.is_file() and gzip.decompress(packed.read_bytes()) != plain:
        problems.append(f"{USER_DATA_GZ}: does not inflate to {USER_DATA}")
    mime = bundle / USER_DATA_MIME
    packed_mime = bundle / USER_DATA_MIME_GZ
    if packed_mime.is_file() and gzip.decompress(packed_mime.read_bytes()) != mime.read_bytes():
        problems.append(f"{USER_DATA_MIME_GZ}: does not inflate to {USER_DATA_MIME}")
    if mime.is_file():
        message = email.message_from_bytes(mime.read_bytes())
        parts = [p for p in message.walk() if p.get_content_type() == "text/cloud-config"]
        if not parts or parts[-1].get_payload(decode=True).rstrip(b"\n") != plain.rstrip(b"\n"):
            problems.append(f"{USER_DATA_MIME}: its last text/cloud-config part is not {USER_DATA}")
    return problems


def comments_left_out(bundle: Path, original: Path, delivered: bytes) -> bool:
    """``delivered`` is ``original`` with only whole comment lines and blank lines left out
    (and a generated file's header line cut to the bundle's name; a fixed script's lines may
    also lose their leading blanks, which tests/test_shellform.py proves sh ignores there), and
    manifest.json names that form's digest."""
    # a fixed script: rootfs/usr/lib/<tool>/<name> (layout.LIBEXEC)
    dedented = original.parent.relative_to(bundle).as_posix() == f"rootfs{LIBEXEC}"
    if not lines_kept(original.read_text(), delivered.decode(), dedented):
        return False
    manifest = json.loads((bundle / "manifest.json").read_text())
    digest = hashlib.sha256(delivered).hexdigest()
    listed = {entry["path"]: entry.get("first_boot_sha256") for entry in manifest["files"]}
    return listed.get(str(original.relative_to(bundle))) == digest


def shell_line_form(line: str) -> str:
    """A script line as the user-data may carry it: without its leading blanks, and a function
    head (``name() {``) without the comment after it (tests/test_shellform.py proves the parse
    the same)."""
    line = line.lstrip(" \t")
    head, brace, comment = line.partition("() {")
    if brace and head.isidentifier() and comment.lstrip(" \t").startswith("#"):
        return head + brace
    return line


def lines_kept(original: str, delivered: str, dedented: bool) -> bool:
    """Every line of ``delivered`` is the next line of ``original`` (in its shell_line_form
    where ``dedented``), and only comment and blank lines of ``original`` are left out."""
    kept = iter(delivered.splitlines())
    wanted = next(kept, None)
    for number, line in enumerate(original.splitlines()):
        if dedented and wanted is not None and shell_line_form(line) == wanted:
            wanted = next(kept, None)
            continue
        header_cut = (
            number == 0
            and wanted is not None
            and wanted.startswith("# goldtune bundle for ")
            and line.startswith(wanted + ": ")
        )
        if line == wanted or header_cut:
            wanted = next(kept, None)
        elif line.strip() and not line.strip().startswith("#"):
            return False  # a line of code is missing
    return wanted is None


def compare_write_files(bundle: Path, written: Path, modes: dict[str, str]) -> list[str]:
    overlay = {
        "/" + relative(bundle / ROOTFS, path): path for path in files(bundle, f"{ROOTFS}/**/*")
    }
    at = {staged_target(path): path for path in modes}  # target: written at
    modes = {staged_target(path): mode for path, mode in modes.items()}
    problems = [
        f"{USER_DATA}: write_files lacks {path} (in rootfs/)"
        for path in sorted(set(overlay) - set(modes) - VERIFY_ONLY - IMAGE_ONLY)
    ]
    for path, mode in sorted(modes.items()):
        if path == FIRST_BOOT_SCRIPT:
            problems += check_first_boot_script(bundle, (written / path.lstrip("/")).read_text())
            continue
        if path == FIRST_BOOT_LIB:
            problems += check_first_boot_library(bundle, (written / path.lstrip("/")).read_text())
            continue
        if STAGED_AT_FIRST_BOOT.fullmatch(path) and at[path] == path:
            problems.append(
                f"{USER_DATA}: write_files replaces {path}, which the first-boot script installs"
            )
        if path not in overlay:
            problems.append(
                f"{USER_DATA}: write_files delivers {path}, which is not in rootfs/ (no check "
                "covers it)"
            )
            continue
        delivered = (written / at[path].lstrip("/")).read_bytes()
        if delivered != overlay[path].read_bytes() and not comments_left_out(
            bundle, overlay[path], delivered
        ):
            problems.append(f"{USER_DATA}: write_files content of {path} differs from rootfs{path}")
        actual = overlay[path].stat().st_mode & 0o7777
        if int(mode, 8) != actual:
            problems.append(
                f"{USER_DATA}: write_files mode {mode} of {path} differs from rootfs "
                f"({oct(actual)})"
            )
    return problems


def check_first_boot_script(bundle: Path, text: str) -> list[str]:
    """The first-boot script sources the library after install.sh's prologue and defines no
    function of its own (its functions are install-lib.sh's, not a second copy); it names only
    the bundle's tuned profile."""
    lines = text.splitlines()
    problems = []
    if lines[: len(FIRST_BOOT_PROLOGUE) + 1] != [*FIRST_BOOT_PROLOGUE, f". {FIRST_BOOT_LIB}"]:
        problems.append(
            f"{USER_DATA}: {FIRST_BOOT_SCRIPT} does not start with install.sh's prologue and "
            f"'. {FIRST_BOOT_LIB}'"
        )
    own = [line for line in lines if re.match(r"\s*[A-Za-z_][A-Za-z0-9_]*\s*\(\)", line)]
    if own:
        problems.append(f"{USER_DATA}: {FIRST_BOOT_SCRIPT} defines a function: {own[0][:80]!r}")
    profiles = {p.parent.name for p in files(bundle, *TUNED_PATTERNS)}
    for line in lines:
        if line.startswith("tuned_profile="):
            name = line.split("=", 1)[1].strip("'")
            if name and name not in profiles:
                problems.append(
                    f"{USER_DATA}: {FIRST_BOOT_SCRIPT} selects {name!r}, not the bundle's"
                )
    return problems


def check_first_boot_library(bundle: Path, text: str) -> list[str]:
    """The library the first-boot script sources is the bundle's install-lib.sh, its comment
    and blank lines and leading blanks left out (tests/test_shellform.py proves the parse the
    same)."""
    if lines_kept((bundle / INSTALL_LIB).read_text(), text, dedented=True):
        return []
    return [f"{USER_DATA}: {FIRST_BOOT_LIB} is not the bundle's {INSTALL_LIB} without comments"]


def with_library_inlined(written: Path) -> Path:
    """The first-boot script as the shell reads it: the library's text where it is sourced,
    beside the script (shellcheck then checks the calls against the functions)."""
    script = (written / FIRST_BOOT_SCRIPT.lstrip("/")).read_text()
    library = (written / FIRST_BOOT_LIB.lstrip("/")).read_text()
    whole = written / FIRST_BOOT_SCRIPT.lstrip("/")
    whole = whole.with_name(whole.name + "-with-library")
    whole.write_text(script.replace(f". {FIRST_BOOT_LIB}\n", library, 1))
    return whole


# --- shell scripts -------------------------------------------------------------------------------


def interpreter(path: Path) -> str | None:
    with path.open("rb") as handle:
        first = handle.readline(200).decode(errors="replace")
    if not first.startswith("#!"):
        return None
    words = first[2:].split()
    if not words:
        return ""
    return words[1] if Path(words[0]).name == "env" and len(words) > 1 else Path(words[0]).name


def dialect(path: Path) -> str | None:
    """The shell a script is for: its #! line's, or sh for the library install.sh sources (no
    #! line: it is read, not run; its shellcheck directive says shell=sh)."""
    return "sh" if path.name == INSTALL_LIB else interpreter(path)


def script_files(bundle: Path) -> list[Path]:
    """install.sh, the library it sources and every file of the overlay that starts with #!."""
    candidates = files(bundle, INSTALL_SH, INSTALL_LIB, f"{ROOTFS}/**/*")
    return [
        path for path in candidates if path.name == INSTALL_LIB or interpreter(path) is not None
    ]


def shellcheck_many(scripts: list[Path]) -> dict[Path, list[str]]:
    """shellcheck at its default severity (style included); the findings of each script, one
    gcc-format line each ("path:line:col: level: text [SCnnnn]"). Small batches run side by side:
    one shellcheck over many files is no faster than one per file."""
    batches = [
        scripts[start : start + SHELLCHECK_BATCH]
        for start in range(0, len(scripts), SHELLCHECK_BATCH)
    ]
    findings: dict[Path, list[str]] = {script: [] for script in scripts}
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        for batch, result in zip(batches, pool.map(shellcheck_batch, batches), strict=True):
            by_name = {str(script): script for script in batch}
            for line in (result.stdout + result.stderr).splitlines():
                findings[by_name.get(line.split(":", 1)[0], batch[0])].append(line)
            if result.returncode != 0 and not any(findings[script] for script in batch):
                findings[batch[0]].append(f"shellcheck: exit status {result.returncode}")
    return findings


def shellcheck_batch(scripts: list[Path]) -> subprocess.CompletedProcess[str]:
    return run(
        # -x: install.sh is checked with the install-lib.sh it sources (its source-path)
        [find_tool("shellcheck"), "-x", "--format=gcc", *map(str, scripts)],
        timeout=TIMEOUT_MANY_S,
    )


def check_scripts(bundle: Path) -> list[str]:
    return check_scripts_many([bundle])[bundle]


def check_scripts_many(bundles: list[Path]) -> dict[Path, list[str]]:
    """shellcheck on install.sh and every script of the overlay (dialect from the #! line);
    a script in another language has no check here and is reported."""
    results: dict[Path, list[str]] = {}
    owners: dict[Path, Path] = {}
    for bundle in bundles:
        scripts = script_files(bundle)
        results[bundle] = [
            f"{relative(bundle, path)}: interpreter {dialect(path)!r} is not a shell; no check "
            "covers it"
            for path in scripts
            if dialect(path) not in SHELLS
        ]
        owners.update({path: bundle for path in scripts if dialect(path) in SHELLS})
    # The fixed scripts are byte for byte the same in every bundle: shellcheck reads only a
    # script's text and, for install.sh, the install-lib.sh beside it (the same in every
    # bundle too), so each distinct text is checked once and its findings are every copy's.
    copies: dict[bytes, list[Path]] = {}
    for path in owners:
        copies.setdefault(path.read_bytes(), []).append(path)
    checked = {paths[0]: paths for paths in copies.values()}
    for script, findings in shellcheck_many(list(checked)).items():
        for copy in checked[script]:
            bundle = owners[copy]
            results[bundle] += [
                f"shellcheck: {line.replace(str(script), str(copy)).replace(str(bundle) + '/', '')}"
                for line in findings
            ]
    return results


# --- tuned ---------------------------------------------------------------------------------------

# where tuned reads local profiles: /etc/tuned up to 2.22, /etc/tuned/profiles from 2.23 on (a
# bundle for a table whose tuned.profiles_dir says so: generator/model/layout.py)
TUNED_PATTERNS = (f"{ROOTFS}/etc/tuned/*/tuned.conf", f"{ROOTFS}/etc/tuned/profiles/*/tuned.conf")
# writing one of a pair makes the other read 0 (Documentation/admin-guide/sysctl/vm.rst)
RATIO_OF_BYTES = {
    "vm.dirty_bytes": "vm.dirty_ratio",
    "vm.dirty_background_bytes": "vm.dirty_background_ratio",
}


class TunedMachine(NamedTuple):
    """What tuned's unit gates read on the machine a bundle is for (tuned_check.unit_runs_on):
    uname_regex is searched in " ".join(os.uname()), cpuinfo_regex in /proc/cpuinfo. The bundle
    does not record its machine (plan.json names the hardware file, not its CPU), so the caller
    that knows it says so; None: not known."""

    # os.uname().machine alone (x86_64, aarch64): node name, release and version are the
    # image's; every uname_regex of tuned 2.20, 2.25.1 and 2.27.0's profiles is "aarch64"
    uname: str | None
    cpuinfo: str | None  # the CPU's identification lines, as /proc/cpuinfo prints them


def tuned_machine(arch: str, implementer: str | None, part: str | None) -> TunedMachine:
    """The machine of a CPU of ``arch`` whose arm64 MIDR implementer and part are known or not.
    arm64's /proc/cpuinfo names a CPU only by "CPU implementer", "CPU architecture", "CPU
    variant", "CPU part" and "CPU revision" (arch/arm64/kernel/cpuinfo.c c_show): the lines
    written here, without variant and revision (a stepping, not a model). Without both facts
    the cpuinfo is not known: a gated unit then counts. x86_64 needs none: no tuned profile
    gates an x86 unit on cpuinfo alone (every cpuinfo_regex unit also has uname_regex=aarch64
    in tuned 2.20, 2.25.1 and 2.27.0)."""
    if arch != "aarch64" or implementer is None or part is None:
        return TunedMachine(arch, None)
    lines = (f"CPU implementer\t: {implementer}", "CPU architecture: 8", f"CPU part\t: {part}")
    return TunedMachine(arch, "".join(f"{line}\n" for line in lines))


def check_tuned(bundle: Path) -> list[str]:
    return check_tuned_many([bundle])[bundle]


def check_tuned_many(
    bundles: list[Path],
    tree: Path | None = None,
    machines: Mapping[Path, TunedMachine] | None = None,
) -> dict[Path, list[str]]:
    """tuned_check.py with tuned's own Loader (includes resolved against /usr/lib/tuned), as
    nobody, one process for all bundles; then every [sysctl] key of a profile, includes merged,
    alone and layered on the bases install.sh may find selected (tuned_check.LAYERED_ON), that
    sysctl.d also sets must have sysctl.d's value: tuned's reapply_sysctl lets sysctl.d win, so
    another value makes `tuned-adm verify` fail on every boot. Not covered: values sysctl.d does
    not set (tuned judges them only on a running system). ``tree``: another tuned's source tree
    (tuned/ and profiles/ of a tag) whose code and profiles stand in for the installed ones.
    ``machines``: the machine each bundle is for; a unit gated on uname_regex/cpuinfo_regex
    (throughput-performance's [sysctl.thunderx]: kernel.numa_balancing=0 on ThunderX) counts
    only where tuned would create it there. A bundle without one, or a fact its machine lacks,
    keeps the conservative judgement: every gated unit counts, as if the machine matched."""
    results: dict[Path, list[str]] = {bundle: [] for bundle in bundles}
    jobs = [
        (bundle, [path.parent.name for path in files(bundle, *TUNED_PATTERNS)])
        for bundle in bundles
    ]
    jobs = [(bundle, names) for bundle, names in jobs if names]
    # the directory standing in for the target's profile directory: the one the bundle's
    # profiles are in (a bundle writes all of them into one)
    profile_dirs = {
        bundle: files(bundle, *TUNED_PATTERNS)[0].parent.parent.relative_to(bundle)
        for bundle, _ in jobs
    }
    if not jobs:
        return results
    python = find_tuned_python()
    with scratch("tuned") as tmp:
        helper = copy_readable(HERE / "tuned_check.py", tmp / "tuned_check.py")
        arguments = []
        if tree is not None:
            arguments += ["--tree", str(copy_readable(tree, tmp / "tuned-tree"))]
        known = {
            str(tmp / str(index)): machines[bundle]._asdict()
            for index, (bundle, _) in enumerate(jobs)
            if machines and bundle in machines
        }
        if known:
            arguments += ["--machines", json.dumps(known)]
        for index, (bundle, names) in enumerate(jobs):
            etc_tuned = copy_readable(bundle / profile_dirs[bundle], tmp / str(index))
            arguments += [f"{etc_tuned}:{name}" for name in names]
        result = run(unprivileged([python, str(helper), *arguments]), timeout=TIMEOUT_MANY_S)
        if result.returncode != 0:
            return {
                **results,
                **{bundle: output_problems(result, "tuned_check.py") for bundle, _ in jobs},
            }
        reports = json.loads(result.stdout)
    for index, (bundle, names) in enumerate(jobs):
        sysctl_d = {a.key: a.value for a in sysctl_assignments(bundle)[0]}
        for name in names:
            report = reports[f"{tmp}/{index}:{name}"]
            results[bundle] += [
                f"tuned: {problem}".replace(f"{tmp}/{index}", str(profile_dirs[bundle]))
                for problem in report["problems"]
            ]
            merged = {"": report["sysctl"], **report["layered"]}
            results[bundle] += [
                f"tuned: profile {name}{f' layered on {base}' if base else ''} sets sysctl "
                f"{key}={value}, but sysctl.d sets {sysctl_d[key]} (sysctl.d wins and "
                "`tuned-adm verify` fails)"
                for base, values in merged.items()
                for key, value in sorted(values.items())
                if key in sysctl_d and " ".join(value.split()) != " ".join(sysctl_d[key].split())
            ]
            # a bytes limit makes its ratio read 0 (vm.rst): a ratio the profile sets replaces it
            results[bundle] += [
                f"tuned: profile {name}{f' layered on {base}' if base else ''} sets sysctl "
                f"{ratio}={values[ratio]}, but sysctl.d sets {bytes_key} (its ratio reads 0)"
                for base, values in merged.items()
                for bytes_key, ratio in RATIO_OF_BYTES.items()
                if bytes_key in sysctl_d and values.get(ratio, "0").strip() != "0"
            ]
    return results


# --- GRUB drop-in and the kernel command line ----------------------------------------------------

GRUB_PATTERNS = (f"{ROOTFS}/etc/default/grub.d/*.cfg", KERNEL_CMDLINE)
# grub-mkconfig sources /etc/default/grub, then each /etc/default/grub.d/*.cfg, with sh.
SOURCE_DROPINS = """set -e
{base}
set > "$2/before"
for x in "$1"/*.cfg; do [ -e "$x" ] && . "$x"; done
set > "$2/after"
printf '%s\\n' "${{GRUB_CMDLINE_LINUX_DEFAULT-}}"
"""
BASES = {"Debian's default (quiet)": 'GRUB_CMDLINE_LINUX_DEFAULT="quiet"', "unset": ""}


def source_dropins(dropins: list[Path], base: str) -> tuple[str, list[str]]:
    """(GRUB_CMDLINE_LINUX_DEFAULT sourced as grub-mkconfig does it, other variables changed)."""
    with scratch("grub") as tmp:
        for path in dropins:
            copy_readable(path, tmp / "grub.d" / path.name)
        out = tmp / "out"
        out.mkdir(mode=0o777)
        out.chmod(0o777)
        result = run(
            unprivileged(
                [
                    find_tool("sh"),
                    "-c",
                    SOURCE_DROPINS.format(base=base),
                    "sh",
                    str(tmp / "grub.d"),
                    str(out),
                ]
            )
        )
        if result.returncode != 0:
            return "", output_problems(result, "sh sourcing grub.d")
        before, after = ((out / name).read_text().splitlines() for name in ("before", "after"))
    changed = {line.split("=", 1)[0] for line in set(after) ^ set(before)} - {
        "x",
        "GRUB_CMDLINE_LINUX_DEFAULT",
    }
    return result.stdout.strip(), [f"the drop-ins also change {name}" for name in sorted(changed)]


def check_cmdline_text(text: str) -> list[str]:
    problems = []
    if "\n" in text.strip():
        problems.append(f"{KERNEL_CMDLINE}: more than one line")
    if len(text.strip()) >= COMMAND_LINE_SIZE:
        problems.append(
            f"{KERNEL_CMDLINE}: {len(text.strip())} bytes; the kernel keeps {COMMAND_LINE_SIZE - 1}"
        )
    try:
        shlex.split(text)
    except ValueError as error:
        problems.append(f"{KERNEL_CMDLINE}: {error}")
    return problems


def check_grub(bundle: Path) -> list[str]:
    """`sh -n` and `shellcheck -s sh -e SC2034` on each drop-in, then sourcing them in a subshell
    as nobody, over Debian's default and over nothing: the result must be the base plus exactly
    the bundle's kernel-cmdline, and no other variable may change. Not covered: grub-mkconfig
    and the boot loader themselves, and whether the kernel knows each argument."""
    dropins = files(bundle, f"{ROOTFS}/etc/default/grub.d/*.cfg")
    cmdline_path = bundle / KERNEL_CMDLINE
    cmdline = cmdline_path.read_text().strip() if cmdline_path.is_file() else None
    problems = check_cmdline_text(cmdline) if cmdline is not None else []
    if not dropins:
        # a distribution whose grub never reads drop-ins (RHEL: BLS entries, grubby) gets none
        unread = cmdline and reads_grub_dropins(bundle)
        return problems + (
            [f"{KERNEL_CMDLINE} has arguments but no GRUB drop-in carries them"] if unread else []
        )
    for path in dropins:
        syntax = run([find_tool("sh"), "-n", str(path)])
        if syntax.returncode != 0:
            return problems + [
                p.replace(str(path), relative(bundle, path))
                for p in output_problems(syntax, "sh -n")
            ]
    lint = run(
        [
            find_tool("shellcheck"),
            "--shell=sh",
            "--exclude=SC2034",
            "--format=gcc",
            *map(str, dropins),
        ]
    )
    if lint.returncode != 0:
        problems += [
            line.replace(str(bundle) + "/", "") for line in output_problems(lint, "shellcheck")
        ]
    for label, base in BASES.items():
        value, changed = source_dropins(dropins, base)
        problems += [f"grub.d over {label}: {problem}" for problem in changed]
        expected = " ".join(filter(None, ["quiet" if base else "", cmdline or ""]))
        if cmdline is not None and value.split() != expected.split():
            problems.append(
                f"grub.d over {label}: GRUB_CMDLINE_LINUX_DEFAULT is {value!r}, expected "
                f"{expected!r}"
            )
    return problems


# --- machine-readable metadata -------------------------------------------------------------------

JSON_PATTERNS = ("*.json",)


def check_json(bundle: Path) -> list[str]:
    """manifest.json and plan.json parse as JSON (their consumers are goldtune and CI scripts)."""
    problems = []
    for path in files(bundle, *JSON_PATTERNS):
        try:
            json.loads(path.read_text())
        except ValueError as error:
            problems.append(f"{relative(bundle, path)}: {error}")
    return problems
