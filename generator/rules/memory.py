"""Memory: swap, transparent and explicit huge pages, NUMA placement, write-back."""

from __future__ import annotations

from generator.inputs.facts import Facts, GpuGroup
from generator.inputs.profile import Profile
from generator.model.vendors import GpuVendor
from generator.rules.base import (
    GIB,
    Output,
    kernel_arg,
    module_option,
    note,
    rule,
    sysctl,
    sysfs,
)
from generator.rules.limits import amd_only

# arm64 with 64 KiB pages offers 2M/512M/16G huge pages, not 1G, and its THP is 512M
# (Documentation/arch/arm64/hugetlbpage.rst); 4 KiB and 16 KiB page kernels offer 1G.
PAGE_SIZES_WITHOUT_1G_KIB = {64}


@rule("memory.swappiness")
def swappiness(facts: Facts, profile: Profile) -> Output:
    """Keep swap as a last resort without the OOM-prone behaviour of swappiness 0."""
    yield sysctl(
        "vm.swappiness",
        1,
        "swapping model weights or activations is far slower than restarting; 1 (not 0) still "
        "lets the kernel reclaim anonymous memory before an OOM kill inside memory cgroups",
    )


@rule("memory.thp-mode", vendors=(GpuVendor.NVIDIA, GpuVendor.AMD))
def thp_mode(facts: Facts, profile: Profile) -> Output:
    """Transparent huge pages only where the application asks (madvise), set at boot.

    On 64 KiB-page kernels a PMD-sized transparent huge page is 512 MiB
    (Documentation/arch/arm64/hugetlbpage.rst), so few madvise regions ever get one; the smaller
    multi-size THP of kernels >= 6.8 (Documentation/admin-guide/mm/transhuge.rst) is not set.
    """
    if profile.thp == "madvise":
        # CUDA only where it runs: an AMD node's reason names no NVIDIA stack
        askers = "PyTorch asks" if amd_only(facts) else "PyTorch and CUDA ask"
        reason = (
            f"{askers} for huge pages on long-lived allocations via madvise; "
            "everything else avoids the compaction stalls of 'always'"
        )
    else:
        reason = "the profile turns transparent huge pages off entirely"
    yield kernel_arg("transparent_hugepage", profile.thp, reason)
    if profile.thp == "madvise" and facts.os.page_size_kib in PAGE_SIZES_WITHOUT_1G_KIB:
        yield note(
            f"with {facts.os.page_size_kib} KiB pages a transparent huge page is 512 MiB "
            "(the PMD size), so madvise regions rarely get one; the multi-size THP sizes "
            "of kernels >= 6.8 (hugepages-<size>kB/enabled) are left at their default"
        )


@rule("memory.thp-defrag")
def thp_defrag(facts: Facts, profile: Profile) -> Output:
    """Compact for huge pages in the background, not in the allocating thread."""
    if profile.thp != "madvise":
        return
    yield sysfs(
        "/sys/kernel/mm/transparent_hugepage/defrag",
        "defer+madvise",
        "madvise regions compact directly, all others defer to kcompactd, so no allocating "
        "thread stalls for tens of milliseconds on compaction",
    )


@rule("memory.max-map-count")
def max_map_count(facts: Facts, profile: Profile) -> Output:
    """Raise the mmap count limit for mmap'd weight shards and busy servers."""
    yield sysctl(
        "vm.max_map_count",
        1048576,
        "mmap'd safetensors shards and high-concurrency servers exceed the old 65530 default "
        "(ENOMEM); 1048576 equals the newer distribution default, so it never lowers it",
    )


@rule("memory.overcommit", vendors=(GpuVendor.NVIDIA,))
def overcommit(facts: Facts, profile: Profile) -> Output:
    """Never refuse an allocation for want of RAM + swap on GPU servers.

    Mode 0's heuristic refuses one private writable mapping larger than RAM + swap
    (Documentation/mm/overcommit-accounting.rst; mm/util.c ``__vm_enough_memory``,
    OVERCOMMIT_GUESS, since Linux 5.2). CUDA's virtual address reservations are PROT_NONE and
    never accounted, so they are not the reason; host-side pools sized from GPU memory
    (pinned staging buffers, offloaded optimizer state) are. NVIDIA's gb200 tuned profile and
    the EKS AMI's 99-amazon.conf both set 1 (research/peer-systems.md).
    """
    if not facts.has_gpus:
        return
    yield sysctl(
        "vm.overcommit_memory",
        1,
        "mode 0 refuses any single allocation larger than RAM + swap, which host buffers "
        "sized from GPU memory can reach; 1 never refuses, as NVIDIA's gb200 tuned profile "
        "and the EKS AMI set; the cost: memory exhaustion ends in the OOM killer, not a "
        "failed malloc",
    )


