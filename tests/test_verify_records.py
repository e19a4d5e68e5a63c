"""The collector's values read as typed records (generator/verify/records.py) and its reasons
(``!absent``…) read through ``why_not`` (generator/verify/snapshot.py): each parser on the rows
templates/scripts/collect prints, and on short or malformed ones (a foreign or cut snapshot),
which must give a record, never an IndexError or ValueError out of a check."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from generator.bundle.read import Bundle
from generator.model.probes import Section
from generator.model.setting import Plan, Setting
from generator.verify import live
from generator.verify.records import (
    SMI_QUERY,
    AcsPort,
    AmdGpu,
    GpuRecord,
    IrqRow,
    LimitRow,
    acs_reading,
    amd_gpu,
    gpu_record,
    irq_row,
    limit_row,
    squeezed_limit_row,
    unit_properties,
)
from generator.verify.snapshot import Snapshot, Why, is_absent, timed_out, why_not
from generator.verify.verdicts import Verdict

# --- the reasons ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ("!absent", "absent"),
        ("!failed exit 3: no devices", "failed exit 3: no devices"),
        ("!timed-out after 20 s", "timed-out after 20 s"),
        ("!not a regular file", "not a regular file"),
        ("ok", None),
        ("", None),
        (None, None),
    ],
)
def test_why_not_reads_the_reason_a_value_gives(value: str | None, why: str | None) -> None:
    assert why_not(value) == why


def test_absent_and_timed_out_are_their_reasons_only() -> None:
    assert is_absent("!absent") and not is_absent("absent") and not is_absent("!unreadable")
    assert not is_absent(None)
    assert timed_out("!timed-out after 20 s") and not timed_out("!failed timed-out")
    assert why_not("!absent") == Why.ABSENT


def test_a_snapshot_says_absent_for_a_key_only_when_the_collector_did() -> None:
    snapshot = Snapshot(records={"sysctl": [("a", "!absent"), ("b", "1")], "tuned": []})
    assert snapshot.absent(Section.SYSCTL, "a")
    assert not snapshot.absent(Section.SYSCTL, "b")
    assert not snapshot.absent(Section.SYSCTL, "not-collected")
    assert snapshot.why_not(Section.SYSCTL, "a") == Why.ABSENT
    assert snapshot.why_not(Section.SYSCTL, "b") is None


# --- gpu -----------------------------------------------------------------------------------------

SMI_LINE = "0, 00000000:1B:00.0, NVIDIA H100 80GB HBM3, Enabled, Enabled, Enabled, Default, "
SMI_LINE += "700.00, 700.00, 1980, 1980, Disabled, Disabled"


def test_a_gpu_line_names_each_field() -> None:
    record = gpu_record(SMI_LINE)
    assert record.gpu_index == "0"
    assert record.bus_id == "00000000:1B:00.0"
    assert record.power_limit == "700.00"
    assert record.mig_pending == "Disabled"
    assert len(record) == len(SMI_QUERY)


def test_a_short_gpu_line_has_question_marks_and_a_long_one_is_cut() -> None:
    short = gpu_record("1, 00000000:2B:00.0")
    assert short[:2] == ("1", "00000000:2B:00.0")
    assert set(short[2:]) == {"?"}
    assert gpu_record(SMI_LINE + ", extra, fields") == gpu_record(SMI_LINE)
    assert isinstance(gpu_record(""), GpuRecord)


# --- irq -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "row"),
    [
        ("42 0-3,8", IrqRow("42", "0-3,8", (0, 1, 2, 3, 8))),
        ("42 !unreadable", IrqRow("42", "!unreadable", None)),
        ("42", IrqRow("42", "?", None)),  # short: no CPU list
        ("42 0-a", IrqRow("42", "0-a", None)),  # not a CPU list
        ("42 3-1", IrqRow("42", "3-1", None)),  # a descending range
        ("", IrqRow("", "?", None)),
    ],
)
def test_an_irq_row_has_its_irq_and_cpus(text: str, row: IrqRow) -> None:
    assert irq_row(text) == row


IRQ = Setting("irq", "eth0", "0-3", "because", rule="test.rule")
BUNDLE = Bundle(Path("/nonexistent"), Plan("box", "test", (IRQ,)))


@pytest.mark.parametrize("value", ["0-3", "local"])
@pytest.mark.parametrize("row", ["42", "42 0-a", "42 "])
def test_a_malformed_irq_row_differs_instead_of_raising(value: str, row: str) -> None:
    """Before records.py, check_irq split the row itself: a row without its CPU list raised
    ValueError (unpacking), one whose list was not a CPU list raised it from expand_cpus (or,
    for ``local``, passed)."""
    snapshot = Snapshot(records={"irq": [("eth0", "41 0-3"), ("eth0", row)]})
    check = live.check_live(IRQ._replace(value=value), live.Live.of(snapshot, BUNDLE))
    assert check.verdict == Verdict.DIFFERS


def test_an_unknown_reason_for_the_irqs_differs() -> None:
    snapshot = Snapshot(records={"irq": [("eth0", "!unreadable")]})
    check = live.check_live(IRQ, live.Live.of(snapshot, BUNDLE))
    assert (check.verdict, check.actual) == (Verdict.DIFFERS, "unreadable")


# --- limits, runtime-limits ---------------------------------------------------------------------

# /proc/self/limits as the kernel prints it ("%-25s %-20s %-20s %-10s")
PROC_LIMITS = [
    f"{'Max open files':<25} {'1048576':<20} {'1048576':<20} {'files':<10}",
    f"{'Max locked memory':<25} {'unlimited':<20} {'unlimited':<20} {'bytes':<10}",
    f"{'Max nice priority':<25} {'0':<20} {'0':<20} ",
]


def test_a_limits_row_is_read_by_the_kernels_columns() -> None:
    assert [limit_row(line) for line in PROC_LIMITS] == [
        LimitRow("Max open files", "1048576", "1048576", "files"),
        LimitRow("Max locked memory", "unlimited", "unlimited", "bytes"),
        LimitRow("Max nice priority", "0", "0", ""),
    ]


@pytest.mark.parametrize("line", ["", "Max open files", "Max open files            1024", "!x"])
def test_a_short_limits_row_has_empty_fields(line: str) -> None:
    row = limit_row(line)
    assert row.name == line.strip()[:25].strip()
    assert row.units == ""


@pytest.mark.parametrize(
    ("line", "row"),
    [
        ("Max open files 1024 524288 files", LimitRow("Max open files", "1024", "524288", "files")),
        ("Max nice priority 0 0", LimitRow("Max nice priority", "0", "0", "")),
        (
            "Max file locks unlimited unlimited locks",
            LimitRow("Max file locks", *["unlimited"] * 2, "locks"),
        ),
        ("Max open files 1024", None),  # short: no hard value
        ("Max open files", None),
        ("Max open filesX 1 2", None),  # not a name of the kernel's
        ("Limit Soft Limit Hard Limit Units", None),  # the header
        ("", None),
    ],
)
def test_a_squeezed_limits_row_is_read_by_the_kernels_names(
    line: str, row: LimitRow | None
) -> None:
    assert squeezed_limit_row(line) == row


# --- acs -----------------------------------------------------------------------------------------


def test_acs_rows_are_ports_registers_and_iommu_devices() -> None:
    reading = acs_reading(
        [
            "0000:00:01.0 root 0000",
            "0000:01:00.0 downstream 001d",
            "0000:02:00.0 !no-acs",
            "!iommu 0000:03:00.0 DMA",
        ]
    )
    assert not reading.absent and not reading.unreadable
    assert reading.ports == (
        AcsPort("0000:00:01.0", "root", "0000"),
        AcsPort("0000:01:00.0", "downstream", "001d"),
    )
    assert [port.bits for port in reading.ports] == [0, 0x1D]
    assert reading.left_on == ("0000:03:00.0",)


def test_acs_absent_and_unreadable() -> None:
    assert acs_reading(["!absent"]).absent
    assert not acs_reading(["!absent", "0000:00:01.0 root 0000"]).absent
    assert acs_reading(["0000:00:01.0 !unreadable"]).unreadable
    assert acs_reading(["!unreadable"]).unreadable


@pytest.mark.parametrize("row", ["0000:00:01.0 root", "0000:00:01.0", "!iommu", "", "x y z w"])
def test_a_short_acs_row_is_left_out(row: str) -> None:
    reading = acs_reading([row])
    assert reading.ports == () and reading.left_on == ()


# --- gpu-amd -------------------------------------------------------------------------------------


def test_an_amd_gpu_record_names_its_fields() -> None:
    text = (
        "driver=amdgpu power1_cap=750000000 power1_cap_default=750000000 "
        "current_compute_partition=SPX current_memory_partition=NPS1"
    )
    assert amd_gpu("0000:05:00.0", text) == AmdGpu(
        "0000:05:00.0", "amdgpu", "750000000", "750000000", "SPX", "NPS1"
    )


def test_an_amd_gpu_record_keeps_a_value_with_blanks_and_marks_what_it_lacks() -> None:
    gpu = amd_gpu("0000:05:00.0", "power1_cap=!failed no such device newer_field=1")
    assert gpu.driver == "none"  # no driver word: none bound, as the collector's default
    assert gpu.power1_cap == "!failed no such device"
    assert gpu.current_memory_partition == "?"
    assert amd_gpu("x", "") == AmdGpu("x", "none", "?", "?", "?", "?")


# --- own-unit ------------------------------------------------------------------------------------


def test_unit_properties_by_name_the_last_wins() -> None:
    lines = ["Result=success", "ExecMainStatus=0", "Result=exit-code", "Description=a=b", "odd"]
    assert unit_properties(lines) == {
        "Result": "exit-code",
        "ExecMainStatus": "0",
        "Description": "a=b",
        "odd": "",
    }


# --- the mark is read in one place ---------------------------------------------------------------

VERIFY = Path(__file__).resolve().parent.parent / "generator" / "verify"


def reason_literals(source: str) -> list[str]:
    """String constants that spell the collector's reason mark: ``"!"``, ``"!absent"``…"""
    return [
        node.value
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and re.fullmatch(r"!([a-z][a-z -]*)?", node.value)
    ]


def test_only_snapshot_py_spells_the_reason_mark() -> None:
    """A check reads a reason through why_not / Snapshot.absent, never by comparing a value
    with ``"!absent"`` or its first character with ``"!"``."""
    spelled = {
        path.name: literals
        for path in sorted(VERIFY.glob("*.py"))
        if path.name != "snapshot.py" and (literals := reason_literals(path.read_text()))
    }
    assert not spelled, f"use why_not / Snapshot.absent (generator/verify/snapshot.py): {spelled}"


def test_the_mark_guard_sees_a_check_that_spells_it() -> None:
    assert reason_literals('if rows[0] == "!absent":\n    pass') == ["!absent"]
    assert reason_literals('value.startswith("!")') == ["!"]
    assert reason_literals('operator in ("==", "!=")') == []
