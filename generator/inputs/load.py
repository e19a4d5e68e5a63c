"""Load both inputs of a run: the hardware facts and the resolved profile, with their digests."""

from __future__ import annotations

import hashlib
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

    @property
    def digests(self) -> dict[str, str]:
        """sha256 of each input file as given (a reference system or parent profile is not included)."""
        return {
            "hardware": sha256_of(self.hardware_path),
            "profile": sha256_of(self.profile_path),
        }


def sha256_of(path: Path) -> str:
    return hashlib.sha256(read_foreign(path, MAX_INPUT_BYTES)).hexdigest()


def load_inputs(hardware: str, profile: str, catalog: Catalog | None = None) -> Inputs:
    catalog = catalog or load_catalog()
    facts, hardware_path = load_facts(hardware, catalog)
    resolved, profile_path = load_profile(profile)
    return Inputs(facts, resolved, hardware_path, profile_path)
