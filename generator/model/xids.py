"""What an NVIDIA Xid event says about a node: the classes of ``hardware_db/health/xids.yaml``.

The table is loaded and validated by ``generator.inputs.xids``; ``gen verify`` receives it as an
``XidTable`` and classes each Xid of this boot's kernel log with ``xid_class``. An Xid the table
does not list is ``unknown``, and an unknown Xid fails like a hardware one: a node must not stay
in service on an event nobody has classed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal, NamedTuple

XidClassName = Literal["hardware", "application"]
HARDWARE: XidClassName = "hardware"
APPLICATION: XidClassName = "application"


class XidClass(NamedTuple):
    """One row of the table: the Xid, NVIDIA's name for it, its class and the line citing it."""

    xid: int
    name: str
    klass: XidClassName
    source: str


XidTable = Mapping[int, XidClass]


def xid_class(table: XidTable, xid: int) -> XidClass | None:
    """The row of ``xid``, or None when no source classes it (verify: unknown, fails)."""
    return table.get(xid)
