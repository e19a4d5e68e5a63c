"""What the bundle holds: the table of its files, and the form they are kept in, in memory.

``OUTPUTS`` is the one table of what the bundle holds: for each file its template, its path in the
bundle, its mode and the setting kinds that make it exist (a file whose kinds the plan does not use
is not rendered). Templates only loop and print; grouping, ordering and escaping are decided in
``contexts.py`` and ``generator.render.formats``. Nothing the user wrote is ever used as a template.
"""

# No `from __future__ import annotations`: a NamedTuple turns each string annotation into
# a compiled ForwardRef, ~0.15 ms a record at import (bench/bench.py's cold gen).
from typing import NamedTuple

from generator.model import layout
from generator.model.kinds import KINDS, KindSpec
from generator.model.layout import in_overlay, target_of
from generator.model.setting import Plan, Setting, is_driver_module
from generator.model.vendors import GPU_VENDORS
from generator.render.containers import dropin_sections
from generator.render.datafile import gpu_script, gpu_unit_vendor
from generator.render.operator import dcm_owns, mig_manager_owns

RenderedFiles = dict[str, tuple[bytes, int]]  # bundle path -> (content, mode)


class Output(NamedTuple):
    """One rendered file: where it goes, which template writes it, its mode, when it exists."""

    path: str  # in the bundle; ``{profile}`` is the profile name
    template: str  # under templates/; a fixed script when ``verbatim``
    mode: int
    kinds: tuple[str, ...] = ()  # rendered when the plan has a setting of one of these; () = always
    verbatim: bool = False  # copied byte for byte: the same file in every bundle
    unit: str = ""  # a per-unit file ({unit} of the kind's file): the unit whose drop-in it is
    service: str = ""  # an optional unit of the bundle's own: rendered when the plan enables it
    vendor: str = ""  # a GPU vendor's boot script: rendered only where the GPU unit runs it
    # rendered when the plan enables one of these units of the bundle's own (a file they share)
    services: tuple[str, ...] = ()

    def bundle_path(self, plan: Plan) -> str:
        return self.path.format(
            profile=plan.profile_name,
            tuned_dir=plan.tuned_dir.lstrip("/"),
            kubelet_dir=plan.kubelet_dir.lstrip("/"),
        )

    def applies_to(self, plan: Plan) -> bool:
        if self.vendor and gpu_unit_vendor(plan).vendor != self.vendor:
            return False
        if self.path == in_overlay(layout.GRUB_FILE) and not plan.grub_dropins:
            return False  # a drop-in the target's grub-mkconfig never reads (RHEL's)
        if self.path == in_overlay(layout.KUBELET_UNIT_DROPIN) and plan.kubelet_dir in (
            layout.KUBELET_AGENT_DIRS
        ):
            return False  # a node agent starts kubelet with its own --config-dir (EKS's nodeadm)
        if self.path == layout.MIG_PARTED_CONFIG:
            return mig_manager_owns(plan)
        if self.path == layout.OPERATOR_VALUES:
            return bool(plan.operator_values)
        if self.path == layout.DCM_CONFIG:
            return dcm_owns(plan)
        return self._applies_to(plan)

    def _applies_to(self, plan: Plan) -> bool:
        if self.template == "modules-load.conf.j2":
            return bool(kernel_modules(plan))
        if self.unit:  # one drop-in per packaged unit that has settings
            return bool(dropin_sections(plan, self.unit))
        if self.service:
            return any(s.key == self.service for s in plan.of_kind("service"))
        if self.services:
            return any(s.key in self.services for s in plan.of_kind("service"))
        return not self.kinds or any(plan.of_kind(kind) for kind in self.kinds)


def kernel_modules(plan: Plan) -> list[Setting]:
    """module-load settings for modules-load.d: the ones the kernel itself ships."""
    return [s for s in plan.of_kind("module-load") if not is_driver_module(s.key)]


def driver_modules(plan: Plan) -> list[Setting]:
    """module-load settings the GPU unit loads, guarded, once the driver is there."""
    return [s for s in plan.of_kind("module-load") if is_driver_module(s.key)]


def _script(target: str, kinds: tuple[str, ...] = (), vendor: str = "") -> Output:
    """A fixed script of templates/scripts/, named like its installed file."""
    name = target.rsplit("/", 1)[-1]
    return Output(
        in_overlay(target),
        f"{layout.SCRIPTS_DIR}/{name}",
        0o755,
        kinds,
        verbatim=True,
        vendor=vendor,
    )


def _kind_outputs(spec: KindSpec) -> tuple[Output, ...]:
    """The file that carries a kind, as its row in generator.model.kinds names it; a ``{unit}``
    file is one output per packaged unit a unit-dropin key may name."""
    if "{unit}" not in spec.file:
        return (Output(spec.file, spec.template, 0o644, (spec.kind,)),)
    return tuple(
        Output(spec.file.replace("{unit}", unit), spec.template, 0o644, (spec.kind,), unit=unit)
        for unit in layout.DROPIN_UNITS
    )


# The units of the bundle's own that run the report script (REPORT_SCRIPT): the timer of the
# textfile report, the boot unit of the NFD label.
REPORT_UNITS = (layout.METRICS_TIMER, layout.NODE_LABELS_UNIT)

