"""`gen verify BUNDLE --root DIR`: is the bundle in a mounted image, and will it take effect?

Per setting, the configuration its consumer will read is computed offline the way the consumer
reads it: drop-in directories merged by file name (``/etc`` over ``/run`` over ``/usr/lib``),
files in name order, the last assignment winning. So a later drop-in of the image that overrides
the bundle is found here, not only at boot. Kernel arguments are read from what the image's boot
loader reads: on a BLS system (RHEL 9) the entries' ``options`` lines and ``/etc/kernel/cmdline``;
otherwise the GRUB drop-ins (parsed, never executed: ``grubvars``; what cannot be judged without
running the image's code is a ``not-judged`` verdict with the file and line); and, when the image
has one, the ``linux`` lines of ``/boot/grub/grub.cfg`` or ``/boot/grub2/grub.cfg``. Symbolic
links inside the image are resolved inside it, never on the host, and only regular files are read
(``generator.foreign``).
"""

from __future__ import annotations

import configparser
import fnmatch
import hashlib
import os
import re
import tomllib
from collections.abc import Callable
from pathlib import Path, PurePosixPath

import yaml

from generator.model.kinds import KIND_SPECS, dropin_section
from generator.model.layout import (
    CONTAINERD_CONFIG,
    CONTAINERD_DROPIN,
    DOCKER_DAEMON_JSON,
    GPU_DATA,
    GPU_SCRIPT,
    KUBELET_DROPIN_DIR,
    NCCL_STYLE_CONFS,
)
from generator.model.setting import Setting, is_driver_module
from generator.verify.checks_runtime import check_daemon_json, check_nccl_text, provider_of
from generator.verify.consumers import (
    arg_name,
    arg_value_holds,
    daemon_json_object,
    kubelet_yaml,
    parse_cmdline,
    toml_lookup,
    toml_value,
)
from generator.verify.grubvars import GrubVars, parse_grub_files
from generator.verify.imagefs import MASKED, Image
from generator.verify.udevmatch import Disk, assigned_scheduler, parse_rules
from generator.verify.units import undone_by, unit_enabled, unit_exists, unit_files, unit_lines
from generator.verify.verdicts import (
    Bundle,
    Check,
    ManifestFile,
    Verdict,
    check_of,
    file_not_installed,
    merged_file_check,
    merged_nccl_conf,
)

OK, DIFFERS, MISSING, NA = Verdict.OK, Verdict.DIFFERS, Verdict.MISSING, Verdict.NOT_APPLICABLE
NOT_JUDGED = Verdict.NOT_JUDGED
# The C-accelerated safe loader where PyYAML has it (kubelet drop-ins of the image)
YAML_LOADER: type = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
CONTAINERD_DROPIN_DIR = str(PurePosixPath(CONTAINERD_DROPIN).parent)
SAMPLE_DISKS = {
    "nvme": Disk("nvme0n1", {"queue/rotational": "0", "removable": "0"}),
    "ssd": Disk("sda", {"queue/rotational": "0", "removable": "0"}),
    "hdd": Disk("sda", {"queue/rotational": "1", "removable": "0"}),
}


def config_lines(text: str) -> list[str]:
    return [
        line.strip()
        for line in text.splitlines()
        if line.strip() and not line.lstrip().startswith(("#", ";"))
    ]


def last_assignment(
    files: list[tuple[str, str]], match: Callable[[str], str | None]
) -> tuple[str, str] | None:
    """(value, file) of the last line for which ``match`` returns a value."""
    found = None
    for path, text in files:
        for line in config_lines(text):
            value = match(line)
            if value is not None:
                found = (value, path)
    return found


def verdict_of(
    setting: Setting, found: tuple[str, str] | None, expected: str | None = None
) -> Check:
    if found is None:
        return check_of(setting, "not configured", MISSING, "no file of the image sets it")
    value, path = found
    good = " ".join(value.split()) == " ".join(
        (setting.value if expected is None else expected).split()
    )
    return check_of(
        setting,
        f"{value} ({path})",
        OK if good else DIFFERS,
        "" if good else f"{path} sets another value and is read last",
    )


def check_sysctl(setting: Setting, image: Image) -> Check:
    def match(line: str) -> str | None:
        key, equals, value = line.lstrip("-").partition("=")
        return value.strip() if equals and key.strip().replace("/", ".") == setting.key else None

    return verdict_of(setting, last_assignment(image.dropins("sysctl.d", ".conf"), match))


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


