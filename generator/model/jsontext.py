"""``json.dumps(value, indent=2, sort_keys=True)``, byte for byte, without its slow path.

With ``indent`` set, the standard library drops its C encoder for a pure-Python generator that
yields every token (Python 3.11 has no C encoder for indented output at all). Here each container
is one ``join`` and each string goes to the C escaper the standard library uses itself
(``ensure_ascii``, its default), and a list of records (flat objects: plan.json's settings and
notes, manifest.json's files) goes to the C encoder whole, with the indentation spliced in after
(``_records_text``): per bundle of the shipped matrix, plan.json 0.26 ms against 0.39 ms with
joins alone and 0.49 ms for ``json.dumps``, manifest.json 0.105 ms against 0.14 and 0.18 ms (CPU,
medians of interleaved runs). A value written once and kept (``Encoded``: plan.json's settings,
the same in many bundles of a matrix) is written again as its text.

Anything outside plain JSON data (a non-string key, an object of another type, a cycle) is
handed to ``json.dumps``, so its result or its error is the standard library's own.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Collection
from json.encoder import (  # type: ignore[attr-defined]  # None without the _json accelerator
    c_make_encoder,
    encode_basestring_ascii,
)
from typing import Any

INDENT = "  "
# The types json writes as scalars, exactly (a subclass is checked with isinstance instead).
SCALAR_TYPES = frozenset({str, int, float, bool, type(None)})
TEXT_TYPE = frozenset({str})


class _NotPlainJsonError(Exception):
    """A value this encoder leaves to ``json.dumps``."""


class Encoded:
    """A value already written by ``dumps_indented``, kept to be written again as a member or
    item (plan.json's settings, the same in many bundles): where it is nested, its lines are
    indented as dumps_indented would indent them (no string of its text holds a raw newline).
    ``json.dumps`` refuses it, so a value with one that this encoder leaves to json fails."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text


def dumps_indented(value: Any) -> str:
    """What ``json.dumps(value, indent=2, sort_keys=True)`` returns."""
    try:
        return _encode(value, "\n")
    except (_NotPlainJsonError, RecursionError):
        return json.dumps(value, indent=2, sort_keys=True)


def _encode(value: Any, newline: str) -> str:
    # the order of json.encoder._make_iterencode's tests: str, None, True, False, int, float
    if isinstance(value, str):
        return encode_basestring_ascii(value)
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return int.__repr__(value)
    if isinstance(value, float):
        return _float_text(value)
    inner = newline + INDENT
    if isinstance(value, list | tuple):
        if not value:
            return "[]"
        if all(type(item) is Encoded for item in value):  # one replace for all their lines
            return (
                "["
                + inner
                + ",\n".join(item.text for item in value).replace("\n", inner)
                + newline
                + "]"
            )
        if type(value) in (list, tuple) and all(map(is_record, value)):
            return _records_text(value, newline)
        items = [_encode(item, inner) for item in value]
        return "[" + inner + ("," + inner).join(items) + newline + "]"
    if isinstance(value, dict):
        if not value:
            return "{}"
        if not all(isinstance(key, str) for key in value):
            raise _NotPlainJsonError
        members = [
            f"{encode_basestring_ascii(key)}: {_encode(item, inner)}"
            for key, item in sorted(value.items())
        ]
        return "{" + inner + ("," + inner).join(members) + newline + "}"
    if type(value) is Encoded:
        return value.text.replace("\n", newline)
    raise _NotPlainJsonError


def is_record(item: Any) -> bool:
    """A non-empty dict (not a subclass) of ``str`` keys and scalar values."""
    return (
        type(item) is dict
        and bool(item)
        and TEXT_TYPE.issuperset(map(type, item))
        and all_scalars(item.values())
    )


def all_scalars(values: Collection[Any]) -> bool:
    """Every value is one json writes as a scalar: str, int, float (their subclasses too), None."""
    return SCALAR_TYPES.issuperset(map(type, values)) or all(
        value is None or isinstance(value, str | int | float) for value in values
    )


def _records_text(records: list[Any] | tuple[Any, ...], newline: str) -> str:
    """A list of records, as ``_encode`` would write it, from one call of the C encoder.

    The compact encoder writes ``[{"a": 1,<member>"b": 2},<member>{"a": 3}]`` with ``<member>``
    (the newline and indentation of a record's members) as its only separator. ``},<member>{``
    is then always a boundary between two records: inside a record a separator is followed by a
    key's ``"``, and no value ends in ``}``. No string of the output can hold a raw newline
    (``ensure_ascii`` escapes every control character), so nothing else matches. 0.19 ms
    against 0.29 ms for a join per record on the 72 settings of a plan.json (CPU, medians).
    """
    inner = newline + INDENT
    member = inner + INDENT
    compact = _compact_encoder(member)(records)
    body = compact[2:-2].replace("}," + member + "{", inner + "}," + inner + "{" + member)
    return "[" + inner + "{" + member + body + inner + "}" + newline + "]"


@functools.cache  # one per depth: the records of plan.json and manifest.json are all one deep
def _compact_encoder(separator: str) -> Callable[[Any], str]:
    """json's compact encoder with ``,`` + ``separator`` between members, for data json can
    write without a ``default`` (no cycle check: a list of records has none)."""
    if c_make_encoder is None:  # another interpreter: the standard library's own choice
        return json.JSONEncoder(
            sort_keys=True, check_circular=False, separators=("," + separator, ": ")
        ).encode
    # JSONEncoder.iterencode's call, made once: making it costs more than encoding one record
    chunks = c_make_encoder(
        None, _not_json, encode_basestring_ascii, None, ": ", "," + separator, True, False, True
    )
    return lambda value: "".join(chunks(value, 0))


def _not_json(value: Any) -> Any:
    raise _NotPlainJsonError


def _float_text(number: float) -> str:
    """json's ``floatstr`` with its defaults (``allow_nan``)."""
    if number != number:  # NaN is the one value unequal to itself
        return "NaN"
    if number == float("inf"):
        return "Infinity"
    if number == -float("inf"):
        return "-Infinity"
    return float.__repr__(number)
