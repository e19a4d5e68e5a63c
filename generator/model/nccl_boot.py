"""The NCCL (RCCL) values resolved at boot (issue 38): how the boot step nccl-resolve finds, on
the booted node, the ports whose names the hardware file cannot state, written as the setting's
value. The rules build it, the renderer hands it to the script, verify knows it by its
prefix (at_boot).

A hardware file is written before the machine boots: interface and RDMA device names are the
booted host's (udev's predictable names, the order mlx5_ib registers its devices), so a file
that does not state them as real gets no name pinned. What it can state are identities that
survive renaming: each port's PCI address (nics[].pci_address), else role facts (the model's PCI
ids, the link speed, the NUMA node, how many compute ports there are). The value
``boot/<word>/<word>...`` (layout.NCCL_AT_BOOT; no NCCL name has a '/') carries them, and
templates/scripts/nccl-resolve reads the words at boot:

- ``pci=<address>,...``: exactly the RDMA devices (/sys/bus/pci/devices/<address>/infiniband/)
  or the interfaces that are up (.../net/, operstate) of those PCI functions;
- ``id=<vendor:device>,...``: the RDMA devices of functions with one of these PCI ids, narrowed
  by ``gbps=<n>`` (the rate of port 1 where it is up, /sys/class/infiniband/<dev>/ports/1/
  rate), ``nodes=<n>,...`` (the function's numa_node) and ``not=<address>,...`` (the
  functions of the file's other NICs),
  written only when exactly ``count=<n>`` are found: more means ports the facts cannot tell
  apart (a storage card of the compute model), fewer a port missing; then no list is written.

No search means no list: a value matching nothing moves NCCL's collectives onto TCP sockets
without an error (rule network.nccl), so the script writes nothing and says why in the journal.
"""

# No `from __future__ import annotations`: a NamedTuple turns each string annotation into
# a compiled ForwardRef, ~0.15 ms a record at import (bench/bench.py's cold gen).
from typing import NamedTuple

from generator.model.layout import NCCL_AT_BOOT, NCCL_UNIT


class Search(NamedTuple):
    """One search of nccl-resolve: by PCI addresses, or by PCI ids narrowed and counted."""

    pci: tuple[str, ...] = ()
    ids: tuple[str, ...] = ()
    gbps: int | None = None
    nodes: tuple[int, ...] = ()
    not_at: tuple[str, ...] = ()
    expected: int = 0  # count=: how many ports the search must find

    @property
    def value(self) -> str:
        """The setting's value: NCCL_AT_BOOT, then the words."""
        if self.pci:
            return f"{NCCL_AT_BOOT}pci={','.join(self.pci)}"
        words = [f"id={','.join(self.ids)}"]
        if self.gbps is not None:
            words.append(f"gbps={self.gbps}")
        if self.nodes:
            words.append(f"nodes={','.join(str(node) for node in self.nodes)}")
        if self.not_at:
            words.append(f"not={','.join(self.not_at)}")
        words.append(f"count={self.expected}")
        return NCCL_AT_BOOT + "/".join(words)


def at_boot(value: str) -> bool:
    """A value nccl-resolve works out at boot, not one NCCL reads."""
    return value.startswith(NCCL_AT_BOOT)


def how_found(search: Search) -> str:
    """The search in words, for the setting's reason: the facts it uses, and only those (the
    preflight reads a reason's words as what the setting depends on)."""
    if search.pci:
        return f"at the PCI addresses the hardware file gives ({', '.join(search.pci)})"
    facts = [f"PCI id {','.join(search.ids)}"]
    if search.gbps is not None:
        facts.append(f"{search.gbps} Gbit/s")
    if search.nodes:
        facts.append(f"NUMA node {','.join(str(node) for node in search.nodes)}")
    if search.not_at:
        facts.append(f"not at the other NICs' PCI addresses ({', '.join(search.not_at)})")
    return (
        f"by the compute NICs' role facts ({', '.join(facts)}), and only when exactly "
        f"{search.expected} ports match, one per compute NIC (a storage or frontend card of "
        "another model never does)"
    )


def resolved_reason(library: str, variable: str, search: Search, what: str) -> str:
    """The reason of a value the boot step resolves: what it writes and from which facts."""
    return (
        f"{library}'s {variable} is resolved at boot by {NCCL_UNIT}, before the container runtime "
        f"and kubelet start: {what}, found {how_found(search)}, as whole names; the hardware "
        "file does not state this host's names as real; where none is found nothing is written "
        "(a list matching nothing would break every job) and the journal says why"
    )
