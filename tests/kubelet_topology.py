"""kubelet's topology-manager admission, ported to Python for tests (as the NCCL parser was).

What a kubelet configuration admits is decided by Go code, not by the policy names' prose; these
functions follow the kubernetes/kubernetes sources named in each docstring, line by line where
the result depends on it (read from kubernetes master, 2025-2026; KEP-3545 HintMerger form):

* ``pkg/kubelet/cm/topologymanager/topology_manager.go`` ``NewManager``: the start-up refusal of
  machines with more NUMA nodes than ``max-allowable-numa-nodes`` (default 8); ``numa_info.go``
  ``NewNUMAInfo`` counts every node cadvisor lists, and cadvisor ``utils/sysinfo/sysinfo.go``
  ``GetNodesInfo`` lists nodes without CPUs too ("Found node without any CPU" is a warning, the
  node is still appended).
* ``policy.go``: ``filterProvidersHints``, ``mergePermutation`` (preferred only when every hint is
  preferred AND every affinity is equal), ``iterateAllProviderTopologyHints``, ``HintMerger``
  (``compare``, ``Merge``, ``maxOfMinAffinityCounts``); ``numa_info.go`` ``Narrowest``/``Closest``;
  ``bitmask/bitmask.go`` ``IsNarrowerThan``/``IsLessThan``/``IterateBitMasks``.
* ``policy_best_effort.go`` (always admits), ``policy_restricted.go`` (admits a preferred best
  hint), ``policy_single_numa_node.go`` (``filterSingleNumaHints``, then admits a preferred best
  hint), ``policy_none.go`` / ``scope_none.go`` (no hint provider is asked).
* ``scope_pod.go`` (one merge over the pod's summed requests) and ``scope_container.go`` (one
  merge per container, every one must admit).
* Hint providers: ``cpumanager/policy_static.go`` ``generateCPUTopologyHints`` (masks over the
  NUMA nodes that HAVE CPUs, ``CPUDetails.NUMANodes()``), ``devicemanager/topology_hints.go``
  ``generateDeviceTopologyHints`` (masks over EVERY node), ``memorymanager/policy_static.go``
  ``calculateHints`` (masks over every node of the machine state). Each marks preferred the hints
  with the fewest nodes that could hold the request on an empty machine (minAffinitySize).

A bitmask is an int, bit n for NUMA node n, as ``bitmask.bitMask`` is a uint64: ``IsLessThan`` is
``<`` on the integers. ``None`` is a nil NUMANodeAffinity ("any node").

One liberty, and why it changes no result: ``Merge`` folds ``compare`` over every permutation of
the providers' hints (the product of their lengths: 255^3 on an 8-node machine). ``merged_hints``
computes the same merged hints provider by provider and keeps each distinct one once; ``compare``
returns ``current`` for an equal mask and otherwise orders masks totally (count, then distance or
integer value), so neither repeats nor order change the best hint. ``test_kubelet_topology``
checks this against the literal permutation walk.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import combinations, product
from typing import NamedTuple

DEFAULT_MAX_ALLOWABLE_NUMA_NODES = 8  # topology_manager.go defaultMaxAllowableNUMANodes


class Hint(NamedTuple):
    """topologymanager.TopologyHint: NUMANodeAffinity (None = nil) and Preferred."""

    affinity: int | None
    preferred: bool


def mask_of(nodes: Sequence[int]) -> int:
    mask = 0
    for node in nodes:
        mask |= 1 << node
    return mask


def count(mask: int) -> int:
    return bin(mask).count("1")


def bits(mask: int) -> list[int]:
    return [node for node in range(mask.bit_length()) if mask >> node & 1]


def iterate_bit_masks(nodes: Sequence[int]) -> Iterator[int]:
    """bitmask.IterateBitMasks: every non-empty subset, by size, in the nodes' order."""
    for size in range(1, len(nodes) + 1):
        for chosen in combinations(nodes, size):
            yield mask_of(chosen)


def is_narrower_than(mask: int, other: int) -> bool:
    """bitMask.IsNarrowerThan: fewer bits set; on a tie, more low-numbered bits (IsLessThan)."""
    if count(mask) == count(other):
        return mask < other
    return count(mask) < count(other)


# ---- numa_info.go ----------------------------------------------------------------------------


