"""The cloud-init path does what install.sh does (issue 16): what an earlier bundle installed and
this one lacks removed with install.sh's record, tuned layered on the image's
selection with the previous one recorded, boot arguments added and removed per mechanism with
install.sh's own record, /etc/kernel/cmdline for kernels installed later.

The user-data's last runcmd line runs its first-boot script (generator/render/firstboot.py),
made of install.sh's functions. Here both run as cloud-init runs them, in a root of their own
(chroot, private mount namespace, the host's /usr read-only), with recording stubs for the live
tools: nothing touches this host's boot loader, units or tuned.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
import yaml
from test_install import (
    INFERENCE,
    RHEL_OPTIONS,
    THEIRS,
    TRAINING,
    TUNED_OFF,
    entry_options,
    in_chroot,
    make_bin,
    needs_chroot,
    rhel_root,
    run,
    stub,
)

from generator.bundle.write import write_bundle
from generator.model import layout
from generator.model.setting import Plan
from generator.render.cloudinit import FIRST_BOOT_SUMMARY
from generator.render.firstboot import PROLOGUE, first_boot_parts, first_boot_words, library_form
from generator.render.overlay import Step, kernel_cmdline, overlay_files
from generator.render.render import render_bundle

INSTALL_SH = Path(__file__).resolve().parent.parent / "templates/scripts/install.sh"
INSTALL_LIB = INSTALL_SH.with_name("install-lib.sh")
# Debian 12's containerd 1.6 config.toml (tests/test_wiring.py), without and with the import;
# the roots' containerd (the host's /usr) reads the latter unless a test says otherwise.
DEBIAN_CONTAINERD = (
    'version = 2\n[plugins."io.containerd.grpc.v1.cri".cni]\nbin_dir = "/usr/lib/cni"\n'
)
IMPORTING = 'version = 2\nimports = ["/etc/containerd/conf.d/*.toml"]\n'


def user_data(plan: Plan) -> dict:
    return yaml.safe_load(render_bundle(plan)["cloud-init/user-data"][0])


def first_boot(root: Path, plan: Plan, binds: tuple[tuple[str, str], ...] = ()) -> str:
    """Write the user-data's first-boot script where cloud-init writes it and run its runcmd
    line in ``root`` (``binds``: in_chroot's); the output."""
    config = user_data(plan)
    # the script and the files it installs (layout.FIRST_BOOT_BUNDLE), as write_files leaves them
    # and containerd's drop-in, which the script checks containerd reads
    ours = [
        e
        for e in config["write_files"]
        if e["path"].startswith(layout.FIRST_BOOT_BUNDLE) or e["path"] == layout.CONTAINERD_DROPIN
    ]
    assert layout.FIRST_BOOT_SCRIPT in [entry["path"] for entry in ours]
    for entry in ours:
        written = root / entry["path"].lstrip("/")
        written.parent.mkdir(parents=True, exist_ok=True)
        written.write_text(entry["content"])
    command = config["runcmd"][-1]
    assert layout.FIRST_BOOT_SCRIPT in command
    return in_chroot(root, command, binds)


def live_root(root: Path, tuned_running: bool = True) -> Path:
    """A root that looks live to install.sh's functions, its live tools recording stubs."""
    (root / "run/systemd/system").mkdir(parents=True, exist_ok=True)
    (root / "tmp").mkdir(exist_ok=True)
    (root / "etc/containerd").mkdir(parents=True, exist_ok=True)
    (root / "etc/containerd/config.toml").write_text(IMPORTING)
    # the activation steps' tools too: sysctl --system in a chroot would set this host's kernel
    for name in ("grubby", "tuned-adm", "update-grub", "sysctl", "systemd-tmpfiles", "udevadm"):
        stub(root, name)
    active = 0 if tuned_running else 3
    stub(
        root,
        "systemctl",
        f'case "$*" in *"is-active --quiet tuned.service") exit {active} ;; esac\nexit 0\n',
    )
    (root / "proc").mkdir(exist_ok=True)
    (root / "proc/cmdline").write_text("root=/dev/vda1 ro\n")  # no procfs in the chroot
    return root


def calls(root: Path, tool: str) -> list[str]:
    log = root / "stub.log"
    lines = log.read_text().splitlines() if log.exists() else []
    return [line for line in lines if line.startswith(f"{tool} ")]


@needs_chroot
def test_cloud_init_adds_and_removes_bls_arguments_and_layers_tuned(tmp_path: Path) -> None:
    """RHEL 9 (BLS, tuned on throughput-performance), inference -> training -> inference, each
    first boot by the user-data alone: grubby is asked to remove what the previous bundle added,
    /etc/kernel/cmdline follows, tuned is layered and the selection before us is recorded."""
    root = live_root(rhel_root(tmp_path / "rhel", with_tuned_files=False))
    for plan in (INFERENCE, TRAINING, INFERENCE):
        out = first_boot(root, plan)
        assert "done:" in out and " 0 failed" in out, out
        assert (root / "etc/tuned/active_profile").read_text() == (
            f"throughput-performance goldtune-{plan.profile_name}\n"
        )
    inference, training = kernel_cmdline(INFERENCE), kernel_cmdline(TRAINING)
    assert calls(root, "grubby") == [
        f"grubby --update-kernel=ALL --args={inference}",
        f"grubby --update-kernel=ALL --args={training} --remove-args=intel_idle.max_cstate=1",
        f"grubby --update-kernel=ALL --args={inference} --remove-args=iommu=pt",
    ]
    assert calls(root, "tuned-adm") == [
        f"tuned-adm profile throughput-performance goldtune-{name}"
        for name in ("inference", "training", "inference")
    ]
    assert not calls(root, "update-grub")
    assert (root / "etc/kernel/cmdline").read_text() == f"{RHEL_OPTIONS} {inference}\n"
    assert (root / "var/lib/goldtune/kernel-args").read_text().split() == inference.split()
    assert (root / "var/lib/goldtune/tuned-previous").read_text() == "throughput-performance\n"
    assert (root / "etc/tuned/profile_mode").read_text() == "manual\n"


@needs_chroot
def test_first_boot_removes_what_the_image_build_added(tmp_path: Path) -> None:
    """One record for both paths: an image baked by install.sh with the inference bundle, first
    booted with the training bundle's user-data, loses inference's C-state argument."""
    root = rhel_root(tmp_path / "rhel", with_tuned_files=False)
    bundle = write_bundle(render_bundle(INFERENCE), tmp_path / "inference")
    baked = run(bundle / "install.sh", "--root", str(root), path=make_bin(tmp_path, {}))
    assert baked.returncode == 0, baked.stdout + baked.stderr
    assert "intel_idle.max_cstate=1" in entry_options(root)[0]
    out = first_boot(live_root(root), TRAINING)
    assert "remove 'intel_idle.max_cstate=1'" in out, out
    assert calls(root, "grubby") == [
        f"grubby --update-kernel=ALL --args={kernel_cmdline(TRAINING)} "
        "--remove-args=intel_idle.max_cstate=1"
    ]
    assert (root / "etc/kernel/cmdline").read_text() == (
        f"{RHEL_OPTIONS} {kernel_cmdline(TRAINING)}\n"
    )
    assert (root / "etc/tuned/active_profile").read_text() == (
        "throughput-performance goldtune-training\n"
    )


@needs_chroot
def test_a_first_boot_without_tuned_takes_ours_out_of_the_selection(tmp_path: Path) -> None:
    """The first boot of a tuned: off bundle after a layered one (same system): the record
    removes goldtune-inference's profile, and tuned_layer takes it out of the selection too
    (tuned refuses a selection naming a missing profile), keeping the image's profile."""
    root = live_root(rhel_root(tmp_path / "rhel", with_tuned_files=False))
    profile = "/etc/tuned/goldtune-inference/tuned.conf"
    for plan in (INFERENCE, TUNED_OFF):
        out = first_boot(root, plan)
        assert "done:" in out and " 0 failed" in out, out
        # the profile as write_files leaves it (first_boot writes only the script's files)
        for entry in user_data(plan)["write_files"]:
            if entry["path"] == profile:
                (root / profile.lstrip("/")).parent.mkdir(parents=True)
                (root / profile.lstrip("/")).write_text(entry["content"])
    assert "removed /etc/tuned/goldtune-inference/tuned.conf (no longer in the bundle)" in out, out
    assert (root / "etc/tuned/active_profile").read_text() == "throughput-performance\n"
    assert calls(root, "tuned-adm") == [
        "tuned-adm profile throughput-performance goldtune-inference",
        "tuned-adm profile throughput-performance",
    ]
    assert not (root / "var/lib/goldtune/tuned-previous").exists()


@needs_chroot
def test_first_boot_puts_the_tuned_profile_where_tuned_2_23_and_later_reads_it(
    tmp_path: Path,
) -> None:
    """A portable bundle's user-data on an image whose tuned is 2.23 or later (its own profiles
    in /usr/lib/tuned/profiles: RHEL 9.5+, RHEL 10, trixie): the profile goes to
    /etc/tuned/profiles (install-lib.sh tuned_place), the record says so, the selection names it.
    The host's /usr is bookworm's (tuned 2.20): a directory of 2.23's layout is bound over it."""
    system = tmp_path / "usr-lib-tuned"
    (system / "profiles/balanced").mkdir(parents=True)
    root = live_root(rhel_root(tmp_path / "rhel", with_tuned_files=False))
    out = first_boot(root, INFERENCE, ((str(system), "usr/lib/tuned"),))
    placed = "/etc/tuned/profiles/goldtune-inference/tuned.conf"
    assert f"/etc/tuned/goldtune-inference/tuned.conf goes to {placed}" in out, out
    assert (root / placed.lstrip("/")).is_file()
    assert not (root / "etc/tuned/goldtune-inference").exists()
    record = (root / layout.INSTALL_RECORD.lstrip("/")).read_text().splitlines()
    assert placed in record and "/etc/tuned/goldtune-inference/tuned.conf" not in record
    assert calls(root, "tuned-adm") == [
        "tuned-adm profile throughput-performance goldtune-inference"
    ]


def record_of(plan: Plan) -> str:
    """The install record install.sh writes for this plan's bundle: its overlay's targets."""
    return "".join(f"{item.target}\n" for item in overlay_files(render_bundle(plan)))


@needs_chroot
def test_first_boot_removes_the_files_an_earlier_bundle_installed(tmp_path: Path) -> None:
    """An image baked by install.sh with the inference bundle, first booted with the training
    bundle's user-data: inference's tuned profile and a unit only an earlier bundle had are
    removed (the unit disabled first), the record becomes training's, and a later install.sh of
    training agrees (removes nothing, rewrites no record)."""
    root = rhel_root(tmp_path / "rhel", with_tuned_files=False)
    inference = write_bundle(render_bundle(INFERENCE), tmp_path / "inference")
    baked = run(inference / "install.sh", "--root", str(root), path=make_bin(tmp_path, {}))
    assert baked.returncode == 0, baked.stdout + baked.stderr
    stale_profile = root / "etc/tuned/goldtune-inference/tuned.conf"
    assert stale_profile.is_file()
    record = root / layout.INSTALL_RECORD.lstrip("/")
    old_unit = "/etc/systemd/system/goldtune-old.service"
    (root / old_unit.lstrip("/")).write_text("[Service]\nExecStart=/bin/true\n")
    record.write_text(record.read_text() + old_unit + "\n")
    out = first_boot(live_root(root), TRAINING)
    assert "removed /etc/tuned/goldtune-inference/tuned.conf (no longer in the bundle)" in out, out
    assert not stale_profile.exists() and not (root / old_unit.lstrip("/")).exists()
    systemctl = calls(root, "systemctl")
    assert "systemctl --quiet disable --now -- goldtune-old.service" in systemctl
    assert systemctl.index("systemctl daemon-reload") > systemctl.index(
        "systemctl --quiet disable --now -- goldtune-old.service"
    )
    assert record.read_text() == record_of(TRAINING)
    training = write_bundle(render_bundle(TRAINING), tmp_path / "training")
    again = run(training / "install.sh", "--root", str(root), path=make_bin(tmp_path, {}, "bin2"))
    assert "removed " not in again.stdout, again.stdout
    assert f"unchanged {layout.INSTALL_RECORD}" in again.stdout, again.stdout


@needs_chroot
def test_first_boot_merges_daemon_json_into_the_one_in_place(tmp_path: Path) -> None:
    """write_files puts the bundle's daemon.json beside the script; the script merges it into
    the image's with install.sh's install_file (the bundle's keys win, the image's others stay);
    nothing else writes /etc/docker/daemon.json."""
    root = live_root(tmp_path / "debian")
    (root / "etc/docker").mkdir(parents=True)
    (root / "etc/docker/daemon.json").write_text(json.dumps(THEIRS))
    assert layout.DOCKER_DAEMON_JSON not in [e["path"] for e in user_data(INFERENCE)["write_files"]]
    out = first_boot(root, INFERENCE)
    assert "merging the bundle's keys into /etc/docker/daemon.json" in out, out
    merged = json.loads((root / "etc/docker/daemon.json").read_text())
    assert merged["default-runtime"] == "nvidia"
    assert merged["log-driver"] == "journald"
    assert merged["registry-mirrors"] == THEIRS["registry-mirrors"]
    assert merged["runtimes"]["kata"] == THEIRS["runtimes"]["kata"]
    assert " 0 failed" in out, out


@needs_chroot
def test_a_vendor_selection_is_kept_under_ours_when_tuned_is_not_running(tmp_path: Path) -> None:
    """Debian-like (GRUB drop-in): an image with NVIDIA's profile selected and tuned not yet
    started keeps it as the base; tuned loads the layered selection when it starts."""
    root = tmp_path / "debian"
    (root / "etc/tuned").mkdir(parents=True)
    (root / "etc/tuned/active_profile").write_text("nvidia-h100-inference\n")
    (root / "etc/tuned/profile_mode").write_text("auto\n")
    live_root(root, tuned_running=False)
    out = first_boot(root, INFERENCE)
    assert "tuned is not running; it loads the profiles when it starts" in out, out
    assert (root / "etc/tuned/active_profile").read_text() == (
        "nvidia-h100-inference goldtune-inference\n"
    )
    assert (root / "var/lib/goldtune/tuned-previous").read_text() == "nvidia-h100-inference\n"
    assert not calls(root, "tuned-adm") and not calls(root, "grubby")
    assert calls(root, "update-grub") == ["update-grub "]


@needs_chroot
@pytest.mark.parametrize(("running", "pending"), [("", True), (" {args}", False)])
def test_the_marker_says_when_the_running_kernel_lacks_an_argument(
    tmp_path: Path, running: str, pending: bool
) -> None:
    """power_state (gen --cloud-init-reboot) reboots on the marker: written once the boot loader
    took the arguments and /proc/cmdline lacks one of them."""
    root = live_root(tmp_path / "debian")
    args = kernel_cmdline(INFERENCE)
    (root / "proc/cmdline").write_text(f"root=/dev/vda1 ro{running.format(args=args)}\n")
    first_boot(root, INFERENCE)
    assert (root / layout.REBOOT_MARKER.lstrip("/")).exists() is pending


@needs_chroot
def test_no_marker_when_no_boot_loader_took_the_arguments(tmp_path: Path) -> None:
    """BLS without grubby: a reboot would not bring the arguments in; the failure is said."""
    root = live_root(rhel_root(tmp_path / "rhel", with_tuned_files=False))
    (root / "stub/grubby").unlink()
    out = first_boot(root, INFERENCE)
    assert "there is no grubby" in out and " 1 failed" in out, out
    assert f"{FIRST_BOOT_SUMMARY}: failed" in out
    assert not (root / layout.REBOOT_MARKER.lstrip("/")).exists()


# --- the script calls install-lib.sh's functions ------------------------------------------------

# Functions install-lib.sh calls that install.sh defines: reached only for an image (live=no),
# or by install_file for a file the first boot never installs with it (nccl.conf, rccl.conf,
# containerd's drop-in). The library's header names them; the chroot runs above prove the live
# path reaches none of them.
INSTALL_SH_ONLY = {
    "service_offline",
    "image_mechanism",
    "boot_bootc",
    "boot_image_grub",
    "boot_check_unit",
    "edit_bls_entry",
    "edit_grub_default",
    "merge_nccl_conf",
    "carry_image_cri",
}


def defined_functions(script: str) -> set[str]:
    return set(re.findall(r"^([a-z_][a-z0-9_]*)\(\) \{", script, re.MULTILINE))


def test_the_library_calls_install_sh_only_where_an_image_is_the_target() -> None:
    """install-lib.sh stands alone for a live run: every function of install.sh it names is
    one of INSTALL_SH_ONLY, and its header says which."""
    library = INSTALL_LIB.read_text()
    ours = defined_functions(library)
    theirs = defined_functions(INSTALL_SH.read_text())
    assert not ours & theirs  # one definition of each
    named = {name for name in theirs if re.search(rf"(?<![\w-]){name}(?![\w-])", library)}
    assert named == INSTALL_SH_ONLY
    header = library.split("\n\n", 1)[0]
    assert all(name in header for name in INSTALL_SH_ONLY)


def test_the_script_sources_the_library_and_calls_install_sh_phases_in_order() -> None:
    """install.sh's prologue, the library, the plan's words, then install.sh's live run as
    calls: the record, the units and steps (install.list's), tuned, the boot arguments."""
    words = first_boot_words("iommu=pt", "goldtune-inference")
    steps = [Step("reload"), Step("disable", "irqbalance.service"), Step("sysctl")]
    parts = first_boot_parts(INSTALL_LIB.read_text(), words, "", steps=steps)
    assert parts.library == library_form(INSTALL_LIB.read_text())
    assert parts.script.startswith(PROLOGUE + f". {layout.FIRST_BOOT_LIB}\n")
    assert "kernel_args='iommu=pt'" in parts.script
    assert "tuned_profile='goldtune-inference'" in parts.script
    calls = parts.script.split("\ndeferred=''\n", 1)[1].splitlines()  # after the words
    assert calls == [
        'remove_stale_files "$installed_paths"',
        'write_text "$record" "$installed_paths"',
        "run_step reload",
        "service disable 'irqbalance.service'",
        "run_step sysctl",
        "tuned_layer",
        "failed_before_boot=$failed",
        "boot_arguments",
        'say "done: $installed written, $unchanged unchanged, $skipped skipped, $failed failed"',
        '[ "$failed" -eq 0 ]',
    ]


def test_install_sh_without_its_library_says_the_bundle_is_incomplete(tmp_path: Path) -> None:
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    (bundle / "install.sh").write_bytes(INSTALL_SH.read_bytes())
    result = subprocess.run(
        ["sh", str(bundle / "install.sh"), "--check"], capture_output=True, text=True, check=False
    )
    assert result.returncode == 2
    assert result.stderr == "install.sh: error: bundle is incomplete: install-lib.sh is missing\n"


def test_the_first_boot_refuses_to_stage_nccl_conf() -> None:
    """install_file's nccl.conf branch needs install.sh's merge_nccl_conf: asking the first
    boot to stage nccl.conf is refused rather than run without its merge."""
    from generator.errors import GenerationError

    words = first_boot_words("", "")
    with pytest.raises(GenerationError, match=r"nccl\.conf"):
        first_boot_parts(INSTALL_LIB.read_text(), words, "", [("0644", layout.NCCL_CONF)])


@needs_chroot
@pytest.mark.parametrize(("config", "read"), [(DEBIAN_CONTAINERD, False), (IMPORTING, True)])
def test_the_first_boot_fails_loudly_where_containerd_does_not_read_the_drop_in(
    tmp_path: Path, config: str, read: bool
) -> None:
    """cloud-init writes the containerd drop-in but cannot wire config.toml's imports (no room
    in EC2's 16 KB): the first boot asks the real containerd (the host's, through the chroot's
    /usr) what it loaded and fails, named, where that is not the drop-in; fails on main, which
    said nothing and left every pod without the NVIDIA runtime on containerd < 2.2."""
    if not Path("/usr/bin/containerd").exists():
        pytest.skip("Debian's containerd is not installed here (tests/tools/install-tools.sh)")
    root = live_root(tmp_path / "debian")
    (root / "etc/containerd/conf.d").mkdir(parents=True)
    (root / "etc/containerd/config.toml").write_text(config)  # over live_root's
    out = first_boot(root, INFERENCE)
    unread = f"containerd: {layout.CONTAINERD_DROPIN} is not in effect"
    assert (unread not in out) is read, out
    assert (" 0 failed" in out) is read, out
