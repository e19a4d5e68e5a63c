"""GPU health and boot-time robustness (issue 18): Xid classes, bounded nvidia-smi calls in the
collector, ACS read back from the registers, MPS with containers."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from generator.errors import InputError
from generator.inputs.xids import load_xid_table, read_xid_table, xids_path
from generator.model import layout
from generator.model.layout import in_overlay
from generator.model.setting import Plan, Setting
from generator.model.xids import APPLICATION, HARDWARE
from generator.render.render import render_bundle
from generator.verify import health
from generator.verify.run import collector_script, exit_status
from generator.verify.snapshot import Snapshot, parse_snapshot
from generator.verify.verdicts import Check, Verdict


def snapshot_of(*records: tuple[str, str, str]) -> Snapshot:
    lines = ["goldtune-snapshot\tbegin\t1", *("\t".join(r) for r in records)]
    return parse_snapshot("\n".join([*lines, "goldtune-snapshot\tend\t1", ""]))


def xid_line(xid: int, bus: str = "0000:1b:00", what: str = "...") -> str:
    return f"NVRM: Xid (PCI:{bus}): {xid}, pid=1896, {what}"


def xid_snapshot(*lines: str) -> Snapshot:
    return snapshot_of(("xid", "count", str(len(lines))), *(("xid", "-", line) for line in lines))


# --- the table -----------------------------------------------------------------------------------


def test_the_xid_table_classes_what_the_issue_names_each_row_with_its_source() -> None:
    table = load_xid_table()
    for xid in (13, 31, 43, 45):
        assert table[xid].klass == APPLICATION, xid
    for xid in (48, 63, 64, 74, 79, 92, 94, 95, 119, 120):
        assert table[xid].klass == HARDWARE, xid
    assert all(len(row.source) >= 10 and row.name for row in table.values())


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ("class: application", "class: app", "xids[0].class: invalid value 'app'"),
        ("xid: 31", "xid: 13", "Xid 13 is classed twice"),
        ("source: \"k8s-device-plugin health.go ignoredXids: '31", 'nosource: "x', "xids[1]"),
    ],
)
def test_a_bad_xid_table_is_one_clear_line(
    tmp_path: Path, old: str, new: str, message: str
) -> None:
    path = tmp_path / "xids.yaml"
    text = xids_path().read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))
    with pytest.raises(InputError) as error:
        read_xid_table(path)
    assert message in str(error.value) and str(path) in str(error.value)


# --- the verdicts --------------------------------------------------------------------------------


def test_an_application_xid_is_a_warning_and_passes() -> None:
    checks = health.check_xid(
        xid_snapshot(xid_line(13), xid_line(13), xid_line(31)), load_xid_table()
    )
    (check,) = checks
    assert check.verdict == Verdict.WARNING and not check.verdict.fails()
    assert check.actual == (
        "Xid 13 (Graphics Engine Exception) on 0000:1b:00 (x2); "
        "Xid 31 (GPU memory page fault) on 0000:1b:00"
    )
    assert exit_status(checks) == 0


def test_a_hardware_xid_fails_beside_an_application_warning() -> None:
    snap = xid_snapshot(
        xid_line(13, "0000:43:00"), xid_line(79, what="GPU has fallen off the bus.")
    )
    failing, warned = health.check_xid(snap, load_xid_table())
    assert failing.verdict == Verdict.DIFFERS
    assert failing.actual == "Xid 79 (GPU has fallen off the bus) on 0000:1b:00"
    assert warned.verdict == Verdict.WARNING and "Xid 13" in warned.actual
    assert exit_status([failing, warned]) == 1


def test_an_unknown_xid_fails_and_says_it_is_unknown() -> None:
    (check,) = health.check_xid(xid_snapshot(xid_line(250)), load_xid_table())
    assert check.verdict == Verdict.DIFFERS
    assert check.actual == "Xid 250 (unknown: no source classes it) on 0000:1b:00"
    assert "Xid 250: unknown" in check.reason


def test_without_a_table_every_xid_fails() -> None:
    (check,) = health.check_xid(xid_snapshot(xid_line(13)), {})
    assert check.verdict == Verdict.DIFFERS


def test_an_xid_of_a_mig_instance_is_read_with_its_gpu() -> None:
    line = "NVRM: Xid (PCI:0000:01:00 GPU-I:05): 94, pid=7194, Contained: CE User Channel (0x9)."
    (check,) = health.check_xid(xid_snapshot(line), load_xid_table())
    assert check.verdict == Verdict.DIFFERS
    assert check.actual == "Xid 94 (Contained ECC error) on 0000:01:00"


def test_the_counted_events_win_over_the_last_lines_kept() -> None:
    # 1 Xid 79 early in the boot, then 25 Xid 13: the kept lines show only Xid 13.
    kept = [xid_line(13)] * 20
    snap = snapshot_of(
        ("xid", "count", "26"),
        *(("xid", "-", line) for line in kept),
        ("xid-event", "13", "0000:1b:00 25"),
        ("xid-event", "79", "0000:3b:00 1"),
    )
    checks = health.check_xid(snap, load_xid_table())
    assert [c.verdict for c in checks] == [Verdict.DIFFERS, Verdict.WARNING]
    assert checks[0].actual == "Xid 79 (GPU has fallen off the bus) on 0000:3b:00"


# --- the collector against a fake journalctl -----------------------------------------------------

GPU_PLAN = Plan("x", "y", (Setting("gpu", "persistence", "on", "gpu.persistence"),))
FAKE_JOURNALCTL = """\
case "$*" in
    *"-k"*) printf '%s\\n' "usb 1-1: new device"; cat "$FAKE_XIDS" ;;
