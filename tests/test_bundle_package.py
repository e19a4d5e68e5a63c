"""gen package: a bundle as a .deb (dpkg-deb) and an .rpm (rpmbuild), built and read with the real
tools, the .deb installed into a scratch root with dpkg --root and the result checked with
gen verify --root (issue 13)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from generator import __version__, cli
from generator.commands.package import BUNDLES_HOME, package_name, package_version
from tests.conftest import missing_tool

NAME = "goldtune-l4-inference-inference"
HOME = f"{BUNDLES_HOME}/{NAME}"


def gen(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli.main, list(args))
    return result.exit_code, result.stdout, result.stderr


def need(*tools: str) -> None:
    for tool in tools:
        if shutil.which(tool) is None:
            missing_tool(FileNotFoundError(f"{tool} not installed (tests/tools/install-tools.sh)"))


def tool_output(*command: str) -> str:
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    target = tmp_path_factory.mktemp("bundle") / "l4-inference-inference"
    code, _, err = gen(
        "--hw", "l4-inference", "--profile", "inference", "--os", "debian-12", "-o", str(target)
    )
    assert code == 0, err
    return target


@pytest.fixture(scope="module")
def packages(bundle: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    need("dpkg-deb", "rpmbuild")
    out = tmp_path_factory.mktemp("dist")
    code, stdout, err = gen("package", str(bundle), "--deb", "--rpm", "-o", str(out))
    assert code == 0, err
    built = {path.suffix.lstrip("."): path for path in out.iterdir()}
    assert sorted(built) == ["deb", "rpm"], built  # nothing else left in DIR
    assert stdout.count("wrote ") == 2
    return built


def manifest_version(bundle: Path) -> str:
    digest = hashlib.sha256((bundle / "manifest.json").read_bytes()).hexdigest()
    return f"{package_version(__version__)}+{digest[:12]}"


def test_the_deb_holds_the_bundle_docs_and_a_postinst(packages, bundle):
    """Issue 42: the bundle under /usr/share only; on main the overlay's targets were package
    files too, /usr/local/libexec among them (Debian Policy 9.1.2) and /etc files that were
    not conffiles, and lintian found 26 errors."""
    listing = tool_output("dpkg-deb", "-c", str(packages["deb"]))
    assert " ./etc/" not in listing and " ./usr/local/" not in listing
    assert f" .{HOME}/install.sh\n" in listing and f" .{HOME}/rootfs/etc/sysctl.d/" in listing
    assert f" .{HOME}/provenance.json\n" in listing
    assert "-rwxr-xr-x root/root" in next(
        line for line in listing.splitlines() if line.endswith("/usr/lib/goldtune/gpu-setup")
    )
    assert f" ./usr/share/doc/{NAME}/copyright\n" in listing
    assert f" ./usr/share/doc/{NAME}/changelog.gz\n" in listing
    info = tool_output("dpkg-deb", "-I", str(packages["deb"]))
    assert f"Package: {NAME}\n" in info
    assert f"Version: {manifest_version(bundle)}\n" in info
    assert "Depends" not in info  # nothing sourced: left out
    assert "Provides: goldtune-bundle\n" in info and "Conflicts: goldtune-bundle\n" in info
    postinst = tool_output("dpkg-deb", "-I", str(packages["deb"]), "postinst")
    assert (
        f'"${{DPKG_ROOT:-}}{HOME}/install.sh" --image-build --root "${{DPKG_ROOT:-/}}"' in postinst
    )


def test_the_rpm_lists_the_same_files_and_runs_install_sh_in_post(packages, bundle):
    need("rpm")
    listed = tool_output("rpm", "-qlp", str(packages["rpm"])).splitlines()
    assert f"{HOME}/install.sh" in listed
    # it owns its own directories (an erase leaves none), no system directory
    assert "/usr/share/goldtune" in listed and f"{HOME}/rootfs/etc/sysctl.d" in listed
    assert "/usr/share" not in listed and "/etc" not in listed
    deb_files = {
        "/" + line.split(" ./", 1)[1].rstrip("/")
        for line in tool_output("dpkg-deb", "-c", str(packages["deb"])).splitlines()
        if "/usr/share/doc/" not in line
    }
    assert set(listed) == deb_files - {"/", "/usr", "/usr/share"}
    scripts = tool_output("rpm", "-qp", "--scripts", str(packages["rpm"]))
    assert f'"{HOME}/install.sh" --image-build --root "/"' in scripts
    query = tool_output("rpm", "-qp", "--qf", "%{NAME} %{VERSION} %{ARCH}", str(packages["rpm"]))
    assert query == f"{NAME} {manifest_version(bundle)} noarch"
    capabilities = tool_output("rpm", "-qp", "--provides", "--conflicts", str(packages["rpm"]))
    assert capabilities.splitlines().count("goldtune-bundle") == 2


def scratch_root(root: Path) -> Path:
    for folder in ("var/lib/dpkg/info", "var/lib/dpkg/updates", "etc/default"):
        (root / folder).mkdir(parents=True)
    (root / "var/lib/dpkg/status").touch()
    (root / "etc/default/grub").write_text('GRUB_CMDLINE_LINUX_DEFAULT="quiet"\n')
    return root


def dpkg(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [
            "dpkg",
            f"--root={root}",
            "--force-script-chrootless",  # the scratch root has no shell to chroot into
            "--log=/dev/null",
            *args,
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return result


def test_the_deb_installs_into_a_scratch_root_that_verifies(packages, bundle, tmp_path):
    need("dpkg")
    root = scratch_root(tmp_path / "image")
    installed = dpkg(root, "-i", str(packages["deb"]))
    assert "enable goldtune-gpu.service" in installed.stdout  # the postinst ran install.sh
    assert (root / "var/lib/goldtune/installed-files").is_file()
    code, out, err = gen("verify", str(bundle), "--root", str(root))
    assert code == 0, out + err
    assert " 0 differ, 0 missing" in out
    # the same check fails on a root the postinst did not install into
    (root / "etc/sysctl.d/90-goldtune.conf").unlink()
    assert gen("verify", str(bundle), "--root", str(root))[0] == 1


def files_of(root: Path) -> dict[str, str]:
    """Every file and link below ``root`` (dpkg's own database left out), with its content."""
    found = {}
    for path in sorted(root.rglob("*")):
        relative = str(path.relative_to(root))
        if relative.startswith("var/lib/dpkg") or (path.is_dir() and not path.is_symlink()):
            continue
        found[relative] = os.readlink(path) if path.is_symlink() else path.read_text()
    return found


def test_purging_the_deb_takes_back_what_its_install_did(packages, tmp_path):
    """Issue 30 item 8: on main the purge left the units' [Install] links (to removed unit
    files) and a tuned selection naming the removed goldtune profile. The prerm runs the
    bundle's install.sh --uninstall: the image's files are as before the install."""
    need("dpkg")
    root = scratch_root(tmp_path / "image")
    (root / "etc/tuned").mkdir()
    (root / "etc/tuned/active_profile").write_text("balanced\n")
    units = root / "lib/systemd/system"
    units.mkdir(parents=True)
    (units / "nvidia-persistenced.service").write_text(
        "[Service]\nExecStart=/usr/bin/nvidia-persistenced\n[Install]\nWantedBy=multi-user.target\n"
    )
    before = files_of(root)
    dpkg(root, "-i", str(packages["deb"]))
    wants = root / "etc/systemd/system/multi-user.target.wants"
    assert (wants / "goldtune-gpu.service").is_symlink()  # the install made the links
    assert "goldtune-" in (root / "etc/tuned/active_profile").read_text()
    purged = dpkg(root, "--purge", NAME)
    assert "taking back the l4-inference / inference bundle" in purged.stdout
    after = files_of(root)
    # tuned reads a selection without profile_mode as manual (tuned/daemon/daemon.py
    # _get_startup_profile: manual = profile is not None): the mode install.sh wrote is the same
    assert after.pop("etc/tuned/profile_mode") == "manual\n"
    assert after == before, purged.stdout
    assert not (root / "var/lib/goldtune").exists()
    assert not (root / HOME).exists()
    assert not (root / "etc/goldtune").exists()


def test_the_rpm_takes_back_on_erase_not_on_upgrade(packages):
    need("rpm")
    scripts = tool_output("rpm", "-qp", "--scripts", str(packages["rpm"]))
    preun = scripts.split("preuninstall scriptlet", 1)[1].split("postuninstall scriptlet")[0]
    assert 'if [ "$1" -eq 0 ]; then' in preun
    assert f'"{HOME}/install.sh" --uninstall --root "/"' in preun
    postun = scripts.split("postuninstall scriptlet", 1)[1]
    assert 'rmdir "/var/lib/goldtune"' in postun


def test_the_same_bundle_gives_the_same_deb(packages, bundle, tmp_path):
    assert gen("package", str(bundle), "--deb", "-o", str(tmp_path))[0] == 0
    again = tmp_path / packages["deb"].name
    assert again.read_bytes() == packages["deb"].read_bytes()


def test_a_tampered_bundle_is_bad_input_and_nothing_is_written(bundle, tmp_path):
    copy = tmp_path / "bundle"
    shutil.copytree(bundle, copy)
    (copy / "rootfs/etc/sysctl.d/90-goldtune.conf").write_text("kernel.panic = 1\n")
    out = tmp_path / "dist"
    code, stdout, err = gen("package", str(copy), "--deb", "-o", str(out))
    assert code == 2, stdout + err
    assert "90-goldtune.conf" in err and "Traceback" not in err
    assert not out.exists()


@pytest.mark.parametrize(
    "args",
    [["--deb"], []],
    ids=["not-a-bundle", "no-format"],
)
def test_bad_usage_is_exit_2_with_nothing_written(tmp_path, bundle, args):
    target = str(tmp_path / "nope") if args else str(bundle)
    out = tmp_path / "dist"
    code, stdout, err = gen("package", target, *args, "-o", str(out))
    assert code == 2, stdout + err
    assert err.strip() and "Traceback" not in err
    assert not out.exists()


def test_a_missing_builder_is_one_line_exit_1(bundle, tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    out = tmp_path / "dist"
    code, _, err = gen("package", str(bundle), "--rpm", "-o", str(out))
    assert code == 1
    assert err == "goldtune: error: rpmbuild not found: install the rpm package\n"
    assert not out.exists()


@pytest.mark.parametrize(
    ("hardware", "profile", "expected"),
    [
        ("dgx-h100", "inference", "goldtune-dgx-h100-inference"),
        ("My_Box 2", "Team.Serving", "goldtune-my-box-2-team.serving"),
        ("%{lua:x}", "$(reboot)", "goldtune-lua-x-reboot"),
    ],
)
def test_package_names_keep_to_debian_policy(hardware, profile, expected):
    assert package_name(hardware, profile) == expected


def test_a_path_an_rpm_spec_would_expand_is_refused(bundle, tmp_path):
    """A foreign bundle whose manifest honestly lists a file named like an rpm macro."""
    copy = tmp_path / "bundle"
    shutil.copytree(bundle, copy)
    name = "rootfs/etc/%{lua:os.execute('id')}"
    (copy / name).write_text("x\n")
    manifest = json.loads((copy / "manifest.json").read_text())
    digest = hashlib.sha256(b"x\n").hexdigest()
    manifest["files"].append({"path": name, "sha256": digest, "mode": "0644"})
    (copy / "manifest.json").write_text(json.dumps(manifest))
    out = tmp_path / "dist"
    code, _, err = gen("package", str(copy), "--rpm", "-o", str(out))
    assert code == 2, err
    assert err.count("\n") == 1 and "plain alphabet" in err and "lua" not in err
    assert not out.exists()
