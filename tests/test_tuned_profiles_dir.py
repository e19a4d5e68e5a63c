"""The bundle's tuned profile goes where the target's tuned reads local profiles (issue 37).

tuned 2.23 moved local profiles from /etc/tuned/<name>/ to /etc/tuned/profiles/<name>/
(tuned/consts.py USER_PROFILES_DIR, the only local entry of CFG_DEF_PROFILE_DIRS); Debian 13
ships tuned 2.25.1. The first boot of a trixie image with a bundle that wrote
/etc/tuned/goldtune-inference/tuned.conf logged "Cannot set initial profile. No tunings will be
enabled: Requested profile 'goldtune-inference' doesn't exist" (tests/boot, GRUB boot). A
distribution table's tuned.profiles_dir says which directory its tuned reads; a portable bundle,
and one for a table that does not say, keeps /etc/tuned.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from generator.bundle.read import read_bundle
from generator.cli import main
from generator.inputs.distro import load_distros
from generator.model.planio import plan_from_data
from generator.verify.image import check_tuned
from generator.verify.imagefs import Image
from generator.verify.verdicts import Verdict
from tests.conftest import missing_tool
from tests.validators.run import MissingTool

TUNED_TREES = (
    Path(os.environ.get("GOLDTUNE_TOOLS_DIR", "/usr/local/lib/goldtune-tools")) / "tuned-trees"
)
PROFILE = "goldtune-inference"


def bundle_for(tmp_path: Path, *os_args: str) -> Path:
    out = tmp_path / ("-".join(os_args[1:]) or "portable")
    args = ["--hw", "dgx-h100", "--profile", "inference", *os_args, "-o", str(out)]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    return out


def test_a_debian_13_bundle_writes_its_profile_where_tuned_2_25_reads_it(tmp_path: Path) -> None:
    bundle = bundle_for(tmp_path, "--os", "debian-13")
    assert (bundle / f"rootfs/etc/tuned/profiles/{PROFILE}/tuned.conf").is_file()
    assert not (bundle / f"rootfs/etc/tuned/{PROFILE}").exists()
    assert json.loads((bundle / "plan.json").read_text())["tuned_dir"] == "/etc/tuned/profiles"
    install_list = (bundle / "install.list").read_text()
    assert f"\t/etc/tuned/profiles/{PROFILE}/tuned.conf\n" in install_list
    assert read_bundle(bundle).tuned_profile == PROFILE


@pytest.mark.parametrize(
    "os_args", [(), ("--os", "debian-12"), ("--os", "ubuntu-24.04"), ("--os", "rhel-9")]
)
def test_bundles_for_older_tuned_keep_etc_tuned(tmp_path: Path, os_args: tuple[str, ...]) -> None:
    bundle = bundle_for(tmp_path, *os_args)
    assert (bundle / f"rootfs/etc/tuned/{PROFILE}/tuned.conf").is_file()
    assert not (bundle / "rootfs/etc/tuned/profiles").exists()
    assert "tuned_dir" not in json.loads((bundle / "plan.json").read_text())


def test_the_table_says_what_its_tuned_reads() -> None:
    """debian-13's tuned is 2.25.1 (hardware_db/distros/debian-13.yaml): /etc/tuned/profiles."""
    assert load_distros()["debian-13"].tuned.profiles_dir == "/etc/tuned/profiles"
    assert load_distros()["debian-12"].tuned.profiles_dir == "/etc/tuned"
    # RHEL 10's documentation names /etc/tuned/profiles; RHEL 9's minors differ (2.20 to 2.27):
    # null, decided on the image by install.sh (tests/test_tuned_on_image.py)
    assert load_distros()["rhel-10"].tuned.profiles_dir == "/etc/tuned/profiles"
    assert load_distros()["rhel-9"].tuned.profiles_dir is None


@pytest.mark.parametrize("where", ["/etc/cron.d", "../../etc", "/etc/tuned/../cron.d", 7])
def test_a_plan_json_tuned_dir_tuned_does_not_read_is_refused(where: object) -> None:
    with pytest.raises(ValueError, match="tuned_dir"):
        plan_from_data({"format": 1, "tool": "goldtune", "settings": [], "tuned_dir": where})


