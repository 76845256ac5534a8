"""Canonical bytes (records) and RFC 8785 bytes (user values): one encoder."""

from __future__ import annotations

import enum
import json
import math
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from runtime import (
    CanonicalEncodingError,
    StrictJSONError,
    canonical_bytes,
    content_address,
    jcs_bytes,
    loads_strict,
    sha256_hex,
)
from tests.strategies import json_values, records


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        # RFC 8785 appendix B and ECMAScript Number.prototype.toString.
        (0.0, "0"),
        (-0.0, "0"),
        (1.0, "1"),
        (100.0, "100"),
        (0.1, "0.1"),
        (2.5, "2.5"),
        (1e21, "1e+21"),
        (1e20, "100000000000000000000"),
        (1e-7, "1e-7"),
        (0.000001, "0.000001"),
        (5e-324, "5e-324"),
        (1.7976931348623157e308, "1.7976931348623157e+308"),
        (333333333.3333333, "333333333.3333333"),
        (-1.5e-9, "-1.5e-9"),
        (123456789012345680000.0, "123456789012345680000"),
    ],
)
def test_floats_use_the_ecmascript_shortest_form(value: float, expected: str) -> None:
    assert jcs_bytes(value).decode() == expected


def test_keys_sort_by_utf16_code_units_not_code_points() -> None:
    # U+1F600 is a surrogate pair (D83D DE00) and sorts before U+FB33 in UTF-16.
    encoded = jcs_bytes({"\ufb33": 1, "\U0001f600": 2, "a": 3, "€": 4}).decode()
    assert encoded == '{"a":3,"€":4,"\U0001f600":2,"\ufb33":1}'


def test_records_are_compact_sorted_utf8_with_non_ascii_kept() -> None:
    data = canonical_bytes({"b": [1, None, True], "a": "é\n\x01"})
    assert data == '{"a":"é\\n\\u0001","b":[1,null,true]}'.encode()
    assert content_address({"b": [1, None, True], "a": "é\n\x01"}) == sha256_hex(data)


@pytest.mark.parametrize(
    "record",
    [
        {"x": 1.5},
        {"x": 2**63},
        {"x": -(2**63) - 1},
        {"x": b"bytes"},
        {"x": {1: "non-string key"}},
        {"x": "\ud800"},
    ],
)
def test_records_reject_what_json_cannot_hold_exactly(record: dict[str, Any]) -> None:
    with pytest.raises(CanonicalEncodingError):
        canonical_bytes(record)


def test_int64_bounds_are_accepted_in_records() -> None:
    assert canonical_bytes({"a": 2**63 - 1, "b": -(2**63)}) == (
        b'{"a":9223372036854775807,"b":-9223372036854775808}'
    )


def test_tagged_forms_for_values_json_cannot_hold() -> None:
    class Opaque:
        def __str__(self) -> str:
            raise RuntimeError("never called")

        __repr__ = __str__

    encoded = json.loads(
        jcs_bytes(
            {
                "b": b"\x00\xff",
                "nan": math.nan,
                "inf": -math.inf,
                "s": {2, 1},
                "o": Opaque(),
                "t": (1, 2),
            }
        )
    )
    assert encoded == {
        "b": {"$ghost": "bytes", "base64": "AP8="},
        "nan": {"$ghost": "float", "value": "nan"},
        "inf": {"$ghost": "float", "value": "-inf"},
        "s": {"$ghost": "set", "items": [1, 2]},
        "o": {"$ghost": "object", "type": f"{Opaque.__module__}.{Opaque.__qualname__}"},
        "t": [1, 2],
    }


def test_user_data_cannot_forge_a_tag() -> None:
    forged = {"$ghost": "bytes", "base64": "AP8="}
    assert jcs_bytes(forged) != jcs_bytes(b"\x00\xff")
    assert jcs_bytes({1: "a"}) != jcs_bytes({"1": "a"})


def test_cycles_and_deep_nesting_raise_the_typed_error() -> None:
    cycle: list[Any] = []
    cycle.append(cycle)
    with pytest.raises(CanonicalEncodingError, match="deeper"):
        jcs_bytes(cycle)
    deep: Any = "leaf"
    for _ in range(20_000):
        deep = [deep]
    with pytest.raises(CanonicalEncodingError, match="deeper"):
        jcs_bytes(deep)