# The files the kinds table names come first (one per kind, in the table's order); then what the
# boot units and the collector need beside them.
KIND_OUTPUTS: tuple[Output, ...] = tuple(output for spec in KINDS for output in _kind_outputs(spec))
OVERLAY_OUTPUTS: tuple[Output, ...] = (
    *(output for output in KIND_OUTPUTS if target_of(output.path)),
    # one GPU boot script per vendor (vendors.py's setup_script), the one the GPU unit runs
    *(_script(gpu_script(spec), ("gpu",), spec.vendor) for spec in GPU_VENDORS.values()),
    Output(in_overlay(layout.unit_file(layout.GPU_UNIT)), "gpu.service.j2", 0o644, ("gpu",)),
    Output(
        in_overlay(layout.unit_file(layout.GPU_PATH_UNIT)),
        "gpu.path.j2",
        0o644,
        service=layout.GPU_PATH_UNIT,
    ),
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
    # judges the hardware file's claims at boot; the units above read what it found
    Output(
        in_overlay(layout.PREFLIGHT_SCRIPT),
        f"{layout.SCRIPTS_DIR}/preflight",
        0o755,
        verbatim=True,
        service=layout.PREFLIGHT_UNIT,
    ),
    Output(
        in_overlay(layout.PREFLIGHT_DATA), "preflight.conf.j2", 0o644, service=layout.PREFLIGHT_UNIT
    ),
    Output(
        in_overlay(layout.unit_file(layout.PREFLIGHT_UNIT)),
        "preflight.service.j2",
        0o644,
        service=layout.PREFLIGHT_UNIT,
    ),
    # writes the NCCL (RCCL) device lists only the booted node knows (issue 38)
    *(
        Output(in_overlay(target), template, mode, verbatim=verbatim, service=layout.NCCL_UNIT)
        for target, template, mode, verbatim in (
            (layout.NCCL_SCRIPT, f"{layout.SCRIPTS_DIR}/nccl-resolve", 0o755, True),
            (layout.NCCL_DATA, "nccl-resolve.conf.j2", 0o644, False),
            (layout.unit_file(layout.NCCL_UNIT), "nccl-resolve.service.j2", 0o644, False),
        )
    ),
    # prints the live state in the format `gen verify --snapshot` reads (images often lack Python)
    _script(layout.COLLECT_SCRIPT),
    Output(in_overlay(layout.COLLECT_DATA), "collect.conf.j2", 0o644),
    # the node's report to the fleet (issue 28): node_exporter's textfile, NFD's labels
    Output(
        in_overlay(layout.REPORT_SCRIPT),
        f"{layout.SCRIPTS_DIR}/report",
        0o755,
        verbatim=True,
        services=REPORT_UNITS,
    ),
    Output(in_overlay(layout.REPORT_DATA), "report.conf.j2", 0o644, services=REPORT_UNITS),
    *(
        Output(in_overlay(layout.unit_file(unit)), template, 0o644, service=layout.METRICS_TIMER)
        for unit, template in (
            (layout.METRICS_UNIT, "metrics.service.j2"),
            (layout.METRICS_TIMER, "metrics.timer.j2"),
        )
    ),
    Output(
        in_overlay(layout.unit_file(layout.NODE_LABELS_UNIT)),
        "node-labels.service.j2",
        0o644,
        service=layout.NODE_LABELS_UNIT,
    ),
    Output(
        in_overlay(layout.NFD_FEATURE_FILE),
        "nfd-features.j2",
        0o644,
        service=layout.NODE_LABELS_UNIT,
    ),
    # kubeadm's kubelet.service passes no --config-dir: the kubelet drop-in is read through this
    Output(in_overlay(layout.KUBELET_UNIT_DROPIN), "kubelet-dropin.conf.j2", 0o644, ("kubelet",)),
)
DELIVERY_OUTPUTS: tuple[Output, ...] = (
    Output(layout.KERNEL_CMDLINE, "kernel-cmdline.j2", 0o644, ("kernel-arg",)),
    Output(layout.INSTALL_SH, f"{layout.SCRIPTS_DIR}/install.sh", 0o755, verbatim=True),
    Output(layout.INSTALL_LIB, f"{layout.SCRIPTS_DIR}/install-lib.sh", 0o644, verbatim=True),
    # install.list is the service kind's file, but install.sh reads all of it: always rendered
    Output(layout.INSTALL_LIST, "install.list.j2", 0o644),
    Output(layout.USER_DATA, "user-data.j2", 0o644),
    Output(layout.EXPLAIN, "EXPLAIN.md.j2", 0o644),
    Output(layout.MIG_PARTED_CONFIG, "mig-parted-config.yaml.j2", 0o644, ("gpu",)),
    Output(layout.OPERATOR_VALUES, "gpu-operator-values.yaml.j2", 0o644, ("gpu",)),
    Output(layout.DCM_CONFIG, "dcm-config.yaml.j2", 0o644, ("gpu",)),
)
OUTPUTS: tuple[Output, ...] = OVERLAY_OUTPUTS + DELIVERY_OUTPUTS
FIXED_SCRIPTS: tuple[Output, ...] = tuple(output for output in OUTPUTS if output.verbatim)
