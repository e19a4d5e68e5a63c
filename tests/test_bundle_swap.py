"""Replacing a bundle: one-step swap, one file system flushed, old trees and leftovers removed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from plans import full_plan, minimal_plan

from generator.bundle import write as bundle
from generator.bundle.write import write_bundle
from generator.render.render import render_bundle

REPO = Path(__file__).resolve().parent.parent

# Polls the target with lstat until the stop file appears; prints "<absent> <polls>".
POLLER = """
import os, sys
target, stop = sys.argv[1], sys.argv[2]
absent = polls = 0
print("ready", flush=True)
while not os.path.exists(stop):
    polls += 1
    try:
        os.lstat(target)
    except FileNotFoundError:
        absent += 1
print(absent, polls, flush=True)
"""


def hidden_entries(directory: Path) -> list[str]:
    return sorted(name for name in os.listdir(directory) if name.startswith("."))


def hidden(target_name: str, pid: int, suffix: str = "abcd1234", role: str = "new") -> str:
    """The name a run with ``pid`` gives its staging (new) or set-aside (old) directory."""
    return f".goldtune-{role}-{bundle.target_key(target_name)}-{pid}-{suffix}"


def dead_pid() -> int:
    """The id of a process that has exited and been reaped."""
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


def test_the_exchange_swaps_two_directories_in_one_step(tmp_path: Path) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    (first / "a").write_text("1")
    (second / "b").write_text("2")
    assert bundle.exchange(first, second)  # ext4, tmpfs, xfs and btrfs all implement it
    assert os.listdir(first) == ["b"] and os.listdir(second) == ["a"]


def test_every_step_of_a_replacement_leaves_a_complete_bundle_at_the_target(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "bundle"
    write_bundle(render_bundle(minimal_plan()), target)
    seen: list[bool] = []

    def observed(step: Callable[..., object]) -> Callable[..., object]:
        def call(*args: object) -> object:
            result = step(*args)
            seen.append((target / "manifest.json").is_file())
            return result

        return call

    monkeypatch.setattr(bundle, "exchange", observed(bundle.exchange))
    monkeypatch.setattr(os, "rename", observed(os.rename))
    write_bundle(render_bundle(full_plan()), target)
    assert seen and all(seen)


def test_a_reader_polling_during_regenerations_never_finds_the_target_absent(
    tmp_path: Path,
) -> None:
    target, stop = tmp_path / "bundle", tmp_path / "stop"
    plans = [render_bundle(full_plan()), render_bundle(minimal_plan())]
    write_bundle(plans[0], target)
    reader = subprocess.Popen(
        [sys.executable, "-c", POLLER, str(target), str(stop)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert reader.stdout is not None and reader.stdout.readline() == "ready\n"
        for index in range(30):
            write_bundle(plans[index % 2], target)
    finally:
        stop.touch()
        output, _ = reader.communicate(timeout=60)
    absent, polls = map(int, output.split())
    assert polls > 0
    assert absent == 0


def test_the_file_system_is_synced_once_and_os_sync_never_called(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def machine_wide_sync() -> None:
        raise AssertionError("os.sync() flushes every file system on the machine")

    synced: list[Path] = []
    real_sync = bundle.sync_file_system
    monkeypatch.setattr(os, "sync", machine_wide_sync)
    monkeypatch.setattr(
        bundle, "sync_file_system", lambda path: synced.append(path) or real_sync(path)
    )
    files = render_bundle(minimal_plan())
    bundle.write_bundles([(files, tmp_path / "a"), (files, tmp_path / "b")])
    assert len(synced) == 1 and synced[0].parent == tmp_path
    assert real_sync(tmp_path)  # syncfs exists here, so this is the path the tool takes


def test_without_syncfs_every_written_entry_is_fsynced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fsynced: list[int] = []
    real_fsync = os.fsync
    monkeypatch.setattr(bundle, "sync_file_system", lambda path: False)
    monkeypatch.setattr(os, "fsync", lambda fd: fsynced.append(fd) or real_fsync(fd))
    files = render_bundle(full_plan())
    target = write_bundle(files, tmp_path / "bundle")
    directories = len(bundle.bundle_directories(files)) + 1
    # every file and directory of the staged tree, then the parent after the rename
    assert len(fsynced) == len(files) + directories + 1
    written = [str(path.relative_to(target)) for path in target.rglob("*") if path.is_file()]
    assert sorted(written) == sorted(files)


def test_the_replaced_bundle_is_removed_after_the_swap_before_write_bundle_returns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run removes the tree it replaced itself (on main a process spawned at exit did,
    after write_bundle had returned): once the new bundle is in place, before returning."""
    target = tmp_path / "bundle"
    write_bundle(render_bundle(full_plan()), target)
    new = render_bundle(minimal_plan())
    seen: list[tuple[list[str], bytes]] = []
    real_remove = bundle.remove_trees

    def remove_trees(trees: list[Path]) -> None:
        seen.append((hidden_entries(tmp_path), (target / "manifest.json").read_bytes()))
        real_remove(trees)

    monkeypatch.setattr(bundle, "remove_trees", remove_trees)
    write_bundle(new, target)
    ((leftover, manifest),) = seen
    assert len(leftover) == 1 and leftover[0].startswith(hidden("bundle", os.getpid(), suffix=""))
    assert manifest == new["manifest.json"][0]  # the new bundle is in place: the swap came first
    assert os.listdir(tmp_path) == ["bundle"]


