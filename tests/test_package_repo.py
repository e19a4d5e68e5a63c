"""Repository-grade packages (issue 42): versions dpkg and rpm sort as releases sort, one bundle
package per image (Provides/Conflicts goldtune-bundle), a removal that leaves nothing (no
directory, no runtime output), and the distributions' own linters without errors."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from generator import cli
from generator.commands.package import BUNDLES_HOME, package_version
from generator.model.layout import NFD_PREFLIGHT_FILE, TEXTFILE
from tests.conftest import missing_tool
from tests.test_bundle_package import dpkg, need, scratch_root

NAME = "goldtune-l4-inference-inference"


def gen(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli.main, list(args))
    return result.exit_code, result.stdout, result.stderr


def run(*command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, capture_output=True, text=True, check=False)


@pytest.fixture(scope="module")
def packages(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    need("dpkg-deb", "rpmbuild")
    work = tmp_path_factory.mktemp("repo")
    built: dict[str, Path] = {}
    for hardware in ("l4-inference", "dgx-h100"):
        bundle = work / hardware
        code, _, err = gen(
            "--hw", hardware, "--profile", "inference", "--os", "debian-12", "-o", str(bundle)
        )
        assert code == 0, err
        code, _, err = gen("package", str(bundle), "--deb", "--rpm", "-o", str(work / "dist"))
        assert code == 0, err
    for path in (work / "dist").iterdir():
        built[f"{path.name.split('_')[0].split('-0.')[0]}.{path.suffix.lstrip('.')}"] = path
    return built


# (older, newer): a development build before its release, a release before the next one's
# development builds; each with the manifest digest the package version ends with
ORDERED = [
    ("0.2.0.dev3+g1a2b3c4", "0.2.0"),
    ("0.2.0rc1", "0.2.0"),
    ("0.2.0rc1.dev2+g1a2b3c4", "0.2.0rc1"),
    ("0.2.0", "0.2.1.dev1+g5d6e7f8"),
    ("0.0.1.dev802+g8a40b279e", "0.2.0"),
]


@pytest.mark.parametrize(("older", "newer"), ORDERED)
def test_versions_sort_as_releases_do_for_dpkg_and_rpm(older: str, newer: str) -> None:
    """On main 0.2.0.dev3+… sorted after 0.2.0: an image pipeline took a dev build for newer."""
    need("dpkg")
    old, new = package_version(older) + "+0123456789ab", package_version(newer) + "+ba9876543210"
    assert run("dpkg", "--compare-versions", old, "lt", new).returncode == 0, (old, new)
    need("rpm")
    compared = run("rpm", "--eval", f'%{{lua: print(rpm.vercmp("{old}", "{new}"))}}')
    assert compared.stdout.strip() == "-1", (old, new, compared.stderr)


def test_a_release_version_is_itself() -> None:
    assert package_version("0.2.0") == "0.2.0"
    assert package_version("0.2.1.dev3+g1a2b3c4") == "0.2.1~dev3+g1a2b3c4"
    assert package_version("0.2.1.dev3+g1b2") == "0.2.1~dev3+g1b2"  # the local part untouched


def test_a_second_bundle_package_is_refused_on_the_same_image(packages, tmp_path) -> None:
    need("dpkg")
    root = scratch_root(tmp_path / "image")
    dpkg(root, "-i", str(packages[f"{NAME}.deb"]))
    second = subprocess.run(
        [
            "dpkg",
            f"--root={root}",
            "--force-script-chrootless",
            "--log=/dev/null",
            "-i",
            str(packages["goldtune-dgx-h100-inference.deb"]),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert second.returncode == 1
    assert "conflicting packages" in second.stderr or "conflicts with" in second.stderr
    status = run("dpkg", f"--root={root}", "-s", NAME)
    assert "Status: install ok installed" in status.stdout


def test_purge_leaves_no_directory_and_no_runtime_output(packages, tmp_path) -> None:
    """On main the metrics file and the preflight's NFD label outlived the package and went on
    reporting a removed bundle, and the directories install.sh made stayed behind."""
    need("dpkg")
    root = scratch_root(tmp_path / "image")
    (root / "usr/lib").mkdir(parents=True)  # every image has it (base-files, libc)
    outputs = [root / output.lstrip("/") for output in (TEXTFILE, NFD_PREFLIGHT_FILE)]
    for output in outputs:  # node_exporter's and NFD's directories: the image's
        output.parent.mkdir(parents=True, exist_ok=True)
    before = {path for path in root.rglob("*") if "var/lib/dpkg" not in str(path)}
    dpkg(root, "-i", str(packages[f"{NAME}.deb"]))
    assert (root / "var/lib/goldtune/package-created-dirs").is_file()
    for output in outputs:  # what the report unit writes on the node
        output.write_text("goldtune_bundle_info 1\n")
    dpkg(root, "--purge", NAME)
    after = {path for path in root.rglob("*") if "var/lib/dpkg" not in str(path)}
    left = sorted(str(path.relative_to(root)) for path in after ^ before)
    assert left == [], left


def test_an_rpm_erase_leaves_no_directory_and_no_warning(packages, tmp_path) -> None:
    """On main an erase left 29 empty directories: the rpm owned none of them."""
    need("rpm")
    root = tmp_path / "image"
    assert run("rpm", "--root", str(root), "--initdb").returncode == 0
    package = str(packages[f"{NAME}.rpm"])
    # scriptlets need a shell in the root: the files and directories are what is checked here
    installed = run("rpm", "--root", str(root), "-i", "--noscripts", "--nodeps", package)
    assert installed.returncode == 0, installed.stderr
    assert (root / BUNDLES_HOME.lstrip("/") / NAME / "install.sh").is_file()
    erased = run("rpm", "--root", str(root), "-e", "--noscripts", NAME)
    assert erased.returncode == 0
    assert "warning" not in erased.stderr, erased.stderr
    left = sorted(str(p.relative_to(root)) for p in root.rglob("*"))
    left = [path for path in left if "rpm" not in path]  # rpm's database
    # what rpm made for its database (root/ on Debian's rpm, var/lib elsewhere) and /usr/share,
    # the parents of the tree, which every system has
    assert set(left) <= {"root", "usr", "usr/share", "var", "var/lib"}, left


def linter(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        missing_tool(FileNotFoundError(f"{name} not installed (tests/tools/install-tools.sh)"))
    return str(path)


def test_lintian_finds_no_error_in_the_deb(packages) -> None:
    """On main: 26 errors (file-in-usr-local, file-in-etc-not-marked-as-conffile,
    systemd-service-in-odd-location, no-copyright-file, package-contains-ancient-file…)."""
    done = run(linter("lintian"), "--no-cfg", str(packages[f"{NAME}.deb"]))
    errors = [line for line in done.stdout.splitlines() if line.startswith("E:")]
    assert errors == [], done.stdout


def test_rpmlint_finds_no_error_but_the_missing_signature(packages) -> None:
    """no-signature is the site's: an rpm is signed with its GPG key (rpmsign --addsign)."""
    done = run(linter("rpmlint"), str(packages[f"{NAME}.rpm"]))
    errors = [line for line in done.stdout.splitlines() if ": E: " in line]
    assert [line.split(": E: ")[1] for line in errors] == ["no-signature"], done.stdout


