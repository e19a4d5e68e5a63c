"""Write a rendered bundle to disk: atomically, deterministically, and only where it is ours.

The files are written into a fresh hidden staging directory beside the target and made durable
with one ``syncfs()`` of the target's file system (one for a whole batch of bundles in a matrix;
an ``fsync`` of every written entry where ``syncfs`` is missing). Then the staging directory and
the old bundle are exchanged in one step (``renameat2(RENAME_EXCHANGE)``), so a reader always
finds a complete bundle at the target and a SIGKILL at any point leaves one there. Where the file
system refuses the exchange, the old bundle is renamed aside and the new one renamed in (the
target is then briefly absent). One ``fsync`` of each parent directory, after the batch's last
swap, makes the renames durable. The old tree, now under the hidden name, is then removed by
the run itself before ``write_bundles`` returns: when the run ends, its work is done (a pipeline
that archives the output directory right after `gen` finds no hidden tree half removed).

A failure at any point before the swap leaves the previous bundle byte for byte as it was and
removes the staging directory. Hidden directories that a killed run left beside a target (for it
or for any other output of that directory) are removed by the next run that writes there, only
when they are ours: our name with the id of a process that no longer runs; a real directory of
our user, holding our staging marker or a goldtune bundle and nothing else, or empty. A replaced
bundle gets the marker back before its removal starts and loses it last, so one killed half
removed is still known as ours (one that cannot be marked is left whole). The target
is never followed through a symbolic link, and an existing directory is only replaced when it is
empty or a goldtune bundle (our manifest.json, and no file the manifest does not list but its
provenance statement and signature, layout.SEALS: a regenerated bundle drops a signature that
no longer holds).
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import re
import shutil
import stat
import tempfile
from collections.abc import Callable, Mapping, Sequence
from functools import cache
from pathlib import Path

from generator import TOOL
from generator.bundle.read import holds_own_plan, present_entries, read_manifest
from generator.errors import GenerationError, GoldtuneError, InputError, Problem
from generator.model.layout import MANIFEST, SEALS
from generator.textsafe import short_key

DIR_MODE = 0o755
# The xattrs of ACLs that, where present, decide a new entry's mode instead of the umask: a
# directory's POSIX default ACL (acl(5)), an NFSv4 ACL (nfs4_acl(5)).
INHERITED_ACLS = ("system.posix_acl_default", "system.nfs4_acl")
# NAME_MAX of Linux file systems. The hidden staging and aside names are keyed by a digest of the
# target's name, so every legal name can be written and replaced.
MAX_NAME_BYTES = 255
MAX_LISTED = 5
# Inside a staging directory until its last file is written (then removed): a directory killed
# mid-write is recognised as ours by it; one killed later is a complete goldtune bundle.
STAGING_MARKER = f".{TOOL}-staging"
STAGING = "new"  # the staging directory; after an exchange it holds the replaced bundle
ASIDE = "old"  # where the fallback renames the old bundle before renaming the new one in
RENAME_EXCHANGE = 2  # linux/include/uapi/linux/fs.h
AT_FDCWD = -100  # linux/include/uapi/linux/fcntl.h
# errno values with which renameat2 says "not here" rather than "failed": no such system call,
# or a file system that does not implement RENAME_EXCHANGE (renameat2(2), ERRORS: EINVAL).
EXCHANGE_UNSUPPORTED = frozenset({errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP})


def write_bundle(files: Mapping[str, tuple[bytes, int]], target: Path) -> Path:
    """Replace ``target`` with exactly ``files``; returns the absolute bundle directory."""
    outcome = write_bundles([(files, target)])[0]
    if isinstance(outcome, GoldtuneError):
        raise outcome
    return outcome


def write_bundles(
    bundles: Sequence[tuple[Mapping[str, tuple[bytes, int]], Path]],
) -> list[Path | GoldtuneError]:
    """Write several bundles with one flush to disk: stage each, flush once, then swap each in.

    Each bundle still replaces its target atomically and only once its files are durable; a
    bundle that fails leaves its target as it was and does not stop the others. The result is,
    per bundle, its absolute directory or the error. The bundles replaced are removed before it
    returns, once every swap of the batch is durable.
    """
    targets = [Path(os.path.abspath(target)) for _, target in bundles]
    remove_leftovers(targets)
    staged: list[tuple[Path, Path] | GoldtuneError] = []
    try:
        for (files, _), target in zip(bundles, targets, strict=True):
            try:
                staged.append(stage_bundle(files, target))
            except GoldtuneError as error:
                staged.append(error)
        flush_to_disk([item[0] for item in staged if not isinstance(item, GoldtuneError)])
    except OSError as error:  # syncfs or an fsync failed (EIO): no bundle of the batch is durable
        remove_stagings(staged)
        return [
            item if isinstance(item, GoldtuneError) else _not_settled(item[1], error)
            for item in staged
        ]
    except BaseException:
        remove_stagings(staged)
        raise
    swapped: list[Path | GoldtuneError] = []
    replaced: list[Path] = []
    try:
        for item in staged:
            swapped.append(
                item if isinstance(item, GoldtuneError) else _swap_or_error(*item, replaced)
            )
    except BaseException:  # SIGINT, or a worker's SIGTERM: the bundles swapped in stay durable
        settle_renames(swapped)
        raise
    settled = settle_renames(swapped)
    remove_trees(replaced)
    return settled


def remove_stagings(staged: Sequence[tuple[Path, Path] | GoldtuneError]) -> None:
    for item in staged:
        if not isinstance(item, GoldtuneError):
            shutil.rmtree(item[0], ignore_errors=True)


def settle_renames(results: list[Path | GoldtuneError]) -> list[Path | GoldtuneError]:
    """Make the swaps durable: one fsync of each parent directory, after all the renames into it.

    One a batch, not one a bundle: on ext4 each is a journal commit waited for, most of what a
    swap costs. A bundle whose parent cannot be synced is reported as not written, as before.
    """
    failed: dict[Path, OSError] = {}
    for parent in dict.fromkeys(result.parent for result in results if isinstance(result, Path)):
        try:
            fsync_directory(parent)
        except OSError as error:
            failed[parent] = error
    return [
        _not_settled(result, failed[result.parent])
        if isinstance(result, Path) and result.parent in failed
        else result
        for result in results
    ]


def _not_settled(target: Path, error: OSError) -> GenerationError:
    return GenerationError(f"{target}: cannot write the bundle: {error.strerror or error}")


def stage_bundle(files: Mapping[str, tuple[bytes, int]], target: Path) -> tuple[Path, Path]:
    """Write ``files`` into a new staging directory beside ``target``: (staging, target)."""
    check_bundle_paths(files)
    try:
        check_target(target)
    except OSError as error:
        raise GenerationError(
            f"{target}: cannot inspect the output directory: {error.strerror}"
        ) from error
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=hidden_prefix(target, STAGING), dir=target.parent))
    except OSError as error:
        raise GenerationError(
            f"{target.parent}: cannot create the bundle here: {error.strerror}"
        ) from error
    try:
        write_tree(staging, files)
    except BaseException as error:
        shutil.rmtree(staging, ignore_errors=True)
        if isinstance(error, OSError):
            raise GenerationError(
                f"{target}: cannot write the bundle: {error.strerror or error}"
            ) from error
        raise
    return staging, target


def hidden_prefix(target: Path, role: str) -> str:
    """``.goldtune-<role>-<target key>-<pid>-``: the next run knows whose it is, and whether its
    writer still runs. A key, not the name, so that any legal name leaves room for the rest."""
    return f".{TOOL}-{role}-{target_key(target.name)}-{os.getpid()}-"


def target_key(name: str) -> str:
    return hashlib.sha256(os.fsencode(name)).hexdigest()[:16]


def _swap_or_error(staging: Path, target: Path, replaced: list[Path]) -> Path | GoldtuneError:
    """Swap ``staging`` in at ``target``; the old bundle's hidden name goes to ``replaced``."""
    try:
        old = swap_in(staging, target)
    except BaseException as error:
        shutil.rmtree(staging, ignore_errors=True)
        if isinstance(error, OSError):
            return GenerationError(f"{target}: cannot write the bundle: {error.strerror or error}")
        raise
    if old is not None:
        replaced.append(old)
    return target


