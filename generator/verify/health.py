"""Checks of a snapshot beyond the plan's settings: did the boot that applied the bundle go well?

- the system state is ``running`` (not ``degraded``) and no unit failed;
- the bundle's own units ran and succeeded (the GPU and IRQ units skip cleanly without hardware);
- the boot journal has no warning from a consumer of the bundle's files: systemd-sysctl, udev,
  systemd-modules-load/modprobe/libkmod, systemd-tmpfiles, pam_limits, tuned, cloud-init, the
  bundle's units, systemd's parser of unit and manager files, and the kernel about parameters
  (messages that only say something was slow, such as udevd's "is taking a long time", are
  load, not configuration, and are not counted, nor is libkmod's line for a module whose
  device is absent: ABSENT_DEVICE_MODULE);
- every file of the bundle's overlay is installed with its content and mode (when the collector
  listed files);
- no NVIDIA Xid event of the hardware class in this boot's kernel log (when the collector read
  the GPUs): such an Xid is the driver reporting a GPU, memory, link or firmware fault, so the
  node tells the fleet it is not healthy; the check names each Xid and the GPU's PCI address,
  and NVIDIA's Xid catalog (docs.nvidia.com/deploy/xid-errors) gives each one's immediate action.
  The classes are ``hardware_db/health/xids.yaml``'s, passed in by the command: an application's
  Xid (13, 31, 43…) is a warning, and an Xid the table does not class fails as unknown;
- every nvidia-smi call of the collector answered within its bound (a wedged GPU is a finding).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import NamedTuple

from generator import TOOL
from generator.bundle.read import Bundle, ManifestFile
from generator.model.layout import (
    DOCKER_DAEMON_JSON,
    NCCL_STYLE_CONFS,
    PREFLIGHT_UNIT,
    is_tuned_file,
    other_tuned_place,
)
from generator.model.probes import Section
from generator.model.xids import HARDWARE, XidClass, XidTable, xid_class
from generator.verify.preflight import check_preflight
from generator.verify.records import unit_properties
from generator.verify.snapshot import Snapshot, timed_out, why_not
from generator.verify.verdicts import (
    Check,
    Verdict,
    file_not_installed,
    filled_at_boot,
    filled_file_check,
    merged_file_check,
    merged_nccl_conf,
)

OK, DIFFERS, MISSING = Verdict.OK, Verdict.DIFFERS, Verdict.MISSING
# The journal's and the kernel log's patterns are compiled at their first use (re keeps them): a
# snapshot without journal or Xid lines needs none, and compiling them at import was ~1.8 ms of
# every gen verify.
CONSUMERS = (
    rf"^(systemd-sysctl|systemd-udevd|\(udev-worker\)|systemd-modules-load|systemd-tmpfiles|modprobe"
    rf"|tuned|cloud-init|{TOOL}[a-z-]*)$"
)
# Warnings of systemd itself that mean a unit or configuration file was not taken as written.
SYSTEMD_CONFIG = (
    r"Unknown (key|section|lvalue)|Failed to parse|Invalid (section|value|argument)"
    r"|[Oo]rdering cycle"
    r"|Found .*cycle|[Bb]ad unit file|Failed to load configuration|\.(conf|service|rules):\d+"
)
KERNEL_PARAMETERS = r"parameter|command line"
# Messages that report how long something took, not how it was configured: udevd warns that a
# worker "is taking a long time" (and a spawned program "is taking longer than Ns") at the
# quarter of its timeout, which a loaded build host reaches with a correct bundle. The failure
# that can follow (the worker or program killed at the timeout) is still an error.
TIMING_ONLY = r"\bis taking (a long time|longer than \d+)"
# libkmod's line when a module that udev loads for a device (a cpufreq driver for the CPU's
# modalias, on a VM or a CPU it does not drive) fails its init with ENODEV and is gone again
# while another worker asks for its state: no such hardware, and a race of udev's workers, not
# a file of the bundle (systemd/systemd#20605, "could not read from
# '/sys/module/pcc_cpufreq/initstate': No such device", labelled not-our-bug / kernel-bug). It
# showed in one of this project's QEMU boots on a loaded host (powernow_k8).
ABSENT_DEVICE_MODULE = r"^could not read from '/sys/module/[\w-]+/initstate': No such device$"
_JOURNAL = r"^\[\s*[\d.]+\]\s+\S+\s+([^:\[\s]+)(?:\[\d+\])?:\s?(.*)$"


class JournalLine(NamedTuple):
    ident: str
    message: str


def parse_journal_line(text: str) -> JournalLine:
    found = re.match(_JOURNAL, text)
    return JournalLine(found.group(1), found.group(2)) if found else JournalLine("?", text)


def is_timing_message(line: JournalLine) -> bool:
    """A warning about slowness (load on the machine), not about the configuration."""
    return bool(re.search(TIMING_ONLY, line.message))


def is_config_error(line: JournalLine) -> bool:
    """A warning from a consumer of the bundle's files: a file was not taken as written."""
    if is_timing_message(line) or re.match(ABSENT_DEVICE_MODULE, line.message):
        return False
    if "pam_limits" in line.message or "libkmod" in line.message or re.match(CONSUMERS, line.ident):
        return True
    if line.ident == "systemd":
        return bool(re.search(SYSTEMD_CONFIG, line.message))
    if line.ident == "kernel":
        return bool(re.search(KERNEL_PARAMETERS, line.message))
    return False


