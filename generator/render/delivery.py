"""The two delivery paths of one overlay: install.sh and cloud-init.

Both carry the same files and the same activation steps. install.sh is a fixed script; what it
installs and runs is its data file, ``install.list`` (``install_lines``): the overlay's files,
the tuned selection, the services, and the activation steps by name (``step sysctl``…), each of
which is one function of install.sh. cloud-init's ``runcmd`` runs the same steps at first boot,
as the fixed commands of ``STEP_COMMANDS``; the only words put into them are plan words of the
safe alphabet, quoted once. install.list also says what the target must already carry
(``require`` lines, ``image_requirements``): an image build with ``install.sh --strict`` fails
naming each one it lacks.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import NamedTuple

import yaml

from generator import TOOL
from generator.errors import GenerationError
from generator.model import layout
from generator.model.kinds import KINDS, Kind, KindSpec
from generator.model.layout import target_of
from generator.model.setting import Plan, Setting, is_driver_module
from generator.render.datafile import DataLine, fixed_line, setting_line
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
        return (
            f"echo {sh_quote(f'{TOOL}: {self.summary}')}; {{ {self.command}; }} "
            f"|| echo {sh_quote(f'{TOOL}: {self.summary}: failed')}"
        )


# The same steps as install.sh's step_<name> functions (a test holds the two lists equal).
STEP_SUMMARIES = {
    "reload": "reload systemd units",
    "sysctl": "apply sysctl.d",
    "tmpfiles": "write sysfs values",
    "modules": "load modules",
    "udev": "apply I/O scheduler rules",
    "tuned": "switch tuned to the profile",
    "runtime": "apply the container runtime and kubelet files",
    "bootloader": "refresh the boot loader configuration",
}
# Steps install.sh runs as its own phases, live and offline, from the list's ``tuned`` and
# ``kernel-arg`` lines (layering tuned, adding and removing boot arguments per mechanism).
INSTALL_SH_PHASES = ("tuned", "bootloader")
STEP_COMMANDS = {
    "reload": "systemctl daemon-reload",
    "sysctl": "sysctl --system >/dev/null",
    "tmpfiles": "systemd-tmpfiles --create {word}",
    "modules": "systemctl restart systemd-modules-load.service",
    "udev": "udevadm control --reload && udevadm trigger --action=change --subsystem-match=block",
    "tuned": "if systemctl is-active --quiet tuned.service; then tuned-adm profile {word}; "
    "else echo '{tool}: tuned is not running; it loads the profile when it starts'; fi",
    # {word}: the parts the plan configures (containerd,docker,kubelet); see runtime_parts
    "runtime": "parts={word}; "
    'case ",$parts," in *,containerd,*) systemctl try-restart containerd.service;; esac; '
    'case ",$parts," in *,docker,*) '
    "echo '{tool}: restart docker.service when its containers may stop';; esac; "
    'case ",$parts," in *,kubelet,*) echo '
    "'{tool}: kubelet: drain the node, remove /var/lib/kubelet/cpu_manager_state and "
    "memory_manager_state, restart kubelet';; esac",
    # Debian/Ubuntu read /etc/default/grub.d (update-grub); RHEL-like systems keep the arguments
    # in BLS entries, which grubby edits; anything else is told what to add.
    "bootloader": "if command -v update-grub >/dev/null 2>&1; then update-grub; "
    "elif command -v grubby >/dev/null 2>&1; then "
    "grubby --update-kernel=ALL --args={word}; "
    "else echo '{tool}: no update-grub or grubby; add to the kernel command line:' "
    "{word}; fi; echo '{tool}: kernel arguments take effect at the next boot'",
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


def tuned_selection(plan: Plan) -> list[tuple[str, str]]:
    """The files that make tuned load our profile, offline too: (path, content)."""
    if not plan.of_kind("tuned"):
        return []
    return [
        (layout.TUNED_ACTIVE, layout.tuned_profile(plan.profile_name) + "\n"),
        (layout.TUNED_MODE, "manual\n"),
    ]


def install_steps(plan: Plan) -> list[Step]:
    """What a live system runs after the files are in place, in order (cloud-init's runcmd)."""
    return [Step("reload"), *service_steps(plan), *activation_steps(plan)]


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
    a new CPU or memory manager policy while its old checkpoint files are there."""
    units = {s.key.split(" ", 1)[0] for s in plan.of_kind("unit-dropin")}
    parts = []
    if layout.CONTAINERD_UNIT in units or plan.of_kind("containerd"):
        parts.append("containerd")
    if layout.DOCKER_UNIT in units or plan.of_kind("docker"):
        parts.append("docker")
    if plan.of_kind("kubelet"):
        parts.append("kubelet")
    return ",".join(parts)


# The word a live step acts on, for the steps that take one.
STEP_WORDS: dict[str, Callable[[Plan], str]] = {
    "tmpfiles": lambda plan: layout.TMPFILES_FILE,
    "tuned": lambda plan: layout.tuned_profile(plan.profile_name),
    "bootloader": kernel_cmdline,
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


def _label_word(text: str) -> str:
    return "".join(c if c.isascii() and (c.isalnum() or c in "_.-") else "_" for c in text) or "_"


# The units the runtime parts run as (runtime_parts): the plan's files for them take effect only
# in an image that has the runtime.
RUNTIME_PART_UNITS = {
    "containerd": layout.CONTAINERD_UNIT,
    "docker": layout.DOCKER_UNIT,
    "kubelet": layout.KUBELET_UNIT,
}


# Units a rule enables only where the image has them: not required (gpu.dcgm: "Run DCGM where it
# is installed"; DCGM is a separate, optional package).
OPTIONAL_UNITS = frozenset({"nvidia-dcgm.service"})


def image_requirements(plan: Plan, overlay: list[OverlayFile]) -> list[DataLine]:
    """install.list's ``require`` lines: what the target must already carry for the plan to take
    effect. ``install.sh --strict`` fails naming each one it lacks, so an image pipeline that runs
    install.sh before the NVIDIA packages (fabric manager, persistenced, the driver's nvidia-smi)
    stops there instead of baking an image whose units were "not installed: enable skipped"."""
    own_units = {item.target.rsplit("/", 1)[-1] for item in overlay}
    lines = [
        setting_line(s, ("require", "unit", s.key))
        for s in ordered_services(plan)
        if s.value == "enable" and s.key not in own_units and s.key not in OPTIONAL_UNITS
    ]
    if plan.of_kind("gpu"):
        lines.append(
            fixed_line(
                f"gpu: {layout.GPU_UNIT} applies the GPU settings with the driver's nvidia-smi",
                ("require", "command", "nvidia-smi"),
            )
        )
    if plan.of_kind("tuned"):
        lines.append(
            fixed_line(
                "tuned: the bundle's profile is loaded by tuned",
                ("require", "unit", "tuned.service"),
            )
        )
    for part in filter(None, runtime_parts(plan).split(",")):
        lines.append(
            fixed_line(
                f"runtime: the plan configures {part}",
                ("require", "unit", RUNTIME_PART_UNITS[part]),
            )
        )
    unique: dict[tuple[str, ...], DataLine] = {}
    for line in lines:
        unique.setdefault(line.fields, line)
    return list(unique.values())


def install_lines(plan: Plan, overlay: list[OverlayFile]) -> list[DataLine]:
    """install.list: what install.sh installs, in order, then the services and live steps."""
    lines = [
        fixed_line("layout: the tool's name (messages, stale files)", ("tool", TOOL)),
        fixed_line(
            "layout: the bundle",
            ("bundle", _label_word(plan.hardware_name), _label_word(plan.profile_name)),
        ),
        fixed_line(
            "layout: the list of installed files in the target", ("record", layout.INSTALL_RECORD)
        ),
    ]
    lines += [
        fixed_line(f"overlay: {item.bundle_path}", ("file", item.mode, item.target))
        for item in overlay
    ]
    lines += [setting_line(s, ("service", s.value, s.key)) for s in ordered_services(plan)]
    lines += image_requirements(plan, overlay)
    lines += [
        fixed_line(f"live: {step.summary}", step.fields)
        for step in activation_steps(plan)
        if step.name not in INSTALL_SH_PHASES
    ]
    if plan.of_kind("tuned"):
        lines.append(
            fixed_line(
                "tuned: layer the profile on the selected one (live and offline)",
                ("tuned", layout.tuned_profile(plan.profile_name)),
            )
        )
    # Always the bundle's whole set: install.sh removes what an earlier bundle added and this
    # one lacks, by the mechanism the target boots with.
    lines += [
        setting_line(s, ("kernel-arg", kernel_arg_text(s))) for s in plan.of_kind("kernel-arg")
    ]
    return lines


def check_user_data(content: bytes, overlay: list[OverlayFile]) -> None:
    """The cloud-config must parse and carry every overlay file byte for byte."""
    text = content.decode("utf-8")
    if not text.startswith("#cloud-config\n"):
        raise GenerationError("cloud-init/user-data: must begin with #cloud-config")
    try:
        # the C-accelerated safe loader where PyYAML has it (the renderer reads its own output)
        loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
        data = yaml.load(text, Loader=loader)  # noqa: S506 - a safe loader
    except yaml.YAMLError as error:
        raise GenerationError(f"cloud-init/user-data: not valid YAML: {error}") from error
    written = {entry["path"]: entry for entry in data.get("write_files", [])}
    for item in overlay:
        entry = written.get(item.target)
        if (
            entry is None
            or entry.get("content") != item.text
            or entry.get("permissions") != item.mode
        ):
            raise GenerationError(
                f"cloud-init/user-data: {item.target} does not round-trip through YAML"
            )
