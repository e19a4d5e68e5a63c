"""Hostile images and bundles for install.sh, round four (issue 41, families 1 to 3).

1. Removal never passes a symbolic link at any component, even one that stays inside the root,
   and an install record names only what the tool installs: on main a record line under one of
   the tool's directories, with a link there to another directory of the image, removed any
   file of the image (install, --uninstall and the cloud-init first boot alike).
2. install-lib.sh is input: checked (a regular file, its owner, its mode, its sha256 in
   manifest.json) before install.sh sources it; on main an empty or CRLF library ended in exit
   127 and a shell message, and a world-writable one was sourced.
3. A killed install.sh --root left its temporaries in the image, and the rerun kept them.

Every image is made in tmp_path, every link out of one points into tmp_path: a failure writes
nowhere else.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from plans import full_plan
from test_first_boot import first_boot, live_root
from test_install import INFERENCE, TRAINING, bundle_for, image_tree, make_bin, needs_chroot, run

from generator.model import layout

RECORD = layout.INSTALL_RECORD.lstrip("/")


def installed_image(tmp_path: Path) -> tuple[Path, Path, Path]:
    """An image the full bundle was installed into: (bundle, root, PATH directory)."""
    bundle = bundle_for(tmp_path, full_plan())
    root = tmp_path / "image"
    root.mkdir()
    path = make_bin(tmp_path, {})
    first = run(bundle / "install.sh", "--root", str(root), path=path)
    assert first.returncode == 0, first.stdout + first.stderr
    return bundle, root, path


def add_record_line(root: Path, line: str) -> None:
    record = root / RECORD
    record.write_text(record.read_text() + line + "\n")


def victim(directory: Path, name: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text("the image's own\n")
    return path


# --- 1. removal through a directory link ---------------------------------------------------------


def link_inside(root: Path, place: str, to: str) -> None:
    """``place`` (an image path) becomes a relative link to the image's ``to``."""
    link = root / place.lstrip("/")
    if link.is_dir() and not link.is_symlink():
        for child in sorted(link.rglob("*"), reverse=True):
            child.unlink() if not child.is_dir() or child.is_symlink() else child.rmdir()
        link.rmdir()
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(os.path.relpath(root / to.lstrip("/"), link.parent))


@pytest.mark.parametrize(
    ("linked", "line"),
    [
        # the tool's own data directory, a link to the image's /usr/bin
        ("/etc/goldtune", "/etc/goldtune/victim"),
        # a directory the tool writes into, a link to another directory of the image
        ("/etc/sysctl.d", "/etc/sysctl.d/91-goldtune-old.conf"),
        # a component higher up
        ("/usr/lib", "/usr/lib/goldtune/victim"),
        ("/usr/local/libexec", "/usr/local/libexec/goldtune/victim"),  # before 0.2.0
        # a directory whose own name carries the tool's
        ("/etc/goldtune-x", "/etc/goldtune-x/90-goldtune.conf"),
    ],
)
def test_a_record_line_through_a_linked_directory_inside_the_image_removes_nothing(
    tmp_path: Path, linked: str, line: str
) -> None:
    bundle, root, path = installed_image(tmp_path)
    kept = victim(
        root / "srv/keep" / os.path.dirname(line.removeprefix(linked)).lstrip("/"),
        os.path.basename(line),
    )
    link_inside(root, linked, "/srv/keep")
    add_record_line(root, line)
    # a bundle without that file: the record's line is stale
    result = run(bundle / "install.sh", "--root", str(root), path=path)
    assert kept.read_text() == "the image's own\n", result.stdout
    assert f"{line}: a directory on its path is a symbolic link; not removed" in result.stdout
    assert result.returncode == 1


def test_a_link_out_of_the_image_on_a_record_line_removes_nothing(tmp_path: Path) -> None:
    bundle, root, path = installed_image(tmp_path)
    outside = tmp_path / "outside"
    kept = victim(outside, "90-goldtune.conf")
    (root / "etc/goldtune-out").symlink_to(outside)
    add_record_line(root, "/etc/goldtune-out/90-goldtune.conf")
    result = run(bundle / "install.sh", "--root", str(root), path=path)
    assert kept.is_file(), result.stdout
    assert result.returncode == 1


