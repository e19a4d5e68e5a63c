"""Generate every hardware x profile combination in one call, each bundle written atomically."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from generator.bundle import write_bundle
from generator.catalog import Catalog, load_catalog
from generator.errors import GoldtuneError
from generator.hardware import load_facts
from generator.inputs import Inputs
from generator.paths import profiles_dir
from generator.plan import build_plan
from generator.profile import load_profile
from generator.render import render_bundle


@dataclass(frozen=True)
class Outcome:
    hardware: str
    profile: str
    bundle: Path | None
    settings: int
    error: str  # "" when the bundle was written

    @property
    def ok(self) -> bool:
        return not self.error


def all_systems(catalog: Catalog) -> list[str]:
    return list(catalog.system_files)


def all_profiles() -> list[str]:
    return sorted(path.stem for path in profiles_dir().glob("*.yaml"))


def _error_text(error: GoldtuneError) -> str:
    return "; ".join(error.lines())


def generate_matrix(hardware: list[str], profiles: list[str], output_root: Path,
                    catalog: Catalog | None = None) -> Iterator[Outcome]:
    """Yield one outcome per combination; a failure never stops the others."""
    catalog = catalog or load_catalog()
    loaded_profiles: dict[str, object] = {}
    for profile in profiles:
        try:
            loaded_profiles[profile] = load_profile(profile)
        except GoldtuneError as error:
            loaded_profiles[profile] = error
    for hw in hardware:
        try:
            facts_and_path: object = load_facts(hw, catalog)
        except GoldtuneError as error:
            facts_and_path = error
        for profile in profiles:
            yield _one(hw, profile, facts_and_path, loaded_profiles[profile], output_root)


def _one(hw: str, profile: str, facts_and_path: object, profile_and_path: object, output_root: Path) -> Outcome:
    for loaded in (facts_and_path, profile_and_path):
        if isinstance(loaded, GoldtuneError):
            return Outcome(hw, profile, None, 0, _error_text(loaded))
    facts, hw_path = facts_and_path  # type: ignore[misc]
    resolved, profile_path = profile_and_path  # type: ignore[misc]
    try:
        inputs = Inputs(facts, resolved, hw_path, profile_path)
        plan = build_plan(facts, resolved)._replace(inputs=inputs.digests)
        bundle = write_bundle(render_bundle(plan), output_root / f"{facts.name}-{resolved.name}")
    except GoldtuneError as error:
        return Outcome(hw, profile, None, 0, _error_text(error))
    return Outcome(hw, profile, bundle, len(plan.settings), "")


def run_with_progress(combinations: int, outcomes: Iterator[Outcome], show: bool,
                      progress: Callable[..., object]) -> list[Outcome]:
    if not show:
        return list(outcomes)
    results = []
    with progress(length=combinations, label="generating", show_pos=True) as bar:  # type: ignore[attr-defined]
        for outcome in outcomes:
            results.append(outcome)
            bar.update(1)
    return results
