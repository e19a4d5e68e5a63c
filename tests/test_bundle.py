"""Writing the bundle: atomic replacement, determinism, and never touching what is not ours."""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from plans import full_plan, minimal_plan

from generator.bundle import write as bundle
from generator.bundle.write import check_bundle_paths, write_bundle
from generator.errors import GenerationError, InputError
from generator.render.render import render_bundle

REPO = Path(__file__).resolve().parent.parent


def tree(root: Path) -> dict[str, tuple[str, bytes | str]]:
    """Every entry below ``root``: mode and content (files) or link target (symlinks)."""
    found: dict[str, tuple[str, bytes | str]] = {}
    for path in sorted(root.rglob("*")):
        name = str(path.relative_to(root))
        mode = f"{path.lstat().st_mode & 0o7777:04o}"
        if path.is_symlink():
            found[name] = ("link", os.readlink(path))
        elif path.is_file():
            found[name] = (mode, path.read_bytes())
        else:
            found[name] = (mode, "dir")
    return found


def test_writes_exactly_the_rendered_files_with_their_modes(tmp_path: Path) -> None:
    files = render_bundle(full_plan())
    target = write_bundle(files, tmp_path / "bundle")
    written = tree(target)
    for path, (content, mode) in files.items():
        assert written[path] == (f"{mode:04o}", content)
    assert {mode for mode, kind in written.values() if kind == "dir"} == {"0755"}
    assert os.stat(target).st_mode & 0o7777 == 0o755
    assert os.listdir(tmp_path) == ["bundle"]  # nothing beside the target


@pytest.mark.parametrize("umask", [0o022, 0o077, 0o027, 0o002, 0o000])
def test_modes_are_exact_whatever_the_umask(tmp_path: Path, umask: int) -> None:
    files = render_bundle(full_plan())
    previous = os.umask(umask)
    try:
        target = write_bundle(files, tmp_path / "bundle")
    finally:
        os.umask(previous)
    written = tree(target)
    assert {path: mode for path, (mode, _) in written.items() if path in files} == {
        path: f"{mode:04o}" for path, (_, mode) in files.items()
    }
    assert {mode for mode, kind in written.values() if kind == "dir"} == {"0755"}
    assert os.stat(target).st_mode & 0o7777 == 0o755


def test_modes_are_exact_below_a_default_acl(tmp_path: Path) -> None:
    """A default ACL (setfacl -d) on the output's parent replaces the umask for what is created
    below it: user rwx, group and others nothing would make every file 0600 without a chmod."""
    parent = tmp_path / "shared"
    parent.mkdir()
    entries = [(0x01, 7), (0x04, 0), (0x20, 0)]  # user::rwx group::--- other::--- (acl(5))
    acl = struct.pack("<I", 2) + b"".join(
        struct.pack("<HHI", tag, perm, 0xFFFFFFFF) for tag, perm in entries
    )
    try:
        os.setxattr(parent, "system.posix_acl_default", acl)
    except (OSError, AttributeError):
        pytest.skip("no POSIX ACLs on this file system")
    files = render_bundle(full_plan())
    written = tree(write_bundle(files, parent / "bundle"))
    assert {path: mode for path, (mode, _) in written.items() if path in files} == {
        path: f"{mode:04o}" for path, (_, mode) in files.items()
    }
    assert {mode for mode, kind in written.values() if kind == "dir"} == {"0755"}