@dataclass(frozen=True)
class NumaInfo:
    nodes: tuple[int, ...]
    distances: Mapping[int, Sequence[int]] = field(default_factory=dict)

    def default_affinity(self) -> int:
        return mask_of(self.nodes)

    def narrowest(self, first: int, second: int) -> int:
        return first if is_narrower_than(first, second) else second

    def average_distance(self, mask: int) -> float:
        """NUMADistances.CalculateAverageFor."""
        members = bits(mask)
        pairs = [self.distances[a][b] for a in members for b in members]
        return sum(pairs) / len(pairs) if pairs else 0.0

    def closest(self, first: int, second: int) -> int:
        if count(first) != count(second):
            return self.narrowest(first, second)
        first_distance, second_distance = (
            self.average_distance(first),
            self.average_distance(second),
        )
        if first_distance == second_distance:
            return first if first < second else second
        return first if first_distance < second_distance else second


# ---- policy.go -------------------------------------------------------------------------------

ProviderHints = Mapping[str, Sequence[Hint] | None]  # one provider: resource -> hints


def filter_providers_hints(providers: Sequence[ProviderHints | None]) -> list[list[Hint]]:
    """filterProvidersHints: no hints = a preferred "any node"; an empty list = a non-preferred
    one (the provider cannot place the resource at all)."""
    accumulated: list[list[Hint]] = []
    for hints in providers:
        if not hints:
            accumulated.append([Hint(None, True)])
            continue
        for resource_hints in hints.values():
            if resource_hints is None:
                accumulated.append([Hint(None, True)])
            elif not resource_hints:
                accumulated.append([Hint(None, False)])
            else:
                accumulated.append(list(resource_hints))
    return accumulated


def merge_permutation(default_affinity: int, permutation: Sequence[Hint]) -> Hint:
    """mergePermutation: AND of the affinities; preferred only if every hint is preferred and
    every non-nil affinity equals the first ("Only mark preferred if all affinities are equal")."""
    preferred = True
    affinities: list[int] = []
    for hint in permutation:
        if hint.affinity is not None:
            affinities.append(hint.affinity)
            if hint.affinity != affinities[0]:
                preferred = False
        if not hint.preferred:
            preferred = False
    merged = default_affinity
    for affinity in affinities:
        merged &= affinity
    return Hint(merged, preferred)


def narrowest_hint(hints: Sequence[Hint]) -> Hint | None:
    narrowest: Hint | None = None
    for hint in hints:
        if hint.affinity is None:
            continue
        if narrowest is None:
            narrowest = hint
        assert narrowest.affinity is not None
        if is_narrower_than(hint.affinity, narrowest.affinity):
            narrowest = hint
    return narrowest


def max_of_min_affinity_counts(filtered: Sequence[Sequence[Hint]]) -> int:
    best = 0
    for resource_hints in filtered:
        narrowest = narrowest_hint(resource_hints)
        if narrowest is not None and narrowest.affinity is not None:
            best = max(best, count(narrowest.affinity))
    return best


@dataclass(frozen=True)
class HintMerger:
    """HintMerger and NewHintMerger's compareNumaAffinityMasks."""

    numa: NumaInfo
    hints: Sequence[Sequence[Hint]]
    policy: str
    prefer_closest: bool

    def compare_masks(self, current: Hint, candidate: Hint) -> Hint:
        assert current.affinity is not None and candidate.affinity is not None
        if candidate.affinity == current.affinity:
            return current
        if self.policy != "single-numa-node" and self.prefer_closest:
            best = self.numa.closest(current.affinity, candidate.affinity)
        else:
            best = self.numa.narrowest(current.affinity, candidate.affinity)
        return current if best == current.affinity else candidate

    def compare(self, current: Hint | None, candidate: Hint) -> Hint | None:
        """HintMerger.compare, its cases 1 to 3cc in kubelet's order."""
        assert candidate.affinity is not None
        if count(candidate.affinity) == 0:
            return current
        if current is None:
            return candidate
        assert current.affinity is not None
        if not current.preferred and candidate.preferred:
            return candidate
        if current.preferred and not candidate.preferred:
            return current
        if current.preferred and candidate.preferred:
            return self.compare_masks(current, candidate)
        target = max_of_min_affinity_counts(self.hints)
        current_count, candidate_count = count(current.affinity), count(candidate.affinity)
        if current_count > target:
            return self.compare_masks(current, candidate)
        if current_count == target:
            return current if candidate_count != target else self.compare_masks(current, candidate)
        if candidate_count > target:
            return current
        if candidate_count == target:
            return candidate
        if candidate_count > current_count:
            return candidate
        if candidate_count < current_count:
            return current
        return self.compare_masks(current, candidate)

    def merge(self, merged: Callable[[int, Sequence[Sequence[Hint]]], Sequence[Hint]]) -> Hint:
        """HintMerger.Merge over the merged hints ``merged`` yields (see the module docstring)."""
        default = self.numa.default_affinity()
        best: Hint | None = None
        for hint in merged(default, self.hints):
            best = self.compare(best, hint)
        return best if best is not None else Hint(default, False)


