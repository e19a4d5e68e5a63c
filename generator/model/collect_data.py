"""The sections of the collector's data file, derived from the kind and GPU vendor tables, and
the rules each of its lines follows: shared by the renderer, which writes the file
(generator/render/collector.py), and by ``verify``, which validates it before running the
collector as root.

A section read as a whole (``gpu``, ``tuned``) is read only when a row asks for it: a kind's row
(``KindSpec.collector_whole``) for a plan with a setting of that kind, a GPU vendor's row
(``VendorSpec.collector_section``) for a plan with GPU settings for that vendor's GPUs. Only the
machine's and the tool's own state (``ALWAYS_FIRST``, ``ALWAYS_LAST``) is read for every plan. A
vendor or kind added to its table brings its section with it, with its reason: there is no second
list to keep in step, and a section no row asks for is never read.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from generator import TOOL
from generator.errors import InputError, Problem
from generator.model.kinds import KINDS, Kind
from generator.model.probes import (
    LIST_SECTIONS,
    NAME_SECTIONS,
    PCI_VENDOR_WORD,
    SAFE_WORD,
    SECTION_WORDS,
    TOOL_WORD,
    VENDOR_SECTION,
    WHAT,
    WholeRead,
)
from generator.model.setting import Plan, Setting
from generator.model.vendors import VendorSpec, vendor_table

# Read for every plan: the disks (what the udev rules may match, before the GPU sections, where
# the data file has always listed them), then the tool's own units and files and the boot's health.
ALWAYS_FIRST = (WholeRead("block", "collect: the disks the udev rules may match"),)
ALWAYS_LAST = (
    WholeRead("own_units", "collect: the state of this tool's own units"),
    WholeRead("system", "collect: the health of the boot"),
    WholeRead("journal", "collect: warnings of the configuration's consumers"),
    WholeRead("files", "collect: the installed files, against the manifest"),
)
# Where each list of sections is kept, for the message of a section asked for twice over.
_WHERE = "generator/model/kinds.py (collector_whole) or generator/model/vendors.py"


def _kind_reads() -> list[tuple[Kind, WholeRead]]:
    return [(spec.kind, spec.collector_whole) for spec in KINDS if spec.collector_whole]


def vendor_read(spec: VendorSpec) -> WholeRead:
    """A GPU vendor's section, with its reason made from its row."""
    return WholeRead(
        spec.collector_section,
        f"collect: the {spec.name} GPUs the plan's {spec.smi_tool} actions apply to",
    )


def whole_reads(vendors: Mapping[str, VendorSpec] | None = None) -> tuple[WholeRead, ...]:
    """Every section the collector may read as a whole, in data-file order: the disks, the GPU
    kind's section and each vendor's (table order), every other kind's (table order), then the
    tool's own. A section named by two rows keeps the first reason. ValueError, naming where to
    edit, for a section that is also a list or name section (the script could not tell them
    apart)."""
    table = vendor_table() if vendors is None else vendors
    kinds = _kind_reads()
    reads = [
        *ALWAYS_FIRST,
        *(read for kind, read in kinds if kind == Kind.GPU),
        *(vendor_read(spec) for spec in table.values()),
        *(read for kind, read in kinds if kind != Kind.GPU),
        *ALWAYS_LAST,
    ]
    kept: dict[str, WholeRead] = {}
    for read in reads:
        if read.section in (*LIST_SECTIONS, *NAME_SECTIONS, VENDOR_SECTION):
            raise ValueError(
                f"collector section {read.section!r} is read as a whole and word by word: "
                f"rename it in {_WHERE} (the list sections are generator/model/probes.py's)"
            )
        kept.setdefault(read.section, read)
    return tuple(kept.values())


def whole_sections(vendors: Mapping[str, VendorSpec] | None = None) -> tuple[str, ...]:
    """The names of whole_reads()."""
    return tuple(read.section for read in whole_reads(vendors))


