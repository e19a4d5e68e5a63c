"""cgroup v1 removal (issue 37): nothing of a bundle assumes a v1 or hybrid hierarchy.

systemd 256 refuses to boot cgroup v1 unless forced and 258 removed it (systemd NEWS, read from
Debian's systemd 262-1). The audit of generator/, templates/ and profiles/ found no v1 assumption:
kubelet's cgroupDriver and containerd's SystemdCgroup are systemd for every distribution, no rule
writes a cgroup kernel argument, no script reads /sys/fs/cgroup/<controller>, goldtune's tuned
profiles use no [scheduler] cgroup_* option. These tests hold that for a table whose
cgroups.v1_supported is false (a test-only fact on debian-12's table until the new tables land,
and every shipped table that says so), and the plan refuses a user's v1 argument there.
"""

from __future__ import annotations

import re

import pytest

from generator.inputs.distro import Cgroups, Containerd, Distro, load_distros
from generator.inputs.facts import Facts
from generator.inputs.load import load_inputs
from generator.model.layout import KUBELET_DROPIN_DIR, in_overlay, kubelet_file
from generator.model.setting import Setting
from generator.plan.build import build_plan
from generator.plan.checks import check_setting
from generator.render.render import render_bundle

TEST_SOURCE = ["a test-only fact, no package read"]
# What a file assuming a v1 or hybrid hierarchy says: the systemd arguments that ask for one, v1
# controller mounts and files, the cgroupfs driver, containerd's v1-era CRI option, tuned's v1
# cpuset mount, the unit options of v1 controllers.
V1_ASSUMPTIONS = re.compile(
    r"systemd\.unified_cgroup_hierarchy\s*=\s*(?:0|no|n|false|f|off)\b"
    r"|systemd\.legacy_systemd_cgroup_controller"
    r"|SYSTEMD_CGROUP_ENABLE_LEGACY_FORCE"
    r"|/sys/fs/cgroup/(?:cpu|cpuacct|cpuset|memory|blkio|devices|freezer|net_cls|net_prio"
    r"|perf_event|hugetlb|pids|rdma|misc|systemd)(?=/|[\s\"']|$)"
    r"|cgroupDriver:\s*\"?cgroupfs"
    r"|SystemdCgroup\s*=\s*false"
    r"|systemd_cgroup\s*=\s*true"
    r"|cgroup_mount_point"
    r"|^\s*(?:MemoryLimit|CPUShares|StartupCPUShares|BlockIO[A-Za-z]*)="
    r"|memory\.limit_in_bytes|memory\.memsw\.|cpu\.cfs_quota_us|cpu\.shares",
    re.MULTILINE,
)


def v2_only(distro: Distro) -> Distro:
    return distro.model_copy(
        update={
            "cgroups": Cgroups(v1_supported=False, source=TEST_SOURCE),
            "containerd": Containerd(major=2, source=TEST_SOURCE),
        }
    )


def v2_only_tables() -> list[Distro]:
    """debian-12's table made v2-only (test-only), and every shipped table that says so."""
    shipped = {d.key: d for d in load_distros().values()}
    said = [d for d in shipped.values() if d.cgroups and d.cgroups.v1_supported is False]
    return [v2_only(shipped["debian-12"]), *said]


def on(facts: Facts, distro: Distro | None) -> Facts:
    return facts._replace(os=facts.os._replace(distro=distro))


def assumptions(text: str) -> list[str]:
    return [match.group(0) for match in V1_ASSUMPTIONS.finditer(text)]


@pytest.mark.parametrize("distro", v2_only_tables(), ids=lambda d: d.key)
@pytest.mark.parametrize("hardware", ["dgx-h100", "mi300x-8x-epyc"])
def test_no_bundle_for_a_v2_only_distribution_assumes_cgroup_v1(
    distro: Distro, hardware: str
) -> None:
    for profile in (
        "inference",
        "inference-latency",
        "training",
        "training-k8s",
        "training-multinode",
    ):
        inputs = load_inputs(hardware, profile, os_name="debian-12")
        files = render_bundle(build_plan(on(inputs.facts, distro), inputs.profile))
        for path, (content, _) in files.items():
            text = content.decode("utf-8", "replace")
            assert not assumptions(text), (profile, path, assumptions(text))
        # the directory the table's kubelet reads (AL2023: nodeadm's config.json.d), else kubeadm's
        dropin_dir = (distro.kubelet and distro.kubelet.config_dir) or KUBELET_DROPIN_DIR
        kubelet = files.get(in_overlay(kubelet_file(dropin_dir)))
        if profile == "training-k8s":
            assert kubelet is not None and b'cgroupDriver: "systemd"' in kubelet[0]
        containerd = files.get("rootfs/etc/containerd/conf.d/90-goldtune.toml")
        if containerd is not None:
            assert b"SystemdCgroup = true" in containerd[0]


def test_the_scan_finds_a_v1_assumption() -> None:
    """The check above, shown failing on v1 text."""
    for text in (
        'GRUB_CMDLINE_LINUX="$GRUB_CMDLINE_LINUX systemd.unified_cgroup_hierarchy=0"',
        "cat /sys/fs/cgroup/memory/memory.limit_in_bytes",
        'cgroupDriver: "cgroupfs"',
        "SystemdCgroup = false",
        "[Service]\nMemoryLimit=4G\n",
    ):
        assert assumptions(text), text
    assert not assumptions("systemd.unified_cgroup_hierarchy=1 cat /sys/fs/cgroup/cpu.max")


def v1_arg(key: str, value: str) -> Setting:
    return Setting("kernel-arg", key, value, "a site's override", rule="override")


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("systemd.unified_cgroup_hierarchy", "0"),
        ("systemd.unified_cgroup_hierarchy", "false"),
        ("systemd.legacy_systemd_cgroup_controller", ""),
        ("SYSTEMD_CGROUP_ENABLE_LEGACY_FORCE", "1"),
    ],
)
def test_a_v1_argument_is_refused_only_where_the_table_says_v2_only(key: str, value: str) -> None:
    """Decided per distribution: refused where cgroups.v1_supported is false, left alone where
    it is true or unknown (no table, or a table that does not say)."""
    facts = load_inputs("dgx-h100", "training", os_name="debian-12").facts
    assert facts.os.distro is not None
    v2 = on(facts, v2_only(facts.os.distro))
    assert any("cgroup v1" in error for error in check_setting(v1_arg(key, value), v2, True))
    may = facts.os.distro.model_copy(
        update={"cgroups": Cgroups(v1_supported=True, source=TEST_SOURCE)}
    )
    for other in (facts, on(facts, may), on(facts, None)):
        assert not any("cgroup v1" in e for e in check_setting(v1_arg(key, value), other, True))


def test_asking_for_the_unified_hierarchy_is_no_v1_assumption() -> None:
    facts = load_inputs("dgx-h100", "training", os_name="debian-12").facts
    assert facts.os.distro is not None
    v2 = on(facts, v2_only(facts.os.distro))
    setting = v1_arg("systemd.unified_cgroup_hierarchy", "1")
    assert not any("cgroup v1" in error for error in check_setting(setting, v2, True))
