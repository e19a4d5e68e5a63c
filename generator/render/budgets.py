"""The user-data's budget per provider: which forms carry the whole delivery, and, where none of
them fits a provider's limit, what each part of the composed form costs.

With --cloud-init-part files only the MIME forms carry them (user-data and user-data.gz are
goldtune's part alone), so those are the forms held to the limits; a warning names the form,
the limit and the bytes each part adds to it, so a team sees whether its own part or goldtune's
is what no longer fits.
"""

# No `from __future__ import annotations`: a NamedTuple turns each string annotation into
# a compiled ForwardRef, ~0.15 ms a record at import (bench/bench.py's cold gen).
import json
from collections.abc import Collection, Mapping, Sequence
from typing import Any, NamedTuple

from generator.errors import GoldtuneError
from generator.model import layout
from generator.render import providers
from generator.render.cloudinit import mime_user_data, part_kind
from generator.render.gzipforms import compressed_forms
from generator.render.providers import MIME_FORMS, ProviderLimit, fits


class Overrun(NamedTuple):
    """A provider whose limit no form that carries every part fits."""

    limit: ProviderLimit
    form: str  # the smallest such form the provider's field can hold
    size: int


def complete_forms(sizes: Mapping[str, Any]) -> list[str]:
    """The forms that carry goldtune's user-data and every --cloud-init-part (manifest.json's
    ``user_data``: ``parts`` lists the parts' digests)."""
    forms = list(sizes["bytes"])
    return [form for form in forms if form in MIME_FORMS] if sizes.get("parts") else forms


def overruns(sizes: Mapping[str, Any], only: Collection[str] | None = None) -> list[Overrun]:
    """Each provider (of ``only`` when given) that no complete form fits, with the smallest
    complete form its field can hold (gzip forms only where the field takes bytes)."""
    complete = complete_forms(sizes)
    found = []
    for limit in providers.PROVIDER_LIMITS:  # read here: one table for manifest and warnings
        if only is not None and limit.provider not in only:
            continue
        held = [form for form in complete if fits(limit, form, 0)]
        if not held or any(fits(limit, form, sizes["bytes"][form]) for form in held):
            continue
        form = min(held, key=lambda name: sizes["bytes"][name])
        found.append(Overrun(limit, form, sizes["bytes"][form]))
    return found


def part_costs(user_data: bytes, parts: tuple[bytes, ...], form: str) -> list[int]:
    """What each piece adds to a MIME ``form``: goldtune's user-data first (the form with no
    other part), then each part (the form's size less its size without that part). In the gzip
    form a part costs what it adds once deflated beside the others, so the costs add up to
    about, not exactly, the form's size."""

    def size(with_parts: tuple[bytes, ...]) -> int:
        mime = mime_user_data(user_data, with_parts)
        return len(compressed_forms(user_data, mime)[1]) if form in layout.GZIP_FORMS else len(mime)

    whole = size(parts)
    without = [size(parts[:index] + parts[index + 1 :]) for index in range(len(parts))]
    return [size(()), *(whole - other for other in without)]


def budget_warnings(
    sizes: Mapping[str, Any],
    user_data: bytes,
    parts: tuple[bytes, ...],
    names: Sequence[str],
    only: Collection[str] | None = None,
) -> list[str]:
    """A line per provider (of ``only`` when given) that no form carrying every part fits: the
    form, its size, the limit and its source, and, when parts were given, what each part costs
    in that form."""
    lines = []
    for overrun in overruns(sizes, only):
        line = (
            f"cloud-init user-data does not fit {overrun.limit.provider}: "
            f"{_smallest(overrun, parts)} is {overrun.size} bytes, the limit "
            f"{overrun.limit.limit_bytes} ({overrun.limit.source})"
        )
        if parts:
            costs = part_costs(user_data, parts, overrun.form)
            shares = [f"goldtune's user-data {costs[0]}"] + [
                f"{name} ({part_kind(part).name}) {cost}"
                for name, part, cost in zip(names, parts, costs[1:], strict=True)
            ]
            line += f"; bytes each part adds to it: {', '.join(shares)}"
        lines.append(
            line + "; make the parts smaller, or deliver the bundle with install.sh in the image"
        )
    return lines


def _smallest(overrun: Overrun, parts: tuple[bytes, ...]) -> str:
    what = "form that carries every part" if parts else "form"
    return f"the smallest {what}, {overrun.form},"


class FitError(GoldtuneError):
    """A provider --require-fit names gets no form that carries every part: the inputs (the
    team's parts, the hardware's NICs) make a delivery the provider refuses, so bad input, exit
    status 2, as `gen matrix` counts any combination it cannot make (its own exit 1) and
    `--check` any it cannot check."""

    exit_code = 2

    def __init__(self, lines: list[str]) -> None:
        self.messages = lines
        super().__init__("\n".join(lines))

    def lines(self) -> list[str]:
        return [f"{line} (--require-fit)" for line in self.messages]


def check_fit(
    files: Mapping[str, tuple[bytes, int]],
    parts: tuple[bytes, ...],
    names: Sequence[str],
    required: Collection[str],
) -> None:
    """Raise FitError when a provider in ``required`` gets no complete form of the rendered
    ``files`` (their manifest.json records the sizes) within its limit."""
    if not required:
        return
    sizes = json.loads(files[layout.MANIFEST][0])["user_data"]
    lines = budget_warnings(sizes, files[layout.USER_DATA][0], parts, names, required)
    if lines:
        raise FitError(lines)