def test_under_the_usual_umask_modes_are_set_at_creation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only the staging directory (made 0700 by mkdtemp) is changed afterwards: a chmod per
    entry is a journaled inode change on ext4."""
    changed: list[object] = []
    real_chmod, real_fchmod = os.chmod, os.fchmod
    monkeypatch.setattr(
        os, "chmod", lambda path, mode: changed.append(path) or real_chmod(path, mode)
    )
    monkeypatch.setattr(os, "fchmod", lambda fd, mode: changed.append(fd) or real_fchmod(fd, mode))
    previous = os.umask(0o022)
    try:
        target = write_bundle(render_bundle(full_plan()), tmp_path / "bundle")
    finally:
        os.umask(previous)
    assert len(changed) == 1
    assert (target / "manifest.json").is_file()


def test_replaces_a_previous_bundle_completely(tmp_path: Path) -> None:
    target = tmp_path / "bundle"
    write_bundle(render_bundle(full_plan()), target)
    write_bundle(render_bundle(minimal_plan()), target)
    assert {p for p, (m, c) in tree(target).items() if c != "dir"} == set(
        render_bundle(minimal_plan())
    )
    assert os.listdir(tmp_path) == ["bundle"]


def test_an_empty_directory_is_replaced(tmp_path: Path) -> None:
    (tmp_path / "bundle").mkdir()
    write_bundle(render_bundle(minimal_plan()), tmp_path / "bundle")
    assert (tmp_path / "bundle" / "manifest.json").is_file()


def test_missing_parents_are_created(tmp_path: Path) -> None:
    target = write_bundle(render_bundle(minimal_plan()), tmp_path / "out" / "deep" / "bundle")
    assert (target / "manifest.json").is_file()


def test_failure_mid_write_leaves_the_previous_bundle_intact(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "bundle"
    write_bundle(render_bundle(minimal_plan()), target)
    before = tree(target)
    real_write_file = bundle.write_file
    calls = []

    def failing_write_file(
        root: Path, path: str, content: bytes, mode: int, umask: int = 0o777
    ) -> None:
        calls.append(path)
        if len(calls) == 4:
            raise OSError(28, "No space left on device")
        real_write_file(root, path, content, mode, umask)

    monkeypatch.setattr(bundle, "write_file", failing_write_file)
    with pytest.raises(GenerationError, match="No space left on device"):
        write_bundle(render_bundle(full_plan()), target)
    assert tree(target) == before
    assert os.listdir(tmp_path) == ["bundle"]


@pytest.mark.parametrize("swap", ["exchange", "renames"])
def test_failure_during_the_swap_restores_the_previous_bundle(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, swap: str
) -> None:
    target = tmp_path / "bundle"
    write_bundle(render_bundle(minimal_plan()), target)
    before = tree(target)
    real_rename = os.rename

    def failing_exchange(first: Path, second: Path) -> bool:
        raise OSError(5, "Input/output error")

    def failing_rename(source: str | Path, destination: str | Path) -> None:
        if Path(destination) == target and ".goldtune-new-" in str(source):
            raise OSError(5, "Input/output error")
        real_rename(source, destination)

    if swap == "exchange":
        monkeypatch.setattr(bundle, "exchange", failing_exchange)
    else:  # a file system that refuses the exchange, then a failing second rename
        monkeypatch.setattr(bundle, "exchange", lambda first, second: False)
        monkeypatch.setattr(os, "rename", failing_rename)
    with pytest.raises(GenerationError, match="Input/output error"):
        write_bundle(render_bundle(full_plan()), target)
    assert tree(target) == before
    assert os.listdir(tmp_path) == ["bundle"]


def test_interrupt_before_the_first_bundle_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def interrupted(*args: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(bundle, "write_file", interrupted)
    with pytest.raises(KeyboardInterrupt):
        write_bundle(render_bundle(minimal_plan()), tmp_path / "bundle")
    assert os.listdir(tmp_path) == []


def test_symlink_at_the_target_is_not_followed(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "keep").write_text("mine")
    link = tmp_path / "bundle"
    link.symlink_to(elsewhere)
    with pytest.raises(InputError, match="symbolic link"):
        write_bundle(render_bundle(minimal_plan()), link)
    assert link.is_symlink() and os.readlink(link) == str(elsewhere)
    assert os.listdir(elsewhere) == ["keep"]
    assert sorted(os.listdir(tmp_path)) == ["bundle", "elsewhere"]


def test_a_directory_that_is_not_a_bundle_is_never_replaced(tmp_path: Path) -> None:
    target = tmp_path / "notes"
    target.mkdir()
    (target / "todo.txt").write_text("important")
    with pytest.raises(InputError, match="not a goldtune bundle"):
        write_bundle(render_bundle(minimal_plan()), target)
    assert tree(target) == {"todo.txt": ("0644", b"important")}
    assert os.listdir(tmp_path) == ["notes"]


def test_a_foreign_manifest_does_not_make_a_bundle(tmp_path: Path) -> None:
    target = tmp_path / "other"
    target.mkdir()
    (target / "manifest.json").write_text(
        json.dumps({"tool": {"name": "something-else"}, "files": []})
    )
    with pytest.raises(InputError, match="not a goldtune bundle"):
        write_bundle(render_bundle(minimal_plan()), target)


def test_a_bundle_with_files_its_manifest_does_not_list_is_not_replaced(tmp_path: Path) -> None:
    target = write_bundle(render_bundle(minimal_plan()), tmp_path / "bundle")
    (target / "my-notes.md").write_text("do not lose me")
    with pytest.raises(InputError, match=r"my-notes\.md"):
        write_bundle(render_bundle(full_plan()), target)
    assert (target / "my-notes.md").read_text() == "do not lose me"


def test_a_file_at_the_target_is_not_replaced(tmp_path: Path) -> None:
    target = tmp_path / "bundle"
    target.write_text("data")
    with pytest.raises(InputError, match="not a directory"):
        write_bundle(render_bundle(minimal_plan()), target)
    assert target.read_text() == "data"


@pytest.mark.parametrize("path", ["../escape", "/etc/passwd", "a/../../b", "./x", "a\\b", ""])
def test_paths_outside_the_bundle_are_refused(path: str) -> None:
    with pytest.raises(GenerationError):
        check_bundle_paths({path: (b"", 0o644)})


def run_gen(
    *args: str, cwd: Path | None = None, seed: str = "0"
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, "-m", "generator", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        check=False,
    )


def test_gen_refuses_to_replace_etc() -> None:
    before = sorted(os.listdir("/etc"))
    parent_before = sorted(os.listdir("/"))
    result = run_gen("--hw", "dgx-h100", "--profile", "inference", "-o", "/etc")
    assert result.returncode == 2
    assert "not a goldtune bundle" in result.stderr and "refusing to replace it" in result.stderr
    assert "Traceback" not in result.stderr
    assert sorted(os.listdir("/etc")) == before
    assert sorted(os.listdir("/")) == parent_before


def test_gen_writes_the_default_output_directory(tmp_path: Path) -> None:
    result = run_gen("--hw", "l4-inference", "--profile", "training", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "out" / "l4-inference-training" / "manifest.json").is_file()
    assert os.listdir(tmp_path / "out") == ["l4-inference-training"]


def test_bundles_are_byte_identical_across_runs_and_hash_seeds(tmp_path: Path) -> None:
    trees = []
    for seed in ("1", "4242"):
        target = tmp_path / f"seed-{seed}"
        result = run_gen(
            "--hw", "dgx-h100", "--profile", "training-multinode", "-o", str(target), seed=seed
        )
        assert result.returncode == 0, result.stderr
        trees.append(tree(target))
    assert trees[0] == trees[1]


def test_a_batch_is_flushed_once_and_a_refused_bundle_does_not_stop_the_others(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    syncs = []
    monkeypatch.setattr(bundle, "sync_file_system", lambda directory: syncs.append(1) or True)
    foreign = tmp_path / "notes"
    foreign.mkdir()
    (foreign / "todo.txt").write_text("important")
    files = render_bundle(minimal_plan())
    results = bundle.write_bundles(
        [(files, tmp_path / "a"), (files, foreign), (files, tmp_path / "b")]
    )
    assert syncs == [1]
    assert results[0] == tmp_path / "a" and results[2] == tmp_path / "b"
    assert isinstance(results[1], InputError) and "not a goldtune bundle" in str(results[1])
    assert tree(tmp_path / "a") == tree(tmp_path / "b")
    assert tree(foreign) == {"todo.txt": ("0644", b"important")}
    assert sorted(os.listdir(tmp_path)) == ["a", "b", "notes"]  # no staging directory left


def test_a_batch_syncs_each_parent_once_after_its_last_rename(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    events: list[tuple[str, str]] = []
    real_rename, real_fsync_directory = os.rename, bundle.fsync_directory
    monkeypatch.setattr(bundle, "exchange", lambda first, second: False)  # renames only
    monkeypatch.setattr(
        os, "rename", lambda a, b: events.append(("rename", Path(b).name)) or real_rename(a, b)
    )
    monkeypatch.setattr(
        bundle,
        "fsync_directory",
        lambda d: events.append(("fsync", Path(d).name)) or real_fsync_directory(d),
    )
    files = render_bundle(minimal_plan())
    (tmp_path / "p").mkdir()
    write_bundle(files, tmp_path / "p" / "a")  # replaced below: three renames
    events.clear()
    targets = [tmp_path / "p" / "a", tmp_path / "p" / "b", tmp_path / "q" / "c"]
    assert bundle.write_bundles([(files, target) for target in targets]) == targets
    renames = [name for event, name in events if event == "rename"]
    assert len(renames) == 4 and renames[1:] == ["a", "b", "c"]
    assert events[len(renames) :] == [("fsync", "p"), ("fsync", "q")]


def test_a_batch_stopped_between_swaps_still_syncs_the_renames_done(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SIGINT, or SIGTERM in a matrix worker (SystemExit), after the first swap: that bundle is
    in place, so its rename is made durable before the exception goes on."""
    synced: list[str] = []
    real_fsync_directory, real_swap_in = bundle.fsync_directory, bundle.swap_in
    monkeypatch.setattr(
        bundle,
        "fsync_directory",
        lambda d: synced.append(Path(d).name) or real_fsync_directory(d),
    )
    swaps: list[Path] = []

    def stopped_at_the_second(staging: Path, target: Path) -> Path | None:
        swaps.append(target)
        if len(swaps) == 2:
            raise SystemExit(143)
        return real_swap_in(staging, target)

    monkeypatch.setattr(bundle, "swap_in", stopped_at_the_second)
    files = render_bundle(minimal_plan())
    (tmp_path / "p").mkdir()
    with pytest.raises(SystemExit):
        bundle.write_bundles([(files, tmp_path / "p" / "a"), (files, tmp_path / "p" / "b")])
    assert (tmp_path / "p" / "a" / "EXPLAIN.md").is_file()
    assert synced == ["p"]


def test_a_parent_that_cannot_be_synced_fails_only_its_bundles(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_fsync_directory = bundle.fsync_directory

    def failing(directory: Path) -> None:
        if Path(directory).name == "p":
            raise OSError(5, "Input/output error")
        real_fsync_directory(directory)

    monkeypatch.setattr(bundle, "fsync_directory", failing)
    files = render_bundle(minimal_plan())
    targets = [tmp_path / "p" / "a", tmp_path / "q" / "b", tmp_path / "p" / "c"]
    results = bundle.write_bundles([(files, target) for target in targets])
    assert results[1] == targets[1]
    for failed in (results[0], results[2]):
        assert isinstance(failed, GenerationError) and "Input/output error" in str(failed)


def test_interrupted_batch_leaves_no_staging_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def interrupted(stagings: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(bundle, "flush_to_disk", interrupted)
    files = render_bundle(minimal_plan())
    with pytest.raises(KeyboardInterrupt):
        bundle.write_bundles([(files, tmp_path / "a"), (files, tmp_path / "b")])
    assert os.listdir(tmp_path) == []
