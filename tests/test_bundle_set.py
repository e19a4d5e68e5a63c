"""Bundle sets (issue 44): one image for several machine types, the member chosen on the node.

Two fake nodes (tests/detect_trees.py, as test_preflight builds them) give two hardware files; a
set of both is installed into an image directory as an image build, and its selector then runs
against each fake node (TEST_SYSROOT): each picks its own member and installs it, a third shape
picks none and gets nothing, with one line per member saying why."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from test_preflight import bind_driver, detected, dgx_tree

from generator.cli import main
from generator.paths import templates_dir
from tests import detect_trees as trees

SET_ROOT = "usr/lib/goldtune/set"
SELECT = "usr/lib/goldtune/select"
SYSCTL = "etc/sysctl.d/90-goldtune.conf"


@pytest.fixture(scope="module")
def shapes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The hardware files of two node shapes, named dgx and l4."""
    base = tmp_path_factory.mktemp("shapes")
    files = {}
    for name, tree in (
        ("dgx", dgx_tree(base / "dgx-tree")),
        ("l4", l4_tree(base / "l4-tree")),
    ):
        hardware = detected(tree)
        hardware["name"] = name
        files[name] = base / f"{name}.yaml"
        files[name].write_text(yaml.safe_dump(hardware))
    return files


def make_set(shapes: dict[str, Path], out: Path, *extra: str) -> Path:
    args = ["set", "--hw", str(shapes["dgx"]), "--hw", str(shapes["l4"]), "--profile", "training"]
    result = CliRunner().invoke(main, [*args, "-o", str(out), *extra])
    assert result.exit_code == 0, result.output
    return out


