"""Strict W3C traceparent / tracestate parsing."""

from __future__ import annotations

import dataclasses
import re
import sys
import types
from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

import runtime._traceparent as traceparent_module
from runtime import TraceContextError, parse_traceparent, parse_tracestate
from runtime._traceparent import TraceParent, bound_tracestate, make_span_id, make_trace_id
from tests.runtime.scaling import assert_linear
from tests.strategies import (
    invalid_tracestate_members,
    tracestate_headers,
    tracestate_members,
)

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
SPAN_ID = "00f067aa0ba902b7"
VALID = f"00-{TRACE_ID}-{SPAN_ID}-01"
# OpenTelemetry's Python API's key grammar (W3C Level 1), written out to compare against.
OTEL_KEY = re.compile(
    r"[a-z][_0-9a-z\-*/]{0,255}|[a-z0-9][_0-9a-z\-*/]{0,240}@[a-z][_0-9a-z\-*/]{0,13}"
)


def test_valid_header_parses_to_its_fields() -> None:
    parsed = parse_traceparent(VALID)
    assert (parsed.trace_id, parsed.span_id, parsed.trace_flags, parsed.version) == (
        TRACE_ID,
        SPAN_ID,
        1,
        0,
    )
    assert parsed.sampled
    assert parsed.header() == VALID


def test_http_whitespace_is_trimmed() -> None:
    assert parse_traceparent(f" \t{VALID}\t ").header() == VALID


def test_future_version_is_accepted_and_reemitted_as_00() -> None:
    parsed = parse_traceparent(f"cc-{TRACE_ID}-{SPAN_ID}-01-what-the-future-holds")
    assert parsed.version == 0xCC
    assert parsed.header() == VALID


@pytest.mark.parametrize(
    ("header", "why"),
    [
        (VALID.upper(), "lowercase"),
        (f"00-{TRACE_ID.upper()}-{SPAN_ID}-01", "lowercase"),
        (f"00-{'0' * 32}-{SPAN_ID}-01", "trace-id is all zeros"),
        (f"00-{TRACE_ID}-{'0' * 16}-01", "parent-id is all zeros"),
        (f"ff-{TRACE_ID}-{SPAN_ID}-01", "version ff"),
        (f"{VALID}-extra", "data after the flags"),
        (f"{VALID}0", "data after the flags"),
        (f"00-{TRACE_ID[:-1]}-{SPAN_ID}-01", "lowercase hex"),
        (f"00-{TRACE_ID}0-{SPAN_ID}-01", "lowercase hex"),
        (f"00-{TRACE_ID}-{SPAN_ID[:-1]}-01", "lowercase hex"),
        (f"00-{TRACE_ID}-{SPAN_ID}-1", "lowercase hex"),
        (f"0-{TRACE_ID}-{SPAN_ID}-01", "lowercase hex"),
        (f"cc-{TRACE_ID}-{SPAN_ID}-01x", "lacks a '-'"),
        ("", "lowercase hex"),
        ("00-xyz", "lowercase hex"),
        ("x" * 10_000, "longer than"),
    ],
)
def test_invalid_headers_are_rejected_without_echoing_them(header: str, why: str) -> None:
    with pytest.raises(TraceContextError, match=why) as info:
        parse_traceparent(header)
    assert header.strip() not in str(info.value) or not header.strip()


def test_non_string_is_rejected() -> None:
    with pytest.raises(TraceContextError, match="must be a string"):
        parse_traceparent(b"00-...")  # type: ignore[arg-type]


@given(st.text(max_size=80))
def test_arbitrary_text_parses_or_raises_the_typed_error(text: str) -> None:
    try:
        parsed = parse_traceparent(text)
    except TraceContextError:
        return
    # Anything accepted round-trips to a canonical, strictly valid header.
    assert parse_traceparent(parsed.header()) == parsed.__class__(
        parsed.trace_id, parsed.span_id, parsed.trace_flags, 0
    )


