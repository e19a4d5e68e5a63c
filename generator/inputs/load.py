"""Load both inputs of a run: the hardware facts and the resolved profile, with their digests."""

# No `from __future__ import annotations`: a NamedTuple turns each string annotation into
# a compiled ForwardRef, ~0.15 ms a record at import (bench/bench.py's cold gen).
import hashlib
from collections.abc import Mapping
from pathlib import Path
from typing import NamedTuple

from generator.foreign import read_foreign
from generator.inputs.catalog import Catalog, load_catalog
from generator.inputs.facts import Facts
from generator.inputs.hardware import load_facts
from generator.inputs.profile import Profile, load_profile
from generator.inputs.yamlio import MAX_INPUT_BYTES


class Inputs(NamedTuple):
    facts: Facts
    profile: Profile
    hardware_path: Path
    profile_path: Path
    # sha256 of each input file as given (a reference system or parent profile is not included),
    # taken once when the file is loaded: a matrix shares one file among many bundles.
    digests: Mapping[str, str]


def file_digest(path: Path) -> str:
    """sha256 of an input file, read as a foreign file (regular, non-blocking, size-capped)."""
    return hashlib.sha256(read_foreign(path, MAX_INPUT_BYTES)).hexdigest()


def input_digests(hardware_digest: str, profile_digest: str) -> dict[str, str]:
    """The manifest's ``inputs``: the digests of the hardware file and the profile file."""
    return {"hardware": hardware_digest, "profile": profile_digest}


def load_inputs(
    hardware: str, profile: str, catalog: Catalog | None = None, os_name: str | None = None
) -> Inputs:
    """Both inputs; ``os_name`` (``--os``) names the target distribution over ``os.distro``."""
    catalog = catalog or load_catalog()
    facts, hardware_path = load_facts(hardware, catalog, os_name)
    resolved, profile_path = load_profile(profile)
    digests = input_digests(file_digest(hardware_path), file_digest(profile_path))
    return Inputs(facts, resolved, hardware_path, profile_path, digests)