def test_the_installed_package_verifies_its_signed_provenance(tmp_path) -> None:
    """The package carries provenance.json and the signed envelope: on the node, the bundle's
    home checks with install.sh --check --pubkey (openssl) that nothing of it changed."""
    need("dpkg-deb", "dpkg", "openssl")
    bundle, keys = tmp_path / "bundle", tmp_path / "keys"
    keys.mkdir()
    made = run("openssl", "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256")
    (keys / "site.pem").write_text(made.stdout)
    run("openssl", "pkey", "-in", str(keys / "site.pem"), "-pubout", "-out", str(keys / "site.pub"))
    assert gen("--hw", "l4-inference", "--profile", "inference", "-o", str(bundle))[0] == 0
    assert gen("sign", str(bundle), "--key", str(keys / "site.pem"))[0] == 0
    assert gen("package", str(bundle), "--deb", "-o", str(tmp_path / "dist"))[0] == 0
    root = scratch_root(tmp_path / "image")
    dpkg(root, "-i", str(next((tmp_path / "dist").iterdir())))
    home = root / BUNDLES_HOME.lstrip("/") / NAME
    checked = run("sh", str(home / "install.sh"), "--check", "--pubkey", str(keys / "site.pub"))
    assert checked.returncode == 0, checked.stderr
    with (home / "rootfs/etc/sysctl.d/90-goldtune.conf").open("a") as stream:
        stream.write("vm.swappiness = 100\n")
    checked = run("sh", str(home / "install.sh"), "--check", "--pubkey", str(keys / "site.pub"))
    assert checked.returncode == 1 and "differs from the signed statement" in checked.stderr


