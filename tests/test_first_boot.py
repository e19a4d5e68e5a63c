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
from pathlib import Path

import pytest
import yaml
from test_install import (
    INFERENCE,
    RHEL_OPTIONS,
    THEIRS,
    TRAINING,
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
from generator.render.firstboot import (
    ENTRY_FUNCTIONS,
    first_boot_script,
    first_boot_words,
    needed_pieces,
    top_level_pieces,
)
from generator.render.overlay import kernel_cmdline, overlay_files
from generator.render.render import render_bundle

INSTALL_SH = Path(__file__).resolve().parent.parent / "templates/scripts/install.sh"
# Debian 12's containerd 1.6 config.toml (tests/test_wiring.py), without and with the import;
# the roots' containerd (the host's /usr) reads the latter unless a test says otherwise.
DEBIAN_CONTAINERD = (
    'version = 2\n[plugins."io.containerd.grpc.v1.cri".cni]\nbin_dir = "/usr/lib/cni"\n'
)
IMPORTING = 'version = 2\nimports = ["/etc/containerd/conf.d/*.toml"]\n'


def user_data(plan: Plan) -> dict:
    return yaml.safe_load(render_bundle(plan)["cloud-init/user-data"][0])


def first_boot(root: Path, plan: Plan) -> str:
    """Write the user-data's first-boot script where cloud-init writes it and run its runcmd
    line in ``root``; the output."""
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
    return in_chroot(root, command)


def live_root(root: Path, tuned_running: bool = True) -> Path:
    """A root that looks live to install.sh's functions, its live tools recording stubs."""
    (root / "run/systemd/system").mkdir(parents=True, exist_ok=True)
    (root / "tmp").mkdir(exist_ok=True)
    (root / "etc/containerd").mkdir(parents=True, exist_ok=True)
    (root / "etc/containerd/config.toml").write_text(IMPORTING)
    for name in ("grubby", "tuned-adm", "update-grub"):
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
    assert "remove stale files, layer tuned, add and remove kernel arguments: failed" in out
    assert not (root / layout.REBOOT_MARKER.lstrip("/")).exists()


# --- the script is install.sh's functions -----------------------------------------------------


def test_the_script_is_install_sh_lines_then_its_main() -> None:
    text = INSTALL_SH.read_text()
    words = first_boot_words("iommu=pt", "goldtune-inference")
    script = first_boot_script(text, words, "")
    code, _, main = script.partition("\n# --- goldtune first boot")
    # install.sh's lines in order, without their indentation (the user-data form: shellform)
    theirs = iter(line.lstrip(" \t") for line in text.splitlines())
    assert all(
        any(line.lstrip(" \t") == other for other in theirs) for line in code.splitlines()[5:]
    )
    assert "kernel_args='iommu=pt'" in main and "tuned_profile='goldtune-inference'" in main
    assert re.search(r"^tuned_layer\nfailed_before_boot=\$failed\nboot_arguments$", main, re.M)


def test_every_function_the_phases_call_is_carried() -> None:
    """The functions the phases reach (stale files, tuned, boot arguments), and no unrelated one
    (the size)."""
    pieces = top_level_pieces(INSTALL_SH.read_text())
    names = {p.name for p in needed_pieces(pieces, ENTRY_FUNCTIONS, first_boot_words("", ""))}
    assert {"tuned_layer", "boot_arguments", "edit_kernel_cmdline", "run_step", "put"} <= names
    assert {"remove_stale_files", "stale_candidate", "service_live"} <= names
    assert {"tuned_active", "tuned_mode"} <= names  # install.sh's globals they read
    assert not {"install_file", "read_list", "merge_daemon_json", "check_needs"} & names
    assert not {"tool", "failed", "root"} & names  # the main sets these


def test_a_function_is_found_through_the_one_that_calls_it() -> None:
    script = (
        "#!/bin/sh\nhelper() {\n    echo x\n}\nunused() { echo y; }\n"
        "entry() { # calls helper\n    helper\n}\nsetting=1\n"
    )
    names = [p.name for p in needed_pieces(top_level_pieces(script), ("entry",), ())]
    assert names == ["helper", "entry"]


def test_the_first_boot_carries_install_file_without_its_nccl_branch() -> None:
    """install_file comes along for daemon.json only: merge_nccl_conf (which only its nccl.conf
    branch calls) stays out, remove_stale's nccl.conf restore stays in, and asking the first
    boot to stage nccl.conf is refused rather than run without its merge."""
    from generator.errors import GenerationError
    from generator.paths import templates_dir
    from generator.render.firstboot import first_boot_script

    install_sh = (templates_dir() / layout.SCRIPTS_DIR / "install.sh").read_text()
    words = {"kernel_args": "", "tuned_profile": "", "installed_paths": ""}
    script = first_boot_script(install_sh, words, "", [("0644", layout.DOCKER_DAEMON_JSON)])
    assert "\ninstall_file() {" in script
    assert "\nmerge_daemon_json() {" in script
    assert "\nmerge_nccl_conf() {" not in script
    assert "\nrestore_nccl_conf() {" in script  # a stale nccl.conf is put back at first boot too
    with pytest.raises(GenerationError, match=r"nccl\.conf"):
        first_boot_script(install_sh, words, "", [("0644", layout.NCCL_CONF)])


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
