"""The scrubber's fast paths (issue 10, P5) against the algorithms they replaced.

Each reference below is the implementation before the optimisation, kept here
verbatim in substance: the fast path must answer exactly as it did, on
generated text that is mostly near-misses (valid and broken checksums, short
and long groups, odd spacing, case).
"""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from runtime import Scrubber
from runtime._scanner import Candidate, Meter, make_plan
from runtime._validators import IBAN_LENGTHS, card_length, digits_of, iban_length, luhn_ok
from tests.strategies import scanner_texts

KEY = b"fast-path-key"

_REFERENCE_DIGITS = {ord(c): str(10 + i) for i, c in enumerate("ABCDEFGHIJKLMNOPQRSTUVWXYZ")}


def _group_ends(text: bytes, separators: bytes) -> list[int]:
    table = bytes.maketrans(separators, b" " * len(separators))
    ends: list[int] = []
    end = -1
    for group in text.translate(table).split(b" "):
        end += len(group) + 1
        ends.append(end)
    return ends


def reference_iban_length(text: bytes) -> int:
    expected = IBAN_LENGTHS.get(text[:2].upper())
    if expected is None:
        return 0
    for end in _group_ends(text, b" "):
        size = end - text.count(b" ", 0, end)
        if size >= expected:
            if size > expected:
                return 0
            compact = text[:end].replace(b" ", b"").upper()
            if not compact.isalnum():
                return 0  # the old code raised here; the pattern never lets it happen
            rearranged = (compact[4:] + compact[:4]).decode("ascii").translate(_REFERENCE_DIGITS)
            return end if int(rearranged) % 97 == 1 else 0
    return 0


def reference_card_length(text: bytes) -> int:
    for end in reversed(_group_ends(text, b" -")):
        digits = digits_of(text[:end])
        if len(digits) < 13:
            break
        if len(digits) <= 19 and luhn_ok(digits):
            return end
    return 0


def _iban(rng: random.Random, country: bytes, valid: bool) -> bytes:
    size = IBAN_LENGTHS[country]
    alphabet = "0123456789" if rng.random() < 0.5 else "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"
    body = "".join(rng.choice(alphabet) for _ in range(size - 4)).encode()
    probe = body + country + b"00"
    remainder = int(probe.decode().translate(_REFERENCE_DIGITS)) % 97
    check = 98 - remainder if valid else (98 - remainder) % 97 + 1
    return country + f"{check:02d}".encode()[-2:] + body


@st.composite
def iban_like(draw: st.DrawFn) -> bytes:
    """IBAN candidates as the pattern would hand them over, and broken ones."""
    rng = random.Random(draw(st.integers(0, 2**32)))
    country = draw(st.sampled_from(sorted(IBAN_LENGTHS)))
    compact = _iban(rng, country, draw(st.booleans()))
    cut = draw(st.integers(-3, 3))
    if cut < 0:
        compact = compact[:cut]
    elif cut > 0:
        compact += b"7" * cut
    if draw(st.booleans()):
        compact = compact.lower()
    if draw(st.booleans()):
        return compact
    groups = [compact[i : i + 4] for i in range(0, len(compact), 4)]
    separators = draw(st.lists(st.sampled_from([b" ", b" ", b"  "]), min_size=len(groups)))
    text = b"".join(g + s for g, s in zip(groups, separators, strict=False)).rstrip(b" ")
    return text + draw(st.sampled_from([b"", b" 12", b" 1", b" ABCD", b"x"]))


@settings(max_examples=500)
@given(iban_like() | st.binary(max_size=40))
def test_iban_length_answers_as_before(text: bytes) -> None:
    assert iban_length(text) == reference_iban_length(text)


def test_iban_length_finds_valid_ibans_and_trims_a_trailing_group() -> None:
    assert iban_length(b"DE89370400440532013000") == 22
    assert iban_length(b"de89370400440532013000") == 22
    assert iban_length(b"GB82 WEST 1234 5698 7654 32") == 27
    assert iban_length(b"GB82 WEST 1234 5698 7654 32 12") == 27
    assert iban_length(b"GB82 WEST 1234 5698 7654 31") == 0  # mod 97 fails
    assert iban_length(b"GB82 WEST 1234 5698 7654 3") == 0  # one short
    assert iban_length(b"GB82 WEST 1234 5698 7654 321") == 0  # the group runs past
    assert iban_length(b"GB82 WEST 1234 5698 7654 3-") == 0  # not alphanumeric


@st.composite
def card_like(draw: st.DrawFn) -> bytes:
    digits = draw(st.text("0123456789", min_size=10, max_size=22))
    if draw(st.booleans()):
        return digits.encode()
    separator = draw(st.sampled_from([" ", "-"]))
    cuts = sorted(draw(st.lists(st.integers(1, max(1, len(digits) - 1)), max_size=5)))
    parts, last = [], 0
    for cut in cuts:
        parts.append(digits[last:cut])
        last = cut
    parts.append(digits[last:])
    return separator.join(parts).encode()


