"""The reader's two JSON paths give one answer (ADR 0026).

`parse_record` accepts orjson's value only when orjson writes it back as the
stored bytes; everything else goes to the strict parser. These tests hold the
whole function to the strict parser alone, on bytes written every way that
matters: canonical, re-ordered, with duplicate keys, NaN, big integers, lone
surrogates, floats, whitespace, a byte-order mark, deep nesting.
"""

from __future__ import annotations

import contextlib
import json
from typing import Any

import orjson
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from audit._parse import _parse_strictly, parse_record

_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(alphabet=st.characters(codec=None), max_size=8)
)
_values = st.recursive(
    _scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=4)
    ),
    max_leaves=12,
)


def _same(left: Any, right: Any) -> bool:
    """Equal, and of the same types all the way down (1 is not 1.0, nor True)."""
    if type(left) is not type(right):
        return False
    if isinstance(left, dict):
        return list(left) == list(right) and all(_same(left[k], right[k]) for k in left)
    if isinstance(left, list):
        return len(left) == len(right) and all(map(_same, left, right))
    if isinstance(left, float) and left != left:
        return right != right
    return bool(left == right)


def _assert_one_answer(data: bytes) -> None:
    fast, fast_problem = parse_record(data)
    strict, strict_problem = _parse_strictly(data)
    assert fast_problem == strict_problem
    if strict is None:
        assert fast is None
    else:
        assert fast is not None
        assert _same(dict(fast), dict(strict))


def _encodings(value: object) -> list[bytes]:
    out: list[bytes] = []
    for options in (orjson.OPT_SORT_KEYS, 0):
        with contextlib.suppress(orjson.JSONEncodeError, TypeError):
            out.append(orjson.dumps(value, option=options))
    for ensure_ascii in (False, True):
        try:
            text = json.dumps(
                value, sort_keys=True, separators=(",", ":"), ensure_ascii=ensure_ascii
            )
            out.append(text.encode("utf-8", "surrogatepass"))
        except (ValueError, TypeError):
            pass
    return out


@given(st.dictionaries(st.text(max_size=4), _values, max_size=5))
def test_every_encoding_of_an_object_gets_the_strict_answer(value: dict[str, Any]) -> None:
    for data in _encodings(value):
        _assert_one_answer(data)


@given(st.dictionaries(st.text(max_size=4), _values, min_size=1, max_size=5), st.data())
def test_a_duplicated_key_is_refused_on_both_paths(
    value: dict[str, Any], data: st.DataObject
) -> None:
    def compact(obj: object) -> bytes:
        text = json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        return text.encode("utf-8", "surrogatepass")

    key = data.draw(st.sampled_from(sorted(value)))
    # The same key again, with the same value: orjson would keep one and write it back shorter.
    twice = compact(value)[:-1] + b"," + compact({key: value[key]})[1:]
    _assert_one_answer(twice)
    assert parse_record(twice)[0] is None


@given(st.binary(max_size=40))
def test_any_bytes_get_the_strict_answer(data: bytes) -> None:
    _assert_one_answer(data)


@pytest.mark.parametrize(
    "data",
    [
        b'{"a":1}',
        b'{"a":1,"a":1}',
        b'{"a":NaN}',
        b'{"a":Infinity}',
        b'{"a":100000000000000000000}',
        b'{"a":18446744073709551616}',
        b'{"a":-9223372036854775809}',
        b'{"a":9223372036854775807}',
        b'{"a":1e+20}',
        b'{"a":1.0}',
        b'{"a":-0.0}',
        b'{"a":"\\ud800"}',
        b'{"a":"\\ud83d\\ude00"}',
        b'{"a":"\xed\xa0\x80"}',
        b"\xef\xbb\xbf{}",
        b'{"b":1,"a":2}',
        b'{ "a":1}',
        b"[1]",
        b'"x"',
        b"",
        b"[" * 300 + b"]" * 300,
        b'{"a":' + b"[" * 300 + b"]" * 300 + b"}",
        b'{"a":' + b"[" * 100_000 + b"]" * 100_000 + b"}",
    ],
)
def test_edge_cases_get_the_strict_answer(data: bytes) -> None:
    _assert_one_answer(data)


@example(2**63)
@example(-(2**63) - 1)
@example(2**64)
@given(st.integers())
def test_integers_of_any_size(number: int) -> None:
    _assert_one_answer(b'{"n":' + str(number).encode() + b"}")