def check_system(snapshot: Snapshot) -> list[Check]:
    state = snapshot.value(Section.SYSTEM, "state")
    if state is None or why_not(state) is not None:
        return []
    checks = [
        Check(
            "system",
            "state",
            "running",
            state,
            OK if state == "running" else DIFFERS,
            "" if state == "running" else "systemctl is-system-running",
        )
    ]
    failed = snapshot.values(Section.SYSTEM, "failed-unit")
    checks += [
        Check("system", "failed-unit", "none", unit, DIFFERS, "a unit failed this boot")
        for unit in failed
    ]
    if not failed:
        checks.append(Check("system", "failed-units", "none", "none", OK))
    return checks


def unit_props(snapshot: Snapshot, unit: str) -> dict[str, str]:
    return unit_properties(snapshot.values(Section.OWN_UNIT, unit))


def unit_seconds(props: dict[str, str]) -> float | None:
    """How long the unit took to start (a oneshot: its whole run), from systemd's timestamps."""
    try:
        start, end = (
            int(props["InactiveExitTimestampMonotonic"]),
            int(props["ActiveEnterTimestampMonotonic"]),
        )
    except (KeyError, ValueError):
        return None
    return (end - start) / 1e6 if start and end >= start else None


def own_units(snapshot: Snapshot) -> list[str]:
    return list(dict.fromkeys(unit for unit, _ in snapshot.section(Section.OWN_UNIT)))


def check_own_units(snapshot: Snapshot) -> list[Check]:
    checks = []
    for unit in own_units(snapshot):
        props = unit_props(snapshot, unit)
        took = unit_seconds(props)
        log = snapshot.values(Section.OWN_UNIT_LOG, unit)
        said = next(
            (line for line in reversed(log) if not line.startswith(("Starting ", "Finished "))), ""
        )
        actual = (
            f"{props.get('ActiveState', '?')} ({props.get('SubState', '?')}), "
            f"result {props.get('Result', '?')}"
        )
        actual += f", {took:.2f} s" if took is not None else ""
        ran = props.get("InactiveExitTimestampMonotonic", "0") not in ("0", "")
        # a unit systemd started and skipped on its Condition*= (the once-units: the first-boot
        # update-grub after its marker) did what it should; a unit never started has
        # ConditionResult=no too, but no condition timestamp
        skipped = props.get("ConditionResult") == "no" and props.get(
            "ConditionTimestampMonotonic", "0"
        ) not in ("0", "")
        if skipped and not ran:
            reason = "skipped: its condition is not met"
            checks.append(Check("unit", unit, "ran this boot", actual, OK, reason))
        elif props.get("UnitFileState") == "enabled" and not ran:
            checks.append(
                Check("unit", unit, "ran this boot", actual, DIFFERS, "enabled, but it did not run")
            )
        elif props.get("Result", "success") != "success" or props.get("ActiveState") == "failed":
            checks.append(Check("unit", unit, "ran, success", actual, DIFFERS, said))
        else:
            checks.append(Check("unit", unit, "ran, success", actual, OK, said))
    return checks


def check_journal(snapshot: Snapshot) -> list[Check]:
    checks = []
    for _, text in snapshot.section(Section.JOURNAL):
        line = parse_journal_line(text)
        if is_config_error(line):
            checks.append(
                Check("journal", line.ident, "no warning", line.message, DIFFERS, "boot journal")
            )
    for _, text in snapshot.section(Section.MODPROBE_ERROR):
        checks.append(
            Check("journal", "modprobe", "no warning", text, DIFFERS, "modprobe --showconfig")
        )
    for _, text in snapshot.section(Section.TUNED_LOG):
        if " ERROR " in text:
            checks.append(
                Check("journal", "tuned", "no error", text, DIFFERS, "/var/log/tuned/tuned.log")
            )
    if not checks and snapshot.has(Section.SYSTEM):
        checks.append(Check("journal", "config-errors", "none", "none", OK))
    return checks


