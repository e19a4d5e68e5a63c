"""kubernetes.*: kubelet's managers, reservations, eviction; consistent with IRQ pinning, NUMA."""

from __future__ import annotations

import pytest

from generator.model.containerd import cri_runtime_table
from generator.model.setting import Setting
from generator.rules import containers, kubernetes

from .helpers import (
    DUAL_XEON,
    GRACE,
    H100X8,
    Case,
    case_ids,
    check_case,
    facts,
    notes_of,
    profile,
    rdma_compute,
    settings_of,
)

K8S = {"containers": "containerd", "kubernetes": True}
H100_SPLIT = {**H100X8, "numa_nodes": [0, 0, 0, 0, 1, 1, 1, 1]}
H100_NODE0 = {"model": "H100-SXM5-80GB", "count": 2, "numa_nodes": [0, 0]}
DGX = {**DUAL_XEON, "memory_gib": 2048, "gpus": [H100_SPLIT]}  # 2 x 56 x 2 = 224 CPUs


def kubelet(*pairs: tuple[str, str]) -> set[tuple[str, str, str]]:
    return {("kubelet", key, value) for key, value in pairs}


EVICTION = kubelet(
    ("evictionHard/memory.available", "1024Mi"),
    ("evictionHard/nodefs.available", "10%"),
    ("evictionHard/nodefs.inodesFree", "5%"),
    ("evictionHard/imagefs.available", "15%"),
)
SYSTEMD = kubelet(("cgroupDriver", "systemd"))
# 64 GiB: 1 + 0.8 + 0.8 + 48 x 0.06 = 5.48 GiB = 5612Mi; 2 TiB: + 112 x 0.06 + 1920 x 0.02 GiB
RESERVED_64G = kubelet(
    ("maxPods", "110"),
    ("kubeReserved/memory", "1465Mi"),
    ("kubeReserved/ephemeral-storage", "1Gi"),
    ("systemReserved/memory", "5612Mi"),
)
RESERVED_2T = kubelet(
    ("maxPods", "110"),
    ("kubeReserved/memory", "1465Mi"),
    ("kubeReserved/ephemeral-storage", "1Gi"),
    ("systemReserved/memory", "48865Mi"),
)

