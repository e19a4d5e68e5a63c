"""`gen package BUNDLE --deb --rpm -o DIR`: a bundle as the .deb or .rpm an image pipeline installs.

The package carries the bundle, whole, under ``BUNDLES_HOME/<package>/`` (/usr/share: Debian
Policy 9.1.2 keeps packages out of /usr/local), and its maintainer script (``postinst``
configure, ``%post``) runs the bundle's own install.sh, which installs from ``rootfs/`` beside
it, enables units and writes boot arguments: the same install as a bundle copied by hand, and
the one installer of the overlay (it merges the image's nccl.conf, puts the tuned profile where
the image's tuned reads, keeps a record of every file it wrote in /var/lib/goldtune). The
overlay's targets are not files of the package: as package files in /etc they would be
conffiles that install.sh rewrites (dpkg would ask about each at upgrade), and the removal that
takes them back (``install.sh --uninstall``) would leave rpm warning about each file it no
longer finds. Every goldtune bundle package provides ``goldtune-bundle`` and conflicts with it:
one image, one bundle. Versions sort as the tool's do (``package_version``).

Dependencies are left out: which packages provide the NVIDIA driver or fabric manager differs
per distribution and repository, and none of it is sourced here. The packages are built with
the real ``dpkg-deb`` and ``rpmbuild``, from a staged tree whose every timestamp is
``SOURCE_DATE_EPOCH`` (0), so the same bundle gives the same .deb.

The bundle is foreign: read through ``generator.bundle.read`` (no link followed, every file
checked against the manifest), and every path and name that reaches a control file, a spec or
a maintainer script is held to a plain alphabet first (a ``%`` would be an rpm macro). The
package holds the verified bundle and nothing else: an overlay file whose target is a bundle's
home (it would replace the install.sh the maintainer script runs), the control directory or
another payload file's path is bad input. Every file and directory of the staged tree gets an
explicit mode (the caller's umask never reaches dpkg-deb), and the packages are built aside and
moved into DIR only when every one is built: all or nothing.

Removing the package takes back what its install did: the prerm (``remove``) and ``%preun``
(erase, not an upgrade) run ``install.sh --uninstall`` while the bundle and its units are still
there; the postrm (``purge``) and ``%postun`` remove the install record's directory once empty
and what the bundle's units wrote at run time (the metrics file, the preflight's NFD label).
The rpm owns every directory of its tree (``%dir``), so an erase leaves none behind; dpkg
removes the directories it made by itself.
"""

from __future__ import annotations

import contextlib
import errno
import gzip
import hashlib
import os
import re
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from generator import TOOL
from generator.bundle.read import MAX_BUNDLE_FILE_BYTES, Bundle, check_intact, read_bundle
from generator.bundle.write import check_name_lengths, process_runs
from generator.commands.package_scripts import (
    BUNDLES_HOME,
    Identity,
    install_command,
    install_dirs,
    maintainer_scripts,
    record_cleanup,
    record_new_dirs,
    uninstall_command,
)
from generator.errors import GoldtuneError, InputError, Problem
from generator.foreign import kind_of, read_beneath
from generator.model.layout import (
    INSTALL_LIST,
    INSTALL_SH,
    MANIFEST,
    OVERLAY,
    PLAN_FILE,
    PROVENANCE,
    PROVENANCE_ENVELOPE,
)

