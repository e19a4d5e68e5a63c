"""`gen package BUNDLE --deb --rpm -o DIR`: a bundle as the .deb or .rpm an image pipeline installs.

The package carries two things. The overlay's files at their target paths (``rootfs/etc/…`` as
``/etc/…``), so ``dpkg -L`` and ``rpm -ql`` name every file the bundle puts on the machine and
the package manager removes them with the package. And the whole bundle under
``BUNDLES_HOME/<package>/``, because its maintainer script (``postinst`` configure, ``%post``)
runs the bundle's own install.sh, which installs from ``rootfs/`` beside it, enables units and
writes boot arguments: the same install as a bundle copied by hand. The files land twice with
the same bytes; install.sh finds them in place and leaves them.

Dependencies are left out: which packages provide the NVIDIA driver or fabric manager differs
per distribution and repository, and none of it is sourced here. The packages are built with
the real ``dpkg-deb`` and ``rpmbuild``, from a staged tree whose every timestamp is
``SOURCE_DATE_EPOCH`` (0), so the same bundle gives the same .deb.

The bundle is foreign: read through ``generator.bundle.read`` (no link followed, every file
checked against the manifest), and every path and name that reaches a control file, a spec or
a maintainer script is held to a plain alphabet first (a ``%`` would be an rpm macro).
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from generator import TOOL
from generator.bundle.read import MAX_BUNDLE_FILE_BYTES, BundleFiles, check_intact, read_bundle
from generator.errors import GoldtuneError, InputError, Problem
from generator.foreign import read_beneath
from generator.model.layout import INSTALL_SH, MANIFEST, OVERLAY

# Where the package keeps the bundle its maintainer script installs from.
BUNDLES_HOME = f"/usr/share/{TOOL}/bundles"
FORMATS = ("deb", "rpm")
# SOURCE_DATE_EPOCH for both builders and the mtime of every staged file: reproducible packages.
EPOCH = 0
# What a payload path may hold: it is written into an rpm %files list and a shell script.
PLAIN_PATH = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+@-]*(/[A-Za-z0-9._+@-]+)*")
# Debian Policy 5.6.1 (Package): lowercase letters, digits, + - . ; at least two characters,
# starting with an alphanumeric. Also valid as an rpm Name.
NOT_IN_NAME = re.compile(r"[^a-z0-9+.-]+")
# Debian Policy 5.6.12 (upstream_version) and rpm's Version: digits first, no '-'.
PLAIN_VERSION = re.compile(r"[0-9][A-Za-z0-9.+~]*")
HASH_CHARS = 12  # of the manifest's sha256 in the package version


class PackagingError(GoldtuneError):
    """A builder is missing or failed: not the input's fault (exit 1)."""

    exit_code = 1


@dataclass(frozen=True)
class Identity:
    """Package name and version, derived from the bundle."""

    name: str  # goldtune-<hardware>-<profile>
    version: str  # <tool version>+<first 12 hex digits of manifest.json's sha256>
    summary: str

    @property
    def home(self) -> str:
        return f"{BUNDLES_HOME}/{self.name}"


@dataclass(frozen=True)
class Payload:
    """One file of the package: its absolute path on the machine, bytes and mode."""

    path: str
    content: bytes
    mode: int


def package_name(hardware: str, profile: str) -> str:
    words = [NOT_IN_NAME.sub("-", part.lower()).strip("-.+") for part in (hardware, profile)]
    return "-".join([TOOL, *(word for word in words if word)])


def bundle_identity(bundle: BundleFiles, manifest_bytes: bytes) -> Identity:
    """Name from the bundle's hardware and profile, version from its tool and manifest hash."""
    tool = bundle.manifest.get("tool")
    tool_version = tool.get("version") if isinstance(tool, dict) else None
    source = str(bundle.root / MANIFEST)
    if not isinstance(tool_version, str) or not PLAIN_VERSION.fullmatch(tool_version):
        raise InputError(Problem(source, "tool.version", "not a plain version number"))
    digest = hashlib.sha256(manifest_bytes).hexdigest()[:HASH_CHARS]
    name = package_name(bundle.plan.hardware_name, bundle.plan.profile_name)
    summary = f"{TOOL} tuning bundle {name.removeprefix(TOOL + '-')}"
    return Identity(name, f"{tool_version}+{digest}", summary)


def bundle_payload(bundle: BundleFiles, identity: Identity) -> list[Payload]:
    """The overlay at its targets and the whole bundle under its home, sorted by path."""
    files: list[Payload] = []
    for entry in bundle.manifest["files"]:
        relative = entry["path"]
        if not PLAIN_PATH.fullmatch(relative):
            raise InputError(
                Problem(str(bundle.root / MANIFEST), "files", "a path outside the plain alphabet")
            )
        content = read_beneath(bundle.root, relative, MAX_BUNDLE_FILE_BYTES)
        mode = int(entry.get("mode", "0644"), 8) & 0o755
        files.append(Payload(f"{identity.home}/{relative}", content, mode))
        if relative.startswith(OVERLAY):
            files.append(Payload("/" + relative.removeprefix(OVERLAY), content, mode))
    manifest = read_beneath(bundle.root, MANIFEST, MAX_BUNDLE_FILE_BYTES)
    files.append(Payload(f"{identity.home}/{MANIFEST}", manifest, 0o644))
    return sorted(files, key=lambda item: item.path)


def install_command(identity: Identity, prefix: str, root: str) -> str:
    """The maintainer script's one install line: the bundle's install.sh below ``prefix``
    (a shell word), installing into ``root``.

    A package is how an image pipeline installs the bundle, so the image-build mode: units are
    enabled without being started and nothing fails for a GPU or a daemon the build VM lacks
    (install.sh also takes that mode by itself for a ``--root`` other than /).
    """
    return f'"{prefix}{identity.home}/{INSTALL_SH}" --image-build --root "{root}"'


