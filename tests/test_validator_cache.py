"""The input models' validators kept between runs: used for this code only, never required, and
validating exactly as the validator pydantic builds."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import BaseModel, ConfigDict
from pydantic_core import SchemaValidator

from generator.errors import InputError
from generator.inputs import validator_cache
from generator.inputs.hardware import HardwareSpec
from generator.inputs.profile import ProfileFile
from generator.inputs.schema import validate_model

REPO = Path(__file__).resolve().parent.parent
SPEC = {
    "name": "box",
    "cpu": {"vendor": "amd", "sockets": 2, "cores_per_socket": 64},
    "memory_gib": 512,
    "gpus": [{"model": "H100", "count": 8}],
    "nics": [{"name": "ib0", "role": "compute", "speed_gbps": 400}],
}
BAD_SPEC = {
    "cpu": {"vendor": "amd", "sockets": 0, "cores_per_socket": "64"},
    "memory_gib": 512,
    "nics": [{"name": "-bad", "role": "storage", "mtu": 9000}],
    "os": {"kernel": "6.8; rm -rf /"},
}


class Elsewhere(BaseModel):
    model_config = ConfigDict(defer_build=True)
    x: int


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(validator_cache, "CACHE_DIR", tmp_path / "cache")
    validator_cache.validator_of.cache_clear()
    return tmp_path / "cache"


def stored(model: type[HardwareSpec] | type[ProfileFile]) -> None:
    model.model_rebuild()
    validator_cache.store_validator(model, model.__pydantic_validator__)


def test_a_stored_validator_validates_as_the_model_does(cache: Path) -> None:
    stored(HardwareSpec)
    validator = validator_cache.stored_validator(HardwareSpec)
    assert isinstance(validator, SchemaValidator)
    from_cache = validator.validate_python(SPEC)
    assert type(from_cache) is HardwareSpec
    assert from_cache == HardwareSpec.model_validate(SPEC)
    assert from_cache.model_fields_set == HardwareSpec.model_validate(SPEC).model_fields_set


def test_bad_input_reads_the_same_through_a_stored_validator(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def problems() -> list[str]:
        validator_cache.validator_of.cache_clear()
        with pytest.raises(InputError) as caught:
            validate_model(HardwareSpec, BAD_SPEC, "hw.yaml")
        return caught.value.lines()

    monkeypatch.setattr(validator_cache, "stored_validator", lambda model: None)
    built = problems()
    monkeypatch.undo()
    monkeypatch.setattr(validator_cache, "CACHE_DIR", cache)
    stored(HardwareSpec)
    used: list[object] = []
    real = validator_cache.stored_validator

    def recording(model: type[HardwareSpec]) -> SchemaValidator | None:
        found = real(model)
        used.append(found)
        return found

    monkeypatch.setattr(validator_cache, "stored_validator", recording)
    monkeypatch.setattr(HardwareSpec, "__pydantic_complete__", False)
    assert problems() == built
    assert len(built) >= 4
    assert isinstance(used[0], SchemaValidator)


@pytest.mark.parametrize("change", ["version", "code"])
def test_an_entry_of_other_code_or_versions_is_not_used(
    cache: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, change: str
) -> None:
    code = tmp_path / "code"
    code.mkdir()
    (code / "models.py").write_text("# the models\n")
    monkeypatch.setattr(validator_cache, "CODE_DIRS", (code,))
    validator_cache.cache_key.cache_clear()
    validator_cache.code_files.cache_clear()
    stored(HardwareSpec)
    assert validator_cache.stored_validator(HardwareSpec) is not None
    if change == "version":
        monkeypatch.setattr(validator_cache.pydantic_core, "__version__", "0.0.0-other")
    else:
        (code / "models.py").write_text("# the models, changed\n")
    validator_cache.cache_key.cache_clear()
    validator_cache.code_files.cache_clear()
    assert validator_cache.stored_validator(HardwareSpec) is None
    validator_cache.cache_key.cache_clear()
    validator_cache.code_files.cache_clear()


def test_the_key_covers_every_source_of_the_inputs_and_the_model() -> None:
    """The models' fields are built from names of other modules (hardware.BundleName in a
    profile, model.setting's kinds, model.mig's pattern): every source of both packages counts."""
    folders = {folder.resolve() for folder in validator_cache.CODE_DIRS}
    assert folders == {REPO / "generator" / "inputs", REPO / "generator" / "model"}


@pytest.mark.parametrize("content", ["damaged", "foreign", "other key"])
def test_a_damaged_or_foreign_entry_is_ignored(cache: Path, content: str) -> None:
    entry = validator_cache.entry_path(HardwareSpec)
    entry.parent.mkdir()
    if content == "damaged":
        entry.write_bytes(b"not a pickle")
    elif content == "foreign":
        entry.write_bytes(pickle.dumps((validator_cache.cache_key(), {"not": "a validator"})))
    else:
        HardwareSpec.model_rebuild()
        entry.write_bytes(pickle.dumps(("another key", HardwareSpec.__pydantic_validator__)))
    assert validator_cache.stored_validator(HardwareSpec) is None


def test_an_entry_others_could_have_written_is_ignored(cache: Path) -> None:
    stored(HardwareSpec)
    os.chmod(validator_cache.entry_path(HardwareSpec), 0o666)  # noqa: S103 -- on purpose
    assert validator_cache.stored_validator(HardwareSpec) is None


def test_with_a_pydantic_plugin_the_model_builds_its_own_validator(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stored(ProfileFile)
    monkeypatch.setattr(validator_cache, "plugins_installed", lambda: True)
    monkeypatch.setattr(ProfileFile, "__pydantic_complete__", False)

    def refused(model: object) -> None:
        raise AssertionError("the cache is not read while plugins are installed")

    monkeypatch.setattr(validator_cache, "stored_validator", refused)
    assert validator_cache.validator_of(ProfileFile) is ProfileFile.__pydantic_validator__


def test_an_unwritable_cache_only_means_building_every_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "blocker").write_text("a file where the cache directory would be")
    monkeypatch.setattr(validator_cache, "CACHE_DIR", tmp_path / "blocker" / "cache")
    stored(HardwareSpec)
    assert validator_cache.stored_validator(HardwareSpec) is None


RUN = """
import sys
from pathlib import Path
from generator.inputs import validator_cache
from generator.inputs.hardware import HardwareSpec
from generator.inputs.schema import validate_model
validator_cache.CACHE_DIR = Path(sys.argv[1])
spec = validate_model(HardwareSpec, {"cpu": {"vendor": "intel", "sockets": 1,
    "cores_per_socket": 8}, "memory_gib": 64, "name": "x"}, "hw.yaml")
