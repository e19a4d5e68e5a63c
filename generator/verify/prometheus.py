"""`gen verify --format prometheus`: the report in node_exporter's textfile format.

Prometheus' text exposition format (prometheus.io/docs/instrumenting/exposition_formats, "Text
format details"): ``# HELP`` and ``# TYPE`` once per metric family before its samples, label
values in double quotes with backslash, double quote and line feed escaped (``\\\\``, ``\\"``,
``\\n``), HELP text with backslash and line feed escaped. Names follow Prometheus' naming
practices (prometheus.io/docs/practices/naming): the ``goldtune_`` prefix, snake_case, a count
of things as a plain gauge (``_total`` is for counters), constant facts about a target as an
``_info`` gauge of value 1 with the facts as labels.

What it says:

- ``goldtune_bundle_info``: the bundle's name (``<hardware>-<profile>``, ``gen``'s default output
  directory), hardware, profile, the goldtune version that made it and its content digest: the
  sha256 of its ``plan.json`` (every setting, note and warning, no timestamps: two bundles with
  the same digest apply the same settings). The node-side metrics script and the NFD feature file
  carry the same digest, computed at render time (``generator.model.planio.content_digest``).
- ``goldtune_verify_checks{verdict}``: how many checks have each verdict, every verdict present
  (a 0 is an answer; an absent series is not).
- ``goldtune_verify_failed``: 1 when a check fails (differs, missing, not judged), the exit status
  `gen verify` returns, else 0.
- With a preflight result: ``goldtune_preflight_state{state}`` (1),
  ``goldtune_preflight_mismatches`` (their number) and one
  ``goldtune_preflight_mismatch{claim,expected,actual}`` series per mismatch. Any object with a
  ``state`` and ``mismatches`` of objects with ``claim``, ``expected`` and ``actual`` will do
  (``Preflight``); generator/verify/preflight.py's PreflightResult fits.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import NamedTuple, Protocol

from generator.model.layout import METRIC_PREFIX
from generator.textsafe import utf8_text
from generator.verify.verdicts import Check, Verdict

PREFIX = METRIC_PREFIX


class MismatchLike(Protocol):
    """One claim of the hardware file the node contradicts."""

    @property
    def claim(self) -> str: ...
    @property
    def expected(self) -> str: ...
    @property
    def actual(self) -> str: ...


class Preflight(Protocol):
    """A preflight result: its state word and its mismatches."""

    @property
    def state(self) -> str: ...
    @property
    def mismatches(self) -> Sequence[MismatchLike]: ...


class BundleIdentity(NamedTuple):
    bundle: str  # <hardware>-<profile>
    hardware: str
    profile: str
    version: str  # the goldtune version that made the bundle
    digest: str  # sha256 of plan.json, 64 hex digits


def escape_label_value(value: str) -> str:
    """A label value as the text format writes it between double quotes, UTF-8 (the format's
    encoding: a byte from the node that was not UTF-8 is shown as ``\\xNN``)."""
    return utf8_text(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def escape_help(text: str) -> str:
    """HELP text: backslash and line feed escaped (a double quote stays as it is)."""
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def sample(name: str, labels: dict[str, str], value: int) -> str:
    if not labels:
        return f"{name} {value}"
    pairs = ",".join(f'{key}="{escape_label_value(text)}"' for key, text in labels.items())
    return f"{name}{{{pairs}}} {value}"


def family(name: str, help_text: str, samples: Iterable[str]) -> list[str]:
    """One metric family (all gauges here): HELP, TYPE, then its samples."""
    return [f"# HELP {name} {escape_help(help_text)}", f"# TYPE {name} gauge", *samples]


def bundle_lines(identity: BundleIdentity) -> list[str]:
    labels = {
        "bundle": identity.bundle,
        "digest": identity.digest,
        "hardware": identity.hardware,
        "profile": identity.profile,
        "version": identity.version,
    }
    return family(
        f"{PREFIX}_bundle_info",
        "The bundle: name, hardware, profile, the version of the generator that made it and its "
        "content digest (sha256 of plan.json).",
        [sample(f"{PREFIX}_bundle_info", labels, 1)],
    )


def check_lines(checks: Sequence[Check]) -> list[str]:
    counts = {verdict: sum(1 for c in checks if c.verdict == verdict) for verdict in Verdict}
    failed = int(any(check.verdict.fails() for check in checks))
    return [
        *family(
            f"{PREFIX}_verify_checks",
            "Checks of gen verify by verdict (ok, differs, missing, not-applicable, not-judged, "
            "warning).",
            [sample(f"{PREFIX}_verify_checks", {"verdict": str(v)}, n) for v, n in counts.items()],
        ),
        *family(
            f"{PREFIX}_verify_failed",
            "1 when a setting or health check differs, is missing or is not judged, else 0.",
            [sample(f"{PREFIX}_verify_failed", {}, failed)],
        ),
    ]


def preflight_lines(preflight: Preflight) -> list[str]:
    # The same claim, expected and actual twice would be one series twice, which the textfile
    # collector refuses for the whole file: each distinct mismatch once, in the order given.
    distinct = dict.fromkeys((m.claim, m.expected, m.actual) for m in preflight.mismatches)
    return [
        *family(
            f"{PREFIX}_preflight_state",
            "The boot-time preflight's state (the series of value 1 names it).",
            [sample(f"{PREFIX}_preflight_state", {"state": preflight.state}, 1)],
        ),
        *family(
            f"{PREFIX}_preflight_mismatches",
            "Claims of the bundle's hardware file that this node contradicts.",
            [sample(f"{PREFIX}_preflight_mismatches", {}, len(distinct))],
        ),
        *family(
            f"{PREFIX}_preflight_mismatch",
            "One claim of the bundle's hardware file this node contradicts: what the file says "
            "(expected) and what the node has (actual).",
            [
                sample(
                    f"{PREFIX}_preflight_mismatch",
                    {"claim": claim, "expected": expected, "actual": actual},
                    1,
                )
                for claim, expected, actual in distinct
            ],
        ),
    ]


def render_prometheus(
    identity: BundleIdentity, checks: Sequence[Check], preflight: Preflight | None = None
) -> str:
    """The whole textfile: the bundle, the verdict counts, and the preflight when there is one."""
    lines = bundle_lines(identity) + check_lines(checks)
    if preflight is not None:
        lines += preflight_lines(preflight)
    return "\n".join(lines) + "\n"
