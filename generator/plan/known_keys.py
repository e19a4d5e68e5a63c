"""The sysctl keys and kernel parameters goldtune may emit, with the kernels that have them.

Nothing outside these tables can reach a bundle: a rule or a profile override that names an
unknown key, or a key the target kernel or architecture does not have, is an error. Versions are
the first mainline release with the key and, where it was removed, the first release without it
(from Documentation/admin-guide/sysctl/*.rst, kernel-parameters.txt and the kernel's git history).
"""

# No `from __future__ import annotations`: a NamedTuple turns each string annotation into
# a compiled ForwardRef, ~0.15 ms a record at import (bench/bench.py's cold gen).
from typing import NamedTuple

from generator.model.kernel import NR_OPEN_DEFAULT

__all__ = ["NR_OPEN_DEFAULT"]  # re-exported: the plan's checks read it with the key tables

Version = tuple[int, int]
ANY_ARCH = ("x86_64", "aarch64")


class KnownKey(NamedTuple):
    since: Version
    until: Version | None = None  # first kernel without it
    arches: tuple[str, ...] = ANY_ARCH
    module: str | None = None  # exists only while this module is loaded
    shape: str = "int"  # what the kernel parses: "int", "int3" (three integers) or "word"
    # A ceiling: any value at least this high serves, so a distribution default that is already
    # as high makes the setting redundant (generator/plan/distro.py). Not fs.nr_open: the nofile
    # check reads the plan's own value of it.
    at_least: bool = False

    def available(self, kernel: Version | None, arch: str) -> bool:
        if arch not in self.arches:
            return False
        if kernel is None:
            return self.until is None
        return self.since <= kernel and (self.until is None or kernel < self.until)


KNOWN_SYSCTLS: dict[str, KnownKey] = {
    "fs.aio-max-nr": KnownKey((2, 6), at_least=True),
    "fs.file-max": KnownKey((2, 6), at_least=True),
    "fs.inotify.max_user_instances": KnownKey((2, 6), at_least=True),
    "fs.inotify.max_user_watches": KnownKey((2, 6), at_least=True),
    "fs.nr_open": KnownKey((2, 6)),
    "kernel.numa_balancing": KnownKey((3, 8)),
    "kernel.pid_max": KnownKey((2, 6), at_least=True),
    "kernel.threads-max": KnownKey((2, 6), at_least=True),
    "kernel.randomize_va_space": KnownKey((2, 6)),
    "kernel.watchdog": KnownKey((4, 1)),
    # CFS tunables moved from /proc/sys to debugfs in 5.13 (commit 8a99b6833c88).
    "kernel.sched_min_granularity_ns": KnownKey((2, 6), until=(5, 13)),
    "kernel.sched_wakeup_granularity_ns": KnownKey((2, 6), until=(5, 13)),
    "kernel.sched_migration_cost_ns": KnownKey((3, 7), until=(5, 13)),
    "net.core.busy_poll": KnownKey((3, 11)),
    "net.core.busy_read": KnownKey((3, 11)),
    "net.core.default_qdisc": KnownKey((3, 12), shape="word"),
    "net.core.netdev_max_backlog": KnownKey((2, 6), at_least=True),
    "net.core.optmem_max": KnownKey((2, 6)),
    "net.core.rmem_default": KnownKey((2, 6)),
    "net.core.rmem_max": KnownKey((2, 6)),
    "net.core.somaxconn": KnownKey((2, 6), at_least=True),
    "net.core.wmem_default": KnownKey((2, 6)),
    "net.core.wmem_max": KnownKey((2, 6)),
    "net.ipv4.conf.all.arp_announce": KnownKey((2, 6)),
    "net.ipv4.conf.all.arp_ignore": KnownKey((2, 6)),
    "net.ipv4.conf.default.arp_announce": KnownKey((2, 6)),
    "net.ipv4.conf.default.arp_ignore": KnownKey((2, 6)),
    "net.ipv4.tcp_congestion_control": KnownKey((2, 6), shape="word"),
    "net.ipv4.tcp_fastopen": KnownKey((3, 7)),
    "net.ipv4.tcp_max_syn_backlog": KnownKey((2, 6), at_least=True),
    "net.ipv4.tcp_mtu_probing": KnownKey((2, 6)),
    "net.ipv4.tcp_rmem": KnownKey((2, 6), shape="int3"),
    "net.ipv4.tcp_slow_start_after_idle": KnownKey((2, 6)),
    "net.ipv4.tcp_tw_reuse": KnownKey((2, 6)),
    "net.ipv4.tcp_wmem": KnownKey((2, 6), shape="int3"),
    "net.netfilter.nf_conntrack_max": KnownKey((2, 6), module="nf_conntrack"),
    "vm.compact_unevictable_allowed": KnownKey((4, 1)),
    "vm.compaction_proactiveness": KnownKey((5, 9)),
    "vm.dirty_background_bytes": KnownKey((2, 6)),
    "vm.dirty_background_ratio": KnownKey((2, 6)),
    "vm.dirty_bytes": KnownKey((2, 6)),
    "vm.dirty_expire_centisecs": KnownKey((2, 6)),
    "vm.dirty_ratio": KnownKey((2, 6)),
    "vm.dirty_writeback_centisecs": KnownKey((2, 6)),
    "vm.max_map_count": KnownKey((2, 6), at_least=True),
    "vm.min_free_kbytes": KnownKey((2, 6)),
    "vm.nr_hugepages": KnownKey((2, 6)),
    "vm.overcommit_memory": KnownKey((2, 6)),
    "vm.swappiness": KnownKey((2, 6)),
    "vm.vfs_cache_pressure": KnownKey((2, 6)),
    "vm.zone_reclaim_mode": KnownKey((2, 6)),
}

