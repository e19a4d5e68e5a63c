"""memory.*: swap, THP, mmap count, overcommit, NUMA, dirty bytes, 1 GiB huge pages."""

from __future__ import annotations

import pytest

from generator.model.setting import Setting
from generator.rules import memory

from .helpers import (
    DUAL_EPYC,
    DUAL_XEON,
    GRACE,
    H100X8,
    MI300X8,
    Case,
    case_ids,
    check_case,
    facts,
    notes_of,
    profile,
    settings_of,
    triples,
)

GIB = 1024**3
DEFRAG = "/sys/kernel/mm/transparent_hugepage/defrag"
SINGLE_NODE_NOTE = "single NUMA node"
GH200 = {"model": "GH200", "count": 1}

CASES: tuple[Case, ...] = (
    # AMD's MI300A guide (mi300a.rst): 33554432 pages per APU, 4 APUs as its example
    Case(
        "apu-ttm-4x-mi300a",
        memory.apu_ttm,
        {
            ("modprobe", "options amdttm pages_limit", "134217728"),
            ("modprobe", "options amdttm page_pool_size", "134217728"),
            # the guide: boot parameters where amdgpu loads before the root filesystem (D-A5)
            ("kernel-arg", "amdttm.pages_limit", "134217728"),
            ("kernel-arg", "amdttm.page_pool_size", "134217728"),
        },
        hw={"gpus": [{"model": "MI300A", "count": 4}]},
        note="transparent_hugepage=always",
    ),
    # AMD's MI300A guide, "Enable compaction" (D-A4): pinned on APUs only
    Case(
        "apu-compaction-mi300a",
        memory.apu_compaction,
        {
            ("sysctl", "vm.compaction_proactiveness", "20"),
            ("sysctl", "vm.compact_unevictable_allowed", "1"),
        },
        hw={"gpus": [{"model": "MI300A", "count": 4}]},
    ),
    Case("apu-compaction-mi300x", memory.apu_compaction, set(), hw={"gpus": [MI300X8]}),
    # swappiness: 1 everywhere, never the 0 trap
    Case("swappiness-inference", memory.swappiness, {("sysctl", "vm.swappiness", "1")}),
    Case(
        "swappiness-training",
        memory.swappiness,
        {("sysctl", "vm.swappiness", "1")},
        intent="training",
    ),
    # THP: madvise by default, the profile may say never; defrag only with madvise
    Case("thp-madvise", memory.thp_mode, {("kernel-arg", "transparent_hugepage", "madvise")}),
    Case(
        "thp-never",
        memory.thp_mode,
        {("kernel-arg", "transparent_hugepage", "never")},
        knobs={"thp": "never"},
    ),
    Case(
        "thp-madvise-64k-caveat",
        memory.thp_mode,
        {("kernel-arg", "transparent_hugepage", "madvise")},
        hw={**GRACE, "os": {"page_size_kib": 64}},
        note="512 MiB",
    ),
    Case("defrag-madvise", memory.thp_defrag, {("sysfs", DEFRAG, "defer+madvise")}),
    Case("defrag-never", memory.thp_defrag, set(), knobs={"thp": "never"}),
    # max_map_count: at least the new distribution default
    Case("max-map-count", memory.max_map_count, {("sysctl", "vm.max_map_count", "1048576")}),
    # overcommit only where CUDA lives
    Case(
        "overcommit-gpus",
        memory.overcommit,
        {("sysctl", "vm.overcommit_memory", "1")},
        hw={"gpus": [H100X8]},
    ),
    Case("overcommit-no-gpu", memory.overcommit, set()),
    # NUMA balancing: only on multi-node machines; 0 training, 1 inference
    Case("numa-balancing-single-node", memory.numa_balancing, set(), note=SINGLE_NODE_NOTE),
    # AMD Instinct: off for every intent (AMD's MI300X guide, Disable NUMA auto-balancing), where
    # NVIDIA's rule keeps inference at the kernel default
    Case(
        "numa-balancing-mi300x-inference",
        memory.numa_balancing,
        {("sysctl", "kernel.numa_balancing", "0")},
        hw={"gpus": [{"model": "MI300X", "count": 8}]},
    ),
    Case(
        "numa-balancing-single-node-training",
        memory.numa_balancing,
        set(),
        intent="training",
        note=SINGLE_NODE_NOTE,
    ),
    Case(
        "numa-balancing-grace-cpu-only",
        memory.numa_balancing,
        set(),
        hw=GRACE,
        note=SINGLE_NODE_NOTE,
    ),
    # Grace superchips: GPU memory is a CPU-less NUMA node; off whatever the intent (Grace guide)
    Case(
        "numa-balancing-gh200-inference",
        memory.numa_balancing,
        {("sysctl", "kernel.numa_balancing", "0")},
        hw={**GRACE, "gpus": [GH200]},
    ),
    Case(
        "numa-balancing-gb200-tray-inference",
        memory.numa_balancing,
        {("sysctl", "kernel.numa_balancing", "0")},
        hw={
            **GRACE,
            "cpu": {**GRACE["cpu"], "sockets": 2},
            "gpus": [{"model": "GB200", "count": 4}],
        },
    ),
    Case(
        "numa-balancing-gh200-training",
        memory.numa_balancing,
        {("sysctl", "kernel.numa_balancing", "0")},
        hw={**GRACE, "gpus": [GH200]},
        intent="training",
    ),
    # issue 40 item 7: a Grace with PCIe GPUs follows the Grace guide too, serving included
    Case(
        "numa-balancing-grace-pcie-gpus-inference",
        memory.numa_balancing,
        {("sysctl", "kernel.numa_balancing", "0")},
        hw={**GRACE, "gpus": [{"model": "H100-PCIe", "count": 2}]},
    ),
    # inference: the kernel default, never a pinned 1 that would undo DGX OS's choice
    Case("numa-balancing-2s-inference", memory.numa_balancing, set(), hw=DUAL_XEON, note="default"),
    Case(
        "numa-balancing-2s-training",
        memory.numa_balancing,
        {("sysctl", "kernel.numa_balancing", "0")},
        hw=DUAL_XEON,
        intent="training",
    ),
    Case(
        "numa-balancing-nps4-1s",
        memory.numa_balancing,
        {("sysctl", "kernel.numa_balancing", "0")},
        hw={"numa_nodes": 4},
        intent="training",
    ),
    Case("zone-reclaim-single-node", memory.zone_reclaim, set()),
    Case(
        "zone-reclaim-2s",
        memory.zone_reclaim,
        {("sysctl", "vm.zone_reclaim_mode", "0")},
        hw=DUAL_EPYC,
    ),
    Case(
        "zone-reclaim-nps4-1s",
        memory.zone_reclaim,
        {("sysctl", "vm.zone_reclaim_mode", "0")},
        hw={"numa_nodes": 4},
    ),
    # dirty limits in bytes: training machines with >= 256 GiB only, RAM/256 clamped to 1-4 GiB, x4
    Case(
        "dirty-training-2tib",
        memory.dirty_bytes,
        {
            ("sysctl", "vm.dirty_background_bytes", str(4 * GIB)),
            ("sysctl", "vm.dirty_bytes", str(16 * GIB)),
        },
        hw={"memory_gib": 2048},
        intent="training",
    ),
    Case(
        "dirty-training-512g",
        memory.dirty_bytes,
        {
            ("sysctl", "vm.dirty_background_bytes", str(2 * GIB)),
            ("sysctl", "vm.dirty_bytes", str(8 * GIB)),
        },
        hw={"memory_gib": 512},
        intent="training",
    ),
    Case(
        "dirty-training-256g",
        memory.dirty_bytes,
        {
            ("sysctl", "vm.dirty_background_bytes", str(1 * GIB)),
            ("sysctl", "vm.dirty_bytes", str(4 * GIB)),
        },
        hw={"memory_gib": 256},
        intent="training",
    ),
    Case(
        "dirty-training-255g", memory.dirty_bytes, set(), hw={"memory_gib": 255}, intent="training"
    ),
    Case("dirty-training-small", memory.dirty_bytes, set(), intent="training"),
    Case("dirty-inference-2tib", memory.dirty_bytes, set(), hw={"memory_gib": 2048}),
    # explicit 1 GiB huge pages: only when asked; dropped with a note on 64 KiB-page kernels only
    Case("hugepages-off", memory.hugepages_1g, set(), hw={"memory_gib": 2048}),
    Case(
        "hugepages-off-gpu-says-why",
        memory.hugepages_1g,
        set(),
        hw={"gpus": [H100X8]},
        note="NVIDIA's h100-inference",
    ),
    Case(
        "hugepages-10pct-2tib",
        memory.hugepages_1g,
        {
            ("kernel-arg", "default_hugepagesz", "1G"),
            ("kernel-arg", "hugepagesz", "1G"),
            ("kernel-arg", "hugepages", "204"),
        },
        hw={"memory_gib": 2048},
        knobs={"hugepages_1g_percent": 10},
    ),
    Case(
        "hugepages-50pct-64g",
        memory.hugepages_1g,
        {
            ("kernel-arg", "default_hugepagesz", "1G"),
            ("kernel-arg", "hugepagesz", "1G"),
            ("kernel-arg", "hugepages", "32"),
        },
        knobs={"hugepages_1g_percent": 50},
    ),
    # 64 KiB pages have no 1 GiB size: the same share as 2 MiB pages (64 GiB x 10% = 6 GiB)
    Case(
        "hugepages-64k-pages-2m",
        memory.hugepages_1g,
        {
            ("kernel-arg", "default_hugepagesz", "2M"),
            ("kernel-arg", "hugepagesz", "2M"),
            ("kernel-arg", "hugepages", str(6 * 512)),
        },
        hw={**GRACE, "os": {"page_size_kib": 64}},
        knobs={"hugepages_1g_percent": 10},
    ),
    # arm64 with 16 KiB pages (and 4 KiB) offers 1 GiB pages
    Case(
        "hugepages-16k-pages-keep-1g",
        memory.hugepages_1g,
        {
            ("kernel-arg", "default_hugepagesz", "1G"),
            ("kernel-arg", "hugepagesz", "1G"),
            ("kernel-arg", "hugepages", "51"),
        },
        hw={**GRACE, "memory_gib": 512, "os": {"page_size_kib": 16}},
        knobs={"hugepages_1g_percent": 10},
    ),
    Case(
        "hugepages-4k-pages-arm",
        memory.hugepages_1g,
        {
            ("kernel-arg", "default_hugepagesz", "1G"),
            ("kernel-arg", "hugepagesz", "1G"),
            ("kernel-arg", "hugepages", "51"),
        },
        hw={**GRACE, "memory_gib": 512, "os": {"page_size_kib": 4}},
        knobs={"hugepages_1g_percent": 10},
    ),
)


