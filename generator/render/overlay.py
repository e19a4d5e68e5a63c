"""What both delivery paths carry: the overlay's files and the activation steps that apply them.

install.sh and cloud-init carry the same files and run the same steps. install.sh names each step
in its data file (``step sysctl``…, install_list.py), and each is one function of install.sh;
cloud-init's ``runcmd`` runs the same steps at first boot as the fixed commands of
``STEP_COMMANDS`` (cloudinit.py): the only words put into them are plan words of the safe alphabet,
quoted once. install.sh's own phases (``INSTALL_SH_PHASES``) run at first boot as install.sh's own
functions (firstboot.py), not as a second copy.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import NamedTuple

from generator import TOOL
from generator.model import layout
from generator.model.kinds import KINDS, Kind, KindSpec
from generator.model.layout import target_of
from generator.model.setting import Plan, Setting, is_driver_module
from generator.render.formats import kernel_arg_text, sh_quote


class OverlayFile(NamedTuple):
    """A file of the root-filesystem overlay, as install.sh and cloud-init place it."""

    bundle_path: str  # rootfs/etc/sysctl.d/90-goldtune.conf
    target: str  # /etc/sysctl.d/90-goldtune.conf
    mode: str  # 0644
    text: str


class Step(NamedTuple):
    """One activation step on a live system: its name in install.list and its word, if any."""

    name: str  # a step_<name> function of install.sh, a STEP_COMMANDS entry for cloud-init
    word: str = ""
    setting: Setting | None = None  # the service setting this step applies, for its reason

    @property
    def summary(self) -> str:
        return STEP_SUMMARIES.get(self.name, f"{self.name} {self.word}")

    @property
    def fields(self) -> tuple[str, ...]:
        """Its line of install.list."""
        return ("step", self.name, self.word) if self.word else ("step", self.name)

    @property
    def command(self) -> str:
        return STEP_COMMANDS[self.name].format(word=sh_quote(self.word), tool=TOOL)

    @property
    def guarded(self) -> str:
        """The command for cloud-init's runcmd: announced, and a failure reported, not fatal."""
        return guarded_command(self.name, self.word)


# A matrix's bundles run mostly the same steps: each command is made once.
@functools.lru_cache(maxsize=256)
def guarded_command(name: str, word: str) -> str:
    """Step(name, word).guarded: the summary and command of a step are its name's and word's."""
    step = Step(name, word)
    return (
        f"echo {sh_quote(f'{TOOL}: {step.summary}')}; {{ {step.command}; }} "
        f"|| echo {sh_quote(f'{TOOL}: {step.summary}: failed')}"
    )


# The same steps as install.sh's step_<name> functions (a test holds the two lists equal).
STEP_SUMMARIES = {
    "reload": "reload systemd units",
    "sysctl": "apply sysctl.d",
    "tmpfiles": "write sysfs values",
    "modules": "load modules",
    "udev": "apply I/O scheduler rules",
    "tuned": "switch tuned to the profile",
    "runtime": "apply the unit drop-ins, container runtime and kubelet files",
    "bootloader": "refresh the boot loader configuration",
}
# Steps install.sh runs as its own phases, live and offline, from the list's ``tuned`` and
# ``kernel-arg`` lines (layering tuned, adding and removing boot arguments per mechanism);
# cloud-init runs the same functions of install.sh at first boot (firstboot.py), not a command
# of STEP_COMMANDS.
INSTALL_SH_PHASES = ("tuned", "bootloader")
STEP_COMMANDS = {
    "reload": "systemctl daemon-reload",
    "sysctl": "sysctl --system >/dev/null",
    "tmpfiles": "systemd-tmpfiles --create {word}",
    "modules": "systemctl restart systemd-modules-load.service",
    "udev": "udevadm control --reload && udevadm trigger --action=change --subsystem-match=block",
    # {word}: the parts the plan configures (containerd,docker,kubelet,persistenced); see
    # runtime_parts
    "runtime": "parts={word}; "
    'case ",$parts," in *,containerd,*) systemctl try-restart containerd.service;; esac; '
    'case ",$parts," in *,persistenced,*) '
    "systemctl try-restart nvidia-persistenced.service;; esac; "
    'case ",$parts," in *,docker,*) '
    "echo '{tool}: restart docker.service when its containers may stop';; esac; "
    'case ",$parts," in *,kubelet,*) echo '
    "'{tool}: kubelet: drain the node, remove /var/lib/kubelet/cpu_manager_state and "
    "memory_manager_state, restart kubelet';; esac",
    # services: enable/disable skip a unit the machine lacks; mask needs no unit file
    "enable": "if systemctl cat {word} >/dev/null 2>&1; then systemctl enable --now {word}; "
    "else echo '{tool}:' {word} 'is not installed; skipped'; fi",
    "disable": "if systemctl cat {word} >/dev/null 2>&1; then systemctl disable --now {word}; "
    "else echo '{tool}:' {word} 'is not installed; skipped'; fi",
    "mask": "systemctl mask --now {word}",
}