def test_gen_has_removed_the_replaced_bundle_when_it_exits(tmp_path: Path) -> None:
    """Nothing of a run is left behind: an archive of the output taken right after `gen`
    exits finds no hidden tree (on main a detached process was still removing it)."""
    target = tmp_path / "bundle"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    command = [
        sys.executable,
        "-m",
        "generator",
        "--hw",
        "dgx-h100",
        "--profile",
        "inference",
        "-o",
        str(target),
    ]
    for _ in range(2):
        result = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
        assert result.returncode == 0, result.stderr
        assert os.listdir(tmp_path) == ["bundle"]


def killed_while_writing(target: Path, after_files: int) -> None:
    """Write a bundle in a child that SIGKILLs itself after ``after_files`` files (0: at the
    flush, after the last file)."""
    child = os.fork()
    if child == 0:
        try:
            written = []
            real_write_file = bundle.write_file

            def write_then_die(
                root: Path, path: str, content: bytes, mode: int, umask: int = 0o777
            ) -> None:
                real_write_file(root, path, content, mode, umask)
                written.append(path)
                if len(written) == after_files:
                    os.kill(os.getpid(), signal.SIGKILL)

            bundle.write_file = write_then_die  # type: ignore[assignment]

            def die(stagings: object) -> None:
                os.kill(os.getpid(), signal.SIGKILL)

            bundle.flush_to_disk = die  # type: ignore[assignment]
            write_bundle(render_bundle(full_plan()), target)
        finally:
            os._exit(3)
    _, status = os.waitpid(child, 0)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL


@pytest.mark.parametrize("after_files", [3, 0], ids=["mid-write", "before-the-swap"])
def test_a_staging_directory_left_by_a_killed_run_is_removed_by_the_next(
    tmp_path: Path, after_files: int
) -> None:
    target = tmp_path / "bundle"
    write_bundle(render_bundle(minimal_plan()), target)
    killed_while_writing(target, after_files)
    assert len(hidden_entries(tmp_path)) == 1
    assert (target / "manifest.json").is_file()  # the kill left the old bundle in place
    write_bundle(render_bundle(minimal_plan()), target)
    assert os.listdir(tmp_path) == ["bundle"]


def killed_while_removing(target: Path, last: str, nth: int) -> None:
    """Replace the bundle at ``target`` in a child that SIGKILLs itself right after its
    ``nth`` unlink of an entry named ``last``."""
    child = os.fork()
    if child == 0:
        try:
            real_unlink = os.unlink
            unlinked: list[str] = []

            def unlink_then_die(path: object, *args: object, **kwargs: object) -> None:
                real_unlink(path, *args, **kwargs)  # type: ignore[arg-type]
                if os.fsdecode(path).rpartition("/")[2] == last:  # type: ignore[arg-type]
                    unlinked.append(last)
                    if len(unlinked) == nth:
                        os.kill(os.getpid(), signal.SIGKILL)

            os.unlink = unlink_then_die  # type: ignore[assignment]
            write_bundle(render_bundle(full_plan()), target)
        finally:
            os._exit(3)
    _, status = os.waitpid(child, 0)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL


# the staging marker is unlinked once when the new bundle is complete, then from the old one last
@pytest.mark.parametrize(
    ("last", "nth"), [("manifest.json", 1), ("plan.json", 1), (bundle.STAGING_MARKER, 2)]
)
def test_a_bundle_half_removed_by_a_killed_run_is_removed_by_the_next(
    tmp_path: Path, last: str, nth: int
) -> None:
    """Issue 29 family 8: killed while it removes the bundle it replaced, a run left a hidden
    tree without its manifest (or plan), which no later run knew as its own (fails on main).
    The marker goes in before the removal and out last; an empty tree is ours too."""
    target = tmp_path / "bundle"
    write_bundle(render_bundle(minimal_plan()), target)
    killed_while_removing(target, last, nth)
    (leftover,) = hidden_entries(tmp_path)
    assert not (tmp_path / leftover / last).exists()
    assert (target / "manifest.json").is_file()  # the new bundle is in place
    write_bundle(render_bundle(minimal_plan()), target)
    assert os.listdir(tmp_path) == ["bundle"]


def plant(directory: Path, marker: bool = True) -> Path:
    directory.mkdir()
    if marker:
        (directory / bundle.STAGING_MARKER).write_bytes(b"")
    (directory / "partial").write_text("x")
    return directory


