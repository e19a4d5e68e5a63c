"""`gen verify --format prometheus`: node_exporter's textfile format, judged by the real promtool.

``promtool check metrics`` (Debian package ``prometheus``; tests/tools/install-tools.sh installs
it) parses the text exposition format and lints names against Prometheus' conventions; a missing
promtool skips here and fails in CI (tests.conftest.missing_tool). The escaping is also checked
by parsing the output back with the format's own rules.
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
from pathlib import Path
from typing import NamedTuple

from click.testing import CliRunner

from generator.cli import main
from generator.verify.prometheus import BundleIdentity, escape_label_value, render_prometheus
from generator.verify.run import run_verify
from generator.verify.verdicts import Check, Verdict
from tests.conftest import missing_tool
from tests.test_verify import make_bundle, write_snapshot
from tests.validators.run import MissingTool, find_tool

IDENTITY = BundleIdentity("hw-inference", "hw", "inference", "1.2.3", "ab" * 32)


class Mismatch(NamedTuple):  # the shape of generator/verify/preflight.py's Mismatch
    claim: str
    expected: str
    actual: str
    depends: tuple[str, ...] = ()


class PreflightResult(NamedTuple):
    state: str
    mismatches: tuple[Mismatch, ...]


def promtool(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    try:
        tool = find_tool("promtool")
    except MissingTool as missing:
        missing_tool(missing)
    return subprocess.run(
        [tool, *args], input=stdin, capture_output=True, text=True, timeout=60, check=False
    )


def check_metrics(text: str) -> None:
    done = promtool("check", "metrics", stdin=text)
    assert done.returncode == 0 and not done.stdout.strip(), done.stdout + done.stderr


LABEL = re.compile(r'(\w+)="((?:[^"\\\n]|\\[\\"n])*)"')


def unescape(value: str) -> str:
    return re.sub(r"\\([\\\"n])", lambda m: "\n" if m.group(1) == "n" else m.group(1), value)


def series(text: str, name: str) -> list[dict[str, str]]:
    """The label sets of ``name``'s samples, values unescaped as a scraper reads them."""
    found = []
    for line in text.splitlines():
        if line.startswith(name + "{"):
            labels = line[len(name) + 1 : line.rindex("}")]
            found.append({k: unescape(v) for k, v in LABEL.findall(labels)})
    return found


def test_promtool_accepts_the_report_with_every_family():
    checks = [
        Check("sysctl", "vm.swappiness", "1", "1", Verdict.OK),
        Check("sysctl", "vm.max_map_count", "1", "2", Verdict.DIFFERS),
    ]
    preflight = PreflightResult(
        "mismatch", (Mismatch("nic ib0", "present", "absent", ("irq ib0",)),)
    )
    text = render_prometheus(IDENTITY, checks, preflight)
    check_metrics(text)
    assert 'goldtune_verify_checks{verdict="differs"} 1' in text
    assert 'goldtune_verify_checks{verdict="missing"} 0' in text  # every verdict, 0 too
    assert "goldtune_verify_failed 1" in text
    assert 'goldtune_preflight_state{state="mismatch"} 1' in text
    assert "goldtune_preflight_mismatches 1" in text
    assert series(text, "goldtune_preflight_mismatch") == [
        {"claim": "nic ib0", "expected": "present", "actual": "absent"}
    ]


def test_promtool_accepts_a_preflight_without_mismatches_and_none_at_all():
    clean = render_prometheus(IDENTITY, [], PreflightResult("ok", ()))
    check_metrics(clean)
    assert "goldtune_preflight_mismatches 0" in clean
    without = render_prometheus(IDENTITY, [])
    check_metrics(without)
    assert "goldtune_preflight" not in without


HOSTILE = 'a\\b "quoted"\nnext line'


def test_label_values_are_escaped_and_read_back_whole():
    """Backslash, double quote and line feed escaped (before: a raw newline split the sample)."""
    assert escape_label_value(HOSTILE) == 'a\\\\b \\"quoted\\"\\nnext line'
    preflight = PreflightResult("mismatch", (Mismatch(HOSTILE, "x", "y"),))
    text = render_prometheus(IDENTITY, [], preflight)
    check_metrics(text)
    assert series(text, "goldtune_preflight_mismatch") == [
        {"claim": HOSTILE, "expected": "x", "actual": "y"}
    ]