FORMATS = ("deb", "rpm")
# SOURCE_DATE_EPOCH for both builders, the mtime of every staged file and the date of the
# .deb's changelog: reproducible packages. 2025-01-01T00:00:00Z: lintian refuses files dated
# before 1975 (package-contains-ancient-file), as the archive's dinstall would.
EPOCH = 1735689600
EPOCH_RFC2822 = "Wed, 01 Jan 2025 00:00:00 +0000"
RPM_CHANGELOG_DATE = "Wed Jan 01 2025"
# The .deb's Maintainer: DEBFULLNAME and DEBEMAIL, as Debian's own tools (dch) read them; else a
# placeholder of a reserved domain (RFC 2606) that says a site sets its own.
DEFAULT_MAINTAINER = (TOOL, f"{TOOL}@example.com")
# What a payload path may hold: it is written into an rpm %files list and a shell script.
PLAIN_PATH = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+@-]*(/[A-Za-z0-9._+@-]+)*")
# Debian Policy 5.6.1 (Package): lowercase letters, digits, + - . ; at least two characters,
# starting with an alphanumeric. Also valid as an rpm Name.
NOT_IN_NAME = re.compile(r"[^a-z0-9+.-]+")
# A Maintainer field's text: it goes into a control file and a changelog line
PLAIN_MAINTAINER = re.compile(r"[A-Za-z0-9][A-Za-z0-9 ._'-]* <[A-Za-z0-9._+-]+@[A-Za-z0-9.-]+>")
# Debian Policy 5.6.12 (upstream_version) and rpm's Version: digits first, no '-'.
PLAIN_VERSION = re.compile(r"[0-9][A-Za-z0-9.+~]*")
# A hardware or profile name as `gen` writes one (inputs' BundleName): a plan.json edited to
# another (300 characters, a slash) would make a package file name no file system takes.
BUNDLE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
HASH_CHARS = 12  # of the manifest's sha256 in the package version
# The parts of a PEP 440 version that come before its release: aN, bN, rcN and .devN
PRE_RELEASE = re.compile(r"(?:(?<=[0-9])(?:a|b|rc)[0-9]+|\.dev[0-9]+)(?=\.|$)")
# Every bundle package provides this and conflicts with it (Debian Policy 7.6.2, 7.5; rpm's
# Provides/Conflicts, a package's own capability never conflicting with itself): one image, one
# bundle; installing another replaces nothing and is refused until the first is removed.
BUNDLE_CAPABILITY = f"{TOOL}-bundle"
# dpkg-deb refuses a control directory outside 0755..0775 and a maintainer script outside
# 0555..0775 (dpkg-deb/build.c check_file_perms): modes set, never left to the umask.
DIR_MODE = 0o755
CONTROL_MODE = 0o644
SCRIPT_MODE = 0o755
# Where dpkg-deb looks for the control files: no payload file may be staged there.
DEB_CONTROL_DIR = "DEBIAN"
# The files the maintainer scripts run and read: a bundle without them is not installable.
REQUIRED_FILES = (INSTALL_SH, INSTALL_LIST)


class PackagingError(GoldtuneError):
    """A builder is missing or failed: not the input's fault (exit 1)."""

    exit_code = 1


@dataclass(frozen=True)
class Payload:
    """One file of the package: its absolute path on the machine, bytes and mode."""

    path: str
    content: bytes
    mode: int


def package_name(hardware: str, profile: str) -> str:
    words = [NOT_IN_NAME.sub("-", part.lower()).strip("-.+") for part in (hardware, profile)]
    return "-".join([TOOL, *(word for word in words if word)])


def bundle_identity(bundle: Bundle, manifest_bytes: bytes) -> Identity:
    """Name from the bundle's hardware and profile, version from its tool and manifest hash."""
    tool_version = bundle.tool_version
    source = str(bundle.root / MANIFEST)
    if not PLAIN_VERSION.fullmatch(tool_version):
        raise InputError(Problem(source, "tool.version", "not a plain version number"))
    digest = hashlib.sha256(manifest_bytes).hexdigest()[:HASH_CHARS]
    for field, value in (
        ("hardware", bundle.plan.hardware_name),
        ("profile", bundle.plan.profile_name),
    ):
        if not BUNDLE_NAME.fullmatch(value):
            raise InputError(
                Problem(
                    str(bundle.root / PLAN_FILE),
                    field,
                    f"not a name gen writes ({len(value)} characters; 1-64 of [A-Za-z0-9._-])",
                )
            )
    name = package_name(bundle.plan.hardware_name, bundle.plan.profile_name)
    summary = f"Boot-time tuning bundle {name.removeprefix(TOOL + '-')} by {TOOL}"
    targets = ["/" + e.path.removeprefix(OVERLAY) for e in bundle.files if e.target is not None]
    version = f"{package_version(tool_version)}+{digest}"
    return Identity(name, version, summary, install_dirs(targets))


