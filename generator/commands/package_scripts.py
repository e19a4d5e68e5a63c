"""The maintainer scripts of `gen package`: the .deb's postinst, prerm and postrm, and the same
steps as the .rpm's scriptlets (package.py writes them into its spec).

install.sh installs the overlay and takes it back, files and units; the directories it made on
the way are not in its record. So the postinst (%post) notes, before install.sh runs, which of
the directories an install may make are not there yet (``CREATED_DIRS``), and the purge (erase)
removes those, deepest first, once empty: a directory that was there before the package stays,
even empty. With the metrics file and the preflight's label, nothing of the bundle is left.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import PurePosixPath

from generator import TOOL
from generator.model.layout import (
    INSTALL_RECORD,
    INSTALL_SH,
    LIBEXEC,
    NFD_PREFLIGHT_FILE,
    TEXTFILE,
    TUNED_PROFILES_DIRS,
    UNIT_DIR,
)

# Where the package keeps the bundle its maintainer script installs from.
BUNDLES_HOME = f"/usr/share/{TOOL}/bundles"
# What the bundle's units write on the node (the report script), not installed files: removed
# on purge (erase), so that nothing reports a bundle that is gone
RUNTIME_OUTPUTS = (TEXTFILE, NFD_PREFLIGHT_FILE)
RECORD_DIR = str(PurePosixPath(INSTALL_RECORD).parent)
CREATED_DIRS = f"{RECORD_DIR}/package-created-dirs"
# Directories install.sh writes to beside the overlay's own: its record, the boot check's script
# (LIBEXEC), the units' [Install] links, where it moves the tuned profile, bootc's kargs.d
EXTRA_DIRS = (
    RECORD_DIR,
    LIBEXEC,
    f"{UNIT_DIR}/multi-user.target.wants",
    *TUNED_PROFILES_DIRS,
    "/usr/lib/bootc/kargs.d",
)
# Never removed, whatever the record says: the roots every system has
KEPT_DIRS = frozenset({"/", "/etc", "/usr", "/usr/lib", "/usr/local", "/var", "/var/lib"})


def install_dirs(targets: Iterable[str]) -> tuple[str, ...]:
    """The directories an install of these overlay targets may create, each with its parents
    (a tuned profile's also under every directory tuned reads profiles from), sorted."""
    found: set[str] = set()
    # a file in each extra directory stands for what install.sh writes there
    paths = [PurePosixPath(extra, "-") for extra in EXTRA_DIRS]
    for target in map(PurePosixPath, targets):
        tuned = str(target.parent.parent) in TUNED_PROFILES_DIRS
        paths += [
            target,
            *(PurePosixPath(d, target.parent.name, "-") for d in TUNED_PROFILES_DIRS if tuned),
        ]
    for path in paths:
        found.update(str(parent) for parent in path.parents)
    return tuple(sorted(found - KEPT_DIRS))


@dataclass(frozen=True)
class Identity:
    """Package name and version, derived from the bundle."""

    name: str  # goldtune-<hardware>-<profile>
    version: str  # <tool version, ~ before pre-releases>+<12 hex digits of manifest's sha256>
    summary: str
    # directories an install may create (install_dirs): the ones it did are removed on purge
    dirs: tuple[str, ...] = ()

    @property
    def home(self) -> str:
        return f"{BUNDLES_HOME}/{self.name}"


def install_command(identity: Identity, prefix: str, root: str) -> str:
    """The maintainer script's one install line: the bundle's install.sh below ``prefix``
    (a shell word), installing into ``root``.

    A package is how an image pipeline installs the bundle, so the image-build mode: units are
    enabled without being started and nothing fails for a GPU or a daemon the build VM lacks
    (install.sh also takes that mode by itself for a ``--root`` other than /).
    """
    return f'"{prefix}{identity.home}/{INSTALL_SH}" --image-build --root "{root}"'


def uninstall_command(identity: Identity, prefix: str, root: str) -> str:
    """The removal's take-back: the bundle's install.sh undoes what its install did (units
    disabled, files removed, boot arguments and the tuned selection given back). A take-back
    that fails says so and does not stop the removal (the package manager would keep a package
    that cannot be removed)."""
    script = f'"{prefix}{identity.home}/{INSTALL_SH}"'
    warning = f"{TOOL}: the take-back of {identity.name} is incomplete (see above)"
    return f'{script} --uninstall --root "{root}" || echo "{warning}" >&2'


def record_new_dirs(identity: Identity, prefix: str) -> str:
    """Before install.sh runs: append the directories it may create that are not there yet to
    CREATED_DIRS (an upgrade's install finds them there and adds nothing)."""
    listed = " ".join(identity.dirs)
    made = f'"{prefix}{CREATED_DIRS}"'
    return "\n    ".join(
        [
            f'new=$(for made in {listed}; do [ -d "{prefix}$made" ] || echo "$made"; done)',
            f'mkdir -p "{prefix}{RECORD_DIR}"',
            f'[ -z "$new" ] || echo "$new" >>{made}',
        ]
    )


def record_cleanup(prefix: str) -> str:
    """What a purge leaves of the tool's state: the install record's directory, once empty (a
    record a failed take-back left is kept: the next install reads it to remove what it lists),
    the directories the install created (record_new_dirs), once empty, and the runtime outputs
    of the bundle's units, which would go on reporting a removed bundle
    to node_exporter and Node Feature Discovery: the metrics file and the preflight's label."""
    outputs = " ".join(f'"{prefix}{path}"' for path in RUNTIME_OUTPUTS)
    made = f'"{prefix}{CREATED_DIRS}"'
    return "\n    ".join(
        [
            f"rm -f {outputs}",
            f"if [ -f {made} ]; then",
            f"    sort -r -u {made} | while read -r made; do",
            f'        rmdir "{prefix}$made" 2>/dev/null || :',
            "    done",
            f"    rm -f {made}",
            "fi",
            f'rmdir "{prefix}{RECORD_DIR}" 2>/dev/null || :',
        ]
    )


# dpkg --root with --force-script-chrootless runs the scripts outside the root and says where it
# is in DPKG_ROOT (dpkg(1)); a plain install leaves it empty.
def deb_script(case: str, command: str, what: str) -> str:
    return (
        f'#!/bin/sh\n# {TOOL}: {what}\nset -e\ncase "$1" in\n{case})\n    {command}\n    ;;\nesac\n'
    )


def maintainer_scripts(identity: Identity) -> dict[str, str]:
    """The .deb's maintainer scripts by name: install on configure, take back on remove (not on
    upgrade: the new version's install replaces the old one's), clean up on purge."""
    prefix, root = "${DPKG_ROOT:-}", "${DPKG_ROOT:-/}"
    return {
        "postinst": deb_script(
            "configure",
            f"{record_new_dirs(identity, prefix)}\n    {install_command(identity, prefix, root)}",
            "install the bundle's boot-time configuration with its install.sh.",
        ),
        "prerm": deb_script(
            "remove",
            uninstall_command(identity, prefix, root),
            "take back what the install did, while the bundle's files are still here.",
        ),
        "postrm": deb_script(
            "purge", record_cleanup(prefix), "remove what is left of the install and its record."
        ),
    }


def postinst(identity: Identity) -> str:
    return maintainer_scripts(identity)["postinst"]