def check_limit(setting: Setting, image: Image) -> Check:
    """pam_limits reads limits.conf, then limits.d/*.conf in name order; a later line wins."""
    domain, kind, item = setting.key.split()
    files = [("/etc/security/limits.conf", image.read("/etc/security/limits.conf") or "")]
    files += image.dropins("security/limits.d", ".conf", ("/etc",))

    def effective(which: str) -> tuple[str, str] | None:
        def match(line: str) -> str | None:
            fields = line.split()
            good = (
                len(fields) >= 4
                and fields[0] == domain
                and fields[2] == item
                and fields[1] in (which, "-")
            )
            return fields[3] if good else None

        return last_assignment(files, match)

    found = [effective(which) for which in (["soft", "hard"] if kind == "-" else [kind])]
    if any(f is None for f in found):
        return verdict_of(setting, None)
    wrong = [f for f in found if f is not None and f[0] != setting.value]
    return verdict_of(setting, wrong[0] if wrong else found[-1])


def ini_value(files: list[tuple[str, str]], section: str, option: str) -> tuple[str, str] | None:
    found = None
    for path, text in files:
        parser = configparser.ConfigParser(
            strict=False, interpolation=None, comment_prefixes=("#", ";")
        )
        parser.optionxform = str  # type: ignore[assignment,method-assign]
        try:
            parser.read_string(text)
        except configparser.Error:
            continue
        if parser.has_option(section, option):
            found = (parser.get(section, option), path)
    return found


def check_manager(setting: Setting, image: Image) -> Check:
    files = [("/etc/systemd/system.conf", image.read("/etc/systemd/system.conf") or "")]
    files += image.dropins("systemd/system.conf.d", ".conf")
    return verdict_of(setting, ini_value(files, "Manager", setting.key))


def check_modprobe(setting: Setting, image: Image) -> Check:
    words = setting.key.split()
    files = image.dropins("modprobe.d", ".conf")
    module = arg_name(words[1])
    if words[0] == "blacklist":
        found = last_assignment(
            files,
            lambda line: (
                ""
                if line.split()[:2] == ["blacklist", words[1]]
                or line.split()[:2] == ["blacklist", module]
                else None
            ),
        )
        return check_of(
            setting,
            f"blacklisted ({found[1]})" if found else "not blacklisted",
            OK if found else MISSING,
        )

    def match(line: str) -> str | None:
        fields = line.split()
        if len(fields) < 3 or fields[0] != "options" or arg_name(fields[1]) != module:
            return None
        values = [f.partition("=")[2] for f in fields[2:] if f.partition("=")[0] == words[2]]
        return values[-1] if values else None

    return verdict_of(setting, last_assignment(files, match))


def image_modules(image: Image) -> dict[str, set[str]] | None:
    """Module names (``-`` as ``_``) per kernel version of the image; None without a module tree."""
    base = image.resolve("/lib/modules")
    if base is None or not base.is_dir():
        return None
    found: dict[str, set[str]] = {}
    for kernel in sorted(p for p in base.iterdir() if p.is_dir() and not p.is_symlink()):
        names: set[str] = set()
        for index in ("modules.dep", "modules.builtin"):
            text = image.read(f"/lib/modules/{kernel.name}/{index}") or ""
            for line in text.splitlines():
                path = line.split(":", 1)[0]
                names.add(arg_name(re.sub(r"\.ko(\.\w+)?$", "", path.rsplit("/", 1)[-1])))
        found[kernel.name] = names
    return found


def check_module_load(setting: Setting, image: Image) -> Check:
    if is_driver_module(setting.key):
        data = (image.read(GPU_DATA) or "").splitlines()
        if f"module\t{setting.key}" in data:
            return check_of(setting, f"loaded by {GPU_SCRIPT} at boot", OK)
        return check_of(
            setting, "not loaded", MISSING, f"{GPU_DATA} does not list it for {GPU_SCRIPT}"
        )
    files = [
        *image.dropins("modules-load.d", ".conf"),
        ("/etc/modules", image.read("/etc/modules") or ""),
    ]
    found = last_assignment(
        files, lambda line: "" if arg_name(line.split()[0]) == arg_name(setting.key) else None
    )
    if not found:
        return check_of(
            setting, "not listed", MISSING, "no modules-load.d file of the image lists it"
        )
    kernels = image_modules(image)
    lacking = sorted(
        k for k, names in (kernels or {}).items() if arg_name(setting.key) not in names
    )
    if lacking:
        return check_of(
            setting,
            f"listed ({found[1]}), no module for {', '.join(lacking)}",
            DIFFERS,
            "systemd-modules-load will fail to find it at boot: its driver is not in the image",
        )
    return check_of(setting, f"listed ({found[1]})", OK)


