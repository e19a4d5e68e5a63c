"""What the templates are given: the plan's settings grouped per file, the fixed scripts' data
lines, the delivery files' overlay and steps, and EXPLAIN.md's tables."""

# No `from __future__ import annotations`: a NamedTuple turns each string annotation into
# a compiled ForwardRef, ~0.15 ms a record at import (bench/bench.py's cold gen).
import functools
from collections.abc import Callable
from typing import Any, NamedTuple

from generator import TOOL, __version__
from generator.model import layout
from generator.model.containerd import version_of_keys
from generator.model.kinds import KINDS, GpuAction, Kind, KindSpec
from generator.model.nccl_boot import at_boot as value_at_boot
from generator.model.setting import KIND_TITLES, Plan, Setting, settings_by_kind
from generator.model.vendors import GpuVendor
from generator.render.cloudinit import (
    MERGE_HOW,
    CloudInitOptions,
    boot_scripts_last,
    first_boot_command,
    first_boot_files,
    first_boot_text,
    power_state,
)
from generator.render.collector import collect_lines
from generator.render.containers import (
    containerd_tables,
    daemon_json,
    dropin_sections,
    kubelet_lines,
)
from generator.render.datafile import (
    DataLine,
    fixed_line,
    gpu_script,
    gpu_unit_vendor,
    gpu_vendor_lines,
    setting_line,
)
from generator.render.engine import fixed_script_text
from generator.render.formats import comment_text, file_header, kernel_arg_text, unique_in_order
from generator.render.install_list import install_lines
from generator.render.operator import (
    MIG_MANAGER_ACTIONS,
    dcm_context,
    dcm_owns,
    mig_manager_owns,
    mig_parted_context,
    values_context,
)
from generator.render.outputs import Output, RenderedFiles, driver_modules, kernel_modules
from generator.render.overlay import install_steps, overlay_files
from generator.render.preflight import preflight_lines, result_line
from generator.render.report import report_context
from generator.render.tuned import tuned_sections

# The order the GPU boot scripts run their actions in: GpuAction's (persistence first, power last)
GPU_ACTION_ORDER = tuple(GpuAction)


# Where a reviewer finds each kind (EXPLAIN.md); services are applied by the delivery files.
SERVICE_FILES = f"{layout.INSTALL_LIST}, {layout.USER_DATA}"
# A target whose grub-mkconfig reads no drop-in (RHEL: BLS): install.sh writes the arguments
# into the boot entries, /etc/kernel/cmdline and GRUB_CMDLINE_LINUX from install.list's lines.
BLS_ARGS_FILES = f"{layout.INSTALL_LIST}, {layout.KERNEL_CMDLINE}"
BLS_ARGS_TITLE = "Kernel command line (BLS entries, /etc/kernel/cmdline, GRUB_CMDLINE_LINUX)"


def bundle_context(plan: Plan) -> dict[str, Any]:
    """What every template of the bundle is given."""
    return {**plan_context(plan), **report_context(plan)}


def output_context(output: Output, plan: Plan, context: dict[str, Any]) -> dict[str, Any]:
    """What one file's template gets beyond the bundle's context: its own words (FILE_CONTEXTS:
    a fixed script's data file its ``lines``), and a kind's own file its settings as
    ``settings`` (a new kind's template needs no context of its own here)."""
    own: dict[str, Any] = (
        FILE_CONTEXTS[output.template](plan) if output.template in FILE_CONTEXTS else {}
    )
    if len(output.kinds) == 1:
        own["settings"] = plan.of_kind(output.kinds[0])
    if len(output.kinds) == 1 and output.unit:  # a unit's drop-in: its (option, setting) pairs
        own |= {"unit": output.unit, "dropin_sections": dropin_sections(plan, output.unit)}
    return context | own if own else context


def plan_context(plan: Plan) -> dict[str, Any]:
    """What the templates print: the plan's settings, grouped per file."""
    header = (
        f"{TOOL} bundle for {comment_text(plan.hardware_name)} / {comment_text(plan.profile_name)}"
    )
    return {
        "tool": TOOL,
        "version": __version__,
        "plan": plan,
        "layout": layout,  # the fixed names: units, scripts, data files, log tags
        "header": header,
        "file_header": functools.partial(file_header, header),
        "kernel_args": plan.of_kind("kernel-arg"),
        "cmdline": " ".join(kernel_arg_text(s) for s in plan.of_kind("kernel-arg")),
        "modprobe": group_modprobe(plan.of_kind("modprobe")),
        "modules": kernel_modules(plan),
        "tuned_profile": layout.tuned_profile(plan.profile_name) if plan.of_kind("tuned") else "",
        "tuned_sections": tuned_sections(plan),
        **(mig_parted_context(plan) if mig_manager_owns(plan) else {}),
        **(values_context(plan) if plan.operator_values else {}),
        **(dcm_context(plan) if dcm_owns(plan) else {}),
        "at_boot": at_boot,
        # what the boot units run before (ordering only; absent units are ignored)
        "workload_units": " ".join(layout.WORKLOAD_UNITS),
        "gpu_client_units": " ".join(layout.GPU_CLIENT_UNITS),
    }


