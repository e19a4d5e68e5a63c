"""The resolved, immutable facts that rules read: hardware plus catalog knowledge."""

# No `from __future__ import annotations`: a NamedTuple turns each string annotation into
# a compiled ForwardRef, ~0.15 ms a record at import (bench/bench.py's cold gen).
from collections.abc import Collection
from typing import TYPE_CHECKING, NamedTuple

from generator.inputs.catalog import CpuModel, GpuModel, NicModel
from generator.model.cpulist import compress_cpus
from generator.model.vendors import GpuVendor

if TYPE_CHECKING:
    from generator.inputs.distro import Distro


class CpuFacts(NamedTuple):
    model: CpuModel | None
    vendor: str  # intel | amd | nvidia | ampere | other
    arch: str  # x86_64 | aarch64: the instruction set, which says nothing of the platform
    sockets: int
    cores_per_socket: int
    threads_per_core: int  # 1 when not known: see threads_known
    # False when neither the hardware file nor the CPU model says: threads_per_core is then a
    # placeholder 1, and rules that depend on SMT decide at boot or say they cannot
    threads_known: bool = True
    # the physical cores of each NUMA node of a socket where they differ (SNC3 of 128 cores: 43,
    # 43, 42); None: the nodes split the cores evenly
    cores_per_node: tuple[int, ...] | None = None

    @property
    def is_grace(self) -> bool:
        """NVIDIA Grace (GH200, GB200): NVIDIA's only CPU. Not every aarch64 CPU is Grace."""
        return self.vendor == "nvidia"

    @property
    def logical_cpus(self) -> int:
        return self.sockets * self.cores_per_socket * self.threads_per_core

    @property
    def physical_cores(self) -> int:
        return self.sockets * self.cores_per_socket

    @property
    def housekeeping_cpus(self) -> frozenset[int]:
        """CPU 0 and its SMT siblings: the first physical core keeps the kernel's housekeeping
        (timers, RCU, unbound work); Linux numbers a core's siblings one physical-core count
        apart."""
        return frozenset(thread * self.physical_cores for thread in range(self.threads_per_core))

    @property
    def cpufreq_driver(self) -> str | None:
        return self.model.cpufreq_driver if self.model else None

    @property
    def idle_driver(self) -> str | None:
        return self.model.idle_driver if self.model else None


class GpuGroup(NamedTuple):
    model: GpuModel
    # Shadows tuple.count (a method) on purpose: "count" is what the hardware format calls it.
    count: int  # type: ignore[assignment]
    numa_nodes: tuple[int, ...] | None
    # PCIe cards joined by an NVLink bridge: pairs of positions in the group (PCI order)
    nvlink_bridges: tuple[tuple[int, int], ...] = ()


class NicFacts(NamedTuple):
    name: str
    model: NicModel | None
    speed_gbps: int | None
    numa_node: int | None
    role: str  # compute | storage | frontend | management
    rdma: bool
    rdma_device: str | None = None  # mlx5_0; None: not given
    # True: name and rdma_device are stated as the host's own (gen detect, or the user), not
    # placeholders; only such names may be pinned where a wrong one breaks the consumer
    names_real: bool = False
    card: str | None = None  # the physical card, a name its ports share; None: not given
    # the PCI function (0000:3b:00.0): the port's identity whatever the booted host names it
    pci_address: str | None = None
    # speed_gbps as the file states it; False: the model's maximum stood in for it, which the
    # port may not run at (a ConnectX-7 at NDR200), so nothing is matched by it on the node
    speed_stated: bool = False

    @property
    def carries_tcp(self) -> bool:
        """Storage and front-end NICs carry kernel TCP; compute fabrics with RDMA bypass it."""
        return self.role in {"storage", "frontend"} or (self.role == "compute" and not self.rdma)


class DiskFacts(NamedTuple):
    name: str
    kind: str  # nvme | ssd | hdd
    role: str  # os | data | cache


class OsFacts(NamedTuple):
    # None: not stated, and the named distribution (if any) has no one version; rules assume a
    # current LTS kernel
    kernel: tuple[int, int] | None
    page_size_kib: int
    # None: no distribution named; the bundle stays portable and uses no distribution's defaults
    distro: "Distro | None" = None  # quoted: the tables are read on first use only
    kernel_release: str | None = None  # os.kernel as written (5.14.0-427.el9), for backports
    # os.kernel unstated: the build the named distribution's table says a plan is made for
    # (rhel-8: 8.10's 4.18.0-553.el8_10), against which its backports are judged
    assumed_release: str | None = None
    # os.driver: host | nvidia-gpu-operator | amd-gpu-operator | distribution-precompiled
    driver: str = "host"

    @property
    def operator_driver(self) -> bool:
        """The GPU Operator's driver container loads the driver after kubelet starts, and owns
        what comes with it (its persistence daemon, peermem, MIG or partitions)."""
        return self.driver in ("nvidia-gpu-operator", "amd-gpu-operator")


