"""The collector's whole sections come from the kind and GPU vendor tables (issue 43, glue): a
vendor row brings its section and its reason, a section is read only when a row asks for it, and
a row that would confuse the script is refused with where to edit. On main a vendor's section was
a second hand list (probes.WHOLE_SECTIONS, collector.WHOLE_REASONS): half-adding one was a bare
KeyError in every bundle, and a section listed without its switch was read by every bundle."""

from __future__ import annotations

from types import MappingProxyType

import pytest
from plans import full_plan, minimal_plan

from generator.errors import InputError
from generator.model import vendors
from generator.model.collect_data import (
    ALWAYS_FIRST,
    ALWAYS_LAST,
    check_collect_data,
    whole_reads,
    whole_sections,
)
from generator.model.vendors import GPU_VENDORS, VendorSpec
from generator.render.collector import collect_lines
from generator.render.datafile import data_text

ACME = VendorSpec(
    "acme",
    "Acme",
    0x1234,
    smi_tool="acme-smi",
    setup_script="gpu-setup-acme",
    collector_section="gpu-acme",
    driver_module_prefixes=("acme",),
    packaged_units=(),
)


@pytest.fixture
def with_acme(monkeypatch: pytest.MonkeyPatch) -> None:
    """A made-up vendor's row, and nothing else: no second list to edit."""
    monkeypatch.setattr(vendors, "GPU_VENDORS", MappingProxyType({**GPU_VENDORS, "acme": ACME}))


def test_the_sections_are_the_shipped_ones_in_the_shipped_order() -> None:
    """The derivation gives back the list the data files have always had (snapshots hold it)."""
    assert whole_sections() == (
        "block",
        "gpu",
        "gpu-amd",
        "tuned",
        "own_units",
        "system",
        "journal",
        "files",
    )


@pytest.mark.usefixtures("with_acme")
def test_a_vendor_row_brings_its_section_and_its_reason() -> None:
    assert "gpu-acme" in whole_sections()
    read = next(read for read in whole_reads() if read.section == "gpu-acme")
    assert read.reason == "collect: the Acme GPUs the plan's acme-smi actions apply to"
    acme = full_plan(gpu_vendors=("acme",))
    text = data_text(collect_lines(acme))
    assert "\n# collect: the Acme GPUs the plan's acme-smi actions apply to\ngpu-acme\n" in text
    assert "gpu-vendor\t0x1234" in text
    check_collect_data(text, "collect.conf")  # verify accepts what the renderer wrote


@pytest.mark.usefixtures("with_acme")
def test_a_vendor_section_is_off_for_every_other_plan() -> None:
    """Adding a row changes no other vendor's bundle: its section is read only for its GPUs."""
    for plan in (full_plan(gpu_vendors=("nvidia",)), full_plan(gpu_vendors=("amd",))):
        assert not any(line.fields == ("gpu-acme",) for line in collect_lines(plan))


def test_a_plan_reads_only_what_its_kinds_ask_for() -> None:
    """A sysctl-only plan: no GPU or tuned section, only the machine's and the tool's state."""
    read = [line.fields[0] for line in collect_lines(minimal_plan()) if len(line.fields) == 1]
    assert read == [r.section for r in (*ALWAYS_FIRST, *ALWAYS_LAST)]


def test_a_vendor_section_that_is_a_list_section_says_where_to_edit() -> None:
    clash = MappingProxyType({"acme": ACME._replace(collector_section="sysctl")})
    with pytest.raises(ValueError, match=r"generator/model/vendors\.py"):
        whole_reads(clash)


def test_a_whole_section_no_row_asks_for_is_unknown_to_verify() -> None:
    """The data check's vocabulary is the derived one: a section of no row is refused."""
    with pytest.raises(InputError, match="unknown section"):
        check_collect_data("tool\tgoldtune\nbundle\tx\ngpu-gaudi\n", "collect.conf")
