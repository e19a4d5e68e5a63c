"""The preconditions a kernel argument must meet on this machine, whoever set it: a rule's value
or a profile override (issue 40, "Overrides under the same preconditions").

A value the kernel will not honour (a huge page size the kernel does not have) or a known trap
for this machine (CPU isolation taking the housekeeping CPUs) must not reach a fleet silently:
plan/checks.py refuses it, exit 2 naming the profile, unless the override says with a reason
that the site accepts the risk (``accept_risk:``), when it becomes a warning and EXPLAIN.md
marks the setting.
"""

from __future__ import annotations

import re

from generator.inputs.facts import Facts
from generator.model.cpulist import compress_cpus, expand_cpus
from generator.model.kinds import Kind
from generator.model.setting import Setting

MEMPARSE_SHIFT = {"": 0, "K": 10, "M": 20, "G": 30, "T": 40}


def memparse_bytes(text: str) -> int | None:
    """The size the kernel's memparse() reads from ``text`` (``2M``, ``1G``, ``4096``), or None."""
    found = re.fullmatch(r"\s*([0-9]+)([KMGTkmgt]?)[Bb]?\s*", text, re.ASCII)
    if found is None:
        return None
    digits, suffix = found.groups()
    return int(digits) << MEMPARSE_SHIFT[suffix.upper()]


ISOLATING_ARGS = ("isolcpus", "nohz_full")
ISOLCPUS_FLAGS = frozenset({"nohz", "domain", "managed_irq"})


def isolated_cpus(value: str) -> set[int] | None:
    """The CPUs of an ``isolcpus=[flags,]list`` or ``nohz_full=list`` value; None when the list
    uses a form this check does not read (``N``, ``a-b:c/d``): then nothing is judged.

    Documentation/admin-guide/kernel-parameters.txt, isolcpus= and "cpu lists".
    """
    words = [word for word in value.split(",") if word not in ISOLCPUS_FLAGS]
    try:
        return set(expand_cpus(",".join(words)))
    except ValueError:
        return None


# The huge page sizes each arm64 base page size offers (Documentation/arch/arm64/hugetlbpage.rst:
# 4K pages: 64K, 2M, 32M, 1G; 16K: 2M, 32M, 1G; 64K: 2M, 512M, 16G). x86-64 offers 2M and 1G
# (the latter with pdpe1gb, which every CPU in hardware_db has).
ARM64_HUGEPAGE_SIZES_BY_PAGE_KIB = {
    4: ("64K", "2M", "32M", "1G"),
    16: ("2M", "32M", "1G"),
    64: ("2M", "512M", "16G"),
}
HUGEPAGE_SIZE_ARGS = ("hugepagesz", "default_hugepagesz")


def hugepage_size_problem(setting: Setting, facts: Facts) -> str | None:
    """A huge page size the arm64 kernel's base page size does not offer: the kernel ignores
    the argument ("HugeTLB: unsupported hugepagesz=1G"), and hugepages= then reserves pages of
    another size than the one asked."""
    if facts.cpu.arch != "aarch64" or setting.key not in HUGEPAGE_SIZE_ARGS:
        return None
    offered = ARM64_HUGEPAGE_SIZES_BY_PAGE_KIB.get(facts.os.page_size_kib)
    wanted = memparse_bytes(setting.value)
    if offered is None or wanted is None:
        return None
    if wanted in {memparse_bytes(size) for size in offered}:
        return None
    return (
        f"{setting.key}={setting.value}: an arm64 kernel with {facts.os.page_size_kib} KiB "
        f"pages has no such huge page size (it offers {', '.join(offered)}: "
        "Documentation/arch/arm64/hugetlbpage.rst); the kernel would ignore it"
    )


def isolation_problem(setting: Setting, facts: Facts) -> str | None:
    """An isolcpus=/nohz_full= list naming CPUs the machine does not have, or taking the
    housekeeping CPUs (CPU 0 and its SMT siblings): the kernel's timers, RCU callbacks and
    unbound work then crowd onto what is left or onto the isolated CPUs. NVIDIA removed exactly
    such a list from its own node tuning after a 3x throughput loss (NVIDIA/nodewright-packages
    issue 95, as cited by issue 40)."""
    if setting.key not in ISOLATING_ARGS:
        return None
    cpus = isolated_cpus(setting.value)
    if not cpus:
        return None
    missing = {cpu for cpu in cpus if cpu >= facts.cpu.logical_cpus}
    if missing:
        return (
            f"{setting.key}={setting.value} names CPUs {compress_cpus(missing)}, which this "
            f"machine does not have (CPUs 0-{facts.cpu.logical_cpus - 1})"
        )
    taken = cpus & facts.cpu.housekeeping_cpus
    if taken:
        return (
            f"{setting.key}={setting.value} takes the housekeeping CPUs "
            f"{compress_cpus(taken)} (CPU 0 and its SMT siblings), which keep the kernel's "
            "timers, RCU and unbound work; NVIDIA reverted such a list after a 3x throughput "
            "loss (nodewright-packages issue 95). Leave them out"
        )
    return None


def check_preconditions(setting: Setting, facts: Facts) -> str | None:
    """The first precondition a kernel argument fails on this machine, or None."""
    if setting.kind != Kind.KERNEL_ARG:
        return None
    return hugepage_size_problem(setting, facts) or isolation_problem(setting, facts)
