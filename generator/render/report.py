"""What the node's report to the fleet is given (issue 28): the data file of the fixed script
``report`` and the bundle's static Node Feature Discovery labels.

The bundle's identity is fixed at generation: its name, the goldtune version and its content
digest (``planio.content_digest`` of the plan.json this bundle holds), the same three that
`gen verify --format prometheus` prints from the bundle directory, so the fleet can join what
nodes report with what the build host verified.
"""

from __future__ import annotations

import re
from typing import Any

from generator import TOOL, __version__
from generator.model import layout
from generator.model.layout import in_overlay, unit_file
from generator.model.planio import content_digest, plan_to_json
from generator.model.setting import Plan
from generator.render.datafile import DataLine, fixed_line
from generator.render.outputs import OVERLAY_OUTPUTS, REPORT_UNITS

# The bundle's boot units whose failure the report counts as settings not in effect.
REPORTED_UNITS = (layout.GPU_UNIT, layout.IRQ_UNIT, layout.ACS_UNIT, layout.MPS_UNIT)
# NFD's labels: the default namespace, which nfd-master always allows (node-feature-discovery
# pkg/apis/nfd/validate/validate.go Label: a kubernetes.io namespace is denied unless it is
# feature.node.kubernetes.io or a sub-namespace of it), and Kubernetes' label value rule it
# applies (apimachinery util/validation IsValidLabelValue: at most 63 characters, alphanumeric
# at both ends, '-', '_' and '.' between, or empty).
NFD_NAMESPACE = "feature.node.kubernetes.io"
NFD_PREFLIGHT_LABEL = f"{NFD_NAMESPACE}/{TOOL}-preflight"
LABEL_VALUE = re.compile(r"(?:[A-Za-z0-9](?:[-A-Za-z0-9_.]*[A-Za-z0-9])?)?")
LABEL_VALUE_MAX = 63
# The digest in a label: its first 16 hex digits (a label value holds 63 characters, the digest
# has 64); goldtune_bundle_info carries it whole.
NFD_DIGEST_DIGITS = 16


def report_context(plan: Plan) -> dict[str, Any]:
    """The report's templates' names and lines; empty lines when the plan has no report unit."""
    wanted = any(s.key in REPORT_UNITS for s in plan.of_kind("service"))
    units = reported_units(plan) if wanted else []
    digest = content_digest(plan_to_json(plan).encode("utf-8")) if wanted else ""
    return {
        "report_after": " ".join(units),
        "report_data": report_lines(plan, digest, units) if wanted else [],
        "nfd_labels": nfd_labels(plan, digest) if wanted else [],
    }


def reported_units(plan: Plan) -> list[str]:
    """The boot units of REPORTED_UNITS this bundle installs."""
    files = {in_overlay(unit_file(unit)): unit for unit in REPORTED_UNITS}
    return [
        files[output.path]
        for output in OVERLAY_OUTPUTS
        if output.path in files and output.applies_to(plan)
    ]


def bundle_name(plan: Plan) -> str:
    """``gen``'s default output directory's name for the plan: <hardware>-<profile>."""
    return f"{plan.hardware_name}-{plan.profile_name}"


def report_lines(plan: Plan, digest: str, units: list[str]) -> list[DataLine]:
    tag = layout.REPORT_LOG_TAG
    return [
        fixed_line(f"layout: messages are tagged {tag}", ("log-as", tag)),
        fixed_line("layout: the metric names' prefix", ("metric-prefix", layout.METRIC_PREFIX)),
        fixed_line(
            "layout: the NFD label of the preflight's state", ("nfd-label", NFD_PREFLIGHT_LABEL)
        ),
        fixed_line("bundle: its name, <hardware>-<profile>", ("bundle", bundle_name(plan))),
        fixed_line("bundle: the hardware file it was made from", ("hardware", plan.hardware_name)),
        fixed_line("bundle: the profile it was made from", ("profile", plan.profile_name)),
        fixed_line(f"bundle: the {TOOL} version that made it", ("version", __version__)),
        fixed_line("bundle: its content digest, sha256 of its plan.json", ("digest", digest)),
        *(
            fixed_line("bundle: a boot unit of its own, reported failed", ("unit", u))
            for u in units
        ),
        fixed_line(
            "layout: the boot-time preflight's result", ("preflight", layout.PREFLIGHT_RESULT)
        ),
        fixed_line(
            "layout: node_exporter's textfile directory (Debian's prometheus-node-exporter)",
            ("textfile", layout.TEXTFILE),
        ),
        fixed_line(
            "layout: NFD's features.d, beside the bundle's labels",
            ("nfd", layout.NFD_PREFLIGHT_FILE),
        ),
    ]


def label_value(text: str) -> str | None:
    """``text`` when Kubernetes takes it as a label value, else None."""
    fits = len(text) <= LABEL_VALUE_MAX and LABEL_VALUE.fullmatch(text)
    return text if fits else None


def nfd_labels(plan: Plan, digest: str) -> list[tuple[str, str]]:
    """name=value of each static label; a value Kubernetes would refuse is left out (a hardware
    name of 64 characters), as NFD itself drops such a label."""
    values = {
        "bundle": bundle_name(plan),
        "hardware": plan.hardware_name,
        "profile": plan.profile_name,
        # a label value has no '+' (a dev build's local part: 0.2.1.dev3+g1a2b3c4)
        "version": __version__.replace("+", "_"),
        "digest": digest[:NFD_DIGEST_DIGITS],
    }
    return [
        (f"{NFD_NAMESPACE}/{TOOL}-{name}", value)
        for name, value in values.items()
        if label_value(value) is not None
    ]