CASES: tuple[Case, ...] = (
    Case("cpu-manager-off", kubernetes.cpu_manager, set(), knobs={"containers": "containerd"}),
    Case(
        "cpu-manager-small",
        kubernetes.cpu_manager,
        kubelet(
            ("cpuManagerPolicy", "static"),
            ("kubeReserved/cpu", "1000m"),
            ("systemReserved/cpu", "1000m"),
        ),
        knobs=K8S,
    ),
    Case(
        "cpu-manager-dgx",
        kubernetes.cpu_manager,
        kubelet(
            ("cpuManagerPolicy", "static"),
            ("kubeReserved/cpu", "1000m"),
            ("systemReserved/cpu", "1000m"),
        ),
        hw=DGX,
        intent="training",
        knobs=K8S,
    ),
    Case(
        "cpu-manager-grace-no-smt",
        kubernetes.cpu_manager,
        kubelet(
            ("cpuManagerPolicy", "static"),
            ("kubeReserved/cpu", "500m"),
            ("systemReserved/cpu", "500m"),
        ),
        hw={
            "cpu": {
                "model": "Grace",
                "vendor": "nvidia",
                "sockets": 1,
                "cores_per_socket": 72,
                "threads_per_core": 1,
            }
        },
        knobs=K8S,
    ),
    Case(
        # nosmt keeps CPU 0's sibling offline: one CPU is one core (a list 0,112 once made
        # kubelet exit: "reserved-cpus ... is not a subset of online-cpus")
        "cpu-manager-nosmt",
        kubernetes.cpu_manager,
        kubelet(
            ("cpuManagerPolicy", "static"),
            ("kubeReserved/cpu", "500m"),
            ("systemReserved/cpu", "500m"),
        ),
        hw=DGX,
        knobs={**K8S, "smt": "disable"},
    ),
    Case(
        # threads_per_core unknown: no list for a guessed machine, the static policy picks
        "cpu-manager-threads-unknown",
        kubernetes.cpu_manager,
        kubelet(
            ("cpuManagerPolicy", "static"),
            ("kubeReserved/cpu", "350m"),
            ("systemReserved/cpu", "350m"),
        ),
        hw={"cpu": {"vendor": "intel", "sockets": 2, "cores_per_socket": 56}},
        knobs=K8S,
        tweak=lambda machine: machine._replace(
            cpu=machine.cpu._replace(threads_per_core=1, threads_known=False)
        ),
    ),
    Case(
        "cpu-manager-pinned-nics-note",
        kubernetes.cpu_manager,
        kubelet(
            ("cpuManagerPolicy", "static"),
            ("kubeReserved/cpu", "1000m"),
            ("systemReserved/cpu", "1000m"),
        ),
        hw={**DGX, "nics": [rdma_compute("ib0", numa=0)]},
        intent="training",
        knobs=K8S,
        note="NIC interrupts are pinned",
    ),
    Case("cgroup-driver", kubernetes.cgroup_driver, SYSTEMD, knobs=K8S),
    Case(
        "cgroup-driver-docker-note",
        kubernetes.cgroup_driver,
        SYSTEMD,
        knobs={"containers": "docker", "kubernetes": True},
        note="cri-dockerd",
    ),
    Case("cgroup-driver-off", kubernetes.cgroup_driver, set()),
    Case("topology-one-node", kubernetes.topology_manager, set(), knobs=K8S, note="one NUMA node"),
    Case(
        # GH200: 9 nodes in all, the 8 of GPU memory without CPUs: nothing to align, and no
        # policy that would trip kubelet's 8-node limit
        "topology-one-cpu-node-and-gpu-memory-nodes",
        kubernetes.topology_manager,
        set(),
        hw={**GRACE, "memory_only_numa_nodes": 8},
        knobs=K8S,
        note="one NUMA node with CPUs (and 8 without CPUs",
    ),
    Case(
        # main's restricted rejected the all-GPUs pod (tests/test_kubelet_topology.py)
        "topology-training-split-gpus",
        kubernetes.topology_manager,
        kubelet(("topologyManagerPolicy", "best-effort"), ("topologyManagerScope", "pod")),
        hw=DGX,
        intent="training",
        knobs=K8S,
    ),
    Case(
        "topology-training-gpus-on-one-node",
        kubernetes.topology_manager,
        kubelet(("topologyManagerPolicy", "single-numa-node"), ("topologyManagerScope", "pod")),
        hw={**DUAL_XEON, "gpus": [H100_NODE0]},
        intent="training",
        knobs=K8S,
    ),
    Case(
        "topology-training-unknown-gpu-nodes",
        kubernetes.topology_manager,
        kubelet(("topologyManagerPolicy", "best-effort"), ("topologyManagerScope", "pod")),
        hw={**DUAL_XEON, "gpus": [H100X8]},
        intent="training",
        knobs=K8S,
    ),
    Case(
        "topology-inference",
        kubernetes.topology_manager,
        kubelet(("topologyManagerPolicy", "best-effort")),
        hw=DGX,
        knobs=K8S,
    ),
    Case(
        # kubelet counts CPU-less nodes (34 on a GB200 tray) and refuses above 8: main set
        # restricted + Static here and kubelet did not start (issue 26)
        "topology-cpu-less-nodes-above-kubelets-limit",
        kubernetes.topology_manager,
        set(),
        hw={**DGX, "memory_only_numa_nodes": 32},
        intent="training",
        knobs=K8S,
        note="34 NUMA nodes (2 with CPUs, 32 without CPUs): no topology or memory manager",
    ),
    Case(
        "topology-cpu-less-nodes-within-the-limit",
        kubernetes.topology_manager,
        kubelet(("topologyManagerPolicy", "best-effort"), ("topologyManagerScope", "pod")),
        hw={**DGX, "memory_only_numa_nodes": 6},
        intent="training",
        knobs=K8S,
    ),
    Case(
        "topology-cpu-less-nodes-unknown",
        kubernetes.topology_manager,
        kubelet(("topologyManagerPolicy", "best-effort")),
        hw={**DUAL_XEON},
        knobs=K8S,
        note="does not say how many NUMA nodes have no CPUs",
    ),
    Case(
        "memory-manager-above-kubelets-limit",
        kubernetes.memory_manager,
        set(),
        hw={**DGX, "memory_only_numa_nodes": 32},
        intent="training",
        knobs=K8S,
    ),
    Case("memory-manager-one-node", kubernetes.memory_manager, set(), knobs=K8S),
    Case(
        "memory-manager-dgx",
        kubernetes.memory_manager,
        kubelet(
            ("memoryManagerPolicy", "Static"),
            ("reservedMemory/0", "25677Mi"),
            ("reservedMemory/1", "25677Mi"),
        ),
        hw=DGX,
        intent="training",
        knobs=K8S,
    ),
    Case("reserved-64g", kubernetes.reserved, RESERVED_64G, knobs=K8S),
    Case("reserved-2t", kubernetes.reserved, RESERVED_2T, hw=DGX, intent="training", knobs=K8S),
    Case("reserved-off", kubernetes.reserved, set()),
    Case("eviction", kubernetes.eviction, EVICTION, knobs=K8S),
    Case("eviction-off", kubernetes.eviction, set(), knobs={"containers": "docker"}),
)