ERASE_IN_AN_IMAGE = r"""set -e
R=$1
mount -t tmpfs image "$R"
cd "$R"
mkdir -p usr .up .work dev proc etc/default var/lib tmp run
for name in bin sbin lib lib64; do ln -s "usr/$name" "$name"; done
touch dev/null && mount --bind /dev/null dev/null
mount -t overlay overlay -o "lowerdir=/usr,upperdir=$R/.up,workdir=$R/.work" "$R/usr"
printf 'GRUB_CMDLINE_LINUX_DEFAULT="quiet"\n' >etc/default/grub
cd /
before=$(cd "$R" && find . -path ./.work -prune -o -path ./.up -prune -o -print | sort)
rpm --root "$R" --dbpath /var/lib/rpm --initdb
rpm --root "$R" --dbpath /var/lib/rpm -i --nodeps "$2" >"$3/install.out" 2>"$3/install.err"
ls "$R/var/lib/goldtune" >"$3/record"
rpm --root "$R" --dbpath /var/lib/rpm -e "$4" >"$3/erase.out" 2>"$3/erase.err"
after=$(cd "$R" && find . -path ./.work -prune -o -path ./.up -prune -o -print | sort)
printf '%s\n' "$before" >"$3/before"
printf '%s\n' "$after" | grep -v -e '^\./var/lib/rpm' -e '^\./var/tmp$' >"$3/after"
"""


def test_an_rpm_erase_with_its_scriptlets_leaves_the_image_as_it_was(packages, tmp_path) -> None:
    """The .rpm installed with its %post (install.sh into the image) and erased with its %preun
    and %postun, chrooted by rpm into a root of its own (this host's /usr under an overlay, so
    nothing of the host is written): no rpm warning, and no file or directory left that was
    not there before (on main: a warning per overlay file the take-back had removed, and the
    directories install.sh made)."""
    need("rpm", "unshare")
    from tests.test_install import can_chroot

    if not can_chroot():
        pytest.skip("needs root and a private mount namespace (unshare, chroot)")
    root, out = tmp_path / "image", tmp_path / "out"
    root.mkdir()
    out.mkdir()
    (tmp_path / "erase.sh").write_text(ERASE_IN_AN_IMAGE)
    done = run(
        "unshare", "--mount", "--propagation", "private", "sh", str(tmp_path / "erase.sh"),
        str(root), str(packages[f"{NAME}.rpm"]), str(out), NAME,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "installed-files" in (out / "record").read_text()  # %post ran install.sh
    assert "taken back: 0 failed" in (out / "erase.out").read_text()
    for name in ("install.err", "erase.err"):
        assert "warning" not in (out / name).read_text().lower(), (out / name).read_text()
    assert (out / "after").read_text() == (out / "before").read_text()
