"""gen package on hostile bundles and hostile output directories (issue 29, family 5): the
package runs the bundle's own verified install.sh and nothing else, is built all or nothing,
with modes that do not depend on the caller's umask, and every failure is one line with the
README's exit status. Each test failed on main before the fix (named in its docstring)."""

from __future__ import annotations

import hashlib
import json
import os
import resource
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from generator import cli
from generator.commands.package import BUNDLES_HOME
from tests.conftest import missing_tool

NAME = "goldtune-l4-inference-inference"


def gen(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli.main, list(args))
    return result.exit_code, result.stdout, result.stderr


def need(*tools: str) -> None:
    for tool in tools:
        if shutil.which(tool) is None:
            missing_tool(FileNotFoundError(f"{tool} not installed (tests/tools/install-tools.sh)"))


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    target = tmp_path_factory.mktemp("bundle") / "l4-inference-inference"
    code, _, err = gen(
        "--hw", "l4-inference", "--profile", "inference", "--os", "debian-12", "-o", str(target)
    )
    assert code == 0, err
    return target


def with_file(bundle: Path, copy: Path, name: str, content: bytes, mode: str = "0644") -> Path:
    """A copy of the bundle with one more file, honestly listed in its manifest."""
    shutil.copytree(bundle, copy)
    (copy / name).parent.mkdir(parents=True, exist_ok=True)
    (copy / name).write_bytes(content)
    (copy / name).chmod(int(mode, 8))
    manifest = json.loads((copy / "manifest.json").read_text())
    digest = hashlib.sha256(content).hexdigest()
    manifest["files"].append({"path": name, "sha256": digest, "mode": mode})
    (copy / "manifest.json").write_text(json.dumps(manifest))
    return copy


def one_line(err: str) -> None:
    assert err.count("\n") == 1 and err.startswith("goldtune: error: "), err
    assert "Traceback" not in err


@pytest.mark.parametrize(
    "name",
    [
        f"rootfs{BUNDLES_HOME}/{NAME}/install.sh",  # the script the postinst runs
        f"rootfs{BUNDLES_HOME}/{NAME}/install.list",  # the data it reads
        f"rootfs{BUNDLES_HOME}/other/install.sh",  # any bundle's home
        "rootfs/DEBIAN/postinst",  # dpkg's control directory
        "rootfs/usr/share/goldtune",  # a file where the bundle's home needs a directory
    ],
    ids=["install.sh", "install.list", "other-home", "DEBIAN", "file-over-directory"],
)
def test_no_bundle_file_replaces_what_the_maintainer_script_runs(bundle, tmp_path, name):
    """On main the overlay's copy of install.sh was staged over the bundle's own (the package's
    postinst ran 'exit 0' from the overlay), and DEBIAN/postinst was a traceback."""
    copy = with_file(bundle, tmp_path / "bundle", name, b"#!/bin/sh\nexit 0\n", "0755")
    out = tmp_path / "dist"
    code, stdout, err = gen("package", str(copy), "--deb", "--rpm", "-o", str(out))
    assert code == 2, stdout + err
    one_line(err)
    assert not out.exists()


def test_a_bundle_without_its_install_sh_is_not_packaged(bundle, tmp_path):
    """On main a bundle whose manifest honestly omitted install.sh built a package whose
    postinst failed at install time."""
    copy = tmp_path / "bundle"
    shutil.copytree(bundle, copy)
    (copy / "install.sh").unlink()
    manifest = json.loads((copy / "manifest.json").read_text())
    manifest["files"] = [e for e in manifest["files"] if e["path"] != "install.sh"]
    (copy / "manifest.json").write_text(json.dumps(manifest))
    out = tmp_path / "dist"
    code, _, err = gen("package", str(copy), "--deb", "-o", str(out))
    assert code == 2 and "no install.sh" in err, err
    one_line(err)
    assert not out.exists()


def test_the_readme_relative_dist_builds_both(bundle, tmp_path, monkeypatch):
    """The README's own `-o dist/`: on main rpmbuild failed (it changes directory) and the .deb
    was left behind."""
    need("dpkg-deb", "rpmbuild")
    monkeypatch.chdir(tmp_path)
    code, stdout, err = gen("package", str(bundle), "--deb", "--rpm", "-o", "dist/")
    assert code == 0, err
    assert sorted(path.suffix for path in (tmp_path / "dist").iterdir()) == [".deb", ".rpm"]
    assert stdout.count("wrote ") == 2


def test_a_failing_builder_leaves_nothing(bundle, tmp_path, monkeypatch):
    """All or nothing: on main the .deb was moved into DIR before rpmbuild failed."""
    need("dpkg-deb")
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "rpmbuild").write_text(
        "#!/bin/sh\necho 'error: no room for the buildroot' >&2\nexit 1\n"
    )
    (fake / "rpmbuild").chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake}:{os.environ['PATH']}")
    out = tmp_path / "dist"
    out.mkdir()
    code, stdout, err = gen("package", str(bundle), "--deb", "--rpm", "-o", str(out))
    assert code == 1, stdout + err
    assert err == "goldtune: error: rpmbuild failed: error: no room for the buildroot\n"
    assert list(out.iterdir()) == []


@pytest.fixture
def umask_077() -> Iterator[None]:
    previous = os.umask(0o077)
    yield
    os.umask(previous)