@settings(max_examples=500)
@given(card_like() | st.binary(max_size=30))
def test_card_length_answers_as_before(text: bytes) -> None:
    assert card_length(text) == reference_card_length(text)


def test_card_length_fast_path_bounds() -> None:
    valid13, valid19 = b"4222222222222", b"4111111111111111111"
    assert luhn_ok(valid13)
    assert card_length(valid13) == 13
    assert card_length(valid13[:12]) == 0
    assert card_length(valid19) == 19 * luhn_ok(valid19)
    assert card_length(b"4" + valid19) == 0
    assert card_length(b"4111111111111112") == 0


# -- the scanner's two-byte dispatch ---------------------------------------------------


def _scan(data: bytes) -> list[Candidate]:
    plan = make_plan(tuple((index, False) for index in range(16)))
    found: list[Candidate] = []
    plan.scan(data, 0, len(data), Meter(1 << 40), found)
    return found


def _scan_one_byte_dispatch(data: bytes) -> list[Candidate]:
    """The scan with the pair cache bypassed: every hit dispatched on its first byte."""
    plan = make_plan(tuple((index, False) for index in range(16)))
    fresh = type(plan)(plan.entries)
    fresh._pairs = _FirstByteOnly(fresh._dispatch)  # type: ignore[assignment]
    found: list[Candidate] = []
    fresh.scan(data, 0, len(data), Meter(1 << 40), found)
    return found


class _FirstByteOnly(dict):  # type: ignore[type-arg]
    """A pair cache that always answers the first byte's whole dispatch list."""

    def __init__(self, dispatch: tuple[tuple[object, ...], ...]) -> None:
        super().__init__()
        self._dispatch = dispatch

    def get(self, key: bytes, default: object = None) -> object:
        return self._dispatch[key[0]]


@settings(max_examples=300)
@given(scanner_texts())
def test_two_byte_dispatch_finds_what_first_byte_dispatch_finds(text: str) -> None:
    data = text.encode("utf-8", "surrogatepass")
    assert _scan(data) == _scan_one_byte_dispatch(data)


def test_the_pair_cache_stays_bounded_and_the_last_byte_is_a_pair_of_one() -> None:
    plan = make_plan(tuple((index, False) for index in range(16)))
    found: list[Candidate] = []
    plan.scan(b"x@", 0, 2, Meter(1 << 40), found)  # a hint can start at the last byte
    assert all(1 <= len(key) <= 2 for key in plan._pairs)
    scrubber = Scrubber(fingerprint_key=KEY)
    assert scrubber.scrub("mail a@b.co, ring +44 20 7946 0958").value == (
        "mail [REDACTED:email], ring [REDACTED:phone_number]"
    )


def _names(entries: tuple[tuple[object, ...], ...]) -> list[str]:
    from runtime._detectors import DETECTORS

    return [DETECTORS[entry[8]].name for entry in entries]  # type: ignore[index]


def test_a_pair_drops_the_rules_its_second_byte_rules_out_and_their_peek_is_done() -> None:
    plan = make_plan(tuple((index, False) for index in range(16)))
    aws_and_google = plan._narrowed(b"AK")
    assert "aws_access_key_id" in _names(aws_and_google)
    assert "google_api_key" not in _names(aws_and_google)  # its peek wants "I" there
    assert "google_api_key" in _names(plan._narrowed(b"AI"))
    for entry in aws_and_google:
        if _names((entry,)) == ["aws_access_key_id"]:
            assert entry[5] is None  # the offset-1 peek was the pair's: not done again
    # A peek at another offset stays for the loop (an IBAN's two digits at offset 2).
    iban = [e for e in plan._narrowed(b"GB") if _names((e,)) == ["iban"]]
    assert iban
    assert iban[0][4] == 2
    assert iban[0][5] is not None
    assert plan._narrowed(b"A") == tuple(
        e for e in plan._dispatch[ord("A")] if not (e[4] == 1 and e[5] is not None)
    )  # the last byte of a buffer: every offset-1 peek fails


def test_a_pair_decides_the_lead_test_when_one_of_its_bytes_can_lead() -> None:
    plan = make_plan(tuple((index, False) for index in range(16)))
    card_after_space = [e for e in plan._narrowed(b" 4") if _names((e,)) == ["credit_card"]]
    assert card_after_space
    assert card_after_space[0][3] is None
    card_after_letters = [e for e in plan._narrowed(b"GB") if _names((e,)) == ["credit_card"]]
    assert card_after_letters
    assert card_after_letters[0][3] is not None


def test_the_pair_cache_is_what_the_scan_uses() -> None:
    plan = make_plan(tuple((index, False) for index in range(16)))
    fresh = type(plan)(plan.entries)
    fresh._pairs[b"AK"] = ()  # a hit starting "AK" tries no rule, if the cache is read
    found: list[Candidate] = []
    fresh.scan(b"AKIAIOSFODNN7EXAMPLE", 0, 20, Meter(1 << 40), found)
    assert found == []
    assert _scan(b"AKIAIOSFODNN7EXAMPLE") != []