esac
"""
SMI_ROW = "0, 00000000:1B:00.0, NVIDIA H100, Enabled, Enabled, Enabled, Default, 700.00, 700.00, "
FAKE_SMI = f'echo "{SMI_ROW}1980, 1980, Disabled, Disabled"\n'


def run_collector(
    tmp_path: Path, stubs: dict[str, str], plan: Plan = GPU_PLAN, **env: str
) -> subprocess.CompletedProcess[str]:
    data = tmp_path / "collect.conf"
    data.write_bytes(render_bundle(plan)[in_overlay(layout.COLLECT_DATA)][0])
    fake = tmp_path / "fake"
    fake.mkdir(exist_ok=True)
    for name, body in stubs.items():
        (fake / name).write_text("#!/bin/sh\n" + body)
        (fake / name).chmod(0o755)
    return subprocess.run(
        ["sh", str(collector_script()), str(data)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "PATH": f"{fake}:{os.environ['PATH']}", **env},
    )


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("\u00b2", "0000:01:00 1"),  # str.isdigit says yes, int() refuses it
        ("\u0667\u0669", "0000:01:00 1"),  # Arabic-Indic 79: not an Xid the collector writes
        ("9" * 5000, "0000:01:00 1"),  # more digits than int() converts
        ("79", "0000:01:00 " + "1" * 5000),
        ("79", "0000:01:00 \u0661"),
    ],
)
def test_a_foreign_xid_record_fails_the_check_not_the_run(key: str, value: str) -> None:
    # a hostile or damaged snapshot: the record is not read, and the Xid count still fails
    snap = snapshot_of(("xid", "count", "1"), ("xid-event", key, value))
    (check,) = health.check_xid(snap, load_xid_table())
    assert check.verdict == Verdict.DIFFERS and check.actual == "unparsed", check


def test_an_xid_line_with_a_number_too_long_to_read_is_reported_unparsed() -> None:
    snap = xid_snapshot(f"NVRM: Xid (PCI:0000:1b:00): {'7' * 5000}, pid=1896, ...")
    (check,) = health.check_xid(snap, load_xid_table())
    assert check.verdict == Verdict.DIFFERS and check.actual == "unparsed", check


def test_the_collector_counts_each_xid_and_gpu_of_every_line_it_scans(tmp_path: Path) -> None:
    lines = [
        xid_line(79, "0000:3b:00"),
        *[xid_line(13)] * 25,
        "NVRM: Xid (PCI:0000:01:00 GPU-I:05): 94, pid=7194, Contained: CE User Channel (0x9).",
    ]
    (tmp_path / "xids").write_text("\n".join(lines) + "\n")
    result = run_collector(
        tmp_path,
        {"journalctl": FAKE_JOURNALCTL, "nvidia-smi": FAKE_SMI},
        FAKE_XIDS=str(tmp_path / "xids"),
    )
    assert result.returncode == 0, result.stderr
    snap = parse_snapshot(result.stdout)
    assert snap.value("xid", "count") == "27"
    assert len(snap.values("xid", "-")) == 20  # the last lines kept: no Xid 79 among them
    assert sorted(snap.section("xid-event")) == [
        ("13", "0000:1b:00 25"),
        ("79", "0000:3b:00 1"),
        ("94", "0000:01:00 1"),
    ]
    checks = health.check_xid(snap, load_xid_table())
    assert checks[0].verdict == Verdict.DIFFERS
    assert "Xid 79" in checks[0].actual and "Xid 94" in checks[0].actual


def test_gen_verify_passes_a_node_with_only_an_application_xid_and_says_so(tmp_path: Path) -> None:
    from click.testing import CliRunner
    from test_verify import make_bundle, write_snapshot

    from generator.cli import main

    bundle = make_bundle(tmp_path, [("sysctl", "vm.swappiness", "1")])
    records = [("sysctl", "vm.swappiness", "1"), ("xid", "count", "1"), ("xid", "-", xid_line(13))]
    snap = write_snapshot(tmp_path, *records)
    result = CliRunner().invoke(main, ["verify", str(bundle), "--snapshot", str(snap)])
    assert result.exit_code == 0, result.output
    assert ", 1 warning" in result.output.splitlines()[-1]
    records[-1] = ("xid", "-", xid_line(79))
    snap = write_snapshot(tmp_path, *records)
    result = CliRunner().invoke(main, ["verify", str(bundle), "--snapshot", str(snap)])
    assert result.exit_code == 1, result.output


# What a fresh `gen verify --snapshot` imports of what a snapshot may not need, printed by the
# process itself as it exits.
VERIFY_IMPORTS = """\
import atexit, sys
watched = ("generator.inputs.xids", "generator.verify.image", "tomllib", "yaml")
atexit.register(lambda: print("loaded:", [name for name in watched if name in sys.modules]))
from generator.console import main
main()
"""


@pytest.mark.parametrize(("xid", "loaded"), [(None, []), (13, ["generator.inputs.xids", "yaml"])])
def test_gen_verify_loads_the_xid_table_only_for_a_snapshot_with_xid_events(
    tmp_path: Path, xid: int | None, loaded: list[str]
) -> None:
    """Nor the image's readers (verify --root), nor YAML and TOML for a snapshot without a
    kubelet or containerd setting (issue 43: verify of a snapshot loads what it needs)."""
    import sys

    from test_verify import make_bundle, write_snapshot

    bundle = make_bundle(tmp_path, [("sysctl", "vm.swappiness", "1")])
    records = [("sysctl", "vm.swappiness", "1"), ("xid", "count", "0")]
    if xid is not None:
        records[1:] = [("xid", "count", "1"), ("xid", "-", xid_line(xid))]
    snap = write_snapshot(tmp_path, *records)
    command = [sys.executable, "-c", VERIFY_IMPORTS, "verify", str(bundle), "--snapshot", str(snap)]
    result = subprocess.run(command, capture_output=True, text=True, check=False, cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"loaded: {loaded}" in result.stdout


# --- the collector's nvidia-smi calls are bounded ------------------------------------------------

# A wedged GPU: every nvidia-smi call hangs (each call is logged in $STUB_LOG).
SLEEPING_SMI = 'echo "$*" >>"$STUB_LOG"\nexec sleep 60\n'
MIG_SMI_THEN_HANG = f"""\
echo "$*" >>"$STUB_LOG"
case "$*" in
    --query-gpu=*)
        echo "{SMI_ROW}1980, 1980, Enabled, Enabled"
        echo "{SMI_ROW.replace("0, 0000", "1, 0000", 1)}1980, 1980, Enabled, Enabled" ;;
    *) exec sleep 60 ;;