@given(
    st.from_regex(r"[0-9a-f]{32}", fullmatch=True).filter(lambda s: s != "0" * 32),
    st.from_regex(r"[0-9a-f]{16}", fullmatch=True).filter(lambda s: s != "0" * 16),
    st.integers(0, 255),
)
def test_every_well_formed_header_round_trips(trace_id: str, span_id: str, flags: int) -> None:
    header = f"00-{trace_id}-{span_id}-{flags:02x}"
    parsed = parse_traceparent(header)
    assert parsed.trace_flags == flags  # what was sent, faithfully
    # Re-emitted with the one flag version 00 defines; unknown bits are zeroed.
    assert parsed.header() == f"00-{trace_id}-{span_id}-{flags & 0x01:02x}"


def test_reserved_flag_bits_are_zeroed_not_forwarded() -> None:
    parsed = parse_traceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-ff")
    assert parsed.sampled
    assert parsed.header().endswith("-01")
    assert (
        parse_traceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-fe")
        .header()
        .endswith("-00")
    )


def test_tracestate_members_in_order_with_empty_members_skipped() -> None:
    assert parse_tracestate("rojo=00f067aa0ba902b7, ,congo=t61rcWkgMzE,tenant@vendor=x") == [
        ("rojo", "00f067aa0ba902b7"),
        ("congo", "t61rcWkgMzE"),
        ("tenant@vendor", "x"),
    ]


@pytest.mark.parametrize(
    ("header", "why"),
    [
        ("Rojo=1", "invalid key"),
        ("rojo", "invalid key"),
        ("rojo=1,rojo=2", "repeats a key"),
        ("rojo=a,b", "invalid key"),
        ("rojo=", "invalid value"),
        ("rojo=café", "invalid value"),
        ("rojo=a=b", "invalid value"),
        (",".join(f"k{i}=v" for i in range(33)), "at most 32"),
        ("k=" + "v" * 10_000, "longer than"),
    ],
)
def test_tracestate_that_must_be_dropped_raises(header: str, why: str) -> None:
    with pytest.raises(TraceContextError, match=why):
        parse_tracestate(header)


# --- limits and boundaries -------------------------------------------------------------

FUTURE = f"01-{TRACE_ID}-{SPAN_ID}-01"


def test_a_header_of_exactly_the_limit_is_read_and_one_more_is_refused() -> None:
    at_limit = FUTURE + "-" + "x" * (512 - len(FUTURE) - 1)
    assert len(at_limit) == 512
    assert parse_traceparent(at_limit).version == 1
    with pytest.raises(TraceContextError, match="longer than 512 characters"):
        parse_traceparent(at_limit + "x")


def test_a_future_version_may_end_at_the_flags() -> None:
    parsed = parse_traceparent(FUTURE)
    assert (parsed.version, parsed.header()) == (1, VALID)


def test_a_future_version_needs_a_dash_before_more_data() -> None:
    with pytest.raises(TraceContextError, match="lacks a '-' after the flags"):
        parse_traceparent(FUTURE + "x")


def test_an_unsampled_header_is_not_sampled() -> None:
    parsed = parse_traceparent(f"00-{TRACE_ID}-{SPAN_ID}-00")
    assert not parsed.sampled
    assert parsed.header().endswith("-00")


def test_a_trace_parent_built_without_a_version_is_version_00() -> None:
    assert TraceParent(TRACE_ID, SPAN_ID, 1) == parse_traceparent(VALID)


def test_a_trace_parent_is_frozen() -> None:
    parsed = parse_traceparent(VALID)
    with pytest.raises(dataclasses.FrozenInstanceError):
        parsed.trace_id = "0" * 32  # type: ignore[misc]


def test_a_tracestate_of_exactly_the_limit_is_read_and_one_more_is_refused() -> None:
    at_limit = "k=v" + " " * (8192 - 3)  # trailing optional whitespace counts
    assert parse_tracestate(at_limit) == [("k", "v")]
    with pytest.raises(TraceContextError, match="longer than 8192 characters"):
        parse_tracestate(at_limit + " ")


def test_thirty_two_tracestate_members_are_allowed() -> None:
    members = [(f"k{i}", "v") for i in range(32)]
    assert parse_tracestate(",".join(f"{k}={v}" for k, v in members)) == members


def test_a_tracestate_that_is_not_text_is_refused() -> None:
    with pytest.raises(TraceContextError, match="tracestate must be a string"):
        parse_tracestate(5)  # type: ignore[arg-type]


