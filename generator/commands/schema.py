"""`gen schema`: the JSON Schema of the hardware or profile format.

The hardware schema names the catalog: a model field takes one of the names the catalog's
entries answer to (key, name, alias, PCI id: ``catalog.names_of``), so an editor flags
``model: H100-SMX5`` as the loader would, instead of letting the typo through to `gen check`.
The loader matches those names ignoring case, spaces and ``_`` (``catalog.Index.find``), and
so does the schema's pattern; its ``enum`` lists them as written, for completion.
"""

from __future__ import annotations

from typing import Any

from generator.inputs.catalog import AmbiguousNameError, Catalog, Index, load_catalog, names_of
from generator.inputs.hardware_spec import json_schema
from generator.inputs.profile import ProfileFile

# JSON Schema patterns are ECMA-262 regular expressions: these are the characters to escape
REGEX_SPECIAL = frozenset(".^$*+?()[]{}|\\/")


def _spelling_pattern(name: str) -> str:
    """``name`` as Index.find matches it: any case; a '-', a space or a '_' for one another."""
    parts = []
    for char in name.strip():
        if char in "-_" or char.isspace():
            parts.append("[-_\\s]+")
        elif char.lower() != char.upper():
            parts.append(f"[{char.lower()}{char.upper()}]")
        else:
            parts.append("\\" + char if char in REGEX_SPECIAL else char)
    return "".join(parts)


def _unambiguous(index: Index[Any], name: str) -> bool:
    try:
        return index.find(name) is not None
    except AmbiguousNameError:  # the loader refuses a name two entries share
        return False


def names_schema(index: Index[Any], description: str, optional: bool) -> dict[str, Any]:
    """One of the names ``index``'s entries answer to (null too where the field is optional)."""
    every = {name for entry in index.entries for name in names_of(entry)}
    names = sorted(name for name in every if _unambiguous(index, name))
    pattern = "^\\s*(?:" + "|".join(_spelling_pattern(name) for name in names) + ")\\s*$"
    choices: list[dict[str, Any]] = [{"enum": names}, {"type": "string", "pattern": pattern}]
    if optional:
        choices.append({"type": "null"})
    return {"description": description, "anyOf": choices}


def distro_schema(catalog: Catalog, field: dict[str, Any]) -> dict[str, Any]:
    """os.distro: one of the distribution tables' keys and aliases (shipped and the site
    catalog's), in any case as the loader takes them, or null; the description lists them."""
    from generator.commands.distro_option import names_text
    from generator.inputs.distro import tables

    names = sorted(catalog.distros)
    listed = names_text((table.key, table.aliases) for table in tables(catalog.distros))
    spellings = "|".join(
        "".join(
            f"[{c}{c.upper()}]" if c.isalpha() else "\\" + c if c in REGEX_SPECIAL else c
            for c in name
        )
        for name in names
    )
    description = field["description"].split(":", 1)[0]
    return {
        "description": f"{description} ({listed}); none: portable",
        "anyOf": [
            {"enum": names},
            {"type": "string", "pattern": f"^\\s*(?:{spellings})\\s*$"},
            {"type": "null"},
        ],
    }


def hardware_schema(catalog: Catalog) -> dict[str, Any]:
    """json_schema() with the catalog's names for cpu.model, gpus[].model, nics[].model,
    os.distro and the shipped systems for ``system``."""
    schema = json_schema()
    defs = schema["$defs"]
    for spec, index, optional in (
        ("CpuSpec", catalog.cpus, True),
        ("GpuSpec", catalog.gpus, False),
        ("NicSpec", catalog.nics, True),
    ):
        field = defs[spec]["properties"]["model"]
        defs[spec]["properties"]["model"] = names_schema(index, field["description"], optional)
    edit = defs.get("NicSpecEdit", {}).get("properties", {})
    if "model" in edit:  # an overlay's edit of a NIC by name names a model the same way
        edit["model"] = names_schema(catalog.nics, edit["model"].get("description", ""), True)
    os_fields = defs["OsSpec"]["properties"]
    os_fields["distro"] = distro_schema(catalog, os_fields["distro"])
    system = schema["properties"]["system"]
    systems = sorted(catalog.system_files)
    schema["properties"]["system"] = {
        "description": system["description"],
        "anyOf": [{"enum": systems}, {"type": "null"}],
    }
    return schema


def input_schema(which: str, catalog: Catalog | None = None) -> dict[str, Any]:
    if which == "hardware":
        schema = hardware_schema(catalog or load_catalog())
    else:
        schema = ProfileFile.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = f"goldtune {which} description"
    return schema
