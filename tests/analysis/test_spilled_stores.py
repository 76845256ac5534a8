"""`SpilledRanks` and `SpilledList` against their models: `LatencyStats.of` and a stable sort.

The streamed decision trace (ADR 0026, addendum) keeps its statistics and its
lists in these; with their memory shrunk to nothing, every value goes through
SQLite (the ranks through an index, across the 64-bit boundary both ways) and
every item through a temporary file (and through SQLite's sorter when its keys
came out of order), and they must still answer as the models do.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from analysis._spilled_list import SpilledList
from analysis._spilled_ranks import SpilledRanks
from analysis._trace_stats import LatencyStats

_ANY_INT = st.one_of(
    st.integers(min_value=-1000, max_value=1000),
    st.integers(),
    st.sampled_from([2**63 - 1, 2**63, -(2**63), -(2**63) - 1, 2**64, -(2**64), 2**200]),
)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from("abc"), _ANY_INT), max_size=60),
    st.sampled_from([1, 2, 7, 10_000]),
)
def test_spilled_ranks_are_the_exact_nearest_ranks(
    values: list[tuple[str, int]], memory_values: int
) -> None:
    ranks: SpilledRanks[str] = SpilledRanks(memory_values=memory_values)
    for group, value in values:
        ranks.add(group, value)
    try:
        for group in "abcd":
            expected = LatencyStats.of(value for key, value in values if key == group)
            assert ranks.stats(group) == expected
        assert ranks.stats_of_all() == LatencyStats.of(value for _, value in values)
        assert list(ranks.groups()) == list(dict.fromkeys(group for group, _ in values))
        beyond = [v for _, v in values if not -(2**63) <= v < 2**63]
        assert ranks.spilled == (len(values) >= memory_values or bool(beyond))
    finally:
        ranks.close()


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 2**128 - 1) | st.integers(0, 3), st.binary(max_size=40))),
    st.sampled_from([1, 64, 1 << 20]),
)
def test_a_spilled_list_reads_back_as_a_stable_sort(
    items: list[tuple[int, bytes]], memory_bytes: int
) -> None:
    spilled = SpilledList(memory_bytes=memory_bytes)
    for key, payload in items:
        spilled.append(key, payload)
    try:
        expected = [payload for _, payload in sorted(items, key=lambda item: item[0])]
        assert list(spilled) == expected
        assert list(spilled) == expected  # read twice, the same
        assert len(spilled) == len(items)
        assert spilled.in_order == (items == sorted(items, key=lambda item: item[0]))
    finally:
        spilled.close()


@pytest.mark.parametrize("key", [-1, 2**128])
def test_a_spilled_list_refuses_a_key_out_of_range(key: int) -> None:
    with pytest.raises(ValueError, match="a key is from 0"):
        SpilledList().append(key, b"")


def test_the_stores_refuse_no_memory() -> None:
    with pytest.raises(ValueError, match="memory_bytes"):
        SpilledList(memory_bytes=0)
    with pytest.raises(ValueError, match="memory_values"):
        SpilledRanks[str](memory_values=0)
