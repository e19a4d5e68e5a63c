"""Strict, safe YAML reading for hand-written inputs.

A ``SafeLoader`` subclass (never the global loader) that also refuses duplicate keys and
anchors/aliases (the billion-laughs vector; hand-written hardware files do not need them), with a
size cap so a stray multi-megabyte file is rejected before parsing. A tagged scalar that its
constructor cannot read (``!!int abc``, ``!!bool maybe``, ``!!timestamp notadate``, an integer of
more than 4,300 digits) is an error at its line, like any other bad YAML.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from generator.errors import InputError, Problem
from generator.foreign import read_beneath, read_foreign
from generator.textsafe import short_key

MAX_INPUT_BYTES = 1024 * 1024


# libyaml's parser when PyYAML was built with it (about ten times faster), else the pure one.
SafeBase: type = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class StrictLoader(SafeBase):  # type: ignore[misc]
    """A safe loader that rejects duplicate mapping keys and anchors/aliases.

    An alias is the same node reached a second time, so it is caught when construction meets a
    node it has already built: before any expansion, which defuses billion-laughs files.
    """

    def construct_object(self, node: Any, deep: bool = False) -> Any:
        if node in self.constructed_objects or node in self.recursive_objects:
            raise yaml.constructor.ConstructorError(
                None,
                None,
                "YAML anchors and aliases (&name, *name) are not allowed in goldtune inputs",
                node.start_mark,
            )
        try:
            return super().construct_object(node, deep=deep)
        except (ValueError, TypeError, LookupError, AttributeError, OverflowError):
            # PyYAML's constructors raise these on a scalar that does not fit its tag
            raise yaml.constructor.ConstructorError(
                None, None, f"not a valid {short_tag(node.tag)} value", node.start_mark
            ) from None

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        if not isinstance(node, yaml.MappingNode):
            raise yaml.constructor.ConstructorError(
                None, None, "expected a mapping", node.start_mark
            )
        mapping: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            key = self.construct_object(key_node, deep=True)
            if isinstance(key, (list, dict, set)):
                raise yaml.constructor.ConstructorError(
                    None, None, "mapping keys must be plain scalars", key_node.start_mark
                )
            if key in mapping:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {short_key(repr(key))}", key_node.start_mark
                )
            mapping[key] = self.construct_object(value_node, deep=deep)
        return mapping


def short_tag(tag: str) -> str:
    """``tag:yaml.org,2002:int`` -> ``!!int``; any other tag escaped and cut short."""
    return short_key("!!" + tag.removeprefix("tag:yaml.org,2002:"), 24)


def _describe_yaml_error(error: yaml.YAMLError) -> tuple[str, str]:
    mark = getattr(error, "problem_mark", None) or getattr(error, "context_mark", None)
    where = f"line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    # only the parser's own words: str(error) would quote the offending line of the file
    problem = getattr(error, "problem", None) or "not readable as YAML"
    return where, short_key(" ".join(str(problem).split()), 120)


def parse_yaml_text(text: str, source: str) -> dict[str, Any]:
    """Parse ``text`` as one YAML mapping; every failure is an ``InputError`` naming ``source``."""
    try:
        data = yaml.load(text, Loader=StrictLoader)  # noqa: S506 - StrictLoader is a SafeLoader
    except yaml.YAMLError as error:
        where, problem = _describe_yaml_error(error)
        raise InputError(Problem(source, where, f"invalid YAML: {problem}")) from None
    except (RecursionError, TypeError):
        raise InputError(Problem(source, "", "invalid YAML: nested too deeply")) from None
    if not isinstance(data, dict):
        kind = "empty" if data is None else f"a {type(data).__name__}"
        raise InputError(
            Problem(source, "", f"expected a YAML mapping at the top level, got {kind}")
        )
    return data


def name_or_stem(data: dict[str, Any], path: Path) -> dict[str, Any]:
    """``data`` with ``name`` defaulting to the file's stem; an explicit ``name: null`` is bad."""
    if "name" in data and data["name"] is None:
        hint = "give a name or leave the field out"
        raise InputError(Problem(str(path), "name", "is empty (null)", hint))
    return {**data, "name": data.get("name", path.stem)}


def read_yaml_file(path: Path) -> dict[str, Any]:
    """Read one YAML mapping from the regular file ``path``, checked as in ``parse_yaml_text``."""
    return _yaml_mapping(read_foreign(path, MAX_INPUT_BYTES), str(path))


def read_catalog_entry(root: Path, path: Path) -> dict[str, Any]:
    """An entry of a catalog whose folder is ``root`` (hardware_db/, a site catalog, the shipped
    profiles): ``path``, a file below ``root``, read without following a link at any component
    below it, so that a link leaving the catalog is refused before anything of its target is
    read (an error never quotes a value from outside). The file's own name is as listed."""
    relative = path.relative_to(root).as_posix()
    return _yaml_mapping(read_beneath(root, relative, MAX_INPUT_BYTES), str(path))


def _yaml_mapping(raw: bytes, source: str) -> dict[str, Any]:
    if b"\0" in raw:
        raise InputError(Problem(source, "", "binary data (NUL bytes); expected a YAML text file"))
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise InputError(Problem(source, "", f"not UTF-8 text (byte {error.start})")) from None
    return parse_yaml_text(text, source)