@pytest.mark.parametrize(
    "line",
    [
        "/etc/goldtune-keep/passwd",  # a directory named with the tool's, a file that is not
        "/etc/goldtune/deeper/shadow",  # below /etc/goldtune's own files
        "/usr/lib/goldtune/x/y",
        "/usr/local/libexec/goldtune/x/y",  # before 0.2.0
        "/etc/tuned/goldtune-x/other.conf",
        "/etc/tuned/goldtune-x/y/tuned.conf",
        "/etc/goldtune/../shadow",
        "/etc/./goldtune/gpu.conf",
        "/etc/goldtune.conf",  # /etc itself holds no file of the tool's but nccl.conf, rccl.conf
    ],
)
def test_a_record_names_only_what_the_tool_installs(tmp_path: Path, line: str) -> None:
    bundle, root, path = installed_image(tmp_path)
    parent, _, name = line.rpartition("/")
    kept = None
    if ".." not in line and "/./" not in line:
        kept = victim(root / parent.lstrip("/"), name)
    add_record_line(root, line)
    result = run(bundle / "install.sh", "--root", str(root), path=path)
    assert "is not a file goldtune installs; ignored" in result.stdout, result.stdout
    assert kept is None or kept.read_text() == "the image's own\n"
    assert result.returncode == 1


def test_uninstall_removes_nothing_through_a_linked_directory(tmp_path: Path) -> None:
    bundle, root, path = installed_image(tmp_path)
    data = root / "etc/goldtune"
    names = sorted(entry.name for entry in data.iterdir())
    keep = root / "srv/keep"
    keep.mkdir(parents=True)
    for name in names:
        (keep / name).write_text("the image's own\n")
    link_inside(root, "/etc/goldtune", "/srv/keep")
    result = run(bundle / "install.sh", "--uninstall", "--root", str(root), path=path)
    assert sorted(entry.name for entry in keep.iterdir()) == names, result.stdout
    assert "/etc/goldtune/gpu.conf: a directory on its path is a symbolic link" in result.stdout
    assert result.returncode == 1


def test_uninstall_leaves_a_linked_record_directory_alone(tmp_path: Path) -> None:
    bundle, root, path = installed_image(tmp_path)
    state = root / "srv/state"
    state.mkdir(parents=True)
    (state / "kernel-args").write_text("the image's own\n")
    (state / "installed-files").write_text((root / RECORD).read_text())
    link_inside(root, "/var/lib/goldtune", "/srv/state")
    result = run(bundle / "install.sh", "--uninstall", "--root", str(root), path=path)
    assert sorted(entry.name for entry in state.iterdir()) == ["installed-files", "kernel-args"]
    assert result.returncode == 1, result.stdout


@needs_chroot
def test_the_first_boot_removes_nothing_through_a_linked_directory(tmp_path: Path) -> None:
    """Live, on /: every component is inside the root, and still no link is passed."""
    root = tmp_path / "live"
    live_root(root)
    inference = bundle_for(tmp_path, INFERENCE, "inference")
    baked = run(inference / "install.sh", "--root", str(root), path=make_bin(tmp_path, {}))
    assert baked.returncode == 0, baked.stdout + baked.stderr
    kept = victim(root / "srv/keep", "victim")
    link_inside(root, "/etc/goldtune", "/srv/keep")
    add_record_line(root, "/etc/goldtune/victim")
    out = first_boot(root, TRAINING)
    assert kept.read_text() == "the image's own\n", out
    assert "/etc/goldtune/victim: a directory on its path is a symbolic link; not removed" in out


# --- 2. install-lib.sh checked before it is sourced --------------------------------------------


def library_case(bundle: Path, case: str) -> None:
    library = bundle / layout.INSTALL_LIB
    text = library.read_bytes()
    if case == "empty":
        library.write_bytes(b"")
    elif case == "crlf":
        library.write_bytes(text.replace(b"\n", b"\r\n"))
    elif case == "edited":
        library.write_bytes(text + b'touch "$bundle/sourced"\n')
    elif case == "world-writable":
        library.write_bytes(text + b'touch "$bundle/sourced"\n')
        library.chmod(0o666)
        refresh_manifest(bundle)
    elif case == "group-writable":
        library.write_bytes(text + b'touch "$bundle/sourced"\n')
        library.chmod(0o664)
        refresh_manifest(bundle)
    elif case == "link":
        library.rename(bundle / "real-lib.sh")
        library.symlink_to("real-lib.sh")
    elif case == "fifo":
        library.unlink()
        os.mkfifo(library)
    elif case == "foreign-owner":
        library.write_bytes(text + b'touch "$bundle/sourced"\n')
        refresh_manifest(bundle)
        os.chown(library, 65534, 65534)
    elif case == "no-manifest":
        (bundle / layout.MANIFEST).unlink()
    elif case == "manifest-without-it":
        manifest = json.loads((bundle / layout.MANIFEST).read_text())
        manifest["files"] = [f for f in manifest["files"] if f["path"] != layout.INSTALL_LIB]
        (bundle / layout.MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True))
    elif case == "manifest-a-link":
        (bundle / layout.MANIFEST).rename(bundle / "real-manifest.json")
        (bundle / layout.MANIFEST).symlink_to("real-manifest.json")