def test_a_strict_umask_still_builds_a_deb_with_plain_modes(bundle, tmp_path, umask_077):
    """On main dpkg-deb refused the control directory a 027 or 077 umask made (0700)."""
    need("dpkg-deb")
    out = tmp_path / "dist"
    code, _, err = gen("package", str(bundle), "--deb", "-o", str(out))
    assert code == 0, err
    (deb,) = out.iterdir()
    listing = subprocess.run(
        ["dpkg-deb", "-c", str(deb)], capture_output=True, text=True, check=True
    ).stdout
    directories = [line for line in listing.splitlines() if line.startswith("d")]
    assert directories and all(line.startswith("drwxr-xr-x root/root") for line in directories)
    control = subprocess.run(
        ["dpkg-deb", "--ctrl-tarfile", str(deb)], capture_output=True, check=True
    ).stdout
    names = subprocess.run(
        ["tar", "-tvf", "-"], input=control, capture_output=True, check=True
    ).stdout.decode()
    assert "-rwxr-xr-x root/root" in next(line for line in names.splitlines() if "prerm" in line)
    assert "-rw-r--r-- root/root" in next(line for line in names.splitlines() if "control" in line)


def test_a_directory_at_the_package_name_is_not_renamed_over(bundle, tmp_path):
    """On main a directory at the .deb's name in DIR received the package inside it
    (shutil.move), and a package name taken by a non-empty directory was a traceback."""
    need("dpkg-deb")
    out = tmp_path / "dist"
    out.mkdir()
    code, stdout, _ = gen("package", str(bundle), "--deb", "-o", str(tmp_path / "first"))
    assert code == 0
    name = Path(stdout.split("wrote ", 1)[1].strip()).name
    (out / name).mkdir()
    (out / name / "keep").write_text("mine\n")
    code, stdout, err = gen("package", str(bundle), "--deb", "-o", str(out))
    assert code == 2, stdout + err
    one_line(err)
    assert "is a directory" in err
    assert sorted(p.name for p in out.iterdir()) == [name]
    assert [p.name for p in (out / name).iterdir()] == ["keep"]


def run_gen(args: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "generator", *args],
        capture_output=True,
        text=True,
        check=False,
        **kwargs,  # type: ignore[call-overload]
    )


def in_namespace(script: str) -> subprocess.CompletedProcess[str]:
    """``script`` as root in a mount namespace of its own (the mounts go with it)."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("needs root and unshare for a mount namespace")
    probe = subprocess.run(["unshare", "-m", "true"], capture_output=True, check=False)
    if probe.returncode != 0:
        pytest.skip("no mount namespace here")
    return subprocess.run(
        ["unshare", "-m", "sh", "-ec", script], capture_output=True, text=True, check=False
    )


@pytest.mark.parametrize(
    ("options", "why"),
    [("ro,size=1m", "Read-only file system"), ("size=160k", "No space left on device")],
    ids=["read-only", "full"],
)
def test_an_unwritable_output_is_one_line_exit_1(bundle, tmp_path, options, why):
    """A read-only DIR and a full disk: on main a traceback."""
    need("dpkg-deb", "rpmbuild")
    mount = tmp_path / "mnt"
    mount.mkdir()
    result = in_namespace(
        f"mount -t tmpfs -o {options} none {mount}\n"
        f"{sys.executable} -m generator package {bundle} --deb --rpm -o {mount}/dist"
        f" && exit 0 || echo rc=$?\n"
        f"find {mount} -mindepth 1\n"
    )
    assert f"goldtune: error: {mount}/dist: cannot write the packages: {why}\n" == result.stderr
    assert result.stdout == "rc=1\n"  # and nothing left under the mount: no dist, no scratch


def test_too_few_file_descriptors_is_one_line_exit_1(bundle, tmp_path):
    """`ulimit -n 6`: on main a traceback (EMFILE while staging)."""
    need("dpkg-deb")
    out = tmp_path / "dist"

    def few_descriptors() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (6, 6))

    result = run_gen(["package", str(bundle), "--deb", "-o", str(out)], preexec_fn=few_descriptors)
    assert result.returncode == 1, result.stdout + result.stderr
    assert (
        result.stderr == f"goldtune: error: {out}: cannot write the packages: Too many open files\n"
    )
    assert not out.exists()


def test_a_killed_package_run_leaves_nothing_after_the_next(bundle, tmp_path):
    """Issue 41 family 3: a `gen package` killed while dpkg-deb builds left its scratch
    directory in DIR, and no later run removed it (fails on main). The next run removes the
    scratch of a run that no longer runs, and only that: a live run's, another name, a link."""
    need("dpkg-deb")
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "dpkg-deb").write_text('#!/bin/sh\nkill -KILL "$PPID"\nsleep 5\n')
    (fake / "dpkg-deb").chmod(0o755)
    out = tmp_path / "dist"
    killed = run_gen(
        ["package", str(bundle), "--deb", "-o", str(out)],
        env={**os.environ, "PATH": f"{fake}:{os.environ['PATH']}"},
    )
    assert killed.returncode == -9, killed.stderr
    assert [p.name for p in out.iterdir() if p.name.startswith(".goldtune-package-")]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "keep").write_text("x")
    kept = {
        out / f".goldtune-package-{os.getpid()}-live0001",  # a run still running
        out / ".goldtune-packages-1-x",
        out / ".goldtune-package-x",
    }
    for directory in kept:
        directory.mkdir()
    (out / f".goldtune-package-{os.getpid() + 10**6}-link0001").symlink_to(elsewhere)
    code, _, err = gen("package", str(bundle), "--deb", "-o", str(out))
    assert code == 0, err
    left = sorted(p.name for p in out.iterdir() if not p.name.endswith(".deb"))
    assert left == sorted(
        [*(p.name for p in kept), f".goldtune-package-{os.getpid() + 10**6}-link0001"]
    )
    assert (elsewhere / "keep").is_file()
