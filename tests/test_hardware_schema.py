"""`gen schema hardware`: overlay files validate, whole files still need cpu, every property
carries a description (editors show it as hover text).

The suite has no JSON Schema library (no new dependencies), so ``conforms`` evaluates the subset
of JSON Schema 2020-12 the generated schema uses; it refuses a keyword it does not know, so the
schema cannot grow past what these tests check.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
import yaml

from generator.inputs.hardware_spec import json_schema

SCHEMA = json_schema()
ANNOTATIONS = {"title", "description", "default", "$schema", "$defs"}
TYPES = {
    "object": dict,
    "array": list,
    "string": str,
    "boolean": bool,
    "null": type(None),
}


def _is_type(value: Any, name: str) -> bool:
    if name == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if name == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    return isinstance(value, TYPES[name])


def conforms(value: Any, schema: dict[str, Any], root: dict[str, Any] = SCHEMA) -> bool:
    known = ANNOTATIONS | {
        "$ref", "type", "enum", "const", "anyOf", "properties", "required",
        "additionalProperties", "propertyNames", "items", "pattern", "minimum", "maximum",
        "maxItems", "minItems", "maxLength", "minLength", "if", "then", "else",
    }  # fmt: skip
    unknown = set(schema) - known
    assert not unknown, f"the test's evaluator lacks {unknown}"
    if "$ref" in schema:
        target = root["$defs"][schema["$ref"].removeprefix("#/$defs/")]
        if not conforms(value, target, root):
            return False
    checks = [
        "type" not in schema or _is_type(value, schema["type"]),
        "enum" not in schema or value in schema["enum"],
        "const" not in schema or value == schema["const"],
        "anyOf" not in schema or any(conforms(value, s, root) for s in schema["anyOf"]),
    ]
    if not all(checks):
        return False
    if isinstance(value, str):
        if "pattern" in schema and not re.search(schema["pattern"], value):
            return False
        if len(value) > schema.get("maxLength", len(value)):
            return False
    is_number = isinstance(value, int | float) and not isinstance(value, bool)
    if is_number and not schema.get("minimum", value) <= value <= schema.get("maximum", value):
        return False
    if isinstance(value, list):
        if len(value) > schema.get("maxItems", len(value)):
            return False
        if "items" in schema and not all(conforms(v, schema["items"], root) for v in value):
            return False
    if isinstance(value, dict) and not _object_conforms(value, schema, root):
        return False
    if "if" in schema:
        branch = "then" if conforms(value, schema["if"], root) else "else"
        if branch in schema and not conforms(value, schema[branch], root):
            return False
    return True


def _object_conforms(value: dict[str, Any], schema: dict[str, Any], root: dict[str, Any]) -> bool:
    properties = schema.get("properties", {})
    if any(key not in value for key in schema.get("required", [])):
        return False
    if "propertyNames" in schema and not all(
        conforms(key, schema["propertyNames"], root) for key in value
    ):
        return False
    extra = schema.get("additionalProperties", True)
    for key, item in value.items():
        if key in properties:
            if not conforms(item, properties[key], root):
                return False
        elif extra is False or (isinstance(extra, dict) and not conforms(item, extra, root)):
            return False
    return True


def load(text: str) -> Any:
    return yaml.safe_load(text)


GOOD = [
    ("overlay: memory only", "system: dgx-h100\nmemory_gib: 4096"),
    ("overlay: one nic by name", "system: dgx-h100\nnics: {ibp24s0: {speed_gbps: 200}}"),
    ("overlay: remove a disk", "system: dgx-h100\ndisks: {nvme9n1: {remove: true}}"),
    ("overlay: cpu without sockets", "system: dgx-h100\ncpu: {model: Xeon-8480C}"),
    ("overlay: nics as a list", "system: dgx-h100\nnics: [{name: ib0, role: compute}]"),
    ("overlay: an rdma device", "system: dgx-a100\nnics: {ib0: {rdma_device: mlx5_0}}"),
    ("overlay: a pci address", "system: dgx-a100\nnics: {ib0: {pci_address: '0000:3b:00.0'}}"),
    ("whole file", "cpu: {vendor: ampere, sockets: 1, cores_per_socket: 128}\nmemory_gib: 512"),
    (
        "whole file, other arm",
        "cpu: {vendor: other, arch: aarch64, sockets: 1, cores_per_socket: 64}\nmemory_gib: 256",
    ),
]
BAD = [
    ("whole file without cpu", "memory_gib: 512"),
    ("whole file without sockets", "cpu: {vendor: intel}\nmemory_gib: 512"),
    ("whole file, nics by name", "cpu: {vendor: intel, sockets: 1}\nmemory_gib: 8\nnics: {}"),
    ("overlay: unknown field", "system: dgx-h100\ncolour: red"),
    ("overlay: edit with an unknown field", "system: dgx-h100\nnics: {ib0: {speed: 1}}"),
    ("overlay: remove false", "system: dgx-h100\nnics: {ib0: {remove: false}}"),
    ("overlay: bad name", "system: dgx-h100\nnics: {'eth0;reboot': {speed_gbps: 1}}"),
    ("overlay: an rdma device list", "system: dgx-a100\nnics: {ib0: {rdma_device: 'a,b'}}"),
    ("overlay: a short pci address", "system: dgx-a100\nnics: {ib0: {pci_address: '3b:0'}}"),
    ("arm64 is not an arch", "system: dgx-h100\ncpu: {arch: arm64}"),
]


@pytest.mark.parametrize("label,text", GOOD, ids=[g[0] for g in GOOD])
def test_schema_accepts(label: str, text: str) -> None:
    assert conforms(load(text), SCHEMA)


@pytest.mark.parametrize("label,text", BAD, ids=[b[0] for b in BAD])
def test_schema_refuses(label: str, text: str) -> None:
    assert not conforms(load(text), SCHEMA)


def _properties(node: Any, where: str = "") -> list[tuple[str, Any]]:
    """Every (path, schema) of a named property anywhere in the schema."""
    found: list[tuple[str, Any]] = []
    if isinstance(node, dict):
        for name, value in node.get("properties", {}).items():
            found.append((f"{where}.{name}", value))
        for key, value in node.items():
            found += _properties(value, f"{where}.{key}" if key != "properties" else where)
    elif isinstance(node, list):
        for index, value in enumerate(node):
            found += _properties(value, f"{where}[{index}]")
    return found


def test_every_property_has_a_description() -> None:
    # the `else` branch only restates requirements of properties described elsewhere
    described = [(path, value) for path, value in _properties(SCHEMA) if ".else" not in path]
    assert len(described) > 30
    missing = [path for path, value in described if not value.get("description")]
    assert missing == []


def test_shipped_reference_systems_conform() -> None:
    from generator.paths import hardware_db_dir

    for path in sorted((hardware_db_dir() / "systems").glob("*.yaml")):
        assert conforms(load(path.read_text()), SCHEMA), path.name