def package_version(tool_version: str) -> str:
    """The tool's PEP 440 version as dpkg and rpm order it: a pre-release or a development
    build of X before X itself. Both sort ``~`` before anything, even the end of the version
    (Debian Policy 5.6.12; rpm since 4.10, rpmvercmp), where ``0.2.1.dev3`` would sort after
    ``0.2.1`` (the longer string wins). ``0.2.1.dev3+g1a2b3c4`` -> ``0.2.1~dev3+g1a2b3c4``,
    ``0.2.1rc1`` -> ``0.2.1~rc1``; a release is itself. A development build of a final release
    sorts after that release's alphas (``~dev`` after ``~a``): hatch-vcs makes them only of the
    release after a tag."""
    public, plus, local = tool_version.partition("+")  # the local part (+g1a2b3c4) as it is
    return PRE_RELEASE.sub(lambda found: "~" + found.group(0).lstrip("."), public) + plus + local


def bundle_payload(bundle: Bundle, identity: Identity) -> list[Payload]:
    """The whole bundle under its home, sorted by path; the overlay's targets are install.sh's
    (module docstring)."""
    files: list[Payload] = []
    for entry in bundle.files:
        relative = entry.path
        if not PLAIN_PATH.fullmatch(relative):
            raise InputError(
                Problem(str(bundle.root / MANIFEST), "files", "a path outside the plain alphabet")
            )
        content = read_beneath(bundle.root, relative, MAX_BUNDLE_FILE_BYTES)
        files.append(Payload(f"{identity.home}/{relative}", content, entry.mode & 0o755))
        if relative.startswith(OVERLAY):
            check_target(bundle, "/" + relative.removeprefix(OVERLAY))
    manifest = read_beneath(bundle.root, MANIFEST, MAX_BUNDLE_FILE_BYTES)
    files.append(Payload(f"{identity.home}/{MANIFEST}", manifest, 0o644))
    # the provenance statement and its signature, so that the node verifies the bundle it got
    # (install.sh --check --pubkey in the bundle's home)
    for seal in (PROVENANCE, PROVENANCE_ENVELOPE):
        if os.path.lexists(bundle.root / seal):
            content = read_beneath(bundle.root, seal, MAX_BUNDLE_FILE_BYTES)
            files.append(Payload(f"{identity.home}/{seal}", content, 0o644))
    check_payload(bundle, files)
    return sorted(files, key=lambda item: item.path)


def check_target(bundle: Bundle, target: str) -> None:
    """An overlay file lands on the machine, never in a bundle's home (it would replace the
    install.sh the maintainer script runs, or its data) nor in dpkg's control directory."""
    if target.startswith(f"{BUNDLES_HOME}/"):
        why = f"an overlay file inside {BUNDLES_HOME}, where the package keeps the bundle"
    elif PurePosixPath(target) in PurePosixPath(BUNDLES_HOME).parents:
        why = f"an overlay file where {BUNDLES_HOME} needs a directory"
    elif target.split("/")[1] == DEB_CONTROL_DIR:
        why = f"an overlay file inside /{DEB_CONTROL_DIR}, dpkg's control directory"
    else:
        return
    raise InputError(Problem(str(bundle.root / MANIFEST), "files", f"{why}: {target}"))


def check_payload(bundle: Bundle, files: list[Payload]) -> None:
    """The bundle's own files are what the package runs: refuse a bundle that lacks install.sh
    or install.list, and two files at one path or a file where another needs a directory (one
    would replace the other in the staged tree)."""
    source = str(bundle.root / MANIFEST)
    listed = {entry.path for entry in bundle.files}
    for required in REQUIRED_FILES:
        if required not in listed:
            raise InputError(Problem(source, "files", f"no {required}: not an installable bundle"))
    seen: set[str] = set()
    for path in sorted(item.path for item in files):
        if path in seen:
            raise InputError(Problem(source, "files", f"two files of the package at {path}"))
        seen.add(path)
    for path in sorted(seen):
        parent = next((str(p) for p in PurePosixPath(path).parents if str(p) in seen), None)
        if parent is not None:
            why = f"{parent} is a file of the package, and {path} needs it as a directory"
            raise InputError(Problem(source, "files", why))