def check_sysfs(setting: Setting, image: Image) -> Check:
    def match(line: str) -> str | None:
        fields = line.split(None, 6)
        return (
            fields[6]
            if len(fields) == 7 and fields[0] in ("w", "w+") and fields[1] == setting.key
            else None
        )

    return verdict_of(setting, last_assignment(image.dropins("tmpfiles.d", ".conf"), match))


def check_udev(setting: Setting, image: Image) -> Check:
    files = image.dropins("udev/rules.d", ".rules")
    rules = [rule for _, text in files for rule in parse_rules(text)]
    scheduler = (
        assigned_scheduler(rules, SAMPLE_DISKS[setting.key])
        if setting.key in SAMPLE_DISKS
        else None
    )
    if scheduler is None:
        return check_of(
            setting,
            "no rule",
            MISSING,
            f"no udev rule of the image sets the scheduler of a {setting.key} disk",
        )
    return check_of(
        setting, scheduler, OK if scheduler == setting.value else DIFFERS, "udev rules, last match"
    )


def check_tuned(setting: Setting, image: Image, profile: str | None) -> Check:
    if image.resolve("/usr/lib/tuned") is None and image.resolve("/usr/sbin/tuned") is None:
        return check_of(setting, "-", NA, "tuned is not installed in the image")
    # Several profiles merge left to right, the last winning (tuned/profiles/loader.py, merger.py
    # of redhat-performance/tuned): the bundle's must be last, layered on the image's base.
    active = (image.read("/etc/tuned/active_profile") or "").split()
    if profile and active[-1:] != [profile]:
        return check_of(
            setting,
            f"active_profile {' '.join(active) or '(none)'}",
            DIFFERS,
            f"tuned will not load {profile} last, over the other profiles",
        )
    section, _, option = setting.key.partition(".")
    text = image.read(f"/etc/tuned/{profile}/tuned.conf") if profile else None
    return verdict_of(
        setting, ini_value([(f"/etc/tuned/{profile}/tuned.conf", text or "")], section, option)
    )


def bundle_targets(bundle: Bundle) -> set[str]:
    return {item.target for item in bundle.overlay_files() if item.target}


def check_service(setting: Setting, image: Image, bundle: Bundle) -> Check:
    """A unit the image lacks is not applicable: ``--root`` judges whether the bundle took
    effect in the image, and the build host has no GPU to tell a GPU image by. For a unit the
    plan requires the reason names the contract that does decide it, install.list's require
    line (install.sh --strict refuses an image without the unit), and where the unit comes from.
    A unit the bundle ships is also held to its own command (``units.undone_by``)."""
    masked = image.link_target(f"/etc/systemd/system/{setting.key}") == MASKED
    if setting.value == "mask":
        return check_of(setting, "masked" if masked else "not masked", OK if masked else MISSING)
    if not unit_exists(image, setting.key):
        if setting.optional:
            why = " (optional: enabled where the image has it)"
        elif setting.value == "enable":
            why = f": {provider_of(setting.key, bundle)}"
        else:
            why = ""
        return check_of(setting, "not installed", NA, f"the image has no {setting.key}{why}")
    enabled = unit_enabled(image, setting.key)
    state = "masked" if masked else "enabled" if enabled else "disabled"
    good = enabled and not masked if setting.value == "enable" else not enabled
    ours = bundle_targets(bundle)
    shipped = any(target.endswith(f"/{setting.key}") for target in ours)
    undone = undone_by(image, setting.key, ours) if good and shipped else None
    if undone is not None:
        return check_of(setting, *undone)
    return check_of(setting, state, OK if good else DIFFERS)


