"""Pydantic glue: the strict base model and readable, dotted error paths."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence
from typing import Any, TypeVar, get_args

from pydantic import BaseModel, ConfigDict, ValidationError

from generator.errors import InputError, Problem

ModelT = TypeVar("ModelT", bound=BaseModel)


class StrictModel(BaseModel):
    """Frozen, unknown keys forbidden, no silent coercion of strings into numbers.

    Validators are built on first use (defer_build), so a run pays only for the models it
    validates against; defaults that are models use ``default_factory`` to keep it that way.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, defer_build=True)


def dotted_path(loc: Sequence[int | str]) -> str:
    """``('gpus', 0, 'model')`` -> ``gpus[0].model``."""
    text = ""
    for part in loc:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += f".{part}" if text else str(part)
    return text


# What a pattern-checked field must look like, by (enclosing list or model, field).
PATTERN_RULES: dict[tuple[str, str], str] = {
    ("nics", "name"): "an interface name is 1-15 characters of [A-Za-z0-9_.-], not starting with '.' or '-'",
    ("disks", "name"): "a disk is a kernel name like nvme0n1 or sda (lower-case letters and digits)",
    ("", "name"): "a name is 1-64 characters of [A-Za-z0-9._-], starting with a letter or digit",
    ("os", "kernel"): "a kernel version like 6.8",
    ("overrides", "key"): "a key is letters, digits and . _ : / * @ + - or spaces",
    ("overrides", "value"): "a value is one line",
    ("overrides", "reason"): "a reason is one line",
}


def _pattern_rule(loc: Sequence[int | str]) -> str:
    names = [part for part in loc if isinstance(part, str)]
    field = names[-1] if names else ""
    parent = names[-2] if len(names) > 1 else ""
    return PATTERN_RULES.get((parent, field), PATTERN_RULES.get(("", field), "not in the accepted form"))


def _model_at(model: type[BaseModel], loc: Sequence[int | str]) -> type[BaseModel] | None:
    """The model that owns the last element of ``loc`` (list indexes and Optional unwrapped)."""
    current: Any = model
    for part in loc[:-1]:
        if isinstance(part, int):
            continue
        field = current.model_fields.get(part) if isinstance(current, type) and issubclass(current, BaseModel) else None
        if field is None:
            return None
        current = _inner_model(field.annotation)
    return current if isinstance(current, type) and issubclass(current, BaseModel) else None


def _inner_model(annotation: Any) -> Any:
    """``list[X] | None`` -> X, when X is a model."""
    for candidate in (annotation, *get_args(annotation)):
        if isinstance(candidate, type) and issubclass(candidate, BaseModel):
            return candidate
        for inner in get_args(candidate):
            if isinstance(inner, type) and issubclass(inner, BaseModel):
                return inner
    return None


def _unknown_field_hint(error: Any, model: type[BaseModel]) -> str:
    owner = _model_at(model, error["loc"])
    name = error["loc"][-1] if error["loc"] else ""
    if owner is None or not isinstance(name, str):
        return ""
    return closest(name, owner.model_fields, cutoff=0.6, list_known=False)


def _readable_message(error: Any, model: type[BaseModel]) -> tuple[str, str]:
    kind = error["type"]
    if kind == "string_pattern_mismatch":
        return f"invalid value {error.get('input')!r:.60}", _pattern_rule(error["loc"])
    if kind == "literal_error":
        return f"invalid value {error.get('input')!r:.60}: {error['msg'].replace('Input should be', 'expected')}", ""
    if kind == "extra_forbidden":
        return "unknown field", _unknown_field_hint(error, model)
    if kind == "missing":
        return "required field is missing", ""
    if kind in {"int_type", "float_type", "bool_type", "string_type", "list_type", "dict_type"}:
        expected = kind.removesuffix("_type").replace("dict", "mapping").replace("str", "string")
        got = type(error.get("input")).__name__
        got = {"str": "string", "dict": "mapping", "NoneType": "nothing"}.get(got, got)
        return f"expected {expected}, got {got} {error.get('input')!r:.40}", ""
    return str(error["msg"]).replace("Input should be", "must be"), ""


def problems_from_validation(error: ValidationError, source: str, model: type[BaseModel]) -> list[Problem]:
    problems = []
    for item in error.errors():
        loc = [part for part in item["loc"] if not (isinstance(part, str) and part.startswith("function-"))]
        message, hint = _readable_message(item, model)
        problems.append(Problem(source, dotted_path(loc), message, hint))
    return problems


def validate_model(model: type[ModelT], data: dict[str, Any], source: str) -> ModelT:
    """Validate ``data`` against ``model``; every problem becomes one line of an ``InputError``."""
    try:
        return model.model_validate(data)
    except ValidationError as error:
        raise InputError(problems_from_validation(error, source, model)) from None


def closest(word: str, choices: Iterable[str], count: int = 3, cutoff: float = 0.5, list_known: bool = True) -> str:
    """A hint naming the known choices closest to a misspelt ``word``."""
    choices = sorted(set(choices))
    matches = difflib.get_close_matches(word.lower(), [c.lower() for c in choices], n=count, cutoff=cutoff)
    by_lower = {c.lower(): c for c in choices}
    if matches:
        return "did you mean " + " or ".join(by_lower[m] for m in matches) + "?"
    if not list_known:
        return ""
    return "known: " + ", ".join(choices) if len(choices) <= 20 else "run `gen list` for the known names"
