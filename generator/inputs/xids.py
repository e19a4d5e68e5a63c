"""The shipped Xid table, ``hardware_db/health/xids.yaml``, validated into ``model.xids`` rows.

Each row names an Xid of NVIDIA's catalog, its class (``hardware``: the node is unhealthy;
``application``: an application's fault, the GPU stays usable) and the source line that says so.
A bad table is an input error (file, field, what is wrong), never a traceback.
"""

# No `from __future__ import annotations` here: pydantic evaluates the annotations itself.
from functools import cache
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, StringConstraints, field_validator

from generator.inputs.schema import StrictModel, validate_model
from generator.inputs.yamlio import read_catalog_entry
from generator.model.xids import XidClass
from generator.paths import hardware_db_dir

Line = Annotated[str, StringConstraints(pattern=r"^[^\n]+$")]
Source = Annotated[str, StringConstraints(pattern=r"^[^\n]{10,}$")]
XIDS_FILE = Path("health") / "xids.yaml"


class XidRow(StrictModel):
    xid: Annotated[int, Field(ge=1, le=999)]
    name: Line
    # `class` is a Python keyword, so the field is read through its alias
    klass: Literal["hardware", "application"] = Field(alias="class")
    source: Source


class XidFile(StrictModel):
    description: Line
    source: Annotated[list[Source], Field(min_length=1)]
    xids: Annotated[list[XidRow], Field(min_length=1)]

    @field_validator("xids")
    @classmethod
    def _each_xid_once(cls, rows: list[XidRow]) -> list[XidRow]:
        seen: set[int] = set()
        for row in rows:
            if row.xid in seen:
                raise ValueError(f"Xid {row.xid} is classed twice")
            seen.add(row.xid)
        return rows


def xids_path() -> Path:
    return hardware_db_dir() / XIDS_FILE


def read_xid_table(path: Path) -> dict[int, XidClass]:
    """The rows of one Xid table file, by Xid."""
    table = validate_model(XidFile, read_catalog_entry(path.parent, path), str(path))
    return {row.xid: XidClass(row.xid, row.name, row.klass, row.source) for row in table.xids}


@cache
def load_xid_table() -> dict[int, XidClass]:
    """The shipped table (read once per process)."""
    return read_xid_table(xids_path())
