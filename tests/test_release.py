"""A release: the version comes from the git tag, a wheel and an sdist are built with the real
packaging tools (`python -m build`, `twine check`), and what they install reports that version.

Everything runs in temporary clones of this repository: a tag is made there (v9.8.7), never
here. The build uses the project's own backend without isolation (hatchling and hatch-vcs are
in the test extra), so it downloads nothing. On main before this test, the version was a
literal 0.1.0 in pyproject.toml and generator/__init__.py: the tagged build was 0.1.0. Without
a reachable tag the version is the release the repository declares (generator/release.py).

A clone holds the committed tree (HEAD), not uncommitted changes.
"""

from __future__ import annotations

import json
import os
import re
import site
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest
import yaml

from generator.release import RELEASE
from tests.conftest import REPO
from tests.test_fleet_example import WORKFLOW

TAG_VERSION = "9.8.7"


def run(*args: str, cwd: Path | None = None) -> str:
    result = subprocess.run(args, cwd=cwd, capture_output=True, text=True, check=False, timeout=600)
    assert result.returncode == 0, f"{args}: {result.stdout}{result.stderr}"
    return result.stdout


def clone(into: Path, tag: str | None = None) -> Path:
    """A clone of this repository's HEAD without its tags, and ``tag`` on its HEAD if given."""
    run("git", "clone", "--quiet", "--no-tags", str(REPO), str(into))
    if tag:
        run("git", "tag", tag, cwd=into)
    return into


def build(source: Path, out: Path, *kinds: str) -> list[Path]:
    run(sys.executable, "-m", "build", "--no-isolation", *kinds, "--outdir", str(out), str(source))
    return sorted(out.iterdir())


