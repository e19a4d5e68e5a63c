"""Issue 27: an image's first boot checks the kernel arguments it got (install.sh's boot check).

install.sh --root writes goldtune-kernel-args.service and its fixed check script into the image;
the script compares /proc/cmdline (a fake one under TEST_SYSROOT here) with the arguments the
bundle added and removed, one line per argument not in effect, and with the profile's
reboot_for_kernel_args reboots once (a marker), never again. On main none of this existed.
"""

from __future__ import annotations

import shutil
import subprocess
import tomllib
from pathlib import Path
from types import SimpleNamespace

import pytest
from test_install import INFERENCE, RHEL_ENTRY, TRAINING, bundle_for, make_bin, rhel_root, run

from generator.model.planio import plan_from_data, plan_to_data
from generator.model.setting import Plan
from generator.render.overlay import kernel_cmdline
from generator.render.render import render_bundle
from generator.verify.checks_host import check_kernel_arg

UNIT = "etc/systemd/system/goldtune-kernel-args.service"
SCRIPT = "usr/lib/goldtune/kernel-args-check"
RECORD = "var/lib/goldtune"


def debian_root(root: Path) -> Path:
    (root / "etc/default").mkdir(parents=True)
    (root / "etc/default/grub").write_text('GRUB_CMDLINE_LINUX_DEFAULT="quiet"\n')
    return root


def install(tmp_path: Path, root: Path, plan: Plan, name: str = "bundle") -> None:
    bundle = bundle_for(tmp_path, plan, name)
    result = run(
        bundle / "install.sh", "--root", str(root), path=make_bin(tmp_path, {}, f"bin-{name}")
    )
    assert result.returncode == 0, result.stdout + result.stderr


def check(root: Path, cmdline: str, *args: str) -> subprocess.CompletedProcess[str]:
    """The image's check script, as its unit runs it, against a fake /proc/cmdline."""
    (root / "proc").mkdir(exist_ok=True)
    (root / "proc/cmdline").write_text(cmdline + "\n")
    stubs = root.parent / "stubs"
    stubs.mkdir(exist_ok=True)
    systemctl = stubs / "systemctl"
    systemctl.write_text(f'#!/bin/sh\necho "$*" >>{root.parent / "reboots"}\n')
    systemctl.chmod(0o755)
    return subprocess.run(
        ["/bin/sh", str(root / SCRIPT), str(root / RECORD), *args],
        capture_output=True,
        text=True,
        env={"PATH": f"{stubs}:/usr/bin:/bin", "TEST_SYSROOT": str(root)},
        check=False,
    )


def test_an_image_build_installs_and_enables_the_boot_check(tmp_path: Path) -> None:
    root = debian_root(tmp_path / "image")
    install(tmp_path, root, INFERENCE)
    unit = (root / UNIT).read_text()
    assert "ExecStart=/bin/sh /usr/lib/goldtune/kernel-args-check /var/lib/goldtune\n" in (unit)
    assert (
        root / "etc/systemd/system/multi-user.target.wants/goldtune-kernel-args.service"
    ).is_symlink()
    booted = f"BOOT_IMAGE=/vmlinuz root=/dev/vda1 ro quiet {kernel_cmdline(INFERENCE)}"
    result = check(root, booted)
    assert (result.returncode, result.stdout) == (0, "")


def test_each_argument_not_in_effect_is_one_line(tmp_path: Path) -> None:
    root = debian_root(tmp_path / "image")
    install(tmp_path, root, INFERENCE, "inference")
    install(tmp_path, root, TRAINING, "training")  # removes intel_idle.max_cstate=1, adds iommu=pt
    words = kernel_cmdline(TRAINING).split()
    result = check(root, "root=/dev/vda1 ro intel_idle.max_cstate=1 " + " ".join(words[1:]))
    assert result.returncode == 1
    assert result.stdout.splitlines() == [
        f"kernel argument {words[0]} not in effect: the bootloader config was not regenerated",
        "kernel argument intel_idle.max_cstate=1 still in effect although the bundle removed it: "
        "the bootloader config was not regenerated",
    ]
    assert not (tmp_path / "reboots").exists()  # not asked to reboot


def test_the_check_starts_no_process(tmp_path: Path) -> None:
    """It runs at every boot of the image: /proc/cmdline and the record are read with the shell's
    read (as first merged: a cat for each of the three files)."""
    root = debian_root(tmp_path / "image")
    install(tmp_path, root, INFERENCE, "inference")
    install(tmp_path, root, TRAINING, "training")
    (root / "proc").mkdir(exist_ok=True)
    (root / "proc/cmdline").write_text("root=/dev/vda1 ro intel_idle.max_cstate=1\n")
    stubs = tmp_path / "only-stubs"  # nothing but stubs that log being started
    stubs.mkdir()
    for tool in ("cat", "head", "tr", "awk", "systemctl"):
        (stubs / tool).write_text(f'#!/bin/sh\necho {tool} >>"{tmp_path / "started"}"\nexit 1\n')
        (stubs / tool).chmod(0o755)
    result = subprocess.run(
        ["/bin/sh", str(root / SCRIPT), str(root / RECORD)],
        capture_output=True,
        text=True,
        env={"PATH": str(stubs), "TEST_SYSROOT": str(root)},
        check=False,
    )
    assert result.returncode == 1
    assert "intel_idle.max_cstate=1 still in effect" in result.stdout
    assert f"kernel argument {kernel_cmdline(TRAINING).split()[0]} not in effect" in result.stdout
    assert not (tmp_path / "started").exists()


