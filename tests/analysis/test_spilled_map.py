"""`SpilledMap` behaves as a dict, whether its entries are in memory, on disk, or both."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from analysis._spilled_map import SpilledMap

_keys = st.sampled_from([f"k{n}" for n in range(12)])
_ops = st.lists(
    st.tuples(st.sampled_from(["add", "put", "get", "pop"]), _keys, st.integers(0, 9)),
    max_size=60,
)


@given(_ops, st.integers(min_value=1, max_value=5), st.sampled_from([8, 64, 2**16]))
def test_it_is_a_dict(ops: list[tuple[str, str, int]], entries: int, bits: int) -> None:
    model: dict[str, tuple[int, str]] = {}
    held: SpilledMap[tuple[int, str]] = SpilledMap(memory_entries=entries, filter_bits=bits)
    for op, key, number in ops:
        value = (number, key)
        if op == "add":
            if key in model:
                continue  # add's contract: the key is not there
            model[key] = value
            held.add(key, value)
        elif op == "put":
            model[key] = value
            held.put(key, value)
        elif op == "get":
            assert held.get(key) == model.get(key)
        else:
            assert held.pop(key) == model.pop(key, None)
        assert len(held) == len(model)
    assert list(held.values()) == list(model.values())
    held.close()
    assert len(held) == 0
    assert not held.spilled


def test_it_spills_when_full_and_keeps_the_order() -> None:
    held: SpilledMap[int] = SpilledMap(memory_entries=3, filter_bits=64)
    for number in range(10):
        held.add(str(number), number)
    assert held.spilled
    assert [held.get(str(n)) for n in range(10)] == list(range(10))
    assert held.get("absent") is None
    assert held.pop("4") == 4
    assert held.pop("4") is None
    held.put("2", 20)
    assert list(held.values()) == [0, 1, 20, 3, 5, 6, 7, 8, 9]
    assert len(held) == 9
    held.close()


def test_a_map_that_never_fills_stays_in_memory() -> None:
    held: SpilledMap[int] = SpilledMap(memory_entries=4)
    for number in range(3):
        held.add(str(number), number)
    assert not held.spilled
    assert held.pop("1") == 1
    assert list(held.values()) == [0, 2]


@pytest.mark.parametrize(("entries", "bits"), [(0, 64), (1, 4), (1, 100)])
def test_bad_sizes_are_refused(entries: int, bits: int) -> None:
    with pytest.raises(ValueError, match="power of two"):
        SpilledMap(memory_entries=entries, filter_bits=bits)
