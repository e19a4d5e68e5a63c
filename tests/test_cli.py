"""The command line as a user meets it: exit codes, one line per problem, no tracebacks."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import MINIMAL_HW, REPO


def gen(*args: str, cwd=REPO) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "generator", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
    )


def test_help_explains_the_main_job():
    result = gen("--help")
    assert result.returncode == 0
    for word in ("--hw", "--profile", "-o", "explain", "check", "list", "schema", "Exit status"):
        assert word in result.stdout


def test_check_shipped_inputs():
    result = gen("check", "--hw", "dgx-h100", "--profile", "inference")
    assert result.returncode == 0, result.stderr
    assert "dgx-h100" in result.stdout and "intent inference" in result.stdout


def test_check_json_is_one_object_with_what_the_lines_say():
    result = gen(
        "check", "--hw", "dgx-h100", "--profile", "inference", "--os", "debian-12", "--json"
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["ok"] is True and report["settings"] > 0
    assert report["hardware"]["name"] == "dgx-h100" and report["hardware"]["gpus"] == 8
    assert report["profile"]["chain"] == ["inference"]
    assert report["distro"].startswith("Debian")
    assert result.stderr == ""


UNLISTED_OVERRIDE = """\
extends: inference
overrides:
  - kind: sysctl
    key: net.ipv4.ip_local_reserved_ports
    value: 30000-32767
    reason: what the fleet has always set
    unlisted: true
"""


def test_check_json_reports_plan_warnings_in_the_object(write):
    profile = str(write("team.yaml", UNLISTED_OVERRIDE))
    lines = gen("check", "--hw", "l4-inference", "--profile", profile)
    result = gen("check", "--hw", "l4-inference", "--profile", profile, "--json")
    report = json.loads(result.stdout)
    warnings = [f"warning ({w['check']}): {w['text']}" for w in report["warnings"]]
    assert warnings and warnings == lines.stderr.splitlines()
    assert result.stderr == ""  # in the object, not beside it


def test_check_json_bad_input_is_a_json_error_object_one_line_and_exit_2():
    """Issue 30: a script reading stdout got nothing on bad input (stdout was empty on main)."""
    result = gen("check", "--hw", "nosuch", "--profile", "inference", "--json")
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr
    report = json.loads(result.stdout)
    assert report["ok"] is False and report["exit_status"] == 2
    [problem] = report["errors"]
    assert problem["file"] == "nosuch" and "no shipped system of that name" in problem["message"]
    assert set(problem) == {"file", "field", "message", "hint"}


@pytest.mark.parametrize(
    "args,needle",
    [
        (["--hw", "dgx-h100", "--json"], "Missing option '--profile'"),
        (["--hw", "dgx-h100", "--profile", "inference", "--json", "--bogus"], "--bogus"),
    ],
)
def test_check_json_usage_error_is_a_json_error_object_too(args, needle):
    """A usage error printed click's text and nothing on stdout, though --json promises an
    object on bad input (failed before JsonUsageErrors)."""
    result = gen("check", *args)
    assert result.returncode == 2
    report = json.loads(result.stdout)
    assert report["ok"] is False and report["exit_status"] == 2
    [problem] = report["errors"]
    assert needle in problem["message"] and problem["hint"].endswith(" check --help'")
    assert "check [OPTIONS]" in result.stderr


def test_check_without_json_keeps_clicks_usage_error_on_stderr_only():
    result = gen("check", "--hw", "dgx-h100")
    assert result.returncode == 2 and result.stdout == ""
    assert "Missing option '--profile'" in result.stderr


def test_check_json_bad_field_names_the_field(tmp_path):
    bad = tmp_path / "p.yaml"
    bad.write_text("extends: inference\nthp: sometimes\n")
    result = gen("check", "--hw", "dgx-h100", "--profile", str(bad), "--json")
    assert result.returncode == 2
    [problem] = json.loads(result.stdout)["errors"]
    assert (problem["file"], problem["field"]) == (str(bad), "thp")


@pytest.mark.parametrize(
    "args,needle",
    [
        (
            ["check", "--hw", "nosuch", "--profile", "inference"],
            "nosuch: no shipped system of that name",
        ),
        (["check", "--hw", "dgx-h100", "--profile", "inferense"], "did you mean inference"),
        (
            ["check", "--hw", "/nonexistent/hw.yaml", "--profile", "inference"],
            "/nonexistent/hw.yaml: no such file",
        ),
    ],
)
def test_bad_references_exit_2_with_one_line(args, needle):
    result = gen(*args)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], result.stderr


def test_several_problems_one_line_each(write):
    path = write(
        "bad.yaml", MINIMAL_HW.replace("memory_gib: 256", "memory_gib: '256'") + "colour: red\n"
    )
    result = gen("check", "--hw", str(path), "--profile", "training")
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert lines == [
        f"goldtune: error: {path}: colour: unknown field",
        f"goldtune: error: {path}: memory_gib: expected int, got string '256'",
    ] or sorted(lines) == sorted(
        [
            f"goldtune: error: {path}: colour: unknown field",
            f"goldtune: error: {path}: memory_gib: expected int, got string '256'",
        ]
    )


def test_list_shows_everything_shipped():
    result = gen("list", "--json")
    assert result.returncode == 0
    inventory = json.loads(result.stdout)
    assert {"systems", "gpus", "nics", "cpus", "profiles"} == set(inventory)
    assert any(s["name"] == "dgx-h100" for s in inventory["systems"])
    text = gen("list").stdout
    assert "SYSTEMS" in text and "H100-SXM5-80GB" in text and "training-multinode" in text


@pytest.mark.parametrize("which,field", [("hardware", "nics"), ("profile", "extends")])
def test_schema_is_json_schema(which, field):
    result = gen("schema", which)
    schema = json.loads(result.stdout)
    assert schema["$schema"].startswith("https://json-schema.org/")
    assert field in schema["properties"]
    assert schema.get("additionalProperties") is False


def test_main_job_needs_both_inputs():
    result = gen("--hw", "dgx-h100")
    assert result.returncode == 2 and "needs both --hw and --profile" in result.stderr


@pytest.mark.parametrize(
    ("hardware", "status"), [("dgx-h100", 0), ("no-such-system", 2)], ids=["written", "bad-input"]
)
def test_the_main_job_runs_with_the_collector_off_and_turns_it_back_on(
    tmp_path, monkeypatch, hardware, status
):
    """The collector's passes over a run that keeps everything it makes cost ~20 ms of a cold
    run; the main job pauses it, and an in-process caller gets it back on, even after an error."""
    import gc

    from click.testing import CliRunner

    from generator import cli
    from generator.commands import generate

    seen = []
    run = generate.run_generate

    def watched(*args, **kwargs):
        seen.append(gc.isenabled())
        return run(*args, **kwargs)

    monkeypatch.setattr(generate, "run_generate", watched)
    assert gc.isenabled()
    args = ["--hw", hardware, "--profile", "inference", "-o", str(tmp_path / "bundle")]
    done = CliRunner().invoke(cli.main, args)
    assert (done.exit_code, seen) == (status, [False]), done.output
    assert gc.isenabled()