def test_a_list_argument_merged_with_the_images_counts_as_in_effect(tmp_path: Path) -> None:
    root = debian_root(tmp_path / "image")
    install(tmp_path, root, INFERENCE)
    (root / RECORD / "kernel-args").write_text("modprobe.blacklist=nouveau\niommu=pt\n")
    assert check(root, "ro modprobe.blacklist=pcspkr,nouveau iommu=pt").returncode == 0
    result = check(root, "ro modprobe.blacklist=pcspkr iommu=pt")
    assert "modprobe.blacklist=nouveau not in effect" in result.stdout


def test_the_knob_reboots_once_and_never_again(tmp_path: Path) -> None:
    plan = INFERENCE._replace(reboot_for_kernel_args=True)
    assert plan_from_data(plan_to_data(plan)).reboot_for_kernel_args
    install_list = render_bundle(plan)["install.list"][0].decode()
    assert "kernel-args-reboot\tonce" in install_list
    root = debian_root(tmp_path / "image")
    install(tmp_path, root, plan)
    assert "kernel-args-check /var/lib/goldtune --reboot-once\n" in (root / UNIT).read_text()
    first = check(root, "root=/dev/vda1 ro", "--reboot-once")
    assert (tmp_path / "reboots").read_text() == "reboot\n"
    assert "rebooting once" in first.stdout
    second = check(root, "root=/dev/vda1 ro", "--reboot-once")
    assert second.returncode == 1 and "not again" in second.stdout
    assert (tmp_path / "reboots").read_text() == "reboot\n"  # once
    install(tmp_path, root, plan, "again")  # a bundle handed over again may reboot once again
    assert not (root / RECORD / "kernel-args-rebooted").exists()


def test_a_bls_image_gets_the_check_too(tmp_path: Path) -> None:
    root = rhel_root(tmp_path / "image")
    install(tmp_path, root, INFERENCE)
    assert (root / UNIT).is_file() and (root / SCRIPT).is_file()


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze missing")
def test_the_unit_passes_systemd_analyze_verify(tmp_path: Path) -> None:
    root = debian_root(tmp_path / "image")
    install(tmp_path, root, INFERENCE._replace(reboot_for_kernel_args=True))
    # systemd-analyze verify checks that ExecStart's program exists: /bin/sh in the image
    (root / "bin").mkdir()
    shutil.copy("/bin/sh", root / "bin/sh")
    result = subprocess.run(
        ["systemd-analyze", "verify", f"--root={root}", "--recursive-errors=no", f"/{UNIT}"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_gen_verify_says_what_the_journal_says() -> None:
    setting = next(s for s in INFERENCE.of_kind("kernel-arg") if s.value)

    live = SimpleNamespace(cmdline={"ro": None})
    found = check_kernel_arg(setting, live)  # type: ignore[arg-type]
    assert found.reason.startswith(
        f"kernel argument {setting.key}={setting.value} not in effect: "
        "the bootloader config was not regenerated"
    )


# --- bootc / image mode: /usr/lib/bootc/kargs.d (issue 27) -------------------------------------

KARGS = "usr/lib/bootc/kargs.d/90-goldtune.toml"
RHEL_BUNDLE = INFERENCE._replace(distro="rhel-9", grub_dropins=False)


def bootc_kargs(root: Path) -> list[str]:
    """The file as bootc reads it (containers/bootc lib/src/kargs.rs): a .toml name in kargs.d,
    TOML whose keys are kargs (required, a list of strings) and match-architectures (optional):
    Config is deny_unknown_fields."""
    path = root / KARGS
    assert path.suffix == ".toml"
    config = tomllib.loads(path.read_text())
    assert set(config) <= {"kargs", "match-architectures"} and "kargs" in config
    assert all(isinstance(word, str) for word in config["kargs"])
    return list(config["kargs"])


@pytest.mark.parametrize("marker", ["usr/lib/bootc/", "usr/lib/ostree/prepare-root.conf"])
def test_a_bootc_image_gets_kargs_d_and_no_bls_edit(tmp_path: Path, marker: str) -> None:
    """On main the BLS entries of the container image were edited, which bootc does not read
    (it writes the entries itself from kargs.d)."""
    root = rhel_root(tmp_path / "image")
    if marker.endswith("/"):
        (root / marker).mkdir(parents=True)
    else:
        (root / marker).parent.mkdir(parents=True)
        (root / marker).write_text("[composefs]\nenabled = yes\n")
    entry_before = (root / RHEL_ENTRY).read_text()
    install(tmp_path, root, RHEL_BUNDLE, "inference")
    assert bootc_kargs(root) == kernel_cmdline(RHEL_BUNDLE).split()
    assert (root / RHEL_ENTRY).read_text() == entry_before
    install(tmp_path, root, TRAINING._replace(distro="rhel-9"), "training")
    assert bootc_kargs(root) == kernel_cmdline(TRAINING).split()  # rewritten whole