esac
"""
MIG_PLAN = Plan("x", "y", (Setting("gpu", "mig-layout", "3g.40gb", "gpu.mig"),))


def test_a_wedged_gpu_is_reported_not_a_hang(tmp_path: Path) -> None:
    import time

    log = tmp_path / "calls"
    started = time.monotonic()
    result = run_collector(
        tmp_path, {"nvidia-smi": SLEEPING_SMI}, TEST_SMI_LIMIT="1", STUB_LOG=str(log)
    )
    assert time.monotonic() - started < 30, "the call was not bounded"
    assert result.returncode == 0, result.stderr
    snap = parse_snapshot(result.stdout)
    tool = snap.value("gpu", "tool") or ""
    assert tool.startswith("!timed-out nvidia-smi did not answer within 1 s"), tool
    (check,) = health.check_nvidia_smi(snap)
    assert check.verdict == Verdict.DIFFERS and "inventory: timed-out" in check.actual


# A timeout that says how it was asked to bound the call, then reports it timed out.
LOGGING_TIMEOUT = 'echo "$*" >>"$STUB_LOG"\nexit 124\n'


@pytest.mark.parametrize("limit", ["0", "00", "", "abc", "-1", "1.5"])
def test_a_test_limit_that_bounds_nothing_keeps_the_default(tmp_path: Path, limit: str) -> None:
    # `timeout 0` would run nvidia-smi unbounded: the "never a hang" above undone by a variable
    log = tmp_path / "calls"
    stubs = {"nvidia-smi": SLEEPING_SMI, "timeout": LOGGING_TIMEOUT}
    result = run_collector(tmp_path, stubs, TEST_SMI_LIMIT=limit, STUB_LOG=str(log))
    assert result.returncode == 0, result.stderr
    calls = log.read_text().splitlines()
    assert calls and calls[0].startswith("-k 5 15 nvidia-smi "), calls


def test_after_one_call_timed_out_no_further_nvidia_smi_call_is_made(tmp_path: Path) -> None:
    log = tmp_path / "calls"
    result = run_collector(
        tmp_path, {"nvidia-smi": MIG_SMI_THEN_HANG}, MIG_PLAN, TEST_SMI_LIMIT="1", STUB_LOG=str(log)
    )
    assert result.returncode == 0, result.stderr
    snap = parse_snapshot(result.stdout)
    assert snap.value("gpu", "tool") == "ok"
    assert (snap.value("gpu-mig", "0") or "").startswith("!timed-out nvidia-smi did not answer")
    assert (snap.value("gpu-mig", "1") or "").startswith("!timed-out not run")
    assert log.read_text().count("mig -i") == 1  # GPU 1's listing was never started
    (check,) = health.check_nvidia_smi(snap)
    assert "GPU 0: timed-out" in check.actual and "GPU 1: timed-out not run" in check.actual


def test_a_snapshot_whose_nvidia_smi_answered_has_no_such_finding() -> None:
    assert health.check_nvidia_smi(snapshot_of(("gpu", "tool", "ok"))) == []


# --- ACS read back from the ports' config space --------------------------------------------------

ACS_PLAN = Plan(
    "x",
    "y",
    (
        Setting("pcie-acs", "gpus", "off", "boot.acs"),
        Setting("pcie-acs", "nic ib0", "off", "boot.acs"),
    ),
)


def config_space(port_type: int | None, acs_control: int | None, size: int = 4096) -> bytes:
    """A port's config space: a PCI Express capability of that port type at 0x40 (from the
    capabilities pointer at 0x34), then AER at 0x100 and, when given, ACS at 0x148."""
    space = bytearray(size)
    if size < 0x150:
        return bytes(space)
    space[0x34] = 0x40
    if port_type is not None:
        space[0x40:0x44] = bytes([0x10, 0x00]) + ((port_type << 4) | 2).to_bytes(2, "little")
    next_cap = 0x148 if acs_control is not None else 0
    space[0x100:0x104] = (0x0001 | 1 << 16 | next_cap << 20).to_bytes(4, "little")
    if acs_control is not None:
        space[0x148:0x14C] = (0x000D | 1 << 16).to_bytes(4, "little")
        space[0x14C:0x14E] = (0x005F).to_bytes(2, "little")  # the ACS capability register
        space[0x14E:0x150] = acs_control.to_bytes(2, "little")
    return bytes(space)


def acs_machine(
    tmp_path: Path, controls: dict[str, int | None], iommu: str | None = None, size: int = 4096
) -> Path:
    """test_scripts' PCI tree (root port, switch, GPU, ib0, a bare root port), with a config file
    in each port: its type from the test's PCI Express flags, its ACS control from CONTROLS."""
    from test_scripts import PATHS, PORTS, pci_machine

    tree, _ = pci_machine(tmp_path / "tree", iommu)
    for bridges in PATHS.values():
        for depth, bridge in enumerate(bridges):
            port = tree / "sys/devices/pci0000:00" / "/".join(bridges[: depth + 1])
            port_type = int(PORTS[bridge][0], 16) >> 4 & 15
            (port / "config").write_bytes(config_space(port_type, controls[bridge], size))
    return tree