def image_of(set_dir: Path, image: Path) -> Path:
    image.mkdir()
    run = subprocess.run(
        ["sh", str(set_dir / "install.sh"), "--image-build", "--root", str(image)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    return image


def l4_tree(root: Path) -> Path:
    """The L4 tree with its NIC's driver bound, as the DGX tree has (test_preflight)."""
    tree = trees.l4_pcie().build(root)
    for net in sorted((tree / "sys/class/net").iterdir()):
        if (net / "device").exists():
            bind_driver((net / "device").resolve(), "bnxt_en")
    return tree


def node(name: str, root: Path) -> Path:
    """A fresh fake node of the shape ``name`` (dgx, l4, or gh200: neither member's)."""
    if name == "dgx":
        tree = dgx_tree(root)
    else:
        tree = l4_tree(root) if name == "l4" else trees.gh200().build(root)
    (tree / "proc").mkdir(exist_ok=True)
    (tree / "proc/cmdline").write_text("BOOT_IMAGE=/vmlinuz root=/dev/sda1 ro\n")
    return tree


def select(image: Path, tree: Path, tmp_path: Path) -> tuple[int, str, str]:
    """The image's selector on the fake node; a systemctl that only logs its arguments."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    log = tmp_path / "systemctl.log"
    fake = bin_dir / "systemctl"
    fake.write_text(f'#!/bin/sh\necho "$*" >>{log}\n')
    fake.chmod(0o755)
    env = {"PATH": f"{bin_dir}:{os.environ['PATH']}", "TEST_SYSROOT": str(tree), "LC_ALL": "C"}
    run = subprocess.run(
        ["sh", str(image / SELECT), str(image / SET_ROOT)],
        capture_output=True,
        text=True,
        check=False,
        env=env,
        timeout=300,
    )
    calls = log.read_text() if log.exists() else ""
    return run.returncode, run.stdout + run.stderr, calls


@pytest.fixture(scope="module")
def image(shapes: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("set")
    return image_of(make_set(shapes, base / "set"), base / "image")


def test_the_set_has_one_manifest_with_members_sizes_and_shared_files(
    shapes: dict[str, Path], tmp_path: Path
) -> None:
    made = make_set(shapes, tmp_path / "set")
    manifest = json.loads((made / "manifest.json").read_text())
    assert [m["name"] for m in manifest["members"]] == ["dgx", "l4"]
    assert all(m["inputs"]["hardware"]["sha256"] for m in manifest["members"])
    sizes = manifest["sizes"]
    assert sizes["stored_bytes"] < sizes["listed_bytes"]
    # the fixed preflight script is one file on disk, however many copies the set lists
    preflight = "rootfs/usr/lib/goldtune/preflight"
    inodes = {
        (made / "members" / f"{name}-training" / preflight).stat().st_ino for name in ("dgx", "l4")
    }
    assert len(inodes) == 1
    # a second run replaces the set
    make_set(shapes, tmp_path / "set")


def test_the_image_holds_the_set_and_nothing_machine_specific(image: Path) -> None:
    assert (image / "etc/systemd/system/goldtune-select.service").is_file()
    assert (
        image / "etc/systemd/system/multi-user.target.wants/goldtune-select.service"
    ).is_symlink()
    assert not (image / SYSCTL).exists()
    assert not (image / "etc/goldtune").exists()


@pytest.mark.parametrize("shape", ["dgx", "l4"])
def test_each_shape_picks_its_own_member_and_applies_it(
    image: Path, shape: str, tmp_path: Path
) -> None:
    tree = node(shape, tmp_path / "node")
    status, output, _ = select(image, tree, tmp_path)
    assert status == 0, output
    assert (tree / "run/goldtune/selected").read_text() == f"{shape}\n"
    assert (tree / "var/lib/goldtune/set/selected").read_text() == f"{shape}\n"
    assert f"goldtune-select: member {shape} matches" not in output  # said only when it fails
    assert f"member {shape} is this node's" in output
    member = image / SET_ROOT / "members" / shape / "rootfs" / SYSCTL
    assert (tree / SYSCTL).read_bytes() == member.read_bytes()
    # a later boot publishes the kept choice and judges nothing again
    (tree / "run/goldtune/selected").unlink()
    status, output, _ = select(image, tree, tmp_path)
    assert status == 0, output
    assert (tree / "run/goldtune/selected").read_text() == f"{shape}\n"
    assert "does not match" not in output


def test_a_shape_matching_no_member_fails_with_reasons_and_applies_nothing(
    image: Path, tmp_path: Path
) -> None:
    tree = node("gh200", tmp_path / "node")
    status, output, calls = select(image, tree, tmp_path)
    assert status == 1, output
    for member in ("dgx", "l4"):  # one line each: the first claim that differs, and the count
        lines = [line for line in output.splitlines() if f"member {member} does not" in line]
        assert len(lines) == 1, output
        assert "claims differ from this node)" in lines[0]
        assert ": the hardware file says " in lines[0]  # a claim, not a note of the preflight
    assert "no member of the set matches this node; nothing machine-specific applied" in output
    assert not (tree / SYSCTL).exists()
    assert not (tree / "etc/goldtune").exists()
    assert not (tree / "run/goldtune/selected").exists()
    assert not (tree / "var/lib/goldtune/set/selected").exists()
    assert "reboot" not in calls


@pytest.mark.parametrize("allowed", [False, True])
def test_the_kernel_arguments_reboot_is_the_sets_choice(
    shapes: dict[str, Path], tmp_path: Path, allowed: bool
) -> None:
    extra = ("--reboot-for-kernel-args",) if allowed else ()
    set_dir = make_set(shapes, tmp_path / "set", *extra)
    listed = (set_dir / "members/dgx-training/install.list").read_text()
    assert "\nkernel-arg\t" in listed  # the DGX member has kernel arguments to wait for
    image = image_of(set_dir, tmp_path / "image")
    tree = node("dgx", tmp_path / "node")
    status, output, calls = select(image, tree, tmp_path)
    assert status == 0, output
    assert "reboot" not in calls  # under TEST_SYSROOT a reboot is said, never done
    if allowed:
        assert "rebooting once so that the kernel arguments of member dgx take effect" in output
        assert "TEST_SYSROOT is set: not rebooting (systemctl --no-block reboot)" in output
        assert (tree / "var/lib/goldtune/set/rebooted").exists()
    else:
        assert "the set forbids a reboot" in output


def test_two_members_with_the_same_claims_are_refused(
    shapes: dict[str, Path], tmp_path: Path
) -> None:
    twin = tmp_path / "twin.yaml"
    hardware = yaml.safe_load(shapes["dgx"].read_text())
    hardware["name"] = "twin"
    twin.write_text(yaml.safe_dump(hardware))
    args = ["set", "--hw", str(shapes["dgx"]), "--hw", str(twin), "--profile", "training"]
    result = CliRunner().invoke(main, [*args, "-o", str(tmp_path / "out")])
    assert result.exit_code == 2
    assert "make the same claims: no node can tell them apart" in result.output
    assert not (tmp_path / "out").exists()


def test_a_set_holding_a_file_of_its_own_is_not_replaced(
    shapes: dict[str, Path], tmp_path: Path
) -> None:
    """As gen refuses to replace a bundle holding files its manifest does not list."""
    args = ["set", "--hw", str(shapes["dgx"]), "--hw", str(shapes["l4"]), "--profile", "training"]
    out = tmp_path / "out"
    assert CliRunner().invoke(main, [*args, "-o", str(out)]).exit_code == 0
    (out / "NOTES.txt").write_text("ours\n")
    result = CliRunner().invoke(main, [*args, "-o", str(out)])
    assert result.exit_code == 2
    assert "holds NOTES.txt, which its set manifest does not list" in result.output
    assert (out / "NOTES.txt").read_text() == "ours\n"


def test_verify_judges_the_member_the_node_chose(image: Path, tmp_path: Path) -> None:
    set_dir = image.parent / "set"
    tree = node("l4", tmp_path / "node")
    result = CliRunner().invoke(main, ["verify", str(set_dir), "--root", str(tree)])
    assert result.exit_code == 2
    assert "chose no member of it" in result.output
    status, output, _ = select(image, tree, tmp_path)
    assert status == 0, output
    chosen = CliRunner().invoke(main, ["verify", str(set_dir), "--root", str(tree), "--json"])
    member = CliRunner().invoke(
        main, ["verify", str(set_dir / "members/l4-training"), "--root", str(tree), "--json"]
    )
    assert chosen.output == member.output
    assert chosen.exit_code == member.exit_code


def snapshot_of(bundle: str, path: Path) -> Path:
    """A snapshot as a member's collector starts it: its meta bundle record names the bundle."""
    path.write_text(
        f"goldtune-snapshot\tbegin\t1\nmeta\tbundle\t{bundle}\ngoldtune-snapshot\tend\t1\n"
    )
    return path


def test_verify_of_a_snapshot_judges_the_member_whose_collector_took_it(
    image: Path, tmp_path: Path
) -> None:
    """The collector a node runs is its chosen member's; the snapshot's meta bundle names it."""
    set_dir = image.parent / "set"
    for name in ("dgx", "l4"):
        snapshot = snapshot_of(f"{name}_training", tmp_path / f"{name}.log")
        chosen = CliRunner().invoke(
            main, ["verify", str(set_dir), "--snapshot", str(snapshot), "--json"]
        )
        member = set_dir / f"members/{name}-training"
        alone = CliRunner().invoke(
            main, ["verify", str(member), "--snapshot", str(snapshot), "--json"]
        )
        assert json.loads(chosen.output)["bundle"] == str(member), chosen.output
        assert chosen.output == alone.output
    other = snapshot_of("dgx-h100_training", tmp_path / "other.log")
    refused = CliRunner().invoke(main, ["verify", str(set_dir), "--snapshot", str(other)])
    assert refused.exit_code == 2
    assert refused.output.count("\n") == 1, refused.output
    assert "names the bundle 'dgx-h100_training', which is no member of the set" in refused.output


def test_diff_refuses_a_set_with_one_line(image: Path) -> None:
    set_dir = image.parent / "set"
    result = CliRunner().invoke(main, ["diff", str(set_dir), str(set_dir / "members/l4-training")])
    assert result.exit_code == 2
    assert "is a bundle set; compare its members' bundles" in result.output
    members = CliRunner().invoke(
        main, ["diff", str(set_dir / "members/dgx-training"), str(set_dir / "members/l4-training")]
    )
    assert members.exit_code == 1


def test_the_selector_passes_shellcheck_and_names_no_tool() -> None:
    script = templates_dir() / "set" / "select"
    result = subprocess.run(
        ["shellcheck", "-s", "sh", str(script)], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout
    assert "goldtune" not in script.read_text()  # from set.conf, as the bundle's scripts


def test_a_set_conf_without_a_tool_line_is_refused(image: Path, tmp_path: Path) -> None:
    copy = tmp_path / "set"
    copy.mkdir()
    conf = (image / SET_ROOT / "set.conf").read_text()
    (copy / "set.conf").write_text(conf.replace("tool\tgoldtune\n", ""))
    run = subprocess.run(
        ["sh", str(image / SELECT), str(copy)], capture_output=True, text=True, check=False
    )
    assert run.returncode == 2
    assert "no tool line; nothing applied" in run.stdout


def test_the_fleet_gate_checks_the_members(shapes: dict[str, Path], image: Path) -> None:
    """members/ is laid out as `gen matrix` writes: its --check is the members' gate."""
    members = image.parent / "set" / "members"
    args = ["matrix", "--hw", str(shapes["dgx"]), "--hw", str(shapes["l4"]), "--profile"]
    result = CliRunner().invoke(main, [*args, "training", "--check", str(members)])
    assert result.exit_code == 0, result.output
    other = CliRunner().invoke(main, [*args, "inference", "--check", str(members)])
    assert other.exit_code == 1  # the members of another profile's set are not these
    whole = CliRunner().invoke(main, [*args, "training", "--check", str(members.parent)])
    assert whole.exit_code == 2
    assert "is a bundle set; check its members" in whole.output


def test_a_set_of_one_member_is_refused_and_nothing_written(
    shapes: dict[str, Path], tmp_path: Path
) -> None:
    args = ["set", "--hw", str(shapes["dgx"]), "--profile", "training"]
    result = CliRunner().invoke(main, [*args, "-o", str(tmp_path / "out")])
    assert result.exit_code == 2
    assert "gen set: --hw: 1 hardware files; a set has 2 to 8" in result.output
    assert not (tmp_path / "out").exists()


def test_the_set_reinstalls_unchanged_and_is_taken_back(
    shapes: dict[str, Path], tmp_path: Path
) -> None:
    set_dir = make_set(shapes, tmp_path / "set")
    image = image_of(set_dir, tmp_path / "image")
    command = ["sh", str(set_dir / "install.sh"), "--image-build", "--root", str(image)]
    again = subprocess.run(command, capture_output=True, text=True, check=False)
    assert again.returncode == 0, again.stdout + again.stderr
    assert " 0 written," in again.stdout and " 0 failed" in again.stdout
    command[2] = "--uninstall"
    gone = subprocess.run(command, capture_output=True, text=True, check=False)
    assert gone.returncode == 0, gone.stdout + gone.stderr
    assert [p for p in image.rglob("*") if not p.is_dir()] == []
    assert not (image / "usr/lib/goldtune").exists()  # no empty directory of the set's left
    assert not (image / "var/lib/goldtune").exists()


def claims_file(*claims: str) -> dict[str, tuple[bytes, int]]:
    """A member's rendered files with only its preflight data: these claim lines."""
    lines = ["log-as\tgoldtune-preflight", "result\t/run/goldtune/preflight", *claims]
    return {"rootfs/etc/goldtune/preflight.conf": (("\n".join(lines) + "\n").encode(), 0o644)}


@pytest.mark.parametrize(
    ("a", "b", "said"),
    [
        # the same claims, made into other settings: the same nodes match both
        (
            ("claim\tgpu.count\t8\tgpu:clocks", "claim\tcpu.sockets\t2\t-"),
            ("claim\tgpu.count\t8\tgpu:ecc", "claim\tcpu.sockets\t2\tsysctl:x"),
            "make the same claims: no node can tell them apart",
        ),
        # a's claims are among b's: a node of b's shape matches a too, and chooses neither
        (
            ("claim\tgpu.count\t8\t-",),
            ("claim\tgpu.count\t8\t-", "claim\tdisk/nvme1n1/present\tyes\t-"),
            "every node that matches member 'b' matches 'a' too",
        ),
    ],
)
def test_members_that_no_node_can_choose_between_are_refused(
    a: tuple[str, ...], b: tuple[str, ...], said: str
) -> None:
    from generator.bundle.bundle_set import check_distinguishable
    from generator.errors import InputError

    with pytest.raises(InputError) as raised:
        check_distinguishable({"a": claims_file(*a), "b": claims_file(*b)}, "gen set")
    assert said in str(raised.value.problems[0].message)
    # claims that differ in a value both make: each node matches one at most
    other = tuple(line.replace("\t8\t", "\t4\t") for line in b)
    check_distinguishable({"a": claims_file(*a), "b": claims_file(*other)}, "gen set")


@pytest.mark.parametrize("how", ["install", "uninstall"])
def test_the_sets_install_leaves_a_members_tuned_profile_selected(
    shapes: dict[str, Path], tmp_path: Path, how: str
) -> None:
    """The set carries no tuned profile and its record lists none: its install (again, over a
    node that applied a member) and its take-back leave the member's profile in tuned's
    selection, which they dropped while the member's files stayed (the kept choice never applied
    it again)."""
    set_dir = make_set(shapes, tmp_path / "set")
    image = image_of(set_dir, tmp_path / "image")
    (image / "usr/lib/tuned").mkdir(parents=True)
    selection = image / "etc/tuned/active_profile"
    selection.parent.mkdir(parents=True, exist_ok=True)
    selection.write_text("throughput-performance goldtune-training\n")  # the member's, applied
    args = ["--image-build", "--root", str(image)]
    if how == "uninstall":
        args = ["--uninstall", "--root", str(image)]
    run = subprocess.run(
        ["sh", str(set_dir / "install.sh"), *args], capture_output=True, text=True, check=False
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert selection.read_text() == "throughput-performance goldtune-training\n", run.stdout
