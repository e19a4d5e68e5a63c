"""gen matrix --check DIR: the fleet repository's gate (issue 13).

Each state is shown on a real bundle: current (0), stale with the PR-comment diff, missing,
extra (1), version-only (0, named as such), and bad input (2, nothing compared).
"""

from __future__ import annotations

import json
import os
import pty
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from generator import __version__, cli
from generator.bundle import equal
from generator.commands import fleet_check, matrix
from generator.errors import GenerationError
from tests.conftest import REPO

TEAM_PROFILE = "description: our serving nodes\nextends: inference\nthp: madvise\n"


def gen(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli.main, list(args))
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture
def fleet(tmp_path: Path) -> tuple[Path, Path]:
    """A fleet repository: one profile file and its committed bundles for two machines."""
    profile = tmp_path / "profiles" / "team.yaml"
    profile.parent.mkdir()
    profile.write_text(TEAM_PROFILE)
    bundles = tmp_path / "bundles"
    code, _, err = gen(*matrix_args(profile), "-o", str(bundles))
    assert code == 0, err
    return profile, bundles


def matrix_args(profile: Path) -> list[str]:
    return ["matrix", "--hw", "dgx-h100", "--hw", "l4-inference", "--profile", str(profile)]


def test_current_bundles_pass(fleet):
    profile, bundles = fleet
    code, out, err = gen(*matrix_args(profile), "--check", str(bundles))
    assert code == 0, err
    assert "2 current, 0 version-only, 0 stale, 0 missing, 0 extra." in out
    assert "| Bundle |" not in out  # nothing to list


def test_a_changed_profile_makes_every_bundle_stale_with_its_diff(fleet):
    profile, bundles = fleet
    profile.write_text(TEAM_PROFILE.replace("thp: madvise", "thp: never"))
    code, out, err = gen(*matrix_args(profile), "--check", str(bundles))
    assert code == 1
    assert "| `dgx-h100-team` | stale |" in out and "| `l4-inference-team` | stale |" in out
    # gen diff's Markdown, committed -> regenerated, with the setting that moved
    assert "### goldtune diff: `dgx-h100-team (committed)` → `dgx-h100-team (regenerated)`" in out
    assert "| ~ | kernel-arg | `transparent_hugepage` | `madvise` | `never` |" in out
    assert "stale: dgx-h100-team" in err
    assert not any(p.name.startswith(".") for p in bundles.iterdir())  # nothing written


def test_missing_and_extra_bundles_are_named(fleet):
    profile, bundles = fleet
    shutil.rmtree(bundles / "l4-inference-team")
    (bundles / "old-box-team").mkdir()
    (bundles / "stray-link").symlink_to("/etc")
    code, out, _ = gen(*matrix_args(profile), "--check", str(bundles))
    assert code == 1
    assert "| `l4-inference-team` | missing |" in out
    assert "| `old-box-team` | extra |" in out
    assert "| `stray-link` | extra |" in out
    assert "1 current, 0 version-only, 0 stale, 1 missing, 2 extra." in out


def test_a_hand_edited_bundle_is_stale_not_trusted(fleet):
    profile, bundles = fleet
    sysctl = next((bundles / "dgx-h100-team").rglob("*.conf"))
    sysctl.write_text(sysctl.read_text() + "kernel.panic = 1\n")
    code, out, _ = gen(*matrix_args(profile), "--check", str(bundles))
    assert code == 1
    assert "| `dgx-h100-team` | stale | files do not match its manifest.json" in out


def test_a_bundle_linked_elsewhere_is_not_followed(fleet, tmp_path):
    profile, bundles = fleet
    moved = tmp_path / "elsewhere"
    (bundles / "dgx-h100-team").rename(moved)
    (bundles / "dgx-h100-team").symlink_to(moved)
    code, out, _ = gen(*matrix_args(profile), "--check", str(bundles))
    assert code == 1
    assert "| `dgx-h100-team` | stale | a symbolic link (not followed) |" in out


def test_a_tool_upgrade_alone_is_reported_as_such(tmp_path, monkeypatch):
    profile = tmp_path / "team.yaml"
    profile.write_text(TEAM_PROFILE)
    bundles = tmp_path / "bundles"
    with monkeypatch.context() as old_tool:  # the bundles an older goldtune committed
        for module in (
            "generator.render.contexts",
            "generator.render.manifest",
            "generator.render.provenance",
            "generator.model.planio",
        ):
            old_tool.setattr(f"{module}.__version__", "0.0.9")
        code, _, err = gen(*matrix_args(profile), "-o", str(bundles), "-j", "1")
        assert code == 0, err
    manifest = json.loads((bundles / "dgx-h100-team" / "manifest.json").read_text())
    assert manifest["tool"]["version"] == "0.0.9"
    code, out, _ = gen(*matrix_args(profile), "--check", str(bundles))
    assert code == 0, out
    assert f"| `dgx-h100-team` | version-only | goldtune 0.0.9 -> {__version__} |" in out
    assert "0 stale" in out and "goldtune diff" not in out


