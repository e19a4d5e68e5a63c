"""Per-area rule tables (issue 3)."""

import pytest

pytest.register_assert_rewrite(f"{__name__}.helpers")