def models_of_gpus(facts: Facts) -> str:
    """``4x H100-PCIe``: the machine's GPU groups."""
    return ", ".join(f"{group.count}x {group.model.key}" for group in facts.gpus)


def coherent_gpu_models(facts: Facts) -> str:
    """Superchip GPUs (GH200, GB200) whose memory the Grace CPU maps coherently over NVLink-C2C."""
    superchips = [group.model.key for group in facts.gpus if group.model.is_superchip]
    return ", ".join(superchips)


# AMD's MI300A guide: amdttm's pages_limit and page_pool_size are 4 KiB pages, 33554432 (128 GiB)
# per APU on the node (ROCm/amdgpu-docs docs/system-optimization/mi300a.rst, "Increase the amount
# of allocatable memory").
APU_TTM_PAGES_PER_APU = 33554432


@rule("memory.apu-ttm", vendors=(GpuVendor.AMD,))
def apu_ttm(facts: Facts, profile: Profile) -> Output:
    """Let HIP's device allocator reach all of an APU's memory: amdttm pages_limit and pool.

    On an APU the GPU's memory is the system's HBM, and TTM caps what the device allocator may
    take (96 of 128 GiB on MI300A by default). AMD's MI300A system optimization guide sets
    amdttm's pages_limit and page_pool_size to 33554432 4 KiB pages per APU on the node, in
    /etc/modprobe.d, "the filesystem already set up when the kernel driver is loaded"
    (ROCm/amdgpu-docs docs/system-optimization/mi300a.rst). amdttm is the TTM of AMD's
    amdgpu-dkms driver; an inbox amdgpu uses ttm, for which the guide gives no values. Keyed on
    the catalog's apu form factor, never a model name.
    """
    apus = sum(group.count for group in facts.gpus if group.model.form_factor == "apu")
    if not apus:
        return
    pages = APU_TTM_PAGES_PER_APU * apus
    why = (
        f"{apus} APU(s) share the node's HBM with the CPU: TTM lets HIP's device allocator take "
        "96 of each MI300A's 128 GiB by default; AMD's MI300A guide (Increase the amount of "
        f"allocatable memory) sets {APU_TTM_PAGES_PER_APU} 4 KiB pages per APU; amdgpu-dkms's "
        "amdttm reads it when amdgpu loads it"
    )
    yield module_option("amdttm", "pages_limit", pages, why)
    yield module_option("amdttm", "page_pool_size", pages, why)
    # transparent_hugepage=always: "Required on MI300A APU ... requires transparent huge pages for
    # correct and performant operation" (ROCm/system-acceptance-docs docs/common/
    # kernel-parameters.md, 23e7312, optional kernel parameters); the note below says so.
    # The guide: "If the filesystem is not already set up when the kernel driver is loaded, then
    # the options must be specified as boot parameters" (amdttm.pages_limit=...): an initramfs
    # that loads amdgpu before the root is mounted never reads /etc/modprobe.d.
    boot_why = (
        f"{why}; also as a boot parameter, as AMD's guide asks where amdgpu loads before the "
        "root filesystem (an initramfs that never reads /etc/modprobe.d)"
    )
    yield kernel_arg("amdttm.pages_limit", pages, boot_why)
    yield kernel_arg("amdttm.page_pool_size", pages, boot_why)
    yield note(
        "AMD's MI300A guide enables transparent huge pages for every allocation "
        "(transparent_hugepage=always), and AMD's system acceptance kernel parameters mark it "
        "required on MI300A 'for correct and performant operation' of its unified memory; "
        f"this profile keeps thp: {profile.thp} (memory.thp-mode, "
        "whose knob offers madvise and never): 'always' makes every allocating thread, CPU or "
        "GPU, compact memory synchronously on a fault, the stall TUNING.md lists as a trap, and "
        "the bundle applies one THP mode to every workload of the image. A site that follows "
        "AMD sets it in an override with accept_risk (README, overrides)"
    )


# AMD's MI300A guide, "Enable compaction": "Compaction is necessary for proper MI300A operation
# ... In RHEL distributions, compaction is disabled by default", then sets these two values
# (ROCm/amdgpu-docs docs/system-optimization/mi300a.rst, commit dbebd48). Mainline's defaults are
# the same (Documentation/admin-guide/sysctl/vm.rst: 20; 1, 0 on PREEMPT_RT), so pinning them
# changes nothing where a distribution kept them and restores them where it did not.
APU_COMPACTION = {"vm.compaction_proactiveness": 20, "vm.compact_unevictable_allowed": 1}


