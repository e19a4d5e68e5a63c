"""gen matrix --check's Markdown report on a hostile committed tree (issue 29, family 6): every
name and line from the tree is escaped for where it lands (a table cell, a code span, a
``<summary>``, a fenced diff) and the report stays below what a pull-request comment carries.
On main each test failed: the names reached the report raw (an HTML comment hiding the rest,
extra table columns, an ``<img>``) and a 15 MiB committed file made a report twice its size."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from generator import cli
from generator.commands.fleet_check import REPORT_CHARS
from generator.textsafe import markdown_code, markdown_fence, markdown_text

TEAM_PROFILE = "description: our serving nodes\nextends: inference\nthp: madvise\n"
# Our own tags; any other '<' in the report came from the tree.
OWN_TAGS = re.compile(r"</?(code|details|summary)>")
HOSTILE_NAMES = [
    "hide<!-- the rest",
    "two|extra|columns",
    "<img src=x onerror=alert(1)>",
    "tick`s` and *stars* [link](x)",
    "new\nline",
    "amp&lt;",
]


def gen(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli.main, list(args))
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture
def fleet(tmp_path: Path) -> tuple[list[str], Path]:
    """A fleet repository of one machine and its committed bundle; the matrix arguments."""
    profile = tmp_path / "profiles" / "team.yaml"
    profile.parent.mkdir()
    profile.write_text(TEAM_PROFILE)
    args = ["matrix", "--hw", "l4-inference", "--profile", str(profile)]
    bundles = tmp_path / "bundles"
    code, _, err = gen(*args, "-o", str(bundles))
    assert code == 0, err
    return args, bundles


def add_listed_file(bundle: Path, name: str, content: bytes) -> None:
    """A file the manifest honestly lists: the bundle is intact, and stale."""
    (bundle / name).parent.mkdir(parents=True, exist_ok=True)
    (bundle / name).write_bytes(content)
    manifest = json.loads((bundle / "manifest.json").read_text())
    digest = hashlib.sha256(content).hexdigest()
    manifest["files"].append({"path": name, "sha256": digest, "mode": "0644"})
    (bundle / "manifest.json").write_text(json.dumps(manifest))


def outside_fences(report: str) -> list[str]:
    """The report's lines outside fenced code blocks, read as CommonMark does: a block opened
    by N backticks closes only at a line of N or more backticks (and nothing else)."""
    lines, fence = [], ""
    for line in report.split("\n"):
        if fence:
            if line.strip() and set(line.strip()) == {"`"} and len(line.strip()) >= len(fence):
                fence = ""
            continue
        opening = re.match(r"(`{3,})", line)
        if opening:
            fence = opening.group(1)
            continue
        lines.append(line)
    assert not fence, "a code fence is never closed"
    return lines


def assert_inert(report: str) -> None:
    """No tag but ours, no HTML comment, and every table row of exactly its header's cells."""
    text = outside_fences(report)
    for line in text:
        assert not OWN_TAGS.sub("", line).count("<"), line
    rows = [line for line in text if line.startswith("|")]
    assert rows
    for row in rows:
        cells = re.split(r"(?<!\\)\|", row)[1:-1]
        assert len(cells) == 3 or len(cells) == 7, row  # the check's table, gen diff's table


def test_hostile_names_in_the_tree_are_escaped_in_the_report(fleet):
    args, bundles = fleet
    for name in HOSTILE_NAMES:
        (bundles / name).mkdir()
    code, out, _ = gen(*args, "--check", str(bundles))
    assert code == 1
    assert_inert(out)
    for name in HOSTILE_NAMES:
        assert f"| {markdown_code(name)} | extra |" in out
    assert "<!--" not in out and "<img" not in out
    assert "<code>two&#124;extra&#124;columns</code>" in out


def test_a_hostile_file_in_a_stale_bundle_cannot_leave_its_fence(fleet):
    """A file whose lines close a ``` fence and then open HTML, listed under a hostile name."""
    args, bundles = fleet
    name = "rootfs/etc/x<!--|`y`"
    content = b"a = 1\n````\n<img src=x>\n<!-- hidden\n"
    add_listed_file(bundles / "l4-inference-team", name, content)
    code, out, _ = gen(*args, "--check", str(bundles))
    assert code == 1
    assert_inert(out)
    assert f"<details><summary>{markdown_text(name)} (text diff)</summary>" in out
    fence = markdown_fence("````")
    assert f"{fence}diff\n" in out and "\n-<img src=x>\n" in out  # inside the block, as text


def test_a_15_mib_committed_file_gives_a_bounded_report(fleet):
    args, bundles = fleet
    line = b"kernel.sched_latency_ns = 1000000 # " + b"x" * 60 + b"\n"
    add_listed_file(bundles / "l4-inference-team", "rootfs/etc/big.conf", line * 165_000)
    assert (bundles / "l4-inference-team/rootfs/etc/big.conf").stat().st_size > 15 * 2**20
    code, out, _ = gen(*args, "--check", str(bundles))
    assert code == 1
    assert len(out) < 64 * 1024
    assert "… truncated: " in out and "more lines of this diff" in out
    assert_inert(out)


def test_thousands_of_entries_stay_below_a_comment(fleet):
    """Each row is small; 3,000 of them are not: past the limit the extra directories are named
    while they fit, and the report counts the rest."""
    args, bundles = fleet
    for index in range(3000):
        (bundles / f"junk-{index:04d}-<b>").mkdir()
    code, out, err = gen(*args, "--check", str(bundles))
    assert code == 1
    assert len(out) <= REPORT_CHARS + 300
    assert re.search(r" and [0-9]+ more \(`--json` lists them\) \| extra \| 3000, ", out)
    assert_inert(out)
    assert err.count("extra: junk-") == 3000  # the job's log still names every one


@given(st.text())
def test_escaped_text_has_no_markdown_left(text):
    shown = markdown_text(text)
    assert not set(shown) & set("|<`[]*~\\\n\r")
    assert re.fullmatch(r"([^&]|&#[0-9]+;)*", shown)
    code = markdown_code(text)
    assert code == "" or code.startswith(("`", "<code>"))
    assert "|" not in code and "\n" not in code
