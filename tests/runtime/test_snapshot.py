"""The action snapshot: plain data taken first, subclasses converted, the rest denied."""

from __future__ import annotations

import collections
import dataclasses
import enum
import math
import sys
from collections.abc import Iterator
from types import MappingProxyType
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from runtime import EvaluationError, UnsupportedValue
from runtime._snapshot import (
    MAX_INT_DIGITS,
    InvalidAction,
    SnapshotLimitExceeded,
    Snapshotter,
)
from tests.strategies import (
    LyingBytes,
    LyingDict,
    LyingFloat,
    LyingInt,
    LyingList,
    LyingStr,
    LyingTuple,
    argument_dicts,
    disguised,
    plain_form,
)

SNAP = Snapshotter()


def take(args: object, **names: object) -> dict[str, Any]:
    fields = {"agent": "a", "verb": "v", "resource": "r", **names}
    return SNAP.take(fields["agent"], fields["verb"], fields["resource"], args).args


def containers(value: object) -> Iterator[object]:
    """Every mutable container inside ``value`` (itself included)."""
    if isinstance(value, dict):
        yield value
        for item in dict.values(value):
            yield from containers(item)
    elif isinstance(value, list):
        yield value
        for item in list.copy(value):
            yield from containers(item)
    elif isinstance(value, tuple):
        for item in tuple.__iter__(value):
            yield from containers(item)


# --- plain data ----------------------------------------------------------------------


@given(argument_dicts())
def test_plain_data_is_copied_exactly_and_shares_no_container(args: dict[str, Any]) -> None:
    snapshot = take(args)
    assert snapshot == plain_form(args)
    mine = {id(c) for c in containers(snapshot)}
    theirs = {id(c) for c in containers(args)}
    assert not mine & theirs


def test_tuples_become_lists_and_types_stay_exact() -> None:
    snapshot = take({"t": (1, (2.5, "x")), "b": b"\x00", "n": None, "f": False})
    assert snapshot == {"t": [1, [2.5, "x"]], "b": b"\x00", "n": None, "f": False}
    assert type(snapshot["t"]) is list
    assert type(snapshot["t"][1]) is list
    assert snapshot["f"] is False


def test_mutating_the_input_afterwards_changes_nothing() -> None:
    args: dict[str, Any] = {"limit": 5, "items": [{"id": 1}]}
    snapshot = take(args)
    args["limit"] = 10**9
    args["items"][0]["id"] = "changed"
    args["items"].append("more")
    assert snapshot == {"limit": 5, "items": [{"id": 1}]}


# --- disguised data: subclasses are read through their base type --------------------


@given(argument_dicts().flatmap(lambda args: st.tuples(st.just(args), disguised(args))))
def test_a_disguised_value_snapshots_as_the_value_it_disguises(
    pair: tuple[dict[str, Any], object],
) -> None:
    plain, hostile = pair
    snapshot = take(hostile)
    assert snapshot == plain_form(plain)
    for container in containers(snapshot):
        assert type(container) in (dict, list)
    assert "LIE" not in repr(snapshot) or "LIE" in repr(plain)


@pytest.mark.parametrize(
    ("hostile", "plain"),
    [
        (LyingStr("text"), "text"),
        (LyingInt(7), 7),
        (LyingFloat(2.5), 2.5),
        (LyingBytes(b"raw"), b"raw"),
        (LyingDict({"k": 1}), {"k": 1}),
        (LyingList([1, 2]), [1, 2]),
        (LyingTuple((1, 2)), [1, 2]),
        (collections.OrderedDict(k=1), {"k": 1}),
        (collections.defaultdict(int, k=1), {"k": 1}),
        (collections.namedtuple("Point", "x y")(1, 2), [1, 2]),
    ],
)
def test_each_subclass_becomes_its_base_type(hostile: object, plain: object) -> None:
    value = take({"v": hostile})["v"]
    assert value == plain
    assert type(value) is type(plain)