@pytest.fixture(scope="module")
def release(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """The sdist and wheel of a clone tagged v9.8.7 (build: the sdist, then the wheel from it)."""
    work = tmp_path_factory.mktemp("release")
    return build(clone(work / "goldtune", f"v{TAG_VERSION}"), work / "dist")


def wheel_of(release: list[Path]) -> Path:
    (wheel,) = [path for path in release if path.suffix == ".whl"]
    return wheel


def installed(wheel: Path, target: Path) -> dict[str, str]:
    """The wheel installed into ``target`` (no dependencies: the running interpreter's serve),
    and the environment that runs it ahead of any other copy of goldtune."""
    run(sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(target),
        str(wheel))  # fmt: skip
    paths = [str(target), *site.getsitepackages()]
    return {"PYTHONPATH": os.pathsep.join(paths), "PATH": "/usr/bin:/bin", "LC_ALL": "C"}


def test_a_tagged_commit_builds_a_wheel_and_an_sdist_of_its_version(release: list[Path]) -> None:
    assert [path.name for path in release] == [
        f"goldtune-{TAG_VERSION}-py3-none-any.whl",
        f"goldtune-{TAG_VERSION}.tar.gz",
    ]
    # twine's checks of what an index would be given: metadata, the README as its description
    run(sys.executable, "-m", "twine", "check", "--strict", *map(str, release))
    with tarfile.open(release[1]) as sdist:
        names = set(sdist.getnames())
    # what a release changes in the bundles travels with its source
    assert f"goldtune-{TAG_VERSION}/CHANGELOG.md" in names


def test_the_wheel_reports_its_version_in_metadata_and_in_the_package(release: list[Path]) -> None:
    with zipfile.ZipFile(wheel_of(release)) as wheel:
        metadata = wheel.read(f"goldtune-{TAG_VERSION}.dist-info/METADATA").decode()
        version_file = wheel.read("generator/_version.py").decode()
    assert f"\nVersion: {TAG_VERSION}\n" in metadata
    assert f'__version__ = "{TAG_VERSION}"' in version_file


def test_the_sdist_builds_the_same_version_without_git(release: list[Path], tmp_path: Path) -> None:
    (sdist,) = [path for path in release if path.name.endswith(".tar.gz")]
    with tarfile.open(sdist) as archive:
        archive.extractall(tmp_path, filter="data")
    source = tmp_path / f"goldtune-{TAG_VERSION}"
    assert not (source / ".git").exists()
    (wheel,) = build(source, tmp_path / "dist", "--wheel")
    assert wheel.name == f"goldtune-{TAG_VERSION}-py3-none-any.whl"


def test_the_installed_release_stamps_its_version_on_a_bundle(
    release: list[Path], tmp_path: Path
) -> None:
    env = installed(wheel_of(release), tmp_path / "site")
    gen = [sys.executable, "-c", "from generator.console import main; main()"]
    # run from tmp_path: `python -c` puts the working directory first on sys.path
    result = subprocess.run(
        [*gen, "--version"], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert result.stdout == f"goldtune, version {TAG_VERSION}\n", result.stderr
    bundle = tmp_path / "bundle"
    result = subprocess.run(
        [*gen, "--hw", "l4-inference", "--profile", "inference", "-o", str(bundle)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    manifest = json.loads((bundle / "manifest.json").read_text())
    assert manifest["tool"] == {"name": "goldtune", "version": TAG_VERSION}
    assert f"Generated by goldtune {TAG_VERSION}." in (bundle / "EXPLAIN.md").read_text()


def test_a_clone_without_tags_is_the_declared_release_naming_its_commit(tmp_path: Path) -> None:
    """CI's checkout and the lead's submission carry no tags: the version is still the release
    the repository declares (generator/release.py), never 0.0.1.devN (main before it)."""
    source = clone(tmp_path / "goldtune")
    commit = run("git", "rev-parse", "--short=9", "HEAD", cwd=source).strip()
    (wheel,) = build(source, tmp_path / "dist", "--wheel")
    version = wheel.name.split("-")[1]
    assert re.fullmatch(rf"{re.escape(RELEASE)}\+g{commit}[0-9a-f]*", version), version
    with zipfile.ZipFile(wheel) as archive:
        assert f'__version__ = "{version}"' in archive.read("generator/_version.py").decode()


def test_a_tag_older_than_the_declared_release_counts_as_none(tmp_path: Path) -> None:
    """A v0.0.9 tag (older than RELEASE) would make every build 0.0.10.devN: it is not a release
    of this tree, so the declared one is."""
    source = clone(tmp_path / "goldtune", "v0.0.9")
    (wheel,) = build(source, tmp_path / "dist", "--wheel")
    assert wheel.name.startswith(f"goldtune-{RELEASE}+g"), wheel.name


def test_a_tree_without_git_metadata_is_the_declared_release(tmp_path: Path) -> None:
    """`git archive` (a GitHub "Download ZIP"): no .git, no PKG-INFO."""
    source = tmp_path / "goldtune"
    source.mkdir()
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", "HEAD"], capture_output=True, check=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(source)], input=archive, check=True)
    (wheel,) = build(source, tmp_path / "dist", "--wheel")
    assert wheel.name == f"goldtune-{RELEASE}-py3-none-any.whl"


def test_the_declared_release_is_the_changelogs_newest_release() -> None:
    """Releasing renames CHANGELOG.md's Unreleased section and sets RELEASE: both, or neither."""
    headings = re.findall(r"^## (.+)$", (REPO / "CHANGELOG.md").read_text(), re.MULTILINE)
    assert headings[0] == "Unreleased"
    assert headings[1] == RELEASE, f"CHANGELOG.md's newest release is {headings[1]}"


# Where the repository tells a reader which goldtune to install: the declared release, which a
# tagged commit builds (v0.2.0); a commit without the tag builds 0.2.0+gHASH.
VERSION = r"([0-9][0-9A-Za-z.+!]*[0-9A-Za-z])"
PINNED = [
    (re.compile(rf"goldtune=={VERSION}"), "an index pin"),
    (re.compile(rf"goldtune@v{VERSION}"), "a tag"),
    (re.compile(rf"goldtune-{VERSION}-py3-none-any\.whl"), "a wheel"),
    (re.compile(rf'GOLDTUNE_VERSION: "{VERSION}"'), "the workflow's pin"),
]
PINNING_FILES = ["README.md", "examples/fleet/README.md", WORKFLOW.relative_to(REPO).as_posix()]


def pinned_versions(text: str) -> set[str]:
    return {found for pattern, _ in PINNED for found in pattern.findall(text)}


def test_install_lines_name_the_declared_release() -> None:
    for name in PINNING_FILES:
        named = pinned_versions((REPO / name).read_text())
        assert named, f"{name} names no goldtune version"
        assert named <= {RELEASE}, f"{name} names {sorted(named - {RELEASE})}, not {RELEASE}"


def test_a_pin_of_a_version_no_commit_builds_is_found() -> None:
    text = "(goldtune==0.1.0), goldtune@v0.1.0. tools/goldtune-0.1.0-py3-none-any.whl"
    assert pinned_versions(text) == {"0.1.0"}


# --- the fleet example's workflow installs what it names ----------------------------------------


def install_step() -> dict[str, str]:
    workflow = yaml.safe_load(WORKFLOW.read_text())
    (step,) = [s for s in workflow["jobs"]["gate"]["steps"] if s.get("name") == "Install goldtune"]
    return step  # type: ignore[no-any-return]


def runner_python(tmp_path: Path) -> Path:
    """A fresh virtual environment, as setup-python's interpreter would be, whose dependencies
    (click, pydantic, ..., and pip itself) come from this one's site-packages: pip gets no
    index, and installs into the new environment."""
    env = tmp_path / "runner"
    run(sys.executable, "-m", "venv", "--without-pip", str(env))
    (purelib,) = env.glob("lib/python*/site-packages")
    (purelib / "test-dependencies.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    return env / "bin"


@pytest.mark.parametrize(("pinned", "passes"), [(TAG_VERSION, True), ("9.8.6", False)])
def test_the_fleet_workflow_installs_the_version_it_pins(
    release: list[Path], tmp_path: Path, pinned: str, passes: bool
) -> None:
    """The workflow's install step as the runner runs it, given the release wheel: it installs
    it, and fails when what was installed is not the version the workflow pins."""
    step = install_step()
    workflow = yaml.safe_load(WORKFLOW.read_text())
    assert set(workflow["env"]) >= {"GOLDTUNE", "GOLDTUNE_VERSION"}
    result = subprocess.run(
        ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", step["run"]],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
        env={
            "PATH": f"{runner_python(tmp_path)}:/usr/bin:/bin",
            "GOLDTUNE": str(wheel_of(release)),
            "GOLDTUNE_VERSION": pinned,
            "PIP_NO_INDEX": "1",
            "PIP_NO_DEPS": "1",
            "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        },
    )
    assert (result.returncode == 0) == passes, result.stdout + result.stderr
    if not passes:
        assert f"goldtune, version {TAG_VERSION}" in result.stdout and pinned in result.stdout