def postinst(identity: Identity) -> str:
    # dpkg --root with --force-script-chrootless runs the script outside the root and says
    # where it is in DPKG_ROOT (dpkg(1)); a plain install leaves it empty.
    return (
        "#!/bin/sh\n"
        f"# {TOOL}: install the bundle's boot-time configuration with its install.sh.\n"
        "set -e\n"
        'case "$1" in\n'
        "configure)\n"
        f"    {install_command(identity, '${DPKG_ROOT:-}', '${DPKG_ROOT:-/}')}\n"
        "    ;;\n"
        "esac\n"
    )


def deb_control(identity: Identity) -> str:
    return (
        f"Package: {identity.name}\n"
        f"Version: {identity.version}\n"
        "Architecture: all\n"
        f"Maintainer: {TOOL} <{TOOL}@localhost>\n"
        "Section: admin\n"
        "Priority: optional\n"
        f"Description: {identity.summary}\n"
        f" Boot-time OS configuration generated by {TOOL}; the bundle, with its EXPLAIN.md,\n"
        f" is in {identity.home}.\n"
    )


def rpm_spec(identity: Identity, files: Iterable[Payload]) -> str:
    listed = "\n".join(f"%attr({item.mode:04o},root,root) {item.path}" for item in files)
    return f"""Name: {identity.name}
Version: {identity.version}
Release: 1
Summary: {identity.summary}
License: Unspecified
BuildArch: noarch
AutoReqProv: no

%global debug_package %{{nil}}
%global __os_install_post %{{nil}}
%global _build_id_links none

%description
Boot-time OS configuration generated by {TOOL}; the bundle, with its EXPLAIN.md, is in
{identity.home}.

%install
cp -a %{{payload}}/. %{{buildroot}}/

%post
{install_command(identity, "", "/")}

%files
{listed}
"""


def stage(files: Iterable[Payload], root: Path) -> None:
    for item in files:
        target = root / item.path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(item.content)
        target.chmod(item.mode)
    for parent, dirs, names in os.walk(root):
        for name in [*dirs, *names]:
            os.utime(os.path.join(parent, name), (EPOCH, EPOCH))


def _builder(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        package = "rpm" if name == "rpmbuild" else "dpkg"
        raise PackagingError(f"{name} not found: install the {package} package")
    return path


def _run(command: list[str]) -> None:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "LC_ALL": "C",
        "SOURCE_DATE_EPOCH": str(EPOCH),
        "HOME": os.environ.get("HOME", "/"),
    }
    result = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    if result.returncode != 0:
        last = (result.stderr or result.stdout).strip().splitlines()[-1:] or ["no output"]
        raise PackagingError(f"{Path(command[0]).name} failed: {last[0][:200]}")


def build_deb(identity: Identity, files: list[Payload], work: Path, out: Path) -> Path:
    tree = work / "deb"
    stage(files, tree)
    control = tree / "DEBIAN"
    control.mkdir()
    (control / "control").write_text(deb_control(identity))
    (control / "postinst").write_text(postinst(identity))
    (control / "postinst").chmod(0o755)
    target = out / f"{identity.name}_{identity.version}_all.deb"
    _run([_builder("dpkg-deb"), "--root-owner-group", "-Zxz", "--build", str(tree), str(target)])
    return target


def build_rpm(identity: Identity, files: list[Payload], work: Path, out: Path) -> Path:
    payload = work / "rpm-payload"
    stage(files, payload)
    spec = work / f"{identity.name}.spec"
    work.mkdir(parents=True, exist_ok=True)
    spec.write_text(rpm_spec(identity, files))
    name_format = "%%{NAME}-%%{VERSION}-%%{RELEASE}.%%{ARCH}.rpm"
    _run(
        [
            _builder("rpmbuild"),
            "-bb",
            "--quiet",
            "--define",
            f"_topdir {work / 'rpmbuild'}",
            "--define",
            f"_rpmdir {out}",
            "--define",
            f"_build_name_fmt {name_format}",
            "--define",
            f"payload {payload}",
            "--define",
            "use_source_date_epoch_as_buildtime 1",
            "--define",
            f"_buildhost {TOOL}",
            str(spec),
        ]
    )
    return out / f"{identity.name}-{identity.version}-1.noarch.rpm"


def package_bundle(bundle_dir: Path, formats: Iterable[str], output: Path) -> list[Path]:
    """Build each format's package of the bundle into ``output``; nothing written on bad input."""
    bundle = read_bundle(bundle_dir)
    check_intact(bundle)
    manifest = read_beneath(bundle.root, MANIFEST, MAX_BUNDLE_FILE_BYTES)
    identity = bundle_identity(bundle, manifest)
    files = bundle_payload(bundle, identity)
    if output.exists() and (output.is_symlink() or not output.is_dir()):
        raise InputError(Problem(str(output), "", "not a directory (where the packages go)"))
    builders = {"deb": build_deb, "rpm": build_rpm}
    for name in formats:
        _builder("rpmbuild" if name == "rpm" else "dpkg-deb")
    output.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    with tempfile.TemporaryDirectory(prefix=f".{TOOL}-package-", dir=output) as scratch:
        work, built = Path(scratch), Path(scratch) / "out"
        built.mkdir()
        for name in formats:
            package = builders[name](identity, files, work / name, built)
            # Built aside, then moved into place whole: a failed build leaves nothing behind.
            written.append(Path(shutil.move(str(package), output / package.name)))
    return written