def test_str_and_int_enums_are_their_values() -> None:
    class Colour(enum.StrEnum):
        RED = "red"

    class Level(enum.IntEnum):
        HIGH = 3

    snapshot = take({"c": Colour.RED, "l": Level.HIGH, Colour.RED: 1})
    assert snapshot == {"c": "red", "l": 3, "red": 1}
    assert type(snapshot["c"]) is str
    assert type(snapshot["l"]) is int
    assert all(type(key) is str for key in snapshot)


class DistinctKey(str):
    """A key equal only to itself: a dict can hold it beside a plain key of the same text."""

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        return self is other

    def __hash__(self) -> int:
        return id(self)


def test_a_subclass_key_is_converted_and_a_colliding_one_denies() -> None:
    assert take({LyingStr("k"): 1}) == {"k": 1}
    colliding = {DistinctKey("k"): 1, "k": 2}
    assert len(colliding) == 2
    with pytest.raises(UnsupportedValue, match="repeats another key") as raised:
        take({"outer": colliding})
    assert raised.value.path == "$.outer{key #1}"


# --- what is not plain data denies ---------------------------------------------------


@dataclasses.dataclass
class Point:
    x: int


class Plainly(enum.Enum):
    A = 1


def _generator() -> Iterator[int]:
    yield 1


@pytest.mark.parametrize(
    ("value", "type_name"),
    [
        (Point(1), "Point"),
        (Plainly.A, "Plainly"),
        ({1, 2}, "set"),
        (frozenset(), "frozenset"),
        (_generator(), "generator"),
        ({"a": 1}.keys(), "dict_keys"),
        ({"a": 1}.values(), "dict_values"),
        (memoryview(b"x"), "memoryview"),
        (bytearray(b"x"), "bytearray"),
        (collections.deque([1]), "deque"),
        (collections.UserString("x"), "UserString"),
        (collections.UserDict(a=1), "UserDict"),
        (MappingProxyType({"a": 1}), "mappingproxy"),
        (object(), "object"),
        (1j, "complex"),
        (range(3), "range"),
    ],
)
def test_values_that_are_not_plain_data_deny_naming_their_type(
    value: object, type_name: str
) -> None:
    with pytest.raises(UnsupportedValue) as raised:
        take({"outer": [{"inner": value}]})
    assert raised.value.type_name == type_name
    assert raised.value.path == "$.outer[0].inner"
    assert f"argument $.outer[0].inner is a {type_name}, which is not plain data" in str(
        raised.value
    )
    assert isinstance(raised.value, EvaluationError)
    assert isinstance(raised.value, TypeError)


@pytest.mark.parametrize("key", [1, None, True, (1, 2), frozenset({"a"}), b"bytes", 1.5])
def test_a_non_string_key_denies(key: object) -> None:
    with pytest.raises(UnsupportedValue, match="keys must be strings") as raised:
        take({"ok": 1, "nested": {"fine": 0, key: "v"}})
    assert raised.value.path == "$.nested{key #1}"


@pytest.mark.parametrize("number", [math.nan, math.inf, -math.inf, LyingFloat(math.nan)])
def test_nan_and_infinities_deny(number: float) -> None:
    with pytest.raises(UnsupportedValue, match="floats must be finite"):
        take({"amount": number})


@pytest.mark.parametrize("text", ["\ud800", "ok\udfffok", LyingStr("\udc00")])
def test_lone_surrogates_deny_in_values_and_keys(text: str) -> None:
    with pytest.raises(UnsupportedValue, match="lone surrogate"):
        take({"v": text})
    with pytest.raises(UnsupportedValue, match="lone surrogate"):
        take({text: 1})


def test_integers_up_to_the_conversion_limit_pass_and_longer_ones_deny() -> None:
    largest = int("9" * MAX_INT_DIGITS)
    assert take({"n": largest})["n"] == largest
    assert take({"n": -largest})["n"] == -largest
    with pytest.raises(UnsupportedValue, match=f"more than {MAX_INT_DIGITS} digits"):
        take({"n": largest * 10})
    with pytest.raises(UnsupportedValue, match="digits"):
        take({"n": 1 << 100_000})  # denied without being converted to text