SHAPES: dict[
    str, tuple[str, str]
] = {  # shape -> (whole-value ASCII pattern, what the kernel expects)
    "int": (r"-?[0-9]+", "one integer"),
    "int3": (r"[0-9]+\s+[0-9]+\s+[0-9]+", "three integers (min default max)"),
    "word": (r"[a-z][a-z0-9_]*", "one lower-case word"),
}

X86 = ("x86_64",)
ARM = ("aarch64",)

KNOWN_KERNEL_ARGS: dict[str, KnownKey] = {
    # a parameter of the acpi_power_meter module since the driver was added (2.6.31)
    "acpi_power_meter.force_cap_on": KnownKey((2, 6)),
    "amd_iommu": KnownKey((2, 6), arches=X86),
    # amdgpu-dkms's TTM module (AMD's MI300A guide gives them as boot parameters); read by kmod's
    # modprobe from /proc/cmdline when amdttm loads, ignored where it never does
    "amdttm.page_pool_size": KnownKey((2, 6), arches=X86),
    "amdttm.pages_limit": KnownKey((2, 6), arches=X86),
    "amd_pstate": KnownKey((6, 3), arches=X86),
    "default_hugepagesz": KnownKey((2, 6)),
    "hugepages": KnownKey((2, 6)),
    "hugepagesz": KnownKey((2, 6)),
    "init_on_alloc": KnownKey((5, 3)),
    "intel_idle.max_cstate": KnownKey((2, 6), arches=X86),
    "intel_iommu": KnownKey((2, 6), arches=X86),
    "intel_pstate": KnownKey((3, 9), arches=X86),
    "iommu": KnownKey((2, 6), arches=X86),
    "iommu.passthrough": KnownKey((4, 18)),
    "isolcpus": KnownKey((2, 6)),
    "mitigations": KnownKey((5, 2)),
    "modprobe.blacklist": KnownKey((2, 6)),  # read by kmod's modprobe from /proc/cmdline
    "nohz_full": KnownKey((3, 10)),
    "nosmt": KnownKey((4, 19), arches=X86),
    "numa_balancing": KnownKey((3, 8)),
    # pci=opt[,opt...] (drivers/pci/pci.c pci_setup, an early_param; realloc[=on|off] through
    # pci_realloc_get_opt(), Linux 3.0+): realloc=off is in NVIDIA's h100 tuned profile and AMD's
    # MI300X guide; listed, so a profile override needs no unlisted: true
    "pci": KnownKey((3, 0)),
    "processor.max_cstate": KnownKey((2, 6), arches=X86),
    "rcu_nocbs": KnownKey((3, 7)),
    "rd.driver.blacklist": KnownKey((2, 6)),  # read by dracut's initramfs, harmless elsewhere
    "transparent_hugepage": KnownKey((2, 6)),
}


# Kernel command-line size limits (COMMAND_LINE_SIZE in arch/*/include/asm/setup.h).
COMMAND_LINE_SIZE: dict[str, int] = {"x86_64": 2048, "aarch64": 2048}
