"""The snapshot the bundle's collector prints, read back.

The collector (``templates/scripts/collect``, installed at ``layout.COLLECT_SCRIPT``) prints
``SECTION<TAB>KEY<TAB>VALUE`` records between a begin and an end line (the format is documented in
the script). ``parse_snapshot`` reads them, also out of a serial console log with other lines
around them.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import NamedTuple

from generator.errors import InputError, Problem
from generator.model.layout import COLLECT_DATA, COLLECT_SCRIPT
from generator.model.probes import SNAPSHOT_BEGIN, SNAPSHOT_END, Section

# The value of a record whose call did not answer within the collector's bound (nvidia-smi).
TIMED_OUT = "!timed-out"


class GpuRecord(NamedTuple):
    """One NVIDIA GPU of the ``gpu`` section: a line of ``nvidia-smi --query-gpu=<SMI_QUERY>
    --format=csv,noheader,nounits``, its fields named once here (``gpu_records``)."""

    gpu_index: str  # nvidia-smi's index
    bus_id: str
    name: str
    persistence_mode: str
    ecc_current: str
    ecc_pending: str
    compute_mode: str
    power_limit: str
    power_default_limit: str
    clocks_gr: str
    clocks_max_gr: str
    mig_current: str
    mig_pending: str


# The nvidia-smi fields the collector queries, in GpuRecord's order (templates/scripts/collect's
# `fields` in collect_gpu; tests/test_collector_contract.py holds the two equal).
SMI_QUERY = (
    "index",
    "pci.bus_id",
    "name",
    "persistence_mode",
    "ecc.mode.current",
    "ecc.mode.pending",
    "compute_mode",
    "power.limit",
    "power.default_limit",
    "clocks.gr",
    "clocks.max.gr",
    "mig.mode.current",
    "mig.mode.pending",
)


@dataclass
class Snapshot:
    """The records of one collector run: ``records[section]`` is a list of (key, value).

    Read by ``Section`` only: a name the collector does not print is a type error, and
    tests/test_collector_contract.py holds each kind's live check to the sections its row in
    ``generator.model.kinds`` declares."""

    records: dict[str, list[tuple[str, str]]] = field(default_factory=lambda: defaultdict(list))

    def values(self, section: Section, key: str) -> list[str]:
        return [value for k, value in self.records.get(section, []) if k == key]

    def value(self, section: Section, key: str) -> str | None:
        found = self.values(section, key)
        return found[-1] if found else None

    def section(self, section: Section) -> list[tuple[str, str]]:
        return list(self.records.get(section, []))

    def has(self, section: Section) -> bool:
        return bool(self.records.get(section))


def gpu_records(snapshot: Snapshot) -> list[GpuRecord]:
    """The ``gpu`` section's GPUs (its ``tool`` record says whether nvidia-smi answered). A field
    a line lacks is ``?``; fields past SMI_QUERY (a newer nvidia-smi) are dropped."""
    records = []
    for key, value in snapshot.section(Section.GPU):
        if key != "tool":
            parts = [part.strip() for part in value.split(",")]
            padded = parts + ["?"] * (len(SMI_QUERY) - len(parts))
            records.append(GpuRecord(*padded[: len(SMI_QUERY)]))
    return records


def parse_snapshot(text: str, source: str = "snapshot") -> Snapshot:
    """The records between the begin and end markers; a log around them is ignored.

    When the text holds several snapshots (a console log of several boots), the last one counts.
    """
    lines = [line.rstrip("\r") for line in text.replace("\r\n", "\n").split("\n")]
    begins = [i for i, line in enumerate(lines) if tuple(line.split("\t")[:2]) == SNAPSHOT_BEGIN]
    if not begins:
        raise InputError(
            Problem(
                source,
                "",
                "no snapshot in it (no 'goldtune-snapshot<TAB>begin' line)",
                hint=f"run {COLLECT_SCRIPT} {COLLECT_DATA} on the machine and save its output",
            )
        )
    snapshot = Snapshot()
    bad: list[Problem] = []
    for number, line in enumerate(lines[begins[-1] + 1 :], start=begins[-1] + 2):
        fields = line.split("\t", 2)
        if tuple(fields[:2]) == SNAPSHOT_END:
            if bad:
                raise InputError(bad[:5])
            return snapshot
        if len(fields) == 3:
            snapshot.records[fields[0]].append((fields[1], fields[2]))
        elif line.strip():
            bad.append(
                Problem(
                    source,
                    f"line {number}",
                    f"not a SECTION<TAB>KEY<TAB>VALUE record: {line[:80]!r}",
                )
            )
    raise InputError(
        Problem(
            source,
            "",
            "the snapshot is truncated (no 'goldtune-snapshot<TAB>end' line)",
            hint="the collector was interrupted, or the log was cut",
        )
    )