def test_minted_ids_are_never_all_zero(monkeypatch: pytest.MonkeyPatch) -> None:
    # The all-zero id is invalid (W3C); a source that yields zero bytes first must be
    # drawn from again rather than trusted.
    draws: list[int] = []

    def urandom(n: int) -> bytes:
        draws.append(n)
        return bytes(n) if len(draws) % 2 else b"\x01" * n

    monkeypatch.setattr(traceparent_module.os, "urandom", urandom)
    assert make_trace_id() == "01" * 16
    assert make_span_id() == "01" * 8
    assert draws == [16, 16, 8, 8]


# -- more branches and boundaries pinned for mutation testing (ADR 0014) ---------------


def test_future_version_of_exactly_55_characters_is_accepted() -> None:
    parsed = parse_traceparent(f"cc-{TRACE_ID}-{SPAN_ID}-00")
    assert (parsed.version, parsed.sampled) == (0xCC, False)


def test_version_01_with_data_glued_to_the_flags_is_rejected() -> None:
    with pytest.raises(TraceContextError, match="lacks a '-'"):
        parse_traceparent(f"01-{TRACE_ID}-{SPAN_ID}-01x")
    assert parse_traceparent(f"01-{TRACE_ID}-{SPAN_ID}-01-more").version == 1


# -- tracestate: W3C Trace Context Level 2 (issue 7, ADR 0018) --------------------------
#
# Vectors marked "W3C suite" come from the W3C test suite, w3c/trace-context
# test/test.py at commit acab820 (2026-06-30, "Fix tracestate key grammar tests").


def test_the_specifications_examples_parse() -> None:
    assert parse_tracestate("rojo=00f067aa0ba902b7") == [("rojo", "00f067aa0ba902b7")]
    assert parse_tracestate("rojo=00f067aa0ba902b7,congo=t61rcWkgMzE") == [
        ("rojo", "00f067aa0ba902b7"),
        ("congo", "t61rcWkgMzE"),
    ]
    assert parse_tracestate("vendorname1=opaqueValue1,vendorname2=opaqueValue2") == [
        ("vendorname1", "opaqueValue1"),
        ("vendorname2", "opaqueValue2"),
    ]
    assert parse_tracestate("fw529a3039@dt=x") == [("fw529a3039@dt", "x")]


def test_every_allowed_character_is_accepted() -> None:  # W3C suite
    key = "abcdefghijklmnopqrstuvwxyz0123456789_-*/"
    value = "".join(chr(c) for c in range(0x20, 0x7F) if chr(c) not in ",=")
    assert parse_tracestate(f"{key}={value}") == [(key, value)]
    assert parse_tracestate(f"{key}@a-z0-9_-*/={value}") == [(f"{key}@a-z0-9_-*/", value)]


@pytest.mark.parametrize(
    "header",
    [
        "foo=1 \t , \t bar=2, \t baz=3",
        "foo=1\t \t,\t \tbar=2,\t \tbaz=3",
    ],
)
def test_optional_whitespace_around_members_is_ignored(header: str) -> None:  # W3C suite
    assert parse_tracestate(header) == [("foo", "1"), ("bar", "2"), ("baz", "3")]


@pytest.mark.parametrize("header", [" foo=1", "\tfoo=1", "foo=1 ", "foo=1\t", "\t foo=1 \t"])
def test_optional_whitespace_around_one_member_is_ignored(header: str) -> None:  # W3C suite
    assert parse_tracestate(header) == [("foo", "1")]


def test_leading_spaces_of_a_value_are_kept_and_inner_ones_too() -> None:
    assert parse_tracestate("k=  a b") == [("k", "  a b")]


@pytest.mark.parametrize(
    ("key", "members"),
    [
        ("foo@", [("foo@", "1"), ("bar", "2")]),  # W3C suite
        ("foo@@bar", [("foo@@bar", "1"), ("bar", "2")]),  # W3C suite
        ("foo@bar@baz", [("foo@bar@baz", "1"), ("bar", "2")]),  # W3C suite
        ("1abc", [("1abc", "1"), ("bar", "2")]),  # Level 2: a key may begin with a digit
        ("t@1", [("t@1", "1"), ("bar", "2")]),
    ],
)
def test_level_2_keys_with_at_signs_and_digits_are_keys(
    key: str, members: list[tuple[str, str]]
) -> None:
    assert parse_tracestate(f"{key}=1,bar=2") == members


