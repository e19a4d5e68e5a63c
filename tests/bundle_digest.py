"""The digest of every shipped bundle's content, which CHANGELOG.md's Unreleased section records.

A bundle a fleet bakes changes only with a changelog entry saying so (tests/test_changelog.py):
each shipped bundle's files (path, mode, bytes) are hashed, with the goldtune version set aside
as the fleet gate sets it aside (generator.bundle.equal: manifest.json, plan.json, EXPLAIN.md's
header; the compressed forms, whose bytes depend on the zlib that made them, are the plain
forms already hashed). The shipped bundles: every system x profile in hardware_db/ and
profiles/, every example hardware file in examples/ with the training profile, and the DGX H100
bundles of every profile for every distribution table (what a table changes is the same on
every system; all 500 combinations take 30 s). The scripts, units and the cloud-init user-data
are in it: the snapshot tree alone leaves them out.

``tests/bundle_digests.txt`` records each bundle's digest, so a failure names the bundles that
changed; CHANGELOG.md's ``Bundles digest:`` line is the digest of that file, so no recorded
change lands without touching the changelog.

    python -m tests.bundle_digest           # print the digest line for CHANGELOG.md
    python -m tests.bundle_digest --write   # rewrite tests/bundle_digests.txt, then print it
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
from collections.abc import Iterator
from functools import cache
from pathlib import Path

from generator.bundle.equal import stamp_free, version_free
from generator.commands.generate import render_for
from generator.model.layout import MANIFEST, PROVENANCE
from generator.render.outputs import RenderedFiles

REPO = Path(__file__).resolve().parents[1]
RECORD = REPO / "tests" / "bundle_digests.txt"
CHANGELOG = REPO / "CHANGELOG.md"
LINE_PREFIX = "Bundles digest: "
# the distribution tables' bundles are made on this system, for every profile
DISTRO_SYSTEM = "dgx-h100"
EXAMPLE_PROFILE = "training"


def stems(folder: Path) -> list[str]:
    return sorted(path.stem for path in folder.glob("*.yaml"))


def shipped() -> Iterator[tuple[str, str, str, str | None]]:
    """(name, hardware, profile, distribution) of every bundle the digest covers."""
    systems, profiles = stems(REPO / "hardware_db" / "systems"), stems(REPO / "profiles")
    for system in systems:
        for profile in profiles:
            yield f"{system}-{profile}", system, profile, None
    for example in stems(REPO / "examples"):
        hardware = str(REPO / "examples" / f"{example}.yaml")
        yield f"example-{example}-{EXAMPLE_PROFILE}", hardware, EXAMPLE_PROFILE, None
    for distro in stems(REPO / "hardware_db" / "distros"):
        for profile in profiles:
            yield f"{DISTRO_SYSTEM}-{profile}-on-{distro}", DISTRO_SYSTEM, profile, distro


def bundle_digest(files: RenderedFiles) -> str:
    """sha256 over each file's path, mode and version-free bytes, in path order: the version
    set aside is the one the bundle's manifest.json records. provenance.json is left out: it
    restates the other files' digests, the version and the catalog's digest (an edit of the
    catalog that changes no bundle's file is no change a node sees)."""
    version = json.loads(files[MANIFEST][0])["tool"]["version"]
    digest = hashlib.sha256()
    for path in sorted(files):
        if path.endswith(".gz") or path == PROVENANCE:
            continue
        content, mode = files[path]
        comparable = stamp_free(version_free(path, content), version)
        digest.update(f"{path}\0{mode:o}\0{len(comparable)}\0".encode())
        digest.update(comparable)
    return digest.hexdigest()


@cache
def rendered(hardware: str, profile: str, distro: str | None) -> RenderedFiles:
    """A shipped bundle's files, made once a session (tests/test_fit_gate.py reads them too)."""
    return render_for(hardware, profile, distro)


def current() -> dict[str, str]:
    """Each shipped bundle's digest, by name."""
    return {
        name: bundle_digest(rendered(hardware, profile, distro))
        for name, hardware, profile, distro in shipped()
    }


def record_text(digests: dict[str, str]) -> str:
    return "".join(f"{digest}  {name}\n" for name, digest in sorted(digests.items()))


def recorded() -> dict[str, str]:
    """tests/bundle_digests.txt, as written: name -> digest."""
    lines = RECORD.read_text(encoding="utf-8").splitlines() if RECORD.exists() else []
    return {name: digest for digest, _, name in (line.partition("  ") for line in lines)}


def overall(text: str) -> str:
    """The digest CHANGELOG.md records: of tests/bundle_digests.txt's text."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def changed(before: dict[str, str], after: dict[str, str]) -> list[str]:
    """The bundles whose digest differs, or that one side lacks, by name."""
    return sorted(
        name for name in before.keys() | after.keys() if before.get(name) != after.get(name)
    )


def sections(changelog: str) -> dict[str, str]:
    """CHANGELOG.md's ``## <title>`` sections, their text by title, in order."""
    parts = re.split(r"^## (.+)$", changelog, flags=re.MULTILINE)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def digest_lines(section: str) -> list[str]:
    return re.findall(rf"^{LINE_PREFIX}([0-9a-f]{{64}})$", section, re.MULTILINE)


def entries(section: str) -> list[str]:
    """The section's entries: its list items."""
    return re.findall(r"^- .*$", section, re.MULTILINE)


def main(argv: list[str]) -> int:
    text = record_text(current())
    if "--write" in argv:
        RECORD.write_text(text, encoding="utf-8")
    print(f"{LINE_PREFIX}{overall(text)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
