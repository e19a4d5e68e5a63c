"""Parity with NVIDIA's own TuneD profiles (issue 18): every setting NVIDIA's profile for the same
accelerator and intent applies is in the bundle, or EXPLAIN.md's "Decided not to set" says why.

The table is NVIDIA/skyhook-packages 3f9169b nvidia-tuned/profiles, as read in
../shared/research/peer-systems.md 2.3: nvidia-base (common/nvidia-base/tuned.conf),
nvidia-acs-disable (common/nvidia-acs-disable), nvidia-h100-{performance,inference,
multiNodeTraining} and nvidia-gb200-{performance,multiNodeTraining} (os/common/...). Profiles
include each other: h100-inference -> h100-performance -> acs-disable -> base; gb200-performance
-> base; multiNodeTraining -> performance.
"""

from __future__ import annotations

from typing import NamedTuple

import pytest

from generator.commands.generate import plan_for, render_for
from generator.inputs.load import load_inputs
from generator.model.layout import EXPLAIN
from generator.model.setting import Plan


class Applied(NamedTuple):
    """One setting of an NVIDIA profile: the (kind, key) forms that carry it in a goldtune
    bundle, and the words a "Decided not to set" note about it must contain."""

    what: str
    forms: tuple[tuple[str, str], ...]
    note_says: str


def sysctl(key: str, note_says: str = "") -> Applied:
    return Applied(key, (("sysctl", key), ("tuned", f"sysctl.{key}")), note_says or key)


def karg(key: str, note_says: str) -> Applied:
    return Applied(key, (("kernel-arg", key),), note_says)


BASE = (
    Applied("[cpu] governor=performance", (("tuned", "cpu.governor"),), "governor"),
    karg("init_on_alloc", "init_on_alloc"),
    Applied("[modules] ib_umad", (("module-load", "ib_umad"),), "ib_umad"),
    sysctl("net.ipv4.conf.all.arp_announce", "arp_announce"),
    sysctl("net.ipv4.conf.all.arp_ignore", "arp_ignore"),
    sysctl("net.ipv4.conf.default.arp_announce", "conf.default.arp_announce"),
    sysctl("net.ipv4.conf.default.arp_ignore", "arp_ignore"),
)
ACS_DISABLE = (Applied("pci=disable_acs_redir=", (("pcie-acs", "gpus"),), "nvidia-acs-disable"),)
H100_PERFORMANCE = (
    *BASE,
    *ACS_DISABLE,
    karg("iommu", "iommu=pt"),
    karg("console", "console="),
    karg("pci", "pci=realloc=off"),
)
H100_INFERENCE = (
    *H100_PERFORMANCE,
    karg("hugepagesz", "2 MiB pages"),
    karg("hugepages", "2 MiB pages"),
    sysctl("vm.swappiness"),
    sysctl("kernel.sched_latency_ns"),
    sysctl("kernel.sched_min_granularity_ns"),
)
MULTI_NODE_TRAINING = (
    sysctl("net.core.rmem_max"),
    sysctl("net.core.wmem_max"),
    sysctl("net.core.rmem_default", "rmem_default"),
    sysctl("net.core.wmem_default", "wmem_default"),
    sysctl("net.ipv4.tcp_rmem"),
    sysctl("net.ipv4.tcp_wmem"),
    sysctl("net.core.netdev_max_backlog"),
    sysctl("net.ipv4.tcp_max_syn_backlog"),
    sysctl("net.ipv4.tcp_congestion_control"),
    sysctl("net.core.default_qdisc"),
)
GB200_PERFORMANCE = (
    *BASE,
    karg("iommu.passthrough", "iommu.passthrough"),
    karg("console", "console="),
    Applied(
        "numa_balancing=disable",
        (("kernel-arg", "numa_balancing"), ("sysctl", "kernel.numa_balancing")),
        "numa_balancing",
    ),
    karg("earlycon", "earlycon"),
    karg("hugepagesz", "2 MiB pages"),
    karg("hugepages", "2 MiB pages"),
    sysctl("fs.inotify.max_user_instances"),
    sysctl("fs.inotify.max_user_watches"),
    sysctl("kernel.threads-max"),
    sysctl("vm.max_map_count"),
    sysctl("vm.min_free_kbytes"),
    sysctl("vm.overcommit_memory"),
    Applied(
        "containerd LimitSTACK=67108864",
        (("unit-dropin", "containerd.service LimitSTACK"),),
        "LimitSTACK",
    ),
)
# (NVIDIA's accelerator, goldtune intent, multinode) -> what NVIDIA's profile for it applies.
# gb200 has no inference profile of its own beyond performance (gb300-inference is a shim).
NVIDIA_PROFILES: dict[tuple[str, str, bool], tuple[Applied, ...]] = {
    ("h100", "inference", False): H100_INFERENCE,
    ("h100", "training", False): H100_PERFORMANCE,
    ("h100", "training", True): H100_PERFORMANCE + MULTI_NODE_TRAINING,
    ("gb200", "inference", False): GB200_PERFORMANCE,
    ("gb200", "training", False): GB200_PERFORMANCE,
    ("gb200", "training", True): GB200_PERFORMANCE + MULTI_NODE_TRAINING,
}
# NVIDIA's accelerator names, by what the GPU is (not by a SKU string): its h100 profiles are
# for Hopper SXM boards (H100, H200), gb200 for the Grace Blackwell superchip.
SYSTEMS = ("dgx-h100", "dgx-h200", "hgx-h100-epyc", "gb200-nvl72-tray")
PROFILES = ("inference", "inference-latency", "training", "training-k8s", "training-multinode")


