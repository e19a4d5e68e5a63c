"""plan/claims.py names(): a word found in a setting's key, value or reason only as a whole name,
judged by the characters beside each place it occurs (no pattern compiled per word)."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from generator.plan.claims import names


def whole_name(text: str, word: str) -> bool:
    """What names() means, as the pattern it was once written as."""
    return re.search(rf"(?<![A-Za-z0-9_-]){re.escape(word)}(?![A-Za-z0-9_-])", text) is not None


@pytest.mark.parametrize(
    ("text", "word", "found"),
    [
        ("ib1", "ib1", True),
        ("ib10", "ib1", False),
        ("veth0", "eth0", False),
        ("eth0-a", "eth0", False),
        ("eth0_a", "eth0", False),
        ("eth0.100", "eth0", True),
        ("sized from eth0's speed", "eth0", True),
        ("NCCL_SOCKET_IFNAME=eth0,eth1", "eth1", True),
        ("ib10 ib1", "ib1", True),  # a later place counts where the first is part of a name
        ("mlx5_0:1", "mlx5_0", True),
        ("mlx5_01", "mlx5_0", False),
        ("H100-SXM5-80GB x 8", "H100-SXM5-80GB", True),
        ("", "ib1", False),
    ],
)
def test_a_word_counts_only_as_a_whole_name(text: str, word: str, found: bool) -> None:
    assert names(text, word) is found
    assert whole_name(text, word) is found


ALPHABET = st.sampled_from(list("ab1_-. ,=:é"))


@settings(max_examples=400, deadline=None)
@given(st.text(ALPHABET, max_size=12), st.text(ALPHABET, min_size=1, max_size=3))
def test_names_is_the_whole_name_pattern(text: str, word: str) -> None:
    assert names(text, word) is whole_name(text, word)
