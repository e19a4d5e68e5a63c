"""`gen verify --strict`: what install.list requires and the hardware file's GPUs, as a gate.

Each test fails on a goldtune without --strict (issue 30: an image without fabric manager and
persistenced verified with exit 0; a node whose driver did not load had every GPU setting
not-applicable and passed)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from generator.bundle.read import read_bundle
from generator.cli import main
from generator.errors import InputError
from generator.model.planio import plan_from_data
from generator.verify.run import run_verify
from generator.verify.snapshot import parse_snapshot
from generator.verify.strict import bundle_requirements, snapshot_failures
from tests.generate import generate

FABRIC = "nvidia-fabricmanager.service"
PERSISTENCED = "nvidia-persistenced.service"
INSTALL_LIST = (
    "# layout: the tool's name\ntool\tgoldtune\n\n"
    f"# gpu.fabric-manager: NVSwitch needs it\nrequire\tunit\t{FABRIC}\n\n"
    f"# gpu.persistence: driver start\nrequire\tunit\t{PERSISTENCED}\n\n"
    "# gpu: the GPU unit runs nvidia-smi\nrequire\tcommand\tnvidia-smi\n"
)


def hand_bundle(tmp_path: Path, gpus: int = 2, gpu_setting: bool = False) -> Path:
    """A bundle of two NVIDIA services, its install.list's require lines and ``gpus`` GPUs."""
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    settings = [
        {"kind": "service", "key": unit, "value": "enable", "rule": "gpu.x", "reason": "r"}
        for unit in (FABRIC, PERSISTENCED)
    ]
    if gpu_setting:
        settings.append(
            {"kind": "gpu", "key": "persistence", "value": "on", "rule": "gpu.p", "reason": "r"}
        )
    plan = {
        "format": 1,
        "tool": "goldtune",
        "hardware": "box",
        "profile": "inference",
        "nvidia_gpus": gpus,
        "notes": [],
        "warnings": [],
        "settings": settings,
    }
    (bundle / "plan.json").write_text(json.dumps(plan))
    (bundle / "manifest.json").write_text(json.dumps({"files": []}))
    (bundle / "install.list").write_text(INSTALL_LIST)
    return bundle


def snapshot_file(tmp_path: Path, *records: tuple[str, str, str]) -> Path:
    lines = ["goldtune-snapshot\tbegin\t1", *("\t".join(r) for r in records)]
    path = tmp_path / "snapshot.txt"
    path.write_text("\n".join([*lines, "goldtune-snapshot\tend\t1", ""]))
    return path


def test_requirements_are_install_lists_require_lines_with_their_reasons(tmp_path):
    needs = bundle_requirements(read_bundle(hand_bundle(tmp_path)))
    assert [(n.what, n.name, n.why) for n in needs] == [
        ("unit", FABRIC, "gpu.fabric-manager: NVSwitch needs it"),
        ("unit", PERSISTENCED, "gpu.persistence: driver start"),
        ("command", "nvidia-smi", "gpu: the GPU unit runs nvidia-smi"),
    ]


def test_an_image_without_the_nvidia_units_passes_plain_verify_and_fails_strict(tmp_path, capsys):
    bundle = hand_bundle(tmp_path)
    image = tmp_path / "image"
    (image / "etc").mkdir(parents=True)
    assert run_verify(bundle, root=image) == 0  # unchanged without --strict: not applicable
    capsys.readouterr()
    assert run_verify(bundle, root=image, strict=True) == 1
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("strict:")]
    assert lines[0] == (
        f"strict: unit {FABRIC}: not installed (required by gpu.fabric-manager: NVSwitch needs it)"
    )
    assert any(line.startswith(f"strict: unit {PERSISTENCED}: not installed") for line in lines)
    assert any(line.startswith("strict: command nvidia-smi: not installed") for line in lines)
    assert any(line.startswith("strict: driver: no /lib/modules") for line in lines)
    assert lines[-1] == "strict: 4 requirements of the bundle and its hardware file not met"