def check_boot_unit(setting: Setting, image: Image, unit: str, ours: set[str]) -> Check:
    """GPU and IRQ settings run at boot from the bundle's unit: it must be there and enabled,
    and run the bundle's command (no drop-in of the image empties or replaces it)."""
    if not unit_exists(image, unit):
        return check_of(
            setting, f"{unit} missing", MISSING, "the unit that applies it at boot is not installed"
        )
    undone = undone_by(image, unit, ours)
    if undone is not None:
        return check_of(setting, *undone)
    enabled = unit_enabled(image, unit)
    return check_of(
        setting,
        f"applied at boot by {unit}" + ("" if enabled else " (disabled)"),
        OK if enabled else DIFFERS,
    )


def merged_daemon_json(item_target: str, content: bytes) -> bool:
    """daemon.json other than the bundle's bytes, but a JSON object: install.sh merged the
    bundle's keys into the one in place (dockerd reads no drop-ins), so its bytes are not the
    bundle's by design; the docker settings say whether the bundle's values are in it."""
    if item_target != DOCKER_DAEMON_JSON:
        return False
    return daemon_json_object(content.decode("utf-8", "replace")) is not None


# install.sh's comment above the image's CRI tables it carries into the containerd drop-in
CONTAINERD_CARRY_MARK = b"carried here by install.sh: containerd 1.x"


def merged_containerd_dropin(item_target: str, content: bytes) -> bool:
    """The containerd drop-in with the image's CRI tables carried into it by install.sh
    (containerd 1.x replaces a plugin's whole table with an imported file's): TOML, not the
    bundle's bytes by design; each containerd setting is judged in it by itself."""
    if item_target != CONTAINERD_DROPIN or CONTAINERD_CARRY_MARK not in content:
        return False
    try:
        tomllib.loads(content.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError):
        return False
    return True


def check_file(item: ManifestFile, image: Image) -> Check:
    item_target, sha256, mode = item.target or "", item.sha256, item.mode
    expected = f"sha256 {sha256[:12]}…, mode {mode:04o}"
    host = image.resolve(item_target)
    content = image.read_bytes(item_target) if image.link_target(item_target) is None else None
    if host is None or content is None:
        return file_not_installed(item_target, expected)
    digest = hashlib.sha256(content).hexdigest()
    actual_mode = os.lstat(host).st_mode & 0o7777
    good = item.is_bundles(digest) and actual_mode == mode
    if (
        not good
        and actual_mode == mode
        and (
            merged_daemon_json(item_target, content)
            or merged_nccl_conf(item, content)
            or merged_containerd_dropin(item_target, content)
        )
    ):
        return merged_file_check(item_target, expected)
    return Check(
        "file",
        item_target,
        expected,
        f"sha256 {digest[:12]}…, mode {actual_mode:04o}",
        OK if good else DIFFERS,
        "" if good else "the installed file is not the bundle's",
    )


ImageCheck = Callable[[Setting, Image, Bundle], Check]


def check_boot_applied(setting: Setting, image: Image, bundle: Bundle) -> Check:
    """A setting the bundle's own unit applies at boot: the table names the unit, never a guess."""
    unit = KIND_SPECS[setting.kind].applied_at_boot_by
    if unit is None:
        return check_of(setting, "?", MISSING, f"no unit is named to apply {setting.kind} at boot")
    return check_boot_unit(setting, image, unit, bundle_targets(bundle))


# --- container runtimes and kubelet (issue 14) -------------------------------------------------

# Where a kubelet's flags live: the unit, kubeadm's drop-in and the environment files it reads.
KUBELET_FLAG_FILES = ("/etc/default/kubelet", "/etc/sysconfig/kubelet")


def check_unit_dropin(setting: Setting, image: Image) -> Check:
    """The last assignment of the option in the unit and its drop-ins: a later drop-in wins."""
    unit, option = setting.key.split(" ", 1)
    files = unit_files(image, unit)
    if not files or not files[0][0].endswith(f"/{unit}"):
        return check_of(setting, "not installed", NA, f"the image has no {unit}")
    return verdict_of(setting, ini_value(files, dropin_section(option), option))


def glob_matches(pattern: str, path: str) -> bool:
    return fnmatch.fnmatchcase(path, pattern)


def containerd_imports(image: Image) -> list[str] | None:
    """The import globs of the image's config.toml; None when it has none (or cannot be read)."""
    text = image.read(CONTAINERD_CONFIG)
    if text is None:
        return None
    try:
        imports = tomllib.loads(text).get("imports", [])
    except tomllib.TOMLDecodeError:
        return None
    return [str(item) for item in imports] if isinstance(imports, list) else None


