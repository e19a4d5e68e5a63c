"""Reviewable upgrades (issue 42): `gen diff` leads with what changes on the node and keeps the
preflight claims apart (or out, --no-claims); `gen matrix --check` writes the whole report to
--report FILE and prints a bounded one that names every stale bundle and what changes on it.

On main before this: the H100 -> B200 diff opened with 108 rows of which 85 were claims and no
summary by kind; a check of six bundles whose diffs were long printed the first one's diff and
cut the other five at 60,000 characters, with no way to get the whole report.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from click.testing import CliRunner

from generator import cli
from generator.commands.fleet_check import REPORT_CHARS

GENERATIONS = ["diff", "--hw", "dgx-h100", "--hw", "dgx-b200", "--profile", "training"]
SUMMARY = re.compile(r"On the node: (\d+) settings, .*\(.*irq: .*\)\.")


def gen(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli.main, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_the_generation_diff_leads_with_what_changes_on_the_node() -> None:
    code, out, _ = gen(*GENERATIONS, "--format", "markdown")
    assert code == 1
    lines = out.splitlines()
    assert lines[0].startswith("### goldtune diff: ")
    assert SUMMARY.fullmatch(lines[2]), lines[2]
    assert lines[3].startswith("Preflight claims (what the preflight unit expects")
    # the settings' table comes before the claims, which sit in their own section
    first_claim = out.index("| claim |")
    assert out.index("<details><summary>Preflight claims (") < first_claim
    assert "| irq |" in out[: out.index("<details><summary>Preflight claims (")]


def test_the_terminal_diff_says_the_summary_before_any_row() -> None:
    code, out, _ = gen(*GENERATIONS)
    assert code == 1
    lines = out.splitlines()
    assert lines[:2] == ["--- dgx-h100/training", "+++ dgx-b200/training"]
    assert lines[2].startswith("On the node: ")
    assert out.index("Preflight claims (") < out.index("KIND")


def test_no_claims_leaves_their_rows_out_and_keeps_their_count() -> None:
    _, whole, _ = gen(*GENERATIONS, "--format", "json")
    _, lean, _ = gen(*GENERATIONS, "--format", "json", "--no-claims")
    whole_data, lean_data = json.loads(whole), json.loads(lean)
    claims = [c for c in whole_data["changes"] if c["kind"] == "claim"]
    assert claims and not [c for c in lean_data["changes"] if c["kind"] == "claim"]
    assert len(lean_data["changes"]) == len(whole_data["changes"]) - len(claims)
    assert lean_data["summary"] == whole_data["summary"]
    assert sum(lean_data["summary"]["claims"].values()) == len(claims)
    _, text, _ = gen(*GENERATIONS, "--format", "markdown", "--no-claims")
    assert "| claim |" not in text and "left out (--no-claims)" in text


# --- the fleet gate over six stale bundles -------------------------------------------------------

HARDWARE = ("dgx-h100", "dgx-b200", "gb200-nvl72-tray")
# Two profiles of a fleet repository; the second commit of them changes what both extend, so
# every bundle is stale with a long diff (as six bundles made by an older goldtune are).
BEFORE = {"team-a": "extends: inference\n", "team-b": "extends: inference-latency\n"}
AFTER = {"team-a": "extends: training\n", "team-b": "extends: training-k8s\n"}


def fleet(tmp_path: Path, profiles: dict[str, str]) -> list[str]:
    folder = tmp_path / "profiles"
    folder.mkdir(exist_ok=True)
    args = ["matrix"]
    for name, text in profiles.items():
        (folder / f"{name}.yaml").write_text(f"description: {name}\n{text}")
        args += ["--profile", str(folder / f"{name}.yaml")]
    for hardware in HARDWARE:
        args += ["--hw", hardware]
    return args


def test_six_stale_bundles_are_all_named_and_the_whole_report_is_in_the_file(
    tmp_path: Path,
) -> None:
    bundles, report = tmp_path / "bundles", tmp_path / "report.md"
    code, _, err = gen(*fleet(tmp_path, BEFORE), "-o", str(bundles))
    assert code == 0, err
    args = fleet(tmp_path, AFTER)
    code, out, err = gen(*args, "--check", str(bundles), "--report", str(report))
    assert code == 1, err
    names = [f"{hw}-{profile}" for hw in HARDWARE for profile in AFTER]
    whole = report.read_text()
    assert len(whole) > REPORT_CHARS  # the case: more than a comment holds
    assert len(out) <= REPORT_CHARS + 1000
    for name in names:
        assert f"| `{name}` | stale |" in out
        assert f"- `{name}`: On the node: " in out
        assert f"### goldtune diff: `{name} (committed)`" in out  # its settings, at least
        assert f"### goldtune diff: `{name} (committed)`" in whole
    assert "| claim |" not in out and "| claim |" in whole
    assert "… truncated" not in whole


def test_report_goes_with_check(tmp_path: Path) -> None:
    code, _, err = gen("matrix", "--hw", "l4-inference", "--report", str(tmp_path / "r.md"))
    assert code == 2 and "--json and --report go with --check" in err
