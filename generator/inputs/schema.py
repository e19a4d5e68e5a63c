"""Pydantic glue: the strict base model and readable, dotted error paths."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Annotated, Any, TypeVar, get_args

from pydantic import BaseModel, ConfigDict, StringConstraints, ValidationError

from generator.errors import InputError, Problem
from generator.model.mig import PROFILE_NAME as MIG_PROFILE_NAME
from generator.textsafe import short_key

ModelT = TypeVar("ModelT", bound=BaseModel)
# A MIG GPU instance profile's name, as a GPU entry and a profile's mig_layout write it.
MigProfile = Annotated[str, StringConstraints(pattern=rf"^{MIG_PROFILE_NAME}$")]


class StrictModel(BaseModel):
    """Frozen, unknown keys forbidden, no silent coercion of strings into numbers.

    Validators are built on first use (defer_build), so a run pays only for the models it
    validates against. A default that is a model comes from ``default_factory=M.model_construct``:
    its defaults need no validating, and ``M()`` would build M's own validator besides the one
    of the model holding it (in every run, for the hardware file's ``os``).
    """

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, defer_build=True)


# More unknown fields than this in one file are one line: a file of another shape (a password
# file, a foreign config) must not be echoed key by key into a CI log.
MAX_UNKNOWN_LINES = 3
# What pydantic's "<kind>_type" errors expected, in the words of the format.
EXPECTED_TYPE = {
    "int": "int",
    "float": "float",
    "bool": "bool",
    "string": "string",
    "list": "list",
    "dict": "mapping",
}
GOT_TYPE = {"str": "string", "dict": "mapping", "NoneType": "nothing"}
# How one member of a union (Override.value: a one-line string or an integer) is described.
MEMBER_EXPECTS = {
    "string_type": "a string",
    "int_type": "an integer",
    "int_from_float": "an integer",
    "bool_type": "true or false",
    "float_type": "a number",
}


def dotted_path(loc: Sequence[int | str]) -> str:
    """``('gpus', 0, 'model')`` -> ``gpus[0].model``; a key from the file escaped, cut short."""
    text = ""
    for part in loc:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            key = short_key(str(part))
            text += f".{key}" if text else key
    return text


def shown_input(value: Any, width: int = 40) -> str:
    """A value from the file as an error quotes it: its repr, escaped, at most ``width`` long."""
    return short_key(repr(value), width)


# What a pattern-checked field must look like, by (enclosing list or model, field).
PATTERN_RULES: dict[tuple[str, str], str] = {
    (
        "nics",
        "name",
    ): "an interface name is 1-15 characters of [A-Za-z0-9_.-], not starting with '.' or '-'",
    (
        "disks",
        "name",
    ): "a disk is a kernel name like nvme0n1 or sda (lower-case letters and digits)",
    ("", "name"): "a name is 1-64 characters of [A-Za-z0-9._-], starting with a letter or digit",
    ("os", "kernel"): "a kernel release like 6.8 or 6.1.0-18-amd64",
    ("overrides", "key"): "a key is letters, digits and . _ : / * @ + - or spaces",
    ("overrides", "value"): "a one-line string",
    ("overrides", "reason"): "a reason is one line",
}


def _pattern_rule(loc: Sequence[int | str]) -> str:
    names = [part for part in loc if isinstance(part, str)]
    field = names[-1] if names else ""
    parent = names[-2] if len(names) > 1 else ""
    return PATTERN_RULES.get(
        (parent, field), PATTERN_RULES.get(("", field), "not in the accepted form")
    )


def _model_at(model: type[BaseModel], loc: Sequence[int | str]) -> type[BaseModel] | None:
    """The model that owns the last element of ``loc`` (list indexes and Optional unwrapped)."""
    current: Any = model
    for part in loc[:-1]:
        if isinstance(part, int):
            continue
        field = (
            current.model_fields.get(part)
            if isinstance(current, type) and issubclass(current, BaseModel)
            else None
        )
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
        return f"invalid value {shown_input(error.get('input'), 60)}", _pattern_rule(error["loc"])
    if kind == "literal_error":
        expected = error["msg"].replace("Input should be", "expected")
        return f"invalid value {shown_input(error.get('input'), 60)}: {expected}", ""
    if kind == "extra_forbidden":
        return "unknown field", _unknown_field_hint(error, model)
    if kind == "missing":
        return "required field is missing", ""
    if kind.removesuffix("_type") in EXPECTED_TYPE:
        expected = EXPECTED_TYPE[kind.removesuffix("_type")]
        got = type(error.get("input")).__name__
        got = GOT_TYPE.get(got, got)
        return f"expected {expected}, got {got} {shown_input(error.get('input'))}", ""
    return str(error["msg"]).replace("Input should be", "must be"), ""


def field_loc(loc: Sequence[int | str], model: type[BaseModel]) -> tuple[list[int | str], bool]:
    """``loc`` without pydantic's union-member tags (``value.constrained-str``); had it one?

    A part is a field name while the position is a model; past a field that is not a model, a
    string part can only be the tag of a union member (or a validator's ``function-…`` step).
    """
    kept: list[int | str] = []
    current: Any = model
    tagged = False
    for part in loc:
        if isinstance(part, int):
            kept.append(part)
        elif isinstance(current, type) and issubclass(current, BaseModel):
            kept.append(part)
            field = current.model_fields.get(part)
            current = _inner_model(field.annotation) if field is not None else None
        else:
            tagged = tagged or not part.startswith("function-")
    return kept, tagged


def _member_expects(error: Any) -> str:
    kind = error["type"]
    if kind == "string_pattern_mismatch":
        return _pattern_rule([part for part in error["loc"] if isinstance(part, str)][:-1])
    if kind == "string_too_long":
        return f"a string of at most {error.get('ctx', {}).get('max_length', '?')} characters"
    return MEMBER_EXPECTS.get(kind, str(error["msg"]).replace("Input should be", "").strip())


def _union_problem(source: str, path: str, members: list[Any]) -> Problem:
    expects = " or ".join(dict.fromkeys(_member_expects(member) for member in members))
    shown = shown_input(members[0].get("input"))
    return Problem(source, path, f"invalid value {shown}: expected {expects}")


def _unknown_fields_problem(source: str, unknown: list[str]) -> Problem:
    shown = ", ".join(unknown[:MAX_UNKNOWN_LINES])
    return Problem(
        source,
        "",
        f"{len(unknown)} unknown fields ({shown}, …)",
        "is this a goldtune input? see `gen schema`",
    )


def problems_from_validation(
    error: ValidationError, source: str, model: type[BaseModel]
) -> list[Problem]:
    """One line per field; a union's members and a flood of unknown fields each become one line."""
    problems: list[Problem] = []
    unions: dict[str, list[Any]] = {}
    unknown: list[str] = []
    for item in error.errors():
        loc, tagged = field_loc(item["loc"], model)
        path = dotted_path(loc)
        if tagged:
            if path not in unions:
                problems.append(Problem(source, path, ""))  # placeholder keeps the order of fields
            unions.setdefault(path, []).append(item)
            continue
        if item["type"] == "extra_forbidden":
            unknown.append(path)
        message, hint = _readable_message(item, model)
        problems.append(Problem(source, path, message, hint))
    problems = [
        _union_problem(source, p.path, unions[p.path]) if p.path in unions and not p.message else p
        for p in problems
    ]
    if len(unknown) > MAX_UNKNOWN_LINES:
        others = [p for p in problems if p.path not in unknown or p.message != "unknown field"]
        problems = [_unknown_fields_problem(source, unknown), *others]
    return problems


def validate_model(model: type[ModelT], data: dict[str, Any], source: str) -> ModelT:
    """Validate ``data`` against ``model``; every problem becomes one line of an ``InputError``.

    A mapping none of whose top-level keys is a field of ``model`` is another kind of file (a
    password file parses as YAML keys): it gets one line that quotes nothing from it.
    """
    # ``name`` does not count: the loaders fill it in from the file name
    keys = set(map(str, data)) - {"name"}
    if keys and not keys & set(model.model_fields):
        message = (
            f"not a goldtune input of this kind: none of its {len(keys)} top-level fields is known"
        )
        raise InputError(Problem(source, "", message, "see `gen schema` for the format"))
    try:
        return model.model_validate(data)
    except ValidationError as error:
        raise InputError(problems_from_validation(error, source, model)) from None


def closest(
    word: str, choices: Iterable[str], count: int = 3, cutoff: float = 0.5, list_known: bool = True
) -> str:
    """A hint naming the known choices closest to a misspelt ``word``."""
    choices = sorted(set(choices))
    import difflib  # only to word an error: not in every run

    matches = difflib.get_close_matches(
        word.lower(), [c.lower() for c in choices], n=count, cutoff=cutoff
    )
    by_lower = {c.lower(): c for c in choices}
    if matches:
        return "did you mean " + " or ".join(by_lower[m] for m in matches) + "?"
    if not list_known:
        return ""
    return (
        "known: " + ", ".join(choices)
        if len(choices) <= 20
        else "run `gen list` for the known names"
    )