def gpu_unit_context(plan: Plan) -> dict[str, str]:
    """The GPU unit's vendor-specific words: its script, tool, what it sets, and the vendor's
    helper units it is ordered after (absent ones are ignored)."""
    spec = gpu_unit_vendor(plan)
    nvidia = spec.vendor == GpuVendor.NVIDIA
    return {
        "gpu_vendor": spec.vendor,
        "gpu_script": gpu_script(spec),
        "gpu_tool": spec.smi_tool,
        "gpu_settings": "persistence, ECC, clocks, power" if nvidia else "partitions, power",
        "gpu_after": " nvidia-persistenced.service nvidia-fabricmanager.service" if nvidia else "",
        # the vendor's GPU clients the unit runs before (layout.GPU_CLIENT_UNITS for NVIDIA)
        "gpu_before": " ".join(layout.GPU_CLIENT_UNITS if nvidia else layout.AMD_GPU_CLIENT_UNITS),
        # started by goldtune-gpu.path on each new readiness of the GPU Operator's driver
        "gpu_on_marker": layout.OPERATOR_DRIVER_READY
        if plan.driver == "nvidia-gpu-operator"
        else "",
    }


def at_boot(setting: Setting) -> bool:
    """An NCCL (RCCL) setting whose value the boot step resolves (model/nccl_boot.py)."""
    return value_at_boot(setting.value)


def nccl_lines(plan: Plan) -> list[DataLine]:
    """nccl-resolve's data: its message tag, then per value resolved at boot the file, the
    variable and the rule of the search (generator/model/nccl_boot.py)."""
    resolved = [
        setting_line(
            s,
            (
                "resolve",
                layout.NCCL_STYLE_CONFS[kind],
                s.key,
                s.value.removeprefix(layout.NCCL_AT_BOOT),
            ),
        )
        for kind in layout.NCCL_STYLE_CONFS
        for s in plan.of_kind(kind)
        if at_boot(s)
    ]
    tag = layout.NCCL_LOG_TAG
    return [fixed_line(f"layout: messages are tagged {tag}", ("log-as", tag)), *resolved]


def gpu_lines(plan: Plan) -> list[DataLine]:
    """gpu-setup's data: its message tag, the actions in the order they run, driver modules."""
    actions = list(order_gpu_actions(plan.of_kind("gpu")).values())
    if mig_manager_owns(plan):  # the Operator's MIG manager applies them, from its own config
        actions = [s for s in actions if s.key not in MIG_MANAGER_ACTIONS]
    if dcm_owns(plan):  # the AMD GPU Operator's device config manager applies them
        actions = [s for s in actions if s.key not in layout.DCM_ACTIONS]
    return [
        fixed_line(
            f"layout: messages are tagged {layout.GPU_LOG_TAG}", ("log-as", layout.GPU_LOG_TAG)
        ),
        *(setting_line(s, (s.key, s.value)) for s in actions),
        *(setting_line(s, ("module", s.key)) for s in driver_modules(plan)),
        *result_line(plan),
    ]


def irq_lines(plan: Plan) -> list[DataLine]:
    return [
        fixed_line(
            f"layout: messages are tagged {layout.IRQ_LOG_TAG}", ("log-as", layout.IRQ_LOG_TAG)
        ),
        *(setting_line(s, ("pin", s.key, s.value)) for s in plan.of_kind("irq")),
        *result_line(plan),
    ]


def acs_lines(plan: Plan) -> list[DataLine]:
    """pcie-acs's data: its message tag, the GPU vendors' ids where it looks for GPUs, then
    ``acs-off gpus`` / ``acs-off nic <interface>``."""
    settings = plan.of_kind("pcie-acs")
    return [
        fixed_line(
            f"layout: messages are tagged {layout.ACS_LOG_TAG}", ("log-as", layout.ACS_LOG_TAG)
        ),
        *(gpu_vendor_lines(plan.gpu_vendors) if any(s.key == "gpus" for s in settings) else ()),
        *(setting_line(s, ("acs-off", *s.key.split(" "))) for s in settings),
    ]


def kubelet_context(plan: Plan) -> dict[str, Any]:
    return {
        "kubelet_lines": kubelet_lines(plan),
        "kubelet_dir": plan.kubelet_dir,
        "kubelet_agent_dir": plan.kubelet_dir in layout.KUBELET_AGENT_DIRS,
    }


