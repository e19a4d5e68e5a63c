"""Every shipped system x Kubernetes profile, fed to kubelet's topology admission (ported).

The pod shapes (generator/rules/kubernetes.py POD_SHAPES) are Guaranteed pods whose CPU and
memory requests fit one socket: all-gpus (every GPU of the node), half (the GPUs of one socket)
and one-gpu. The kubelet configuration the plan writes must start on the machine described
(no >8-NUMA-node refusal) and admit each shape. main's ``restricted`` for training on GPUs
that span two nodes failed this test for the all-gpus shape (TopologyAffinityError): see
``test_restricted_rejects_the_all_gpus_pod``.
"""

from __future__ import annotations

from functools import cache
from itertools import product

import pytest
from conftest import PROFILES, SYSTEMS
from kubelet_topology import (
    Container,
    Hint,
    KubeletTopology,
    Machine,
    NumaInfo,
    admits,
    mask_of,
    policy_merge,
    start_error,
)

from generator.inputs.catalog import load_catalog
from generator.inputs.facts import Facts
from generator.inputs.hardware import load_facts
from generator.inputs.profile import Profile, load_profile
from generator.plan.build import build_plan
from generator.rules.irq import online_cpus, smt_off
from generator.rules.kubernetes import reserved_memory_mi

# generator/rules/kubernetes.py POD_SHAPES, restated so the test runs against any rule version
POD_SHAPES = ("all-gpus", "half", "one-gpu")
KUBERNETES_PROFILES = [name for name in PROFILES if load_profile(name)[0].kubernetes]


@cache
def planned(system: str, profile_name: str) -> tuple[Facts, Profile, dict[str, str]]:
    facts = load_facts(system, load_catalog())[0]
    profile = load_profile(profile_name)[0]
    plan = build_plan(facts, profile)
    kubelet = {s.key: s.value for s in plan.settings if s.kind == "kubelet"}
    return facts, profile, kubelet