def all_permutations(default: int, hints: Sequence[Sequence[Hint]]) -> list[Hint]:
    """iterateAllProviderTopologyHints + mergePermutation, literally: every permutation."""
    return [merge_permutation(default, permutation) for permutation in product(*hints)]


def merged_hints(default: int, hints: Sequence[Sequence[Hint]]) -> list[Hint]:
    """The distinct hints ``all_permutations`` yields, built provider by provider.

    A partial permutation is summed up by (AND so far, preferred so far, first affinity), which
    is all mergePermutation reads of it; distinct states stay few where permutations are millions.
    """
    states: set[tuple[int, bool, int | None]] = {(default, True, None)}
    for resource_hints in hints:
        following: set[tuple[int, bool, int | None]] = set()
        for merged, preferred, first in states:
            for hint in resource_hints:
                if hint.affinity is None:
                    still = preferred and hint.preferred
                    following.add((merged, still, first if still else None))
                    continue
                lead = first if first is not None else hint.affinity
                still = preferred and hint.preferred and hint.affinity == lead
                # a state that is no longer preferred never reads its first affinity again
                following.add((merged & hint.affinity, still, lead if still else None))
        states = following
    return sorted({Hint(merged, preferred) for merged, preferred, _ in states})


def filter_single_numa_hints(filtered: Sequence[Sequence[Hint]]) -> list[list[Hint]]:
    """policy_single_numa_node.go filterSingleNumaHints: preferred "any" or one-node hints."""
    return [
        [
            hint
            for hint in resource_hints
            if hint.preferred and (hint.affinity is None or count(hint.affinity) == 1)
        ]
        for resource_hints in filtered
    ]


def policy_merge(
    policy: str,
    numa: NumaInfo,
    providers: Sequence[ProviderHints | None],
    prefer_closest: bool = False,
    literal: bool = False,
) -> tuple[Hint, bool]:
    """Policy.Merge of best-effort, restricted and single-numa-node: (best hint, admit)."""
    filtered = filter_providers_hints(providers)
    if policy == "single-numa-node":
        filtered = filter_single_numa_hints(filtered)
    walk = all_permutations if literal else merged_hints
    best = HintMerger(numa, filtered, policy, prefer_closest).merge(walk)
    if policy == "best-effort":
        return best, True
    if policy == "single-numa-node" and best.affinity == numa.default_affinity():
        best = Hint(None, best.preferred)
    if policy in ("restricted", "single-numa-node"):
        return best, best.preferred
    raise ValueError(f"unknown topology manager policy {policy!r}")


# ---- the machine and the hint providers ------------------------------------------------------


@dataclass(frozen=True)
class Machine:
    """What kubelet's managers see: CPUs per node, every node (CPU-less ones too), GPUs' nodes
    and allocatable memory per node (GiB)."""

    cpus_of_node: Mapping[int, frozenset[int]]  # nodes WITH CPUs: their online CPUs
    all_nodes: tuple[int, ...]
    gpu_nodes: tuple[int, ...]  # one entry per GPU: the node the device plugin reports
    memory_gib_of_node: Mapping[int, int]  # allocatable (the reservation taken off)
    reserved_cpus: frozenset[int] = frozenset()  # reservedSystemCPUs: never handed to pods


def cpu_hints(machine: Machine, request: int) -> list[Hint]:
    """cpumanager policy_static.go generateCPUTopologyHints (no reusable CPUs: a fresh pod)."""
    cpu_nodes = sorted(machine.cpus_of_node)
    min_affinity = len(cpu_nodes)
    hints: list[Hint] = []
    for mask in iterate_bit_masks(cpu_nodes):
        # minAffinitySize counts the topology's CPUs (CPUDetails), reserved ones included
        in_mask = sum(len(machine.cpus_of_node[node]) for node in bits(mask))
        if in_mask >= request and count(mask) < min_affinity:
            min_affinity = count(mask)
        available = sum(
            len(machine.cpus_of_node[node] - machine.reserved_cpus) for node in bits(mask)
        )
        if available < request:  # the assignable CPUs left on the mask's nodes
            continue
        hints.append(Hint(mask, False))
    return [Hint(hint.affinity, count(hint.affinity or 0) == min_affinity) for hint in hints]


