"""The renderer: every file of the bundle from a hand-built plan, its format, comments, checks."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import jinja2
import pytest
import yaml
from conftest import missing_tool
from plans import DIGESTS, full_plan, minimal_plan, plan_without, setting

from generator.errors import GenerationError
from generator.model import layout
from generator.model.containerd import CRI_RUNTIME_V2, CRI_RUNTIME_V3
from generator.model.layout import (
    FIRST_BOOT_SCRIPT,
    compact_in_user_data,
    first_boot_staged,
    target_of,
)
from generator.model.layout import VERIFY_ONLY_TARGETS as VERIFY_ONLY
from generator.model.setting import Setting
from generator.model.shellform import user_data_form
from generator.render.engine import make_environment
from generator.render.outputs import OUTPUTS
from generator.render.render import render_bundle
from generator.render.tuned import profiles_files

SYSCTL = "rootfs/etc/sysctl.d/90-goldtune.conf"
GRUB = "rootfs/etc/default/grub.d/90-goldtune.cfg"
LIMITS = "rootfs/etc/security/limits.d/90-goldtune.conf"
MANAGER = "rootfs/etc/systemd/system.conf.d/90-goldtune.conf"
MODPROBE = "rootfs/etc/modprobe.d/90-goldtune.conf"
MODULES = "rootfs/etc/modules-load.d/90-goldtune.conf"
TMPFILES = "rootfs/etc/tmpfiles.d/90-goldtune.conf"
UDEV = "rootfs/etc/udev/rules.d/60-goldtune-io-scheduler.rules"
TUNED = "rootfs/etc/tuned/goldtune-inference/tuned.conf"
GPU_SCRIPT = "rootfs/usr/lib/goldtune/gpu-setup"
GPU_UNIT = "rootfs/etc/systemd/system/goldtune-gpu.service"
IRQ_SCRIPT = "rootfs/usr/lib/goldtune/irq-affinity"
COLLECTOR = "rootfs/usr/lib/goldtune/collect"  # in every bundle, for gen verify --snapshot
GPU_DATA = "rootfs/etc/goldtune/gpu.conf"
IRQ_DATA = "rootfs/etc/goldtune/irq.conf"
COLLECT_DATA = "rootfs/etc/goldtune/collect.conf"
IRQ_UNIT = "rootfs/etc/systemd/system/goldtune-irq-affinity.service"
ACS_SCRIPT = "rootfs/usr/lib/goldtune/pcie-acs"
REPORT = "rootfs/usr/lib/goldtune/report"
ACS_DATA = "rootfs/etc/goldtune/pcie-acs.conf"
ACS_UNIT = "rootfs/etc/systemd/system/goldtune-pcie-acs.service"
PREFLIGHT_SCRIPT = "rootfs/usr/lib/goldtune/preflight"
PREFLIGHT_DATA = "rootfs/etc/goldtune/preflight.conf"
PREFLIGHT_UNIT = "rootfs/etc/systemd/system/goldtune-preflight.service"
NCCL_SCRIPT = "rootfs/usr/lib/goldtune/nccl-resolve"
NCCL_DATA = "rootfs/etc/goldtune/nccl-resolve.conf"
NCCL_UNIT = "rootfs/etc/systemd/system/goldtune-nccl-resolve.service"
IMAGE_ONLY = (PREFLIGHT_SCRIPT, PREFLIGHT_DATA, PREFLIGHT_UNIT, NCCL_SCRIPT, NCCL_DATA, NCCL_UNIT)
DELIVERY = {
    "install.sh",
    "install-lib.sh",
    "install.list",
    "cloud-init/user-data",
    "cloud-init/user-data.gz",
    "cloud-init/user-data.mime",
    "cloud-init/user-data.mime.gz",
    "EXPLAIN.md",
    "manifest.json",
    "plan.json",
    "provenance.json",
}
COMMENTED = [SYSCTL, LIMITS, MANAGER, MODPROBE, MODULES, TMPFILES, UDEV, TUNED]
REPORT_DATA = "rootfs/etc/goldtune/report.conf"
DATA_FILES = [GPU_DATA, IRQ_DATA, ACS_DATA, COLLECT_DATA, REPORT_DATA, "install.list"]


@pytest.fixture(scope="module")
def full() -> dict[str, str]:
    return {
        path: content.decode()
        for path, (content, _) in render_bundle(full_plan()).items()
        if not path.endswith(".gz")  # the compressed user-data: tests/test_cloud_scale.py
    }


def value_lines(text: str) -> list[int]:
    lines = text.splitlines()
    return [i for i, line in enumerate(lines) if line.strip() and not line.startswith(("#", "["))]


def test_full_plan_renders_every_output(full: dict[str, str]) -> None:
    # a GPU boot script of another vendor than the plan's GPUs' is not theirs (gpu-setup-amd)
    outputs = [output for output in OUTPUTS if output.vendor in ("", "nvidia")]
    expected = {output.bundle_path(full_plan()) for output in outputs} | {
        "manifest.json",
        "plan.json",
        "provenance.json",  # the in-toto statement: tests/test_provenance.py
        "cloud-init/user-data.mime",  # the user-data's other forms (.gz: not text, left out)
    }
    # a plan for a driver the GPU Operator delivers (os.driver): tests/test_driver_delivery.py
    operator_only = {
        "rootfs/etc/systemd/system/goldtune-gpu.path",
        layout.MIG_PARTED_CONFIG,
        layout.OPERATOR_VALUES,
        layout.DCM_CONFIG,  # os.driver amd-gpu-operator: tests/test_amd_operator.py
    }
    assert set(full) == expected - operator_only


def test_files_without_settings_of_their_kind_are_not_rendered() -> None:
    files = render_bundle(minimal_plan())
    assert set(files) == DELIVERY | {SYSCTL, COLLECTOR, COLLECT_DATA}


def test_modes_are_fixed() -> None:
    files = render_bundle(full_plan())
    executables = {path for path, (_, mode) in files.items() if mode == 0o755}
    assert executables == {
        "install.sh",
        GPU_SCRIPT,
        IRQ_SCRIPT,
        ACS_SCRIPT,
        COLLECTOR,
        REPORT,
        PREFLIGHT_SCRIPT,
        NCCL_SCRIPT,
    }
    assert {mode for _, mode in files.values()} == {0o644, 0o755}


@pytest.mark.parametrize("path", COMMENTED)
def test_every_value_has_its_rule_and_reason_on_the_line_above(
    full: dict[str, str], path: str
) -> None:
    lines = full[path].splitlines()
    for index in value_lines(full[path]):
        assert re.match(
            r"# [a-z]+[a-z0-9.:-]*(?: \[profile override[^\]]*\])?: \S", lines[index - 1]
        ), lines[index - 1]


def test_sysctl_lines_and_override_comment(full: dict[str, str]) -> None:
    text = full[SYSCTL]
    assert "\nvm.swappiness = 1\n" in text
    assert "\nnet.ipv4.tcp_rmem = 4096 87380 268435456\n" in text
    assert (
        "# memory.max-map-count [profile override; rule memory.max-map-count value: 1048576]: "
        "the serving stack maps more shards | pipes too\nvm.max_map_count = 2097152\n"
    ) in text


def test_grub_dropin_appends_to_the_distribution_default(
    full: dict[str, str], tmp_path: Path
) -> None:
    dropin = tmp_path / "90-goldtune.cfg"
    dropin.write_text(full[GRUB])
    script = 'GRUB_CMDLINE_LINUX_DEFAULT="$1"; . "$2"; printf "%s" "$GRUB_CMDLINE_LINUX_DEFAULT"'
    args = "transparent_hugepage=madvise nosmt intel_idle.max_cstate=1"
    for before, after in (("quiet", f"quiet {args}"), ("", args)):
        result = subprocess.run(
            ["sh", "-ec", script, "sh", before, str(dropin)],
            capture_output=True,
            text=True,
            check=True,
        )
        assert result.stdout == after
    assert full["kernel-cmdline"] == args + "\n"


def test_limits_and_manager(full: dict[str, str]) -> None:
    assert "\n* hard nofile 1048576\n" in full[LIMITS]
    assert "\n[Manager]\n" in full[MANAGER]
    assert "\nDefaultLimitMEMLOCK=infinity\n" in full[MANAGER]


def test_modprobe_groups_the_options_of_one_module(full: dict[str, str]) -> None:
    lines = [line for line in full[MODPROBE].splitlines() if not line.startswith("#") and line]
    assert lines == [
        "blacklist nouveau",
        "options nouveau modeset=0 noaccel=1",
        "options mlx5_core prof_sel=2",
    ]


def test_tmpfiles_write_lines_escape_specifiers(full: dict[str, str]) -> None:
    text = full[TMPFILES]
    assert "\nw /sys/kernel/mm/transparent_hugepage/defrag - - - - defer+madvise\n" in text
    assert "\nw /sys/devices/system/cpu/cpu*/cpufreq/scaling_governor - - - - performance\n" in text
    assert "\nw /sys/kernel/test%%x/value - - - - 50%%\n" in text


def test_udev_rules_match_kernel_name_and_rotational(full: dict[str, str]) -> None:
    rules = [line for line in full[UDEV].splitlines() if line and not line.startswith("#")]
    assert len(rules) == 3
    for rule in rules:
        assert rule.startswith(
            'ACTION=="add|change", SUBSYSTEM=="block", ENV{DEVTYPE}=="disk", KERNEL=="'
        )
        assert "serial" not in rule.lower()
    assert 'KERNEL=="nvme[0-9]*n[0-9]*", ATTR{queue/scheduler}="none"' in rules[0]
    assert 'ATTR{queue/rotational}=="0", ATTR{queue/scheduler}="mq-deadline"' in rules[1]
    assert 'ATTR{queue/rotational}=="1", ATTR{queue/scheduler}="bfq"' in rules[2]


def test_tuned_profile_has_main_first(full: dict[str, str]) -> None:
    sections = re.findall(r"^\[(\w+)\]$", full[TUNED], flags=re.MULTILINE)
    assert sections == ["main", "cpu", "vm", "sysctl"]
    assert "\nsummary=goldtune test profile\n" in full[TUNED]


def tuned_options(text: str) -> dict[str, list[str]]:
    """``section.option`` -> every value the tuned.conf assigns it (a repeat is a bug)."""
    found: dict[str, list[str]] = {}
    section = ""
    for line in text.splitlines():
        if line.startswith("["):
            section = line.strip("[]")
        elif line and not line.startswith("#"):
            option, _, value = line.partition("=")
            found.setdefault(f"{section}.{option}", []).append(value)
    return found


def test_tuned_profile_restates_the_plans_values_for_keys_shipped_profiles_set(
    full: dict[str, str],
) -> None:
    """throughput-performance's [sysctl] vm.swappiness=10 (and mssql's vm.max_map_count, the
    network profiles' tcp_rmem) would be merged into a profile layered on them: the bundle's
    tuned.conf carries sysctl.d's values for them, the override's value too."""
    options = tuned_options(full[TUNED])
    assert options["sysctl.vm.swappiness"] == ["1"]
    assert options["sysctl.vm.max_map_count"] == ["2097152"]
    assert options["sysctl.net.ipv4.tcp_rmem"] == ["4096 87380 268435456"]
    # the plan's own [vm] option is written once, not restated beside itself
    assert options["vm.transparent_hugepages"] == ["madvise"]
    assert "throughput-performance" in full[TUNED]


def test_tuned_profile_restates_only_keys_a_shipped_profile_sets() -> None:
    plan = full_plan(
        settings=(
            setting("tuned", "cpu.governor", "performance", "cpu.governor"),
            setting("sysctl", "kernel.keys.maxkeys", "2000", "test.keys"),
            setting("sysctl", "vm.swappiness", "1", "memory.swappiness"),
            setting("sysctl", "vm.dirty_bytes", "8589934592", "memory.dirty-bytes"),
        )
    )
    options = tuned_options(render_bundle(plan)[TUNED][0].decode())
    assert options == {
        "cpu.governor": ["performance"],
        "sysctl.vm.swappiness": ["1"],
        # postgresql sets dirty_bytes: restated; throughput-performance's dirty_ratio=40 would
        # replace the bytes limit (the pair is one limit), so the ratio is restated as 0
        "sysctl.vm.dirty_bytes": ["8589934592"],
        "sysctl.vm.dirty_ratio": ["0"],
        # RHEL 9's tuned 2.25+ sets the same limit in [vm] (throughput-performance's
        # dirty_ratio = 40, 2.26+: dirty_bytes = 40%): dropped from the base, not restated
        "vm.drop": ["dirty_bytes,dirty_ratio"],
    }


def test_tuned_profile_restates_the_keys_of_rhel_9s_tuned_versions() -> None:
    """tuned 2.27 (RHEL 9.8) adds tcp_slow_start_after_idle to a shipped [sysctl] (Debian's
    2.20 has none): a plan that sets it restates it; the tables name the upstream tag."""
    plan = full_plan(
        settings=(
            setting("tuned", "cpu.governor", "performance", "cpu.governor"),
            setting("sysctl", "net.ipv4.tcp_slow_start_after_idle", "0", "network.x"),
        )
    )
    options = tuned_options(render_bundle(plan)[TUNED][0].decode())
    assert options == {
        "cpu.governor": ["performance"],
        "sysctl.net.ipv4.tcp_slow_start_after_idle": ["0"],
    }
    sources = [yaml.safe_load(path.read_text())["source"] for path in profiles_files()]
    assert any("redhat-performance/tuned v2.27.0 (38d4414a" in source for source in sources)


def test_gpu_and_irq_units_never_fail_boot(full: dict[str, str]) -> None:
    for unit in (GPU_UNIT, IRQ_UNIT, ACS_UNIT):
        text = full[unit]
        assert "Type=oneshot\n" in text and "RemainAfterExit=yes\n" in text
        assert re.search(r"^TimeoutStartSec=\d+$", text, flags=re.MULTILINE)
        assert "WantedBy=multi-user.target\n" in text
        assert not re.search(
            r"^(Wants|Requires|BindsTo)=", text, flags=re.MULTILINE
        )  # orders, never pulls in
    after = re.search(r"^After=.*$", full[GPU_UNIT], flags=re.MULTILINE)
    assert after is not None and "nvidia-persistenced.service" in after.group(0)


# What may hold a GPU at boot (issue 26 item 7): DCGM (both unit names), its packaged exporter,
# DGX OS's nvsm, IMEX, the tool's MPS daemon, then the container runtimes, kubelet and slurmd.
GPU_CLIENTS = {
    "nvidia-dcgm.service",
    "dcgm.service",
    "nvidia-dcgm-exporter.service",
    "nvsm.service",
    "nvidia-imex.service",
    "goldtune-cuda-mps.service",
    "containerd.service",
    "docker.service",
    "kubelet.service",
    "slurmd.service",
}


def unit_field(text: str, option: str) -> set[str]:
    found = re.search(rf"^{option}=(.*)$", text, flags=re.MULTILINE)
    assert found is not None, option
    return set(found.group(1).split())


def test_the_gpu_unit_runs_before_every_gpu_client(full: dict[str, str]) -> None:
    """MIG mode changes only while no process holds the GPU (NVIDIA's MIG user guide stops nvsm
    and dcgm first). On main the GPU unit ran before the runtimes, kubelet and slurmd only, and
    the same bundles enable nvidia-dcgm.service (tuning-review-3 W-N4)."""
    before = unit_field(full[GPU_UNIT], "Before")
    assert before >= GPU_CLIENTS
    assert not before & unit_field(full[GPU_UNIT], "After")  # no ordering cycle of its own
    enabled = {s.key for s in full_plan().of_kind("service") if s.value == "enable"}
    assert "goldtune-cuda-mps.service" in enabled  # the plan's GPU client is among them


def test_kubelet_integer_fields_are_written_as_integers() -> None:
    """maxPods is an int32 of KubeletConfiguration v1beta1: kubelet's strict decoding refuses
    "110". On main every kubelet value was quoted (and maxPods was never written)."""
    from generator.commands.generate import render_for

    files = render_for("dgx-h100", "training-k8s")
    text = files["rootfs/etc/kubernetes/kubelet.conf.d/90-goldtune.conf"][0].decode()
    document = yaml.safe_load(text)
    assert document["maxPods"] == 110
    assert document["kubeReserved"]["memory"] == "1465Mi"  # 11Mi x 110 + 255Mi
    assert document["kubeReserved"]["cpu"] == "1000m"  # a quantity is a string, never 1000


def test_irq_interfaces_reach_the_script_as_data(full: dict[str, str]) -> None:
    pins = [line for line in full[IRQ_DATA].splitlines() if line.startswith("pin\t")]
    assert pins == ["pin\tens1f0np0\t1-27,57-83", "pin\tibp24s0\t28-55,84-111"]


@pytest.mark.parametrize("path", DATA_FILES)
def test_every_data_line_has_its_reason_on_the_line_above(full: dict[str, str], path: str) -> None:
    lines = full[path].splitlines()
    data = [i for i, line in enumerate(lines) if line and not line.startswith("#")]
    assert data
    for index in data:
        assert re.match(
            r"# [a-z]+[a-z0-9.:-]*(?: \[profile override[^\]]*\])?: \S", lines[index - 1]
        ), lines[index - 1]


def test_acs_targets_reach_the_script_as_data(full: dict[str, str]) -> None:
    targets = [line for line in full[ACS_DATA].splitlines() if line.startswith("acs-off\t")]
    assert targets == ["acs-off\tgpus", "acs-off\tnic\tibp24s0"]
    assert "ExecStart=/usr/lib/goldtune/pcie-acs /etc/goldtune/pcie-acs.conf\n" in (full[ACS_UNIT])


def test_units_name_their_script_and_its_data(full: dict[str, str]) -> None:
    assert "ExecStart=/usr/lib/goldtune/gpu-setup /etc/goldtune/gpu.conf\n" in full[GPU_UNIT]
    assert "ExecStart=/usr/lib/goldtune/irq-affinity /etc/goldtune/irq.conf\n" in full[IRQ_UNIT]


def test_unit_and_script_exist_only_with_settings_of_their_kind() -> None:
    files = render_bundle(plan_without("gpu", "irq", "pcie-acs"))
    assert not {GPU_SCRIPT, GPU_UNIT, GPU_DATA, IRQ_SCRIPT, IRQ_UNIT, IRQ_DATA} & set(files)
    assert not {ACS_SCRIPT, ACS_UNIT, ACS_DATA} & set(files)


def test_user_data_carries_every_overlay_file(full: dict[str, str]) -> None:
    """All but the collector and its data, which are for gen verify (layout.VERIFY_ONLY_TARGETS),
    and the preflight unit, which does not fit EC2's 16 KB (layout.IMAGE_ONLY_TARGETS, issue 28):
    neither it nor its enable step is in the user-data."""
    text = full["cloud-init/user-data"]
    assert text.startswith("#cloud-config\n")
    data = yaml.safe_load(text)
    written = {entry["path"]: entry for entry in data["write_files"]}
    for path, content in full.items():
        if path.startswith("rootfs/") and path not in (COLLECTOR, COLLECT_DATA, *IMAGE_ONLY):
            target = "/" + path.removeprefix("rootfs/")
            # daemon.json: written beside the first-boot script, which merges it (issue 16)
            entry = written.get(target) or written[first_boot_staged(target)]
            assert compact_in_user_data(target) or target.endswith(".json")
            if compact_in_user_data(target):  # without their comment lines (scripts: indentation)
                assert entry["content"] == user_data_form(target, content)
            else:
                assert entry["content"] == content
            assert entry["permissions"] in {"0644", "0755"}
    # issue 18: a file whose path has no tool name travels like the others
    assert written["/etc/nccl.conf"]["content"].endswith("\nNCCL_SOCKET_IFNAME==ens1f0np0\n")
    # the selection is layered on the image's by the first-boot script, not replaced
    assert "/etc/tuned/active_profile" not in written
    assert "tuned_profile='goldtune-inference'" in written["/run/goldtune/first-boot"]["content"]
    assert len(data["runcmd"]) == 1 and "sh /run/goldtune/first-boot" in data["runcmd"][0]
    assert not {"/" + path.removeprefix("rootfs/") for path in IMAGE_ONLY} & set(written)
    script = written["/run/goldtune/first-boot"]["content"]
    assert "goldtune-preflight" not in script.split("\ndeferred=''\n", 1)[1]  # no unit step
    assert "\nrun_step reload\n" in script
    assert "\nservice mask 'bluetooth.service'\n" in script


def test_services_disable_and_mask_come_before_enable(full: dict[str, str]) -> None:
    written = yaml.safe_load(full["cloud-init/user-data"])["write_files"]
    script = next(entry["content"] for entry in written if entry["path"] == FIRST_BOOT_SCRIPT)
    order = re.findall(r"^service (enable|disable|mask) ", script, re.MULTILINE)
    assert sorted(order[:2]) == ["disable", "mask"] and order[2:] == ["enable"] * 7


def test_manifest_lists_every_other_file_with_digest_and_mode() -> None:
    files = render_bundle(full_plan())
    manifest = json.loads(files["manifest.json"][0])
    assert manifest["tool"] == {"name": "goldtune", "version": manifest["tool"]["version"]}
    assert manifest["inputs"] == {role: {"sha256": digest} for role, digest in DIGESTS.items()}
    listed = [entry["path"] for entry in manifest["files"]]
    # the provenance statement lists the manifest among its subjects, so comes after it
    assert listed == sorted(set(files) - {"manifest.json", "provenance.json"})
    for entry in manifest["files"]:
        content, mode = files[entry["path"]]
        assert entry["sha256"] == hashlib.sha256(content).hexdigest()
        assert entry["mode"] == f"{mode:04o}"
        target = target_of(entry["path"])
        if target is None:  # delivery files (install.sh, user-data forms): one digest
            assert "first_boot_sha256" not in entry
            continue
        compact = user_data_form(target, content.decode()).encode()
        if compact_in_user_data(target) and compact != content and target not in VERIFY_ONLY:
            assert entry["first_boot_sha256"] == hashlib.sha256(compact).hexdigest()
        else:
            assert "first_boot_sha256" not in entry
    assert not re.search(r"20\d\d-\d\d-\d\d", files["manifest.json"][0].decode())


def test_plan_json_round_trips() -> None:
    from generator.model.planio import plan_from_data

    plan = full_plan()
    data = json.loads(render_bundle(plan)["plan.json"][0])
    assert plan_from_data(data).settings == plan.settings


def test_explain_lists_every_setting_with_rule_and_reason(full: dict[str, str]) -> None:
    text = full["EXPLAIN.md"]
    for s in full_plan().settings:
        assert f"`{s.rule}`" in text
    assert "## Kernel parameters (sysctl.d)\n\nFile: `rootfs/etc/sysctl.d/90-goldtune.conf`" in text
    assert "the serving stack maps more shards \\| pipes too" in text
    assert "(profile override; rule value `1048576`)" in text
    assert "huge pages take 40% of RAM" in text and "GPUDirect RDMA does not apply" in text


@pytest.mark.parametrize(
    ("override", "row"),
    [
        ({}, "| `vm.x` | `a\\|b` | `r.one` | why \\| not |"),
        (
            {"override": True, "original_value": "7", "original_rule": "r.two"},
            "| `vm.x` | `a\\|b` | `r.one` (profile override; rule value `7`) | why \\| not |",
        ),
        (
            {"override": True, "original_value": ""},
            '| `vm.x` | `a\\|b` | `r.one` (profile override; rule value `""`) | why \\| not |',
        ),
        (
            {"override": True, "original_value": None},
            "| `vm.x` | `a\\|b` | `r.one` (profile override; rule value `none`) | why \\| not |",
        ),
    ],
    ids=["rule", "override", "override-of-empty", "override-of-nothing"],
)
def test_explain_row_of_each_kind_of_setting(override: dict[str, object], row: str) -> None:
    """No shipped plan has an override: this is the only check of those rows' bytes."""
    s = Setting("sysctl", "vm.x", "a|b", "why\n| not", rule="r.one", **override)  # type: ignore[arg-type]
    text = render_bundle(full_plan(settings=(s,)))["EXPLAIN.md"][0].decode()
    assert f"| --- | --- | --- | --- |\n{row}\n" in text


