"""Checks of the files systemd, the kernel and its loaders read: units, manager drop-ins,
tmpfiles.d, modprobe.d, modules-load.d, sysctl.d, limits.d and udev rules (see tools.py)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import yaml

from . import limits, sysctl
from .layout import ROOTFS, files, output_problems, relative
from .run import copy_readable, find_tool, find_udevadm, lines_naming, run, scratch, unprivileged
from .staging import stage_root

UNIT_SUFFIXES = ("service", "socket", "timer", "path", "mount", "target")


# --- systemd units and the manager ---------------------------------------------------------------

UNIT_PATTERNS = (
    *(f"{ROOTFS}/etc/systemd/system/*.{suffix}" for suffix in UNIT_SUFFIXES),
    f"{ROOTFS}/etc/systemd/system/*.d/*.conf",
)


def check_units(bundle: Path) -> list[str]:
    """`systemd-analyze verify --recursive-errors=no --man=no --root=STAGE` on every unit."""
    units = files(bundle, *UNIT_PATTERNS)
    if not units:
        return []
    analyze = find_tool("systemd-analyze")
    with scratch("units") as tmp:
        root = stage_root(bundle / ROOTFS, tmp / "root", units)
        names = sorted(
            {path.parent.name[:-2] if path.suffix == ".conf" else path.name for path in units}
        )
        result = run(
            [analyze, "verify", "--recursive-errors=no", "--man=no", f"--root={root}", *names]
        )
    problems = (
        output_problems(result, "systemd-analyze verify")
        if result.returncode != 0
        else [
            f"systemd-analyze verify: {line}"
            for line in lines_naming(result.stdout + result.stderr, *names)
        ]
    )
    return [problem.replace(str(root), ROOTFS) for problem in problems]


SYSTEM_CONF_PATTERNS = (f"{ROOTFS}/etc/systemd/system.conf.d/*.conf",)


def check_system_conf(bundle: Path) -> list[str]:
    """The manager's own parser (`systemd --test --user`, same key table as system.conf) as nobody;
    stderr naming the drop-in is a problem, since the exit status is always 0. Then
    `systemd-analyze cat-config` must show each drop-in, proving systemd reads it from that path."""
    dropins = files(bundle, *SYSTEM_CONF_PATTERNS)
    if not dropins:
        return []
    manager, analyze = find_tool("systemd"), find_tool("systemd-analyze")
    problems: list[str] = []
    with scratch("manager") as tmp:
        for dropin in dropins:
            copy_readable(dropin, tmp / "systemd" / "user.conf.d" / dropin.name)
        env = {"HOME": str(tmp), "XDG_CONFIG_HOME": str(tmp), "XDG_RUNTIME_DIR": str(tmp)}
        result = run(
            unprivileged(
                [
                    manager,
                    "--test",
                    "--user",
                    "--no-pager",
                    "--log-target=console",
                    "--log-level=warning",
                ]
            ),
            env=env,
        )
        problems += [
            f"systemd --test: {line}" for line in lines_naming(result.stderr, "user.conf.d")
        ]
        if result.returncode != 0:
            problems += output_problems(result, "systemd --test")
        problems = [
            p.replace(f"{tmp}/systemd/user.conf.d/", f"{ROOTFS}/etc/systemd/system.conf.d/")
            for p in problems
        ]
    shown = run([analyze, "cat-config", f"--root={bundle / ROOTFS}", "systemd/system.conf"]).stdout
    problems += [
        f"systemd-analyze cat-config systemd/system.conf does not read {relative(bundle, d)}"
        for d in dropins
        if f"/etc/systemd/system.conf.d/{d.name}" not in shown
    ]
    return problems


TMPFILES_PATTERNS = (f"{ROOTFS}/etc/tmpfiles.d/*.conf",)


def check_tmpfiles(bundle: Path) -> list[str]:
    """`systemd-tmpfiles --create --root=EMPTY` as nobody: parses every line with the real
    parser and acts only inside an empty scratch root (exit 65 and a message on a bad line)."""
    configs = files(bundle, *TMPFILES_PATTERNS)
    if not configs:
        return []
    tmpfiles = find_tool("systemd-tmpfiles")
    with scratch("tmpfiles") as tmp:
        root = tmp / "root"
        root.mkdir()
        if os.geteuid() == 0:
            os.chown(root, 65534, 65534)
        copies = [str(copy_readable(path, tmp / path.name)) for path in configs]
        result = run(unprivileged([tmpfiles, "--create", f"--root={root}", *copies]))
    if result.returncode != 0 or result.stderr.strip():
        return [
            p.replace(f"{tmp}/", f"{ROOTFS}/etc/tmpfiles.d/")
            for p in output_problems(result, "systemd-tmpfiles")
        ]
    return []


# --- kernel modules -----------------------------------------------------------------------------

MODPROBE_PATTERNS = (f"{ROOTFS}/etc/modprobe.d/*.conf",)


def modprobe_config(bundle: Path) -> tuple[list[str], list[str]]:
    """(lines of `modprobe -C DIR --showconfig` that come from the bundle, libkmod's complaints)."""
    modprobe = find_tool("modprobe")
    with scratch("modprobe") as tmp:
        (tmp / "empty").mkdir()
        for path in files(bundle, *MODPROBE_PATTERNS):
            copy_readable(path, tmp / "conf" / path.name)
        (tmp / "conf").mkdir(exist_ok=True)
        host = run([modprobe, "-C", str(tmp / "empty"), "--showconfig"]).stdout.splitlines()
        result = run([modprobe, "-C", str(tmp / "conf"), "--showconfig"])
    ours = [line for line in result.stdout.splitlines() if line not in host]  # host: /proc/cmdline
    complaints = [
        line.replace(str(tmp / "conf"), "modprobe.d") for line in result.stderr.splitlines()
    ]
    return ours, complaints + ([f"exit status {result.returncode}"] if result.returncode else [])


def directives(text: str) -> list[list[str]]:
    joined = text.replace("\\\n", " ")
    return [
        line.split()
        for line in joined.splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]


def check_modprobe(bundle: Path) -> list[str]:
    """`modprobe -C DIR --showconfig`: libkmod reports bad lines only on stderr (exit 0), so any
    stderr is a problem; then every directive must appear in the configuration kmod read."""
    configs = files(bundle, *MODPROBE_PATTERNS)
    if not configs:
        return []
    shown, complaints = modprobe_config(bundle)
    problems = [f"modprobe: {line}" for line in complaints]
    shown_words = [line.split() for line in shown]
    for path in configs:
        for words in directives(path.read_text()):
            module = words[1].replace("-", "_") if len(words) > 1 else ""
            wanted = [words[0], module, *words[2:]] if words[0] == "options" else [words[0], module]
            if not any(
                seen[:2] == wanted[:2] and set(wanted[2:]) <= set(seen[2:]) for seen in shown_words
            ):
                problems.append(f"{relative(bundle, path)}: kmod did not read '{' '.join(words)}'")
    return problems


MODULES_LOAD_PATTERNS = (f"{ROOTFS}/etc/modules-load.d/*.conf",)


def check_modules_load(bundle: Path) -> list[str]:
    """Narrow: systemd-modules-load takes one module name per line ('#'/';' comments); a name
    must be one kmod can look up, and the bundle's modprobe.d must not turn it into a no-op
    (`install <module> /bin/false|/bin/true`). Not covered: whether the target kernel (or DKMS,
    for nvidia-peermem) has the module; no module tree of the target is available offline."""
    configs = files(bundle, *MODULES_LOAD_PATTERNS)
    if not configs:
        return []
    shown, _ = modprobe_config(bundle)
    disabled = {
        words[1]
        for words in (line.split() for line in shown)
        if len(words) >= 3
        and words[0] == "install"
        and words[2] in {"/bin/false", "/bin/true", "/usr/bin/false", "/usr/bin/true"}
    }
    problems = []
    for path in configs:
        for number, raw in enumerate(path.read_text().splitlines(), start=1):
            name = raw.strip()
            if not name or name[0] in "#;":
                continue
            if not all(char.isalnum() or char in "_-" for char in name):
                problems.append(f"{relative(bundle, path)}:{number}: '{name}' is not a module name")
            elif name.replace("-", "_") in disabled:
                problems.append(
                    f"{relative(bundle, path)}:{number}: {name} is loaded at boot but modprobe.d "
                    "installs it as a no-op"
                )
    return problems


# --- kernel parameters and login limits ----------------------------------------------------------

SYSCTL_PATTERNS = (f"{ROOTFS}/etc/sysctl.d/*.conf",)
PROC_SYS = Path("/proc/sys")


def sysctl_assignments(bundle: Path) -> tuple[list[sysctl.Assignment], list[str]]:
    assignments: list[sysctl.Assignment] = []
    problems: list[str] = []
    for path in files(bundle, *SYSCTL_PATTERNS):
        found, wrong = sysctl.parse_sysctl(relative(bundle, path), path.read_text())
        assignments += found
        problems += wrong
    return assignments, problems


def world_writable(key: str) -> bool:
    path = PROC_SYS / key.replace(".", "/")
    return path.exists() and bool(path.stat().st_mode & 0o002)


def run_systemd_sysctl(configs: list[Path], keys: list[str]) -> list[str]:
    """The real systemd-sysctl as nobody, for its parser: every write it attempts is refused
    (EACCES, logged at debug level only) and a key nobody could write is not handed to it. Keys
    missing on *this* kernel (ENOENT) are left to the reference lists: the host is not the target.
    """
    if os.geteuid() == 0 and any(world_writable(key) for key in keys):
        return ["systemd-sysctl: not run: a key names a world-writable /proc/sys entry"]
    tool = find_tool("systemd-sysctl")
    with scratch("sysctl") as tmp:
        copies = [str(copy_readable(path, tmp / path.name)) for path in configs]
        result = run(unprivileged([tool, *copies]))
    text = (result.stderr + result.stdout).replace(str(tmp) + "/", f"{ROOTFS}/etc/sysctl.d/")
    lines = [
        line
        for line in text.splitlines()
        if line.strip() and not line.endswith("No such file or directory")
    ]
    return [f"systemd-sysctl: {line}" for line in lines]


PLAN_JSON = "plan.json"


def bundle_distro(bundle: Path) -> str:
    """The distribution the bundle was made for (plan.json's ``distro``); "" = portable."""
    plan = bundle / PLAN_JSON
    if not plan.is_file():
        return ""
    try:
        distro = json.loads(plan.read_text(encoding="utf-8")).get("distro", "")
    except (ValueError, AttributeError):
        return ""  # the json validator reports a plan.json that does not parse
    return distro if isinstance(distro, str) else ""


GRUB_DROPIN_DIR = "/etc/default/grub.d/"


def reads_grub_dropins(bundle: Path) -> bool:
    """Whether the bundle's distribution reads GRUB drop-ins: its table's ``boot_args.reads``
    (hardware_db/distros/, read as plain YAML) names /etc/default/grub.d. Red Hat's grub2-mkconfig
    sources only /etc/default/grub, so a RHEL bundle carries none; a portable bundle may meet a
    distribution that reads them, and so may a distribution without a table."""
    distro = bundle_distro(bundle)
    path = sysctl.DISTROS / f"{distro}.yaml"
    if not distro or not path.is_file():
        return True
    reads = (yaml.safe_load(path.read_text(encoding="utf-8")).get("boot_args") or {}).get("reads")
    return any(str(read).startswith(GRUB_DROPIN_DIR) for read in reads or [])


def check_sysctl(bundle: Path) -> list[str]:
    """Every key exists on each reference kernel of the bundle's distribution (plan.json's
    ``distro``; a portable bundle: of every distribution), as listed in the committed
    sysctl-keys-*.txt lists (sysctl.lists_for), and its value has the shape that kernel reads
    (one integer, N integers, text); no key set twice; then systemd-sysctl itself parses the
    files as nobody. Not covered: value ranges (the kernel's EINVAL shows only at boot) and keys
    of modules loaded later."""
    configs = files(bundle, *SYSCTL_PATTERNS)
    if not configs:
        return []
    assignments, problems = sysctl_assignments(bundle)
    distro = bundle_distro(bundle)
    references = sysctl.lists_for(distro)
    if references is None:
        return [f"{PLAN_JSON}: distro {distro!r:.40} has no table in hardware_db/distros/"]
    for reference in references:
        if not reference.is_file():
            problems.append(f"{reference.name}: named for {distro or 'a distribution'}, missing")
            continue
        kernel = sysctl.load_reference(reference)
        for assignment in assignments:
            problems += sysctl.check_assignment(assignment, kernel)
    problems += sysctl.check_duplicates(assignments)
    return problems + run_systemd_sysctl(configs, [a.key for a in assignments])


LIMITS_PATTERNS = (f"{ROOTFS}/etc/security/limits.d/*.conf", f"{ROOTFS}/etc/security/limits.conf")


def check_limits(bundle: Path) -> list[str]:
    """pam_limits' own line parser, re-implemented in limits.py for every line (the real module
    only judges lines of the logged-in user's domain and reports to syslog with success), plus
    soft <= hard and nofile <= fs.nr_open (the bundle's, else the kernel default)."""
    configs = files(bundle, *LIMITS_PATTERNS)
    assignments, _ = sysctl_assignments(bundle)
    nr_open = next(
        (
            int(a.value)
            for a in reversed(assignments)
            if a.key == "fs.nr_open" and a.value.isdigit()
        ),
        limits.NR_OPEN_DEFAULT,
    )
    problems: list[str] = []
    for path in configs:
        lines, wrong = limits.parse_limits(path.read_text())
        problems += [
            f"{relative(bundle, path)}: {problem}"
            for problem in wrong + limits.check_semantics(lines, nr_open)
        ]
    return problems


# --- udev ----------------------------------------------------------------------------------------

UDEV_PATTERNS = (f"{ROOTFS}/etc/udev/rules.d/*.rules", f"{ROOTFS}/usr/lib/udev/rules.d/*.rules")


def check_udev(bundle: Path) -> list[str]:
    """`udevadm verify` (udev 254+, offline, style included): syntax, keys, operators, labels.
    Never `udevadm test`, which in 252 really writes ATTR{} to the device. Not covered: whether
    an ATTR value is accepted by the device (an unknown scheduler fails only at boot)."""
    rules = files(bundle, *UDEV_PATTERNS)
    if not rules:
        return []
    result = run([find_udevadm(), "verify", "--no-summary", *map(str, rules)])
    if result.returncode != 0:
        return [
            line.replace(str(bundle) + "/", "")
            for line in output_problems(result, "udevadm verify")
        ]
    return []