def as_doubles(value: Any) -> Any:
    """The value as an RFC 8785 (ECMAScript) reader sees it: every number a double."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, list):
        return [as_doubles(v) for v in value]
    return {k: as_doubles(v) for k, v in value.items()}


@given(json_values())
def test_jcs_of_json_values_parses_back_to_an_equal_value(value: Any) -> None:
    data = jcs_bytes(value)
    assert as_doubles(json.loads(data)) == as_doubles(value)
    # Canonical: re-encoding the parsed value gives the same bytes.
    assert jcs_bytes(json.loads(data)) == data


@given(records())
def test_record_bytes_are_independent_of_key_insertion_order(record: dict[str, Any]) -> None:
    reversed_record = dict(reversed(list(record.items())))
    assert canonical_bytes(record) == canonical_bytes(reversed_record)
    assert json.loads(canonical_bytes(record)) == record


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (b'{"a": 1, "a": 2}', "appears twice"),
        (b'{"a": NaN}', "NaN is not a JSON number"),
        (b"[-Infinity]", "-Infinity is not a JSON number"),
        (b'"\xff"', "not UTF-8"),
    ],
)
def test_loads_strict_refuses_ambiguous_json(data: bytes, why: str) -> None:
    with pytest.raises(StrictJSONError, match=why):
        loads_strict(data)


@given(records())
def test_loads_strict_reads_back_what_the_encoder_wrote(record: dict[str, Any]) -> None:
    assert loads_strict(canonical_bytes(record)) == record
    assert loads_strict(canonical_bytes(record).decode()) == record


def exact_walker(value: Any, *, strict: bool) -> bytes:
    """The encoder without its fast path (white-box: the two must never disagree)."""
    from runtime._canonical import _encode

    parts: list[str] = []
    _encode(value, parts, 0, strict=strict)
    return "".join(parts).encode()


@given(json_values(floats=False))
def test_the_fast_path_writes_exactly_what_the_exact_walker_writes(value: Any) -> None:
    assert jcs_bytes(value) == exact_walker(value, strict=False)
    record = {"v": value}
    assert canonical_bytes(record) == exact_walker(record, strict=True)


@given(
    st.dictionaries(st.text(alphabet="a\ue000\uffff\U0001f600\U00010000", max_size=3), st.none())
)
def test_keys_beyond_u_e000_sort_by_utf16_whichever_path_is_taken(value: dict[str, None]) -> None:
    assert jcs_bytes(value) == exact_walker(value, strict=False)


class _Text(str):
    """A str subclass whose methods lie: encoders must use its value, not its methods."""

    def __str__(self) -> str:
        return "lie"


class _Level(enum.IntEnum):
    LOW = 1
    HIGH = 2**63 - 1


_plain_leaves = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.sampled_from([-(2**63), 2**63 - 1, 0, -1]),
    st.text(st.characters(codec=None, exclude_categories=()), max_size=12),  # lone surrogates too
    st.text(max_size=6).map(_Text),
    st.sampled_from(list(_Level)),
)
_plain_values = st.recursive(
    _plain_leaves,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.lists(inner, max_size=4).map(tuple),
        st.dictionaries(
            st.text(st.characters(max_codepoint=0xDFFF), max_size=5), inner, max_size=4
        ),
    ),
    max_leaves=20,
)


def _outcome(encode: Callable[[], bytes]) -> bytes | type[Exception]:
    try:
        return encode()
    except CanonicalEncodingError as exc:
        return type(exc)


@given(_plain_values)
def test_orjson_the_stdlib_encoder_and_the_walker_agree_on_every_plain_value(value: Any) -> None:
    from runtime._canonical import _dumps, _is_plain, _plain_bytes, _utf8

    assert _is_plain(value, 0)
    fast = _outcome(lambda: _plain_bytes(value))
    assert fast == _outcome(lambda: _utf8(_dumps(value)))
    assert fast == _outcome(lambda: exact_walker_checked(value, strict=False))
    record = {"v": value}
    assert _outcome(lambda: canonical_bytes(record)) == _outcome(
        lambda: exact_walker_checked(record, strict=True)
    )


def exact_walker_checked(value: Any, *, strict: bool) -> bytes:
    from runtime._canonical import _encode, _utf8

    parts: list[str] = []
    _encode(value, parts, 0, strict=strict)
    return _utf8("".join(parts))


@pytest.mark.parametrize("depth", [250, 254, 255, 256])
def test_nesting_near_either_encoders_limit_gives_the_walkers_bytes(depth: int) -> None:
    # orjson stops at its own depth limit, below ghost's MAX_DEPTH: the fallback writes it.
    value: Any = "x"
    for _ in range(depth):
        value = [value]
    assert jcs_bytes(value) == exact_walker_checked(value, strict=False)