@pytest.mark.parametrize(
    ("header", "why"),
    [
        ("foo =1", "invalid key"),  # W3C suite
        ("FOO=1", "invalid key"),  # W3C suite
        ("foo.bar=1", "invalid key"),  # W3C suite
        ("@foo=1,bar=2", "invalid key"),  # W3C suite
        ("_foo=1", "invalid key"),
        ("-foo=1", "invalid key"),
        ("=1", "invalid key"),
        ("foo=bar=baz", "invalid value"),  # W3C suite
        ("foo=,bar=3", "invalid value"),  # W3C suite
        ("foo= ", "invalid value"),
        ("foo=a\tb", "invalid value"),
        ("foo=a\x7fb", "invalid value"),
        ("foo=a\x1fb", "invalid value"),
        ("foo=a\nb", "invalid value"),
        ("foo=1,foo=1", "repeats a key"),
    ],
)
def test_a_member_outside_the_grammar_drops_the_header(header: str, why: str) -> None:
    with pytest.raises(TraceContextError, match=why):
        parse_tracestate(header)


def test_the_error_names_the_members_position_not_its_text() -> None:
    with pytest.raises(TraceContextError, match="member 2 has an invalid value") as info:
        parse_tracestate("a=1,,secret=hunter2=x")
    assert "hunter2" not in str(info.value)


@pytest.mark.parametrize(("length", "valid"), [(1, True), (255, True), (256, True), (257, False)])
def test_a_key_is_at_most_256_characters(length: int, valid: bool) -> None:  # W3C suite
    header = "foo=1," + "z" * length + "=1"
    if valid:
        assert parse_tracestate(header) == [("foo", "1"), ("z" * length, "1")]
    else:
        with pytest.raises(TraceContextError, match="member 1 has an invalid key"):
            parse_tracestate(header)


@pytest.mark.parametrize(
    "key",
    [
        "t" * 241 + "@" + "v" * 14,  # W3C suite: the longest Level 1 tenant and system
        "t" * 242 + "@v",  # W3C suite: Level 2 no longer bounds the tenant
        "t@" + "v" * 15,  # W3C suite: nor the system
        "t" * 255 + "@",  # 256 characters in all
    ],
)
def test_a_key_with_an_at_sign_is_bounded_only_by_its_total_length(key: str) -> None:
    assert parse_tracestate(f"foo=1,{key}=1") == [("foo", "1"), (key, "1")]
    with pytest.raises(TraceContextError, match="invalid key"):
        parse_tracestate(f"foo=1,t{key}=1" if len(key) == 256 else "foo=1," + "t" * 257 + "@v=1")


@pytest.mark.parametrize(("length", "valid"), [(1, True), (255, True), (256, True), (257, False)])
def test_a_value_is_at_most_256_characters(length: int, valid: bool) -> None:
    header = "k=" + "v" * length
    if valid:
        assert parse_tracestate(header) == [("k", "v" * length)]
    else:
        with pytest.raises(TraceContextError, match="invalid value"):
            parse_tracestate(header)


def test_a_value_of_256_characters_may_begin_with_spaces() -> None:
    value = " " * 255 + "v"
    assert parse_tracestate(f"k={value}") == [("k", value)]


W3C_32 = (
    "bar01=01,bar02=02,bar03=03,bar04=04,bar05=05,bar06=06,bar07=07,bar08=08,bar09=09,bar10=10,"
    "bar11=11,bar12=12,bar13=13,bar14=14,bar15=15,bar16=16,bar17=17,bar18=18,bar19=19,bar20=20,"
    "bar21=21,bar22=22,bar23=23,bar24=24,bar25=25,bar26=26,bar27=27,bar28=28,bar29=29,bar30=30,"
    "bar31=31,bar32=32"
)


def test_thirty_two_members_are_kept_and_a_thirty_third_drops_the_header() -> None:  # W3C suite
    members = parse_tracestate(W3C_32)
    assert len(members) == 32
    assert members[0] == ("bar01", "01")
    assert members[-1] == ("bar32", "32")
    with pytest.raises(TraceContextError, match="more than 32 members"):
        parse_tracestate(W3C_32 + ",bar33=33")