def merged_in_place(target: str, snapshot: Snapshot) -> bool:
    """daemon.json whose bytes are not the bundle's but which is a JSON object, as the collector
    read it line by line: install.sh merged the bundle's keys into the file in place."""
    if target != DOCKER_DAEMON_JSON or snapshot.value(Section.CONF, target) != "present":
        return False
    try:
        config = json.loads("\n".join(snapshot.values(Section.CONF_LINE, target)))
    except (ValueError, RecursionError):  # nesting past the parser's stack, too
        return False
    return isinstance(config, dict)


def merged_nccl_in_place(item: ManifestFile, snapshot: Snapshot) -> bool:
    """nccl.conf (rccl.conf) as the collector read it line by line: the bundle's file, then
    install.sh's mark and the image's own lines (verdicts.merged_nccl_conf)."""
    target = item.target
    if target is None or target not in NCCL_STYLE_CONFS.values():
        return False
    if snapshot.value(Section.CONF, target) != "present":
        return False
    text = "\n".join(snapshot.values(Section.CONF_LINE, target))
    return merged_nccl_conf(item, text.encode("utf-8", "surrogateescape"))


def filled_nccl_in_place(item: ManifestFile, snapshot: Snapshot) -> bool:
    """nccl.conf (rccl.conf) as the collector read it: the bundle's (or its merge with the
    image's lines) with the lines the boot unit wrote between the marks (issue 38)."""
    target = item.target
    if target is None or target not in NCCL_STYLE_CONFS.values():
        return False
    if snapshot.value(Section.CONF, target) != "present":
        return False
    text = "\n".join(snapshot.values(Section.CONF_LINE, target)) + "\n"
    return filled_at_boot(item, text.encode("utf-8", "surrogateescape"))


def check_files(bundle: Bundle, snapshot: Snapshot) -> list[Check]:
    if not snapshot.has(Section.FILE):
        return []
    installed = dict(snapshot.section(Section.FILE))
    checks = []
    for item in bundle.overlay_files():
        assert item.target is not None
        expected = f"sha256 {item.sha256[:12]}…, mode {item.mode:04o}"
        found = installed.get(item.target)
        if found is None and is_tuned_file(item.target):
            # install.sh put the profile where the node's tuned reads it (install-lib.sh
            # tuned_place), which the plan may not know; tuned-adm says whether tuned loaded it
            found = installed.get(other_tuned_place(item.target))
        if found is None:
            checks.append(file_not_installed(item.target, expected))
            continue
        digest, _, mode = found.partition(" ")
        actual = f"sha256 {digest[:12]}…, mode {int(mode or '0', 8):04o}"
        same_mode = int(mode or "0", 8) == item.mode
        good = item.is_bundles(digest) and same_mode
        if (
            not good
            and same_mode
            and (merged_in_place(item.target, snapshot) or merged_nccl_in_place(item, snapshot))
        ):
            checks.append(merged_file_check(item.target, expected))
            continue
        if not good and same_mode and filled_nccl_in_place(item, snapshot):
            checks.append(filled_file_check(item.target, expected))
            continue
        checks.append(
            Check(
                "file",
                item.target,
                expected,
                actual,
                OK if good else DIFFERS,
                "" if good else "the installed file is not the bundle's",
            )
        )
    return checks


XID_CATALOG = "NVIDIA Xid catalog, docs.nvidia.com/deploy/xid-errors"
# "NVRM: Xid (PCI:0000:1b:00): 79, pid=..., GPU has fallen off the bus."; with MIG on, the
# parentheses also name the GPU instance: "NVRM: Xid (PCI:0000:01:00 GPU-I:05): 94, ...".
# Numbers in ASCII digits, at most 9 (an Xid or a count from a foreign snapshot: \d and
# str.isdigit take other scripts' digits, which int() refuses or reads, and int() refuses more
# than 4300 digits); a longer one is not read, and an unread Xid line is still reported.
_NUMBER = "([0-9]{1,9})(?![0-9])"
_XID = r"NVRM: Xid \((?:PCI:)?([0-9A-Fa-f:.]+)[^)]*\): " + _NUMBER
_EVENT = r"([0-9A-Fa-f:.]+) " + _NUMBER


@dataclass(frozen=True)
class XidEvent:
    """One Xid on one GPU (its PCI address) this boot, and how often it was logged."""

    xid: int
    bus: str
    count: int


def xid_events_of_lines(lines: list[str]) -> list[XidEvent]:
    """The (Xid, GPU) pairs of kernel log lines, in the order first seen, with their counts."""
    seen: dict[tuple[int, str], int] = {}
    for line in lines:
        if found := re.search(_XID, line):
            key = (int(found.group(2)), found.group(1).lower())
            seen[key] = seen.get(key, 0) + 1
    return [XidEvent(xid, bus, count) for (xid, bus), count in seen.items()]