def tuned_locates(tree: Path, rootfs: Path) -> str | None:
    """tuned's own Locator of that tree, over its CFG_DEF_PROFILE_DIRS (LOAD_DIRECTORIES up to
    2.22) re-rooted at ``rootfs``: the tuned.conf it would load for the bundle's profile (None:
    "Cannot find profile")."""
    python = shutil.which("python3", path="/usr/bin")
    if python is None or not (tree / "tuned/profiles/locator.py").is_file():
        missing_tool(MissingTool(f"tuned tree {tree} (tests/tools/install-tools.sh)"))
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); import tuned.consts as c; "
        "from tuned.profiles.locator import Locator; "
        "default = getattr(c, 'CFG_DEF_PROFILE_DIRS', None) or c.LOAD_DIRECTORIES; "
        "dirs = [sys.argv[2] + d for d in default]; "
        "print(Locator(dirs).get_config(sys.argv[3]))"
    )
    result = subprocess.run(
        [str(python), "-c", code, str(tree), str(rootfs), PROFILE],
        capture_output=True,
        text=True,
        check=True,
    )
    found = result.stdout.strip()
    return None if found == "None" else found


def test_tuned_2_25_finds_the_debian_13_profile_and_not_the_old_place(tmp_path: Path) -> None:
    """Debian 13's tuned (2.25.1, unpacked by install-tools.sh) loads the profile from the
    bundle's overlay as it would from the image; a bundle in the old place it does not find."""
    tree = TUNED_TREES / "2.25.1"
    new = bundle_for(tmp_path, "--os", "debian-13") / "rootfs"
    old = bundle_for(tmp_path, "--os", "debian-12") / "rootfs"
    assert tuned_locates(tree, new) == f"{new}/etc/tuned/profiles/{PROFILE}/tuned.conf"
    assert tuned_locates(tree, old) is None


def image(root: Path, files: dict[str, str]) -> Image:
    for path, text in {**files, "/usr/lib/tuned/functions": ""}.items():
        (root / path.lstrip("/")).parent.mkdir(parents=True, exist_ok=True)
        (root / path.lstrip("/")).write_text(text)
    return Image(root)


def test_verify_of_an_image_reads_the_profile_where_the_plan_put_it(tmp_path: Path) -> None:
    bundle = read_bundle(bundle_for(tmp_path, "--os", "debian-13"))
    setting = next(s for s in bundle.plan.settings if s.key == "cpu.governor")
    profile = f"[cpu]\ngovernor={setting.value}\n"
    active = {"/etc/tuned/active_profile": f"{PROFILE}\n"}
    placed = image(
        tmp_path / "placed", {**active, f"/etc/tuned/profiles/{PROFILE}/tuned.conf": profile}
    )
    stale = image(tmp_path / "stale", {**active, f"/etc/tuned/{PROFILE}/tuned.conf": profile})
    where = bundle.plan.tuned_dir
    assert check_tuned(setting, placed, PROFILE, where).verdict == Verdict.OK
    assert check_tuned(setting, stale, PROFILE, where).verdict != Verdict.OK


def test_the_tuned_validator_judges_the_profile_in_its_new_place(tmp_path: Path) -> None:
    """tests/validators loads the debian-13 bundle's profile with tuned 2.25.1's own loader: the
    real one passes, one with a section no plugin has fails (the check sees the new place)."""
    from tests.validators import tools

    tree = TUNED_TREES / "2.25.1"
    good = bundle_for(tmp_path, "--os", "debian-13")
    broken = tmp_path / "broken"
    shutil.copytree(good, broken)
    conf = broken / f"rootfs/etc/tuned/profiles/{PROFILE}/tuned.conf"
    conf.write_text(conf.read_text() + "\n[no_such_plugin]\nfoo=1\n")
    try:
        results = tools.check_tuned_many([good, broken], tree if tree.is_dir() else None)
    except MissingTool as missing:
        missing_tool(missing)
        raise
    assert results[good] == []
    assert any("no_such_plugin" in problem for problem in results[broken]), results[broken]
    assert all("rootfs/etc/tuned/profiles" in p for p in results[broken] if "/" in p)
