"""The shortcuts taken for speed (issue 17) give exactly what the slow, obvious code gives."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from generator.model.jsontext import dumps_indented
from generator.model.setting import Plan
from generator.render.formats import comment_text
from tests.plans import FULL_SETTINGS, setting

SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()  # NaN and the infinities too: json writes them by default
    | st.text()  # every code point, escaped to ASCII
)
JSON_VALUES = st.recursive(
    SCALARS,
    lambda children: (
        st.lists(children, max_size=4)
        | st.tuples(children, children)
        | st.dictionaries(st.text(max_size=6), children, max_size=4)
    ),
    max_leaves=30,
)


@given(JSON_VALUES)
def test_indented_json_is_json_dumps_byte_for_byte(value: Any) -> None:
    assert dumps_indented(value) == json.dumps(value, indent=2, sort_keys=True)


@pytest.mark.parametrize(
    "value",
    [
        {1: "a", "b": 2},  # a key json converts to text
        {"when": object()},  # not JSON at all
        [float("nan"), float("-inf"), 1e300, -0.0],
    ],
)
def test_indented_json_leaves_the_rest_to_json(value: Any) -> None:
    try:
        expected = json.dumps(value, indent=2, sort_keys=True)
    except (TypeError, ValueError) as error:
        with pytest.raises(type(error), match=str(error)):
            dumps_indented(value)
        return
    assert dumps_indented(value) == expected


def test_indented_json_reports_a_cycle_as_json_does() -> None:
    looped: list[Any] = []
    looped.append(looped)
    with pytest.raises(ValueError, match="Circular reference"):
        dumps_indented(looped)


def scan(plan: Plan, kind: str) -> tuple[Any, ...]:
    return tuple(s for s in plan.settings if s.kind == kind)


def test_of_kind_is_a_scan_of_the_plan_asked() -> None:
    first = Plan("hw", "profile", FULL_SETTINGS)
    kinds = {s.kind for s in FULL_SETTINGS} | {"no-such-kind"}
    assert all(first.of_kind(kind) == scan(first, kind) for kind in kinds)
    # another plan, then the first again: neither is answered from the other's groups
    other = Plan("hw", "profile", (setting("sysctl", "vm.swappiness", "10"),))
    assert other.of_kind("sysctl") == scan(other, "sysctl")
    assert other.of_kind("limit") == ()
    assert first.of_kind("sysctl") == scan(first, "sysctl")
    # a plan whose settings are equal but another tuple is grouped anew, with the same answer
    copy = Plan("hw", "profile", FULL_SETTINGS[:1] + FULL_SETTINGS[1:])
    assert copy.of_kind("sysctl") == scan(first, "sysctl")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("plain", "plain"),
        ("two\nlines\r\n\tand  tabs\x7f", "two lines and tabs"),
        ("  edges \x00 ", "edges"),
    ],
)
def test_comment_text_is_the_same_escaped_twice(text: str, expected: str) -> None:
    assert comment_text(text) == expected
    assert comment_text(text) == expected  # from the cache