def test_huge_integers_are_refused_even_when_python_would_print_them() -> None:
    old = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(0)  # a host that lifted the limit
    try:
        with pytest.raises(UnsupportedValue, match="digits"):
            take({"n": 10**5000})
    finally:
        sys.set_int_max_str_digits(old)


# --- to_data ------------------------------------------------------------------------


def test_to_data_converts_what_is_not_plain_once_per_value() -> None:
    calls: list[object] = []

    def to_data(value: object) -> object:
        calls.append(value)
        assert isinstance(value, Point)
        return {"x": value.x, "nested": (value.x,)}

    snapshot = Snapshotter(to_data=to_data).take("a", "v", "r", {"p": Point(3), "q": [Point(4)]})
    assert snapshot.args == {"p": {"x": 3, "nested": [3]}, "q": [{"x": 4, "nested": [4]}]}
    assert len(calls) == 2


def test_to_data_may_convert_the_arguments_themselves() -> None:
    snapshot = Snapshotter(to_data=lambda value: {"x": 1}).take("a", "v", "r", Point(1))
    assert snapshot.args == {"x": 1}


def test_what_to_data_returns_must_be_plain() -> None:
    with pytest.raises(UnsupportedValue, match="what to_data returned for a Point: a set"):
        Snapshotter(to_data=lambda value: {1}).take("a", "v", "r", {"p": Point(1)})
    # A converter that returns its input is not a loop: the value is denied.
    with pytest.raises(UnsupportedValue, match="a Point, which is not plain data"):
        Snapshotter(to_data=lambda value: value).take("a", "v", "r", {"p": Point(1)})


def test_to_data_that_converts_args_to_a_non_dict_denies() -> None:
    with pytest.raises(InvalidAction, match="args must be a dict, not list"):
        Snapshotter(to_data=lambda value: [1]).take("a", "v", "r", Point(1))


def test_to_data_errors_propagate_for_the_gate_to_deny() -> None:
    def to_data(value: object) -> object:
        raise LookupError("the host's converter failed")

    with pytest.raises(LookupError):
        Snapshotter(to_data=to_data).take("a", "v", "r", {"p": Point(1)})


def test_to_data_must_be_callable() -> None:
    with pytest.raises(TypeError, match="callable"):
        Snapshotter(to_data=42)  # type: ignore[arg-type]


# --- bounds -------------------------------------------------------------------------


def nested(levels: int, make: Any = lambda inner: {"x": inner}) -> Any:
    value: Any = "leaf"
    for _ in range(levels):
        value = make(value)
    return value


def test_depth_bound_is_exact() -> None:
    snap = Snapshotter(max_depth=4)
    # The arguments are depth 0; four more levels of containers are allowed.
    assert snap.take("a", "v", "r", nested(5)).args == nested(5)
    with pytest.raises(SnapshotLimitExceeded, match="max_depth 4") as raised:
        snap.take("a", "v", "r", nested(6))
    assert raised.value.bound == "max_depth"
    assert raised.value.limit == 4
    with pytest.raises(SnapshotLimitExceeded):
        snap.take("a", "v", "r", {"l": nested(5, lambda inner: [inner])})
    with pytest.raises(SnapshotLimitExceeded):  # an empty container is still a container
        snap.take("a", "v", "r", nested(5, lambda inner: {"x": inner if inner != "leaf" else {}}))


def test_cycles_end_at_the_depth_bound_without_recursion_errors() -> None:
    loop: list[Any] = []
    loop.append(loop)
    mapping: dict[str, Any] = {}
    mapping["self"] = mapping
    for value in (loop, mapping):
        with pytest.raises(SnapshotLimitExceeded, match="cyclic"):
            take({"v": value})