def acs_checks(tmp_path: Path, tree: Path) -> tuple[Snapshot, list[Check]]:
    from generator.bundle.read import Bundle
    from generator.verify.checks_gpu import check_pcie_acs
    from generator.verify.live_state import Live

    result = run_collector(tmp_path, {}, ACS_PLAN, TEST_SYSROOT=str(tree))
    assert result.returncode == 0, result.stderr
    snap = parse_snapshot(result.stdout)
    live = Live.of(snap, Bundle(tmp_path, ACS_PLAN))
    return snap, [check_pcie_acs(setting, live) for setting in ACS_PLAN.settings]


def after_boot() -> dict[str, int | None]:
    from test_scripts import BARE_ROOT, DOWN_GPU, DOWN_NIC, ROOT_PORT, UPSTREAM

    # what pcie-acs leaves: root and downstream ports 0000, the upstream port untouched
    return {ROOT_PORT: 0, UPSTREAM: 0x1D, DOWN_GPU: 0, DOWN_NIC: 0, BARE_ROOT: None}


def test_the_collector_reads_acs_control_of_each_root_and_downstream_port(tmp_path: Path) -> None:
    from test_scripts import BARE_ROOT, DOWN_GPU, DOWN_NIC, ROOT_PORT

    snap, checks = acs_checks(tmp_path, acs_machine(tmp_path, after_boot()))
    assert sorted(snap.values("acs", "gpus")) == sorted(
        [f"{ROOT_PORT} root 0000", f"{DOWN_GPU} downstream 0000", f"{BARE_ROOT} !no-acs"]
    )  # the switch's upstream port is not pcie-acs's: no record
    assert sorted(snap.values("acs", "nic:ib0")) == [
        f"{ROOT_PORT} root 0000",
        f"{DOWN_NIC} downstream 0000",
    ]
    assert [c.verdict for c in checks] == [Verdict.OK, Verdict.OK]
    assert checks[0].actual == "ACS control 0000 on 2 ports (read from config space)"


