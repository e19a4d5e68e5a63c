"""provenance.json: the bundle's in-toto Statement v1 with a SLSA provenance v1 predicate.

What a site verifies later ("this image's tuning came from goldtune X with these inputs, and
nobody changed it since") once it has signed the statement with its own key (`gen sign`, a DSSE
envelope): the subjects are every other file of the bundle with its sha256, manifest.json
included; the resolved dependencies the inputs' digests; the builder goldtune and its version.

The formats: in-toto Statement v1 (github.com/in-toto/attestation spec/v1/statement.md: _type,
subject[] of ResourceDescriptors with name and digest, predicateType, predicate) and SLSA
provenance v1 (slsa.dev/spec/v1.0/provenance: buildDefinition {buildType, externalParameters,
internalParameters, resolvedDependencies}, runDetails {builder {id, version}}). No timestamps and
no invocation id, so the same inputs give the same bytes (the bundle stays reproducible).

The catalog digests are of a directory tree: sha256 of the lines ``<sha256>  <relative path>``
of its regular files in byte order of the path, which is what
``cd DIR && find . -type f -printf '%P\\n' | LC_ALL=C sort | xargs sha256sum | sha256sum`` prints.
"""

from __future__ import annotations

import functools
import hashlib
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from generator import TOOL, __version__
from generator.errors import InputError, Problem
from generator.model.intoto import PREDICATE_TYPE, STATEMENT_TYPE
from generator.model.jsontext import dumps_indented
from generator.model.layout import MANIFEST, SEALS
from generator.model.setting import Plan
from generator.paths import hardware_db_dir, site_catalog_named

# A TypeURI (RFC 3986) naming how goldtune builds a bundle: a URN, since the project has no URL
# of its own to serve a description from.
BUILD_TYPE = f"urn:{TOOL}:bundle:v1"
BUILDER_ID = f"urn:{TOOL}:gen"


def statement_subjects(
    files: Mapping[str, bytes], known: Mapping[str, str] | None = None
) -> list[dict[str, Any]]:
    """Every file of the bundle but the provenance files themselves, with its sha256, by name.
    ``known``: digests already taken of these very bytes (the manifest's), not taken again."""
    known = known or {}
    return [
        {"name": path, "digest": {"sha256": known.get(path) or hashlib.sha256(content).hexdigest()}}
        for path, content in sorted(files.items())
        if path == MANIFEST or path not in SEALS
    ]


def tree_files(folder: str, prefix: str = "") -> Iterator[tuple[str, str]]:
    """(relative path, path) of the regular files below ``folder``; no link followed."""
    with os.scandir(folder) as entries:
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                yield from tree_files(entry.path, f"{prefix}{entry.name}/")
            elif entry.is_file(follow_symlinks=False):
                yield f"{prefix}{entry.name}", entry.path


def tree_lines(folder: Path) -> Iterator[str]:
    """``sha256sum``'s lines for the regular files below ``folder``, in byte order of the path."""
    for relative, path in sorted(tree_files(str(folder)), key=lambda item: item[0].encode()):
        yield f"{file_sha256(path)}  {relative}\n"


def file_sha256(path: str) -> str:
    """The file's sha256, read in chunks (a site's file may be of any size) through its
    descriptor: open() and hashlib.file_digest's buffered stream took three times as long, ~1 ms
    of every cold gen for the 72 files of hardware_db/."""
    digest = hashlib.sha256()
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        while chunk := os.read(fd, 1 << 16):
            digest.update(chunk)
    finally:
        os.close(fd)
    return digest.hexdigest()


def site_tree_digest(folder: Path) -> str:
    """tree_digest of a site's catalog, which may be anything: a tree that cannot be read, or
    nested past Python's recursion, is bad input (one line, exit 2), not a traceback."""
    try:
        return tree_digest(folder)
    except (OSError, RecursionError) as error:
        why = getattr(error, "strerror", None) or "nested too deep to be read"
        problem = Problem(str(folder), "", f"the catalog cannot be digested: {why}")
        raise InputError(problem) from None


@functools.cache
def tree_digest(folder: Path) -> str:
    """The digest of a catalog tree (module docstring); once a process: a matrix shares it."""
    return hashlib.sha256("".join(tree_lines(folder)).encode("utf-8")).hexdigest()


def catalog_dependencies() -> list[dict[str, Any]]:
    """The shipped catalog (hardware_db/: systems, models, distribution tables) and the site
    catalog, when one is named: what resolved the hardware file's names and the target."""
    dependencies = [{"name": "catalog", "digest": {"sha256": tree_digest(hardware_db_dir())}}]
    site = site_catalog_named()
    if site is not None and site[0].is_dir():
        digest = site_tree_digest(site[0].resolve())
        dependencies.append({"name": "site-catalog", "digest": {"sha256": digest}})
    return dependencies


def render_statement(
    plan: Plan, files: Mapping[str, bytes], known: Mapping[str, str] | None = None
) -> bytes:
    """The Statement's bytes: sorted keys, two-space indent, a final newline (the form a POSIX
    shell reads the subjects back from: install.sh --check --pubkey). ``known``: the sha256 of
    some of ``files`` (statement_subjects)."""
    inputs = [
        {"name": role, "digest": {"sha256": digest}} for role, digest in sorted(plan.inputs.items())
    ]
    statement = {
        "_type": STATEMENT_TYPE,
        "subject": statement_subjects(files, known),
        "predicateType": PREDICATE_TYPE,
        "predicate": {
            "buildDefinition": {
                "buildType": BUILD_TYPE,
                "externalParameters": {
                    "hardware": plan.hardware_name,
                    "profile": plan.profile_name,
                    "os": plan.distro,
                },
                "internalParameters": {},
                "resolvedDependencies": [*inputs, *catalog_dependencies()],
            },
            "runDetails": {"builder": {"id": BUILDER_ID, "version": {TOOL: __version__}}},
        },
    }
    return (dumps_indented(statement) + "\n").encode("utf-8")
