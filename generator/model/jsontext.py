"""The bundle's JSON files (plan.json, manifest.json, provenance.json) as
``json.dumps(value, indent=2, sort_keys=True)`` writes them, byte for byte, by CPython's C encoder.

CPython runs its C encoder only without ``indent``; with one, every value goes through the
pure-Python generator encoder (json/encoder.py, ``_make_iterencode``), a third of a plan's
rendering. Here the containers are walked in Python, one call per dict or list, and each dict or
list that holds only scalars (a setting, a claim's ``depends``) is written by one C-encoded
``json.dumps`` whose item separator carries the newline and the indent: an encoded string never
holds a raw newline (the encoder escapes it), so the separator is the only one in its text.
tests/test_jsontext.py holds the equality on every shipped bundle's files and on odd values.
"""

from __future__ import annotations

import json
from functools import cache
from itertools import repeat
from typing import Any

SCALARS = (str, int, float, bool, type(None))
# JSONEncoder.encode writes a str by the C function directly; dumps() of one would first make
# its keyword arguments and its encoder, some ten times the cost.
SCALAR = json.JSONEncoder()
# A str as the encoder writes it (ensure_ascii, its default): what SCALAR.encode of a str calls.
ascii_string = json.encoder.encode_basestring_ascii


def dumps_indented(value: Any) -> str:
    """``json.dumps(value, indent=2, sort_keys=True)``, the same text, faster (see above)."""
    return _encode(value, "\n")


@cache
def flat_encoder(newline: str) -> json.JSONEncoder:
    """The C encoder of a container of scalars whose items start with ``newline``: one per
    depth of a run."""
    return json.JSONEncoder(sort_keys=True, separators=("," + newline, ": "))


def _encode(value: Any, newline: str) -> str:
    """``value`` whose own lines start with ``newline`` (a newline and the current indent)."""
    if isinstance(value, dict):
        if not value:
            return "{}"
        inner = newline + "  "
        if _scalars(value):
            return _flat(value, inner, newline)
        if not all(map(isinstance, value, repeat(str))):  # other keys: the encoder's own way
            return json.dumps(value, indent=2, sort_keys=True).replace("\n", newline)
        items = [
            ascii_string(key)
            + ": "
            + (ascii_string(item) if isinstance(item, str) else _encode(item, inner))
            for key, item in sorted(value.items())
        ]
        return "{" + inner + ("," + inner).join(items) + newline + "}"
    if isinstance(value, (list, tuple)):
        if not value:
            return "[]"
        inner = newline + "  "
        if all(map(isinstance, value, repeat(str))):  # no encoder to make for a few
            return "[" + inner + ("," + inner).join(map(ascii_string, value)) + newline + "]"
        if all(map(isinstance, value, repeat(SCALARS))):
            return _flat(value, inner, newline)
        if all(isinstance(item, dict) and item and _scalars(item) for item in value):
            return _flat_dicts(value, inner, newline)
        items = [_encode(item, inner) for item in value]
        return "[" + inner + ("," + inner).join(items) + newline + "]"
    return SCALAR.encode(value)


def _flat(value: dict[Any, Any] | list[Any] | tuple[Any, ...], inner: str, newline: str) -> str:
    """A container of scalars by the C encoder: its separators are the indented text's."""
    text = flat_encoder(inner).encode(value)
    return text[0] + inner + text[1:-1] + newline + text[-1]


def _scalars(value: dict[Any, Any]) -> bool:
    return all(map(isinstance, value.values(), repeat(SCALARS)))


def _flat_dicts(value: list[Any] | tuple[Any, ...], inner: str, newline: str) -> str:
    """A list of non-empty dicts of scalars (the settings, the manifest's files) by one C
    encoding with the dicts' separators: between two dicts that separator is followed by "{",
    where a dict's own is followed by a key's quote, so the list's separators are the
    replaced ones."""
    deeper = inner + "  "
    text = flat_encoder(deeper).encode(value)
    between = "}," + deeper + "{"
    body = text[2:-2].replace(between, inner + "}," + inner + "{" + deeper)
    return "[" + inner + "{" + deeper + body + inner + "}" + newline + "]"