def gpu_nodes(facts: Facts) -> tuple[int, ...]:
    """The GPUs' nodes as the device plugin reports them; where the file does not say, spread
    evenly over the nodes with CPUs in PCI order (the HGX/DGX layout)."""
    nodes: list[int] = []
    for group in facts.gpus:
        if group.numa_nodes is not None:
            nodes += group.numa_nodes
        else:
            nodes += [i * facts.numa_nodes // group.count for i in range(group.count)]
    return tuple(nodes)


def kubelet_reserved_cpus(
    facts: Facts, profile: Profile, kubelet: dict[str, str]
) -> frozenset[int]:
    """The CPUs kubelet's static policy reserves for kubeReserved + systemReserved cpu (their
    sum rounded up, policy_static.go NewStaticPolicy: takeByTopology), whole cores from the
    low-numbered ones, in the model's numbering (Facts.cpus_of_node)."""
    milli = sum(
        int(kubelet[f"{part}/cpu"].removesuffix("m")) for part in ("kubeReserved", "systemReserved")
    )
    count = -(-milli // 1000)
    threads = 1 if smt_off(facts, profile) else facts.cpu.threads_per_core
    cores = facts.cpu.physical_cores
    return frozenset(
        sorted(c + t * cores for c in range(-(-count // threads)) for t in range(threads))[:count]
    )


def machine_of(facts: Facts, profile: Profile, kubelet: dict[str, str]) -> Machine:
    reserved = kubelet_reserved_cpus(facts, profile, kubelet)
    per_node_gib = (
        facts.memory_gib - reserved_memory_mi(facts, profile) // 1024
    ) // facts.numa_nodes
    return Machine(
        cpus_of_node={
            node: frozenset(online_cpus(facts, profile, facts.cpus_of_node(node)))
            for node in range(facts.numa_nodes)
        },
        all_nodes=tuple(range(facts.all_numa_nodes)),
        gpu_nodes=gpu_nodes(facts),
        memory_gib_of_node=dict.fromkeys(range(facts.numa_nodes), per_node_gib),
        reserved_cpus=reserved,
    )


def pod_of(shape: str, facts: Facts, machine: Machine) -> list[Container]:
    """One trainer container of the shape: CPUs half a node's free ones, a quarter of a node's
    memory (both fit one socket), and the shape's GPUs."""
    gpus = {
        "all-gpus": facts.gpu_count,
        "half": max(1, facts.gpu_count // facts.cpu.sockets),
        "one-gpu": 1,
    }[shape]
    free = min(len(cpus - machine.reserved_cpus) for cpus in machine.cpus_of_node.values())
    memory = min(machine.memory_gib_of_node.values()) // 4
    return [Container(max(1, free // 2), gpus, memory)]


# What each Kubernetes profile admits, per shape, on every shipped system (the rule's
# docstring and EXPLAIN.md say the same): every shape, nothing rejected.
EXPECTED = {"training-k8s": dict.fromkeys(POD_SHAPES, True)}


@pytest.mark.parametrize(
    ("system", "profile_name", "shape"), list(product(SYSTEMS, KUBERNETES_PROFILES, POD_SHAPES))
)
def test_kubelet_starts_and_admits_the_pod_shape(system: str, profile_name: str, shape: str):
    facts, profile, kubelet = planned(system, profile_name)
    config = KubeletTopology.from_kubelet(kubelet)
    machine = machine_of(facts, profile, kubelet)
    assert start_error(config, machine) is None, (system, config)
    pod = pod_of(shape, facts, machine)
    assert admits(config, machine, pod) is EXPECTED[profile_name][shape], (system, config, pod)


def test_every_kubernetes_profile_states_its_shapes() -> None:
    assert set(KUBERNETES_PROFILES) == set(EXPECTED)


def dgx_h100() -> tuple[Facts, Machine]:
    facts, profile, kubelet = planned("dgx-h100", "training-k8s")
    return facts, machine_of(facts, profile, kubelet)


def test_restricted_rejects_the_all_gpus_pod() -> None:
    """main's choice: the GPUs' only preferred mask is {0,1}, the CPUs' and memory's are {0} and
    {1}; no permutation has equal masks, so the best hint is not preferred."""
    facts, machine = dgx_h100()
    restricted = KubeletTopology("restricted", "pod", {}, memory_static=True)
    verdicts = {
        shape: admits(restricted, machine, pod_of(shape, facts, machine)) for shape in POD_SHAPES
    }
    assert verdicts == {"all-gpus": False, "half": True, "one-gpu": True}
    single = KubeletTopology("single-numa-node", "pod", {}, memory_static=True)
    verdicts = {
        shape: admits(single, machine, pod_of(shape, facts, machine)) for shape in POD_SHAPES
    }
    assert verdicts == {"all-gpus": False, "half": True, "one-gpu": True}


def test_kubelet_refuses_more_than_eight_nodes_counting_cpu_less_ones() -> None:
    """A GB200 tray: 2 nodes with CPUs, 34 in all. Any policy but none stops kubelet unless
    max-allowable-numa-nodes allows 34 (NewManager); the plan sets no policy there."""
    facts, profile, kubelet = planned("gb200-nvl72-tray", "training-k8s")
    machine = machine_of(facts, profile, kubelet)
    assert len(machine.all_nodes) == 34
    assert "topologyManagerPolicy" not in kubelet and "memoryManagerPolicy" not in kubelet
    assert start_error(KubeletTopology("restricted", "pod"), machine) is not None
    allowed = KubeletTopology("best-effort", "pod", {"max-allowable-numa-nodes": "34"})
    assert start_error(allowed, machine) is None


def test_the_distinct_merge_equals_kubelets_permutation_walk() -> None:
    """merged_hints (distinct merged hints) picks the hint the literal walk over every
    permutation picks, for every policy and a spread of two- and four-node hint lists."""
    numa = NumaInfo((0, 1, 2, 3))
    masks = [mask_of(nodes) for nodes in ([0], [1], [2], [0, 1], [2, 3], [0, 1, 2, 3], [1, 2])]
    lists = [
        [Hint(mask, index % 2 == 0) for index, mask in enumerate(masks[a:b])]
        for a, b in ((0, 3), (1, 5), (3, 7), (0, 7), (2, 4))
    ]
    lists += [[Hint(None, True)], [Hint(None, False)]]
    for policy in ("best-effort", "restricted", "single-numa-node"):
        for first, second, third in product(lists, repeat=3):
            providers = [{"a": first}, {"b": second}, {"c": third}]
            fast = policy_merge(policy, numa, providers)
            assert fast == policy_merge(policy, numa, providers, literal=True), providers
