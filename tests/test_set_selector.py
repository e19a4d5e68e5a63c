"""The bundle set's selector (issue 44, its last read): what it runs, what it reads and writes,
and how it waits, each on a fake node (TEST_SYSROOT, as tests/test_bundle_set.py) or, for the
live path, in a chroot whose / is the fake node (tests/test_install.py's in_chroot).

- It runs the chosen member's install.sh with --no-block: inside the boot transaction a start it
  waited for (a unit ordered after nvidia-persistenced, which is ordered after the selector)
  would never come.
- A kept choice is one line of one member's name; anything else is judged again.
- Its files in node-exporter's and NFD's directories are written through a new temporary file,
  never a fixed name that another user could plant as a link.
- A member's preflight and install.sh are run only when checked as install.sh checks its
  install-lib.sh (regular, root's, not group/world-writable, the manifest's sha256).
- The chosen member's kernel arguments are judged at every boot, the kept choice's too; under
  TEST_SYSROOT a reboot is said, never done.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from test_bundle_set import SET_ROOT, SYSCTL, image_of, make_set, node, select, shapes
from test_install import in_chroot, needs_chroot, stub

__all__ = ["shapes"]  # the fixture, used by name

MEMBER = f"{SET_ROOT}/members/dgx"
KEPT = "var/lib/goldtune/set/selected"


@pytest.fixture(scope="module")
def set_dirs(shapes: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A set that forbids the reboot and one that allows it."""
    base = tmp_path_factory.mktemp("sets")
    return {
        "forbid": make_set(shapes, base / "forbid"),
        "allow": make_set(shapes, base / "allow", "--reboot-for-kernel-args"),
    }


@pytest.fixture(scope="module")
def images(set_dirs: dict[str, Path]) -> dict[str, Path]:
    return {
        policy: image_of(made, made.parent / f"{policy}-image") for policy, made in set_dirs.items()
    }


def fresh_image(images: dict[str, Path], policy: str, tmp_path: Path) -> Path:
    """A copy of the module's image, to tamper with."""
    copy = tmp_path / "image"
    shutil.copytree(images[policy], copy, symlinks=True)
    return copy


def keep(tree: Path, image: Path, name: str = "dgx") -> None:
    """The kept choice of ``name`` as the selector writes it: the name, and the sha256 of the
    member's manifest.json it applied."""
    (tree / KEPT).parent.mkdir(parents=True, exist_ok=True)
    (tree / KEPT).write_text(f"{name}\n")
    manifest = image / f"{SET_ROOT}/members/{name}/manifest.json"
    (tree / f"{KEPT}-bundle").write_text(hashlib.sha256(manifest.read_bytes()).hexdigest() + "\n")


def kernel_args(image: Path) -> list[str]:
    listed = (image / MEMBER / "install.list").read_text().splitlines()
    return [line.split("\t", 1)[1] for line in listed if line.startswith("kernel-arg\t")]


# --- 1. live, inside the boot transaction: no start is waited for ------------------------------


@needs_chroot
def test_live_the_members_install_queues_every_unit_job(
    set_dirs: dict[str, Path], tmp_path: Path
) -> None:
    """The selector live (no TEST_SYSROOT) in a chroot whose / is a DGX fake node with systemd
    'running': every systemctl call that starts, restarts or stops a unit carries --no-block."""
    root = node("dgx", tmp_path / "root")
    (root / "run/systemd/system").mkdir(parents=True)
    (root / "tmp").mkdir(exist_ok=True)
    # the chroot's /usr is the host's: the node's os-release in /etc, not a link into /usr
    os_release = (root / "usr/lib/os-release").read_bytes()
    (root / "etc/os-release").unlink()
    (root / "etc/os-release").write_bytes(os_release)
    shutil.copytree(set_dirs["forbid"], root / "tmp/set", symlinks=True)
    for name in ("sysctl", "systemd-tmpfiles", "udevadm", "tuned-adm", "update-grub"):
        stub(root, name)
    stub(root, "systemd-detect-virt", "exit 1\n")  # not a chroot, as far as install.sh can tell
    stub(root, "systemctl")
    out = in_chroot(
        root,
        "sh /tmp/set/install.sh --image-build >/dev/null 2>&1 || exit 9; : >/stub.log; "
        "sh /usr/lib/goldtune/select /usr/lib/goldtune/set 2>&1; echo status=$?",
    )
    assert out.rstrip().endswith("status=0"), out
    assert "goldtune: installing the dgx / training bundle into / (live system)" in out, out
    calls = [c for c in (root / "stub.log").read_text().splitlines() if c.startswith("systemctl")]
    jobs = [c for c in calls if "--now" in c or "restart" in c.split()]
    assert any("enable --now -- goldtune-gpu.service" in c for c in jobs), calls
    assert jobs and all(c.startswith("systemctl --no-block ") for c in jobs), jobs


