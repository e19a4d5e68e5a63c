"""The rule registry: every rule, listed once, in the order the plan runs them.

Adding a rule = one function in its area module + one line here.
"""

from __future__ import annotations

from generator.rules import boot, cpu, gpu, hygiene, irq, limits, memory, network, storage
from generator.rules.base import Rule

REGISTRY: tuple[Rule, ...] = (
    memory.swappiness,
    memory.thp_mode,
    memory.thp_defrag,
    memory.max_map_count,
    memory.overcommit,
    memory.numa_balancing,
    memory.zone_reclaim,
    memory.dirty_bytes,
    memory.hugepages_1g,
    cpu.governor,
    cpu.governor_services,
    cpu.energy_preference,
    cpu.cstates,
    cpu.smt,
    gpu.nouveau,
    gpu.persistence,
    gpu.boot_unit,
    gpu.ecc,
    gpu.compute_mode,
    gpu.clocks,
    gpu.power_limit,
    gpu.mig,
    gpu.fabric_manager,
    gpu.nvlink_subnet_manager,
    gpu.imex,
    gpu.dcgm,
    gpu.peermem,
    gpu.vendor_profiles,
    boot.iommu_passthrough,
    boot.init_on_alloc,
    boot.acs,
    boot.acpi_power_meter,
    network.rdma_paths,
    network.socket_buffers,
    network.backlog,
    network.somaxconn,
    network.multirail_arp,
    network.bbr,
    irq.pin_nics,
    irq.irqbalance,
    limits.nofile,
    limits.memlock,
    limits.aio,
    limits.inotify,
    storage.nvme_scheduler,
    storage.ssd_scheduler,
    storage.hdd_scheduler,
    hygiene.modules,
    hygiene.services,
)

RULES_BY_ID: dict[str, Rule] = {r.id: r for r in REGISTRY}
