"""Render a plan into the bundle's files, in memory.

``OUTPUTS`` is the one table of what the bundle holds: for each file its template, its path in the
bundle, its mode and the setting kinds that make it exist (a file whose kinds the plan does not use
is not rendered). Templates only loop and print; grouping, ordering and escaping are decided here
and in ``generator.render.formats``. Nothing the user wrote is ever used as a template.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import pickle
from pathlib import Path
from typing import Any, NamedTuple

import jinja2

from generator import TOOL, __version__
from generator.cache import read_entry
from generator.errors import GenerationError
from generator.model import layout
from generator.model.kinds import KINDS, Kind, KindSpec
from generator.model.layout import (
    MANIFEST,
    PLAN_FILE,
    compact_in_user_data,
    in_overlay,
    target_of,
)
from generator.model.planio import plan_to_json
from generator.model.setting import (
    KIND_TITLES,
    Plan,
    Setting,
    is_driver_module,
    settings_by_kind,
)
from generator.model.shellform import without_comment_lines
from generator.paths import cache_dir, make_cache_dir, templates_dir, write_cache_file
from generator.render.cloudinit import (
    MERGE_HOW,
    CloudInitOptions,
    check_user_data,
    first_boot_command,
    first_boot_files,
    first_boot_text,
    mime_user_data,
    power_state,
)
from generator.render.collector import collect_lines
from generator.render.containers import containers_context, dropin_sections
from generator.render.datafile import (
    DataLine,
    data_text,
    fixed_line,
    gpu_vendor_lines,
    setting_line,
)
from generator.render.formats import (
    comment_text,
    explain_row,
    file_header,
    kernel_arg_text,
    md_cell,
    reason_comment,
    sh_quote,
    tmpfiles_field,
    unique_in_order,
)
from generator.render.gzipforms import compressed_forms
from generator.render.install_list import install_lines
from generator.render.overlay import install_steps, overlay_files
from generator.render.providers import delivery_sizes
from generator.render.tuned import tuned_sections

RenderedFiles = dict[str, tuple[bytes, int]]  # bundle path -> (content, mode)

MANIFEST_FORMAT = f"{TOOL}-bundle/1"
GPU_ACTION_ORDER = (
    "persistence",
    "ecc",
    "mig",
    "mig-layout",
    "compute-mode",
    "clocks",
    "power-limit",
)


class Output(NamedTuple):
    """One rendered file: where it goes, which template writes it, its mode, when it exists."""

    path: str  # in the bundle; ``{profile}`` is the profile name
    template: str  # under templates/; a fixed script when ``verbatim``
    mode: int
    kinds: tuple[str, ...] = ()  # rendered when the plan has a setting of one of these; () = always
    verbatim: bool = False  # copied byte for byte: the same file in every bundle
    unit: str = ""  # a per-unit file ({unit} of the kind's file): the unit whose drop-in it is
    service: str = ""  # an optional unit of the bundle's own: rendered when the plan enables it

    def bundle_path(self, plan: Plan) -> str:
        return self.path.format(profile=plan.profile_name)

    def applies_to(self, plan: Plan) -> bool:
        if self.template == "modules-load.conf.j2":
            return bool(kernel_modules(plan))
        if self.unit:  # one drop-in per packaged unit that has settings
            return bool(dropin_sections(plan, self.unit))
        if self.service:
            return any(s.key == self.service for s in plan.of_kind("service"))
        return not self.kinds or any(plan.of_kind(kind) for kind in self.kinds)


def kernel_modules(plan: Plan) -> list[Setting]:
    """module-load settings for modules-load.d: the ones the kernel itself ships."""
    return [s for s in plan.of_kind("module-load") if not is_driver_module(s.key)]


def driver_modules(plan: Plan) -> list[Setting]:
    """module-load settings the GPU unit loads, guarded, once the driver is there."""
    return [s for s in plan.of_kind("module-load") if is_driver_module(s.key)]


def _script(target: str, kinds: tuple[str, ...] = ()) -> Output:
    """A fixed script of templates/scripts/, named like its installed file."""
    name = target.rsplit("/", 1)[-1]
    return Output(in_overlay(target), f"{layout.SCRIPTS_DIR}/{name}", 0o755, kinds, verbatim=True)


def _kind_outputs(spec: KindSpec) -> tuple[Output, ...]:
    """The file that carries a kind, as its row in generator.model.kinds names it; a ``{unit}``
    file is one output per packaged unit a unit-dropin key may name."""
    if "{unit}" not in spec.file:
        return (Output(spec.file, spec.template, 0o644, (spec.kind,)),)
    return tuple(
        Output(spec.file.replace("{unit}", unit), spec.template, 0o644, (spec.kind,), unit=unit)
        for unit in layout.DROPIN_UNITS
    )


# The files the kinds table names come first (one per kind, in the table's order); then what the
# boot units and the collector need beside them.
KIND_OUTPUTS: tuple[Output, ...] = tuple(output for spec in KINDS for output in _kind_outputs(spec))
OVERLAY_OUTPUTS: tuple[Output, ...] = (
    *(output for output in KIND_OUTPUTS if target_of(output.path)),
    _script(layout.GPU_SCRIPT, ("gpu",)),
    Output(in_overlay(layout.unit_file(layout.GPU_UNIT)), "gpu.service.j2", 0o644, ("gpu",)),
    _script(layout.IRQ_SCRIPT, ("irq",)),
    Output(
        in_overlay(layout.unit_file(layout.IRQ_UNIT)), "irq-affinity.service.j2", 0o644, ("irq",)
    ),
    Output(
        in_overlay(layout.unit_file(layout.MPS_UNIT)),
        "cuda-mps.service.j2",
        0o644,
        service=layout.MPS_UNIT,
    ),
    # re-pins when a pinned NIC's interface (and its interrupts) is created again after boot
    Output(in_overlay(layout.IRQ_UDEV_FILE), "irq-affinity.rules.j2", 0o644, ("irq",)),
    _script(layout.ACS_SCRIPT, ("pcie-acs",)),
    Output(
        in_overlay(layout.unit_file(layout.ACS_UNIT)), "pcie-acs.service.j2", 0o644, ("pcie-acs",)
    ),
    # prints the live state in the format `gen verify --snapshot` reads (images often lack Python)
    _script(layout.COLLECT_SCRIPT),
    Output(in_overlay(layout.COLLECT_DATA), "collect.conf.j2", 0o644),
    # kubeadm's kubelet.service passes no --config-dir: the kubelet drop-in is read through this
    Output(in_overlay(layout.KUBELET_UNIT_DROPIN), "kubelet-dropin.conf.j2", 0o644, ("kubelet",)),
)
DELIVERY_OUTPUTS: tuple[Output, ...] = (
    Output(layout.KERNEL_CMDLINE, "kernel-cmdline.j2", 0o644, ("kernel-arg",)),
    Output(layout.INSTALL_SH, f"{layout.SCRIPTS_DIR}/install.sh", 0o755, verbatim=True),
    # install.list is the service kind's file, but install.sh reads all of it: always rendered
    Output(layout.INSTALL_LIST, "install.list.j2", 0o644),
    Output(layout.USER_DATA, "user-data.j2", 0o644),
    Output(layout.EXPLAIN, "EXPLAIN.md.j2", 0o644),
)
OUTPUTS: tuple[Output, ...] = OVERLAY_OUTPUTS + DELIVERY_OUTPUTS
FIXED_SCRIPTS: tuple[Output, ...] = tuple(output for output in OUTPUTS if output.verbatim)

# Where a reviewer finds each kind (EXPLAIN.md); services are applied by the delivery files.
SERVICE_FILES = f"{layout.INSTALL_LIST}, {layout.USER_DATA}"


class TemplateCache(jinja2.FileSystemBytecodeCache):
    """Jinja's own bytecode cache, kept in the package like Python's __pycache__, whose entries
    are read and written as every cache entry of goldtune's (generator/cache.py): no link
    followed, only what a trusted user could have written (marshal's code runs when the
    template does), replaced atomically and readable by every user (root often fills the
    cache). Jinja checks each entry against the template's source, so a stale entry is
    recompiled; a read-only install compiles in memory every time."""

    def entry_path(self, bucket: jinja2.bccache.Bucket) -> Path:
        return Path(self.directory) / (self.pattern % bucket.key)

    def load_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        data = read_entry(self.entry_path(bucket))
        if data is None:
            return
        try:
            bucket.bytecode_from_string(data)  # Jinja's format: a foreign or stale entry resets
        except (EOFError, ValueError, TypeError, pickle.UnpicklingError):
            bucket.reset()

    def dump_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        with contextlib.suppress(OSError):
            write_cache_file(self.entry_path(bucket), bucket.bytecode_to_string())


def _template_cache() -> jinja2.BytecodeCache | None:
    # Inside the package (like __pycache__), not in templates/, which the wheel copies verbatim.
    directory = cache_dir("__jinja_cache__")
    if not make_cache_dir(directory):
        return None
    return TemplateCache(str(directory), pattern="%s.cache")


@functools.lru_cache(maxsize=1)
def make_environment() -> jinja2.Environment:
    """One environment per process: templates are compiled once, then reused for every bundle."""
    env = jinja2.Environment(
        bytecode_cache=_template_cache(),
        loader=jinja2.FileSystemLoader(str(templates_dir())),
        undefined=jinja2.StrictUndefined,
        # config files and shell data, not HTML: values are checked by their grammar instead
        autoescape=False,  # noqa: S701
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        # a template loaded once serves the whole run: all bundles of one matrix come from the
        # same templates, so their files are not checked for changes at every use
        auto_reload=False,
    )
    env.filters.update(
        comment=comment_text,
        reason=reason_comment,
        sh=sh_quote,
        tmpfiles=tmpfiles_field,
        md=md_cell,
        explain_row=explain_row,
        data_lines=data_text,
        karg=kernel_arg_text,
        yaml_str=yaml_string,
    )
    return env


def preload_templates() -> None:
    """Compile every template now (before forking workers that then share them)."""
    env = make_environment()
    for output in OUTPUTS:
        if not output.verbatim:
            env.get_template(output.template)


def yaml_string(text: str) -> str:
    """A YAML double-quoted scalar (JSON's string syntax is a subset of it)."""
    return json.dumps(text, ensure_ascii=False)


def render_bundle(plan: Plan, cloud_init: CloudInitOptions | None = None) -> RenderedFiles:
    """Every file of the bundle, keyed by its path in the bundle, with its mode.

    ``cloud_init``: `gen --cloud-init-reboot` (the user-data asks cloud-init to reboot when the
    first boot left kernel arguments waiting for one) and `--cloud-init-part` (a team's
    cloud-configs before ours in the MIME forms)."""
    options = cloud_init or CloudInitOptions()
    env = make_environment()
    context = bundle_context(plan)
    files: RenderedFiles = {}
    for output in OVERLAY_OUTPUTS:
        if output.applies_to(plan):
            text = render_text(env, output, output_context(output, plan, context))
            files[output.bundle_path(plan)] = (text, output.mode)
    context |= delivery_context(plan, files, options)
    for output in DELIVERY_OUTPUTS:
        if output.applies_to(plan):
            text = render_text(env, output, output_context(output, plan, context))
            files[output.bundle_path(plan)] = (text, output.mode)
    user_data = files[layout.USER_DATA][0]
    check_user_data(user_data, context["first_boot_overlay"])
    mime = mime_user_data(user_data, options.parts)
    files[layout.USER_DATA_MIME] = (mime, 0o644)
    plain_gz, mime_gz = compressed_forms(user_data, mime)
    files[layout.USER_DATA_GZ] = (plain_gz, 0o644)
    files[layout.USER_DATA_MIME_GZ] = (mime_gz, 0o644)
    files[PLAN_FILE] = (plan_to_json(plan).encode("utf-8"), 0o644)  # read back by diff and verify
    files[MANIFEST] = (render_manifest(plan, files, options), 0o644)
    return dict(sorted(files.items()))


def bundle_context(plan: Plan) -> dict[str, Any]:
    """What every template of the bundle is given."""
    return {**plan_context(plan), **data_context(plan)}


def output_context(output: Output, plan: Plan, context: dict[str, Any]) -> dict[str, Any]:
    """A kind's own file also gets its settings as ``settings``: a new kind's template needs no
    context of its own here."""
    if len(output.kinds) != 1:
        return context
    own: dict[str, Any] = {"settings": plan.of_kind(output.kinds[0])}
    if output.unit:  # a unit's drop-in: the (option, setting) pairs of that unit
        own |= {"unit": output.unit, "dropin_sections": dropin_sections(plan, output.unit)}
    return context | own


@functools.cache
def fixed_script(name: str) -> bytes:
    """A fixed script, byte for byte as the repository (and the wheel) ships it."""
    return (templates_dir() / name).read_bytes()


# One str a run, not one a bundle: first_boot_body's cache is keyed by install.sh's text.
@functools.cache
def fixed_script_text(name: str) -> str:
    return fixed_script(name).decode("utf-8")


def render_text(env: jinja2.Environment, output: Output, context: dict[str, Any]) -> bytes:
    if output.verbatim:
        return fixed_script(output.template)
    try:
        text = env.get_template(output.template).render(context)
    except jinja2.TemplateError as error:
        raise GenerationError(f"template {output.template}: {error}") from error
    return text.encode("utf-8")


def plan_context(plan: Plan) -> dict[str, Any]:
    """What the templates print: the plan's settings, grouped per file."""
    header = (
        f"{TOOL} bundle for {comment_text(plan.hardware_name)} / {comment_text(plan.profile_name)}"
    )
    return {
        "tool": TOOL,
        "version": __version__,
        "plan": plan,
        "header": header,
        "file_header": functools.partial(file_header, header),
        "sysctl": plan.of_kind("sysctl"),
        "kernel_args": plan.of_kind("kernel-arg"),
        "cmdline": " ".join(kernel_arg_text(s) for s in plan.of_kind("kernel-arg")),
        "limits": plan.of_kind("limit"),
        "manager": plan.of_kind("systemd-manager"),
        "modprobe": group_modprobe(plan.of_kind("modprobe")),
        "modules": kernel_modules(plan),
        "driver_modules": driver_modules(plan),
        "sysfs": plan.of_kind("sysfs"),
        "udev": plan.of_kind("udev"),
        "tuned_profile": layout.tuned_profile(plan.profile_name) if plan.of_kind("tuned") else "",
        "tuned_sections": tuned_sections(plan),
        "gpu_unit": layout.GPU_UNIT,
        "gpu_script": layout.GPU_SCRIPT,
        "gpu_data_file": layout.GPU_DATA,
        "gpu_log_tag": layout.GPU_LOG_TAG,
        "irq_unit": layout.IRQ_UNIT,
        "mps_control": layout.MPS_CONTROL,
        "mps_pipe_dir": layout.MPS_PIPE_DIR,
        "mps_log_dir": layout.MPS_LOG_DIR,
        "irq_script": layout.IRQ_SCRIPT,
        "irq_data_file": layout.IRQ_DATA,
        "irq_log_tag": layout.IRQ_LOG_TAG,
        "irq_interfaces": "|".join(s.key for s in plan.of_kind("irq")),
        "acs_unit": layout.ACS_UNIT,
        "acs_script": layout.ACS_SCRIPT,
        "acs_data_file": layout.ACS_DATA,
        "acs_log_tag": layout.ACS_LOG_TAG,
        "collect_script": layout.COLLECT_SCRIPT,
        "kubelet_config_args": layout.KUBELET_CONFIG_ARGS,
        # what the boot units run before (ordering only; absent units are ignored)
        "workload_units": " ".join(layout.WORKLOAD_UNITS),
        "gpu_client_units": " ".join(layout.GPU_CLIENT_UNITS),
        **containers_context(plan),
    }


def data_context(plan: Plan) -> dict[str, list[DataLine]]:
    """The lines of the fixed scripts' data files."""
    return {
        "gpu_data": gpu_lines(plan),
        "irq_data": irq_lines(plan),
        "acs_data": acs_lines(plan),
        "collect_data": collect_lines(plan),
    }


def gpu_lines(plan: Plan) -> list[DataLine]:
    """gpu-setup's data: its message tag, the actions in the order they run, driver modules."""
    actions = order_gpu_actions(plan.of_kind("gpu")).values()
    return [
        fixed_line(
            f"layout: messages are tagged {layout.GPU_LOG_TAG}", ("log-as", layout.GPU_LOG_TAG)
        ),
        *(setting_line(s, (s.key, s.value)) for s in actions),
        *(setting_line(s, ("module", s.key)) for s in driver_modules(plan)),
    ]


def irq_lines(plan: Plan) -> list[DataLine]:
    return [
        fixed_line(
            f"layout: messages are tagged {layout.IRQ_LOG_TAG}", ("log-as", layout.IRQ_LOG_TAG)
        ),
        *(setting_line(s, ("pin", s.key, s.value)) for s in plan.of_kind("irq")),
    ]


def acs_lines(plan: Plan) -> list[DataLine]:
    """pcie-acs's data: its message tag, the GPU vendors' ids where it looks for GPUs, then
    ``acs-off gpus`` / ``acs-off nic <interface>``."""
    settings = plan.of_kind("pcie-acs")
    return [
        fixed_line(
            f"layout: messages are tagged {layout.ACS_LOG_TAG}", ("log-as", layout.ACS_LOG_TAG)
        ),
        *(gpu_vendor_lines() if any(s.key == "gpus" for s in settings) else ()),
        *(setting_line(s, ("acs-off", *s.key.split(" "))) for s in settings),
    ]


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
    return {
        "overlay": overlay,
        "first_boot_overlay": first_boot_files(overlay),
        "merge_how": MERGE_HOW,
        "power_state": power_state(plan, options.reboot),
        "reboot_asked": options.reboot,
        "steps": install_steps(plan),
        "install_data": install_lines(plan, overlay),
        "first_boot_path": layout.FIRST_BOOT_SCRIPT,
        "first_boot_script": first_boot_text(
            plan, fixed_script_text(f"{layout.SCRIPTS_DIR}/install.sh"), overlay
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
        KindTable(KIND_TITLES[spec.kind], kind_files(plan, spec, settings), settings)
        for spec in KINDS
        if (settings := by_kind.get(spec.kind, ()))
    ]


def kind_files(plan: Plan, spec: KindSpec, settings: tuple[Setting, ...]) -> str:
    if spec.kind == Kind.SERVICE:
        return SERVICE_FILES
    return ", ".join(spec.files_for(plan.profile_name, (s.key for s in settings)))


def manifest_entry(path: str, content: bytes, mode: int) -> dict[str, str]:
    """A file's manifest entry; a file the user-data carries without its comment lines also has
    the digest of that form (``first_boot_sha256``), which gen verify accepts on the machine."""
    digests = fixed_file_digests if path in FIXED_SCRIPT_PATHS else file_digests
    return {"path": path, "mode": f"{mode:04o}", **digests(path, content)}


def file_digests(path: str, content: bytes) -> dict[str, str]:
    """``sha256`` of the file, and ``first_boot_sha256`` where its user-data form differs."""
    digests = {"sha256": hashlib.sha256(content).hexdigest()}
    target = target_of(path)
    if (
        target is not None
        and target not in layout.VERIFY_ONLY_TARGETS
        and compact_in_user_data(target)
    ):
        compact = without_comment_lines(content.decode("utf-8")).encode("utf-8")
        if compact != content:
            digests["first_boot_sha256"] = hashlib.sha256(compact).hexdigest()
    return digests


FIXED_SCRIPT_PATHS = frozenset(output.path for output in FIXED_SCRIPTS)


# The fixed scripts are the same bytes in every bundle (fixed_script keeps one copy each): they
# are digested once a process. Keyed by the content, so bytes that are not the shipped script
# are digested on their own.
@functools.lru_cache(maxsize=2 * len(FIXED_SCRIPTS))
def _fixed_digests(path: str, content: bytes) -> tuple[tuple[str, str], ...]:
    return tuple(file_digests(path, content).items())


def fixed_file_digests(path: str, content: bytes) -> dict[str, str]:
    return dict(_fixed_digests(path, content))


def render_manifest(plan: Plan, files: RenderedFiles, options: CloudInitOptions) -> bytes:
    """Tool, inputs' digests and every other file with its sha256 and mode; no timestamps."""
    data = {
        "format": MANIFEST_FORMAT,
        "tool": {"name": TOOL, "version": __version__},
        "hardware": plan.hardware_name,
        "profile": plan.profile_name,
        "inputs": {role: {"sha256": digest} for role, digest in sorted(plan.inputs.items())},
        # each cloud-init form's size and the providers whose user-data limit it fits
        "user_data": delivery_sizes(files, options),
        "files": [
            manifest_entry(path, content, mode) for path, (content, mode) in sorted(files.items())
        ],
    }
    return (json.dumps(data, indent=2, sort_keys=True) + "\n").encode("utf-8")
