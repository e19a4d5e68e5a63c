"""The two delivery paths of one overlay: install.sh and cloud-init.

Both carry the same files and the same activation steps. ``install_steps`` lists what a live
system runs after the files are in place; install.sh runs them on a live root (and does the
offline equivalent in an image), cloud-init's ``runcmd`` runs them at first boot.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

import yaml

from generator import TOOL
from generator.errors import GenerationError
from generator.render.formats import kernel_arg_text, sh_quote
from generator.model.setting import Plan, Setting, is_driver_module
from generator.inputs.yamlio import SafeBase

OVERLAY_PREFIX = "rootfs/"
TUNED_DIR = "/etc/tuned"


class OverlayFile(NamedTuple):
    """A file of the root-filesystem overlay, as install.sh and cloud-init place it."""

    bundle_path: str  # rootfs/etc/sysctl.d/90-goldtune.conf
    target: str  # /etc/sysctl.d/90-goldtune.conf
    mode: str  # 0644
    text: str


class Step(NamedTuple):
    """One activation step on a live system: what it does, and a POSIX sh command for it."""

    summary: str
    command: str
    setting: Setting | None = None  # the service setting this step applies, for its reason

    @property
    def guarded(self) -> str:
        """The command for cloud-init's runcmd: announced, and a failure reported, not fatal."""
        return (f"echo {sh_quote(f'{TOOL}: {self.summary}')}; {{ {self.command}; }} "
                f"|| echo {sh_quote(f'{TOOL}: {self.summary}: failed')}")


RELOAD_STEP = Step("reload systemd units", "systemctl daemon-reload")


def overlay_files(files: Mapping[str, tuple[bytes, int]]) -> list[OverlayFile]:
    return [
        OverlayFile(path, "/" + path.removeprefix(OVERLAY_PREFIX), f"{mode:04o}", content.decode("utf-8"))
        for path, (content, mode) in sorted(files.items())
        if path.startswith(OVERLAY_PREFIX)
    ]


def tuned_selection(plan: Plan) -> list[tuple[str, str]]:
    """The files that make tuned load our profile, offline too: (path, content)."""
    if not plan.of_kind("tuned"):
        return []
    return [(f"{TUNED_DIR}/active_profile", f"{TOOL}-{plan.profile_name}\n"),
            (f"{TUNED_DIR}/profile_mode", "manual\n")]


def install_steps(plan: Plan) -> list[Step]:
    """Everything a live system runs after the files are in place, in order (cloud-init's runcmd)."""
    return [RELOAD_STEP, *service_steps(plan), *activation_steps(plan)]


def service_steps(plan: Plan) -> list[Step]:
    """Mask and disable before enable: irqbalance must be gone before interrupts are pinned."""
    return [service_step(s) for s in ordered_services(plan)]


def ordered_services(plan: Plan) -> list[Setting]:
    return sorted(plan.of_kind("service"), key=lambda s: s.value == "enable")


def activation_steps(plan: Plan) -> list[Step]:
    """Apply the non-service files on a live system; each step stands alone."""
    steps = []
    if plan.of_kind("sysctl"):
        steps.append(Step("apply sysctl.d", "sysctl --system >/dev/null"))
    if plan.of_kind("sysfs"):
        steps.append(Step("write sysfs values", f"systemd-tmpfiles --create /etc/tmpfiles.d/90-{TOOL}.conf"))
    if any(not is_driver_module(s.key) for s in plan.of_kind("module-load")):
        steps.append(Step("load modules", "systemctl restart systemd-modules-load.service"))
    if plan.of_kind("udev"):
        steps.append(Step("apply I/O scheduler rules",
                          "udevadm control --reload && udevadm trigger --action=change --subsystem-match=block"))
    if plan.of_kind("tuned"):
        steps.append(Step("switch tuned to the profile",
                          f"if systemctl is-active --quiet tuned.service; then tuned-adm profile {TOOL}-{plan.profile_name}; "
                          f"else echo '{TOOL}: tuned is not running; it loads the profile when it starts'; fi"))
    if plan.of_kind("kernel-arg"):
        cmdline = " ".join(kernel_arg_text(s) for s in plan.of_kind("kernel-arg"))
        steps.append(Step("refresh the boot loader configuration", bootloader_command(cmdline)))
    return steps


def service_step(setting: Setting) -> Step:
    unit, action = sh_quote(setting.key), setting.value
    if action == "mask":
        return Step(f"mask {setting.key}", f"systemctl mask --now {unit}", setting)
    skipped = sh_quote(f"{TOOL}: {setting.key} is not installed; skipped")
    return Step(f"{action} {setting.key}",
                f"if systemctl cat {unit} >/dev/null 2>&1; then systemctl {action} --now {unit}; "
                f"else echo {skipped}; fi", setting)


def bootloader_command(cmdline: str) -> str:
    """Debian/Ubuntu read /etc/default/grub.d (update-grub); RHEL-like systems keep the
    arguments in BLS entries, which grubby edits; anything else is told what to add."""
    args = sh_quote(cmdline)
    return (
        "if command -v update-grub >/dev/null 2>&1; then update-grub; "
        f"elif command -v grubby >/dev/null 2>&1; then grubby --update-kernel=ALL --args={args}; "
        f"else echo {sh_quote(f'{TOOL}: no update-grub or grubby; add to the kernel command line: {cmdline}')}; fi; "
        f"echo {sh_quote(f'{TOOL}: kernel arguments take effect at the next boot')}"
    )


def check_user_data(content: bytes, overlay: list[OverlayFile]) -> None:
    """The cloud-config must parse and carry every overlay file byte for byte."""
    text = content.decode("utf-8")
    if not text.startswith("#cloud-config\n"):
        raise GenerationError("cloud-init/user-data: must begin with #cloud-config")
    try:
        data = yaml.load(text, Loader=SafeBase)  # noqa: S506 - a safe loader
    except yaml.YAMLError as error:
        raise GenerationError(f"cloud-init/user-data: not valid YAML: {error}") from error
    written = {entry["path"]: entry for entry in data.get("write_files", [])}
    for item in overlay:
        entry = written.get(item.target)
        if entry is None or entry.get("content") != item.text or entry.get("permissions") != item.mode:
            raise GenerationError(f"cloud-init/user-data: {item.target} does not round-trip through YAML")