def test_empty_members_do_not_count_toward_the_32() -> None:
    assert len(parse_tracestate(" , ,".join(f"k{i}=v" for i in range(32)) + ", ,")) == 32


def test_a_thirty_third_member_drops_the_header_even_if_it_is_malformed() -> None:
    with pytest.raises(TraceContextError, match="more than 32 members"):
        parse_tracestate(W3C_32 + ",BAD")


def test_an_empty_header_has_no_members() -> None:
    assert parse_tracestate("") == []
    assert parse_tracestate(" \t, ,\t") == []


# -- Level 1 keys: what OpenTelemetry's TraceState can hold ----------------------------


@pytest.mark.parametrize(
    ("key", "level1"),
    [
        ("rojo", True),
        ("z" * 256, True),
        ("1abc", False),  # a Level 1 simple key begins with a letter
        ("t" * 241 + "@" + "v" * 14, True),
        ("1" * 241 + "@v", True),  # a tenant may begin with a digit
        ("t" * 242 + "@v", False),
        ("t@" + "v" * 15, False),
        ("t@v", True),
        ("t@", False),
        ("t@1v", False),
        ("t@v@w", False),
        ("t@v/w", True),
    ],
)
def test_level_1_keys_are_told_apart(key: str, level1: bool) -> None:
    assert parse_tracestate(f"{key}=1") == [(key, "1")]  # every one is a Level 2 key
    assert traceparent_module.is_level1_key(key) is level1
    assert bool(OTEL_KEY.fullmatch(key)) is level1  # the grammar OpenTelemetry enforces


# -- propagation bound: at most 512 characters, whole entries removed ------------------


def _joined(members: list[tuple[str, str]]) -> str:
    return ",".join(f"{k}={v}" for k, v in members)


def test_a_header_within_512_characters_is_propagated_whole() -> None:
    members = [("a", "x" * 254), ("b", "y" * 253)]
    assert len(_joined(members)) == 512
    assert bound_tracestate(members) == members
    assert bound_tracestate(members, max_chars=511) == members[:1]


def test_entries_over_128_characters_go_first_right_most_first() -> None:
    small = [(f"s{i}", "v") for i in range(5)]
    big1, big2 = ("big1", "x" * 200), ("big2", "y" * 200)
    members = [big1, small[0], big2, small[1], ("big3", "z" * 124), *small[2:]]
    assert len(_joined(members)) == 566  # 205 + 205 + 129 + 5 * 4 + 7 commas
    # Removing big3 (129 characters) is enough; big1 and big2 are longer but further left.
    bounded = bound_tracestate(members)
    assert bounded == [big1, small[0], big2, small[1], *small[2:]]
    assert len(_joined(bounded)) == 436


def test_an_entry_of_exactly_128_characters_is_not_a_long_one() -> None:
    exact = ("e", "x" * 126)  # 1 + 1 + 126 = 128
    members = [("f", "y" * 250), ("g", "z" * 250), exact]  # 252 + 252 + 128 + 2 = 634
    # The right-most entry is not long, so it stays; g goes, leaving 252 + 1 + 128.
    assert bound_tracestate(members) == [("f", "y" * 250), exact]


def test_an_entry_of_129_characters_is_a_long_one() -> None:
    long = ("e", "x" * 127)  # 129
    members = [("f", "y" * 250), ("g", "z" * 250), long]
    assert bound_tracestate(members) == [("f", "y" * 250), ("g", "z" * 250)]


def test_then_entries_go_from_the_end() -> None:
    members = [(f"k{i:02}", "v" * 100) for i in range(10)]  # 104 each: none is long
    bounded = bound_tracestate(members)
    assert bounded == members[:4]  # 4 * 104 + 3 = 419; a fifth would make 524
    assert bound_tracestate(members, max_chars=523) == members[:4]
    assert bound_tracestate(members, max_chars=524) == members[:5]


def test_long_entries_go_before_any_short_one_even_the_last() -> None:
    members = [("a", "x" * 300), ("b", "y" * 100), ("c", "z" * 100), ("d", "w" * 100)]
    assert bound_tracestate(members) == members[1:]


def test_bounding_does_not_change_its_argument() -> None:
    members = [(f"k{i:02}", "v" * 100) for i in range(10)]
    copy = list(members)
    bound_tracestate(members)
    assert members == copy