def test_an_image_with_what_it_requires_passes_strict(tmp_path, capsys):
    bundle = hand_bundle(tmp_path)
    image = tmp_path / "image"
    for unit in (FABRIC, PERSISTENCED):
        path = image / "usr/lib/systemd/system" / unit
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("[Service]\n")
    smi = image / "usr/bin/nvidia-smi"
    smi.parent.mkdir(parents=True)
    smi.write_text("#!/bin/sh\n")
    smi.chmod(0o755)
    modules = image / "lib/modules/6.8.0-1-generic"
    modules.mkdir(parents=True)
    (modules / "modules.dep").write_text("updates/dkms/nvidia.ko.zst:\n")
    for unit in (FABRIC, PERSISTENCED):  # enabled, so the plain checks pass too
        wants = image / "etc/systemd/system/multi-user.target.wants" / unit
        wants.parent.mkdir(parents=True, exist_ok=True)
        wants.symlink_to(f"/usr/lib/systemd/system/{unit}")
    assert run_verify(bundle, root=image, strict=True) == 0
    assert "strict: every requirement" in capsys.readouterr().out


def test_a_node_whose_driver_did_not_load_fails_strict(tmp_path, capsys):
    """The GPUs are on the PCI bus, nvidia-smi is not there: every GPU setting is not
    applicable, and without --strict the node passes."""
    bundle = hand_bundle(tmp_path, gpu_setting=True)
    snap = snapshot_file(
        tmp_path,
        ("gpu-pci", "count", "2"),
        ("gpu", "tool", "!absent"),
        ("unit-enabled", FABRIC, "enabled"),
        ("unit-enabled", PERSISTENCED, "enabled"),
    )
    assert run_verify(bundle, snapshot=snap) == 0
    assert "not-applicable  gpu" in capsys.readouterr().out
    assert run_verify(bundle, snapshot=snap, strict=True) == 1
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("strict:")]
    assert lines == [
        "strict: command nvidia-smi: not installed (required by gpu: the GPU unit runs nvidia-smi)",
        "strict: driver: not loaded or not answering: nvidia-smi is absent or lists no GPU; "
        "2 NVIDIA GPUs on the PCI bus (required by the hardware file box: 2 NVIDIA GPUs)",
        "strict: 2 requirements of the bundle and its hardware file not met",
    ]


@pytest.mark.parametrize(
    ("records", "expected"),
    [
        (  # the driver answers but lists fewer GPUs than the hardware file has: one fell off
            [("gpu-pci", "count", "2"), ("gpu", "tool", "ok"), ("gpu", "0", "0, 00000000:01:00.0")],
            ["gpus: nvidia-smi lists 1 of 2"],
        ),
        (  # a GPU gone from the PCI bus too
            [("gpu-pci", "count", "1"), ("gpu", "tool", "ok"), ("gpu", "0", "0, 00000000:01:00.0")],
            ["gpus: 1 NVIDIA GPU on the PCI bus, 2 expected", "gpus: nvidia-smi lists 1 of 2"],
        ),
        (  # no driver, no GPU: a VM or a build host is not the machine the plan is for
            [("gpu-pci", "count", "0"), ("gpu", "tool", "!absent")],
            [
                "gpus: 0 NVIDIA GPUs on the PCI bus, 2 expected",
                "command nvidia-smi: not installed",
                "driver: not loaded or not answering: nvidia-smi is absent or lists no GPU; "
                "0 NVIDIA GPUs on the PCI bus",
            ],
        ),
    ],
)
def test_the_gpus_of_the_hardware_file_must_all_be_there(tmp_path, records, expected):
    units = [("unit-enabled", FABRIC, "enabled"), ("unit-enabled", PERSISTENCED, "enabled")]
    snapshot = parse_snapshot(snapshot_file(tmp_path, *records, *units).read_text())
    failures = snapshot_failures(read_bundle(hand_bundle(tmp_path)), snapshot)
    assert sorted(f"{f.what}: {f.found}" for f in failures) == sorted(expected)


