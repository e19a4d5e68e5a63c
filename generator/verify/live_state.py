"""The snapshot as the live checks read it: ``Live`` (the collector's sections, the bundle, the
units it owns), the verdict names and the value comparisons every check shares."""

from __future__ import annotations

from dataclasses import dataclass, field

from generator.bundle.read import Bundle
from generator.model.probes import Section
from generator.verify.consumers import parse_cmdline
from generator.verify.records import block_disks, unit_properties
from generator.verify.snapshot import Snapshot
from generator.verify.udevmatch import Disk
from generator.verify.verdicts import Verdict

OK, DIFFERS, MISSING, NA = Verdict.OK, Verdict.DIFFERS, Verdict.MISSING, Verdict.NOT_APPLICABLE


NOT_JUDGED = Verdict.NOT_JUDGED


NOT_COLLECTED = "not in the snapshot (was it collected with this bundle's collector?)"


TRUE_WORDS = {"1", "y", "yes", "true", "on", "enabled", "enable"}


FALSE_WORDS = {"0", "n", "no", "false", "off", "disabled", "disable"}


def normal(value: str) -> str:
    """Booleans as 1/0 and whitespace squeezed.

    So ``Y`` == ``1`` and ``4096\\t87380`` == ``4096 87380``.
    """
    text = " ".join(value.split())
    if text.lower() in TRUE_WORDS:
        return "1"
    if text.lower() in FALSE_WORDS:
        return "0"
    return text


def same(expected: str, actual: str) -> bool:
    return normal(expected) == normal(actual)


@dataclass
class Live:
    """The snapshot, with the parts several kinds read parsed once."""

    snapshot: Snapshot
    bundle: Bundle
    cmdline: dict[str, str | None] = field(default_factory=dict)
    disks: list[Disk] = field(default_factory=list)

    @classmethod
    def of(cls, snapshot: Snapshot, bundle: Bundle) -> Live:
        cmdline = parse_cmdline(snapshot.value(Section.CMDLINE, "-") or "")
        return cls(snapshot, bundle, cmdline, block_disks(snapshot))


def unit_prop(live: Live, unit: str, prop: str) -> str | None:
    return live.snapshot.value(Section.RUNTIME_UNIT, f"{unit}:{prop}")


def own_unit_props(live: Live, unit: str) -> dict[str, str]:
    return unit_properties(live.snapshot.values(Section.OWN_UNIT, unit))
