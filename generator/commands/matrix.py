"""Generate every hardware x profile combination in one call, each bundle written atomically.

The inputs are loaded once, in this process: every hardware file and every profile, so that a
broken file fails only its own combinations and two combinations that would write the same
directory are caught before anything is written. Planning, rendering and writing then run in
worker processes (one per CPU by default), each bundle still swapped into place atomically.
"""

from __future__ import annotations

import functools
import gc
import multiprocessing
import os
import signal
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

import click

from generator import TOOL
from generator.bundle.write import check_name_lengths, write_bundles
from generator.commands.generate import bundle_size_warnings, cloud_init_options
from generator.commands.terminal import progress_on_stderr, stream_is_terminal
from generator.errors import GoldtuneError
from generator.inputs.catalog import Catalog, load_catalog
from generator.inputs.distro import resolve_distro, tables
from generator.inputs.facts import Facts
from generator.inputs.hardware import load_facts
from generator.inputs.load import Inputs, file_digest, input_digests
from generator.inputs.profile import Profile, load_profile
from generator.model.setting import Plan
from generator.paths import profiles_dir
from generator.plan.build import build_plan
from generator.render.budgets import check_fit
from generator.render.cloudinit import CloudInitOptions
from generator.render.engine import preload_templates
from generator.render.outputs import RenderedFiles
from generator.render.render import render_bundle
from generator.table import format_table, table_width

# Bundles written as one batch (one flush to disk for all of them) and handed to a worker at a
# time: large enough that syncs and the pool's messaging stay cheap, small enough that the
# progress bar moves and the workers finish together.
BATCH = 8

T = TypeVar("T")


@dataclass(frozen=True)
class Outcome:
    hardware: str
    profile: str
    bundle: Path | None
    settings: int
    error: str  # "" when the bundle was written
    distro: str = ""  # the --os table's key; "" without --os

    @property
    def ok(self) -> bool:
        return not self.error


@dataclass(frozen=True)
class Combination:
    """One bundle to write, with its inputs already loaded, or the reason it cannot be."""

    hardware: str
    profile: str
    inputs: Inputs | None
    target: Path  # unused when inputs is None
    error: str = ""
    distro: str = ""  # the --os table's key; "" without --os


@dataclass(frozen=True)
class MatrixRequest:
    """What `gen matrix` is asked for, writing or with --check: the combinations (named, and the
    shipped ones the --all flags add), the worker processes, the distribution, the cloud-init
    options."""

    hardware: tuple[str, ...] = ()
    profiles: tuple[str, ...] = ()
    all_systems: bool = False
    all_profiles: bool = False
    jobs: int | None = None  # None: default_jobs()
    os_names: tuple[str, ...] = ()  # --os, repeatable; ALL_DISTROS for every table
    cloud_init_reboot: bool = False
    cloud_init_parts: tuple[Path, ...] = ()
    require_fit: tuple[str, ...] = ()  # providers whose user-data limit a bundle must fit

    @property
    def part_names(self) -> tuple[str, ...]:
        return tuple(str(path) for path in self.cloud_init_parts)


class FitGate(NamedTuple):
    """--require-fit's providers and the --cloud-init-part names its messages give."""

    providers: tuple[str, ...] = ()
    part_names: tuple[str, ...] = ()


NO_GATE = FitGate()


# `--os all`: every distribution table known to this run (shipped and the site catalog's). No
# table can be called this: a distribution key ends in -<version> (generator/inputs/distro.py
# DistroKey), and so does every alias.
ALL_DISTROS = "all"


def target_distros(os_names: tuple[str, ...], catalog: Catalog) -> list[str]:
    """The distribution keys --os names, in order and once each: an alias is its table's key,
    ``all`` every table's. An unknown name is the command's error (exit 2), not every
    combination's. Empty: no --os, portable bundles (or each hardware file's os.distro)."""
    keys: list[str] = []
    for name in os_names:
        if name.strip().lower() == ALL_DISTROS:
            keys += [distro.key for distro in tables(catalog.distros)]
        else:
            keys.append(resolve_distro(name, catalog.distros).key)
    return list(dict.fromkeys(keys))