@rule("memory.apu-compaction", vendors=(GpuVendor.AMD,))
def apu_compaction(facts: Facts, profile: Profile) -> Output:
    """Keep memory compaction on for APUs, as AMD's MI300A guide asks ("Enable compaction").

    The APU shares the node's HBM between CPU and GPU, and without compaction "application
    performance eventually degrades as fragmentation increases". Keyed on the catalog's apu
    form factor, never a model name.
    """
    if not any(group.model.form_factor == "apu" for group in facts.gpus):
        return
    for key, value in APU_COMPACTION.items():
        yield sysctl(
            key,
            value,
            "the APUs share the node's HBM between CPU and GPU: AMD's MI300A guide (Enable "
            "compaction) sets it, as some distributions (RHEL, per AMD) ship compaction off; "
            "the mainline default, pinned",
        )


def acceptance_pages(groups: list[GpuGroup]) -> str:
    """The system acceptance pages of models that have one (MI325X, MI355X: catalog
    ``host_guide``; ROCm/system-acceptance-docs docs/gpus/), which ask for numa_balancing=disable
    on the kernel command line: the same switch as kernel.numa_balancing=0."""
    return " and ".join(
        dict.fromkeys(
            g.model.host_guide for g in groups if g.model.pci_bfsort and g.model.host_guide
        )
    )


@rule("memory.numa-balancing", vendors=(GpuVendor.NVIDIA, GpuVendor.AMD))
def numa_balancing(facts: Facts, profile: Profile) -> Output:
    """Automatic NUMA balancing: off with AMD Instinct, on Grace and for training on NUMA hosts.

    AMD's MI300X system optimization guide (ROCm/amdgpu-docs docs/system-optimization/mi300x.rst,
    "Disable NUMA auto-balancing") disables it for every workload: applications "in general,
    benefit from disabling NUMA balancing"; it asks to compare both values on the workload. Where
    AMD and NVIDIA differ (inference), each vendor's GPUs follow their own guide.

    Inference keeps the kernel default (TUNING.md principle 1: no value equal to the default
    unless pinning is the point); DGX OS ships nvidia-disable-numa-balancing, which a pinned 1
    would undo (DGX OS 7 user guide, appendix "DGX software stack").

    A Grace superchip exposes each GPU's memory to Linux as a CPU-less NUMA node (hwloc commit
    39fae7e: one GPU node per GPU on Grace Hopper), and NVIDIA's Grace platform guide recommends
    numa_balancing=disable (NVIDIA/grace-cpu-benchmarking-guide src/platform/index.md, pointing to
    the Grace Performance Tuning Guide). This keys on the GPU's superchip form factor in
    hardware_db, which holds where the file leaves memory_only_numa_nodes out; the other branches
    count NUMA nodes WITH CPUs (facts.is_numa): processes are balanced between those only.
    The guide's setting is for the Grace platform, not for the superchip alone: a Grace with
    PCIe GPUs gets it too, for serving as for training, as it gets the guide's other two
    (boot.acpi-power-meter, boot.init-on-alloc).
    """
    if amd := [group for group in facts.gpus if group.model.vendor == GpuVendor.AMD]:
        models = ", ".join(f"{group.count}x {group.model.key}" for group in amd)
        yield sysctl(
            "kernel.numa_balancing",
            0,
            f"{models}: AMD's MI300X system optimization guide (Disable NUMA auto-balancing) "
            "turns it off: the kernel's page scanning and migration second-guess the placement "
            "of GPU host buffers; AMD asks to compare 0 and 1 on the workload"
            + (
                f" ({acceptance} lists numa_balancing=disable among its kernel parameters; the "
                "sysctl sets the same switch)"
                if (acceptance := acceptance_pages(amd))
                else ""
            ),
        )
        return
    if superchips := coherent_gpu_models(facts):
        yield sysctl(
            "kernel.numa_balancing",
            0,
            f"{superchips}: GPU memory is a CPU-less NUMA node behind NVLink-C2C, and "
            "NVIDIA's Grace guide disables automatic NUMA balancing (its "
            "numa_balancing=disable), which would migrate pages between CPU and GPU "
            "memory",
        )
        return
    if facts.cpu.is_grace and facts.has_gpus:
        yield sysctl(
            "kernel.numa_balancing",
            0,
            f"Grace with {models_of_gpus(facts)}: NVIDIA's Grace guide disables automatic NUMA "
            "balancing on every Grace platform (numa_balancing=disable, beside init_on_alloc=0 and "
            "acpi_power_meter.force_cap_on=y), for serving as for training",
        )
        return
    if not facts.is_numa:
        yield note("single NUMA node: no NUMA balancing or zone reclaim setting applies")
        return
    if profile.intent == "training":
        yield sysctl(
            "kernel.numa_balancing",
            0,
            f"{facts.numa_nodes} NUMA nodes with CPUs: page migration mid-epoch is churn for "
            "processes already bound to their GPU's node",
        )
        return
    yield note(
        f"{facts.numa_nodes} NUMA nodes with CPUs, inference: kernel.numa_balancing left at the "
        "kernel's default; writing 1 would only repeat the default and re-enable what DGX "
        "OS turns off (nvidia-disable-numa-balancing); override it to 0 if latency jitter "
        "follows numa_pte_updates in /proc/vmstat"
    )