@pytest.mark.parametrize(
    ("state", "found"),
    [
        ("!absent", "not installed"),
        ("masked", "masked"),
        ("!unavailable", "not shown: systemd is not the service manager here"),
        (None, "not shown: the snapshot has no record of it"),
    ],
)
def test_a_required_unit_on_a_node(tmp_path, state, found):
    records = [
        ("gpu-pci", "count", "2"),
        ("gpu", "tool", "ok"),
        ("gpu", "0", "a"),
        ("gpu", "1", "b"),
    ]
    records.append(("unit-enabled", PERSISTENCED, "enabled"))
    if state is not None:
        records.append(("unit-enabled", FABRIC, state))
    snapshot = parse_snapshot(snapshot_file(tmp_path, *records).read_text())
    failures = snapshot_failures(read_bundle(hand_bundle(tmp_path)), snapshot)
    assert [(f.what, f.found) for f in failures] == [(f"unit {FABRIC}", found)]


def test_a_snapshot_cannot_show_a_command_other_than_nvidia_smi(tmp_path):
    bundle = hand_bundle(tmp_path)
    with (bundle / "install.list").open("a") as out:
        out.write("\n# containers.x: runs it\nrequire\tcommand\tnvidia-container-runtime\n")
    records = [
        ("gpu-pci", "count", "2"),
        ("gpu", "tool", "ok"),
        ("gpu", "0", "a"),
        ("gpu", "1", "b"),
    ]
    records += [("unit-enabled", FABRIC, "enabled"), ("unit-enabled", PERSISTENCED, "enabled")]
    snapshot = parse_snapshot(snapshot_file(tmp_path, *records).read_text())
    [failure] = snapshot_failures(read_bundle(bundle), snapshot)
    assert failure.what == "command nvidia-container-runtime"
    assert failure.found.startswith("not shown: a snapshot does not record it")


def test_json_lists_the_strict_failures(tmp_path):
    bundle = hand_bundle(tmp_path)
    (tmp_path / "image").mkdir()
    result = CliRunner().invoke(
        main, ["verify", str(bundle), "--root", str(tmp_path / "image"), "--strict", "--json"]
    )
    assert result.exit_code == 1, result.output
    report = json.loads(result.output)
    assert report["status"] == "differs"
    assert {
        "what": f"unit {FABRIC}",
        "found": "not installed",
        "why": "gpu.fabric-manager: NVSwitch needs it",
    } in report["strict"]


def test_a_bundle_without_install_list_is_bad_input_for_strict(tmp_path):
    bundle = hand_bundle(tmp_path)
    (bundle / "install.list").unlink()
    (tmp_path / "image").mkdir()
    assert run_verify(bundle, root=tmp_path / "image") == 0
    with pytest.raises(InputError, match=r"no install\.list"):
        run_verify(bundle, root=tmp_path / "image", strict=True)


def test_a_generated_bundle_carries_the_hardware_files_gpus(tmp_path):
    assert generate("dgx-h100", "inference", tmp_path / "b").exit_code == 0
    plan = json.loads((tmp_path / "b/plan.json").read_text())
    assert plan["nvidia_gpus"] == 8
    assert plan_from_data(plan).nvidia_gpus == 8
    needs = {n.label for n in bundle_requirements(read_bundle(tmp_path / "b"))}
    assert {f"unit {FABRIC}", f"unit {PERSISTENCED}", "command nvidia-smi"} <= needs


@pytest.mark.parametrize("bad", [True, -1, "8", 1 << 20])
def test_a_plan_json_gpu_count_that_is_no_count_is_refused(bad):
    data = {"format": 1, "tool": "goldtune", "settings": [], "nvidia_gpus": bad}
    with pytest.raises(ValueError, match="nvidia_gpus"):
        plan_from_data(data)
