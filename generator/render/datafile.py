"""Lines of the data files the fixed scripts read: TAB-separated words, each line after the
``# <rule id>: <reason>`` comment that says why it is there."""

# No `from __future__ import annotations`: a NamedTuple turns each string annotation into
# a compiled ForwardRef, ~0.15 ms a record at import (bench/bench.py's cold gen).
from collections.abc import Collection, Sequence
from typing import NamedTuple

from generator.model import layout
from generator.model.probes import VENDOR_SECTION
from generator.model.setting import Plan, Setting
from generator.model.vendors import NVIDIA, VendorSpec, vendor_spec, vendor_table
from generator.render.formats import comment_text, reason_comment


class DataLine(NamedTuple):
    comment: str  # "<rule id>: <reason>", one line
    fields: tuple[str, ...]

    @property
    def text(self) -> str:
        return "\t".join(self.fields)


def setting_line(setting: Setting, fields: tuple[str, ...]) -> DataLine:
    return DataLine(reason_comment(setting), fields)


def fixed_line(why: str, fields: tuple[str, ...]) -> DataLine:
    return DataLine(comment_text(why), fields)


def gpu_vendor_lines(vendors: Collection[str]) -> list[DataLine]:
    """One ``gpu-vendor<TAB>0x10de`` line per GPU vendor of ``vendors`` (the plan's), in table
    order: the fixed scripts find GPUs by these PCI vendor ids, read as data
    (generator/model/vendors.py holds them), never by their own. A vendor whose GPUs the machine
    does not have is not listed: its id would only widen what the scripts look at. A plan that
    names no vendor (one built by hand, or read back from plan.json, which does not carry them)
    is NVIDIA's, as every plan was before a second vendor (gpu_unit_vendor says the same)."""
    wanted = vendors or (NVIDIA.vendor,)
    return [
        fixed_line(
            f"vendors: {spec.name} GPUs are PCI vendor {spec.sysfs_id} (pci.ids)",
            (VENDOR_SECTION, spec.sysfs_id),
        )
        for spec in vendor_table().values()
        if spec.vendor in wanted
    ]


def gpu_unit_vendor(plan: Plan) -> VendorSpec:
    """The vendor whose fixed script the GPU unit runs (its row's setup_script): the plan's first
    GPU vendor in table order; NVIDIA's for a plan that names none (one read back from
    plan.json, which predates a second vendor). The unit runs one script: a machine with the GPU
    settings of two vendors is not served yet."""
    return vendor_spec(plan.gpu_vendors[0]) if plan.gpu_vendors else NVIDIA


def gpu_script(spec: VendorSpec) -> str:
    """Where the vendor's GPU boot script is installed (layout.GPU_SCRIPT for NVIDIA)."""
    return layout.libexec_script(spec.setup_script)


def data_text(lines: Sequence[DataLine]) -> str:
    """The lines of a data file, each after a blank line and its comment. One string, not five
    template pieces and two lookups a line (~180 lines a bundle)."""
    return "".join([f"\n# {line.comment}\n{line.text}\n" for line in lines])