def test_the_same_mismatch_twice_is_one_series():
    twice = PreflightResult("mismatch", (Mismatch("gpus", "8", "7"), Mismatch("gpus", "8", "7")))
    text = render_prometheus(IDENTITY, [], twice)
    check_metrics(text)
    assert len(series(text, "goldtune_preflight_mismatch")) == 1
    assert "goldtune_preflight_mismatches 1" in text


def test_promtool_refuses_what_the_renderer_must_not_write():
    """The check can fail: a duplicate series and a counter without _total are refused."""
    duplicate = "# TYPE x gauge\nx 1\nx 1\n"
    assert promtool("check", "metrics", stdin=duplicate).returncode != 0
    counter = "# HELP y_count c\n# TYPE y_count counter\ny_count 1\n"
    assert promtool("check", "metrics", stdin=counter).returncode != 0


def test_gen_verify_format_prometheus_from_a_snapshot(tmp_path):
    bundle = make_bundle(tmp_path, [("sysctl", "vm.swappiness", "1")])
    snap = write_snapshot(tmp_path, ("sysctl", "vm.swappiness", "60"))
    result = CliRunner().invoke(
        main, ["verify", str(bundle), "--snapshot", str(snap), "--format", "prometheus"]
    )
    assert result.exit_code == 1, result.output  # as the table: something differs
    check_metrics(result.output)
    digest = hashlib.sha256((bundle / "plan.json").read_bytes()).hexdigest()
    (info,) = series(result.output, "goldtune_bundle_info")
    assert info == {
        "bundle": "test-hw-inference",
        "digest": digest,
        "hardware": "test-hw",
        "profile": "inference",
        "version": "?",  # the hand-made plan.json names no version
    }
    assert 'goldtune_verify_checks{verdict="differs"} 1' in result.output


def test_prometheus_exit_0_when_everything_is_ok(tmp_path, capsys):
    bundle = make_bundle(tmp_path, [("sysctl", "vm.swappiness", "1")])
    plan = json.loads((bundle / "plan.json").read_text())
    (bundle / "plan.json").write_text(json.dumps({**plan, "version": "9.9"}))
    snap = write_snapshot(tmp_path, ("sysctl", "vm.swappiness", "1"))
    assert run_verify(bundle, snapshot=snap, output_format="prometheus") == 0
    out = capsys.readouterr().out
    assert 'version="9.9"' in out and "goldtune_verify_failed 0" in out


def test_json_and_format_prometheus_exclude_each_other(tmp_path):
    bundle = make_bundle(tmp_path, [])
    result = CliRunner().invoke(
        main, ["verify", str(bundle), "--json", "--format", "prometheus", "--snapshot", "x"]
    )
    assert result.exit_code == 2 and "--json" in result.output


# --- examples/prometheus/: alert rules ---------------------------------------------------------

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "prometheus"
ALERTS = EXAMPLES / "goldtune-alerts.yml"
ALERTS_TEST = EXAMPLES / "goldtune-alerts.test.yml"


def test_promtool_accepts_the_example_alert_rules():
    done = promtool("check", "rules", str(ALERTS))
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_example_alerts_fire_on_goldtune_series(tmp_path):
    """promtool's rule unit test: each alert fires on the series goldtune writes and names the
    node, the unit or the claim; a copy of the test expecting nothing fails (the test can fail)."""
    done = promtool("test", "rules", str(ALERTS_TEST))
    assert done.returncode == 0, done.stdout + done.stderr
    (tmp_path / ALERTS.name).write_text(ALERTS.read_text())
    wrong = ALERTS_TEST.read_text().replace("claim: nic ens1f0", "claim: nic ens9")
    (tmp_path / ALERTS_TEST.name).write_text(wrong)
    assert promtool("test", "rules", str(tmp_path / ALERTS_TEST.name)).returncode != 0