def test_only_our_leftovers_for_this_target_are_removed(tmp_path: Path) -> None:
    dead = dead_pid()
    target = tmp_path / "bundle"
    elsewhere = plant(tmp_path / "elsewhere")
    not_ours = {
        "live writer": plant(tmp_path / hidden("bundle", os.getppid())),
        "no marker": plant(tmp_path / hidden("bundle", dead), marker=False),
        "other name": plant(tmp_path / hidden("bundle", dead, role="tmp")),
        "named, not keyed": plant(tmp_path / f".bundle.goldtune-new-{dead}-abcd1234"),
    }
    if os.geteuid() == 0:  # only root can make a directory that belongs to someone else
        not_ours["another user's"] = plant(tmp_path / hidden("bundle", dead, "nobody01", "old"))
        os.chown(not_ours["another user's"], 65534, 65534)
    link = tmp_path / hidden("bundle", dead, "linked01", "old")
    link.symlink_to(elsewhere)
    ours = plant(tmp_path / hidden("bundle", dead, "abcd1234x"))
    write_bundle(render_bundle(minimal_plan()), target)
    assert not ours.exists()
    for why, directory in not_ours.items():
        assert (directory / "partial").is_file(), why
    assert link.is_symlink() and sorted(os.listdir(elsewhere)) == [bundle.STAGING_MARKER, "partial"]


@pytest.mark.parametrize(("last", "nth"), [("manifest.json", 1), ("plan.json", 1)])
def test_a_half_removed_bundle_beside_another_output_is_removed(
    tmp_path: Path, last: str, nth: int
) -> None:
    """Issue 41 family 3: what a run killed while removing the bundle it replaced left was
    swept only by a later run for the same target (fails on main); an output written once (a
    dated directory, a renamed bundle) kept it for ever. A run for any target of the directory
    removes every dead run's leftover that is ours; a live run's, another user's, another name
    and a link stay (test_only_our_leftovers_for_this_target_are_removed)."""
    target = tmp_path / "bundle-2026-12-06"
    write_bundle(render_bundle(minimal_plan()), target)
    killed_while_removing(target, last, nth)
    assert len(hidden_entries(tmp_path)) == 1
    live = plant(tmp_path / hidden("bundle-2026-12-06", os.getppid()))
    write_bundle(render_bundle(minimal_plan()), tmp_path / "bundle-2026-12-07")
    assert sorted(os.listdir(tmp_path)) == sorted(
        ["bundle-2026-12-06", "bundle-2026-12-07", live.name]
    )


def test_a_tree_that_cannot_be_marked_is_left_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No marker can be made (a full disk): the replaced bundle stays whole, known as ours by
    its manifest, and the next run removes it; half removed without it, it was no one's."""
    target = tmp_path / "bundle"
    write_bundle(render_bundle(minimal_plan()), target)
    real_write_file = bundle.write_file

    def full_disk(directory: Path, name: str, *args: object) -> None:
        if name == bundle.STAGING_MARKER and (directory / "manifest.json").exists():
            raise OSError(28, "No space left on device")
        real_write_file(directory, name, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(bundle, "write_file", full_disk)
    write_bundle(render_bundle(full_plan()), target)
    (leftover,) = hidden_entries(tmp_path)
    assert (tmp_path / leftover / "manifest.json").is_file()
    assert (tmp_path / leftover / "plan.json").is_file()
    monkeypatch.undo()
    # the next run is another process: this one's leftover is a dead run's to it
    dead = leftover.replace(f"-{os.getpid()}-", f"-{dead_pid()}-")
    os.rename(tmp_path / leftover, tmp_path / dead)
    write_bundle(render_bundle(minimal_plan()), target)
    assert os.listdir(tmp_path) == ["bundle"]


def test_one_batch_cleans_the_leftovers_of_each_of_its_targets(tmp_path: Path) -> None:
    dead = dead_pid()
    for name in ("a", "b"):
        plant(tmp_path / hidden(name, dead))
    files = render_bundle(minimal_plan())
    bundle.write_bundles([(files, tmp_path / "a"), (files, tmp_path / "b")])
    assert sorted(os.listdir(tmp_path)) == ["a", "b"]


def test_a_name_of_the_longest_legal_length_can_be_replaced(tmp_path: Path) -> None:
    target = tmp_path / ("b" * 255)  # NAME_MAX: the hidden names must not grow with it
    write_bundle(render_bundle(minimal_plan()), target)
    write_bundle(render_bundle(full_plan()), target)
    assert os.listdir(tmp_path) == [target.name]


def test_a_flush_that_fails_leaves_every_target_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # syncfs refused, then an fsync meets a device error: no bundle of the batch is durable
    previous = write_bundle(render_bundle(minimal_plan()), tmp_path / "a")
    before = sorted(path.name for path in previous.rglob("*"))

    def failing_fsync(fd: int) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(bundle, "sync_file_system", lambda path: False)
    monkeypatch.setattr(os, "fsync", failing_fsync)
    files = render_bundle(full_plan())
    results = bundle.write_bundles([(files, tmp_path / "a"), (files, tmp_path / "b")])
    assert [str(result) for result in results] == [
        f"{tmp_path / 'a'}: cannot write the bundle: Input/output error",
        f"{tmp_path / 'b'}: cannot write the bundle: Input/output error",
    ]
    assert sorted(path.name for path in (tmp_path / "a").rglob("*")) == before
    assert sorted(os.listdir(tmp_path)) == ["a"]  # no staging directory left, no "b"