def check_name_lengths(path: Path, last: str = "directory") -> None:
    """Bad input (exit 2, one line) when a name on ``path`` is longer than a Linux file system
    takes (NAME_MAX), rather than the ENAMETOOLONG of a write halfway through a run."""
    for name in path.parts:
        size = len(os.fsencode(name))
        if size > MAX_NAME_BYTES:
            what = last if name == path.name else "directory"
            why = f"the {what} name is {size} bytes; at most {MAX_NAME_BYTES} (NAME_MAX)"
            where = str(path) if name == path.name else f"{str(path)[:120]}… ({short_key(name)})"
            raise InputError(Problem(where, "", why))


def check_target(target: Path) -> None:
    """Refuse a symlink, a non-directory, ``/``, or a directory that is not empty nor a bundle."""
    if target.parent == target:
        raise InputError(Problem(str(target), "", "refusing to replace the root directory"))
    check_name_lengths(target)
    try:
        info = os.lstat(target)
    except FileNotFoundError:
        return
    if stat.S_ISLNK(info.st_mode):
        raise InputError(
            Problem(
                str(target),
                "",
                "is a symbolic link; refusing to follow or replace it",
                "give the real directory with -o",
            )
        )
    if not stat.S_ISDIR(info.st_mode):
        raise InputError(
            Problem(str(target), "", "exists and is not a directory; refusing to replace it")
        )
    with os.scandir(target) as children:
        if next(children, None) is None:
            return
    listed = read_manifest_paths(target)
    if listed is None:
        raise InputError(
            Problem(
                str(target),
                "",
                f"is a non-empty directory that is not a {TOOL} bundle "
                f"(no {TOOL} {MANIFEST}); refusing to replace it",
                "choose a new or empty directory with -o",
            )
        )
    foreign = sorted(bundle_entries(target) - listed - SEALS)
    if foreign:
        shown = ", ".join(foreign[:MAX_LISTED]) + (", ..." if len(foreign) > MAX_LISTED else "")
        raise InputError(
            Problem(
                str(target),
                "",
                f"holds files the {TOOL} manifest does not list ({shown}); refusing to replace it",
                "move them away or choose another directory with -o",
            )
        )