def containerd_context(plan: Plan) -> dict[str, Any]:
    return {
        "containerd_tables": containerd_tables(plan),
        "containerd_version": version_of_keys(s.key for s in plan.of_kind("containerd")),
    }


# The words one template alone reads, made only when its file is rendered: each fixed script's
# data file its ``lines``, the GPU unit's files the vendor's words, the runtimes' files theirs.
FILE_CONTEXTS: dict[str, Callable[[Plan], dict[str, Any]]] = {
    "gpu.conf.j2": lambda plan: {"lines": gpu_lines(plan), **gpu_unit_context(plan)},
    "gpu.service.j2": gpu_unit_context,
    "irq.conf.j2": lambda plan: {"lines": irq_lines(plan)},
    "irq-affinity.rules.j2": lambda plan: {
        "irq_interfaces": "|".join(s.key for s in plan.of_kind("irq"))
    },
    "pcie-acs.conf.j2": lambda plan: {"lines": acs_lines(plan)},
    "preflight.conf.j2": lambda plan: {"lines": preflight_lines(plan)},
    "collect.conf.j2": lambda plan: {"lines": collect_lines(plan)},
    "nccl-resolve.conf.j2": lambda plan: {"lines": nccl_lines(plan)},
    "containerd.toml.j2": containerd_context,
    "daemon.json.j2": lambda plan: {"daemon_json": daemon_json(plan)},
    "kubelet.conf.j2": kubelet_context,
}


class ModprobeLine(NamedTuple):
    """One modprobe.d line; a module's options share one ``options`` line."""

    text: str
    settings: tuple[Setting, ...]


def group_modprobe(settings: tuple[Setting, ...]) -> list[ModprobeLine]:
    lines: list[ModprobeLine] = [
        ModprobeLine(s.key, (s,)) for s in settings if s.key.startswith("blacklist ")
    ]
    options = [s for s in settings if s.key.startswith("options ")]
    for module in unique_in_order(s.key.split()[1] for s in options):
        mine = tuple(s for s in options if s.key.split()[1] == module)
        params = " ".join(f"{s.key.split()[2]}={s.value}" for s in mine)
        lines.append(ModprobeLine(f"options {module} {params}", mine))
    return lines


def order_gpu_actions(settings: tuple[Setting, ...]) -> dict[str, Setting]:
    """GPU actions in the order they must run (persistence first, power last)."""
    by_action = {s.key: s for s in settings}
    return {action: by_action[action] for action in GPU_ACTION_ORDER if action in by_action}


def delivery_context(plan: Plan, files: RenderedFiles, options: CloudInitOptions) -> dict[str, Any]:
    overlay = overlay_files(files)
    first_boot_configs, first_boot_scripts = boot_scripts_last(first_boot_files(overlay))
    return {
        "overlay": overlay,
        "first_boot_overlay": first_boot_configs,
        "first_boot_scripts": first_boot_scripts,
        "merge_how": MERGE_HOW,
        "power_state": power_state(plan, options.reboot),
        "reboot_asked": options.reboot,
        "steps": install_steps(plan),
        "install_data": install_lines(plan, overlay),
        "first_boot": first_boot_text(
            plan, fixed_script_text(f"{layout.SCRIPTS_DIR}/{layout.INSTALL_LIB}"), overlay
        ),
        "first_boot_command": first_boot_command(),
        "kind_tables": kind_tables(plan),
        "digests": sorted(plan.inputs.items()),
    }


class KindTable(NamedTuple):
    """A kind's table in EXPLAIN.md: its title, the bundle files that carry it, its settings:
    all a table needs, so that the template only prints."""

    title: str
    files: str
    settings: tuple[Setting, ...]


def kind_tables(plan: Plan) -> list[KindTable]:
    """Each kind the plan uses, in the kinds table's order, with the bundle file that carries it
    (from the kinds table); services are applied by the delivery files."""
    by_kind = settings_by_kind(plan.settings)
    return [
        KindTable(kind_title(plan, spec), kind_files(plan, spec, settings), settings)
        for spec in KINDS
        if (settings := by_kind.get(spec.kind, ()))
    ]


def kind_title(plan: Plan, spec: KindSpec) -> str:
    if spec.kind == Kind.KERNEL_ARG and not plan.grub_dropins:
        return BLS_ARGS_TITLE
    return KIND_TITLES[spec.kind]


def kind_files(plan: Plan, spec: KindSpec, settings: tuple[Setting, ...]) -> str:
    if spec.kind == Kind.SERVICE:
        return SERVICE_FILES
    if spec.kind == Kind.KERNEL_ARG and not plan.grub_dropins:
        return BLS_ARGS_FILES
    return ", ".join(
        spec.files_for(
            plan.profile_name, (s.key for s in settings), plan.tuned_dir, plan.kubelet_dir
        )
    )