@pytest.mark.parametrize("case", CASES, ids=case_ids(CASES))
def test_memory_rule(case: Case) -> None:
    check_case(case)


def test_dirty_bytes_replace_the_ratio_form_never_both() -> None:
    output = memory.dirty_bytes.apply(facts(memory_gib=1024), profile("training"))
    keys = {s.key for s in output}
    assert keys == {"vm.dirty_background_bytes", "vm.dirty_bytes"}
    assert not keys & {"vm.dirty_ratio", "vm.dirty_background_ratio"}


@pytest.mark.parametrize("memory_gib", [256, 300, 768, 1024, 1536, 2048, 4096, 16384])
def test_dirty_background_scales_with_ram_within_1_to_4_gib(memory_gib: int) -> None:
    background = memory.dirty_background_bytes(memory_gib)
    assert 1 * GIB <= background <= 4 * GIB
    assert background == min(4 * GIB, max(1 * GIB, memory_gib * GIB // 256))


def test_dirty_background_is_monotone_in_ram() -> None:
    sizes = [memory.dirty_background_bytes(gib) for gib in range(256, 4097, 64)]
    assert sizes == sorted(sizes)


def test_hugepages_on_64k_pages_never_ask_for_1g() -> None:
    output = memory.hugepages_1g.apply(
        facts(**GRACE, os={"page_size_kib": 64}), profile("training", hugepages_1g_percent=25)
    )
    args = {s.key: s.value for s in output if isinstance(s, Setting)}
    assert args == {"default_hugepagesz": "2M", "hugepagesz": "2M", "hugepages": str(16 * 512)}
    assert all("64 KiB" in s.reason and "hugepagesz=1G" in s.reason for s in output)


@pytest.mark.parametrize(("page_size_kib", "size"), [(4, "1G"), (16, "1G"), (64, "2M")])
def test_only_64k_page_kernels_drop_1g_pages(page_size_kib: int, size: str) -> None:
    output = memory.hugepages_1g.apply(
        facts(**GRACE, os={"page_size_kib": page_size_kib}),
        profile("training", hugepages_1g_percent=25),
    )
    assert ("kernel-arg", "hugepagesz", size) in triples(output)
    assert ("kernel-arg", "default_hugepagesz", size) in triples(output)


def test_thp_caveat_only_on_64k_pages() -> None:
    for page_size_kib in (4, 16):
        output = memory.thp_mode.apply(
            facts(**GRACE, os={"page_size_kib": page_size_kib}), profile("inference")
        )
        assert notes_of(output) == []


def test_an_amd_nodes_thp_reason_names_no_cuda() -> None:
    """memory.thp-mode on AMD GPUs: PyTorch asks, not CUDA (failed before: it named CUDA)."""
    amd = memory.thp_mode.apply(facts(gpus=[{"model": "MI300X", "count": 8}]), profile("training"))
    nvidia = memory.thp_mode.apply(facts(gpus=[H100X8]), profile("training"))
    assert [s.reason for s in amd if isinstance(s, Setting)] == [
        "PyTorch asks for huge pages on long-lived allocations via madvise; everything else "
        "avoids the compaction stalls of 'always'"
    ]
    assert all("PyTorch and CUDA ask" in s.reason for s in nvidia if isinstance(s, Setting))


# AMD's MI300A guide: amdttm pages_limit/page_pool_size = 33554432 pages per APU (its own 4-APU
# example: 134217728); failed before: no rule, and MI300A was not in the catalog
@pytest.mark.parametrize(("count", "pages"), [(4, "134217728"), (2, "67108864")])
def test_apu_ttm_follows_amds_mi300a_guide(count: int, pages: str) -> None:
    output = memory.apu_ttm.apply(
        facts(gpus=[{"model": "MI300A", "count": count}]), profile("training")
    )
    assert settings_of(output, "modprobe") == {
        "options amdttm pages_limit": pages,
        "options amdttm page_pool_size": pages,
    }
    assert any("transparent_hugepage=always" in text for text in notes_of(output))


def test_apu_ttm_leaves_discrete_gpus_alone() -> None:
    output = memory.apu_ttm.apply(
        facts(gpus=[{"model": "MI300X", "count": 8}]), profile("training")
    )
    assert settings_of(output) == {} and notes_of(output) == []


def test_numa_balancing_on_mi355x_names_its_acceptance_page() -> None:
    """Issue 40 item 1: MI325X and MI355X bundles say their own page asks for it too."""
    hw = {"gpus": [{"model": "MI355X", "count": 8}]}
    (found,) = Case("x", memory.numa_balancing, set(), hw=hw).run()
    assert (found.key, found.value) == ("kernel.numa_balancing", "0")
    assert "MI355X system acceptance guide lists numa_balancing=disable" in found.reason


def test_mi300a_thp_note_says_amd_calls_always_required() -> None:
    """W-A1 (issue 40): AMD's acceptance pages mark transparent_hugepage=always required on
    MI300A; the bundle keeps its decision (madvise, accept_risk to follow AMD) and says so."""
    found = Case("x", memory.apu_ttm, set(), hw={"gpus": [{"model": "MI300A", "count": 4}]}).run()
    text = " ".join(getattr(item, "text", "") for item in found)
    assert "required on MI300A 'for correct and performant operation'" in text
    assert "accept_risk" in text
