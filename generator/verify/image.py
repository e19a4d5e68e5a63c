"""`gen verify BUNDLE --root DIR`: is the bundle in a mounted image, and will it take effect?

Per setting, the configuration its consumer will read is computed offline the way the consumer
reads it: drop-in directories merged by file name (``/etc`` over ``/run`` over ``/usr/lib``),
files in name order, the last assignment winning. So a later drop-in of the image that overrides
the bundle is found here, not only at boot. Kernel arguments are judged by ``image_cmdline``
(what the boot loader reads), the container runtimes, kubelet and NCCL by ``image_runtime``,
the files read as their consumers read them by ``image_config``. Symbolic
links inside the image are resolved inside it, never on the host, and only regular files are read
(``generator.foreign``).
"""

from __future__ import annotations

import hashlib
import os
import re
import tomllib
from collections.abc import Callable
from pathlib import Path

from generator.bundle.read import Bundle, ManifestFile
from generator.model.kinds import KIND_SPECS
from generator.model.layout import (
    CONTAINERD_DROPIN,
    DCM_ACTIONS,
    DCM_CONFIG,
    DOCKER_DAEMON_JSON,
    GPU_DATA,
    GPU_PATH_UNIT,
    GPU_SCRIPT,
    MIG_MANAGER_ACTIONS,
    MIG_PARTED_CONFIG,
    TUNED_DIR,
    TUNED_PROFILES_DIRS,
    tuned_file,
)
from generator.model.setting import Setting, is_driver_module
from generator.verify.checks_runtime import provider_of
from generator.verify.consumers import arg_name, daemon_json_object
from generator.verify.image_cmdline import check_kernel_arg
from generator.verify.image_config import ini_value, last_assignment, verdict_of
from generator.verify.image_runtime import (
    check_containerd,
    check_docker,
    check_kubelet,
    check_nccl,
    check_unit_dropin,
)
from generator.verify.imagefs import MASKED, Image
from generator.verify.udevmatch import Disk, assigned_scheduler, parse_rules
from generator.verify.units import undone_by, unit_enabled, unit_exists
from generator.verify.verdicts import (
    Check,
    Verdict,
    check_of,
    file_not_installed,
    filled_at_boot,
    filled_file_check,
    merged_file_check,
    merged_nccl_conf,
)

OK, DIFFERS, MISSING, NA = Verdict.OK, Verdict.DIFFERS, Verdict.MISSING, Verdict.NOT_APPLICABLE
NOT_JUDGED = Verdict.NOT_JUDGED
SAMPLE_DISKS = {
    "nvme": Disk("nvme0n1", {"queue/rotational": "0", "removable": "0"}),
    "ssd": Disk("sda", {"queue/rotational": "0", "removable": "0"}),
    "hdd": Disk("sda", {"queue/rotational": "1", "removable": "0"}),
}


def check_sysctl(setting: Setting, image: Image) -> Check:
    def match(line: str) -> str | None:
        key, equals, value = line.lstrip("-").partition("=")
        return value.strip() if equals and key.strip().replace("/", ".") == setting.key else None

    return verdict_of(setting, last_assignment(image.dropins("sysctl.d", ".conf"), match))


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


def tuned_reads(image: Image, planned: str) -> str:
    """Where the image's tuned reads a local profile, by where its package put its own, as
    install.sh's tuned_place tells it: tuned 2.23 moved them to /usr/lib/tuned/profiles and reads
    local ones from /etc/tuned/profiles only (redhat-performance/tuned 6d3aa94); up to 2.22
    /usr/lib/tuned/<name> and /etc/tuned. Without tuned in the image, the plan's directory."""
    for system, local in (
        ("/usr/lib/tuned/profiles", TUNED_PROFILES_DIRS[1]),
        ("/usr/lib/tuned", TUNED_DIR),
    ):
        found = image.resolve(system)
        if found is not None and found.is_dir():
            return local
    return planned


def check_tuned(
    setting: Setting, image: Image, profile: str | None, profiles_dir: str = TUNED_DIR
) -> Check:
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
    # where the target's tuned reads it (the plan's tuned_dir: /etc/tuned/profiles from 2.23 on)
    path = f"{profiles_dir}/{profile}/tuned.conf"
    text = image.read(path) if profile else None
    return verdict_of(setting, ini_value([(path, text or "")], section, option))


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