# --- 2. the kept choice: exactly one member's name ----------------------------------------------


@pytest.mark.parametrize("kept", ["", "\n", "dgx l4\n", "l4\ndgx\n", "dgx\n\n"])
def test_a_kept_choice_of_not_one_member_name_is_judged_again(
    images: dict[str, Path], tmp_path: Path, kept: str
) -> None:
    tree = node("dgx", tmp_path / "node")
    (tree / KEPT).parent.mkdir(parents=True)
    (tree / KEPT).write_text(kept)
    status, output, _ = select(images["forbid"], tree, tmp_path)
    assert status == 0, output
    assert "selected names no one member of this set; judging again" in output
    assert (tree / "run/goldtune/selected").read_text() == "dgx\n"
    assert (tree / KEPT).read_text() == "dgx\n"
    assert (tree / SYSCTL).is_file()  # judged and applied


# --- 3. node-exporter's and NFD's directories: a new file, never a planted one -------------------


def test_the_published_files_never_follow_a_planted_link(
    images: dict[str, Path], tmp_path: Path
) -> None:
    tree = node("dgx", tmp_path / "node")
    textfiles = tree / "var/lib/prometheus/node-exporter"
    features = tree / "etc/kubernetes/node-feature-discovery/features.d"
    textfiles.mkdir(parents=True)
    features.mkdir(parents=True)
    victim = tmp_path / "victim"
    victim.write_text("theirs\n")
    (textfiles / "goldtune-set.prom.tmp").symlink_to(victim)  # the old fixed temporary's name
    (features / "goldtune-set.tmp").symlink_to(victim)
    (features / "goldtune-set").symlink_to(victim)  # the file itself: replaced, not followed
    status, output, _ = select(images["forbid"], tree, tmp_path)
    assert status == 0, output
    assert victim.read_text() == "theirs\n"
    assert 'goldtune_set_member{member="dgx"} 1' in (textfiles / "goldtune-set.prom").read_text()
    assert not (features / "goldtune-set").is_symlink()
    assert (features / "goldtune-set").read_text() == (
        "feature.node.kubernetes.io/goldtune-set-member=dgx\n"
    )
    assert oct((features / "goldtune-set").stat().st_mode & 0o777) == "0o644"
    left = sorted(p.name for d in (textfiles, features) for p in d.iterdir())
    assert left == [
        "goldtune-set",
        "goldtune-set.prom",
        "goldtune-set.prom.tmp",
        "goldtune-set.tmp",
    ]


def test_a_linked_directory_is_not_written_to(images: dict[str, Path], tmp_path: Path) -> None:
    tree = node("dgx", tmp_path / "node")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tree / "var/lib/prometheus").mkdir(parents=True)
    (tree / "var/lib/prometheus/node-exporter").symlink_to(elsewhere)
    status, output, _ = select(images["forbid"], tree, tmp_path)
    assert status == 0, output
    assert "goldtune-set.prom: not written (its directory is a link, or full)" in output
    assert list(elsewhere.iterdir()) == []


# --- 4. what it runs of a member is checked as install.sh checks install-lib.sh ------------------


def tamper(member: Path, how: str) -> str:
    """Spoil one file the selector runs; the words its line must say."""
    preflight = member / "rootfs/usr/lib/goldtune/preflight"
    if how == "link":
        copy = member.parent / "preflight-elsewhere"
        shutil.copy2(preflight, copy)
        preflight.unlink()
        preflight.symlink_to(copy)
        return f"{preflight}: not a regular file"
    if how == "owner":
        os.chown(preflight, 65534, 65534)
        return f"{preflight}: not owned by root"
    if how == "writable":
        preflight.chmod(0o775)
        return f"{preflight}: writable by its group or by others"
    install = member / "install.sh"
    install.write_text(install.read_text() + "# edited\n")
    return f"{install}: its sha256 is not the one {member}/manifest.json lists"


