"""`gen schema hardware` names the catalog (issue 30 item 8): a typo in a model field or in
``system:`` is refused by the schema as by the loader. On main any string passed (the model
fields were plain strings), so the refusal tests fail there."""

from __future__ import annotations

import json
from typing import Any

import pytest
from click.testing import CliRunner

from generator.cli import main
from generator.commands.schema import input_schema
from generator.inputs.catalog import AmbiguousNameError, load_catalog, names_of
from generator.paths import hardware_db_dir
from tests.test_hardware_schema import conforms, load

SCHEMA = input_schema("hardware")
WHOLE = "cpu: {model: Xeon-8480C, sockets: 2}\nmemory_gib: 512\n"


def accepts(text: str) -> bool:
    return conforms(load(text), SCHEMA, SCHEMA)


@pytest.mark.parametrize(
    ("text", "ok"),
    [
        (WHOLE + "gpus: [{model: H100-SXM5-80GB, count: 8}]", True),
        (WHOLE + "gpus: [{model: h100 sxm5_80gb, count: 8}]", True),  # as the loader matches
        (WHOLE + "gpus: [{model: '10de:2330', count: 8}]", True),  # a PCI id the catalog has
        (WHOLE + "gpus: [{model: H100-SMX5-80GB, count: 8}]", False),  # the typo
        (WHOLE + "gpus: [{model: '10de:ffff', count: 8}]", False),  # no entry has it
        (WHOLE + "gpus: [{model: H100, count: 8}]", False),  # no substring match
        (WHOLE + "nics: [{name: ib0, role: compute, model: ConnectX-7}]", True),
        (WHOLE + "nics: [{name: ib0, role: compute, model: ConectX-7}]", False),
        ("cpu: {model: Xeon-8480, sockets: 2}\nmemory_gib: 512", False),
        ("system: dgx-h100\nmemory_gib: 4096", True),
        ("system: dgx-h1000\nmemory_gib: 4096", False),
        ("system: dgx-h100\nnics: {ib0: {model: ConectX-7}}", False),
    ],
)
def test_model_fields_take_the_catalogs_names(text: str, ok: bool) -> None:
    assert accepts(text) is ok


def test_the_schema_accepts_exactly_what_the_loader_finds() -> None:
    catalog = load_catalog()
    model = SCHEMA["$defs"]["GpuSpec"]["properties"]["model"]
    for entry in catalog.gpus.entries:
        for name in names_of(entry):
            for spelling in (name, name.upper(), name.lower().replace("-", " ")):
                try:
                    found = catalog.gpus.find(spelling) is not None
                except AmbiguousNameError:
                    found = False
                assert conforms(spelling, model, SCHEMA) is found, spelling


def test_shipped_systems_conform_and_the_command_prints_it() -> None:
    for path in sorted((hardware_db_dir() / "systems").glob("*.yaml")):
        assert conforms(load(path.read_text()), SCHEMA, SCHEMA), path.name
    result = CliRunner().invoke(main, ["schema", "hardware"])
    printed: dict[str, Any] = json.loads(result.output)
    assert printed["$defs"]["CpuSpec"]["properties"]["model"]["anyOf"][0]["enum"]