def vendor_gpu_settings(plan: Plan, spec: VendorSpec) -> list[Setting]:
    """The plan's gpu settings that the vendor's section reads back: all of them for a plan with
    that vendor's GPUs, else those of the actions only its GPUs have (its ``own_actions``)."""
    if spec.vendor in plan.gpu_vendors:
        return list(plan.of_kind("gpu"))
    return [s for s in plan.of_kind("gpu") if s.key in spec.own_actions]


def asked_sections(plan: Plan) -> set[str]:
    """The whole sections the plan's kinds and GPU vendors ask the collector to read."""
    asked = {
        spec.collector_whole.section
        for spec in KINDS
        if spec.collector_whole and plan.of_kind(spec.kind)
    }
    asked |= {
        spec.collector_section
        for spec in vendor_table().values()
        if vendor_gpu_settings(plan, spec)
    }
    return asked


def plan_reads(plan: Plan) -> list[WholeRead]:
    """The whole sections one plan's data file names, in order."""
    asked = asked_sections(plan)
    always = {read.section for read in (*ALWAYS_FIRST, *ALWAYS_LAST)}
    return [read for read in whole_reads() if read.section in always | asked]


def gpu_sections(vendors: Iterable[VendorSpec] | None = None) -> frozenset[str]:
    """The sections that read GPUs (the gpu kind's, each vendor's): a data file with one lists
    the gpu-vendor ids those sections look for."""
    specs = vendor_table().values() if vendors is None else vendors
    kind = [
        spec.collector_whole.section
        for spec in KINDS
        if spec.kind == Kind.GPU and spec.collector_whole
    ]
    return frozenset({*kind, *(spec.collector_section for spec in specs)})


def data_line_problem(line: str, whole: Iterable[str] | None = None) -> str | None:
    """What is wrong with one line of the collector's data file, or None: the script's rules,
    and (stricter: verify runs the collector as root) what each section's kind may read.
    ``whole``: the whole sections (whole_sections(), given once by a caller checking many)."""
    if not line or line.startswith("#"):
        return None
    section, tab, word = line.partition("\t")
    if section == VENDOR_SECTION:
        return (
            None if PCI_VENDOR_WORD.fullmatch(word) else "not a PCI vendor id (0x and 4 hex digits)"
        )
    if section == "tool" and word != TOOL:
        return f"tool is {TOOL}: the collector reads {TOOL}'s units and files only"
    if section in NAME_SECTIONS:
        pattern = TOOL_WORD if section == "tool" else SAFE_WORD
        return None if pattern.fullmatch(word) else f"{section} needs one safe word"
    if section in LIST_SECTIONS:
        if not SAFE_WORD.fullmatch(word):
            return f"{section} needs one safe word"
        if not re.fullmatch(SECTION_WORDS[section], word):
            return f"{section}: {WHAT[section]}"
        globbed = [part for part in word.split("/") if any(c in part for c in "*?[")]
        # one globbed component (cpu*): the matches of one directory, not a walk of all /sys
        if section == "sysfs" and len(globbed) > 1:
            return "sysfs: a glob in more than one path component"
        return None
    if section in (whole_sections() if whole is None else whole):
        return None if not tab else f"section {section} takes no word"
    return "unknown section"


def check_collect_data(text: str, source: str) -> None:
    """Refuse a collector data file the script would refuse (InputError naming each bad line)."""
    lines = text.split("\n")
    whole = whole_sections()
    problems = [
        Problem(source, f"line {number}", problem)
        for number, line in enumerate(lines, start=1)
        if (problem := data_line_problem(line, whole)) is not None
    ]
    present = {line.partition("\t")[0] for line in lines}
    problems += [
        Problem(source, "", f"no {name} line") for name in NAME_SECTIONS if name not in present
    ]
    if ({"acs\tgpus", *gpu_sections()} & set(lines)) and VENDOR_SECTION not in present:
        problems.append(Problem(source, "", f"acs gpus or gpu without a {VENDOR_SECTION} line"))
    if problems:
        raise InputError(problems[:5])
