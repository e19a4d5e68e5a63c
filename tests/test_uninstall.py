"""install.sh --uninstall (issue 30 item 8): what a package's prerm and %preun run. The purge
of a real .deb in a Debian scratch root is in test_bundle_package.py; here a RHEL 9 image with
BLS entries, whose boot arguments are edited as text."""

from __future__ import annotations

import shutil
from pathlib import Path

from tests.test_install import (
    INFERENCE,
    RHEL_ENTRY,
    RHEL_OPTIONS,
    bundle_for,
    entry_options,
    image_tree,
    make_bin,
    rhel_root,
    run,
)


def test_uninstall_gives_a_bls_image_its_options_and_tuned_selection_back(tmp_path: Path) -> None:
    """On main --uninstall was bad usage (exit 2) and nothing of the install was taken back."""
    root = rhel_root(tmp_path / "image")
    before = image_tree(root)
    path = make_bin(tmp_path, {})
    (path / "rmdir").symlink_to(shutil.which("rmdir") or "/bin/rmdir")  # the take-back's own tool
    bundle = bundle_for(tmp_path, INFERENCE)
    installed = run(bundle / "install.sh", "--root", str(root), path=path)
    assert installed.returncode == 0, installed.stdout + installed.stderr
    assert entry_options(root) != [RHEL_OPTIONS]

    taken = run(bundle / "install.sh", "--uninstall", "--root", str(root), path=path)
    assert taken.returncode == 0, taken.stdout + taken.stderr
    assert entry_options(root) == [RHEL_OPTIONS]
    after = image_tree(root)
    # kept for kernels installed later (kernel-install reads it), without the bundle's arguments
    assert after.pop("/etc/kernel/cmdline") == ("0644", f"{RHEL_OPTIONS}\n".encode())
    # tuned reads the same selection as manual either way (daemon.py _get_startup_profile);
    # the mode before the install is not recorded
    assert after.pop("/etc/tuned/profile_mode")[1] == b"manual\n"
    before.pop("/etc/tuned/profile_mode")
    # an image unit the bundle masked is left masked, and named (its state before is unknown)
    assert after.pop("/etc/systemd/system/bluetooth.service") == ("link", "/dev/null")
    assert (
        "left as the install made them" in taken.stdout and "mask bluetooth.service" in taken.stdout
    )
    assert after == before, taken.stdout
    assert not (root / "var/lib/goldtune").exists()
    assert (root / RHEL_ENTRY).is_file()

    taken_back = image_tree(root)
    again = run(bundle / "install.sh", "--uninstall", "--root", str(root), path=path)
    assert again.returncode == 0, again.stdout + again.stderr
    assert image_tree(root) == taken_back  # a second take-back changes nothing