# The facts that are about GPUs: a rule that reads one declares the GPU vendors it applies to
# (tests/test_registry.py finds the readers).
GPU_FACTS = frozenset(
    {"gpus", "gpu_count", "has_gpus", "gpu_vendors", "has_gpus_of", "has_nvidia_gpus", "nvswitch"}
)


class Facts(NamedTuple):
    name: str
    cpu: CpuFacts
    memory_gib: int
    numa_nodes: int  # NUMA nodes WITH CPUs: what CPU placement and IRQ lists are made of
    gpus: tuple[GpuGroup, ...]
    nvswitch: bool
    nics: tuple[NicFacts, ...]
    disks: tuple[DiskFacts, ...]
    os: OsFacts
    # NUMA nodes WITHOUT CPUs (Grace GPU memory, CXL); None: neither the hardware file nor
    # the catalog says (cpu_less_numa_nodes)
    memory_only_numa_nodes: int | None = None
    # how memory_only_numa_nodes was inferred from the catalog where the file omits it
    # ("4 GB200 x 8"); "": stated in the file, or not known
    memory_only_inferred: str = ""
    # the GPUs are superchips, whose memory Linux shows as NUMA nodes without CPUs: True also
    # where how many is not known (memory_only_numa_nodes None)
    memory_only_expected: bool = False

    @property
    def gpu_count(self) -> int:
        return sum(group.count for group in self.gpus)

    @property
    def has_gpus(self) -> bool:
        """GPUs of any vendor: a rule sees only those of the vendors it declares (seen_by)."""
        return self.gpu_count > 0

    @property
    def gpu_vendors(self) -> frozenset[str]:
        """The vendors of the GPUs here (rows of generator/model/vendors.py)."""
        return frozenset(group.model.vendor for group in self.gpus)

    def has_gpus_of(self, vendor: str) -> bool:
        return vendor in self.gpu_vendors

    @property
    def has_nvidia_gpus(self) -> bool:
        return self.has_gpus_of(GpuVendor.NVIDIA)

    def seen_by(self, vendors: Collection[str]) -> "Facts":
        """These facts with only the GPUs of ``vendors``: what a rule declaring them is given.

        A machine whose GPUs are all of other vendors then looks, to that rule, like one without
        GPUs (no NVSwitch either: it connects GPUs). The same object when nothing is hidden.
        """
        kept = tuple(group for group in self.gpus if group.model.vendor in vendors)
        if len(kept) == len(self.gpus):
            return self
        return self._replace(gpus=kept, nvswitch=self.nvswitch and bool(kept))

    @property
    def rdma_nics(self) -> tuple[NicFacts, ...]:
        return tuple(nic for nic in self.nics if nic.rdma)

    @property
    def tcp_nics(self) -> tuple[NicFacts, ...]:
        return tuple(nic for nic in self.nics if nic.carries_tcp)

    @property
    def is_numa(self) -> bool:
        """More than one NUMA node WITH CPUs: CPU placement can cross a socket (or SNC/NPS
        domain). Nodes without CPUs never count here: no process runs on them."""
        return self.numa_nodes > 1

    @property
    def all_numa_nodes(self) -> int:
        """Every NUMA node Linux shows, with CPUs or not (as far as the file says): the count
        kubelet's topology manager limits (cadvisor GetNodesInfo lists memory-only nodes)."""
        return self.numa_nodes + (self.memory_only_numa_nodes or 0)

    def cpus_of_node(self, node: int) -> list[int]:
        """Logical CPU numbers of one NUMA node, in the kernel's usual enumeration.

        Linux numbers the first hardware thread of every core first (socket by socket, node by
        node), then the SMT siblings in the same order: on 2 x 56 cores x 2 threads node 0 holds
        0-55 and 112-167.
        """
        sizes = self.cpu.cores_per_node
        if sizes is None:
            sizes = (self.cpu.physical_cores // self.numa_nodes,)
        per_node = sizes * (self.numa_nodes // len(sizes))  # each socket's nodes, in order
        first, cores_per_node = sum(per_node[:node]), per_node[node]
        cpus: list[int] = []
        for thread in range(self.cpu.threads_per_core):
            offset = thread * self.cpu.physical_cores
            cpus.extend(range(offset + first, offset + first + cores_per_node))
        return cpus

    def cpulist_of_node(self, node: int) -> str:
        return compress_cpus(self.cpus_of_node(node))
