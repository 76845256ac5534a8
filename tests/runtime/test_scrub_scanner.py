"""The scanner: one hint pass, dispatch, the cost model, and linear work on adversarial text."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime import EvaluationError, GhostError, ScrubLimitExceeded
from runtime._detectors import DETECTORS
from runtime._redaction import Hit, redact
from runtime._scanner import ATTEMPT_COST, HIT_COST, Candidate, Meter, Plan, make_plan
from tests.strategies import scanner_texts

ALL = tuple((index, False) for index in range(len(DETECTORS)))
HUGE = 1 << 40


@pytest.fixture(scope="module")
def plan() -> Plan:
    return make_plan(ALL)


def scan(plan: Plan, data: bytes, budget: int = HUGE) -> tuple[list[Candidate], int]:
    """The candidates of ``data`` and the budget the scan spent."""
    meter = Meter(budget)
    found: list[Candidate] = []
    plan.scan(data, 0, len(data), meter, found)
    return found, budget - meter.left


def reference(data: bytes) -> list[Candidate]:
    """Every candidate by brute force: each rule's pattern anchored at every position."""
    from runtime._scanner import _ANCHORED, _compile

    found: list[Candidate] = []
    for index, detector in enumerate(DETECTORS):
        for rule in detector.rules:
            pattern = _compile(rule.pattern)
            for position in range(len(data)):
                end = len(data)
                if rule.max_length:
                    end = min(end, position + rule.max_length)
                start, stop = pattern.Match(_ANCHORED, data, position, end)[0]
                if start >= 0 and (claim := rule.span(data, start, stop)) is not None:
                    claim_start, claim_end, secret_start, secret_end = claim
                    found.append((claim_start, -claim_end, True, index, secret_start, secret_end))
    return found


def redacted(plan: Plan, data: bytes, found: list[Candidate]) -> tuple[bytes, list[Hit]]:
    if not found:
        return data, []
    return redact(plan, data, list(found), Meter(HUGE))


@settings(max_examples=300)
@given(scanner_texts())
def test_the_scanner_finds_what_brute_force_finds(text: str) -> None:
    # The hints, the dispatch table, `first`, `peek`, `lead` and `runs` may only skip
    # positions where nothing can be found: the outcome equals trying every rule at
    # every position.
    plan = make_plan(ALL)
    data = text.encode("utf-8", "surrogatepass")
    found, _ = scan(plan, data)
    expected = reference(data)
    runs = {index for index, d in enumerate(DETECTORS) if any(r.runs for r in d.rules)}
    # `runs` rules skip their own inner starts, which resolution drops anyway.
    assert set(found) - set(expected) == set()
    assert {c for c in expected if c[3] not in runs} <= set(found)
    assert redacted(plan, data, found) == redacted(plan, data, expected)


@settings(max_examples=100)
@given(st.lists(scanner_texts(max_fragments=4), min_size=1, max_size=5))
def test_texts_joined_by_nul_scan_as_if_alone(texts: list[str]) -> None:
    # The scrubber scans all of a value's texts in one buffer: NUL is never part of a
    # candidate and looks like the end of text to every boundary.
    plan = make_plan(ALL)
    datas = [text.replace("\x00", "").encode() for text in texts]
    together, _ = scan(plan, b"\x00".join(datas))
    offset = 0
    shifted: list[Candidate] = []
    for data in datas:
        shifted.extend(
            (c[0] + offset, c[1] - offset, c[2], c[3], c[4] + offset, c[5] + offset)
            for c in scan(plan, data)[0]
        )
        offset += len(data) + 1
    assert sorted(together) == sorted(shifted)


def test_a_plan_without_detectors_finds_nothing() -> None:
    empty = Plan(())
    meter = Meter(10)
    found: list[Candidate] = []
    empty.scan(b"AKIAIOSFODNN7EXAMPLE", 0, 20, meter, found)
    assert (found, meter.left) == ([], 10)


def test_plans_are_compiled_once_per_detector_set() -> None:
    assert make_plan(ALL) is make_plan(ALL)
    assert make_plan(((11, False),)) is not make_plan(((11, True),))
    blocking = make_plan(((11, True),))
    found, _ = scan(blocking, b"bob@x.com")
    assert found == [(0, -9, False, 11, 0, 9)]  # the third field is "not blocking"


def test_scan_stays_inside_its_range_but_reads_context(plan: Plan) -> None:
    data = b"x AKIAIOSFODNN7EXAMPLE y"
    meter = Meter(HUGE)
    found: list[Candidate] = []
    plan.scan(data, 3, len(data), meter, found)
    assert found == []  # the hint at 2 is outside
    plan.scan(data, 2, 6, meter, found)
    assert [c[3] for c in found] == [0]  # the match runs past the range
    found = []
    plan.scan(b"xAKIAIOSFODNN7EXAMPLE", 1, 21, meter, found)
    assert found == []  # the word boundary looks at the byte before the range