def test_acs_on_again_after_boot_differs_naming_the_port_and_bits(tmp_path: Path) -> None:
    from test_scripts import DOWN_GPU

    controls = {**after_boot(), DOWN_GPU: 0x001D}
    _, (gpus, nic) = acs_checks(tmp_path, acs_machine(tmp_path, controls))
    assert gpus.verdict == Verdict.DIFFERS
    assert gpus.actual == (
        f"{DOWN_GPU}: 001d (source validation, P2P request redirect, P2P completion redirect, "
        "upstream forwarding)"
    )
    assert nic.verdict == Verdict.OK


def test_an_unprivileged_read_of_config_space_is_not_judged(tmp_path: Path) -> None:
    # the kernel gives a reader without CAP_SYS_ADMIN the first 64 bytes only
    _, checks = acs_checks(tmp_path, acs_machine(tmp_path, after_boot(), size=64))
    assert {c.verdict for c in checks} == {Verdict.NOT_JUDGED}
    assert "only root" in checks[0].reason


def test_acs_left_on_where_the_iommu_translates_is_not_applicable(tmp_path: Path) -> None:
    from test_scripts import GPU0

    controls = dict.fromkeys(after_boot(), 0x001D)
    snap, checks = acs_checks(tmp_path, acs_machine(tmp_path, controls, iommu="DMA-FQ"))
    assert f"!iommu {GPU0} DMA-FQ" in snap.values("acs", "gpus")
    assert {c.verdict for c in checks} == {Verdict.NOT_APPLICABLE}
    assert "the IOMMU translates its DMA" in checks[0].reason


def test_no_such_device_is_not_applicable(tmp_path: Path) -> None:
    _, checks = acs_checks(tmp_path, tmp_path / "empty")
    assert {c.verdict for c in checks} == {Verdict.NOT_APPLICABLE}


# --- MPS with containers ------------------------------------------------------------------------


def mps_profile(tmp_path: Path, extends: str, extra: str = "") -> str:
    path = tmp_path / "mps.yaml"
    path.write_text(f"description: test\nextends: {extends}\ngpu_mps: true\n{extra}")
    return str(path)


