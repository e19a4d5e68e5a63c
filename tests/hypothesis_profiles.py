"""Hypothesis profiles: `ci` (the default: few examples, so the whole suite stays fast) and
`long` (1,000 examples, `make test-long`). Select one with --hypothesis-profile=NAME or the
HYPOTHESIS_PROFILE environment variable. Examples run whole `gen` jobs and real tools, so no
per-example deadline; tests that take pytest's function-scoped fixtures suppress that check."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci", max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile(
    "long", max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