def test_anchored_matches_stop_at_end() -> None:
    aws = Plan(((0, False),))
    data = b"AKIAIOSFODNN7EXAMPLE"
    for end, expected in ((20, [(0, -20, True, 0, 0, 20)]), (19, [])):
        meter = Meter(HUGE)
        found: list[Candidate] = []
        aws.scan(data, 0, 4, meter, found, end=end)
        assert found == expected, end  # at 19 the key is one character short
    assert HUGE - meter.left == HIT_COST + 4 + ATTEMPT_COST  # the failed attempt is charged


# --- the cost model ------------------------------------------------------------------------


def test_the_meter_raises_only_past_its_budget() -> None:
    meter = Meter(10)
    meter.charge(10)
    assert meter.left == 0
    with pytest.raises(ScrubLimitExceeded) as info:
        meter.charge(1)
    assert (info.value.bound, info.value.limit) == ("max_bytes", 10)
    assert Meter(5, left=3).left == 3
    assert isinstance(info.value, EvaluationError)
    assert isinstance(info.value, ValueError)
    assert isinstance(info.value, GhostError)


def test_a_scan_spends_its_budget_to_the_last_byte(plan: Plan) -> None:
    data = b"key AKIAIOSFODNN7EXAMPLE for bob@x.com"
    found, spent = scan(plan, data)
    assert [c[3] for c in found] == [0, 11]
    assert scan(plan, data, budget=spent) == (found, spent)  # exactly enough
    with pytest.raises(ScrubLimitExceeded) as info:
        scan(plan, data, budget=spent - 1)
    assert (info.value.bound, info.value.limit) == ("max_bytes", spent - 1)


def test_each_hit_and_attempt_is_charged(plan: Plan) -> None:
    _, nothing = scan(plan, b"plain words only")
    assert nothing == 0
    # One hit ("AKIA"), one attempt (the AWS rule; peek rules out google's), a 20-byte match.
    _, spent = scan(plan, b"AKIAIOSFODNN7EXAMPLE")
    assert spent == HIT_COST + 4 + ATTEMPT_COST + 20
    # The hint matched but the pattern did not: the attempt is still charged.
    _, spent = scan(plan, b"AKIA.")
    assert spent == HIT_COST + 4 + ATTEMPT_COST


def test_a_candidate_dense_text_is_refused_not_slow(plan: Plan) -> None:
    text = b"bob@x.com " * 2000
    with pytest.raises(ScrubLimitExceeded):
        scan(plan, text, budget=1 << 20)
    found, spent = scan(plan, text)
    assert len(found) == 2000
    assert spent > 1 << 20


# --- linear work ----------------------------------------------------------------------------

FAMILIES = {
    "letters": "a",
    "digits": "1",
    "digit spaces": "1 ",
    "digit dashes": "1-",
    "plus one": "+1 ",
    "parens": "(415) ",
    "at signs": "a@",
    "dotted local": "a.",
    "emails": "a@b.co ",
    "eyJ": "eyJ",
    "jwt segments": "eyJabcdefghij.",
    "jwt dashes": "eyJ-",
    "bearer words": "bearer ",
    "bearer tokens": "Bearer abcdefgh1 ",
    "basic words": "basic ",
    "basic tokens": "Basic dXNlcjpw ",
    "scheme colons": "://a:",
    "url prefixes": "x://a:",
    "iban groups": "GB82 ",
    "iban lower": "gb82 ",
    "ibans": "DE89370400440532013000 ",
    "sk dashes": "sk-",
    "sk keys": "sk-a1-",
    "slack dashes": "xoxb-",
    "aws prefixes": "AKIA",
    "google prefixes": "AIza",
    "github prefixes": "ghp_",
    "stripe prefixes": "sk_live_",
    "dashes": "-",
    "pem headers": "-----BEGIN PRIVATE KEY-----",
    "pem starts": "-----BEGIN ",
    "luhn misses": "4111111111111112 ",
    "cards": "4111111111111111 ",
    "dotted cards": "4111111111111111.",
    "fractions": "0.4111111111111111,",
    "ssns": "219-09-9999 ",
    "spaced ssns": "123 45 6789 ",
    "nanp": "415-555-2671 ",
    "e164": "14155552671 ",
    "phones": "+14155552671 ",
    "glued": "AKIAIOSFODNN7EXAMPLE4111111111111111bob@x.com.",
}
TAILS = {"dotted local": "@x.com", "letters": "@x.com", "url prefixes": "@h", "sk dashes": "1"}