def maintainer() -> str:
    """``Name <address>`` from DEBFULLNAME and DEBEMAIL, held to one plain line."""
    name = os.environ.get("DEBFULLNAME") or DEFAULT_MAINTAINER[0]
    address = os.environ.get("DEBEMAIL") or DEFAULT_MAINTAINER[1]
    text = f"{name} <{address}>"
    if not PLAIN_MAINTAINER.fullmatch(text):
        raise InputError(Problem("DEBFULLNAME/DEBEMAIL", "", "not a plain Name <address>"))
    return text


def deb_control(identity: Identity) -> str:
    return (
        f"Package: {identity.name}\n"
        f"Version: {identity.version}\n"
        "Architecture: all\n"
        f"Maintainer: {maintainer()}\n"
        "Section: admin\n"
        "Priority: optional\n"
        f"Provides: {BUNDLE_CAPABILITY}\n"
        f"Conflicts: {BUNDLE_CAPABILITY}\n"
        f"Description: {identity.summary}\n"
        f" Boot-time OS configuration generated by {TOOL}. The bundle, with its\n"
        f" EXPLAIN.md, is in {identity.home}.\n"
    )


def deb_docs(identity: Identity) -> list[Payload]:
    """The copyright file and the changelog every .deb carries (Debian Policy 12.5, 12.7)."""
    doc = f"/usr/share/doc/{identity.name}"
    copyright_text = (
        "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\n"
        f"Upstream-Name: {TOOL}\n\n"
        "Files: *\n"
        f"Copyright: the {TOOL} authors\n"
        "License: Apache-2.0\n"
        " On Debian systems, the full text of the Apache License, Version 2.0 is in\n"
        " /usr/share/common-licenses/Apache-2.0.\n"
    )
    changelog = (
        f"{identity.name} ({identity.version}) unstable; urgency=medium\n\n"
        f"  * {identity.summary}.\n\n"
        f" -- {maintainer()}  {EPOCH_RFC2822}\n"
    )
    compressed = gzip.compress(changelog.encode(), compresslevel=9, mtime=0)
    return [
        Payload(f"{doc}/copyright", copyright_text.encode(), 0o644),
        Payload(f"{doc}/changelog.gz", compressed, 0o644),
    ]


def owned_directories(files: Iterable[Payload]) -> list[str]:
    """The directories the rpm owns, so that an erase removes them: every directory of the
    bundle's tree and its parents up to /usr/share/goldtune (not /usr/share itself)."""
    top = PurePosixPath(BUNDLES_HOME).parent
    found = {
        str(parent)
        for item in files
        for parent in PurePosixPath(item.path).parents
        if parent == top or top in parent.parents
    }
    return sorted(found)


def rpm_spec(identity: Identity, files: Iterable[Payload]) -> str:
    files = list(files)
    owned = [f"%dir %attr({DIR_MODE:04o},root,root) {path}" for path in owned_directories(files)]
    listed = "\n".join(
        [*owned, *(f"%attr({item.mode:04o},root,root) {item.path}" for item in files)]
    )
    return f"""Name: {identity.name}
Version: {identity.version}
Release: 1
Summary: {identity.summary}
License: Apache-2.0
Group: System Environment/Base
BuildArch: noarch
AutoReqProv: no
Packager: {maintainer()}
Provides: {BUNDLE_CAPABILITY}
Conflicts: {BUNDLE_CAPABILITY}

%global debug_package %{{nil}}
%global __os_install_post %{{nil}}
%global _build_id_links none

%description
Boot-time OS configuration generated by {TOOL}. The bundle, with its
EXPLAIN.md, is in {identity.home}.

%install
cp -a %{{payload}}/. %{{buildroot}}/

%post
{record_new_dirs(identity, "")}
{install_command(identity, "", "/")}

%preun
# erase only ($1 is 0), not an upgrade: the new version's install replaces this one's
if [ "$1" -eq 0 ]; then
    {uninstall_command(identity, "", "/")}
fi

%postun
if [ "$1" -eq 0 ]; then
    {record_cleanup("")}
fi

%files
{listed}

%changelog
* {RPM_CHANGELOG_DATE} {maintainer()} - {identity.version}-1
- {identity.summary}.
"""