def check_containerd(setting: Setting, image: Image) -> Check:
    """The drop-in counts only if config.toml imports it, and no later import sets the same key."""
    ours = CONTAINERD_DROPIN
    imports = containerd_imports(image)
    if imports is None:
        return check_of(
            setting,
            f"no {CONTAINERD_CONFIG}",
            MISSING,
            f"not in effect: containerd reads a drop-in only through the imports of the config "
            f"it loads, and with no {CONTAINERD_CONFIG} it loads none (containerd LoadConfig; "
            "2.2 only prints the import in `containerd config default`)",
        )
    if not any(glob_matches(pattern, ours) for pattern in imports):
        return check_of(
            setting,
            "not imported",
            MISSING,
            f"not in effect: {CONTAINERD_CONFIG} does not import {ours}",
        )
    try:
        own = toml_lookup(tomllib.loads(image.read(ours) or ""), setting.key)
    except tomllib.TOMLDecodeError:
        own = None
    if own != toml_value(setting.value):
        return check_of(setting, str(own), DIFFERS, f"{ours} does not set it so")
    ours_name = PurePosixPath(ours).name
    directory = image.resolve(CONTAINERD_DROPIN_DIR)
    present = directory is not None and directory.is_dir()
    later = sorted(entry.name for entry in directory.iterdir()) if directory and present else []
    for name in (n for n in later if n > ours_name and n.endswith(".toml")):
        text = image.read(f"{CONTAINERD_DROPIN_DIR}/{name}") or ""
        try:
            value = toml_lookup(tomllib.loads(text), setting.key)
        except tomllib.TOMLDecodeError:
            continue
        if value is not None and value != toml_value(setting.value):
            return check_of(
                setting,
                f"{value} ({CONTAINERD_DROPIN_DIR}/{name})",
                DIFFERS,
                "a later drop-in sets another value and is merged last",
            )
    return check_of(setting, f"{setting.value} (imported)", OK)


def check_docker(setting: Setting, image: Image) -> Check:
    text = image.read(DOCKER_DAEMON_JSON)
    if text is None:
        return check_of(
            setting, "no daemon.json", MISSING, "the image has no /etc/docker/daemon.json"
        )
    return check_daemon_json(setting, text, DOCKER_DAEMON_JSON)


def check_nccl(setting: Setting, image: Image) -> Check:
    """nccl.conf, or rccl.conf for an rccl setting (layout.NCCL_STYLE_CONFS)."""
    path = NCCL_STYLE_CONFS[setting.kind]
    text = image.read(path)
    if text is None:
        name = path.rsplit("/", 1)[-1]
        return check_of(setting, f"no {name}", MISSING, f"the image has no {path}")
    return check_nccl_text(setting, text)