def bundle_entries(directory: Path) -> set[str]:
    """Every non-directory entry below ``directory`` and every empty directory (``name/``), as
    bundle paths (symlinks not followed); a tree deeper or larger than any bundle is bad input
    (``read.present_entries``)."""
    return present_entries(directory)


def _is_real_directory(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir(follow_symlinks=False)
    except OSError:  # as os.walk: an entry whose type cannot be read is not descended into
        return False


def read_manifest_paths(directory: Path) -> set[str] | None:
    """The paths a goldtune manifest in ``directory`` lists, or None when it is not ours."""
    try:  # a regular file, not a link, a FIFO or a huge file, of a manifest's shape
        manifest = read_manifest(directory)
    except InputError:
        return None
    if manifest.tool_name != TOOL or not holds_own_plan(directory, manifest.files):
        return None
    return {entry.path for entry in manifest.files}


NOT_NAMES = frozenset({"", ".", ".."})  # a path part that names no entry of its own


def check_bundle_paths(files: Mapping[str, tuple[bytes, int]]) -> None:
    """Every path is relative and stays inside the bundle (a renderer bug otherwise)."""
    for path in files:
        if "\\" in path or not NOT_NAMES.isdisjoint(path.split("/")):
            raise GenerationError(
                f"refusing to write {path!r}: not a plain relative path inside the bundle"
            )


def write_tree(root: Path, files: Mapping[str, tuple[bytes, int]]) -> None:
    """Write ``files`` below the new, empty ``root``, each directory created once."""
    os.chmod(root, DIR_MODE)
    umask = creation_mask(root)
    write_file(root, STAGING_MARKER, b"", 0o600, umask)
    base = os.fspath(root)  # plain strings: ~70 paths a bundle, a Path join each cost more
    for directory in bundle_directories(files):
        os.mkdir(f"{base}/{directory}", DIR_MODE)
        if DIR_MODE & umask:  # exactly, whatever the umask
            os.chmod(f"{base}/{directory}", DIR_MODE)
    for path, (content, mode) in sorted(files.items()):
        write_file(root, path, content, mode, umask)
    os.unlink(root / STAGING_MARKER)


def creation_mask(root: Path) -> int:
    """The mode bits that creating an entry below the new ``root`` may take away: the umask, or
    all of them (0o777: every mode set with chmod afterwards) where an ACL may decide the mode
    instead: ``root``'s default ACL (inherited from the output's parent), or NFSv4's ACLs."""
    if not hasattr(os, "getxattr"):  # not Linux
        return 0o777
    for acl in INHERITED_ACLS:
        try:
            os.getxattr(root, acl, follow_symlinks=False)
        except OSError as error:
            if error.errno in (errno.ENODATA, errno.EOPNOTSUPP):  # none, or none on this system
                continue
        return 0o777
    return current_umask()


def current_umask() -> int:
    """The process's umask. Reading it means setting one: the strictest (0o077) for that instant,
    so a file another thread creates meanwhile is private, never more open than it asked.

    A file or directory is created with its final mode, and changed with chmod only when the
    umask takes bits from it: under the usual 022 that saves some 55 chmod calls a bundle.
    """
    umask = os.umask(0o077)
    os.umask(umask)
    return umask


def bundle_directories(files: Mapping[str, tuple[bytes, int]]) -> list[str]:
    """Every directory the bundle's paths need, parents before children."""
    needed: set[str] = set()
    for path in files:  # each folder's parents once: ~35 paths in ~20 folders a bundle
        directory = path.rpartition("/")[0]
        while directory and directory not in needed:
            needed.add(directory)
            directory = directory.rpartition("/")[0]
    return sorted(needed, key=lambda directory: (directory.count("/"), directory))


def write_file(root: Path, path: str, content: bytes, mode: int, umask: int = 0o777) -> None:
    """Create one new file (never through a symlink) with exactly ``mode``; ``umask`` is the
    process's (``current_umask``), unknown by default."""
    fd = os.open(
        f"{root}/{path}", os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode
    )
    try:
        view = memoryview(content)
        while view:
            view = view[os.write(fd, view) :]
        if mode & umask:  # the umask took bits from it
            os.fchmod(fd, mode)
    finally:
        os.close(fd)


def fsync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def swap_in(staging: Path, target: Path) -> Path | None:
    """Put ``staging`` at ``target``; returns where the replaced bundle now is, if there was one.
    The rename is durable once the parent is synced (``settle_renames``)."""
    if not os.path.lexists(target):
        os.rename(staging, target)
        return None
    if exchange(staging, target):
        return staging  # the exchange left the old bundle under the staging name
    return swap_by_renames(staging, target)


def swap_by_renames(staging: Path, target: Path) -> Path:
    """The fallback: rename the old bundle aside, the new one in (the target is briefly absent)."""
    aside = Path(tempfile.mkdtemp(prefix=hidden_prefix(target, ASIDE), dir=target.parent))
    os.rmdir(aside)  # only the unique name is needed
    os.rename(target, aside)
    try:
        os.rename(staging, target)
    except BaseException:
        os.rename(aside, target)
        raise
    return aside


def exchange(first: Path, second: Path) -> bool:
    """Swap two existing paths in one step; False where the system or file system cannot."""
    renameat2 = _libc_function("renameat2")
    if renameat2 is None:
        return False
    if renameat2(AT_FDCWD, os.fsencode(first), AT_FDCWD, os.fsencode(second), RENAME_EXCHANGE) == 0:
        return True
    code = _last_errno()
    if code in EXCHANGE_UNSUPPORTED:
        return False
    raise OSError(code, os.strerror(code), str(second))


def flush_to_disk(stagings: Sequence[Path]) -> None:
    """Make the staged trees durable: one syncfs per file system, else an fsync of every entry.

    ``os.sync()`` would flush every file system on the machine, other tenants' dirty data too.
    """
    synced: set[int] = set()
    for staging in stagings:
        device = os.lstat(staging).st_dev
        if device in synced:
            continue
        if sync_file_system(staging):
            synced.add(device)
        else:
            fsync_tree(staging)


def sync_file_system(directory: Path) -> bool:
    """``syncfs()`` of the file system holding ``directory``; False where it is unavailable."""
    syncfs = _libc_function("syncfs")
    if syncfs is None:
        return False
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        return syncfs(fd) == 0
    finally:
        os.close(fd)


def fsync_tree(root: Path) -> None:
    """fsync every file and directory below ``root`` (links are neither followed nor opened)."""
    for parent, _dirs, names in os.walk(root):
        for name in names:
            fd = os.open(os.path.join(parent, name), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        fsync_directory(Path(parent))


@cache
def _libc_function(name: str) -> Callable[..., int] | None:
    # ctypes only where a bundle is written: Python has neither os.syncfs nor os.renameat2.
    if os.uname().sysname != "Linux":
        return None
    import ctypes

    try:
        return getattr(ctypes.CDLL(None, use_errno=True), name)  # type: ignore[no-any-return]
    except (OSError, AttributeError):  # no libc to load, or one too old (glibc < 2.28: renameat2)
        return None


def _last_errno() -> int:
    import ctypes

    return ctypes.get_errno()


def remove_trees(trees: Sequence[Path]) -> None:
    """Remove the bundles a batch replaced, under their hidden names. An old tree whose removal
    a signal cut short is a dead run's leftover, which the next run beside it removes
    (remove_leftovers): ``remove_marked`` keeps it recognisable as ours until it is empty."""
    for tree in trees:
        remove_marked(tree)


def _remove_directory(path: str) -> None:
    # nested deeper than rmtree recurses: left marked, as after an error
    with contextlib.suppress(RecursionError):
        shutil.rmtree(path, ignore_errors=True)


def remove_marked(tree: Path) -> None:
    """Remove a hidden tree of ours so that, cut short at any point, what is left is known as
    ours: the staging marker goes in first and out last. A bundle half removed may have lost
    its manifest.json, which otherwise says whose it is; then only an empty directory is left
    (``is_our_leftover``). Nothing is followed through a link (rmtree, unlink of the entry)."""
    try:
        write_file(tree, STAGING_MARKER, b"", 0o600)
    except FileExistsError:
        pass  # a leftover being removed again: its marker is there
    except OSError:
        # no marker can be made (a full disk): the tree is left whole, still known as ours by
        # its manifest, for the next run; half removed without the marker it would not be
        return
    try:
        with os.scandir(tree) as entries:
            children = [entry for entry in entries if entry.name != STAGING_MARKER]
        for entry in children:
            if _is_real_directory(entry):
                _remove_directory(entry.path)
            else:
                os.unlink(entry.path)
        os.unlink(tree / STAGING_MARKER)
        os.rmdir(tree)
    except OSError:
        return  # left marked: the next run for this target tries again


# .goldtune-new-<target key>-<pid>-<random> (or -old-): what hidden_prefix and mkdtemp make.
HIDDEN_NAME = re.compile(
    rf"\.{TOOL}-(?:{STAGING}|{ASIDE})-(?P<key>[0-9a-f]{{16}})-(?P<pid>\d+)-\w+"
)


def remove_leftovers(targets: Sequence[Path]) -> None:
    """Remove the hidden directories that killed runs left beside ``targets``, when they are ours.

    Those of any target of the directory, not only of these: an output written once (a dated
    directory, a renamed bundle) is never written again, and what a run killed while writing or
    removing it left would stay. One scan of each parent directory for a whole batch (a matrix
    writes hundreds of bundles into one directory); a parent that does not exist yet has nothing
    to remove.
    """
    for parent in dict.fromkeys(target.parent for target in targets):
        try:
            with os.scandir(parent) as entries:
                found = [entry.path for entry in entries if _is_dead_runs(entry.name)]
        except OSError:
            continue
        for path in found:
            try:
                if is_our_leftover(Path(path)):
                    remove_marked(Path(path))
            except (OSError, GoldtuneError):  # gone meanwhile, unreadable, no bundle: not ours
                continue


def _is_dead_runs(entry_name: str) -> bool:
    match = HIDDEN_NAME.fullmatch(entry_name)
    return bool(match and not process_runs(int(match["pid"])))


def process_runs(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another user's
        return True
    except OverflowError:  # not a pid at all
        return False
    return True


def is_our_leftover(directory: Path) -> bool:
    """A real directory of our user, empty or holding our staging marker or a goldtune bundle
    only. Empty: ``remove_marked`` cut short after its last unlink (rmdir removes no more)."""
    info = os.lstat(directory)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid():
        return False
    with os.scandir(directory) as children:
        if next(children, None) is None:
            return True
    try:
        if stat.S_ISREG(os.lstat(directory / STAGING_MARKER).st_mode):
            return True
    except FileNotFoundError:
        pass
    listed = read_manifest_paths(directory)
    return listed is not None and not bundle_entries(directory) - listed - SEALS
