"""The snapshot the bundle's collector prints, read back.

The collector (``templates/scripts/collect``, installed at ``layout.COLLECT_SCRIPT``) prints
``SECTION<TAB>KEY<TAB>VALUE`` records between a begin and an end line (the format is documented in
the script). ``parse_snapshot`` reads them, also out of a serial console log with other lines
around them. A value the collector could not read is a reason (``!absent``…), read here only
(``why_not``, ``Snapshot.absent``); a value of several columns is a record of
``generator.verify.records``.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from enum import StrEnum

from generator.errors import InputError, Problem
from generator.foreign import MAX_NUMBER_DIGITS, overlong_number
from generator.model.layout import COLLECT_DATA, COLLECT_SCRIPT
from generator.model.probes import SNAPSHOT_BEGIN, SNAPSHOT_END, Section


class Why(StrEnum):
    """The reasons the collector prints as ``!<reason>`` instead of a value (its header lists
    them). A reason with a message (``!failed <message>``, ``!timed-out <message>``) starts with
    its word; a few sections print a reason in words of their own (conf, kubelet-file)."""

    ABSENT = "absent"  # no such file, key, user, interface or tool
    UNREADABLE = "unreadable"
    UNAVAILABLE = "unavailable"  # no systemd, not root
    NO_MSI_IRQS = "no-msi-irqs"
    FAILED = "failed"
    TIMED_OUT = "timed-out"  # a call that did not answer within the collector's bound


# The mark that starts a reason: the collector's one in-band signal, read here only (why_not),
# so that no check compares a value with "!absent" or looks at its first character.
_REASON_MARK = "!"


def why_not(value: str | None) -> str | None:
    """The reason a value the collector printed gives for having none (``!absent`` ->
    ``absent``, ``!failed exit 3`` -> ``failed exit 3``); None for a value, or no record."""
    if value is None or not value.startswith(_REASON_MARK):
        return None
    return value[len(_REASON_MARK) :]


def is_absent(value: str | None) -> bool:
    """The collector found no such file, key, user, interface or tool (``!absent``)."""
    return why_not(value) == Why.ABSENT


def timed_out(value: str | None) -> bool:
    """A call the collector bounds (nvidia-smi) did not answer: ``!timed-out <message>``."""
    return (why_not(value) or "").startswith(Why.TIMED_OUT)


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

    def why_not(self, section: Section, key: str) -> str | None:
        """Why the collector has no value for ``key`` (a ``Why``, with its message if any), or
        None where it printed one or nothing. A key with a reason has that one record, also in
        a section of several rows a key (limits, irq, acs)."""
        return why_not(self.value(section, key))

    def absent(self, section: Section, key: str) -> bool:
        """The collector found no such file, key, user, interface or tool for ``key``."""
        return is_absent(self.value(section, key))


# Sections whose values are text the node logged or a file's lines (a kernel or unit log, a
# configuration file, a dump), not numbers the collector measured: a long run of digits there is
# text, and their readers judge it (an Xid too long to read is reported unparsed). In every other
# section a number of more digits than MAX_NUMBER_DIGITS is bad input: no check's int() sees it.
FREE_TEXT = frozenset(
    {
        Section.XID,
        Section.XID_EVENT,
        Section.JOURNAL,
        Section.KERNEL,
        Section.OWN_UNIT_LOG,
        Section.TUNED_LOG,
        Section.MODPROBE_ERROR,
        Section.MODPROBE_CONFIG,
        Section.FILE,
        Section.CONF,
        Section.CONF_LINE,
        Section.CONTAINERD_DUMP,
        Section.KUBELET_FILE,
        Section.KUBELET_CONFIG,
        Section.DOCKER_INFO,
        Section.PREFLIGHT,
    }
)


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
        if len(fields) == 3 and fields[0] not in FREE_TEXT and overlong_number(line):
            digits = overlong_number(line)
            bad.append(
                Problem(
                    source,
                    f"line {number}",
                    f"a number of {digits} digits (at most {MAX_NUMBER_DIGITS}): not what the "
                    "collector prints",
                )
            )
        elif len(fields) == 3:
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