def test_reasons_cannot_break_out_of_a_comment() -> None:
    hostile = Setting(
        "sysctl",
        "vm.swappiness",
        "1",
        "line one\nvm.panic_on_oom = 1\r\n# x",
        rule="memory.swappiness",
    )
    text = render_bundle(full_plan(settings=(hostile,)))[SYSCTL][0].decode()
    assert "\nvm.panic_on_oom" not in text
    assert [line for line in text.splitlines() if not line.startswith("#") and line] == [
        "vm.swappiness = 1"
    ]


def test_environment_is_strict_and_never_autoescapes() -> None:
    env = make_environment()
    assert env.undefined is jinja2.StrictUndefined
    assert env.autoescape is False
    assert env.keep_trailing_newline is True
    assert env.auto_reload is False  # loaded once a run: no stat of the file at each use
    with pytest.raises(jinja2.UndefinedError):
        env.from_string("{{ missing }}").render()


def test_rendering_is_deterministic() -> None:
    assert render_bundle(full_plan()) == render_bundle(full_plan())


def test_grub_dropin_passes_shellcheck(full: dict[str, str], tmp_path: Path) -> None:
    if shutil.which("shellcheck") is None:  # skipped locally, a failure in CI
        missing_tool(FileNotFoundError("shellcheck"))
    dropin = tmp_path / "90-goldtune.cfg"
    dropin.write_text(full[GRUB])
    result = subprocess.run(
        ["shellcheck", "-s", "sh", "-e", "SC2034", str(dropin)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout


def test_user_data_that_does_not_round_trip_is_refused() -> None:
    from generator.render.cloudinit import check_user_data, in_block_form
    from generator.render.overlay import OverlayFile

    overlay = [OverlayFile("rootfs/etc/x.conf", "/etc/x.conf", "0644", "  leading spaces\n\n\n")]
    broken = (
        b'#cloud-config\nwrite_files:\n  - path: "/etc/x.conf"\n    permissions: "0644"\n'
        b"    content: |\n        leading spaces\n"
    )
    with pytest.raises(GenerationError, match="round-trip"):
        check_user_data(broken, overlay)
    # the render path parses it: the file has not the shape a literal block carries unchanged
    assert not in_block_form(overlay, [], "header")
    with pytest.raises(GenerationError, match="#cloud-config"):
        check_user_data(b"write_files: []\n", overlay)


def test_a_user_data_not_in_the_plain_form_is_parsed_whole_not_only_a_processs_first(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The check does not depend on what the process rendered before (on main only a process's
    first user-data was parsed; later ones were judged by a character scan): a user-data whose
    values are in the plain form is not parsed (tests/test_user_data_form.py holds that form),
    one whose values are not is parsed whole, each time."""
    from generator.render import cloudinit

    parsed: list[str] = []
    real_load = cloudinit.yaml.load

    def load(text: str, **options: object) -> object:
        parsed.append(text)
        return real_load(text, **options)

    monkeypatch.setattr(cloudinit.yaml, "load", load)
    render_bundle(full_plan())
    assert parsed == []
    monkeypatch.setattr(cloudinit, "carried_unchanged", lambda text: False)
    render_bundle(full_plan())
    files = render_bundle(full_plan())
    assert parsed == [files["cloud-init/user-data"][0].decode("utf-8")] * 2


def test_driver_modules_are_loaded_by_the_gpu_unit_not_modules_load(full: dict[str, str]) -> None:
    """A missing nvidia-peermem in modules-load.d fails systemd-modules-load without a driver."""
    assert "tcp_bbr" in full["rootfs/etc/modules-load.d/90-goldtune.conf"]
    assert "nvidia-peermem" not in full["rootfs/etc/modules-load.d/90-goldtune.conf"]
    assert "\nmodule\tnvidia-peermem\n" in full[GPU_DATA]


# a clone of github.com/redhat-performance/tuned (any clone: the tags are what is read)
TUNED_GIT = Path(os.environ.get("GOLDTUNE_TUNED_GIT", "/nonexistent"))


@pytest.mark.skipif(not TUNED_GIT.is_dir(), reason="GOLDTUNE_TUNED_GIT names no tuned git tree")
@pytest.mark.parametrize(
    "path",
    sorted(Path(__file__).resolve().parent.parent.glob("hardware_db/tuned/rhel-*.yaml")),
    ids=lambda p: p.stem,
)
def test_the_rhel_tuned_tables_are_what_their_script_reads_from_the_tagged_tree(path: Path) -> None:
    """hardware_db/tuned/rhel-9-*.yaml: each remade from its tag (GOLDTUNE_TUNED_GIT, a clone of
    github.com/redhat-performance/tuned) is the committed table."""
    source = yaml.safe_load(path.read_text())["source"]
    package, where = source.split(": redhat-performance/tuned ", 1)
    tag = where.split()[0]
    script = Path(__file__).resolve().parent.parent / "tests/validators/make_tuned_profiles.py"
    made = subprocess.run(
        [sys.executable, str(script), "--git", str(TUNED_GIT), tag, package],
        capture_output=True,
        text=True,
        check=True,
    )
    assert made.stdout == path.read_text()


TUNED_TREES = (
    Path(os.environ.get("GOLDTUNE_TOOLS_DIR", "/usr/local/lib/goldtune-tools")) / "tuned-trees"
)


@pytest.mark.parametrize(
    "path",
    sorted(Path(__file__).resolve().parent.parent.glob("hardware_db/tuned/rhel-*.yaml")),
    ids=lambda p: p.stem,
)
def test_the_rhel_tuned_tables_hold_what_debians_package_of_that_release_ships(
    path: Path,
) -> None:
    """The same release's profiles as Debian packages them (trixie 2.25.1, forky 2.27.0,
    unpacked by tests/tools/install-tools.sh) give the committed table's profiles: a check that
    needs no clone of the tuned repository."""
    committed = yaml.safe_load(path.read_text())
    tag = committed["source"].split(": redhat-performance/tuned ", 1)[1].split()[0]
    profiles = TUNED_TREES / tag.removeprefix("v") / "profiles"
    if not profiles.is_dir():
        pytest.skip(f"no Debian package of tuned {tag} unpacked (install-tools.sh)")
    script = Path(__file__).resolve().parent.parent / "tests/validators/make_tuned_profiles.py"
    made = subprocess.run(
        [sys.executable, str(script), str(profiles), f"tuned {tag} (Debian)"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert yaml.safe_load(made.stdout)["profiles"] == committed["profiles"]


def test_the_tuned_table_maker_reads_a_tag_as_it_reads_an_installed_tree(tmp_path: Path) -> None:
    """The --git reader and the directory reader give the same table for the same files."""
    tree = tmp_path / "tree"
    for name, text in {
        "base": "[main]\nsummary=b\n[sysctl]\nvm.swappiness=10\n[vm]\ndirty_ratio = 40\n",
        "top": "[main]\ninclude=base\n[bootloader]\ncmdline=+skew_tick=1\n",
    }.items():
        (tree / "profiles" / name).mkdir(parents=True)
        (tree / "profiles" / name / "tuned.conf").write_text(text)
    (tree / "profiles" / "functions").write_text("not a profile\n")
    git = ["git", "-C", str(tree), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q", str(tree)], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "p"], check=True)
    subprocess.run([*git, "tag", "v1"], check=True)
    script = Path(__file__).resolve().parent.parent / "tests/validators/make_tuned_profiles.py"
    run = [sys.executable, str(script)]
    tagged = subprocess.run([*run, "--git", str(tree), "v1", "t"], capture_output=True, text=True)
    plain = subprocess.run([*run, str(tree / "profiles"), "t"], capture_output=True, text=True)
    assert tagged.returncode == 0 and plain.returncode == 0, tagged.stderr + plain.stderr
    body = tagged.stdout.split("\nprofiles:\n", 1)[1]
    assert body == plain.stdout.split("\nprofiles:\n", 1)[1]
    assert '      "dirty_ratio": "40"' in body and '      "cmdline": "+skew_tick=1"' in body


@pytest.mark.skipif(
    not Path("/usr/lib/tuned/throughput-performance/tuned.conf").is_file(), reason="no tuned here"
)
def test_the_tuned_table_is_what_its_script_reads_from_the_installed_tuned() -> None:
    """hardware_db/tuned/profiles.yaml is made by a script: the installed profiles still match."""
    root = Path(__file__).resolve().parent.parent
    table = root / "hardware_db" / "tuned" / "profiles.yaml"
    package = yaml.safe_load(table.read_text())["source"].split(" /usr/lib/tuned", 1)[0]
    script = root / "tests/validators/make_tuned_profiles.py"
    made = subprocess.run(
        [sys.executable, str(script), "/usr/lib/tuned", package],
        capture_output=True,
        text=True,
        check=True,
    )
    assert made.stdout == table.read_text()


def test_a_containerd_2_plan_renders_a_version_3_drop_in() -> None:
    """The drop-in's version follows its tables: version 3 for the CRI runtime plugin of
    containerd 2 (generator/model/containerd.py), version 2, byte for byte as before, otherwise.
    Failed before: the template always wrote `version = 2` over any table."""
    dropin = "rootfs/etc/containerd/conf.d/90-goldtune.toml"
    v2 = render_bundle(full_plan())[dropin][0].decode()
    v3_settings = tuple(
        s._replace(key=s.key.replace(CRI_RUNTIME_V2, CRI_RUNTIME_V3)) for s in full_plan().settings
    )
    v3 = render_bundle(full_plan(settings=v3_settings))[dropin][0].decode()
    assert tomllib.loads(v2)["version"] == 2 and tomllib.loads(v3)["version"] == 3
    runtime = tomllib.loads(v3)["plugins"]["io.containerd.cri.v1.runtime"]["containerd"]
    assert runtime["default_runtime_name"] == "nvidia"
    assert (
        v3.replace(CRI_RUNTIME_V3, CRI_RUNTIME_V2).split("\nversion = 3\n")[1]
        == (v2.split("\nversion = 2\n")[1])
    )