def device_hints(machine: Machine, request: int) -> list[Hint]:
    """devicemanager topology_hints.go generateDeviceTopologyHints: masks over every node."""
    min_affinity = len(machine.all_nodes)
    hints: list[Hint] = []
    for mask in iterate_bit_masks(machine.all_nodes):
        in_mask = sum(1 for node in machine.gpu_nodes if mask >> node & 1)
        if in_mask >= request and count(mask) < min_affinity:
            min_affinity = count(mask)
        if in_mask < request:
            continue
        hints.append(Hint(mask, False))
    return [Hint(hint.affinity, count(hint.affinity or 0) == min_affinity) for hint in hints]


def memory_hints(machine: Machine, request_gib: int) -> list[Hint]:
    """memorymanager policy_static.go calculateHints on an empty machine (no node grouped)."""
    min_affinity = len(machine.all_nodes)
    hints: list[Hint] = []
    for mask in iterate_bit_masks(machine.all_nodes):
        allocatable = sum(machine.memory_gib_of_node.get(node, 0) for node in bits(mask))
        if allocatable < request_gib:
            continue
        min_affinity = min(min_affinity, count(mask))
        hints.append(Hint(mask, False))
    return [Hint(hint.affinity, count(hint.affinity or 0) == min_affinity) for hint in hints]


# ---- kubelet configuration and admission -----------------------------------------------------


class Container(NamedTuple):
    """A Guaranteed container: integer CPUs, GPUs, memory in GiB (requests = limits)."""

    cpus: int
    gpus: int
    memory_gib: int


@dataclass(frozen=True)
class KubeletTopology:
    """The kubelet configuration fields that decide admission."""

    policy: str = "none"  # topologyManagerPolicy
    scope: str = "container"  # topologyManagerScope
    options: Mapping[str, str] = field(default_factory=dict)  # topologyManagerPolicyOptions
    memory_static: bool = False  # memoryManagerPolicy: Static

    @classmethod
    def from_kubelet(cls, values: Mapping[str, str]) -> KubeletTopology:
        options = {
            key.removeprefix("topologyManagerPolicyOptions/"): value
            for key, value in values.items()
            if key.startswith("topologyManagerPolicyOptions/")
        }
        return cls(
            values.get("topologyManagerPolicy", "none"),
            values.get("topologyManagerScope", "container"),
            options,
            values.get("memoryManagerPolicy") == "Static",
        )


def start_error(config: KubeletTopology, machine: Machine) -> str | None:
    """topology_manager.go NewManager's refusal, else None (kubelet starts)."""
    if config.policy == "none":
        return None
    limit = int(config.options.get("max-allowable-numa-nodes", DEFAULT_MAX_ALLOWABLE_NUMA_NODES))
    if limit < DEFAULT_MAX_ALLOWABLE_NUMA_NODES:  # policy_options.go NewPolicyOptions
        return f"max-allowable-numa-nodes {limit} is below {DEFAULT_MAX_ALLOWABLE_NUMA_NODES}"
    if len(machine.all_nodes) > limit:
        return f"unsupported on machines with more than {limit} NUMA Nodes"
    return None


def _providers(
    config: KubeletTopology, machine: Machine, request: Container
) -> list[ProviderHints | None]:
    cpu: ProviderHints | None = {"cpu": cpu_hints(machine, request.cpus)} if request.cpus else None
    gpu: ProviderHints | None = (
        {"nvidia.com/gpu": device_hints(machine, request.gpus)} if request.gpus else None
    )
    memory: ProviderHints | None = None
    if config.memory_static and request.memory_gib:
        memory = {"memory": memory_hints(machine, request.memory_gib)}
    return [cpu, gpu, memory]


def admits(config: KubeletTopology, machine: Machine, pod: Sequence[Container]) -> bool:
    """Whether kubelet admits this Guaranteed pod on an empty node (scope_pod / scope_container)."""
    if config.policy == "none":
        return True
    numa = NumaInfo(machine.all_nodes)
    prefer_closest = config.options.get("prefer-closest-numa-nodes") == "true"
    if config.scope == "pod":
        requests = [
            Container(
                sum(c.cpus for c in pod), sum(c.gpus for c in pod), sum(c.memory_gib for c in pod)
            )
        ]
    else:
        requests = list(pod)
    return all(
        policy_merge(config.policy, numa, _providers(config, machine, request), prefer_closest)[1]
        for request in requests
    )
