"""generator.model.jsontext: the bundle's JSON files are json.dumps(indent=2, sort_keys=True)'s
text, byte for byte, though written by the C encoder."""

from __future__ import annotations

import json
from typing import Any

import pytest

from generator.model.jsontext import dumps_indented
from generator.model.layout import MANIFEST, PLAN_FILE, PROVENANCE
from tests.bundle_digest import rendered, shipped

ODD_VALUES: list[Any] = [
    {},
    [],
    "",
    0,
    1.5,
    None,
    True,
    {"a": {}, "b": [], "c": [[]], "d": [{}], "e": {"f": {}}},
    {"z": 1, "a": [1, 2.5, None, False], "m": {"k": "v"}},
    [[1, 2], [3, [4, [5]]], {"x": [{"y": "z"}]}],
    {"s": 'a,\n  "b": c\\ \u00e9 \u2028 \x00 \t}', "t": ["],\n  [", "{"]},
    {2: "two", 1: {"one": [1]}, 3: [1, {"b": 2, "a": 1}]},
    {"tuple": (1, 2, ("a", "b")), "float": [1e300, -0.0, 3.14]},
    [{"path": "x", "sha256": "0" * 64, "mode": "0644"}] * 3,
]


@pytest.mark.parametrize("value", ODD_VALUES, ids=range(len(ODD_VALUES)))
def test_odd_values_are_written_as_the_indenting_encoder_writes_them(value: Any) -> None:
    assert dumps_indented(value) == json.dumps(value, indent=2, sort_keys=True)


def test_a_key_of_another_type_beside_a_string_fails_as_the_encoder_fails() -> None:
    with pytest.raises(TypeError):
        json.dumps({1: [1], "a": [1]}, indent=2, sort_keys=True)
    with pytest.raises(TypeError):
        dumps_indented({1: [1], "a": [1]})


def test_every_shipped_bundles_json_files_are_the_indenting_encoders_text() -> None:
    """plan.json, manifest.json and provenance.json of every shipped bundle (bundle_digest's
    list): parsed, then written again both ways."""
    for _name, hardware, profile, distro in shipped():
        files = rendered(hardware, profile, distro)
        for path in (PLAN_FILE, MANIFEST, PROVENANCE):
            content = files[path][0]
            data = json.loads(content)
            expected = json.dumps(data, indent=2, sort_keys=True) + "\n"
            assert content.decode("utf-8") == expected, path
            assert dumps_indented(data) + "\n" == expected, path