def stage(files: Iterable[Payload], root: Path) -> None:
    """Every payload file below ``root`` with its mode, every directory 0755 (not the umask's
    mode: the package installs its directories with these), every timestamp EPOCH."""
    root.mkdir(parents=True, exist_ok=True)
    root.chmod(DIR_MODE)
    for item in files:
        target = root / item.path.lstrip("/")
        for folder in reversed(target.relative_to(root).parents[:-1]):
            make_dir(root / folder)
        target.write_bytes(item.content)
        target.chmod(item.mode)
    for parent, dirs, names in os.walk(root):
        for name in [*dirs, *names]:
            os.utime(os.path.join(parent, name), (EPOCH, EPOCH))


def make_dir(path: Path) -> None:
    path.mkdir(exist_ok=True)
    path.chmod(DIR_MODE)


def write_file(path: Path, text: str, mode: int) -> None:
    path.write_text(text)
    path.chmod(mode)


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
    stage([*files, *deb_docs(identity)], tree)
    control = tree / DEB_CONTROL_DIR
    make_dir(control)
    write_file(control / "control", deb_control(identity), CONTROL_MODE)
    for name, script in maintainer_scripts(identity).items():
        write_file(control / name, script, SCRIPT_MODE)
    target = out / package_file_names(identity, ["deb"])[0]
    _run([_builder("dpkg-deb"), "--root-owner-group", "-Zxz", "--build", str(tree), str(target)])
    return target


def build_rpm(identity: Identity, files: list[Payload], work: Path, out: Path) -> Path:
    payload = work / "rpm-payload"
    stage(files, payload)
    spec = work / f"{identity.name}.spec"
    write_file(spec, rpm_spec(identity, files), CONTROL_MODE)
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
    return out / package_file_names(identity, ["rpm"])[0]


def package_file_names(identity: Identity, formats: Iterable[str]) -> list[str]:
    names = {
        "deb": f"{identity.name}_{identity.version}_all.deb",
        "rpm": f"{identity.name}-{identity.version}-1.noarch.rpm",
    }
    return [names[name] for name in formats]


def check_output(output: Path, names: list[str]) -> None:
    """DIR is a directory (or will be), and each package's name in it is free or a regular file
    (replaced: the same name is the same version); a directory or anything else there is the
    caller's to move (exit 2), never renamed over."""
    if os.path.lexists(output) and (output.is_symlink() or not output.is_dir()):
        raise InputError(Problem(str(output), "", "not a directory (where the packages go)"))
    for name in names:
        try:
            mode = os.lstat(output / name).st_mode
        except FileNotFoundError:
            continue
        except OSError as error:
            if error.errno in (errno.ENAMETOOLONG, errno.ENOTDIR):  # DIR's name: bad input
                problem = Problem(str(output / name), "", error.strerror or str(error))
                raise InputError(problem) from None
            raise PackagingError(f"{output / name}: {error.strerror or error}") from None
        if not stat.S_ISREG(mode):
            raise InputError(
                Problem(str(output / name), "", f"is {kind_of(mode)}: not replaced by the package")
            )