def family(name: str, size: int) -> bytes:
    unit = FAMILIES[name]
    return (unit * (size // len(unit)) + TAILS.get(name, "")).encode()


def work(plan: Plan, data: bytes) -> int:
    """Budget spent scanning and redacting ``data``: the scrubber's step count."""
    meter = Meter(HUGE)
    found: list[Candidate] = []
    plan.scan(data, 0, len(data), meter, found)
    if found:
        try:
            redact(plan, data, found, meter)
        except ScrubLimitExceeded as exc:  # a chain of rounds ("dotted cards")
            bound = exc.bound
            assert bound == "fixpoint"
    return HUGE - meter.left + len(data)


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_work_grows_linearly_on_adversarial_text(plan: Plan, name: str) -> None:
    small = work(plan, family(name, 4_000))
    large = work(plan, family(name, 40_000))
    assert large <= 12 * small, (small, large)


def test_first_bytes_come_from_the_hints_match_range() -> None:
    from runtime._scanner import _compile, _first_bytes

    assert _first_bytes(_compile("ab|ac")) == range(ord("a"), ord("a") + 1)
    assert _first_bytes(_compile("[b-d]x")) == range(ord("b"), ord("d") + 1)
    assert _first_bytes(_compile(".*")) == range(256)  # may match the empty string
    assert _first_bytes(_compile("(?s).x")) == range(256)


def test_bytes_are_scanned_one_byte_one_character() -> None:
    # Latin-1 mode: invalid UTF-8 is just bytes that are not word characters.
    plan = make_plan(ALL)
    data = b"\xff4111111111111111\xfe"
    found, _ = scan(plan, data)
    assert [(c[3], c[4], c[5]) for c in found] == [(12, 1, 17)]
    assert redacted(plan, data, found)[0] == b"\xff[REDACTED:credit_card]\xfe"
    # A multi-byte character is never part of a token, and never splits a marker.
    found, _ = scan(plan, "é4111111111111111".encode())
    assert [(c[4], c[5]) for c in found] == [(2, 18)]


def test_what_is_read_again_is_charged(plan: Plan) -> None:
    # An email's local part is read back from the hint: 99 more bytes.
    _, spent = scan(plan, b"a" * 100 + b"@x.co")
    assert spent == HIT_COST + 3 + ATTEMPT_COST + 6 + 99
    # The second search starts inside the first hit ("sk-" at 0), re-reading 2 bytes.
    _, spent = scan(plan, b"sk-sk-")
    assert spent == 2 * (HIT_COST + 3) + 2 + 4 * ATTEMPT_COST


def test_a_rule_is_tried_only_if_a_lead_byte_is_among_the_hits_first_three() -> None:
    # credit_card's hint may start at any byte (its number-start boundary), so the rule is
    # dispatched at every hit; its lead bytes 2-6 decide whether it is tried.
    aws_and_card = Plan(((0, False), (12, False)))
    alone = HIT_COST + 4 + ATTEMPT_COST  # the AWS hint and the AWS attempt, no card attempt
    for text in (b"AKIA.", b"2 AKIA.", b"AKIA. 5"):  # a digit before or after the three bytes
        assert scan(aws_and_card, text)[1] == alone, text
    email_and_card = Plan(((11, False), (12, False)))
    assert scan(email_and_card, b"x@y5")[1] == HIT_COST + 3 + ATTEMPT_COST  # "5" is 4th
    # E.164's lead is "1": on a card's hit it is not tried, whatever bytes the hit starts
    # with (bytes 0x80-0xff lead nothing either).
    data = b"\xff.4111111111111111"
    card_and_phone = Plan(((12, False), (14, False)))
    card = Plan(((12, False),))
    assert scan(card_and_phone, data) == scan(card, data)
    assert scan(card, data)[0] == [(2, -18, True, 12, 2, 18)]


def test_a_rescan_is_charged_only_up_to_the_hits_end() -> None:
    # The URL hint covers 0..15; each "sk-" hit inside it is found by a search that starts
    # at the previous hit + 1 and re-reads, of what the URL hint covered, only up to its own
    # end: [1, 7) and [5, 10). A shorter hit never lowers how far text counts as read.
    url_and_openai = Plan(((10, False), (3, False)))
    found, spent = scan(url_and_openai, b"a://sk-sk-aaaa:")
    assert found == []
    hits = 3 * HIT_COST + 15 + 3 + 3  # the URL hint and two "sk-", each reverse-scanned
    assert spent == hits + (7 - 1) + (10 - 5) + 3 * ATTEMPT_COST


def test_expressions_compile_to_spans_only_and_fail_loudly(
    capfd: pytest.CaptureFixture[str],
) -> None:
    from runtime._scanner import _UNANCHORED, _compile, _first_bytes

    # No capturing groups (RE2 answers from its DFA): a match is one span, the whole match.
    assert _compile("(a)(b)").Match(_UNANCHORED, b"xab", 0, 3) == [(1, 3)]
    with pytest.raises(ValueError, match=r"^bad detector expression: missing \): a\($"):
        _compile("a(")
    assert capfd.readouterr().err == ""  # RE2 does not log the error itself
    # A hint that may match the empty string may start anywhere.
    assert _first_bytes(_compile("x?")) == range(256)
