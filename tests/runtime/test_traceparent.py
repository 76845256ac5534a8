"""Strict W3C traceparent / tracestate parsing."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

import runtime._traceparent as traceparent_module
from runtime import TraceContextError, parse_traceparent, parse_tracestate
from runtime._traceparent import TraceParent, make_span_id, make_trace_id

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
SPAN_ID = "00f067aa0ba902b7"
VALID = f"00-{TRACE_ID}-{SPAN_ID}-01"


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
