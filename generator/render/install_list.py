"""install.sh's data file, ``install.list``: what install.sh installs and runs, in order.

The overlay's files, the services, the activation steps by name (``step sysctl``…, overlay.py),
the tuned selection and the kernel arguments. It also says what the target must already carry
(``require`` lines, ``image_requirements``): an image build with ``install.sh --strict`` fails
naming each one it lacks.
"""

from __future__ import annotations

import re

from generator import TOOL
from generator.model import layout
from generator.model.setting import Plan
from generator.render.datafile import DataLine, fixed_line, gpu_unit_vendor, setting_line
from generator.render.formats import kernel_arg_text
from generator.render.overlay import (
    INSTALL_SH_PHASES,
    OverlayFile,
    activation_steps,
    ordered_services,
    runtime_parts,
)


def _label_word(text: str) -> str:
    return "".join(c if c.isascii() and (c.isalnum() or c in "_.-") else "_" for c in text) or "_"


# The units the runtime parts run as (runtime_parts): the plan's files for them take effect only
# in an image that has the runtime.
RUNTIME_PART_UNITS = {
    "containerd": layout.CONTAINERD_UNIT,
    "docker": layout.DOCKER_UNIT,
    "kubelet": layout.KUBELET_UNIT,
    "persistenced": layout.PERSISTENCED_UNIT,
}


# The settings that name the program a container runtime execs for a runtime: containerd's
# runtimes.<name>.options.BinaryName (the runc shim runs it) and daemon.json's
# runtimes.<name>.path. The program must be in the image, or every container of that runtime fails
# to start (issue 26: an absent default runtime fails every pod sandbox).
RUNTIME_PROGRAM_KEY = re.compile(r"(?:^|\.)runtimes\.[^.]+\.(?:options\.BinaryName|path)$")
# install.sh's is_command_name: a program name looked up in the target's bin directories
COMMAND_NAME = re.compile(r"[A-Za-z0-9_+-][A-Za-z0-9_.+-]*")


def runtime_programs(plan: Plan) -> list[DataLine]:
    """``require command <name>`` for each runtime program the plan names (the last part of the
    path: install.sh looks the command up in the target's bin directories)."""
    lines = []
    for s in (*plan.of_kind("containerd"), *plan.of_kind("docker")):
        name = s.value.strip('"').rsplit("/", 1)[-1]
        if RUNTIME_PROGRAM_KEY.search(s.key) and COMMAND_NAME.fullmatch(name):
            why = (
                f"{s.rule}: {s.kind} {s.key} runs {s.value.strip(chr(34))}; without it every "
                "container of that runtime fails to start"
            )
            lines.append(fixed_line(why, ("require", "command", name)))
    return lines


def image_requirements(plan: Plan, overlay: list[OverlayFile]) -> list[DataLine]:
    """install.list's ``require`` lines: what the target must already carry for the plan to take
    effect. ``install.sh --strict`` fails naming each one it lacks, so an image pipeline that runs
    install.sh before the NVIDIA packages (fabric manager, persistenced, the driver's nvidia-smi)
    stops there instead of baking an image whose units were "not installed: enable skipped"."""
    own_units = {item.target.rsplit("/", 1)[-1] for item in overlay}
    lines = [
        setting_line(s, ("require", "unit", s.key))
        for s in ordered_services(plan)
        # an optional unit (Setting.optional: DCGM) is enabled where it is, required nowhere
        if s.value == "enable" and s.key not in own_units and not s.optional
    ]
    # the GPU Operator's nvidia-smi is in its driver root, not in the image (os.driver)
    if plan.of_kind("gpu") and plan.driver != "nvidia-gpu-operator":
        tool = gpu_unit_vendor(plan).smi_tool
        lines.append(
            fixed_line(
                f"gpu: {layout.GPU_UNIT} applies the GPU settings with the driver's {tool}",
                ("require", "command", tool),
            )
        )
    if plan.of_kind("tuned"):
        lines.append(
            fixed_line(
                "tuned: the bundle's profile is loaded by tuned",
                ("require", "unit", "tuned.service"),
            )
        )
    lines += runtime_programs(plan)
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
    if plan.reboot_for_kernel_args:
        lines.append(
            fixed_line(
                "profile: reboot_for_kernel_args: an image's boot check reboots once to take them",
                ("kernel-args-reboot", "once"),
            )
        )
    return lines