assert spec.cpu.cores_per_socket == 8
print("built" if HardwareSpec.__pydantic_complete__ else "from the cache")
"""


def test_the_next_run_validates_without_building_the_model(tmp_path: Path) -> None:
    def run() -> str:
        done = subprocess.run(
            [sys.executable, "-c", RUN, str(tmp_path / "cache")],
            capture_output=True,
            text=True,
            check=True,
            cwd=REPO,
        )
        return done.stdout.strip()

    assert run() == "built"
    assert run() == "from the cache"


class PluginWrapper:
    """Stands for pydantic's PluggableSchemaValidator: a validator wrapped in plugins' hooks."""

    def validate_python(self, data: object) -> object:
        return data


def test_only_pydantic_cores_own_validator_is_stored(cache: Path) -> None:
    validator_cache.store_validator(HardwareSpec, PluginWrapper())
    assert not validator_cache.entry_path(HardwareSpec).exists()


def test_a_model_whose_source_the_key_does_not_cover_is_never_stored(cache: Path) -> None:
    # defined in tests/ (module level, so that it pickles): not among the key's source files
    assert not validator_cache.keyed(Elsewhere)
    assert validator_cache.keyed(HardwareSpec)
    assert validator_cache.validator_of(Elsewhere).validate_python({"x": 1}) == Elsewhere(x=1)
    assert not cache.exists() or not any(cache.iterdir())


def test_an_install_without_sources_keys_no_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(validator_cache, "code_files", lambda: ())
    assert not validator_cache.keyed(HardwareSpec)
