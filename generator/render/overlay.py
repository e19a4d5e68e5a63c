"""What both delivery paths carry: the overlay's files and the activation steps that apply them.

install.sh and cloud-init carry the same files and run the same steps. install.sh names each step
in its data file (``step sysctl``…, install_list.py), and each is one function of install-lib.sh
(step_<name>, run by run_step; a unit's by service); cloud-init's first-boot script calls the same
functions of the same library (firstboot.py, ``Step.call``): the only words put into the calls
are plan words of the safe alphabet, quoted once.
"""

# No `from __future__ import annotations`: a NamedTuple turns each string annotation into
# a compiled ForwardRef, ~0.15 ms a record at import (bench/bench.py's cold gen).
from collections.abc import Callable, Mapping
from typing import NamedTuple

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

    name: str  # a step_<name> of install-lib.sh, or a SERVICE_ACTIONS action
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
    def call(self) -> str:
        """install.sh's call that runs it on a live system (the first-boot script makes the
        same): ``service ACTION UNIT`` for a unit, ``run_step NAME [WORD]`` for the others."""
        word = f" {sh_quote(self.word)}" if self.word else ""
        function = "service" if self.name in SERVICE_ACTIONS else "run_step"
        return f"{function} {self.name}{word}"


# install.list's service actions: install.sh's service function, not a step_<name>.
SERVICE_ACTIONS = ("enable", "disable", "mask")
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
# ``kernel-arg`` lines (layering tuned, adding and removing boot arguments per mechanism), not
# from ``step`` lines; the first-boot script calls the same functions (firstboot.py).
INSTALL_SH_PHASES = ("tuned", "bootloader")


def overlay_files(files: Mapping[str, tuple[bytes, int]]) -> list[OverlayFile]:
    return [
        OverlayFile(path, target, f"{mode:04o}", content.decode("utf-8"))
        for path, (content, mode) in sorted(files.items())
        if (target := target_of(path)) is not None
    ]


def install_steps(plan: Plan) -> list[Step]:
    """What a live system runs after the files are in place, in order (install.sh's step and
    service lines; the first-boot script's calls), before the tuned and boot-argument phases."""
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