def test_on_a_kubernetes_node_mps_is_the_device_plugins_and_explain_says_so(tmp_path: Path) -> None:
    from generator.commands.generate import render_for

    files = render_for("dgx-h100", mps_profile(tmp_path, "training-k8s"))
    assert in_overlay(layout.unit_file(layout.MPS_UNIT)) not in files
    assert layout.MPS_UNIT.encode() not in files["install.list"][0]
    explain = files["EXPLAIN.md"][0].decode()
    assert "sharing.mps" in explain and "/run/nvidia/mps/<resource>/pipe" in explain


def test_with_docker_the_host_daemon_runs_and_explain_says_what_to_pass(tmp_path: Path) -> None:
    from generator.commands.generate import render_for

    profile = mps_profile(tmp_path, "inference", "containers: docker\n")
    files = render_for("dgx-h100", profile)
    assert in_overlay(layout.unit_file(layout.MPS_UNIT)) in files
    explain = " ".join(files["EXPLAIN.md"][0].decode().split())
    assert (
        f"--ipc=host -v {layout.MPS_PIPE_DIR}:{layout.MPS_PIPE_DIR} "
        f"-e CUDA_MPS_PIPE_DIRECTORY={layout.MPS_PIPE_DIR}" in explain
    )


# --- optional units: a field of the setting, not a list in the renderer -------------------------


def requires(plan: Plan) -> list[str]:
    text = render_bundle(plan)["install.list"][0].decode()
    return [line for line in text.splitlines() if line.startswith("require\t")]


def test_an_optional_unit_is_enabled_but_never_required() -> None:
    plan = Plan(
        "x",
        "y",
        (
            Setting("service", "site-agent.service", "enable", "r", "t.a", optional=True),
            Setting("service", "nvidia-persistenced.service", "enable", "r", "t.b"),
        ),
    )
    assert requires(plan) == ["require\tunit\tnvidia-persistenced.service"]
    listing = render_bundle(plan)["install.list"][0].decode()
    assert "service\tenable\tsite-agent.service" in listing


def test_dcgm_is_optional_in_the_plan_and_survives_plan_json() -> None:
    from generator.commands.generate import plan_for
    from generator.model.planio import plan_from_data, plan_to_data

    plan = plan_for("dgx-h100", "training")
    (dcgm,) = [s for s in plan.of_kind("service") if s.key == "nvidia-dcgm.service"]
    assert dcgm.optional
    assert [s.optional for s in plan_from_data(plan_to_data(plan)).settings] == [
        s.optional for s in plan.settings
    ]
    assert not any("nvidia-dcgm" in line for line in requires(plan))


def test_verify_says_an_absent_optional_unit_is_optional() -> None:
    from generator.bundle.read import Bundle
    from generator.verify.checks_runtime import check_service
    from generator.verify.live_state import Live

    snap = snapshot_of(("unit-enabled", "nvidia-dcgm.service", "!absent"))
    dcgm = Setting("service", "nvidia-dcgm.service", "enable", "r", "gpu.dcgm", optional=True)
    check = check_service(dcgm, Live.of(snap, Bundle(Path("."), Plan("x", "y", (dcgm,)))))
    assert check.verdict == Verdict.NOT_APPLICABLE and "optional" in check.reason


# --- an absent required unit: missing where the plan's GPUs are, not applicable elsewhere ------

FABRIC = "nvidia-fabricmanager.service"
ON_A_GPU_MACHINE = {
    "nvidia-smi": [("gpu", "tool", "ok"), ("gpu", "0", SMI_ROW + "1980, 1980, Disabled, Disabled")],
    "pci, no driver": [("gpu", "tool", "!absent"), ("gpu-pci", "count", "8")],
    "acs read": [("gpu", "tool", "!absent"), ("acs", "gpus", "0000:00:01.0 root 0000")],
}
WITHOUT_GPUS = {
    "vm": [("gpu", "tool", "!absent"), ("gpu-pci", "count", "0"), ("acs", "gpus", "!absent")],
    "older collector": [("gpu", "tool", "!absent")],
    "nvidia-smi, no GPU": [("gpu", "tool", "!failed No devices were found")],
}


