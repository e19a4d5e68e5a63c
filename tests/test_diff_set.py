"""`gen diff SET SET` (issue 44): two bundle sets' members paired by name and diffed as two
bundles are, a member only in one set added or removed, the set's own choices compared; the
forms and exit status of `gen diff` of two bundles."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from test_bundle_set import make_set, shapes

from generator.cli import main

__all__ = ["shapes"]  # the fixture, used by name


def make(shapes: dict[str, Path], out: Path, profile: str = "training", *extra: str) -> Path:
    args = ["set", "--profile", profile, "-o", str(out), *extra]
    for path in shapes.values():
        args += ["--hw", str(path)]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    return out


@pytest.fixture(scope="module")
def sets(shapes: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """training: dgx + l4; again: the same; inference: its members' profile changed; renamed:
    l4 under another name (removed, and added as l4b); swapped: each shape under the other's
    name (other claims and settings); choices: --common and the reboot."""
    base = tmp_path_factory.mktemp("sets")
    renamed = named(shapes["l4"], "l4b", base)
    swapped = {"dgx": named(shapes["l4"], "dgx", base), "l4": named(shapes["dgx"], "l4", base)}
    return {
        "swapped": make(swapped, base / "swapped"),
        "training": make_set(shapes, base / "training"),
        "again": make_set(shapes, base / "again"),
        "inference": make(shapes, base / "inference", "inference"),
        "renamed": make({"dgx": shapes["dgx"], "l4b": renamed}, base / "renamed"),
        "choices": make_set(shapes, base / "choices", "--common", "--reboot-for-kernel-args"),
    }


def named(hardware: Path, name: str, base: Path) -> Path:
    """``hardware`` as the hardware file of a machine called ``name``."""
    path = base / f"{name}-{hardware.stem}.yaml"
    path.write_text(yaml.safe_dump(yaml.safe_load(hardware.read_text()) | {"name": name}))
    return path


def diff(old: Path, new: Path, *extra: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["diff", str(old), str(new), *extra])
    return result.exit_code, result.output


def test_two_sets_of_the_same_members_are_the_same(sets: dict[str, Path]) -> None:
    status, output = diff(sets["training"], sets["again"])
    assert (status, output) == (0, "")
    status, output = diff(sets["training"], sets["again"], "--format", "json")
    assert status == 0
    data = json.loads(output)
    assert data["same"] is True
    assert [(m["name"], m["status"]) for m in data["members"]] == [("dgx", "same"), ("l4", "same")]


def test_members_are_diffed_pairwise_by_name(sets: dict[str, Path]) -> None:
    status, output = diff(sets["training"], sets["inference"], "--format", "json")
    assert status == 1
    data = json.loads(output)
    assert data["summary"]["members"]["changed"] == 2
    for member in data["members"]:
        assert member["status"] == "changed"
        old, new = member["diff"]["old"], member["diff"]["new"]
        assert old.endswith(f"/members/{member['name']}-training")
        assert new.endswith(f"/members/{member['name']}-inference")
        assert sum(member["diff"]["summary"]["settings"].values()) > 0
    status, text = diff(sets["training"], sets["inference"])
    assert status == 1
    assert "Members: 2 changed." in text
    assert "member dgx: changed" in text and "member l4: changed" in text
    assert "On the node: " in text


def test_no_claims_leaves_every_members_claim_rows_out(sets: dict[str, Path]) -> None:
    """Each member of the swapped set is the other shape: its claims differ as its settings."""

    def kinds(*extra: str) -> set[str]:
        status, output = diff(sets["training"], sets["swapped"], "--format", "json", *extra)
        assert status == 1
        members = json.loads(output)["members"]
        return {c["kind"] for m in members for c in m["diff"]["changes"]}

    assert "claim" in kinds()
    without = kinds("--no-claims")
    assert without and "claim" not in without
    status, text = diff(sets["training"], sets["swapped"], "--no-claims")
    assert status == 1
    assert text.count("left out (--no-claims)") == 2  # each member's summary counts them


def test_a_member_only_in_one_set_is_added_or_removed(sets: dict[str, Path]) -> None:
    status, output = diff(sets["training"], sets["renamed"], "--format", "json")
    assert status == 1
    data = json.loads(output)
    statuses = [(m["name"], m["status"], m["diff"] is None) for m in data["members"]]
    assert statuses == [("dgx", "same", False), ("l4", "removed", True), ("l4b", "added", True)]
    _, text = diff(sets["training"], sets["renamed"])
    assert "Members: 1 added (l4b), 1 removed (l4), 1 same." in text
    _, markdown = diff(sets["training"], sets["renamed"], "--format", "markdown")
    assert markdown.startswith("## goldtune diff of bundle sets: ")
    assert "- member `l4b`: added" in markdown and "- member `l4`: removed" in markdown


def test_the_sets_own_choices_are_compared(sets: dict[str, Path]) -> None:
    status, output = diff(sets["training"], sets["choices"], "--format", "json")
    assert status == 1
    data = json.loads(output)
    assert {m["status"] for m in data["members"]} == {"same"}
    assert "kernel-arguments reboot: forbid -> allow" in data["set"]
    assert "common part: /etc/security/limits.d/89-goldtune-set.conf added" in data["set"]
    _, text = diff(sets["choices"], sets["training"])
    assert "Set: common part: /etc/security/limits.d/89-goldtune-set.conf removed" in text


def test_a_tampered_member_is_refused(sets: dict[str, Path], tmp_path: Path) -> None:
    import shutil

    copy = tmp_path / "set"
    shutil.copytree(sets["training"], copy)
    sysctl = copy / "members/l4-training/rootfs/etc/sysctl.d/90-goldtune.conf"
    sysctl.unlink()  # a hard link of the image copy: replaced, not written through
    sysctl.write_text("vm.swappiness = 1\n")
    status, output = diff(sets["training"], copy)
    assert status == 2
    assert "members/l4-training/rootfs/etc/sysctl.d/90-goldtune.conf: does not match" in output
    # the image's copy of a member file, which no member's manifest covers
    sysctl.unlink()
    shutil.copy(
        sets["training"] / "members/l4-training/rootfs/etc/sysctl.d/90-goldtune.conf", sysctl
    )
    image_copy = (
        copy / "rootfs/usr/lib/goldtune/set/members/l4/rootfs/etc/sysctl.d/90-goldtune.conf"
    )
    image_copy.unlink()
    image_copy.write_text("vm.swappiness = 1\n")
    status, output = diff(sets["training"], copy)
    assert status == 2
    assert "set/members/l4/rootfs/etc/sysctl.d/90-goldtune.conf: does not match the set's" in output
    image_copy.unlink()
    shutil.copy(sysctl, image_copy)
    assert diff(sets["training"], copy)[0] == 0
    shutil.rmtree(copy / "members/dgx-training")
    status, output = diff(sets["training"], copy)
    assert status == 2
    assert "member dgx's bundle is not a directory of the set" in output


def test_a_manifest_pairing_a_member_with_another_members_bundle_is_refused(
    sets: dict[str, Path], tmp_path: Path
) -> None:
    """The set's manifest names each member's review copy (members/<hardware>-<profile>); one
    that names another member's shows, and gen verify judges, what that member's nodes never
    get: a member's review copy must be its image copy, file by file (the set's manifest's
    digests, which check_set_intact holds the files to)."""
    import shutil

    copy = tmp_path / "set"
    shutil.copytree(sets["training"], copy, symlinks=True)
    manifest = copy / "manifest.json"
    data = json.loads(manifest.read_text())
    first, second = data["members"][0], data["members"][1]
    first["bundle"], second["bundle"] = second["bundle"], first["bundle"]
    manifest.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    status, output = diff(sets["training"], copy)
    assert status == 2, output
    assert "is not the image copy of member dgx" in output, output
