"""The node's report (templates/scripts/report, issue 28): node_exporter's textfile and NFD's
preflight label, written from the bundle's report.conf and the preflight's result file.

The textfile is judged by the real ``promtool check metrics`` (skipped locally without it, a
failure in CI), the label file by NFD's own reading and label rules (tests/validators/
nfd_features.py). systemctl is a stub on PATH: it says which units failed.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path

import pytest

from generator import __version__
from tests.conftest import REPO
from tests.generate import generate
from tests.test_verify_prometheus import check_metrics, series
from tests.validators import nfd_features

SCRIPT = REPO / "templates" / "scripts" / "report"
DIGEST = hashlib.sha256(b"plan").hexdigest()


def data_file(tmp_path: Path, **changes: str) -> Path:
    fields = {
        "log-as": "goldtune-report",
        "metric-prefix": "goldtune",
        "nfd-label": "feature.node.kubernetes.io/goldtune-preflight",
        "bundle": "hw-inference",
        "hardware": "hw",
        "profile": "inference",
        "version": "0.1.0",
        "digest": DIGEST,
        "unit": "goldtune-gpu.service\nunit\tgoldtune-irq-affinity.service",
        "preflight": str(tmp_path / "preflight"),
        "textfile": str(tmp_path / "textfile" / "goldtune.prom"),
        "nfd": str(tmp_path / "features.d" / "goldtune-preflight"),
        **changes,
    }
    (tmp_path / "textfile").mkdir(exist_ok=True)
    (tmp_path / "features.d").mkdir(exist_ok=True)
    path = tmp_path / "report.conf"
    path.write_text("# why\n" + "".join(f"\n# why\n{k}\t{v}\n" for k, v in fields.items() if v))
    return path


def run_report(tmp_path: Path, *args: str, failed: str = "") -> subprocess.CompletedProcess[str]:
    stubs = tmp_path / "bin"
    stubs.mkdir(exist_ok=True)
    systemctl = stubs / "systemctl"
    systemctl.write_text(f'#!/bin/sh\n[ "$3" = "{failed}" ]\n')  # is-failed --quiet UNIT
    systemctl.chmod(0o755)
    env = {**os.environ, "PATH": f"{stubs}:{os.environ['PATH']}"}
    return subprocess.run(
        ["sh", str(SCRIPT), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )


PREFLIGHT = (
    "state\tmismatch\n"
    "mismatch\tnic ens1f0\tpresent\tabsent\tirq ens1f0,nccl NCCL_IB_HCA\n"
    'mismatch\tnuma "nodes"\t2\t1\n'
    "mismatch\tgpu count\t8\t7\n"
    "mismatch\tnic ens1f0\tpresent\tabsent\n"  # the same claim twice: one series
)


def test_textfile_has_the_bundle_units_and_every_mismatch(tmp_path):
    data = data_file(tmp_path)
    (tmp_path / "preflight").write_text(PREFLIGHT)
    done = run_report(tmp_path, "prometheus", str(data), failed="goldtune-gpu.service")
    assert done.returncode == 0, done.stderr
    text = (tmp_path / "textfile" / "goldtune.prom").read_text()
    check_metrics(text)
    assert series(text, "goldtune_bundle_info") == [
        {
            "bundle": "hw-inference",
            "digest": DIGEST,
            "hardware": "hw",
            "profile": "inference",
            "version": "0.1.0",
        }
    ]
    assert 'goldtune_unit_failed{unit="goldtune-gpu.service"} 1' in text
    assert 'goldtune_unit_failed{unit="goldtune-irq-affinity.service"} 0' in text
    assert 'goldtune_preflight_state{state="mismatch"} 1' in text
    assert "goldtune_preflight_mismatches 3" in text
    assert series(text, "goldtune_preflight_mismatch") == [
        {"claim": "nic ens1f0", "expected": "present", "actual": "absent"},
        {"claim": 'numa "nodes"', "expected": "2", "actual": "1"},
        {"claim": "gpu count", "expected": "8", "actual": "7"},
    ]
    assert sorted(p.name for p in (tmp_path / "textfile").iterdir()) == ["goldtune.prom"]


def test_a_backslash_in_a_claim_is_escaped(tmp_path):
    data = data_file(tmp_path)
    (tmp_path / "preflight").write_text("state\tmismatch\nmismatch\tdisk C:\\x\tssd\thdd\n")
    assert run_report(tmp_path, "prometheus", str(data)).returncode == 0
    text = (tmp_path / "textfile" / "goldtune.prom").read_text()
    check_metrics(text)
    assert series(text, "goldtune_preflight_mismatch")[0]["claim"] == "disk C:\\x"


def test_without_a_preflight_result_there_is_no_preflight_series(tmp_path):
    data = data_file(tmp_path)
    assert run_report(tmp_path, "prometheus", str(data)).returncode == 0
    text = (tmp_path / "textfile" / "goldtune.prom").read_text()
    check_metrics(text)
    assert "goldtune_bundle_info{" in text and "goldtune_preflight" not in text


def test_a_clean_preflight_has_zero_mismatches(tmp_path):
    data = data_file(tmp_path)
    (tmp_path / "preflight").write_text("state\tok\n")
    assert run_report(tmp_path, "prometheus", str(data)).returncode == 0
    text = (tmp_path / "textfile" / "goldtune.prom").read_text()
    check_metrics(text)
    assert "goldtune_preflight_mismatches 0" in text
    assert series(text, "goldtune_preflight_mismatch") == []


def test_nfd_label_is_the_preflight_state(tmp_path):
    data = data_file(tmp_path)
    (tmp_path / "preflight").write_text(PREFLIGHT)
    assert run_report(tmp_path, "nfd", str(data)).returncode == 0
    content = (tmp_path / "features.d" / "goldtune-preflight").read_bytes()
    assert nfd_features.problems_of(content) == []
    labels, _ = nfd_features.parse_feature_file(content.decode())
    assert labels == {"feature.node.kubernetes.io/goldtune-preflight": "mismatch"}
    assert sorted(p.name for p in (tmp_path / "features.d").iterdir()) == ["goldtune-preflight"]


@pytest.mark.parametrize("state", ["", "not ok", "x" * 64, "-ok"])
def test_nfd_writes_no_label_for_a_state_kubernetes_refuses(tmp_path, state):
    data = data_file(tmp_path)
    (tmp_path / "preflight").write_text(f"state\t{state}\n" if state else "")
    assert run_report(tmp_path, "nfd", str(data)).returncode == 0
    content = (tmp_path / "features.d" / "goldtune-preflight").read_text()
    labels, errors = nfd_features.parse_feature_file(content)
    assert labels == {} and errors == []


@pytest.mark.parametrize(
    ("changes", "needle"),
    [
        ({"digest": "abc"}, "not a sha256"),
        ({"unit": "goldtune-gpu.timer"}, "not a service unit"),
        ({"textfile": "/tmp/goldtune.txt"}, "reads *.prom only"),
        ({"textfile": "relative/goldtune.prom"}, "not an absolute path"),
        ({"bundle": "a b"}, "not a name"),
        ({"nfd": ""}, "no nfd line"),
        ({"metric-prefix": "gold-tune"}, "not a metric name prefix"),
        ({"nfd-label": "goldtune-preflight"}, "not a label name"),
        ({"nfd-label": "Feature.io/x"}, "not a label name"),
        ({"nfd-label": "feature.io/x-"}, "not a label name"),
        ({"colour": "blue"}, "unknown key"),
    ],
)
def test_bad_data_exits_2_and_writes_nothing(tmp_path, changes, needle):
    data = data_file(tmp_path, **changes)
    for mode in ("--check", "prometheus", "nfd"):
        done = run_report(tmp_path, mode, str(data))
        assert done.returncode == 2 and needle in done.stderr, (mode, done.stderr)
    assert not any((tmp_path / "textfile").iterdir())
    assert not any((tmp_path / "features.d").iterdir())


def test_an_unwritable_directory_fails_and_leaves_no_temporary_file(tmp_path):
    data = data_file(tmp_path, textfile=str(tmp_path / "nosuch" / "goldtune.prom"))
    done = run_report(tmp_path, "prometheus", str(data))
    assert done.returncode == 1 and "could not write" in done.stderr


def test_the_rendered_data_file_passes_check_and_names_the_plan_digest(tmp_path):
    """report.conf of a bundle with both knobs: its digest is the bundle's plan.json's."""
    profile = tmp_path / "report.yaml"
    profile.write_text("extends: training\nprometheus_textfile: true\nnfd_features: true\n")
    bundle = tmp_path / "bundle"
    assert generate("dgx-h100", profile, bundle).exit_code == 0
    conf = bundle / "rootfs/etc/goldtune/report.conf"
    done = run_report(tmp_path, "--check", str(conf))
    assert done.returncode == 0, done.stderr
    digest = hashlib.sha256((bundle / "plan.json").read_bytes()).hexdigest()
    assert f"\ndigest\t{digest}\n" in conf.read_text()
    units = [line for line in conf.read_text().splitlines() if line.startswith("unit\t")]
    assert units == [
        "unit\tgoldtune-gpu.service",
        "unit\tgoldtune-irq-affinity.service",
        "unit\tgoldtune-pcie-acs.service",
    ]
    nfd = bundle / "rootfs/etc/kubernetes/node-feature-discovery/features.d/goldtune"
    labels, _ = nfd_features.parse_feature_file(nfd.read_text())
    assert labels == {
        "feature.node.kubernetes.io/goldtune-bundle": "dgx-h100-report",
        "feature.node.kubernetes.io/goldtune-hardware": "dgx-h100",
        "feature.node.kubernetes.io/goldtune-profile": "report",
        "feature.node.kubernetes.io/goldtune-version": __version__.replace("+", "_"),
        "feature.node.kubernetes.io/goldtune-digest": digest[:16],
    }


def test_knobs_off_leave_no_report_file(tmp_path):
    """The defaults: no report script, data file, unit, timer or NFD file."""
    bundle = tmp_path / "bundle"
    assert generate("dgx-h100", "training-k8s", bundle).exit_code == 0
    names = {path.name for path in bundle.rglob("*")}
    assert not names & {
        "report",
        "report.conf",
        "goldtune-metrics.service",
        "goldtune-metrics.timer",
        "goldtune-node-labels.service",
        "features.d",
    }


def test_multi_user_target_does_not_wait_for_the_reporting_units(tmp_path):
    """The NFD label unit is wanted by multi-user.target but ordered after it, so that systemd
    does not order the target after it (src/core/unit.c unit_add_default_target_dependency:
    no After= where the target is already Before= the unit); the metrics unit has a timer, no
    [Install] (as first merged, the label unit was on the target's critical chain)."""
    profile = tmp_path / "report.yaml"
    profile.write_text("extends: training\nprometheus_textfile: true\nnfd_features: true\n")
    bundle = tmp_path / "bundle"
    assert generate("dgx-h100", profile, bundle).exit_code == 0
    units = bundle / "rootfs/etc/systemd/system"
    labels = (units / "goldtune-node-labels.service").read_text().splitlines()
    after = " ".join(line.removeprefix("After=") for line in labels if line.startswith("After="))
    assert "multi-user.target" in after.split()
    assert "WantedBy=multi-user.target" in labels
    metrics = (units / "goldtune-metrics.service").read_text()
    assert "[Install]" not in metrics and "WantedBy=" not in metrics