def xid_events(snapshot: Snapshot) -> list[XidEvent]:
    """Every (Xid, GPU) of this boot: the collector's ``xid-event`` records count all the lines it
    scanned; a snapshot without them (an older collector) has only the last lines it kept."""
    events = []
    for key, value in snapshot.section(Section.XID_EVENT):
        found = re.fullmatch(_EVENT, value)
        if re.fullmatch(_NUMBER, key) and found:
            events.append(XidEvent(int(key), found.group(1).lower(), int(found.group(2))))
    return events or xid_events_of_lines(snapshot.values(Section.XID, "-"))


def xid_text(event: XidEvent, row: XidClass | None) -> str:
    """``Xid 79 (GPU has fallen off the bus) on 0000:1b:00 (x2)``."""
    name = row.name if row else "unknown: no source classes it"
    return f"Xid {event.xid} ({name}) on {event.bus}" + (
        f" (x{event.count})" if event.count > 1 else ""
    )


def fails_node(row: XidClass | None) -> bool:
    """A hardware Xid, or one that no source classes (failed, to be safe)."""
    return row is None or row.klass == HARDWARE


def check_xid(snapshot: Snapshot, table: XidTable) -> list[Check]:
    """This boot's Xids by class: a hardware or unknown Xid fails, naming the Xid and the GPU;
    an application's Xid is a warning (the GPU is still usable, as NVIDIA's device plugin
    judges it), so a job's own fault does not take the node out of the fleet."""
    count = snapshot.value(Section.XID, "count")
    if count is None:
        return []
    if why_not(count) is not None:
        return [
            Check("gpu", "xid", "none this boot", "kernel log unavailable", Verdict.NOT_APPLICABLE)
        ]
    if count == "0":
        return [Check("gpu", "xid", "none this boot", "none", OK)]
    events = xid_events(snapshot)
    if not events:
        return [
            Check(
                "gpu",
                "xid",
                "none this boot",
                "unparsed",
                DIFFERS,
                f"{count} NVIDIA Xid lines in this boot's kernel log, none readable: "
                f"{XID_CATALOG} gives each one's action",
            )
        ]
    rows = {event.xid: xid_class(table, event.xid) for event in events}
    failing = [e for e in events if fails_node(rows[e.xid])]
    warned = [e for e in events if not fails_node(rows[e.xid])]
    checks = []
    if failing:
        unknown = sorted({str(e.xid) for e in failing if rows[e.xid] is None})
        unknown_note = f" (Xid {', '.join(unknown)}: unknown, so failed)" if unknown else ""
        checks.append(
            Check(
                "gpu",
                "xid",
                "none this boot",
                "; ".join(xid_text(e, rows[e.xid]) for e in failing),
                DIFFERS,
                f"{sum(e.count for e in failing)} NVIDIA Xid events in this boot's kernel log: a "
                f"GPU, its memory, a link or the driver failed{unknown_note}; {XID_CATALOG} gives "
                "each one's action",
            )
        )
    if warned:
        checks.append(
            Check(
                "gpu",
                "xid-application",
                "none this boot",
                "; ".join(xid_text(e, rows[e.xid]) for e in warned),
                Verdict.WARNING,
                "an application's fault, not the GPU's (hardware_db/health/xids.yaml): the node "
                "stays healthy; look at the job that ran",
            )
        )
    return checks


def check_nvidia_smi(snapshot: Snapshot) -> list[Check]:
    """A wedged GPU or driver: the collector's nvidia-smi call did not answer within its bound
    (it is bounded so that `gen verify` reports this instead of hanging)."""
    hung = [
        (f"GPU {key}" if key != "tool" else "inventory", why_not(value))
        for section in (Section.GPU, Section.GPU_MIG)
        for key, value in snapshot.section(section)
        if timed_out(value)
    ]
    if not hung:
        return []
    what = "; ".join(f"{call}: {why}" for call, why in hung)
    return [
        Check(
            "gpu",
            "nvidia-smi",
            "answers",
            what,
            DIFFERS,
            "a GPU or the driver is wedged: reset the GPU or reboot the node",
        )
    ]


def check_health(bundle: Bundle, snapshot: Snapshot, xids: XidTable) -> list[Check]:
    return (
        check_files(bundle, snapshot)
        + check_own_units(snapshot)
        + check_system(snapshot)
        + check_journal(snapshot)
        + check_xid(snapshot, xids)
        + check_nvidia_smi(snapshot)
        + check_preflight(snapshot, bundle.plan.get("service", PREFLIGHT_UNIT) is not None)
    )


def boot_timing(snapshot: Snapshot) -> dict[str, object]:
    """The time each of the bundle's own units took at boot, and systemd's total."""
    units = {unit: unit_seconds(unit_props(snapshot, unit)) for unit in own_units(snapshot)}
    return {
        "units": units,
        "units_total_s": round(sum(s for s in units.values() if s is not None), 3),
        "startup": snapshot.value(Section.SYSTEM, "boot-time") or "",
    }