CONFIG_DIR_FLAG = re.compile(rf"--config-dir[= ]{re.escape(KUBELET_DROPIN_DIR)}/?(\s|\"|'|$)")
UNIT_VARIABLE = re.compile(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?")
NAME = r"[A-Za-z_][A-Za-z0-9_]*"
ASSIGNMENT = re.compile(rf"""(?:"({NAME})=([^"]*)"|({NAME})=(\S*))""")


def kubelet_environment(image: Image, files: list[tuple[str, str]]) -> dict[str, str]:
    """kubelet.service's Environment= (a later assignment wins), then the environment files
    kubeadm's 10-kubeadm.conf reads, which win over Environment= (systemd.exec(5))."""
    variables: dict[str, str] = {}
    for value in unit_lines(files, "Environment"):
        for quoted, quoted_value, bare, bare_value in ASSIGNMENT.findall(value):
            variables[quoted or bare] = quoted_value if quoted else bare_value
    for path in KUBELET_FLAG_FILES:
        for line in (image.read(path) or "").splitlines():
            name, equals, value = line.strip().partition("=")
            if equals and re.fullmatch(NAME, name):
                variables[name] = value.strip().strip("\"'")
    return variables


def kubelet_reads_dropins(image: Image) -> bool:
    """The ExecStart that starts kubelet (the last one of the unit and its drop-ins) passes
    --config-dir on the drop-in directory, itself or through a variable it expands (kubeadm's
    $KUBELET_CONFIG_ARGS, which the bundle's kubelet.service.d drop-in extends)."""
    files = unit_files(image, "kubelet.service")
    starts = [line for line in unit_lines(files, "ExecStart") if line.strip()]
    if not starts:
        return False
    variables = kubelet_environment(image, files)
    expanded = UNIT_VARIABLE.sub(lambda m: variables.get(m.group(1), ""), starts[-1])
    return bool(CONFIG_DIR_FLAG.search(expanded))


def check_kubelet(setting: Setting, image: Image) -> Check:
    """The last drop-in (name order) that sets the field wins; kubelet must be told the dir."""
    field, _, entry = setting.key.partition("/")
    found = None
    for path, text in image.dropins(KUBELET_DROPIN_DIR.removeprefix("/etc/"), ".conf", ("/etc",)):
        data = kubelet_yaml(text)  # a mapping, or why not: nested, aliased, bad YAML
        if isinstance(data, str):  # what it sets is unknown: no verdict holds without it
            return check_of(setting, "not judged", NOT_JUDGED, f"{path}: {data}")
        value = data.get(field)
        if entry and field == "reservedMemory" and isinstance(value, list):
            value = next(
                (
                    str(item.get("limits", {}).get("memory"))
                    for item in value
                    if isinstance(item, dict) and str(item.get("numaNode")) == entry
                ),
                None,
            )
        elif entry:
            value = value.get(entry) if isinstance(value, dict) else None
        if value is not None:
            found = (str(value).lower() if isinstance(value, bool) else str(value), path)
    check = verdict_of(setting, found)
    if check.verdict == OK and not unit_exists(image, "kubelet.service"):
        return check_of(
            setting,
            check.actual,
            NA,
            "the image has no kubelet.service (yet): the "
            "unit that starts it must pass --config-dir",
        )
    if check.verdict == OK and not kubelet_reads_dropins(image):
        return check_of(
            setting,
            check.actual,
            MISSING,
            f"not in effect: nothing in the image starts kubelet with --config-dir="
            f"{KUBELET_DROPIN_DIR} (kubelet.service's ExecStart and the variables it expands)",
        )
    return check


# Check name (``image_check`` of a row of generator.model.kinds.KINDS) -> how an image judges it.
CHECKS: dict[str, ImageCheck] = {
    "sysctl": lambda s, image, _: check_sysctl(s, image),
    "kernel-arg": lambda s, image, _: check_kernel_arg(s, image),
    "limit": lambda s, image, _: check_limit(s, image),
    "systemd-manager": lambda s, image, _: check_manager(s, image),
    "modprobe": lambda s, image, _: check_modprobe(s, image),
    "module-load": lambda s, image, _: check_module_load(s, image),
    "sysfs": lambda s, image, _: check_sysfs(s, image),
    "udev": lambda s, image, _: check_udev(s, image),
    "service": check_service,
    "tuned": lambda s, image, bundle: check_tuned(s, image, bundle.tuned_profile),
    "boot-unit": check_boot_applied,
    "unit-dropin": lambda s, image, _: check_unit_dropin(s, image),
    "containerd": lambda s, image, _: check_containerd(s, image),
    "docker": lambda s, image, _: check_docker(s, image),
    "kubelet": lambda s, image, _: check_kubelet(s, image),
    "nccl": lambda s, image, _: check_nccl(s, image),
}


def check_in_image(setting: Setting, image: Image, bundle: Bundle) -> Check:
    spec = KIND_SPECS.get(setting.kind)
    check = CHECKS.get(spec.image_check) if spec else None
    if check is None:  # a plan.json of another goldtune version; tests/test_kinds.py covers ours
        return check_of(
            setting, "?", MISSING, f"this goldtune cannot judge a {setting.kind} setting"
        )
    return check(setting, image, bundle)


def judged_in_image(setting: Setting, image: Image, bundle: Bundle) -> Check:
    """A setting's verdict, or ``not-judged`` naming the file when the check met one of the
    image that it could not read (over the read cap, a FIFO, a device): what that file sets is
    unknown, so no verdict drawn without it holds."""
    image.unread.clear()
    check = check_in_image(setting, image, bundle)
    if not image.unread:
        return check
    why = f"{image.unread[0]}; what it sets is unknown"
    return check_of(setting, "not judged", NOT_JUDGED, why)


def check_root(bundle: Bundle, root: Path) -> list[Check]:
    image = Image(root)
    checks = [check_file(f, image) for f in bundle.overlay_files() if f.target]
    return checks + [judged_in_image(setting, image, bundle) for setting in bundle.plan.settings]
