"""The release this source tree is, declared in the repository, and its version at build time.

goldtune's version is its git tag (`v0.2.0` -> 0.2.0; a commit after it 0.2.1.dev3+g1a2b3c4).
Tags do not travel with every copy of the repository: a clone made without them (a CI checkout,
a mirror that carries branches only) or an export without git metadata has none. There the
version is the release declared here, ``RELEASE``, and a clone names its commit as a local
version label (``0.2.0+g1a2b3c4``, ``.dYYYYMMDD`` added for uncommitted changes): it sorts after
the release and before the next one, and no package index accepts it as a release. A tag older
than ``RELEASE`` is treated as no tag. Releasing: rename CHANGELOG.md's Unreleased section to
the new version, set ``RELEASE`` to it (tests/test_release.py checks that the two agree), tag.

``version_from_git`` runs at build and install time only (pyproject.toml: hatchling's ``code``
version source loads this file); the installed package reads ``generator/_version.py``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

RELEASE = "0.2.0"


def _below_release(version: Any) -> bool:
    """The tag found is none (setuptools-scm's "0.0") or older than the declared release."""
    from packaging.version import Version

    return Version(str(version.tag)) < Version(RELEASE)


def _release_scheme(version: Any) -> str:
    from setuptools_scm.version import guess_next_dev_version

    return RELEASE if _below_release(version) else guess_next_dev_version(version)


def _local_scheme(version: Any) -> str:
    """A commit without a reachable release tag always names its commit, even at distance 0."""
    from setuptools_scm.version import get_local_node_and_date

    if _below_release(version) and version.node:
        return str(version.format_choice("+{node}", "+{node}.d{time:%Y%m%d}"))
    return str(get_local_node_and_date(version))


def version_from_git(root: Path | None = None) -> str:
    """The version of the tree at ``root`` (default: the repository holding this file)."""
    from setuptools_scm import get_version

    where = root or Path(__file__).resolve().parents[1]
    try:
        return str(
            get_version(root=str(where), version_scheme=_release_scheme, local_scheme=_local_scheme)
        )
    except LookupError:  # no git metadata and no PKG-INFO: an export of the tree
        return RELEASE
