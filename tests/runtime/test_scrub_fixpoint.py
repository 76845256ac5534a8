"""Redaction and its fixpoint (issue 5, class 3): no detector finds anything in the output."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime import Scrubber, ScrubLimitExceeded
from runtime._redaction import (
    MARKERS,
    MAX_ROUNDS,
    REACH_AFTER,
    REACH_BEFORE,
    _add,
    _apply,
    _windows,
)
from tests.strategies import SCANNER_FRAGMENTS, scanner_texts

KEY = b"k"
AWS = "AKIAIOSFODNN7EXAMPLE"
CARD = "4111111111111111"
EMAIL = "bob@example.com"
JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl"
PEM = "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n-----END PRIVATE KEY-----"


@pytest.fixture(scope="module")
def scrubber() -> Scrubber:
    return Scrubber(fingerprint_key=KEY)


def detectors(findings: Any) -> list[str]:
    return [f.detector for f in findings]


# --- resolving overlapping candidates --------------------------------------------------


def test_separate_secrets_get_separate_markers(scrubber: Scrubber) -> None:
    assert scrubber.scrub_text(f"{AWS} and {EMAIL}")[0] == (
        "[REDACTED:aws_access_key_id] and [REDACTED:email]"
    )


def test_touching_secrets_keep_their_own_markers(scrubber: Scrubber) -> None:
    redacted, findings = scrubber.scrub_text(f"{PEM}{AWS}")
    assert redacted == "[REDACTED:private_key][REDACTED:aws_access_key_id]"
    assert detectors(findings) == ["private_key", "aws_access_key_id"]


def test_a_candidate_inside_a_finding_is_part_of_it(scrubber: Scrubber) -> None:
    redacted, findings = scrubber.scrub_text(f"Authorization: Bearer {JWT}")
    assert redacted == "Authorization: Bearer [REDACTED:bearer_token]"
    assert detectors(findings) == ["bearer_token"]
    # The password of a connection string is not also an email at "s3cr3t@db.example.com":
    # the email lies inside the URL's claim, and the host stays.
    redacted, findings = scrubber.scrub_text("postgres://admin:s3cr3t@db.example.com/app")
    assert redacted == "postgres://[REDACTED:url_credentials]@db.example.com/app"
    assert detectors(findings) == ["url_credentials"]


def test_a_secret_in_a_findings_context_is_its_own_finding(scrubber: Scrubber) -> None:
    # The host is context of the URL finding, not redacted: a card there is found too.
    redacted, findings = scrubber.scrub_text(f"x://u:p@host.{CARD}/")
    assert redacted == "x://[REDACTED:url_credentials]@host.[REDACTED:credit_card]/"
    assert detectors(findings) == ["url_credentials", "credit_card"]


def test_a_candidate_reaching_beyond_a_finding_joins_its_marker(scrubber: Scrubber) -> None:
    # The phone number takes "+1 4111 1111 1111" (15 digits at most); the card runs on.
    # Neither leaves a piece of itself behind; the first names the marker.
    redacted, findings = scrubber.scrub_text("call +1 4111 1111 1111 1111 now")
    assert redacted == "call [REDACTED:phone_number] now"
    assert detectors(findings) == ["phone_number", "credit_card"]


def test_a_blocking_candidate_is_never_dropped() -> None:
    scrubber = Scrubber(fingerprint_key=KEY, block=["jwt"])
    result = scrubber.scrub({"h": f"Bearer {JWT}"})
    assert result.value == {"h": "Bearer [REDACTED:bearer_token]"}
    assert detectors(result.findings) == ["bearer_token", "jwt"]
    assert result.blocked == ("jwt",)
    # Blocking wins ties at the same start too: the email inside a URL claim.
    blocking_email = Scrubber(fingerprint_key=KEY, block=["email"])
    result = blocking_email.scrub("postgres://admin:s3cr3t@db.example.com/app")
    assert detectors(result.findings) == ["url_credentials", "email"]
    assert result.value == "postgres://[REDACTED:url_credentials]/app"  # the host went with it
    assert result.blocked == ("email",)


def test_runs_of_redacted_bytes_merge_only_when_they_overlap() -> None:
    lows: list[int] = []
    highs: list[int] = []
    labels: list[int] = []
    _add(lows, highs, labels, 10, 20, 1)
    _add(lows, highs, labels, 20, 30, 2)  # touching: apart
    _add(lows, highs, labels, 0, 10, 3)  # touching on the other side: apart
    assert (lows, highs, labels) == ([0, 10, 20], [10, 20, 30], [3, 1, 2])
    _add(lows, highs, labels, 15, 25, 4)  # overlaps two: one run, the first one's label
    assert (lows, highs, labels) == ([0, 10], [10, 30], [3, 1])
    _add(lows, highs, labels, 5, 40, 5)  # overlaps all
    assert (lows, highs, labels) == ([0], [40], [3])
    _add(lows, highs, labels, 50, 60, 6)
    _add(lows, highs, labels, 45, 55, 7)  # starts before the run it overlaps
    assert (lows, highs, labels) == ([0, 45], [40, 60], [3, 6])


def test_apply_records_marker_offsets() -> None:
    text = b"ab AKIAIOSFODNN7EXAMPLE cd bob@x.com"
    found = [(3, -23, True, 0, 3, 23), (27, -36, True, 11, 27, 36)]
    hits: list[Any] = []
    out, markers = _apply(text, found, hits)
    aws, email = MARKERS[0], MARKERS[11]
    assert out == b"ab " + aws + b" cd " + email
    assert markers == [3, 3 + len(aws), 3 + len(aws) + 4, len(out)]
    assert hits == [(0, b"AKIAIOSFODNN7EXAMPLE", False), (11, b"bob@x.com", False)]
    # One candidate: the fast path gives the same shape.
    hits = []
    out, markers = _apply(b"x bob@x.com y", [(2, -11, False, 11, 2, 11)], hits)
    assert (out, markers) == (b"x " + email + b" y", [2, 2 + len(email)])
    assert hits == [(11, b"bob@x.com", True)]


def test_every_marker_is_inert(scrubber: Scrubber) -> None:
    # No detector finds anything in a marker, alone, doubled or beside any fragment.
    for marker in MARKERS:
        text = marker.decode()
        assert scrubber.scrub_text(text) == (text, ())
        assert scrubber.scrub_text(text + text) == (text + text, ())
        for fragment in SCANNER_FRAGMENTS:
            for glued in (text + fragment, fragment + text):
                redacted, _ = scrubber.scrub_text(glued)
                assert text in redacted or "[REDACTED:" in redacted


# --- the local rescan windows -----------------------------------------------------------


def test_markers_between_inert_neighbours_need_no_rescan() -> None:
    for before, after in ((b" ", b" "), (b'"', b'"'), (b"=", b";"), (b"/", b"@"), (b"", b"")):
        text = before + MARKERS[0] + after
        start = len(before)
        assert _windows(text, [start, start + len(MARKERS[0])]) == []


@pytest.mark.parametrize("before", list(b"aZ0_.~%-"))
def test_a_sticky_byte_before_a_marker_opens_a_window(before: int) -> None:
    text = b"x" * 1000 + bytes([before]) + MARKERS[0] + b" " + b"y" * 100
    start = 1001
    end = start + len(MARKERS[0])
    assert _windows(text, [start, end]) == [(start - REACH_BEFORE, end + REACH_AFTER)]


@pytest.mark.parametrize("after", list(b"aZ0_.%+-"))
def test_a_sticky_byte_after_a_marker_opens_a_window(after: int) -> None:
    text = MARKERS[0] + bytes([after])
    assert _windows(text, [0, len(MARKERS[0])]) == [(0, len(text))]


def test_inert_bytes_are_not_sticky() -> None:
    for byte in b" \t\n\"'=:;,/@()<>!?*&^$#|[]{}\x00\xc3":
        text = bytes([byte]) + MARKERS[0] + bytes([byte])
        assert _windows(text, [1, 1 + len(MARKERS[0])]) == [], chr(byte)
    assert b"~" not in MARKERS[0]
    # '~' ends a URL host but starts nothing; '+' starts an email's local part but
    # ends nothing.
    assert _windows(b"+" + MARKERS[0], [1, 1 + len(MARKERS[0])]) == []
    assert _windows(MARKERS[0] + b"~", [0, len(MARKERS[0])]) == []


def test_close_windows_merge() -> None:
    marker = MARKERS[0]
    text = b"a" + marker + b"a" + marker + b"a" + b" " * 2000 + b"a" + marker
    first, second = 1, 2 + len(marker)
    third = len(text) - len(marker)
    windows = _windows(
        text, [first, first + len(marker), second, second + len(marker), third, third + len(marker)]
    )
    assert windows == [(0, second + len(marker) + REACH_AFTER), (third - REACH_BEFORE, len(text))]


# --- the fixpoint ------------------------------------------------------------------------


@settings(max_examples=400)
@given(scanner_texts(max_fragments=12))
def test_scrubbed_text_is_a_fixpoint(text: str) -> None:
    scrubber = Scrubber(fingerprint_key=KEY)
    try:
        once, _ = scrubber.scrub_text(text)
    except ScrubLimitExceeded as exc:
        bound = exc.bound
        assert bound == "fixpoint"  # denied, never returned half-done
        return
    assert scrubber.scrub_text(once) == (once, ())


@settings(max_examples=150)
@given(
    st.dictionaries(
        scanner_texts(max_fragments=3),
        st.one_of(
            scanner_texts(max_fragments=6),
            st.lists(scanner_texts(max_fragments=4), max_size=3),
            st.integers(),
            scanner_texts(max_fragments=4).map(str.encode),
        ),
        max_size=4,
    )
)
def test_a_scrubbed_value_is_a_fixpoint(value: dict[str, Any]) -> None:
    scrubber = Scrubber(fingerprint_key=KEY)
    try:
        once = scrubber.scrub(value)
    except ScrubLimitExceeded as exc:
        bound = exc.bound
        assert bound == "fixpoint"
        return
    twice = scrubber.scrub(once.value)
    assert twice.findings == ()
    assert twice.value == once.value
    for finding in once.findings:
        assert scrubber.scrub_text(finding.path) == (finding.path, ())


def test_a_round_uncovers_what_a_marker_exposes(scrubber: Scrubber) -> None:
    # A digit run after "digit." is a decimal fraction, not a card. Once the SSN
    # before it is a marker, it is a card: a second, local round finds it.
    redacted, findings = scrubber.scrub_text(f"219-09-9999.{CARD} end")
    assert redacted == "[REDACTED:us_ssn].[REDACTED:credit_card] end"
    assert detectors(findings) == ["us_ssn", "credit_card"]


def test_a_blocking_secret_found_in_a_later_round_still_blocks() -> None:
    scrubber = Scrubber(fingerprint_key=KEY, block=["credit_card"])
    result = scrubber.scrub({"note": f"219-09-9999.{CARD}"})
    assert result.blocked == ("credit_card",)
    assert CARD not in repr(result.value)


def test_a_chain_longer_than_the_round_bound_is_refused(scrubber: Scrubber) -> None:
    # Each card is exposed only once the one before it is redacted: one round each.
    fits = "219-09-9999" + f".{CARD}" * (MAX_ROUNDS - 1)
    assert CARD not in scrubber.scrub_text(fits)[0]
    too_long = "219-09-9999" + f".{CARD}" * MAX_ROUNDS
    with pytest.raises(ScrubLimitExceeded) as info:
        scrubber.scrub_text(too_long)
    assert (info.value.bound, info.value.limit) == ("fixpoint", MAX_ROUNDS)
    assert CARD not in str(info.value)
    assert str(MAX_ROUNDS) in str(info.value)
    with pytest.raises(ScrubLimitExceeded):
        scrubber.scrub({"x": [too_long]})
    assert scrubber.record_text(too_long) == (
        f"<text of {len(too_long)} characters that could not be scrubbed>"
    )


def test_secrets_fused_into_one_word_are_one_word(scrubber: Scrubber) -> None:
    # Word boundaries are what keeps a hex hash from losing a digit run; the price,
    # by design (ADR 0010): two secrets fused letter-to-digit are one unknown word.
    fused = f"{AWS}{CARD}"
    assert scrubber.scrub_text(fused) == (fused, ())
    # Any punctuation between them, or a syntax that ends by itself, separates them.
    for glue in ",;|&= \n\t'\"()<>/":
        assert scrubber.scrub_text(f"{AWS}{glue}{CARD}")[0] == (
            f"[REDACTED:aws_access_key_id]{glue}[REDACTED:credit_card]"
        )
    assert scrubber.scrub_text(f"{PEM}{CARD}")[0] == "[REDACTED:private_key][REDACTED:credit_card]"
