"""install.sh puts the bundle's tuned profile where the image's tuned reads it (issue 37).

tuned 2.23 moved its own profiles to /usr/lib/tuned/profiles/<name> and reads local ones from
/etc/tuned/profiles only (redhat-performance/tuned 6d3aa94); up to 2.22 they are
/usr/lib/tuned/<name> and /etc/tuned/<name>. A portable bundle, and one for a table whose minor
releases differ (rhel-9: 2.20 to 2.27), cannot know which, so install.sh (and the first boot,
install-lib.sh's tuned_place) decides on the image, records the path it used, and --uninstall
takes that one back. tuned's own Locator, from the unpacked 2.25.1 tree and this host's 2.20,
finds the profile where it was put.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
from pathlib import Path

import pytest
from test_install import make_bin, run
from test_tuned_profiles_dir import PROFILE, TUNED_TREES, bundle_for, tuned_locates

from generator.bundle.read import Bundle, ManifestFile, read_bundle
from generator.model.layout import INSTALL_RECORD
from generator.model.setting import Plan
from generator.verify import health
from generator.verify.image import check_root
from generator.verify.snapshot import Snapshot
from generator.verify.verdicts import Verdict

NEW = f"/etc/tuned/profiles/{PROFILE}/tuned.conf"
OLD = f"/etc/tuned/{PROFILE}/tuned.conf"
SYSTEM_TUNED = Path("/usr/lib/python3/dist-packages")  # bookworm's tuned 2.20 (install-tools.sh)


def tuned_2_25_root(root: Path) -> Path:
    """An image with tuned 2.25.1's layout: its own profiles under /usr/lib/tuned/profiles."""
    shutil.copytree(
        TUNED_TREES / "2.25.1/profiles/balanced", root / "usr/lib/tuned/profiles/balanced"
    )
    (root / "etc/tuned/profiles").mkdir(parents=True)
    return root


def tuned_2_20_root(root: Path) -> Path:
    """An image with bookworm's tuned 2.20 layout: its profiles directly under /usr/lib/tuned."""
    (root / "usr/lib/tuned/balanced").mkdir(parents=True)
    (root / "usr/lib/tuned/balanced/tuned.conf").write_text("[main]\nsummary=balanced\n")
    (root / "etc/tuned").mkdir(parents=True)
    return root


def tools(tmp_path: Path) -> Path:
    """install.sh's tools (test_install.TOOLS) and rmdir, which --uninstall takes the profile's
    own directory away with."""
    path = tmp_path / "bin"
    if not path.is_dir():
        make_bin(tmp_path, {})
        (path / "rmdir").symlink_to(shutil.which("rmdir") or "/bin/rmdir")
    return path


def install(
    bundle: Path, root: Path, tmp_path: Path, *args: str
) -> subprocess.CompletedProcess[str]:
    result = run(bundle / "install.sh", "--root", str(root), *args, path=tools(tmp_path))
    assert result.returncode == 0, result.stdout + result.stderr
    return result


def test_a_portable_bundle_on_tuned_2_25_goes_to_etc_tuned_profiles(tmp_path: Path) -> None:
    if not (TUNED_TREES / "2.25.1/profiles").is_dir():
        pytest.skip("no tuned 2.25.1 tree (tests/tools/install-tools.sh)")
    bundle = bundle_for(tmp_path)
    assert (bundle / f"rootfs{OLD}").is_file()  # the bundle's bytes keep /etc/tuned
    root = tuned_2_25_root(tmp_path / "image")
    result = install(bundle, root, tmp_path)
    assert (root / NEW.lstrip("/")).read_bytes() == (bundle / f"rootfs{OLD}").read_bytes()
    assert not (root / OLD.lstrip("/")).parent.exists()
    assert f"{OLD} goes to {NEW}: the directory tuned reads here" in result.stdout
    record = (root / INSTALL_RECORD.lstrip("/")).read_text().splitlines()
    assert NEW in record and OLD not in record
    assert tuned_locates(TUNED_TREES / "2.25.1", root) == f"{root}{NEW}"
    # gen verify --root judges the profile where the image's tuned reads it
    checks = check_root(read_bundle(bundle), root)
    tuned = [c for c in checks if c.kind == "tuned" or c.key in (NEW, OLD)]
    assert tuned and all(c.verdict == Verdict.OK for c in tuned), tuned
    again = install(bundle, root, tmp_path)
    assert f"unchanged {NEW}" in again.stdout and "done: 0 written" in again.stdout
    install(bundle, root, tmp_path, "--uninstall")
    assert not (root / NEW.lstrip("/")).parent.exists()
    assert (root / "etc/tuned/profiles").is_dir()  # tuned's own directory stays