def check_boot_unit(
    setting: Setting, image: Image, unit: str, ours: set[str], starter: str = ""
) -> Check:
    """GPU and IRQ settings run at boot from the bundle's unit: it must be there and enabled
    (or ``starter``, the unit that starts it, enabled), and run the bundle's command (no drop-in
    of the image empties or replaces it)."""
    if not unit_exists(image, unit):
        return check_of(
            setting, f"{unit} missing", MISSING, "the unit that applies it at boot is not installed"
        )
    undone = undone_by(image, unit, ours)
    if undone is not None:
        return check_of(setting, *undone)
    enabled = unit_enabled(image, starter or unit)
    how = (
        f"applied by {unit} once {starter} sees the driver"
        if starter
        else f"applied at boot by {unit}"
    )
    return check_of(
        setting,
        how + ("" if enabled else f" ({starter or unit} disabled)"),
        OK if enabled else DIFFERS,
    )


def merged_daemon_json(item_target: str, content: bytes) -> bool:
    """daemon.json other than the bundle's bytes, but a JSON object: install.sh merged the
    bundle's keys into the one in place (dockerd reads no drop-ins), so its bytes are not the
    bundle's by design; the docker settings say whether the bundle's values are in it."""
    if item_target != DOCKER_DAEMON_JSON:
        return False
    return daemon_json_object(content.decode("utf-8", "replace")) is not None


# install.sh's comments in the containerd drop-in it changed: above the image's CRI tables it
# carries into it, and above the version it wrote it in (that of the image's config.toml)
CONTAINERD_INSTALL_MARKS = (
    b"carried here by install.sh: containerd 1.x",
    b"syntax, written so by install.sh: the image's",
)


def merged_containerd_dropin(item_target: str, content: bytes) -> bool:
    """The containerd drop-in with the image's CRI tables carried into it by install.sh
    (containerd 1.x replaces a plugin's whole table with an imported file's), or written in the
    version of the image's config.toml (generator/model/containerd.py): TOML, not the bundle's
    bytes by design; each containerd setting is judged in it by itself."""
    if item_target != CONTAINERD_DROPIN or not any(m in content for m in CONTAINERD_INSTALL_MARKS):
        return False
    try:
        tomllib.loads(content.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError):
        return False
    return True


def check_file(item: ManifestFile, image: Image, placed: str | None = None) -> Check:
    """``placed``: where install.sh put the file when not at its target (the tuned profile)."""
    item_target, sha256, mode = placed or item.target or "", item.sha256, item.mode
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
    if not good and actual_mode == mode and filled_at_boot(item, content):
        return filled_file_check(item_target, expected)
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
    if setting.kind == "gpu" and bundle.plan.driver == "nvidia-gpu-operator":
        if setting.key in MIG_MANAGER_ACTIONS:
            return check_of(
                setting, f"handed to the GPU Operator's MIG manager ({MIG_PARTED_CONFIG})", OK
            )
        return check_boot_unit(setting, image, unit, bundle_targets(bundle), GPU_PATH_UNIT)
    amd_operator = bundle.plan.driver == "amd-gpu-operator"
    if setting.kind == "gpu" and amd_operator and setting.key in DCM_ACTIONS:
        return check_of(
            setting, f"handed to the AMD GPU Operator's config manager ({DCM_CONFIG})", OK
        )
    return check_boot_unit(setting, image, unit, bundle_targets(bundle))


# --- container runtimes and kubelet (issue 14) -------------------------------------------------


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
    "tuned": lambda s, image, bundle: check_tuned(
        s, image, bundle.tuned_profile, tuned_reads(image, bundle.plan.tuned_dir)
    ),
    "boot-unit": check_boot_applied,
    "unit-dropin": lambda s, image, _: check_unit_dropin(s, image),
    "containerd": lambda s, image, _: check_containerd(s, image),
    "docker": lambda s, image, _: check_docker(s, image),
    "kubelet": lambda s, image, bundle: check_kubelet(s, image, bundle.plan.kubelet_dir),
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


def placed_in(item: ManifestFile, bundle: Bundle, image: Image) -> str | None:
    """The bundle's tuned profile where install.sh put it: where the image's tuned reads it."""
    profile, planned = bundle.plan.profile_name, bundle.plan.tuned_dir
    if not bundle.tuned_profile or item.target != tuned_file(profile, planned):
        return item.target
    return tuned_file(profile, tuned_reads(image, planned))


def check_root(bundle: Bundle, root: Path) -> list[Check]:
    image = Image(root)
    checks = [
        check_file(f, image, placed_in(f, bundle, image))
        for f in bundle.overlay_files()
        if f.target
    ]
    return checks + [judged_in_image(setting, image, bundle) for setting in bundle.plan.settings]
