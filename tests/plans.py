"""Plans built by hand: every kind of setting, so renderer tests do not depend on the rules."""

from __future__ import annotations

from generator.model.setting import Note, Plan, PlanWarning, Setting

DIGESTS = {"hardware": "a" * 64, "profile": "b" * 64}


def setting(
    kind: str, key: str, value: str, rule: str = "test.rule", reason: str = "because a test says so"
) -> Setting:
    return Setting(kind, key, value, reason, rule=rule)


FULL_SETTINGS: tuple[Setting, ...] = (
    setting(
        "sysctl",
        "vm.swappiness",
        "1",
        "memory.swappiness",
        "swapping weights is slower than a restart",
    ),
    setting(
        "sysctl",
        "net.ipv4.tcp_rmem",
        "4096 87380 268435456",
        "network.socket-buffers",
        "bandwidth-delay product",
    ),
    Setting(
        "sysctl",
        "vm.max_map_count",
        "2097152",
        "the serving stack maps more shards | pipes too",
        rule="memory.max-map-count",
        override=True,
        original_value="1048576",
        original_rule="memory.max-map-count",
    ),
    setting("kernel-arg", "transparent_hugepage", "madvise", "memory.thp-mode"),
    setting("kernel-arg", "nosmt", "", "cpu.smt"),
    setting("kernel-arg", "intel_idle.max_cstate", "1", "cpu.cstates"),
    setting("limit", "* hard nofile", "1048576", "limits.nofile"),
    setting("limit", "* soft memlock", "unlimited", "limits.memlock"),
    setting("systemd-manager", "DefaultLimitNOFILE", "1048576", "limits.nofile"),
    setting("systemd-manager", "DefaultLimitMEMLOCK", "infinity", "limits.memlock"),
    setting("modprobe", "blacklist nouveau", "", "gpu.nouveau"),
    setting("modprobe", "options nouveau modeset", "0", "gpu.nouveau"),
    setting("modprobe", "options mlx5_core prof_sel", "2", "network.mlx5"),
    setting("modprobe", "options nouveau noaccel", "1", "gpu.nouveau"),
    setting("module-load", "nvidia-peermem", "", "gpu.peermem"),
    setting("module-load", "tcp_bbr", "", "network.bbr"),
    setting(
        "sysfs", "/sys/kernel/mm/transparent_hugepage/defrag", "defer+madvise", "memory.thp-defrag"
    ),
    setting(
        "sysfs",
        "/sys/devices/system/cpu/cpu*/cpufreq/scaling_governor",
        "performance",
        "cpu.governor",
    ),
    setting("sysfs", "/sys/kernel/test%x/value", "50%", "test.percent"),
    setting("udev", "nvme", "none", "storage.nvme-scheduler"),
    setting("udev", "ssd", "mq-deadline", "storage.ssd-scheduler"),
    setting("udev", "hdd", "bfq", "storage.hdd-scheduler"),
    setting("tuned", "cpu.governor", "performance", "cpu.governor"),
    setting("tuned", "main.summary", "goldtune test profile", "test.tuned"),
    setting("tuned", "vm.transparent_hugepages", "madvise", "memory.thp-mode"),
    setting("gpu", "persistence", "on", "gpu.persistence"),
    setting("gpu", "ecc", "on", "gpu.ecc"),
    setting("gpu", "compute-mode", "EXCLUSIVE_PROCESS", "gpu.compute-mode"),
    setting("gpu", "clocks", "1980", "gpu.clocks"),
    setting("gpu", "power-limit", "80%", "gpu.power-limit"),
    setting("gpu", "mig", "off", "gpu.mig"),
    setting("irq", "ens1f0np0", "1-27,57-83", "irq.pin-nics"),
    setting("irq", "ibp24s0", "28-55,84-111", "irq.pin-nics"),
    setting("pcie-acs", "gpus", "off", "boot.acs"),
    setting("pcie-acs", "nic ibp24s0", "off", "boot.acs"),
    setting("service", "goldtune-gpu.service", "enable", "gpu.boot-unit"),
    setting("service", "goldtune-irq-affinity.service", "enable", "irq.pin-nics"),
    setting("service", "goldtune-pcie-acs.service", "enable", "boot.acs"),
    setting("service", "nvidia-persistenced.service", "enable", "gpu.persistence"),
    setting("service", "goldtune-cuda-mps.service", "enable", "gpu.mps"),
    setting("service", "goldtune-metrics.timer", "enable", "hygiene.prometheus-textfile"),
    setting("service", "goldtune-node-labels.service", "enable", "hygiene.nfd-features"),
    setting("service", "goldtune-preflight.service", "enable", "boot.preflight"),
    setting("service", "irqbalance.service", "disable", "irq.irqbalance"),
    setting("service", "bluetooth.service", "mask", "hygiene.services"),
    setting(
        "unit-dropin", "containerd.service LimitMEMLOCK", "infinity", "containers.runtime-limits"
    ),
    setting(
        "unit-dropin", "containerd.service LimitNOFILE", "1048576", "containers.runtime-limits"
    ),
    setting("unit-dropin", "docker.service TasksMax", "infinity", "containers.runtime-limits"),
    setting(
        "unit-dropin",
        "nvidia-persistenced.service ExecStart",
        "/usr/bin/nvidia-persistenced --persistence-mode --verbose",
        "gpu.persistence",
    ),
    setting(
        "unit-dropin",
        "nvidia-persistenced.service WantedBy",
        "multi-user.target",
        "gpu.persistence",
    ),
    setting(
        "containerd",
        'plugins."io.containerd.grpc.v1.cri".containerd.default_runtime_name',
        '"nvidia"',
        "containers.nvidia-runtime",
    ),
    setting(
        "containerd",
        'plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia.options.SystemdCgroup',
        "true",
        "containers.nvidia-runtime",
    ),
    setting("docker", "default-runtime", '"nvidia"', "containers.nvidia-runtime"),
    setting("docker", "default-ulimits.memlock.Soft", "-1", "containers.shm"),
    setting("kubelet", "cpuManagerPolicy", "static", "kubernetes.cpu-manager"),
    setting("kubelet", "kubeReserved/memory", "1465Mi", "kubernetes.reserved"),
    setting("kubelet", "reservedMemory/0", "2489Mi", "kubernetes.memory-manager"),
    setting("nccl", "NCCL_SOCKET_IFNAME", "=ens1f0np0", "network.nccl"),
    setting("rccl", "NCCL_SOCKET_IFNAME", "=ens1f0np0", "network.nccl"),
    # resolved at boot by goldtune-nccl-resolve.service (issue 38)
    setting("nccl", "NCCL_IB_HCA", "boot/id=15b3:1021/gbps=400/count=2", "network.nccl"),
    setting("rccl", "NCCL_IB_HCA", "boot/pci=0000:18:00.0,0000:40:00.0", "network.nccl"),
    setting("service", "goldtune-nccl-resolve.service", "enable", "network.nccl"),
)


def full_plan(**changes: object) -> Plan:
    """A plan with settings of every kind, an override, notes and warnings."""
    plan = Plan(
        hardware_name="test-box",
        profile_name="inference",
        settings=FULL_SETTINGS,
        notes=(Note("no RDMA NIC: GPUDirect RDMA does not apply", rule="gpu.peermem"),),
        warnings=(PlanWarning("huge pages take 40% of RAM", check="hugepages"),),
        inputs=dict(DIGESTS),
    )
    return plan._replace(**changes)


def minimal_plan() -> Plan:
    """Only sysctl settings: every other per-kind file must be absent."""
    return Plan(
        "small-box",
        "training",
        (setting("sysctl", "vm.swappiness", "1", "memory.swappiness"),),
        inputs=dict(DIGESTS),
    )


def plan_without(*kinds: str) -> Plan:
    return full_plan(settings=tuple(s for s in FULL_SETTINGS if s.kind not in kinds))
