"""A bundle set's common part (`gen set --common`, issue 44): the sysctl.d, limits.d and
system.conf.d files every member carries the same go into the image with the set, in effect on
every node whichever member its selector chooses, or none; nothing else ever does."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from test_bundle_set import image_of, make_set, shapes

from generator.bundle.bundle_set import set_install_list
from generator.bundle.set_common import COMMON_KINDS, common_part, common_target, set_header

__all__ = ["shapes"]  # the fixture, used by name

LIMITS = "etc/security/limits.d"
SYSCTL = "etc/sysctl.d"
COMMON_LIMITS = f"{LIMITS}/89-goldtune-set.conf"
COMMON_SYSCTL = f"{SYSCTL}/89-goldtune-set.conf"


def header(name: str) -> bytes:
    return f"# goldtune bundle for {name} / training: kernel parameters.\n".encode()


def member(name: str, sysctl: bytes, mode: int = 0o644) -> dict[str, tuple[bytes, int]]:
    return {
        "rootfs/etc/sysctl.d/90-goldtune.conf": (header(name) + sysctl, mode),
        "rootfs/etc/modprobe.d/90-goldtune.conf": (header(name) + b"options x y=1\n", 0o644),
        "rootfs/usr/lib/goldtune/preflight": (b"#!/bin/sh\n", 0o755),
    }


def test_a_file_the_same_but_for_its_header_is_common_once() -> None:
    members = {"a": member("a", b"vm.swappiness = 10\n"), "b": member("b", b"vm.swappiness = 10\n")}
    [common] = common_part(members, "set-a+b")
    assert common.path == "/etc/sysctl.d/89-goldtune-set.conf"
    assert common.member_path == "/etc/sysctl.d/90-goldtune.conf"
    assert common.kind == "sysctl" and common.why == COMMON_KINDS["sysctl"]
    lines = common.content.decode().splitlines()
    assert lines[0] == "# goldtune bundle for set-a+b / training: kernel parameters."
    assert lines[1].startswith("# The set's common part: ")
    assert lines[2:] == ["vm.swappiness = 10"]
    # modprobe.d is the same too, but a vendor driver's options are never common


@pytest.mark.parametrize(
    "other",
    [
        member("b", b"vm.swappiness = 60\n"),  # another value
        member("b", b"vm.swappiness = 10\n", 0o600),  # another mode
        {k: v for k, v in member("b", b"").items() if "sysctl" not in k},  # no such file
        member("b", b"vm.swappiness = 10\n") | {"rootfs/etc/sysctl.d/90-goldtune.conf": (b"", 0)},
    ],
    ids=["value", "mode", "absent", "no-header"],
)
def test_a_file_that_differs_in_any_member_is_not_common(
    other: dict[str, tuple[bytes, int]],
) -> None:
    members = {"a": member("a", b"vm.swappiness = 10\n"), "b": other}
    assert common_part(members, "set-a+b") == []


def test_the_common_copy_is_named_before_the_members_file() -> None:
    """sysctl.d, limits.d and system.conf.d read files in name order, the later winning: a
    chosen member's own file (the same values) comes after, at a path only its record has."""
    assert common_target("/etc/sysctl.d/90-goldtune.conf") == "/etc/sysctl.d/89-goldtune-set.conf"
    assert "89-goldtune-set.conf" < "90-goldtune.conf"
    assert set_header(b"vm.swappiness = 10\n", "set-a+b") is None


def test_without_the_option_nothing_is_common(shapes: dict[str, Path], tmp_path: Path) -> None:
    made = make_set(shapes, tmp_path / "set")
    assert json.loads((made / "manifest.json").read_text())["common"] == []
    assert "89-goldtune-set" not in (made / "install.list").read_text()
    assert not list(made.glob("rootfs/etc/**/89-goldtune-set.conf"))


def test_the_common_part_is_in_the_image_and_outlives_a_members_uninstall(
    shapes: dict[str, Path], tmp_path: Path
) -> None:
    made = make_set(shapes, tmp_path / "set", "--common")
    manifest = json.loads((made / "manifest.json").read_text())
    common = {entry["path"]: entry for entry in manifest["common"]}
    # the two shapes' limits are the same; their sysctls differ (RAM, NICs): not common
    assert f"/{COMMON_LIMITS}" in common
    assert common[f"/{COMMON_LIMITS}"]["kind"] == "limit"
    assert f"/{COMMON_SYSCTL}" not in common
    listed = (made / "install.list").read_text()
    assert f"file\t0644\t/{COMMON_LIMITS}\n" in listed
    assert "# common: /etc/security/limits.d/90-goldtune.conf is the same in every member" in listed
    image = image_of(made, tmp_path / "image")
    installed = (image / COMMON_LIMITS).read_bytes()
    assert installed == (made / "rootfs" / COMMON_LIMITS).read_bytes()
    member_limits = (
        made / "members/dgx-training/rootfs" / LIMITS / "90-goldtune.conf"
    ).read_bytes()
    assert installed.split(b"\n", 2)[2] == member_limits.split(b"\n", 1)[1]
    # a member installed over it (as the selector does) puts its own file beside it, and the
    # member's uninstall leaves the set's
    member_install = image / "usr/lib/goldtune/set/members/dgx/install.sh"
    for action in ("--image-build", "--uninstall"):
        command = ["sh", str(member_install), action, "--root", str(image)]
        run = subprocess.run(command, capture_output=True, text=True, check=False)
        assert run.returncode == 0, run.stdout + run.stderr
        assert (image / COMMON_LIMITS).read_bytes() == installed
        if action == "--image-build":
            assert (image / LIMITS / "90-goldtune.conf").read_bytes() == member_limits
    assert not (image / LIMITS / "90-goldtune.conf").exists()
    # the set's uninstall takes it back
    command = ["sh", str(made / "install.sh"), "--uninstall", "--root", str(image)]
    gone = subprocess.run(command, capture_output=True, text=True, check=False)
    assert gone.returncode == 0, gone.stdout + gone.stderr
    assert not (image / COMMON_LIMITS).exists()


def test_a_common_sysctl_file_is_applied_by_a_live_install_of_the_set() -> None:
    """install.list's `step sysctl` (an image build defers it to the boot, which reads it)."""
    members = {"a": member("a", b"vm.swappiness = 10\n"), "b": member("b", b"vm.swappiness = 10\n")}
    common = common_part(members, "set-a+b")
    overlay = {entry.path: entry.mode for entry in common}
    listed = set_install_list("set-a+b", "training", overlay, common).decode()
    assert listed.endswith("step\tsysctl\n")
    assert (
        "# common: /etc/sysctl.d/90-goldtune.conf is the same in every member (sysctl: " in listed
    )
    assert "step\tsysctl" not in set_install_list("set-a+b", "training", {}, []).decode()