def refresh_manifest(bundle: Path) -> None:
    """The manifest lists the library's new digest (a copy edited with its manifest)."""
    manifest = json.loads((bundle / layout.MANIFEST).read_text())
    digest = hashlib.sha256((bundle / layout.INSTALL_LIB).read_bytes()).hexdigest()
    for entry in manifest["files"]:
        if entry["path"] == layout.INSTALL_LIB:
            entry["sha256"] = digest
    (bundle / layout.MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")


CASES = [
    "empty",
    "crlf",
    "edited",
    "world-writable",
    "group-writable",
    "link",
    "fifo",
    "no-manifest",
    "manifest-without-it",
    "manifest-a-link",
]
if os.geteuid() == 0:  # only root can give a file to someone else
    CASES.append("foreign-owner")


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("mode", ["--check", "--root"])
def test_a_library_that_is_not_the_bundles_is_one_line_and_exit_2(
    tmp_path: Path, case: str, mode: str
) -> None:
    bundle = bundle_for(tmp_path, full_plan())
    library_case(bundle, case)
    root = tmp_path / "image"
    root.mkdir()
    args = ["--check"] if mode == "--check" else ["--root", str(root)]
    result = subprocess.run(
        ["sh", str(bundle / "install.sh"), *args],
        capture_output=True,
        text=True,
        timeout=30,
        env={"PATH": str(make_bin(tmp_path, {})), "LC_ALL": "C"},
        check=False,
    )
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert result.stdout == ""
    (line,) = result.stderr.splitlines()
    assert re.fullmatch(r"install\.sh: error: .*", line), line
    assert not (bundle / "sourced").exists()
    assert list(root.iterdir()) == []


def test_the_bundles_own_library_is_sourced(tmp_path: Path) -> None:
    bundle = bundle_for(tmp_path, full_plan())
    result = subprocess.run(
        ["sh", str(bundle / "install.sh"), "--check"], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    manifest = json.loads((bundle / layout.MANIFEST).read_text())
    assert layout.INSTALL_LIB in [entry["path"] for entry in manifest["files"]]


@pytest.mark.skipif(os.geteuid() != 0, reason="only root can give a file to someone else")
@pytest.mark.parametrize(("sudo_uid", "accepted"), [("65534", True), ("4242", False)])
def test_a_library_of_the_user_sudo_ran_install_sh_for(
    tmp_path: Path, sudo_uid: str, accepted: bool
) -> None:
    """Packer's shell provisioner uploads the bundle as its SSH user and runs `sudo sh
    install.sh` (examples/packer/: execute_command): that user owns the library and can run
    anything as root already; any other owner is still refused."""
    bundle = bundle_for(tmp_path, full_plan())
    for path in bundle.rglob("*"):
        os.chown(path, 65534, 65534)
    result = subprocess.run(
        ["sh", str(bundle / "install.sh"), "--check"],
        capture_output=True,
        text=True,
        timeout=30,
        env={"PATH": os.environ["PATH"], "LC_ALL": "C", "SUDO_UID": sudo_uid},
        check=False,
    )
    if accepted:
        assert result.returncode == 0, result.stderr
    else:
        assert result.returncode == 2
        assert "by the user sudo ran it for" in result.stderr


# --- 3. what a killed install.sh --root leaves ----------------------------------------------------

# chmod is what put() runs right after filling its temporary, before it renames it in place
KILLING_CHMOD = 'kill -KILL "$PPID"\n'


def test_a_killed_install_leaves_nothing_after_the_rerun(tmp_path: Path) -> None:
    bundle = bundle_for(tmp_path, full_plan())
    clean = tmp_path / "clean"
    clean.mkdir()
    path = make_bin(tmp_path, {})
    assert run(bundle / "install.sh", "--root", str(clean), path=path).returncode == 0
    killed = tmp_path / "killed"
    killed.mkdir()
    killing = make_bin(tmp_path, {}, "killing")  # a stub over its link would write the host's
    (killing / "chmod").unlink()
    (killing / "chmod").write_text("#!/bin/sh\n" + KILLING_CHMOD)
    (killing / "chmod").chmod(0o755)
    interrupted = run(bundle / "install.sh", "--root", str(killed), path=killing)
    assert interrupted.returncode == -9, interrupted.stdout + interrupted.stderr
    left = [p for p in killed.rglob(".*") if p.is_file()]
    assert left, "the kill left no temporary: the test no longer interrupts a write"
    rerun = run(bundle / "install.sh", "--root", str(killed), path=path)
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    assert "(a temporary of an interrupted run)" in rerun.stdout
    assert image_tree(killed) == image_tree(clean)


def test_only_our_temporaries_are_swept_and_no_link_is_followed(tmp_path: Path) -> None:
    bundle, root, path = installed_image(tmp_path)
    sysctl = root / "etc/sysctl.d"
    ours = [
        sysctl / ".90-goldtune.conf.goldtune-tmp.Ab12Cd",
        root / "etc/.nccl.conf.goldtune-tmp.Zz9Yy8",
        root / "var/lib/goldtune/.installed-files.goldtune-tmp.q1w2e3",
    ]
    for leftover in ours:
        leftover.write_text("half\n")
    outside = tmp_path / "outside"
    target = victim(outside, "precious")
    link = sysctl / ".x.goldtune-tmp.LiNk00"
    link.symlink_to(target)
    not_ours = [
        victim(sysctl, ".90-goldtune.conf.backup"),  # the image's own
        victim(sysctl, ".90-goldtune.conf.Ab12Cd"),  # no tool name in it
        victim(root / "etc/ssh", ".sshd.goldtune-tmp.Ab12Cd"),  # a directory not ours
    ]
    directory = sysctl / ".d.goldtune-tmp.DiR000"
    directory.mkdir()
    linked_dir = root / "etc/modprobe.d"
    linked_dir.rename(root / "srv-modprobe")
    linked_dir.symlink_to("../srv-modprobe")
    through_link = victim(root / "srv-modprobe", ".90-goldtune.conf.goldtune-tmp.Ab12Cd")
    result = run(bundle / "install.sh", "--root", str(root), path=path)
    assert not [leftover for leftover in ours if leftover.exists()], result.stdout
    assert not link.is_symlink() and target.read_text() == "the image's own\n"
    assert all(kept.exists() for kept in not_ours)
    assert directory.is_dir()
    assert through_link.exists()


# --- 4. an upgrade from the /usr/local layout (before 0.2.0) ------------------------------------
def test_an_upgrade_from_the_usr_local_layout_removes_the_old_scripts(tmp_path: Path) -> None:
    """Bundles before 0.2.0 installed the boot scripts into /usr/local/libexec/goldtune (which
    Debian Policy 9.1.2 forbids a package). Their record lists them there; the next install puts
    the scripts in /usr/lib/goldtune and removes the old copies, without a warning."""
    bundle, root, path = installed_image(tmp_path)
    record = root / RECORD
    new_dir, old_dir = root / "usr/lib/goldtune", root / "usr/local/libexec/goldtune"
    scripts = sorted(entry.name for entry in new_dir.iterdir() if entry.is_file())
    assert scripts
    old_dir.parent.mkdir(parents=True)
    new_dir.rename(old_dir)  # the old layout's tree
    old_record = record.read_text().replace("/usr/lib/goldtune/", "/usr/local/libexec/goldtune/")
    assert "/usr/local/libexec/goldtune/" in old_record
    record.write_text(old_record)
    result = run(bundle / "install.sh", "--root", str(root), path=path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert sorted(entry.name for entry in new_dir.iterdir() if entry.is_file()) == scripts
    assert not old_dir.exists() or not any(old_dir.iterdir()), result.stdout  # rmdir: not in PATH
    for name in scripts:
        assert f"removed /usr/local/libexec/goldtune/{name}" in result.stdout
    assert " 0 failed" in result.stdout and "not removed" not in result.stdout
    assert "/usr/local/" not in "".join(
        line for line in result.stdout.splitlines() if "warn" in line
    )
    assert "/usr/local/" not in record.read_text()


def test_uninstall_prunes_only_the_tools_own_directories(tmp_path: Path) -> None:
    """A directory is pruned when it is one the tool makes (/etc/goldtune, its tuned profiles',
    /usr/lib/goldtune/...), not because its path has the tool's name: a record line under a
    user's /etc/goldtune-data took that directory and its parents with the file (issue 44)."""
    bundle, root, path = installed_image(tmp_path)
    (path / "rmdir").symlink_to(shutil.which("rmdir") or "/bin/rmdir")  # the take-back's own tool
    users = root / "etc/goldtune-data/site"
    victim(users, "goldtune-site.conf")
    add_record_line(root, "/etc/goldtune-data/site/goldtune-site.conf")
    result = run(bundle / "install.sh", "--uninstall", "--root", str(root), path=path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert users.is_dir(), result.stdout
    assert "removed /etc/goldtune-data\n" not in result.stdout
    assert not (root / "etc/goldtune").exists(), result.stdout  # the tool's own: pruned
