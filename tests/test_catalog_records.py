"""The catalog's plain records (generator/inputs/catalog.py) hold what its schema validates
(generator/inputs/catalog_schema.py), field for field: a field added to one and not the other
is named here, not found later as an AttributeError in a rule (issue 43: the records spare a
cached run the pydantic models)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from pydantic import BaseModel

from generator.inputs.catalog import CatalogEntry, CpuModel, GpuModel, NicModel, PowerLimits
from generator.inputs.catalog_cache import CACHE_DIR
from generator.inputs.catalog_schema import SCHEMAS, PowerLimitsSchema
from generator.paths import SITE_CATALOG_ENV
from tests.conftest import REPO

RECORDS = {"gpus": GpuModel, "nics": NicModel, "cpus": CpuModel}


def declared(record: type) -> set[str]:
    return {name for cls in record.__mro__ for name in getattr(cls, "__annotations__", {})}


@pytest.mark.parametrize(
    "record,schema",
    [
        *((RECORDS[kind], schema) for kind, schema in SCHEMAS.items()),
        (PowerLimits, PowerLimitsSchema),
    ],
    ids=[*SCHEMAS, "power"],
)
def test_each_record_declares_its_schemas_fields(record: type, schema: type[BaseModel]) -> None:
    assert declared(record) == set(schema.model_fields), (
        "edit the record in generator/inputs/catalog.py beside its schema in catalog_schema.py"
    )


def test_a_record_is_its_entry_field_for_field() -> None:
    from generator.inputs.catalog import load_catalog

    gpu = load_catalog().gpus.find("H100-SXM5-80GB")
    assert isinstance(gpu, GpuModel) and isinstance(gpu.power, PowerLimits)
    assert gpu.replace(notes="x") != gpu and gpu.replace(notes="x").notes == "x"
    assert isinstance(gpu, CatalogEntry) and gpu == gpu.replace()


def test_a_run_from_the_cached_catalog_does_not_define_the_schema() -> None:
    probe = (
        "import sys\n"
        "from generator.inputs.catalog import load_catalog\n"
        "catalog = load_catalog()\n"
        "catalog.gpus, catalog.nics, catalog.cpus\n"
        "print('generator.inputs.catalog_schema' in sys.modules)\n"
    )
    run = [sys.executable, "-c", probe]
    env = {name: value for name, value in os.environ.items() if name != SITE_CATALOG_ENV}
    subprocess.run(run, cwd=REPO, env=env, check=True, capture_output=True)  # fills the cache
    if not all((CACHE_DIR / f"{kind}.pickle").is_file() for kind in SCHEMAS):
        pytest.skip("the catalog cache cannot be written here (a read-only install validates)")
    done = subprocess.run(run, cwd=REPO, env=env, check=True, capture_output=True, text=True)
    assert done.stdout.strip() == "False"


def test_an_entry_is_read_only_as_the_frozen_models_were() -> None:
    """Rules share the cached catalog's entries: one rule setting a field would change it for
    every later plan of the process (gen matrix)."""
    entry = GpuModel(key="x", name="X")
    with pytest.raises(AttributeError, match="read-only"):
        entry.name = "Y"
    assert entry.replace(name="Y").name == "Y" and entry.name == "X"