def test_a_debian_13_bundle_on_tuned_2_20_goes_to_etc_tuned(tmp_path: Path) -> None:
    """The other way: the bundle says /etc/tuned/profiles, the image's tuned is bookworm's."""
    if not (SYSTEM_TUNED / "tuned/profiles/locator.py").is_file():
        pytest.skip("no tuned 2.20 on this host (tests/tools/install-tools.sh)")
    bundle = bundle_for(tmp_path, "--os", "debian-13")
    root = tuned_2_20_root(tmp_path / "image")
    result = install(bundle, root, tmp_path)
    assert (root / OLD.lstrip("/")).read_bytes() == (bundle / f"rootfs{NEW}").read_bytes()
    assert not (root / "etc/tuned/profiles").exists()
    assert f"goes to {OLD}" in result.stdout
    assert tuned_locates(SYSTEM_TUNED, root) == f"{root}{OLD}"
    checks = check_root(read_bundle(bundle), root)
    tuned = [c for c in checks if c.kind == "tuned" or c.key in (NEW, OLD)]
    assert tuned and all(c.verdict == Verdict.OK for c in tuned), tuned
    install(bundle, root, tmp_path, "--uninstall")
    assert not (root / OLD.lstrip("/")).parent.exists()


def test_an_image_without_tuned_keeps_the_bundles_path(tmp_path: Path) -> None:
    root = tmp_path / "image"
    root.mkdir()
    install(bundle_for(tmp_path), root, tmp_path)
    assert (root / OLD.lstrip("/")).is_file()


def test_a_bundle_over_an_earlier_install_in_the_old_place_moves_it(tmp_path: Path) -> None:
    """An image baked before this fix (the profile in /etc/tuned, which 2.25 does not read)
    and installed again: the record's old path goes, the profile is where tuned reads it."""
    bundle = bundle_for(tmp_path)
    root = tmp_path / "image"
    root.mkdir()
    install(bundle, root, tmp_path)  # no tuned yet: the bundle's /etc/tuned
    tuned_2_25_root(root)
    result = install(bundle, root, tmp_path)
    assert (root / NEW.lstrip("/")).is_file() and not (root / OLD.lstrip("/")).exists()
    assert f"removed {OLD}" in result.stdout


@pytest.mark.parametrize("where", ["etc/tuned/profiles", f"etc/tuned/profiles/{PROFILE}"])
def test_a_link_in_the_way_out_of_the_image_is_refused(tmp_path: Path, where: str) -> None:
    root = tuned_2_25_root(tmp_path / "image")
    outside = tmp_path / "outside"
    outside.mkdir()
    link = root / where
    if link.is_dir():
        link.rmdir()
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(outside)
    result = run(bundle_for(tmp_path) / "install.sh", "--root", str(root), path=tools(tmp_path))
    assert result.returncode != 0
    assert "symbolic link that leaves the image" in result.stderr, result.stderr
    assert list(outside.iterdir()) == []


@pytest.mark.parametrize("where", [OLD, NEW])
def test_live_verify_takes_the_profile_in_either_directory(where: str) -> None:
    """The collector's file records (every /etc file named goldtune) hold the profile where
    install.sh put it; the node's tuned-adm says whether tuned loaded it (checks_host)."""
    text = b"[main]\nsummary=ours\n"
    item = ManifestFile(f"rootfs{OLD}", hashlib.sha256(text).hexdigest(), 0o644)
    bundle = Bundle(Path("/nonexistent"), Plan("box", "inference", ()), files=(item,))
    records = {"file": [(where, f"{hashlib.sha256(text).hexdigest()} 644")]}
    [check] = health.check_files(bundle, Snapshot(records=records))
    assert check.verdict == Verdict.OK, check
    [missing] = health.check_files(bundle, Snapshot(records={"file": [("/etc/other", "0 644")]}))
    assert missing.verdict != Verdict.OK