@pytest.mark.parametrize("case", CASES, ids=case_ids(CASES))
def test_kubernetes_rule(case: Case) -> None:
    check_case(case)


@pytest.mark.parametrize(("cpus", "milli"), [(1, 60), (2, 70), (4, 80), (8, 90), (224, 630)])
def test_eks_cpu_tiers(cpus: int, milli: float) -> None:
    assert kubernetes.reserved_cpu_milli(cpus) == milli


def test_eks_cpu_tiers_are_each_cpus_rate_summed() -> None:
    """Per tier, as the rule computes it, is per CPU, as EKS states it, for every count."""

    def rate(cpu: int) -> float:
        return next(milli for start, milli in kubernetes.CPU_TIERS_MILLI if cpu >= start)

    for cpus in [*range(300), 1024, 2048]:
        assert kubernetes.reserved_cpu_milli(cpus) == sum(map(rate, range(cpus))), cpus


def test_reserved_cpus_grow_by_whole_cores_when_the_tiers_need_more() -> None:
    big = facts(cpu={"sockets": 8, "cores_per_socket": 128, "threads_per_core": 2})  # 2048 CPUs
    # 2 x 5190m = 10.4 CPUs -> 11, rounded up to six whole cores with their siblings
    assert kubernetes.reserved_cpu_count(big, profile("training", **K8S)) == 12
    values = settings_of(kubernetes.cpu_manager.apply(big, profile("training", **K8S)), "kubelet")
    assert values["kubeReserved/cpu"] == values["systemReserved/cpu"] == "6000m"


@pytest.mark.parametrize("knobs", [{}, {"smt": "disable"}], ids=["smt", "nosmt"])
def test_no_kubelet_field_names_a_cpu_the_file_cannot_know(knobs: dict[str, str]) -> None:
    """Which CPUs are a core or a node is the firmware's numbering: no CPU list in the kubelet
    file, only counts kubelet turns into CPUs of the booted topology (main wrote
    reservedSystemCPUs 0,112 from Linux's usual order, a half core where siblings are numbered
    next to each other)."""
    for hw in (DGX, {**DUAL_XEON, "nics": [rdma_compute("ib0", numa=0)]}, {"cpu": GRACE["cpu"]}):
        values = plan_of(hw, "training", **knobs)
        assert "reservedSystemCPUs" not in values
        count = int(values["kubeReserved/cpu"].removesuffix("m")) * 2 // 1000
        threads = 1 if knobs else facts(**hw).cpu.threads_per_core
        assert count % threads == 0 and count >= threads, (hw, values)