def package_bundle(bundle_dir: Path, formats: Iterable[str], output: Path) -> list[Path]:
    """Build each format's package of the bundle into ``output``: every one or none (nothing
    written on bad input or a failure; a DIR this run made is removed again)."""
    # rpmbuild runs in its own directories: a relative DIR ("-o dist/") would name another one.
    output = output.absolute()
    check_name_lengths(output)  # a name too long: exit 2 before anything is read or built
    made_output = not os.path.lexists(output)
    try:
        return package_into(bundle_dir, list(formats), output)
    except OSError as error:  # a full disk, a read-only DIR, no file descriptor left…
        if made_output:
            with contextlib.suppress(OSError):
                output.rmdir()
        why = error.strerror or str(error)
        if error.errno == errno.ENAMETOOLONG:  # DIR's own name: bad input, not a failure
            raise InputError(Problem(str(output), "", f"cannot be written: {why}")) from None
        raise PackagingError(f"{output}: cannot write the packages: {why}") from None


def package_into(bundle_dir: Path, formats: list[str], output: Path) -> list[Path]:
    bundle = read_bundle(bundle_dir)
    check_intact(bundle)
    manifest = read_beneath(bundle.root, MANIFEST, MAX_BUNDLE_FILE_BYTES)
    identity = bundle_identity(bundle, manifest)
    files = bundle_payload(bundle, identity)
    check_output(output, package_file_names(identity, formats))
    for name in formats:
        _builder("rpmbuild" if name == "rpm" else "dpkg-deb")
    return build_all(identity, files, formats, output)


def build_all(
    identity: Identity, files: list[Payload], formats: list[str], output: Path
) -> list[Path]:
    """Every package built aside in a scratch directory of DIR, the staged trees removed, then
    the packages moved into place; a failure anywhere leaves none of them and no scratch."""
    builders = {"deb": build_deb, "rpm": build_rpm}
    output.mkdir(parents=True, exist_ok=True)
    remove_dead_scratches(output)
    scratch = Path(tempfile.mkdtemp(prefix=f"{SCRATCH_PREFIX}{os.getpid()}-", dir=output))
    written: list[Path] = []
    try:
        built = scratch / "out"
        built.mkdir()
        packages = [builders[name](identity, files, scratch / name, built) for name in formats]
        for name in formats:
            remove_tree(scratch / name)
        for package in packages:
            os.replace(package, output / package.name)  # one file system: a rename
            written.append(output / package.name)
        built.rmdir()
        scratch.rmdir()
    except BaseException:
        for path in written:
            with contextlib.suppress(OSError):
                path.unlink()
        with contextlib.suppress(OSError):
            remove_tree(scratch)
        raise
    return written


# A run's scratch directory in DIR: .goldtune-package-<pid>-<random>, so that a later run knows
# the one a killed run left (its process gone) and removes it.
SCRATCH_PREFIX = f".{TOOL}-package-"
SCRATCH_NAME = re.compile(rf"\.{TOOL}-package-(?P<pid>\d+)-\w+")


def remove_dead_scratches(output: Path) -> None:
    """Remove the scratch directories killed runs left in DIR: our name with the id of a process
    that no longer runs, and a real directory of our user (a link is never followed, rmtree
    enters none)."""
    try:
        with os.scandir(output) as entries:
            names = [entry.name for entry in entries if _is_dead_scratch(entry.name)]
    except OSError:
        return
    for name in names:
        try:
            info = os.lstat(output / name)
        except OSError:
            continue
        if stat.S_ISDIR(info.st_mode) and info.st_uid == os.geteuid():
            shutil.rmtree(output / name, ignore_errors=True)


def _is_dead_scratch(name: str) -> bool:
    match = SCRATCH_NAME.fullmatch(name)
    return bool(match and not process_runs(int(match["pid"])))


def remove_tree(path: Path) -> None:
    """``shutil.rmtree``, and where that fails for want of file descriptors (it holds one per
    level), a bottom-up walk that holds one at a time."""
    try:
        shutil.rmtree(path)
    except FileNotFoundError:
        return
    except OSError:
        for parent, dirs, names in os.walk(path, topdown=False):
            for name in names:
                os.unlink(os.path.join(parent, name))
            for name in dirs:
                os.rmdir(os.path.join(parent, name))
        os.rmdir(path)
