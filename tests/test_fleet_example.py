"""examples/fleet/ run for real: its README's update command and its workflow's gate step, in a
copy of the example, with the `gen` of this checkout (issue 13)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO, missing_tool

EXAMPLE = REPO / "examples" / "fleet"
WORKFLOW = EXAMPLE / ".github" / "workflows" / "goldtune.yml"


def readme_command(marker: str) -> str:
    """The README's ```sh block that contains ``marker``."""
    blocks = re.findall(r"```sh\n(.*?)```", (EXAMPLE / "README.md").read_text(), re.DOTALL)
    (block,) = [text for text in blocks if marker in text]
    return block


def gate_step() -> dict[str, str]:
    workflow = yaml.safe_load(WORKFLOW.read_text())
    (step,) = [s for s in workflow["jobs"]["gate"]["steps"] if s.get("id") == "gate"]
    return step  # type: ignore[no-any-return]


def gen_dir() -> str:
    found = shutil.which("gen", path=str(Path(sys.executable).parent))
    if found is None:
        pytest.skip("no gen entry point beside this interpreter (pip install -e .)")
    return str(Path(found).parent)


def bash(script: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    # How GitHub Actions runs a `run:` block with the default shell on Linux.
    return subprocess.run(
        ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", script],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
        env={"PATH": f"{gen_dir()}:/usr/bin:/bin", "LC_ALL": "C", **env},
    )


def run_gate(repo: Path) -> tuple[str, str]:
    """The workflow's gate step as the runner would run it: (its status output, the report)."""
    output, summary = repo / "github-output", repo / "step-summary"
    output.write_text("")
    summary.write_text("")
    # the workflow's env: (DISTROS), which the runner gives every step
    workflow_env = {k: str(v) for k, v in yaml.safe_load(WORKFLOW.read_text())["env"].items()}
    result = bash(
        gate_step()["run"],
        repo,
        **workflow_env,
        GITHUB_OUTPUT=str(output),
        GITHUB_STEP_SUMMARY=str(summary),
    )
    assert result.returncode == 0, result.stderr  # the step itself never fails: later ones do
    (status,) = re.findall(r"^status=(\d+)$", output.read_text(), re.MULTILINE)
    report = (repo / "report.md").read_text()
    assert summary.read_text() == report
    return status, report


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    copy = tmp_path / "fleet"
    shutil.copytree(EXAMPLE, copy)
    return copy


def test_the_gate_fails_until_the_update_runs_then_passes_then_catches_a_change(repo):
    status, _ = run_gate(repo)
    assert status == "2"  # no bundles/ yet: bad input, nothing compared
    update = bash(readme_command("-o bundles"), repo)
    assert update.returncode == 0, update.stdout + update.stderr
    # one bundle per distribution, named after it (issue 37: before, one run made one form)
    assert sorted(p.name for p in (repo / "bundles").iterdir()) == [
        "serving-l4-serving-rhel-9",
        "serving-l4-serving-ubuntu-24.04",
        "serving-l40s-serving-rhel-9",
        "serving-l40s-serving-ubuntu-24.04",
    ]
    status, report = run_gate(repo)
    assert status == "0", report
    assert "4 current, 0 version-only, 0 stale, 0 missing, 0 extra." in report

    profile = repo / "profiles" / "serving.yaml"
    profile.write_text(profile.read_text().replace("thp: madvise", "thp: never"))
    status, report = run_gate(repo)
    assert status == "1"
    assert "| `serving-l4-serving-rhel-9` | stale |" in report
    assert "| `serving-l4-serving-ubuntu-24.04` | stale |" in report
    assert "| ~ | kernel-arg | `transparent_hugepage` | `madvise` | `never` |" in report
    # the README's own gate command agrees with the workflow's
    assert bash(readme_command("--check bundles"), repo).returncode == 1


def test_the_workflow_posts_on_1_and_fails_on_anything_but_0():
    steps = yaml.safe_load(WORKFLOW.read_text())["jobs"]["gate"]["steps"]
    post = next(s for s in steps if "gh pr comment" in s.get("run", ""))
    fail = next(s for s in steps if s.get("run") == 'exit "$STATUS"')
    assert post["if"] == "steps.gate.outputs.status == '1'"
    assert "--body-file report.md" in post["run"]
    assert fail["if"] == "steps.gate.outputs.status != '0'"
    assert fail["env"]["STATUS"] == "${{ steps.gate.outputs.status }}"


def test_the_gate_script_passes_shellcheck():
    if shutil.which("shellcheck") is None:
        missing_tool(FileNotFoundError("shellcheck not installed"))
    result = subprocess.run(
        ["shellcheck", "--shell=bash", "-"],
        input=gate_step()["run"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout
