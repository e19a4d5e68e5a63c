"""GPU sharing (issue 18, "Missing"): the CUDA MPS unit, MIG layouts applied by gpu-setup."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from generate import generate
from test_install import make_bin
from validators.checks_system import check_units

from generator.commands.generate import render_for
from generator.inputs.catalog import GpuModel, load_catalog
from generator.inputs.xids import load_xid_table
from generator.model import layout, mig
from generator.model.layout import in_overlay
from generator.model.setting import Plan, Setting
from generator.paths import templates_dir
from generator.render.render import render_bundle
from generator.verify import health
from generator.verify.run import collector_script
from generator.verify.snapshot import Snapshot, parse_snapshot
from generator.verify.verdicts import Verdict

MPS_UNIT_FILE = in_overlay(layout.unit_file(layout.MPS_UNIT))
WORKLOADS = {"kubelet.service", "containerd.service", "docker.service", "slurmd.service"}


def profile_file(tmp_path: Path, text: str, name: str = "sharing") -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(f"description: test\nextends: inference\n{text}")
    return path


def test_no_mps_unit_unless_the_profile_asks() -> None:
    files = render_for("dgx-h100", "inference")
    assert MPS_UNIT_FILE not in files
    assert layout.MPS_UNIT.encode() not in files["install.list"][0]


def test_the_mps_unit_runs_the_daemon_after_the_gpu_unit_before_the_workloads(
    tmp_path: Path,
) -> None:
    files = render_for("dgx-h100", str(profile_file(tmp_path, "gpu_mps: true\n")))
    text = files[MPS_UNIT_FILE][0].decode()
    assert f"ExecStart={layout.MPS_CONTROL} -d\n" in text
    assert "Type=forking\n" in text
    assert "RuntimeDirectoryMode=1777\n" in text  # servers run with each client's UID
    assert f"CUDA_MPS_PIPE_DIRECTORY={layout.MPS_PIPE_DIR} " in text
    assert f"CUDA_MPS_LOG_DIRECTORY={layout.MPS_LOG_DIR}\n" in text
    (after,) = re.findall(r"^After=(.*)$", text, re.MULTILINE)
    assert layout.GPU_UNIT in after.split()
    (before,) = re.findall(r"^Before=(.*)$", text, re.MULTILINE)
    assert set(before.split()) == WORKLOADS
    assert not re.search(r"^(Wants|Requires)=", text, re.MULTILINE), "orders, never pulls in"
    assert f"service\tenable\t{layout.MPS_UNIT}" in files["install.list"][0].decode()


def test_the_mps_unit_passes_systemd_analyze_verify(tmp_path: Path) -> None:
    result = generate("dgx-h100", profile_file(tmp_path, "gpu_mps: true\n"), tmp_path / "b")
    assert result.exit_code == 0, result.output
    assert (tmp_path / "b" / MPS_UNIT_FILE).is_file()
    assert check_units(tmp_path / "b") == []


# --- MIG layouts applied by gpu-setup against a fake nvidia-smi ---------------------------------

SCRIPT = templates_dir() / layout.SCRIPTS_DIR / "gpu-setup"
# A fake nvidia-smi with state in $FAKE_STATE: mig-<i> holds "current, pending" MIG mode,
# instances-<i> one GPU instance profile name a line. Every call but the inventory is recorded
# in $STUB_LOG. $FAKE_RESET set: enabling MIG stays pending until a GPU reset (as on A100).
FAKE_MIG_SMI = """\
case $1 in --query-gpu=*) cat "$FAKE_INVENTORY"; exit 0 ;; esac
printf '%s\\n' "$*" >>"$STUB_LOG"
case "$*" in
    "-i "*" --query-gpu=mig.mode.current,mig.mode.pending --format=csv,noheader")
        cat "$FAKE_STATE/mig-$2" ;;
    "-i "*" -mig 1")
        mode="Enabled, Enabled"
        [ -z "${FAKE_RESET:-}" ] || mode="Disabled, Enabled"
        echo "$mode" >"$FAKE_STATE/mig-$2" ;;
    "mig -i "*" -lgi")
        if [ ! -s "$FAKE_STATE/instances-$3" ]; then
            echo "No GPU instances found: Not Found"
            exit 6
        fi
        echo "| GPU   Name             Profile  Instance   Placement  |"
        echo "|=======================================================|"
        while read -r name; do
            echo "|   $3  MIG $name          19        7          0:1     |"
        done <"$FAKE_STATE/instances-$3" ;;
    "mig -i "*" -cgi "*" -C")
        echo "$5" | tr , '\\n' >"$FAKE_STATE/instances-$3"
        echo "Successfully created GPU instance ID  1 on GPU  $3" ;;
esac
exit 0
"""
H100_ROW = "{index}, NVIDIA H100 80GB HBM3, 1980, 200.00, 700.00, 700.00, Enabled, {mig}"
LAYOUT = "3g.40gb,2g.20gb,1g.10gb,1g.10gb"
CREATE = f"mig -i 0 -cgi {LAYOUT} -C"


def mig_machine(tmp_path: Path, mig: str = "Disabled", instances: str = "") -> Path:
    """The fake's state for GPU 0: MIG mode as the inventory reports it, and its instances."""
    state = tmp_path / "state"
    state.mkdir(exist_ok=True)
    (state / "mig-0").write_text(f"{mig}, {mig}\n")
    (state / "instances-0").write_text(instances)
    return state


def run_mig(
    tmp_path: Path, data: str, state: Path, **env: str
) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    mig = (state / "mig-0").read_text().split(",")[0]
    (tmp_path / "gpu.conf").write_text(f"log-as\tgt-gpu\n{data}")
    (tmp_path / "inventory").write_text(H100_ROW.format(index=0, mig=mig) + "\n")
    log = tmp_path / "smi.log"
    log.write_text("")
    bin_dir = tmp_path / "bin"
    if not bin_dir.exists():
        bin_dir = make_bin(tmp_path, {"nvidia-smi": FAKE_MIG_SMI, "systemctl": "exit 1\n"})
        for tool in ("timeout", "date", "sleep"):
            (bin_dir / tool).symlink_to(shutil.which(tool) or f"/bin/{tool}")
    result = subprocess.run(
        [str(SCRIPT), str(tmp_path / "gpu.conf")],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
        env={
            "PATH": str(bin_dir),
            "STUB_LOG": str(log),
            "FAKE_INVENTORY": str(tmp_path / "inventory"),
            "FAKE_STATE": str(state),
            "LC_ALL": "C",
            **env,
        },
    )
    return result, log.read_text().splitlines()


def test_gpu_setup_turns_mig_on_then_creates_the_layout(tmp_path: Path) -> None:
    state = mig_machine(tmp_path)
    result, calls = run_mig(tmp_path, f"mig\ton\nmig-layout\t{LAYOUT}\n", state)
    assert result.returncode == 0, result.stdout
    assert calls[0] == "-i 0 -mig 1"
    assert calls[-2:] == ["mig -i 0 -lgi", CREATE]
    assert f"gt-gpu: GPU 0: MIG layout {LAYOUT} created: done" in result.stdout


def test_gpu_setup_mig_layout_is_idempotent(tmp_path: Path) -> None:
    state = mig_machine(tmp_path)
    data = f"mig\ton\nmig-layout\t{LAYOUT}\n"
    run_mig(tmp_path, data, state)
    result, calls = run_mig(tmp_path, data, state)  # the same boot again: nothing to change
    assert result.returncode == 0, result.stdout
    assert "-i 0 -mig 1" not in calls
    assert not [call for call in calls if "-cgi" in call], result.stdout
    assert "GPU 0: MIG layout already 3g.40gb,2g.20gb,1g.10gb,1g.10gb" in result.stdout


def test_gpu_setup_reports_a_pending_mig_mode_and_creates_nothing(tmp_path: Path) -> None:
    state = mig_machine(tmp_path)
    result, calls = run_mig(tmp_path, f"mig\ton\nmig-layout\t{LAYOUT}\n", state, FAKE_RESET="1")
    assert result.returncode == 0
    assert not [call for call in calls if call.startswith("mig ")], result.stdout
    assert "MIG mode on is pending: a GPU reset (nvidia-smi -i 0 -r" in result.stdout


def test_gpu_setup_leaves_other_mig_instances_alone(tmp_path: Path) -> None:
    state = mig_machine(tmp_path, mig="Enabled", instances="7g.80gb\n")
    result, calls = run_mig(tmp_path, f"mig\ton\nmig-layout\t{LAYOUT}\n", state)
    assert result.returncode == 0
    assert not [call for call in calls if "-cgi" in call], result.stdout
    assert "has MIG instances 7g.80gb, not the planned" in result.stdout


def test_gpu_setup_same_names_in_another_count_are_not_the_layout(tmp_path: Path) -> None:
    state = mig_machine(tmp_path, mig="Enabled", instances="3g.40gb\n2g.20gb\n1g.10gb\n")
    result, calls = run_mig(tmp_path, f"mig\ton\nmig-layout\t{LAYOUT}\n", state)
    assert not [call for call in calls if "-cgi" in call], result.stdout
    assert "not the planned" in result.stdout


@pytest.mark.parametrize(
    "value",
    [
        "3g.40gb;reboot",
        "3g.40gb $(reboot)",
        "8g.10gb",
        "3g.gb",
        "1g.10gb,,2g.20gb",
        "1g.10gb,",
        "1g.10gb+xx",
        ",".join(["1g.10gb"] * 8),
    ],
)
def test_gpu_setup_refuses_a_bad_mig_layout_and_calls_nothing(tmp_path: Path, value: str) -> None:
    state = mig_machine(tmp_path)
    result, calls = run_mig(tmp_path, f"mig\ton\nmig-layout\t{value}\n", state)
    assert result.returncode == 2, result.stdout
    assert "mig-layout" in result.stdout and "nothing done" in result.stdout
    assert calls == []


# --- the MIG profile tables of hardware_db and the layout check ---------------------------------

MIG_MODELS = [model for model in load_catalog().gpus.entries if model.mig_profiles]


def test_the_models_the_brief_names_have_mig_profiles() -> None:
    keys = {model.key for model in MIG_MODELS}
    assert {"A100-SXM4-80GB", "A30", "H100-SXM5-80GB", "H200-SXM-141GB", "B200"} <= keys
    # MIG-capable, but the per-model profile list is not sourced here: left empty, refused
    assert {"GH200", "GB200"}.isdisjoint(keys)


@pytest.mark.parametrize("model", MIG_MODELS, ids=lambda model: model.key)
def test_each_profiles_count_is_what_its_slices_allow(model: GpuModel) -> None:
    """NVIDIA's per-profile counts agree with the slice arithmetic of generator.model.mig: the
    tables and the check cannot drift apart unnoticed."""
    compute, memory = mig.whole_gpu(model.mig_profiles)
    assert compute == model.mig_max_instances
    for name, count in model.mig_profiles.items():
        slices = (
            compute // mig.compute_slices(name),
            memory // mig.memory_slices(name, model.mig_profiles),
        )
        assert count == (1 if name.endswith("+me") else min(slices)), name
        assert mig.layout_problem({name: count}, model.mig_profiles) is None


@pytest.mark.parametrize(
    ("key", "layout", "problem"),
    [
        # mig-parted's all-balanced layouts fit
        ("H100-SXM5-80GB", {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}, None),
        ("H100-NVL", {"1g.12gb": 1, "2g.24gb": 1, "3g.47gb": 1}, None),
        ("H200-SXM-141GB", {"1g.18gb": 2, "2g.35gb": 1, "3g.71gb": 1}, None),
        ("B200", {"1g.23gb": 2, "2g.45gb": 1, "3g.90gb": 1}, None),
        ("A30", {"1g.6gb": 2, "2g.12gb": 1}, None),
        ("A100-SXM4-80GB", {"4g.40gb": 1, "3g.40gb": 1}, None),
        # memory runs out before compute: 3g.40gb takes half the memory
        ("A100-SXM4-80GB", {"3g.40gb": 2, "1g.10gb": 1}, "9 of 8 memory slices"),
        ("A30", {"2g.12gb": 1, "4g.24gb": 1}, "6 of 4 compute slices"),
        ("A100-SXM4-80GB", {"1g.10gb": 8}, "1g.10gb x8 (at most 7)"),
        ("A30", {"1g.6gb+me": 1, "2g.12gb+me": 1}, "at most one instance with media extensions"),
        ("H100-SXM5-80GB", {"1g.5gb": 1}, "1g.5gb not among its profiles (1g.10gb, "),
    ],
)
def test_layout_fits_or_says_why(key: str, layout: dict[str, int], problem: str | None) -> None:
    (model,) = [model for model in MIG_MODELS if model.key == key]
    found = mig.layout_problem(layout, model.mig_profiles)
    assert (found is None) if problem is None else (problem in (found or "")), found


def test_a_layout_the_gpu_cannot_hold_is_exit_2_naming_the_allowed_profiles(
    tmp_path: Path,
) -> None:
    result = generate(
        "dgx-h100", profile_file(tmp_path, 'gpu_mig_layout: {"1g.5gb": 7}\n'), tmp_path / "b"
    )
    assert result.exit_code == 2
    assert "gpu_mig_layout on H100-SXM5-80GB: 1g.5gb not among its profiles" in result.output
    assert "1g.10gb, 1g.10gb+me, 1g.20gb, 2g.20gb, 3g.40gb, 4g.40gb, 7g.80gb" in result.output
    assert "Traceback" not in result.output
    assert not (tmp_path / "b").exists()


def test_a_model_without_a_profile_table_refuses_a_layout(tmp_path: Path) -> None:
    result = generate(
        "gh200", profile_file(tmp_path, 'gpu_mig_layout: {"1g.12gb": 1}\n'), tmp_path / "b"
    )
    assert result.exit_code == 2
    assert "GH200: its MIG profiles are not in hardware_db" in result.output


def test_a_layout_with_mig_disable_is_exit_2(tmp_path: Path) -> None:
    text = 'gpu_mig: disable\ngpu_mig_layout: {"7g.80gb": 1}\n'
    result = generate("dgx-h100", profile_file(tmp_path, text), tmp_path / "b")
    assert result.exit_code == 2
    assert "gpu_mig_layout: a MIG layout needs MIG on, but gpu_mig is disable" in result.output


def test_a_layout_reaches_the_gpu_data_file_largest_first(tmp_path: Path) -> None:
    text = 'gpu_mig_layout: {"1g.10gb": 2, "3g.40gb": 1, "2g.20gb": 1}\n'
    files = render_for("dgx-h100", str(profile_file(tmp_path, text)))
    data = files[in_overlay(layout.GPU_DATA)][0].decode()
    assert "\nmig\ton\n" in data
    assert f"\nmig-layout\t{LAYOUT}\n" in data


# --- the collector reads the live MIG instances -------------------------------------------------

ROW = "{index}, 00000000:1B:00.0, NVIDIA H100, Enabled, Enabled, Enabled, Default, 700.00, 700.00, "
COLLECT_SMI = f"""\
case "$*" in
    --query-gpu=*)
        echo "{ROW.format(index=0)}1980, 1980, Enabled, Enabled"
        echo "{ROW.format(index=1)}1980, 1980, Disabled, Disabled"
        echo "{ROW.format(index=2)}1980, 1980, Enabled, Enabled" ;;
    "mig -i 0 -lgi")
        echo "| GPU   Name             Profile  Instance   Placement  |"
        echo "|   0  MIG 3g.40gb           9        2          4:4     |"
        echo "|   0  MIG 1g.10gb+me       20       13          0:1     |" ;;
    "mig -i 2 -lgi") echo "No GPU instances found: Not Found"; exit 6 ;;
    *) echo "unexpected: $*" >&2; exit 1 ;;
esac
"""


def run_collector_with(tmp_path: Path, plan: Plan, stubs: dict[str, str]) -> Snapshot:
    data = tmp_path / "collect.conf"
    data.write_bytes(render_bundle(plan)[in_overlay(layout.COLLECT_DATA)][0])
    fake = tmp_path / "fake"
    fake.mkdir()
    for name, body in stubs.items():
        (fake / name).write_text("#!/bin/sh\n" + body)
        (fake / name).chmod(0o755)
    result = subprocess.run(
        ["sh", str(collector_script()), str(data)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "PATH": f"{fake}:{os.environ['PATH']}"},
    )
    assert result.returncode == 0, result.stderr
    return parse_snapshot(result.stdout)


MIG_PLAN = Plan("x", "y", (Setting("gpu", "mig-layout", "3g.40gb,1g.10gb+me", "gpu.mig"),))


def test_the_collector_lists_the_mig_instances_of_each_gpu_in_mig_mode(tmp_path: Path) -> None:
    snap = run_collector_with(tmp_path, MIG_PLAN, {"nvidia-smi": COLLECT_SMI})
    assert snap.value("gpu-mig", "0") == "3g.40gb,1g.10gb+me"
    assert snap.value("gpu-mig", "1") is None  # MIG off: nothing to list
    assert snap.value("gpu-mig", "2") == "none"


# --- Xid events: collected from this boot's kernel log, a failed health check ------------------

XID_LINES = (
    "NVRM: Xid (PCI:0000:1b:00): 79, pid=1896, GPU has fallen off the bus.",
    "NVRM: Xid (PCI:0000:43:00): 48, pid=2100, DBE (double bit error) ECC error",
    "NVRM: Xid (PCI:0000:1b:00): 79, pid=1896, GPU has fallen off the bus.",
)
FAKE_JOURNALCTL = """\
case "$*" in
    *"-k"*) printf '%s\\n' "usb 1-1: new device" "$FAKE_XIDS" "eth0: link up" ;;
esac
"""


def test_the_collector_counts_and_keeps_this_boots_xid_lines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_XIDS", "\n".join(XID_LINES))
    snap = run_collector_with(
        tmp_path, MIG_PLAN, {"nvidia-smi": COLLECT_SMI, "journalctl": FAKE_JOURNALCTL}
    )
    assert snap.value("xid", "count") == "3"
    assert snap.values("xid", "-") == list(XID_LINES)


def test_the_collector_reports_no_xid_as_zero(tmp_path: Path) -> None:
    snap = run_collector_with(
        tmp_path, MIG_PLAN, {"nvidia-smi": COLLECT_SMI, "journalctl": "echo 'eth0: link up'\n"}
    )
    assert snap.value("xid", "count") == "0"


def snapshot_of(*records: tuple[str, str, str]) -> Snapshot:
    lines = ["goldtune-snapshot\tbegin\t1", *("\t".join(r) for r in records)]
    return parse_snapshot("\n".join([*lines, "goldtune-snapshot\tend\t1", ""]))


def test_xid_events_fail_the_health_check_naming_each_xid_and_gpu() -> None:
    records = [("xid", "count", "3"), *(("xid", "-", line) for line in XID_LINES)]
    (check,) = health.check_xid(snapshot_of(*records), load_xid_table())
    assert check.verdict == Verdict.DIFFERS
    assert check.actual == (
        "Xid 79 (GPU has fallen off the bus) on 0000:1b:00 (x2); "
        "Xid 48 (DBE (double bit error) ECC error) on 0000:43:00"
    )
    assert "docs.nvidia.com/deploy/xid-errors" in check.reason


@pytest.mark.parametrize(
    ("count", "verdict"), [("0", Verdict.OK), ("!unavailable", Verdict.NOT_APPLICABLE)]
)
def test_no_xid_is_healthy_and_an_unreadable_log_is_not_judged(
    count: str, verdict: Verdict
) -> None:
    (check,) = health.check_xid(snapshot_of(("xid", "count", count)), load_xid_table())
    assert check.verdict == verdict


def test_no_xid_section_no_check() -> None:
    assert health.check_xid(snapshot_of(("meta", "uid", "0")), load_xid_table()) == []