def test_twenty_thousand_levels_deny_at_the_bound() -> None:
    with pytest.raises(SnapshotLimitExceeded):
        take(nested(20_000))


def test_size_bound_counts_text_bytes_and_values() -> None:
    snap = Snapshotter(max_bytes=100)
    # dict (1) + key "k" (1 + 1) + value "é" * 48 (1 + 96 UTF-8 bytes) = 100
    assert snap.take("a", "v", "r", {"k": "é" * 48}).args == {"k": "é" * 48}
    with pytest.raises(SnapshotLimitExceeded, match="max_bytes 100") as raised:
        snap.take("a", "v", "r", {"k": "é" * 49})
    assert raised.value.bound == "max_bytes"
    with pytest.raises(SnapshotLimitExceeded):
        snap.take("a", "v", "r", {"k": [None] * 98})  # 1 + 2 + 1 + 98 > 100
    assert snap.take("a", "v", "r", {"k": [None] * 96}).args == {"k": [None] * 96}
    with pytest.raises(SnapshotLimitExceeded):
        snap.take("a", "v", "r", {"k": b"x" * 97})


def test_one_shared_list_many_times_costs_each_time() -> None:
    shared = [0] * 1000
    with pytest.raises(SnapshotLimitExceeded):
        Snapshotter(max_bytes=50_000).take("a", "v", "r", {"k": [shared] * 100})


@pytest.mark.parametrize("bound", ["max_name_chars", "max_depth", "max_bytes"])
@pytest.mark.parametrize("value", [0, -1, 1.5, True])
def test_bounds_must_be_positive_integers(bound: str, value: object) -> None:
    with pytest.raises(ValueError, match=bound):
        Snapshotter(**{bound: value})  # type: ignore[arg-type]


# --- names ---------------------------------------------------------------------------


@pytest.mark.parametrize("field", ["agent", "verb", "resource"])
def test_names_up_to_the_bound_pass_and_longer_ones_deny(field: str) -> None:
    snap = Snapshotter(max_name_chars=10)
    names = {"agent": "a", "verb": "v", "resource": "r"}
    snapshot = snap.take(*{**names, field: "x" * 10}.values(), {})
    assert getattr(snapshot, field) == "x" * 10
    with pytest.raises(InvalidAction, match=f"action {field} is 11 characters long"):
        snap.take(*{**names, field: "x" * 11}.values(), {})


@pytest.mark.parametrize("field", ["agent", "verb", "resource"])
@pytest.mark.parametrize(
    ("char", "kind"),
    [
        ("\x00", "control character"),
        ("\n", "control character"),
        ("\x1f", "control character"),
        ("\x7f", "control character"),
        ("\x85", "control character"),
        ("\x9f", "control character"),
        ("\u202e", "control character"),
        ("\u2066", "control character"),
        ("\ud800", "lone surrogate"),
    ],
)
def test_names_with_control_characters_deny(field: str, char: str, kind: str) -> None:
    with pytest.raises(InvalidAction, match=f"action {field} holds a {kind}"):
        take({}, **{field: f"ok{char}ok"})


@pytest.mark.parametrize("char", [" ", "\xa0", "é", "/", "\u2028x"[1], "😀"])
def test_ordinary_characters_are_fine_in_names(char: str) -> None:
    assert SNAP.take(f"a{char}", "v", "r", {}).agent == f"a{char}"


@pytest.mark.parametrize("field", ["agent", "verb", "resource"])
@pytest.mark.parametrize("value", [42, None, b"bytes", ["x"]])
def test_names_must_be_strings(field: str, value: object) -> None:
    with pytest.raises(InvalidAction, match=f"action {field} must be a string"):
        take({}, **{field: value})


def test_name_subclasses_are_converted() -> None:
    snapshot = SNAP.take(LyingStr("agent"), LyingStr("verb"), LyingStr("res"), {})
    assert (snapshot.agent, snapshot.verb, snapshot.resource) == ("agent", "verb", "res")
    assert type(snapshot.agent) is str