@given(tracestate_members())
def test_what_is_propagated_fits_and_keeps_order(members: list[tuple[str, str]]) -> None:
    bounded = bound_tracestate(members)
    assert len(_joined(bounded)) <= 512
    it = iter(members)
    assert all(member in it for member in bounded)  # a subsequence, in order
    if len(_joined(members)) <= 512:
        assert bounded == members
    elif all(len(k) + 1 + len(v) <= 128 for k, v in members):
        assert bounded == members[: len(bounded)]  # short ones go from the end only
        assert len(_joined(members[: len(bounded) + 1])) > 512  # and no more than needed


# -- properties ------------------------------------------------------------------------


@given(st.data(), tracestate_members())
def test_a_valid_header_round_trips(data: st.DataObject, members: list[tuple[str, str]]) -> None:
    header = data.draw(tracestate_headers(members))
    assert parse_tracestate(header) == members
    assert parse_tracestate(_joined(members)) == members


@given(st.data(), tracestate_members(max_size=31), invalid_tracestate_members())
def test_any_single_invalid_member_drops_the_whole_header(
    data: st.DataObject, members: list[tuple[str, str]], bad: str
) -> None:
    position = data.draw(st.integers(0, len(members)))
    parts = [f"{k}={v}" for k, v in members]
    parts.insert(position, bad)
    with pytest.raises(TraceContextError, match=f"member {position} "):
        parse_tracestate(",".join(parts))


@given(tracestate_members(max_size=31).filter(bool), st.data())
def test_a_repeated_key_drops_the_whole_header(
    members: list[tuple[str, str]], data: st.DataObject
) -> None:
    key, _ = data.draw(st.sampled_from(members))
    with pytest.raises(TraceContextError, match=f"member {len(members)} repeats a key"):
        parse_tracestate(_joined([*members, (key, "again")]))


# -- cost: crafted input is parsed in linear steps -------------------------------------


def _parse_steps(text: str) -> int:
    """Python lines executed by `parse_tracestate` (and what it calls) on ``text``.

    The parser's only builtins (``split``, ``strip``, ``partition``, set
    membership, ``frozenset.issuperset``) run in linear time; what could grow
    faster is its own Python, which this counts.
    """
    steps = 0

    def tracer(frame: types.FrameType, event: str, arg: object) -> object:
        nonlocal steps
        if event == "line":
            steps += 1
        return tracer

    sys.settrace(tracer)
    try:
        parse_tracestate(text)
    except TraceContextError:
        pass
    finally:
        sys.settrace(None)
    return steps


@pytest.mark.parametrize(
    "make",
    [
        lambda n: "a" * n,  # one long key, no "="
        lambda n: "a=" + "b" * n,  # one long value
        lambda n: "a" * n + "=b",
        lambda n: "a@" * (n // 2) + "=b",
        lambda n: "a=" + " " * n + "b",
        lambda n: "," * n,  # only empty members
        lambda n: " \t," * (n // 3),
        lambda n: "k=" + "v " * (n // 2),
        lambda n: "=" * n,
        lambda n: "k" + "=v" * (n // 2),
    ],
)
def test_crafted_headers_cost_linear_steps(make: Callable[[int], str]) -> None:
    small, large = make(1_000), make(8_000)
    assert len(large) <= 8192
    small_steps, large_steps = _parse_steps(small), _parse_steps(large)
    # 8x the input may cost at most ~8x the steps (plus a constant); quadratic would be 64x.
    assert large_steps <= 10 * small_steps + 50


def _parse_or_none(text: str) -> object:
    try:
        return parse_tracestate(text)
    except TraceContextError:
        return None


@pytest.mark.parametrize(
    "make",
    [
        lambda n: "a" * n,
        lambda n: "a=" + " " * n + "b",
        lambda n: "," * n,
        lambda n: " \t," * (n // 3),
        lambda n: "k" + "=v" * (n // 2),
        lambda n: "a@" * (n // 2) + "=b",
    ],
)
def test_crafted_headers_cost_linear_time(make: Callable[[int], str]) -> None:
    # CPU time of two sizes compared (tests/runtime/scaling.py): this also covers the
    # builtins the step count above cannot see into.
    assert_linear(_parse_or_none, make, 800)