def plan_of(machine_hw: dict[str, object], intent: str, **more: str) -> dict[str, str]:
    machine, knobs = facts(**machine_hw), profile(intent, **K8S, **more)
    found: dict[str, str] = {}
    for rule in (
        kubernetes.cpu_manager,
        kubernetes.memory_manager,
        kubernetes.reserved,
        kubernetes.eviction,
        kubernetes.cgroup_driver,
    ):
        found |= settings_of(rule.apply(machine, knobs), "kubelet")
    return found


@pytest.mark.parametrize(
    "hw", [DGX, {**DUAL_XEON, "numa_nodes": 4, "memory_gib": 1000}], ids=["dgx", "four-nodes"]
)
def test_reserved_memory_adds_up_to_what_kubelet_requires(hw: dict[str, object]) -> None:
    """kubelet refuses to start unless the nodes' reservedMemory is kube + system + eviction."""
    values = plan_of(hw, "training")
    mebibytes = {
        key: int(value.removesuffix("Mi")) for key, value in values.items() if value.endswith("Mi")
    }
    per_node = [value for key, value in mebibytes.items() if key.startswith("reservedMemory/")]
    assert len(per_node) == facts(**hw).numa_nodes
    assert sum(per_node) == (
        mebibytes["kubeReserved/memory"]
        + mebibytes["systemReserved/memory"]
        + mebibytes["evictionHard/memory.available"]
    )


def test_a_max_pods_knob_feeds_the_kube_reserved_memory_it_sizes() -> None:
    """The EKS AMI's 11Mi x maxPods + 255Mi with the pods kubelet is told to admit: 250 pods,
    3005Mi, and the same 250 in maxPods; the memory manager's sum follows. On main there was no
    way to change maxPods but an override, which left the reservation at 110 pods (issue 26)."""
    machine, knobs = facts(**DGX), profile("training", **K8S, max_pods=250)
    values = settings_of(kubernetes.reserved.apply(machine, knobs), "kubelet")
    assert (values["maxPods"], values["kubeReserved/memory"]) == ("250", "3005Mi")
    nodes = settings_of(kubernetes.memory_manager.apply(machine, knobs), "kubelet")
    total = sum(int(v.removesuffix("Mi")) for k, v in nodes.items() if k.startswith("reservedMem"))
    system = int(values["systemReserved/memory"].removesuffix("Mi"))
    assert total == 3005 + system + kubernetes.EVICTION_MEMORY_MI


def test_the_cgroup_driver_agrees_with_the_runtime() -> None:
    machine, knobs = facts(gpus=[H100X8]), profile("training", **K8S)
    runtime = settings_of(containers.nvidia_runtime.apply(machine, knobs), "containerd")
    driver = settings_of(kubernetes.cgroup_driver.apply(machine, knobs), "kubelet")["cgroupDriver"]
    table = cri_runtime_table(None)
    systemd_cgroup = runtime[f"{table}.runtimes.nvidia.options.SystemdCgroup"]
    assert (systemd_cgroup == "true") == (driver == "systemd")


def test_every_kubelet_setting_has_a_reason_naming_its_source_where_it_is_sized() -> None:
    output = kubernetes.reserved.apply(facts(**DGX), profile("training", **K8S))
    reasons = " ".join(s.reason for s in output if isinstance(s, Setting))
    assert "EKS" in reasons and "OpenShift" in reasons


def test_an_isolcpus_override_gets_a_note_that_kubelet_does_not_read_it() -> None:
    """kubelet reserves from the low-numbered cores without reading isolcpus: said, not
    guessed around with CPU numbers the file cannot know."""
    knobs = profile(
        "training",
        overrides=[
            {
                "kind": "kernel-arg",
                "key": "isolcpus",
                "value": "domain,1-3",
                "reason": "real-time cores",
            }
        ],
        **K8S,
    )
    output = list(kubernetes.cpu_manager.apply(facts(**DGX), knobs))
    assert any("without reading isolcpus" in text for text in notes_of(output))
    plain = kubernetes.cpu_manager.apply(facts(**DGX), profile("training", **K8S))
    assert not any("isolcpus" in text for text in notes_of(plain))