def overlay_files(files: Mapping[str, tuple[bytes, int]]) -> list[OverlayFile]:
    return [
        OverlayFile(path, target, f"{mode:04o}", content.decode("utf-8"))
        for path, (content, mode) in sorted(files.items())
        if (target := target_of(path)) is not None
    ]


def install_steps(plan: Plan) -> list[Step]:
    """What a live system runs after the files are in place, in order (cloud-init's runcmd),
    before install.sh's own phases (first_boot_command)."""
    steps = [Step("reload"), *service_steps(plan), *activation_steps(plan)]
    return [step for step in steps if step.name not in INSTALL_SH_PHASES]


def service_steps(plan: Plan) -> list[Step]:
    """Mask and disable before enable: irqbalance must be gone before interrupts are pinned."""
    return [Step(s.value, s.key, s) for s in ordered_services(plan)]


def ordered_services(plan: Plan) -> list[Setting]:
    return sorted(plan.of_kind("service"), key=lambda s: s.value == "enable")


def kernel_cmdline(plan: Plan) -> str:
    return " ".join(kernel_arg_text(s) for s in plan.of_kind("kernel-arg"))


def runtime_parts(plan: Plan) -> str:
    """What the runtime step acts on: ``containerd`` is restarted only if running (its shims keep
    the containers alive); ``docker`` and ``kubelet`` are never restarted, the step says what to
    do: dockerd stops its containers unless live-restore is on, and kubelet refuses to start with
    a new CPU or memory manager policy while its old checkpoint files are there.
    ``persistenced`` (the daemon's drop-in) is restarted only if running: a daemon started with
    the packaged --no-persistence-mode keeps persistence off until it restarts."""
    units = {s.key.split(" ", 1)[0] for s in plan.of_kind("unit-dropin")}
    parts = []
    if layout.CONTAINERD_UNIT in units or plan.of_kind("containerd"):
        parts.append("containerd")
    if layout.DOCKER_UNIT in units or plan.of_kind("docker"):
        parts.append("docker")
    if plan.of_kind("kubelet"):
        parts.append("kubelet")
    if layout.PERSISTENCED_UNIT in units:
        parts.append("persistenced")
    return ",".join(parts)


# The word a live step acts on, for the steps that take one.
STEP_WORDS: dict[str, Callable[[Plan], str]] = {
    "tmpfiles": lambda plan: layout.TMPFILES_FILE,
    "runtime": runtime_parts,
}


def needs_step(spec: KindSpec, plan: Plan) -> bool:
    settings = plan.of_kind(spec.kind)
    if spec.kind == Kind.MODULE_LOAD:  # driver modules are loaded by the GPU unit, not modules-load
        return any(not is_driver_module(s.key) for s in settings)
    return bool(settings)


def activation_steps(plan: Plan) -> list[Step]:
    """Apply the non-service files on a live system, as the kinds table names the steps.

    Each step stands alone; they run in the order of STEP_SUMMARIES (the same as install.sh's).
    """
    names = {spec.live_step for spec in KINDS if spec.live_step and needs_step(spec, plan)}
    ordered = [name for name in STEP_SUMMARIES if name in names]
    return [
        Step(name, STEP_WORDS[name](plan)) if name in STEP_WORDS else Step(name) for name in ordered
    ]
