"""Regular expressions compiled at their first use, not at import.

``re.compile`` of a pattern costs 50-400 us of CPU (sre's parser and compiler are Python). A
module-level pattern that only some runs use (a cache miss, a second bundle, a MIG layout, a
containerd table) is then paid by every cold `gen` at import: ~0.8 ms for the ten of them a
shipped `gen` imports without using. ``compiled_at_first_use`` stands for the compiled pattern:
its first method call compiles it and puts the compiled pattern's bound methods on the stand-in,
so later calls cost what the pattern's own do (no ``re`` cache lookup, no extra call).
"""

from __future__ import annotations

import re
from typing import Any, cast

_METHODS = ("match", "fullmatch", "search", "findall", "finditer", "sub", "subn", "split")


class _FirstUse:
    def __init__(self, pattern: str, flags: int) -> None:
        self._arguments = (pattern, flags)

    def __getattr__(self, name: str) -> Any:  # only for what the instance does not hold yet
        if name in ("_arguments", "_compiled") or name.startswith("__"):
            # not set up (copy and pickle make one without __init__), or a protocol lookup
            raise AttributeError(name)
        compiled = self.__dict__.get("_compiled")
        if compiled is None:
            compiled = self._compiled = re.compile(*self._arguments)
            for method in _METHODS:
                setattr(self, method, getattr(compiled, method))
        return getattr(compiled, name)

    def __reduce__(self) -> tuple[Any, ...]:  # copied and pickled as the stand-in it is
        return (_FirstUse, self._arguments)

    def __repr__(self) -> str:
        return f"compiled_at_first_use({self._arguments[0]!r}, {self._arguments[1]!r})"


def compiled_at_first_use(pattern: str, flags: int = 0) -> re.Pattern[str]:
    """What ``re.compile(pattern, flags)`` returns, compiled when first used."""
    return cast("re.Pattern[str]", _FirstUse(pattern, flags))