def test_a_version_change_with_a_real_change_is_stale(tmp_path, monkeypatch):
    profile = tmp_path / "team.yaml"
    profile.write_text(TEAM_PROFILE)
    bundles = tmp_path / "bundles"
    with monkeypatch.context() as old_tool:
        for module in (
            "generator.render.contexts",
            "generator.render.manifest",
            "generator.model.planio",
        ):
            old_tool.setattr(f"{module}.__version__", "0.0.9")
        assert gen(*matrix_args(profile), "-o", str(bundles), "-j", "1")[0] == 0
    profile.write_text(TEAM_PROFILE.replace("thp: madvise", "thp: never"))
    code, out, _ = gen(*matrix_args(profile), "--check", str(bundles))
    assert code == 1
    assert "| `dgx-h100-team` | stale |" in out


def test_json_report(fleet):
    profile, bundles = fleet
    shutil.rmtree(bundles / "dgx-h100-team")
    code, out, _ = gen(*matrix_args(profile), "--check", str(bundles), "--json")
    assert code == 1
    data = json.loads(out)
    assert data["current"] is False
    assert {b["name"]: b["state"] for b in data["bundles"]} == {
        "dgx-h100-team": "missing",
        "l4-inference-team": "current",
    }


@pytest.mark.parametrize(
    "trouble",
    ["no-such-dir", "bad-profile", "with-output"],
)
def test_bad_input_is_exit_2_with_one_line(fleet, tmp_path, trouble):
    profile, bundles = fleet
    args = [*matrix_args(profile), "--check", str(bundles)]
    if trouble == "no-such-dir":
        args[-1] = str(tmp_path / "nope")
    elif trouble == "bad-profile":
        profile.write_text("extends: inference\nthp: sometimes\n")
    else:
        args += ["-o", str(tmp_path / "x")]
    code, out, err = gen(*args)
    assert code == 2, (out, err)
    assert "Traceback" not in err and err.strip()
    assert "fleet check" not in out


def test_version_free_drops_only_the_version():
    plan = json.dumps({"tool": "goldtune", "version": "1", "settings": []}).encode()
    assert equal.version_free("plan.json", plan) == equal.version_free(
        "plan.json", plan.replace(b'"1"', b'"2"')
    )
    other = json.dumps({"tool": "goldtune", "version": "1", "settings": [1]}).encode()
    assert equal.version_free("plan.json", plan) != equal.version_free("plan.json", other)


def test_matrix_progress_goes_to_stderr(capsys):
    from generator.commands.matrix import run_with_progress
    from generator.commands.terminal import progress_on_stderr

    done = run_with_progress(2, iter(["a", "b"]), True, progress_on_stderr, label="checking")
    assert done == ["a", "b"]
    out, err = capsys.readouterr()
    assert out == ""  # the table's stream
    assert "checking" in err


def test_matrix_shows_no_progress_when_stderr_is_not_a_terminal(tmp_path):
    code, out, err = gen(
        "matrix", "--hw", "l4-inference", "--profile", "inference", "-o", str(tmp_path)
    )
    assert code == 0, err
    assert "generating" not in out + err
    assert "1 written, 0 failed" in out


def test_check_follows_os(tmp_path):
    args = ["matrix", "--hw", "l4-inference", "--profile", "inference"]
    assert gen(*args, "--os", "debian-12", "-o", str(tmp_path))[0] == 0
    assert gen(*args, "--os", "debian-12", "--check", str(tmp_path))[0] == 0
    code, out, _ = gen(*args, "--os", "rhel-9", "--check", str(tmp_path))
    assert code == 1 and "`l4-inference-inference-rhel-9` | missing" in out, out
    assert "`l4-inference-inference-debian-12` | extra" in out, out
    # the debian-12 bundle under rhel-9's name: its content follows --os too
    (tmp_path / "l4-inference-inference-debian-12").rename(
        tmp_path / "l4-inference-inference-rhel-9"
    )
    code, out, _ = gen(*args, "--os", "rhel-9", "--check", str(tmp_path))
    assert code == 1 and "| stale |" in out
    code, _, err = gen(*args, "--os", "beos-5", "--check", str(tmp_path))
    assert code == 2 and err.count("\n") == 1, err


def test_matrix_progress_is_on_a_terminal_stderr_and_never_in_the_table(tmp_path):
    """A real `gen matrix` with stderr on a pseudo-terminal and stdout on a pipe."""
    primary, secondary = pty.openpty()
    args = ["matrix", "--hw", "l4-inference", "--profile", "inference", "-o", str(tmp_path)]
    with subprocess.Popen(
        [sys.executable, "-m", "generator", *args],
        stdout=subprocess.PIPE,
        stderr=secondary,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin", "TERM": "xterm"},
        cwd=REPO,
    ) as process:
        os.close(secondary)
        table = process.stdout.read().decode() if process.stdout else ""
        terminal = b""
        while True:
            try:
                chunk = os.read(primary, 4096)
            except OSError:  # the other end closed
                break
            if not chunk:
                break
            terminal += chunk
    os.close(primary)
    assert process.returncode == 0, terminal
    assert "generating" in terminal.decode() and "1/1" in terminal.decode()
    assert "generating" not in table and table.startswith("HARDWARE")