def service_check(unit: str, records: list[tuple[str, str, str]], distro: str = "") -> Check:
    from generator.bundle.read import Bundle
    from generator.verify.checks_runtime import check_service
    from generator.verify.live_state import Live

    setting = Setting("service", unit, "enable", "r", "gpu.fabric")
    snap = snapshot_of(("unit-enabled", unit, "!absent"), *records)
    return check_service(
        setting, Live.of(snap, Bundle(Path("."), Plan("x", "y", (setting,), distro=distro)))
    )


@pytest.mark.parametrize("records", ON_A_GPU_MACHINE.values(), ids=ON_A_GPU_MACHINE.keys())
def test_an_absent_required_unit_on_a_gpu_machine_is_missing(
    records: list[tuple[str, str, str]],
) -> None:
    check = service_check(FABRIC, records, "ubuntu-24.04")
    assert check.verdict == Verdict.MISSING, check
    # the package the distro table names for the unit (hardware_db/distros/ubuntu-24.04.yaml)
    assert "nvidia-fabricmanager-580 580.178.04" in check.reason, check.reason


@pytest.mark.parametrize(
    ("unit", "distro", "says"),
    [
        ("nvidia-imex.service", "ubuntu-24.04", "ubuntu-24.04.yaml names no package"),
        (FABRIC, "debian-12", "debian-12.yaml names no package"),  # Debian does not package it
        (FABRIC, "", "a portable bundle names none"),
        (FABRIC, "../../../etc/passwd", "no distro table names a package"),  # a forged plan.json
        (FABRIC, "no-such-os", "no-such-os.yaml names no package"),
        ("nvidia-persistenced.service", "rhel-9", "rhel-9 packages it in nvidia-persistenced"),
    ],
)
def test_a_missing_unit_names_its_package_only_where_the_distro_table_knows_it(
    unit: str, distro: str, says: str
) -> None:
    check = service_check(unit, ON_A_GPU_MACHINE["pci, no driver"], distro)
    assert check.verdict == Verdict.MISSING and says in check.reason, check.reason


def test_an_absent_own_unit_on_a_gpu_machine_is_missing_the_bundle() -> None:
    from generator.bundle.read import Bundle
    from generator.verify.checks_runtime import check_service
    from generator.verify.live_state import Live

    setting = Setting("service", layout.GPU_UNIT, "enable", "r", "gpu.unit")
    snap = snapshot_of(("unit-enabled", layout.GPU_UNIT, "!absent"), ("gpu-pci", "count", "8"))
    bundle = Bundle(Path("."), Plan("x", "y", (setting,)), units={layout.GPU_UNIT: "[Unit]\n"})
    check = check_service(setting, Live.of(snap, bundle))
    assert check.verdict == Verdict.MISSING and "install the bundle" in check.reason, check


@pytest.mark.parametrize("records", WITHOUT_GPUS.values(), ids=WITHOUT_GPUS.keys())
def test_an_absent_required_unit_without_gpus_is_not_applicable_saying_why(
    records: list[tuple[str, str, str]],
) -> None:
    check = service_check(FABRIC, records, "ubuntu-24.04")
    assert check.verdict == Verdict.NOT_APPLICABLE, check
    # the boot test's VM allowance (tests/boot/test_boot.py NOT_APPLICABLE_IN_VM) reads this
    assert "is not installed here" in check.reason and "no NVIDIA GPU here" in check.reason


def test_the_collector_counts_the_nvidia_gpus_on_the_pci_bus(tmp_path: Path) -> None:
    from test_scripts import pci_machine

    tree, _ = pci_machine(tmp_path / "tree")  # two NVIDIA GPUs (3D and VGA class), a Mellanox NIC
    result = run_collector(tmp_path, {}, TEST_SYSROOT=str(tree))
    assert result.returncode == 0, result.stderr
    assert parse_snapshot(result.stdout).value("gpu-pci", "count") == "2"
    (tmp_path / "bare/sys/bus/pci/devices").mkdir(parents=True)
    result = run_collector(tmp_path, {}, TEST_SYSROOT=str(tmp_path / "bare"))
    assert parse_snapshot(result.stdout).value("gpu-pci", "count") == "0"


def test_a_plan_json_optional_that_is_not_a_boolean_is_refused() -> None:
    from generator.bundle.read import check_plan_shape

    with pytest.raises(ValueError, match="'optional' is not true or false"):
        check_plan_shape({"settings": [{"kind": "service", "optional": "yes"}]})
