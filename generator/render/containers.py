"""The runtime and kubelet files: unit drop-ins, containerd TOML, daemon.json, kubelet YAML.

Grouping and nesting are decided here; the templates only loop and print. Every value already
has its file's spelling (the kind's grammar, checked at plan time), so nothing is escaped here.
"""

# No `from __future__ import annotations`: a NamedTuple turns each string annotation into
# a compiled ForwardRef, ~0.15 ms a record at import (bench/bench.py's cold gen).
import json
import re
from typing import Any, NamedTuple

from generator.model.kinds import RESET_OPTIONS, TOML_KEY_SEGMENT, dropin_section
from generator.model.setting import Plan, Setting

KUBELET_LIST_FIELDS = {"reservedMemory"}
# The integer (int32/int64) fields of KubeletConfiguration v1beta1 (k8s.io/kubelet
# config/v1beta1/types.go; tests/validators/kubelet_fields.py has the whole table): written bare,
# since kubelet's strict decoding refuses a quoted number there.
KUBELET_INTEGER_FIELDS = frozenset(
    {
        "port",
        "readOnlyPort",
        "registryPullQPS",
        "registryBurst",
        "eventRecordQPS",
        "eventBurst",
        "healthzPort",
        "oomScoreAdj",
        "nodeLeaseDurationSeconds",
        "imageGCHighThresholdPercent",
        "imageGCLowThresholdPercent",
        "maxPods",
        "podPidsLimit",
        "nodeStatusMaxImages",
        "maxOpenFiles",
        "kubeAPIQPS",
        "kubeAPIBurst",
        "maxParallelImagePulls",
        "evictionMaxPodGracePeriod",
        "podsPerCore",
        "iptablesMasqueradeBit",
        "iptablesDropBit",
        "containerLogMaxFiles",
        "containerLogMaxWorkers",
    }
)
INTEGER = re.compile(r"-?[0-9]+")


def dropins_of(plan: Plan, unit: str) -> list[tuple[str, Setting]]:
    """(option, setting) of one unit's drop-in, in plan order."""
    split = [(s.key.split(" ", 1), s) for s in plan.of_kind("unit-dropin")]
    return [(option, s) for (name, option), s in split if name == unit]


class DropinLine(NamedTuple):
    """One option of a unit drop-in; ``reset``: an empty assignment goes first (ExecStart=)."""

    option: str
    setting: Setting
    reset: bool


def dropin_sections(plan: Plan, unit: str) -> list[tuple[str, list[DropinLine]]]:
    """One unit's drop-in as ``[(section, lines)…]``: [Service] before [Install], plan order
    within each (systemd reads [Install] from drop-ins since v236, NEWS)."""
    sections: dict[str, list[DropinLine]] = {"Service": [], "Install": []}
    for option, s in dropins_of(plan, unit):
        sections[dropin_section(option)].append(DropinLine(option, s, option in RESET_OPTIONS))
    return [(name, lines) for name, lines in sections.items() if lines]


def toml_segments(path: str) -> list[str]:
    return TOML_KEY_SEGMENT.findall(path)


def containerd_tables(plan: Plan) -> list[tuple[str, list[tuple[str, Setting]]]]:
    """``[(table, [(key, setting)…])…]``: each setting under the table its dotted path names."""
    tables: dict[str, list[tuple[str, Setting]]] = {}
    for s in plan.of_kind("containerd"):
        segments = toml_segments(s.key)
        tables.setdefault(".".join(segments[:-1]), []).append((segments[-1], s))
    return sorted(tables.items())


def daemon_json(plan: Plan) -> str:
    """daemon.json: the dotted keys nested into objects, sorted, two-space indented."""
    document: dict[str, Any] = {}
    for s in plan.of_kind("docker"):
        *parents, leaf = s.key.split(".")
        node = document
        for name in parents:
            node = node.setdefault(name, {})
        node[leaf] = json.loads(s.value)
    return json.dumps(document, indent=2, sort_keys=True) + "\n"


class YamlLine(NamedTuple):
    """One line of the kubelet drop-in, with the setting whose reason goes above it (if any)."""

    text: str
    setting: Setting | None = None

    @property
    def indent(self) -> str:
        return self.text[: len(self.text) - len(self.text.lstrip())]


def yaml_scalar(value: str) -> str:
    """A double-quoted string (JSON's syntax): the policies, the CPU list and the quantities are
    strings in KubeletConfiguration v1beta1, and a bare 0 would be an integer there, which kubelet
    refuses for reservedSystemCPUs."""
    return json.dumps(value)


def field_scalar(field: str, value: str) -> str:
    """A top-level field's value: bare for an integer field (maxPods: 110), else quoted."""
    if field in KUBELET_INTEGER_FIELDS and INTEGER.fullmatch(value):
        return value
    return yaml_scalar(value)


def kubelet_lines(plan: Plan) -> list[YamlLine]:
    """The fields in plan order; ``field/key`` entries of one field grouped under it."""
    lines: list[YamlLine] = []
    seen: set[str] = set()
    settings = plan.of_kind("kubelet")
    for s in settings:
        field, _, entry = s.key.partition("/")
        if not entry:
            lines.append(YamlLine(f"{field}: {field_scalar(field, s.value)}", s))
        elif field not in seen:
            seen.add(field)
            lines.append(YamlLine(f"{field}:"))
            lines += map_entries(field, [m for m in settings if m.key.partition("/")[0] == field])
    return lines


def map_entries(field: str, members: list[Setting]) -> list[YamlLine]:
    if field in KUBELET_LIST_FIELDS:  # reservedMemory/<node>: a list of per-node limits
        return [
            line
            for s in members
            for line in (
                YamlLine(f"  - numaNode: {s.key.partition('/')[2]}", s),
                YamlLine("    limits:"),
                YamlLine(f"      memory: {yaml_scalar(s.value)}"),
            )
        ]
    return [
        YamlLine(f"  {json.dumps(s.key.partition('/')[2])}: {yaml_scalar(s.value)}", s)
        for s in members
    ]