@pytest.mark.parametrize("args", [[("k", 1)], "k=1", MappingProxyType({"k": 1}), None])
def test_args_must_be_a_dict(args: object) -> None:
    with pytest.raises(InvalidAction, match="action args must be a dict"):
        take(args)


# --- what each value costs, exactly (the size budget of the module docstring) ----------


def costs_exactly(value: object, cost: int) -> None:
    """``{"k": value}`` fits a budget of its cost and not one byte less."""
    total = 1 + (1 + 1) + cost  # the dict, the key "k", the value
    assert Snapshotter(max_bytes=total).take("a", "v", "r", {"k": value}).args == {
        "k": plain_form(value)
    }
    with pytest.raises(SnapshotLimitExceeded):
        Snapshotter(max_bytes=total - 1).take("a", "v", "r", {"k": value})


def integer_cost(bits: int) -> int:
    # One for the value, plus an upper bound of its digits: 1 + floor(bits * 0.30103).
    return 1 + 1 + bits * 30103 // 100_000


@pytest.mark.parametrize(
    ("value", "cost"),
    [
        ("abc", 1 + 3),
        (LyingStr("abc"), 1 + 3),
        ("é", 1 + 2),  # UTF-8 bytes, not characters
        ("", 1),
        (None, 1),
        (True, 1),
        (1.5, 1 + 8),
        (LyingFloat(1.5), 1 + 8),
        (b"xy", 1 + 2),
        (LyingBytes(b"xy"), 1 + 2),
        ([], 1),
        ([None, None], 1 + 1 + 1),
        ((None,), 1 + 1),
        ({}, 1),
        ({"ab": None}, 1 + (1 + 2) + 1),
        (0, 2),
        (LyingInt(7), integer_cost(3)),
    ],
    ids=repr,
)
def test_each_value_costs_what_the_budget_says(value: object, cost: int) -> None:
    costs_exactly(value, cost)


# Bit lengths where the digit bound 1 + floor(bits * 0.30103) is one below or at a step:
# any other constant in it (0.30102, 0.30104, a divisor one off) counts one differently.
@pytest.mark.parametrize("bits", [1, 4, 196, 289, 485, 681, 14_000])
def test_an_integer_costs_one_plus_a_digit_bound_read_off_its_bit_length(bits: int) -> None:
    value = 1 << (bits - 1)
    assert len(str(value)) <= integer_cost(bits) - 1  # the bound holds
    costs_exactly(value, integer_cost(bits))
    costs_exactly(-value, integer_cost(bits))


def test_the_integer_limit_is_pythons_own_conversion_limit() -> None:
    digits = sys.int_info.default_max_str_digits  # 4300
    assert digits == MAX_INT_DIGITS
    assert take({"n": 10**digits - 1})["n"] == 10**digits - 1
    for value in (10**digits, -(10**digits)):
        with pytest.raises(UnsupportedValue) as raised:
            take({"n": value})
        assert (raised.value.type_name, raised.value.path) == ("int", "$.n")
        assert raised.value.problem == f"an integer of more than {digits} digits"


@pytest.mark.parametrize(
    ("number", "problem"),
    [
        (math.nan, "NaN (floats must be finite)"),
        (math.inf, "an infinite float (floats must be finite)"),
        (-math.inf, "an infinite float (floats must be finite)"),
    ],
)
def test_a_float_that_is_not_finite_is_named_for_what_it_is(number: float, problem: str) -> None:
    with pytest.raises(UnsupportedValue) as raised:
        take({"x": [number]})
    assert (raised.value.type_name, raised.value.path, raised.value.problem) == (
        "float",
        "$.x[0]",
        problem,
    )


def test_text_problems_name_str_as_the_type() -> None:
    with pytest.raises(UnsupportedValue) as raised:
        take({"x": "ok\udfff"})
    assert (raised.value.type_name, raised.value.path) == ("str", "$.x")
    assert raised.value.problem == "a string with a lone surrogate at index 2 (not Unicode text)"
    with pytest.raises(UnsupportedValue) as raised:
        take({DistinctKey("k"): 1, "k": 2})
    assert (raised.value.type_name, raised.value.path) == ("str", "${key #1}")