def bundle_name(facts: Facts, profile: Profile, distro: str) -> str:
    """<hardware>-<profile>, and -<distribution key> when --os names it: the forms of one
    combination for several distributions never share a directory, and a fleet repository made
    without --os keeps its names."""
    return f"{facts.name}-{profile.name}" + (f"-{distro}" if distro else "")


def all_systems(catalog: Catalog) -> list[str]:
    return list(catalog.system_files)


def all_profiles() -> list[str]:
    return sorted(path.stem for path in profiles_dir().glob("*.yaml"))


def default_jobs() -> int:
    """The CPUs this process may run on (a taskset or cpuset limits them; a CPU quota does not)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _error_text(error: GoldtuneError) -> str:
    return "; ".join(error.lines())


class Loaded(NamedTuple):
    """One input file, validated, with the digest every bundle made from it records."""

    value: object
    path: Path
    digest: str


def _load_each(
    names: list[str], load: Callable[[str], tuple[object, Path]]
) -> dict[str, Loaded | str]:
    loaded: dict[str, Loaded | str] = {}
    for name in names:
        try:
            value, path = load(name)
            loaded[name] = Loaded(value, path, file_digest(path))
        except GoldtuneError as error:
            loaded[name] = _error_text(error)
        except OSError as error:  # the file went away between loading and hashing
            loaded[name] = f"{name}: cannot read: {error.strerror}"
    return loaded


def plan_combinations(
    hardware: list[str],
    profiles: list[str],
    output_root: Path,
    catalog: Catalog,
    distros: list[str] | None = None,
) -> list[Combination]:
    """Every combination in order, hardware-major, then profile, then distribution (``distros``:
    the --os keys, target_distros); a failed input or a taken dir is its error."""
    forms = distros or [""]
    facts = {
        distro: _load_each(hardware, functools.partial(_facts_for, catalog, distro or None))
        for distro in forms
    }
    resolved = _load_each(profiles, load_profile)
    combinations: list[Combination] = []
    claimed: dict[Path, str] = {}
    for hw in hardware:
        for profile in profiles:
            for distro in forms:
                combination = _combination(
                    hw, profile, distro, facts[distro][hw], resolved[profile], output_root
                )
                if combination.inputs is not None and combination.target in claimed:
                    error = (
                        f"would write {combination.target}, as {claimed[combination.target]} "
                        "does; set a different name: in one of their files"
                    )
                    combination = replace(combination, inputs=None, error=error)
                elif combination.inputs is not None:
                    on = f" on {distro}" if distro else ""
                    claimed[combination.target] = f"{hw} x {profile}{on}"
                combinations.append(combination)
    return combinations


def _facts_for(catalog: Catalog, distro: str | None, hardware: str) -> tuple[Facts, Path]:
    return load_facts(hardware, catalog, distro)


def _combination(
    hw: str,
    profile: str,
    distro: str,
    loaded_hw: Loaded | str,
    loaded_profile: Loaded | str,
    output_root: Path,
) -> Combination:
    if isinstance(loaded_hw, str) or isinstance(loaded_profile, str):
        error = loaded_hw if isinstance(loaded_hw, str) else loaded_profile
        return Combination(hw, profile, None, Path(), str(error), distro)
    hw_facts, profile_value = loaded_hw.value, loaded_profile.value
    assert isinstance(hw_facts, Facts) and isinstance(profile_value, Profile)
    target = output_root / bundle_name(hw_facts, profile_value, distro)
    inputs = Inputs(
        hw_facts,
        profile_value,
        loaded_hw.path,
        loaded_profile.path,
        input_digests(loaded_hw.digest, loaded_profile.digest),
    )
    return Combination(hw, profile, inputs, target, "", distro)


class Rendered(NamedTuple):
    combination: Combination
    plan: Plan
    files: RenderedFiles


def write_batch(
    combinations: list[Combination],
    cloud_init: CloudInitOptions | None = None,
    gate: FitGate = NO_GATE,
) -> list[Outcome]:
    """Plan, render and write each combination; the bundles share one flush to disk.
    ``cloud_init``: gen's --cloud-init-reboot and --cloud-init-part, for every bundle; a bundle
    that fails ``gate`` (--require-fit) is not written and fails.
    """
    prepared = [_render(combination, cloud_init, gate) for combination in combinations]
    ready = [item for item in prepared if isinstance(item, Rendered)]
    written = iter(write_bundles([(item.files, item.combination.target) for item in ready]))
    return [
        _written(item, next(written)) if isinstance(item, Rendered) else item for item in prepared
    ]


def _render(
    combination: Combination, cloud_init: CloudInitOptions | None, gate: FitGate = NO_GATE
) -> Rendered | Outcome:
    hw, profile, distro = combination.hardware, combination.profile, combination.distro
    if combination.inputs is None:
        return Outcome(hw, profile, None, 0, combination.error, distro)
    inputs = combination.inputs
    try:
        plan = build_plan(inputs.facts, inputs.profile)._replace(inputs=inputs.digests)
        files = render_bundle(plan, cloud_init)
        parts = (cloud_init or CloudInitOptions()).parts
        check_fit(files, parts, gate.part_names, gate.providers)
        return Rendered(combination, plan, files)
    except GoldtuneError as error:
        return Outcome(hw, profile, None, 0, _error_text(error), distro)


def _written(item: Rendered, result: Path | GoldtuneError) -> Outcome:
    hw, profile, distro = (
        item.combination.hardware,
        item.combination.profile,
        item.combination.distro,
    )
    if isinstance(result, GoldtuneError):
        return Outcome(hw, profile, None, 0, _error_text(result), distro)
    return Outcome(hw, profile, result, len(item.plan.settings), "", distro)


def generate_matrix(
    hardware: list[str],
    profiles: list[str],
    output_root: Path,
    catalog: Catalog | None = None,
    jobs: int = 1,
    distros: list[str] | None = None,
    cloud_init: CloudInitOptions | None = None,
    gate: FitGate = NO_GATE,
) -> Iterator[Outcome]:
    """Yield one outcome per combination, in order; a failure never stops the others.

    ``distros`` (the ``--os`` keys) makes every combination once for each distribution,
    ``cloud_init`` (--cloud-init-reboot, --cloud-init-part) gives every bundle's user-data
    those options.
    """
    combinations = plan_combinations(
        hardware, profiles, output_root, catalog or load_catalog(), distros
    )
    work = functools.partial(write_batch, cloud_init=cloud_init, gate=gate)
    yield from in_batches(combinations, jobs, work)


def in_batches(
    combinations: list[Combination], jobs: int, work: Callable[[list[Combination]], list[T]]
) -> Iterator[T]:
    """``work``'s results for batches of BATCH combinations, in order: in ``jobs`` forked
    workers where there is more than one batch for them, else in this process."""
    batches = [combinations[start : start + BATCH] for start in range(0, len(combinations), BATCH)]
    workers = min(jobs, len(batches))
    if workers <= 1 or not _can_fork():
        for batch in batches:
            yield from work(batch)
        return
    yield from _in_workers(batches, workers, work)


def _can_fork() -> bool:
    # Workers inherit the loaded inputs and compiled templates through fork; elsewhere (or where
    # fork is unsafe, as on macOS) the matrix runs in this process.
    return sys.platform == "linux" and "fork" in multiprocessing.get_all_start_methods()


# What the forked workers read: set just before the pool starts, inherited, never pickled
# (only each batch's results travel back).
_BATCHES: list[list[Combination]] = []
_WORK: Callable[[list[Combination]], list[Any]] = write_batch


def _work_on_nth(index: int) -> list[Any]:
    return _WORK(_BATCHES[index])


def _worker_signals() -> None:
    # Ctrl-C is the parent's to handle; when it then terminates the pool, SIGTERM unwinds the
    # worker, so a bundle being written removes its staging directory instead of leaving it.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, _exit_on_term)


def _exit_on_term(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


def _in_workers(
    batches: list[list[Combination]], workers: int, work: Callable[[list[Combination]], list[T]]
) -> Iterator[T]:
    # the forked workers inherit these, never pickled
    global _BATCHES, _WORK
    _BATCHES, _WORK = batches, work
    preload_templates()
    # What the workers inherit is never collected in them: a collection would touch (and so
    # copy) every page the parent's objects live on.
    gc.freeze()
    pool = multiprocessing.get_context("fork").Pool(workers, initializer=_worker_signals)
    try:
        for results in pool.imap(_work_on_nth, range(len(batches))):
            yield from results
        pool.close()
    except BaseException:
        pool.terminate()
        raise
    finally:
        pool.join()
        gc.unfreeze()
        _BATCHES, _WORK = [], write_batch


def run_with_progress(
    total: int,
    items: Iterator[T],
    show: bool,
    progress: Callable[..., object],
    label: str = "generating",
) -> list[T]:
    """Collect ``items``, moving a progress bar of ``total`` steps when ``show``."""
    if not show:
        return list(items)
    results = []
    with progress(length=total, label=label, show_pos=True) as bar:  # type: ignore[attr-defined]
        for item in items:
            results.append(item)
            bar.update(1)
    return results


def matrix_names(request: MatrixRequest, catalog: Catalog) -> tuple[list[str], list[str]]:
    """The hardware and profiles named, the shipped ones added by the --all flags, in order."""
    shipped_systems = all_systems(catalog) if request.all_systems else []
    shipped_profiles = all_profiles() if request.all_profiles else []
    systems = list(dict.fromkeys([*request.hardware, *shipped_systems]))
    chosen = list(dict.fromkeys([*request.profiles, *shipped_profiles]))
    if not systems or not chosen:
        raise click.UsageError(
            "name at least one --hw (or --all-systems) and one --profile (or --all-profiles)"
        )
    return systems, chosen


def run_matrix(request: MatrixRequest, output_root: Path) -> int:
    """Write every combination's bundle under ``output_root``; the summary table on stdout."""
    check_name_lengths(output_root)  # a name too long is the caller's input, before any work
    catalog = load_catalog()
    distros = target_distros(request.os_names, catalog)
    options = cloud_init_options(request.cloud_init_reboot, request.cloud_init_parts)
    systems, chosen = matrix_names(request, catalog)
    jobs = request.jobs or default_jobs()
    gate = FitGate(request.require_fit, request.part_names)
    generated = generate_matrix(systems, chosen, output_root, catalog, jobs, distros, options, gate)
    total = len(systems) * len(chosen) * max(len(distros), 1)
    outcomes = run_with_progress(total, generated, stream_is_terminal("stderr"), progress_on_stderr)
    rows = [
        [
            o.hardware,
            o.profile,
            *([o.distro] if distros else []),
            "ok" if o.ok else "FAILED",
            str(o.bundle) if o.bundle else o.error,
            str(o.settings) if o.ok else "",
        ]
        for o in outcomes
    ]
    os_column = ["OS"] if distros else []
    headers = ["HARDWARE", "PROFILE", *os_column, "RESULT", "BUNDLE / ERROR", "SETTINGS"]
    click.echo(format_table(headers, rows, width=table_width()))
    size_warnings(outcomes, options, request.cloud_init_parts)
    failed = sum(not o.ok for o in outcomes)
    click.echo(f"{len(outcomes) - failed} written, {failed} failed")
    return 1 if failed else 0


def size_warnings(
    outcomes: list[Outcome], options: CloudInitOptions, part_files: tuple[Path, ...]
) -> None:
    """`gen`'s cloud-init size warnings, for each bundle written, on stderr."""
    names = tuple(str(path) for path in part_files)
    for outcome in outcomes:
        if outcome.bundle is None or not outcome.ok:
            continue
        for line in bundle_size_warnings(outcome.bundle, options, names):
            click.echo(f"{TOOL}: warning: {outcome.bundle}: {line}", err=True)