def nvidia_accelerator(gpu: tuple[str, str, str]) -> str | None:
    """(model key, architecture, form factor) -> the accelerator name of NVIDIA's profiles."""
    _, architecture, form_factor = gpu
    if architecture == "blackwell" and form_factor == "superchip":
        return "gb200"
    if architecture == "hopper" and form_factor == "sxm":
        return "h100"
    return None


def decided_not_to_set(explain: str) -> str:
    """The "Decided not to set" section of EXPLAIN.md."""
    _, _, rest = explain.partition("## Decided not to set")
    return rest.partition("\n## ")[0]


def unaccounted(plan: Plan, explain: str, applied: tuple[Applied, ...]) -> list[str]:
    """What NVIDIA's profile applies that is neither in the plan nor explained as not set."""
    present = {(s.kind, s.key) for s in plan.settings}
    notes = decided_not_to_set(explain)
    return [
        item.what
        for item in applied
        if not present & set(item.forms) and item.note_says not in notes
    ]


def nvidia_profile_of(system: str, profile: str) -> tuple[Applied, ...]:
    inputs = load_inputs(system, profile)
    model = inputs.facts.gpus[0].model
    accelerator = nvidia_accelerator((model.key, model.architecture, model.form_factor))
    assert accelerator, f"{system}: not an accelerator NVIDIA ships a profile for"
    return NVIDIA_PROFILES[(accelerator, inputs.profile.intent, inputs.profile.multinode)]


@pytest.mark.parametrize("profile", PROFILES)
@pytest.mark.parametrize("system", SYSTEMS)
def test_every_setting_of_nvidias_profile_is_set_or_explained(system: str, profile: str) -> None:
    applied = nvidia_profile_of(system, profile)
    explain = render_for(system, profile)[EXPLAIN][0].decode()
    assert unaccounted(plan_for(system, profile), explain, applied) == []


def test_a_setting_silently_absent_is_caught() -> None:
    """The check fails once the reasons are gone: the same plan without its notes."""
    plan = plan_for("dgx-h100", "training-multinode")
    explain = render_for("dgx-h100", "training-multinode")[EXPLAIN][0].decode()
    bare = decided_not_to_set(explain)
    missing = unaccounted(plan, explain.replace(bare, "\n"), H100_PERFORMANCE + MULTI_NODE_TRAINING)
    assert {
        "[modules] ib_umad",
        "pci",
        "net.ipv4.tcp_max_syn_backlog",
        "net.core.rmem_default",
    } <= set(missing)