@pytest.mark.parametrize(
    ("key", "segment"),
    [
        ("plain_key", ".plain_key"),
        ("_" + "a" * 63, "._" + "a" * 63),  # an identifier of 64 characters
        ("a-b", '["a-b"]'),
        ("9lives", '["9lives"]'),
        ('say "hi"\\', '["say \\"hi\\"\\\\"]'),
        ("k" * 65, '["' + "k" * 61 + '..."]'),  # too long to be an identifier, shortened
        ("-" * 64, '["' + "-" * 64 + '"]'),
        ("-" * 65, '["' + "-" * 61 + '..."]'),
    ],
)
def test_the_path_of_a_value_names_its_key_safely(key: str, segment: str) -> None:
    with pytest.raises(UnsupportedValue) as raised:
        take({key: {1, 2}})
    assert raised.value.path == "$" + segment


def test_the_path_names_list_indexes_and_nested_keys() -> None:
    with pytest.raises(UnsupportedValue) as raised:
        take({"a": [0, {"b": [None, None, {3}]}]})
    assert raised.value.path == "$.a[1].b[2]"


def test_lists_count_towards_the_depth_bound_one_level_each() -> None:
    snap = Snapshotter(max_depth=3)
    three = nested(3, lambda inner: [inner])  # the arguments are depth 0, its lists 1-3
    assert snap.take("a", "v", "r", {"l": three}).args == {"l": three}
    assert snap.take("a", "v", "r", {"l": [[[]]]}).args == {"l": [[[]]]}
    with pytest.raises(SnapshotLimitExceeded):
        snap.take("a", "v", "r", {"l": nested(4, lambda inner: [inner])})
    with pytest.raises(SnapshotLimitExceeded):
        snap.take("a", "v", "r", {"l": [[[[]]]]})


def test_the_default_bounds_are_4096_characters_32_levels_and_a_mebibyte() -> None:
    snap = Snapshotter()
    assert snap.name("agent", "a" * 4096) == "a" * 4096
    with pytest.raises(InvalidAction, match="4097 characters long; at most 4096"):
        snap.name("agent", "a" * 4097)
    assert snap.take("a", "v", "r", nested(33)).args == nested(33)  # depths 0-32
    with pytest.raises(SnapshotLimitExceeded, match="max_depth 32"):
        snap.take("a", "v", "r", nested(34))
    fits = {"k": "x" * ((1 << 20) - 4)}  # 1 + 2 + (1 + len)
    assert snap.take("a", "v", "r", fits).args == fits
    with pytest.raises(SnapshotLimitExceeded, match=f"max_bytes {1 << 20}"):
        snap.take("a", "v", "r", {"k": "x" * ((1 << 20) - 3)})


def test_bounds_of_one_are_accepted() -> None:
    snap = Snapshotter(max_name_chars=1, max_depth=1, max_bytes=1)
    assert snap.take("a", "v", "r", {}).args == {}
    with pytest.raises(InvalidAction):
        snap.name("agent", "ab")


@pytest.mark.parametrize(
    ("char", "kind"),
    [
        (chr(0xD800), "a lone surrogate"),
        (chr(0xDFFF), "a lone surrogate"),
        ("\x9f", "a control character"),
    ],
)
def test_a_forbidden_character_in_a_name_is_called_what_it_is(char: str, kind: str) -> None:
    with pytest.raises(InvalidAction) as raised:
        SNAP.name("verb", "ab" + char)
    assert raised.value.problem == f"holds {kind} (U+{ord(char):04X}) at index 2"


def test_a_snapshot_is_frozen() -> None:
    snapshot = SNAP.take("a", "v", "r", {})
    with pytest.raises(dataclasses.FrozenInstanceError):
        snapshot.agent = "other"  # type: ignore[misc]