# --- --check in workers, as gen matrix writes ----------------------------------------------------


@pytest.fixture
def nine_bundles(tmp_path: Path) -> tuple[list[str], Path]:
    """Every shipped system with one profile: more than one batch (matrix.BATCH) to hand out."""
    bundles = tmp_path / "bundles"
    args = ["matrix", "--all-systems", "--profile", "inference"]
    code, _, err = gen(*args, "-o", str(bundles), "-j", "1")
    assert code == 0, err
    assert len(list(bundles.iterdir())) > matrix.BATCH
    return args, bundles


def test_check_in_workers_reports_what_one_process_does(nine_bundles, monkeypatch):
    args, bundles = nine_bundles
    stale = bundles / "dgx-h100-inference" / "kernel-cmdline"
    stale.write_text(stale.read_text().replace("iommu=pt", "iommu=off"))
    (bundles / "gh200-inference" / "plan.json").unlink()
    used: list[int] = []
    in_workers = matrix._in_workers

    def counted(batches, workers, work):
        used.append(workers)
        return in_workers(batches, workers, work)

    monkeypatch.setattr(matrix, "_in_workers", counted)
    alone = gen(*args, "--check", str(bundles), "-j", "1")
    assert used == []
    two = gen(*args, "--check", str(bundles), "-j", "2")
    assert used == [2]
    assert two == alone
    assert alone[0] == 1 and "| `dgx-h100-inference` | stale |" in alone[1]
    assert "| `gh200-inference` | stale |" in alone[1]


def test_a_bundle_that_cannot_be_rendered_in_a_worker_is_one_line_exit_2(nine_bundles, monkeypatch):
    args, bundles = nine_bundles
    check_one = fleet_check.check_one

    def fails_for_one(combination, *options):
        if combination.hardware == "l4-inference":
            raise GenerationError("a template refused the plan")
        return check_one(combination, *options)

    monkeypatch.setattr(fleet_check, "check_one", fails_for_one)  # the forked workers inherit it
    code, out, err = gen(*args, "--check", str(bundles), "-j", "2")
    assert code == 2, (out, err)
    assert "l4-inference x inference" in err and "a template refused the plan" in err
    assert "Traceback" not in err and "fleet check" not in out


# --- gen matrix with the main job's cloud-init options -------------------------------------------

TEAM_PART = "#cloud-config\nwrite_files:\n  - path: /etc/team.conf\n    content: ours\n"


def test_matrix_writes_what_gen_writes_with_the_cloud_init_options(tmp_path: Path) -> None:
    team = tmp_path / "team.cfg"
    team.write_text(TEAM_PART)
    flags = ["--cloud-init-reboot", "--cloud-init-part", str(team)]
    code, _, err = gen(
        "--hw", "dgx-h100", "--profile", "inference", *flags, "-o", str(tmp_path / "one")
    )
    assert code == 0, err
    args = ["matrix", "--hw", "dgx-h100", "--profile", "inference", *flags]
    code, _, err = gen(*args, "-o", str(tmp_path / "fleet"))
    assert code == 0, err
    one, bundle = tmp_path / "one", tmp_path / "fleet" / "dgx-h100-inference"
    files = sorted(p.relative_to(one) for p in one.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(bundle) for p in bundle.rglob("*") if p.is_file())
    for path in files:
        assert (one / path).read_bytes() == (bundle / path).read_bytes(), path
    mime = (bundle / "cloud-init" / "user-data.mime").read_text()
    assert "/etc/team.conf" in mime and "power_state" in mime
    # the gate regenerates with the same options: current; without them the bundle is stale
    code, out, err = gen(*args, "--check", str(tmp_path / "fleet"))
    assert code == 0, (out, err)
    code, out, _ = gen(*args[:5], "--check", str(tmp_path / "fleet"))
    assert code == 1 and "| `dgx-h100-inference` | stale |" in out


def test_matrix_refuses_a_bad_team_part_before_writing(tmp_path: Path) -> None:
    team = tmp_path / "team.cfg"
    team.write_text("packages: [htop]\n")  # no #cloud-config line
    out = tmp_path / "fleet"
    code, stdout, err = gen(
        "matrix",
        "--hw",
        "dgx-h100",
        "--profile",
        "inference",
        "--cloud-init-part",
        str(team),
        "-o",
        str(out),
    )
    assert code == 2, (stdout, err)
    assert len(err.strip().splitlines()) == 1 and str(team) in err and "Traceback" not in err
    assert not out.exists()


def test_a_bundle_without_the_provenance_statement_is_stale(fleet):
    """A bundle of a goldtune before provenance.json (issue 42) gains a file: not current."""
    profile, bundles = fleet
    (bundles / "l4-inference-team" / "provenance.json").unlink()
    code, out, _ = gen(*matrix_args(profile), "--check", str(bundles))
    assert code == 1
    assert "| `l4-inference-team` | stale | differs in provenance.json |" in out
    assert "1 current, 0 version-only, 1 stale" in out