@pytest.mark.parametrize("how", ["link", "owner", "writable", "digest"])
def test_a_member_whose_scripts_fail_the_checks_is_refused(
    images: dict[str, Path], tmp_path: Path, how: str
) -> None:
    if how == "owner" and os.geteuid() != 0:
        pytest.skip("chown to another user needs root")
    image = fresh_image(images, "forbid", tmp_path)
    said = tamper(image / MEMBER, how)
    tree = node("dgx", tmp_path / "node")
    status, output, _ = select(image, tree, tmp_path)
    assert status == 1, output
    lines = [line for line in output.splitlines() if "member dgx" in line]
    assert lines == [f"goldtune-select: member dgx refused: {said}"], output
    assert "no member of the set matches this node; nothing machine-specific applied" in output
    assert not (tree / SYSCTL).exists()
    assert not (tree / KEPT).exists()


def test_a_manifest_that_is_a_link_refuses_the_member(
    images: dict[str, Path], tmp_path: Path
) -> None:
    image = fresh_image(images, "forbid", tmp_path)
    manifest = image / MEMBER / "manifest.json"
    copy = tmp_path / "manifest.json"
    shutil.copy2(manifest, copy)
    manifest.unlink()
    manifest.symlink_to(copy)
    tree = node("dgx", tmp_path / "node")
    status, output, _ = select(image, tree, tmp_path)
    assert status == 1, output
    assert f"member dgx refused: {manifest}: not a regular file" in output


# --- 5. kernel arguments: judged at every boot, a reboot never done under TEST_SYSROOT ------------


def test_after_the_one_reboot_arguments_still_missing_fail_and_no_second_reboot(
    images: dict[str, Path], tmp_path: Path
) -> None:
    tree = node("dgx", tmp_path / "node")
    status, output, calls = select(images["allow"], tree, tmp_path)
    assert status == 0, output
    assert "rebooting once so that the kernel arguments of member dgx take effect" in output
    # the next boot: the kept choice, the arguments still not on /proc/cmdline
    status, output, calls = select(images["allow"], tree, tmp_path)
    assert status == 1, output
    assert "kernel arguments of member dgx not in effect after the reboot:" in output
    assert "not rebooting again" in output
    assert "reboot" not in calls


def test_a_kept_choice_whose_arguments_are_in_effect_says_nothing_more(
    images: dict[str, Path], tmp_path: Path
) -> None:
    tree = node("dgx", tmp_path / "node")
    assert select(images["allow"], tree, tmp_path)[0] == 0
    cmdline = "BOOT_IMAGE=/vmlinuz root=/dev/sda1 ro " + " ".join(kernel_args(images["allow"]))
    (tree / "proc/cmdline").write_text(cmdline + "\n")
    status, output, _ = select(images["allow"], tree, tmp_path)
    assert status == 0, output
    assert output.splitlines() == ["goldtune-select: member dgx is this node's"]


def test_a_kept_choice_reboots_once_when_allowed_and_not_yet_rebooted(
    images: dict[str, Path], tmp_path: Path
) -> None:
    tree = node("dgx", tmp_path / "node")
    keep(tree, images["allow"])
    status, output, calls = select(images["allow"], tree, tmp_path)
    assert status == 0, output
    assert "rebooting once so that the kernel arguments of member dgx take effect" in output
    assert (tree / "var/lib/goldtune/set/rebooted").exists()
    assert "reboot" not in calls


def test_a_kept_choice_with_the_reboot_forbidden_says_the_next_boot(
    images: dict[str, Path], tmp_path: Path
) -> None:
    tree = node("dgx", tmp_path / "node")
    keep(tree, images["forbid"])
    status, output, _ = select(images["forbid"], tree, tmp_path)
    assert status == 0, output
    assert "take effect at the next boot:" in output
    assert "(the set forbids a reboot)" in output