@rule("memory.zone-reclaim")
def zone_reclaim(facts: Facts, profile: Profile) -> Output:
    """Prefer remote memory over reclaiming local page cache on NUMA machines.

    NUMA here counts nodes WITH CPUs: a CPU-less node only holds memory that another node's
    CPUs allocate remotely anyway."""
    if not facts.is_numa:
        return
    yield sysctl(
        "vm.zone_reclaim_mode",
        0,
        f"{facts.numa_nodes} NUMA nodes with CPUs: allocate on a remote node rather than drop "
        "the local page cache (weights, datasets); pinned because some firmware "
        "distances made older kernels enable it",
    )


def dirty_background_bytes(memory_gib: int) -> int:
    """1/256 of RAM, between 1 and 4 GiB."""
    return min(4 * GIB, max(1 * GIB, memory_gib * GIB // 256))


@rule("memory.dirty-bytes")
def dirty_bytes(facts: Facts, profile: Profile) -> Output:
    """Bound dirty page cache in bytes on large training machines (checkpoint flushes)."""
    if profile.intent != "training" or facts.memory_gib < 256:
        return
    background = dirty_background_bytes(facts.memory_gib)
    limit = 4 * background
    why = (
        f"{facts.memory_gib} GiB RAM: a ratio lets hundreds of GB of checkpoint data pile "
        "up and then stall training on flush; a byte bound keeps write-back steady"
    )
    yield sysctl(
        "vm.dirty_background_bytes",
        background,
        why + f" (background {background // GIB} GiB = RAM/256, 1-4 GiB)",
    )
    yield sysctl("vm.dirty_bytes", limit, why + f" (hard limit {limit // GIB} GiB = 4x background)")


@rule("memory.hugepages-1g", vendors=(GpuVendor.NVIDIA,))
def hugepages_1g(facts: Facts, profile: Profile) -> Output:
    """Reserve 1 GiB huge pages at boot (2 MiB on 64 KiB-page kernels), only when asked.

    64 KiB-page arm64 kernels offer 2M (contiguous PTE), 512M (PMD) and 16G huge pages, not 1G
    (Documentation/arch/arm64/hugetlbpage.rst), and reject hugepagesz=1G while still booting
    (NVIDIA/nodewright-packages #135); NVIDIA's fix for its Grace profiles (PR #127) makes 2 MiB
    the default size there. The same share of RAM is reserved as 2 MiB pages.
    """
    percent = profile.hugepages_1g_percent
    if not percent:
        if facts.has_gpus:
            yield note(
                "no huge pages reserved (NVIDIA's h100-inference and gb200 profiles "
                "reserve 2 MiB pages, e.g. hugepagesz=2M hugepages=8192): reserved memory "
                "is lost to everything else and only engines that map hugetlbfs use it; "
                "the profile knob hugepages_1g_percent reserves them"
            )
        return
    if facts.os.page_size_kib in PAGE_SIZES_WITHOUT_1G_KIB:
        count = facts.memory_gib * percent // 100 * 512
        why = (
            f"the profile reserves {percent}% of {facts.memory_gib} GiB as huge pages; the "
            f"kernel uses {facts.os.page_size_kib} KiB pages, which have no 1 GiB size "
            "(hugepagesz=1G is rejected), so 2 MiB pages as NVIDIA's Grace profiles use"
        )
        yield kernel_arg("default_hugepagesz", "2M", why)
        yield kernel_arg("hugepagesz", "2M", why)
        yield kernel_arg("hugepages", count, why)
        return
    count = facts.memory_gib * percent // 100
    why = (
        f"the profile reserves {percent}% of {facts.memory_gib} GiB as 1 GiB pages for an "
        "engine built to use them; reserved memory is lost to everything else"
    )
    yield kernel_arg("default_hugepagesz", "1G", why)
    yield kernel_arg("hugepagesz", "1G", why)
    yield kernel_arg("hugepages", count, why)
