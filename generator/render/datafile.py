"""Lines of the data files the fixed scripts read: TAB-separated words, each line after the
``# <rule id>: <reason>`` comment that says why it is there."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from generator.model.probes import VENDOR_SECTION
from generator.model.setting import Setting
from generator.model.vendors import vendor_table
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


def gpu_vendor_lines() -> list[DataLine]:
    """One ``gpu-vendor<TAB>0x10de`` line per GPU vendor: the fixed scripts find GPUs by these
    PCI vendor ids, read as data (generator/model/vendors.py holds them), never by their own."""
    return [
        fixed_line(
            f"vendors: {spec.name} GPUs are PCI vendor {spec.sysfs_id} (pci.ids)",
            (VENDOR_SECTION, spec.sysfs_id),
        )
        for spec in vendor_table().values()
    ]


def data_text(lines: Sequence[DataLine]) -> str:
    """The lines of a data file, each after a blank line and its comment. One string, not five
    template pieces and two lookups a line (~180 lines a bundle)."""
    return "".join([f"\n# {line.comment}\n{line.text}\n" for line in lines])