def test_a_kernel_argument_with_a_glob_character_is_not_expanded(
    images: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    image = fresh_image(images, "forbid", tmp_path)
    listed = image / MEMBER / "install.list"
    before = hashlib.sha256(listed.read_bytes()).hexdigest()
    listed.write_text(listed.read_text() + "kernel-arg\tgoldtune.test=*\n")
    manifest = image / MEMBER / "manifest.json"  # the edit as the manifest's (the selector checks)
    after = hashlib.sha256(listed.read_bytes()).hexdigest()
    manifest.write_text(manifest.read_text().replace(before, after))
    tree = node("dgx", tmp_path / "node")
    keep(tree, image)
    workdir = tmp_path / "cwd"
    workdir.mkdir()
    (workdir / "goldtune.test=expanded").write_text("")
    monkeypatch.chdir(workdir)  # where `*` would expand
    status, output, _ = select(image, tree, tmp_path)
    assert status == 0, output
    assert " goldtune.test=* (the set forbids a reboot)" in output
    assert "expanded" not in output


def test_a_list_argument_merged_with_the_images_elements_is_in_effect(
    images: dict[str, Path], tmp_path: Path
) -> None:
    """install.sh puts the image's own elements of a list argument (modprobe.blacklist...) first
    and the bundle's after, in one word: the selector judges each element, as the image's boot
    check does, or it rebooted for nothing and failed at every boot after."""
    tree = node("dgx", tmp_path / "node")
    assert select(images["allow"], tree, tmp_path)[0] == 0
    merged = []
    for arg in kernel_args(images["allow"]):
        key, _, value = arg.partition("=")
        listed = key in ("modprobe.blacklist", "rd.driver.blacklist", "module_blacklist")
        merged.append(f"{key}=floppy,{value}" if listed else arg)
    assert merged != kernel_args(images["allow"])  # the DGX member has a list argument
    cmdline = "BOOT_IMAGE=/vmlinuz root=/dev/sda1 ro " + " ".join(merged)
    (tree / "proc/cmdline").write_text(cmdline + "\n")
    status, output, _ = select(images["allow"], tree, tmp_path)
    assert status == 0, output
    assert output.splitlines() == ["goldtune-select: member dgx is this node's"]
    # an element of the member's that is missing is still missing
    (tree / "proc/cmdline").write_text(cmdline.replace("floppy,nouveau", "floppy") + "\n")
    status, output, _ = select(images["allow"], tree, tmp_path)
    assert status == 1, output
    assert "not in effect after the reboot: modprobe.blacklist=nouveau" in output


@pytest.mark.parametrize("how", ["missing", "edited"])
def test_a_member_whose_claims_file_is_missing_or_edited_is_refused(
    images: dict[str, Path], tmp_path: Path, how: str
) -> None:
    """The member's preflight.conf is its claims: without it (or with claims of no one's) it
    matched any node, and a node of neither shape got its machine-specific settings."""
    image = fresh_image(images, "forbid", tmp_path)
    data = image / MEMBER / "rootfs/etc/goldtune/preflight.conf"
    if how == "missing":
        data.unlink()
        said = f"{data}: not a regular file"
    else:
        kept = [line for line in data.read_text().splitlines() if not line.startswith("claim\t")]
        data.write_text("\n".join(kept) + "\n")  # no claim left: every node matches
        said = f"{data}: its sha256 is not the one {image / MEMBER}/manifest.json lists"
    tree = node("gh200", tmp_path / "node")
    status, output, _ = select(image, tree, tmp_path)
    assert status == 1, output
    assert f"goldtune-select: member dgx refused: {said}" in output.splitlines(), output
    assert not (tree / SYSCTL).exists()
    assert not (tree / KEPT).exists()


def run_selector(image: Path, tree: Path) -> subprocess.CompletedProcess[str]:
    """The selector with a short timeout: a read of a FIFO would wait for ever."""
    return subprocess.run(
        ["sh", str(image / "usr/lib/goldtune/select"), str(image / SET_ROOT)],
        capture_output=True,
        text=True,
        check=False,
        env={"PATH": os.environ["PATH"], "TEST_SYSROOT": str(tree), "LC_ALL": "C"},
        timeout=60,
    )


def test_a_set_conf_that_is_no_regular_file_is_refused_not_waited_on(
    images: dict[str, Path], tmp_path: Path
) -> None:
    image = fresh_image(images, "forbid", tmp_path)
    conf = image / SET_ROOT / "set.conf"
    conf.unlink()
    os.mkfifo(conf)
    tree = node("dgx", tmp_path / "node")
    run = run_selector(image, tree)
    assert run.returncode == 2, run.stdout + run.stderr
    assert run.stdout.splitlines() == [f"select: {conf}: not a regular file; nothing applied"], (
        run.stdout
    )
    assert not (tree / SYSCTL).exists()


def test_a_kept_choices_install_list_is_checked_before_it_is_read(
    images: dict[str, Path], tmp_path: Path
) -> None:
    image = fresh_image(images, "forbid", tmp_path)
    listed = image / MEMBER / "install.list"
    listed.unlink()
    os.mkfifo(listed)
    tree = node("dgx", tmp_path / "node")
    keep(tree, image)
    run = run_selector(image, tree)
    assert run.returncode == 1, run.stdout + run.stderr
    assert run.stdout.splitlines()[-1] == (
        f"goldtune-select: member dgx: its kernel arguments not judged: {listed}: "
        "not a regular file"
    ), run.stdout


def test_the_reboot_marker_never_follows_a_planted_link(
    images: dict[str, Path], tmp_path: Path
) -> None:
    tree = node("dgx", tmp_path / "node")
    marker = tree / "var/lib/goldtune/set/rebooted"
    marker.parent.mkdir(parents=True)
    victim = tmp_path / "victim"
    marker.symlink_to(victim)  # dangling: -e says no marker, and `: >marker` wrote the victim
    keep(tree, images["allow"])  # the member applied at an earlier boot
    status, output, calls = select(images["allow"], tree, tmp_path)
    assert status == 1, output  # a marker, whatever it is: never a second reboot
    assert "reboot" not in calls
    assert "not in effect after the reboot:" in output
    assert not victim.exists()
    # none there: the marker is written as a new file renamed into place
    marker.unlink()
    status, output, _ = select(images["allow"], tree, tmp_path)
    assert status == 0, output
    assert "rebooting once so that the kernel arguments of member dgx take effect" in output
    assert marker.read_text() == "dgx\n"


def test_a_kept_choice_whose_member_changed_is_judged_and_applied_again(
    images: dict[str, Path], tmp_path: Path
) -> None:
    """A new set installed over a node that chose (live, or an image baked on a booted one): the
    kept name alone published the old choice and never applied the member's new bundle."""
    image = fresh_image(images, "forbid", tmp_path)
    tree = node("dgx", tmp_path / "node")
    assert select(image, tree, tmp_path)[0] == 0
    status, output, _ = select(image, tree, tmp_path)  # unchanged: published, nothing applied
    assert status == 0 and "applying member" not in output, output
    manifest = image / MEMBER / "manifest.json"
    manifest.write_text(manifest.read_text() + "\n")  # the member's bundle of a new set
    status, output, _ = select(image, tree, tmp_path)
    assert status == 0, output
    assert "member dgx's bundle is not the one applied" in output
    assert "goldtune-select: applying member dgx" in output
    assert (tree / KEPT).read_text() == "dgx\n"


def test_a_member_applied_again_gets_its_one_reboot_again(
    images: dict[str, Path], tmp_path: Path
) -> None:
    """The marker says the applied bundle's reboot was done: a new bundle of the member, applied,
    may reboot once for its arguments (the marker of the old one kept it failing every boot)."""
    image = fresh_image(images, "allow", tmp_path)
    tree = node("dgx", tmp_path / "node")
    status, output, _ = select(image, tree, tmp_path)
    assert status == 0 and "rebooting once" in output, output
    status, output, _ = select(image, tree, tmp_path)  # the same bundle: never a second reboot
    assert status == 1 and "not rebooting again" in output, output
    manifest = image / MEMBER / "manifest.json"
    manifest.write_text(manifest.read_text() + "\n")  # the member's bundle of a new set
    status, output, calls = select(image, tree, tmp_path)
    assert status == 0, output
    assert "goldtune-select: applying member dgx" in output
    assert "rebooting once so that the kernel arguments of member dgx take effect" in output
    assert "reboot" not in calls
    status, output, _ = select(image, tree, tmp_path)  # and then no more
    assert status == 1 and "not rebooting again" in output, output
