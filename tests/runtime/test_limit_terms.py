"""A limit's terms on their own (`runtime._limit`, ADR 0032): bounds, keys, amounts.

`test_budget.py` drives limits through the gate; this file pins what the
terms themselves promise: the exact bounds a policy may write (a year of
window, 10**12 whole units), which names a key may use, how an amount
becomes exact micro-units (and which values never do), and the decimal text
the record shows.
"""

from __future__ import annotations

import dataclasses
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from runtime import LimitError, Policy, PolicyError
from runtime._limit import MAX_AMOUNT, MAX_WINDOW_S, MICROS, LimitSpec, decimal_text, micros_of

YEAR_S = 366 * 24 * 3600


def _limit_of(limit: dict[str, Any]) -> LimitSpec:
    policy = Policy.from_dict(
        {
            "policy_id": "terms",
            "rules": [{"id": "budget", "verbs": ["*"], "effect": "deny", "limit": limit}],
        }
    )
    spec = policy.rules[0].limit
    assert spec is not None
    return spec


def test_the_bounds_are_a_leap_year_of_window_and_a_trillion_units() -> None:
    assert (MAX_WINDOW_S, MAX_AMOUNT, MICROS) == (YEAR_S, 10**12, 10**6)


@pytest.mark.parametrize("window_s", [1, YEAR_S])
def test_a_window_from_one_second_to_a_year_loads(window_s: int) -> None:
    spec = _limit_of({"key": "agent", "window_s": window_s, "max_count": 1})
    assert spec.window_s == window_s
    assert spec.window_ns == window_s * 1_000_000_000


def test_a_window_one_second_past_a_year_is_refused() -> None:
    with pytest.raises(PolicyError, match=f"1..{YEAR_S}") as caught:
        _limit_of({"key": "agent", "window_s": YEAR_S + 1, "max_count": 1})
    assert caught.value.field == "limit.window_s"


def test_the_largest_count_and_sum_load_and_one_more_is_refused() -> None:
    count = _limit_of({"key": "agent", "window_s": 60, "max_count": 10**12})
    assert (count.measure, count.maximum) == ("count", 10**12)
    total = _limit_of({"key": "agent", "window_s": 60, "max_sum": "args.amount", "sum_max": 10**12})
    assert (total.measure, total.maximum) == ("sum", 10**12 * MICROS)
    for field, limit in (
        ("limit.max_count", {"max_count": 10**12 + 1}),
        ("limit.sum_max", {"max_sum": "args.amount", "sum_max": 10**12 + 1}),
    ):
        with pytest.raises(PolicyError, match=r"larger than|0\.\.1000000000000") as caught:
            _limit_of({"key": "agent", "window_s": 60, **limit})
        assert caught.value.field == field


def test_verb_and_resource_are_key_parts() -> None:
    spec = _limit_of({"key": ["verb", "resource", "agent"], "window_s": 60, "max_count": 2})
    assert spec.key == ("verb", "resource", "agent")
    assert spec.key_of("budget", "a1", "refund", "pay:7", {}) == ("refund", "pay:7", "a1")


def test_an_args_key_part_keeps_its_type() -> None:
    spec = _limit_of({"key": ["args.n", "args.flag"], "window_s": 60, "max_count": 2})
    assert spec.key_of("budget", "a", "v", "r", {"n": 3, "flag": True}) == (3, True)
    with pytest.raises(LimitError, match=r"'args\.n'.*is a null"):
        spec.key_of("budget", "a", "v", "r", {"n": None, "flag": True})


def test_a_limit_spec_is_frozen() -> None:
    spec = LimitSpec(key=("agent",), window_s=60, max_count=1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.window_s = 120  # type: ignore[misc]


def test_a_count_limit_counts_one_per_action_whatever_the_args() -> None:
    spec = LimitSpec(key=("agent",), window_s=60, max_count=5)
    assert (spec.measure, spec.maximum) == ("count", 5)
    assert spec.amount_of("budget", {"amount": 400}) == 1


def test_a_sum_limit_counts_the_amount_in_micros() -> None:
    spec = LimitSpec(key=("agent",), window_s=60, max_sum="args.amount", sum_max_micros=7)
    assert (spec.measure, spec.maximum) == ("sum", 7)
    assert spec.amount_of("budget", {"amount": 2.5}) == 2_500_000
    with pytest.raises(LimitError, match=r"'args\.amount'.*is missing"):
        spec.amount_of("budget", {})


@pytest.mark.parametrize(
    ("value", "micros"),
    [(0, 0), (1, MICROS), (10**12, 10**18), (0.1, 100_000), (1e12, 10**18),
     (499.75, 499_750_000), (0.000001, 1), (2.5e-5, 25)],
)  # fmt: skip
def test_amounts_in_range_are_exact_micros(value: object, micros: int) -> None:
    assert micros_of(value) == micros


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        (10**12 + 1, "is larger than 1000000000000"),
        (10**400, "is larger than"),
        (1e12 + 0.5, "is larger than"),
        (1e300, "is larger than"),
        (-1, "is negative"),
        (-(10**400), "is negative"),
        (-0.000001, "is negative"),
        (float("inf"), "is not a finite number"),
        (float("-inf"), "is not a finite number"),
        (float("nan"), "is not a finite number"),
        (1e-7, "has more than six decimal places"),
        (5e-324, "has more than six decimal places"),
        (True, "is a boolean, not a number"),
        ("5", "is a string, not a number"),
        (Decimal("5"), "not a number"),
    ],
)
def test_amounts_that_never_count(value: object, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        micros_of(value)


class _Int(int):
    pass


def test_an_int_subclass_is_not_an_amount() -> None:
    with pytest.raises(ValueError, match="not a number"):
        micros_of(_Int(5))


@pytest.mark.parametrize(
    ("micros", "text"),
    [(0, "0"), (1, "0.000001"), (1_500_000, "1.5"), (2 * MICROS, "2"),
     (-1_500_000, "-1.5"), (-3 * MICROS, "-3"), (-1, "-0.000001")],
)  # fmt: skip
def test_decimal_text_is_the_shortest_exact_decimal(micros: int, text: str) -> None:
    assert decimal_text(micros) == text


@given(st.integers(min_value=-(10**18), max_value=10**18))
def test_decimal_text_reads_back_as_the_same_micros(micros: int) -> None:
    assert Decimal(decimal_text(micros)).scaleb(6) == micros
