"""The scrubber: every detector, redaction, the walk, bounds, exemptions, fingerprints."""

from __future__ import annotations

import copy
import hashlib
import hmac
import time
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime import Finding, GhostError, Scrubber, ScrubLimitExceeded
from runtime._detectors import DETECTOR_NAMES, DETECTORS
from tests.strategies import scrubber_secrets

KEY = b"test-fingerprint-key"
AWS = "AKIAIOSFODNN7EXAMPLE"
EMAIL = "alice@example.com"
CARD = "4111 1111 1111 1111"
IBAN = "GB82 WEST 1234 5698 7654 32"
JWT = (
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9"
    ".eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIn0"
    ".SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
)
PEM = (
    "-----BEGIN RSA PRIVATE KEY-----\n"
    "MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun\n"
    "VTLw7onLRnrq0/IzW7yWR7QkrmBL7jTKEn5u+qKhbwKfBstIs+bMY2Zkp18gnTxK\n"
    "-----END RSA PRIVATE KEY-----"
)


@pytest.fixture(scope="module")
def scrubber() -> Scrubber:
    return Scrubber(fingerprint_key=KEY)


def fingerprint(secret: str, key: bytes = KEY) -> str:
    return hmac.new(key, secret.encode(), hashlib.sha256).hexdigest()


# --- the catalogue -------------------------------------------------------------------

POSITIVES = [
    ("aws_access_key_id", f"key={AWS};", AWS),
    ("aws_access_key_id", "ASIAY34FZKBOKMUTVV7A", "ASIAY34FZKBOKMUTVV7A"),
    ("github_token", "ghp_" + "a1B2c3D4e5" * 3 + "F6g7H8", "ghp_" + "a1B2c3D4e5" * 3 + "F6g7H8"),
    (
        "github_token",
        "github_pat_11ABCDEFG0abcdefghijkl_mnop",
        "github_pat_11ABCDEFG0abcdefghijkl_mnop",
    ),
    (
        "slack_token",
        "xoxb-123456789012-1234567890123-AbCdEfGh",
        "xoxb-123456789012-1234567890123-AbCdEfGh",
    ),
    (
        "openai_api_key",
        "OPENAI_API_KEY=sk-proj-abc123DEF456ghi789JKL0",
        "sk-proj-abc123DEF456ghi789JKL0",
    ),
    ("openai_api_key", "sk-" + "T3BlbkFJ" * 5 + "x9", "sk-" + "T3BlbkFJ" * 5 + "x9"),
    (
        "google_api_key",
        "AIzaSyA1234567890abcdefghijklmnopqrstuv",
        "AIzaSyA1234567890abcdefghijklmnopqrstuv",
    ),
    ("stripe_key", "sk_test_4eC39HqLyjWDarjtT1zdp7dc", "sk_test_4eC39HqLyjWDarjtT1zdp7dc"),
    ("stripe_key", "rk_live_51Habcdefghij0123", "rk_live_51Habcdefghij0123"),
    ("private_key", f"key:\n{PEM}\nthanks", PEM),
    ("jwt", f"token={JWT}&x=1", JWT),
    ("bearer_token", "Authorization: Bearer abcDEF123456ghi789", "abcDEF123456ghi789"),
    ("bearer_token", "authorization: bearer 8f14e45fceea167a5a36", "8f14e45fceea167a5a36"),
    ("url_credentials", "postgres://admin:s3cr3t@db.example.com:5432/app", "admin:s3cr3t"),
    ("url_credentials", "redis://:hunter2@cache:6379/0", ":hunter2"),
    ("url_credentials", "https://bob:p@ss@example.com/x", "bob:p@ss"),
    ("email", f"mail {EMAIL} now", EMAIL),
    ("email", "first.last+tag@mail.example.co.uk", "first.last+tag@mail.example.co.uk"),
    ("credit_card", f"card {CARD} exp", CARD),
    ("credit_card", "4111111111111111", "4111111111111111"),
    ("credit_card", "5555-5555-5555-4444", "5555-5555-5555-4444"),
    ("credit_card", "amex 3782 822463 10005", "3782 822463 10005"),
    ("credit_card", f"{CARD} 12/27", CARD),  # a trailing group the pattern took is trimmed
    ("iban", f"iban {IBAN} ok", IBAN),
    ("iban", "DE89370400440532013000", "DE89370400440532013000"),
    ("iban", "NO93 8601 1117 947", "NO93 8601 1117 947"),
    (
        "iban",
        "BE68 5390 0754 7034 ABCD",
        "BE68 5390 0754 7034",
    ),  # trailing text in a group of four is trimmed
    ("phone_number", "call +1 (415) 555-2671 today", "+1 (415) 555-2671"),
    ("phone_number", "+44 20 7946 0958", "+44 20 7946 0958"),
    ("phone_number", "+14155552671", "+14155552671"),
    ("phone_number", "+44 (0)20 7946 0958", "+44 (0)20 7946 0958"),
    ("phone_number", "office (415) 555-2671", "(415) 555-2671"),
    ("phone_number", "office 415-555-2671.", "415-555-2671"),
    ("phone_number", "1-800-555-0199", "1-800-555-0199"),
    ("us_ssn", "ssn 219-09-9999", "219-09-9999"),
    ("us_ssn", "SSN:123-45-6789", "123-45-6789"),
]


@pytest.mark.parametrize(("detector", "text", "secret"), POSITIVES)
def test_each_detector_finds_and_redacts_its_secret(
    scrubber: Scrubber, detector: str, text: str, secret: str
) -> None:
    redacted, findings = scrubber.scrub_text(text)
    assert [f.detector for f in findings] == [detector]
    assert redacted == text.replace(secret, f"[REDACTED:{detector}]", 1)
    assert findings[0] == Finding(detector, "$", fingerprint(secret))


def test_every_detector_has_a_positive_case() -> None:
    assert {detector for detector, _, _ in POSITIVES} == DETECTOR_NAMES


NEAR_MISSES = [
    "AKIAIOSFODNN7EXAMPL",  # one character short
    "xAKIAIOSFODNN7EXAMPLEx",  # glued into a longer word
    "ghp_tooshort123",
    "sk-this-is-just-a-slug-of-words",  # no digit: not key material
    "task-management-for-everyone-2024",
    "AIzaTooShort",
    "pk_live_51Habcdefghij0123",  # a publishable key is public by design
    "-----BEGIN PUBLIC KEY-----\nMIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8A\n-----END PUBLIC KEY-----",
    "eyJhbGciOiJIUzI1NiJ9",  # a header alone is not a token
    "the bearer bonds were never cashed",
    "Bearer Authentication is described in RFC 6750",
    "https://example.com:8080/path?q=1",
    "https://example.com/a:b@c",  # no credentials before the host
    "git@localhost:repo.git",  # no TLD after the domain: conservative
    "user@localhost",
    "4111 1111 1111 1112",  # Luhn-invalid
    "4111111111111112",
    "1700000000000",  # a millisecond timestamp: Luhn-valid, but no card starts with 1
    "order 1234567890123456789012",  # too long for a card
    "GB83 WEST 1234 5698 7654 32",  # bad IBAN checksum
    "GB82WEST12345698765433",
    "000-12-3456",  # SSN area 000
    "666-12-3456",  # SSN area 666
    "912-12-3456",  # SSN area 9xx
    "123-00-4567",  # SSN group 00
    "123-45-0000",  # SSN serial 0000
    "2024-01-15T10:30:00+05:30",
    "id 1700000000 and 20240115103000",  # plain long numbers are not phone numbers
    "+12 34",  # too few digits
    "version 1.2.3, build 4567, port 8080",
    "123-456-7890",  # North American area codes never start with 1
]


@pytest.mark.parametrize("text", NEAR_MISSES)
def test_near_misses_are_left_alone(scrubber: Scrubber, text: str) -> None:
    assert scrubber.scrub_text(text) == (text, ())


def test_detector_names_are_the_catalogue() -> None:
    assert isinstance(DETECTOR_NAMES, frozenset)
    assert {d.name for d in DETECTORS} == DETECTOR_NAMES
    assert len(DETECTORS) == len(DETECTOR_NAMES)
    assert {
        "aws_access_key_id",
        "github_token",
        "slack_token",
        "openai_api_key",
        "google_api_key",
        "stripe_key",
        "private_key",
        "jwt",
        "bearer_token",
        "url_credentials",
        "email",
        "credit_card",
        "iban",
        "phone_number",
        "us_ssn",
    } <= DETECTOR_NAMES


def test_detectors_are_found_side_by_side(scrubber: Scrubber) -> None:
    # Every positive in one string: no detector's hint or prefilter hides another's.
    text = " | ".join(text for _, text, _ in POSITIVES)
    redacted, findings = scrubber.scrub_text(text)
    assert sorted({f.detector for f in findings}) == sorted(DETECTOR_NAMES)
    for _, _, secret in POSITIVES:
        assert secret not in redacted


# --- redaction and overlaps ----------------------------------------------------------


def test_several_secrets_in_one_string(scrubber: Scrubber) -> None:
    text = f"to {EMAIL}, card {CARD}, key {AWS}."
    redacted, findings = scrubber.scrub_text(text)
    assert redacted == (
        "to [REDACTED:email], card [REDACTED:credit_card], key [REDACTED:aws_access_key_id]."
    )
    assert [f.detector for f in findings] == ["email", "credit_card", "aws_access_key_id"]


def test_a_secret_matched_by_two_detectors_is_reported_once(scrubber: Scrubber) -> None:
    redacted, findings = scrubber.scrub_text(f"Authorization: Bearer {JWT}")
    assert redacted == "Authorization: Bearer [REDACTED:bearer_token]"
    assert [f.detector for f in findings] == ["bearer_token"]
    # The password of a connection string is not also an email at "s3cr3t@db.example.com".
    redacted, findings = scrubber.scrub_text("postgres://admin:s3cr3t@db.example.com/app")
    assert redacted == "postgres://[REDACTED:url_credentials]@db.example.com/app"
    assert [f.detector for f in findings] == ["url_credentials"]


def test_a_blocking_detector_is_never_hidden_by_an_overlapping_one() -> None:
    scrubber = Scrubber(fingerprint_key=KEY, block=["jwt"])
    result = scrubber.scrub({"h": f"Bearer {JWT}"})
    assert result.value == {"h": "Bearer [REDACTED:bearer_token]"}
    assert [f.detector for f in result.findings] == ["bearer_token", "jwt"]
    assert result.blocked == ("jwt",)


def test_partly_overlapping_matches_are_redacted_as_one(scrubber: Scrubber) -> None:
    # The phone number takes "+1 4111 1111 1111" (15 digits at most); the card runs on.
    # Neither may leave a piece of itself behind.
    redacted, findings = scrubber.scrub_text(f"call +1 {CARD} now")
    assert redacted == "call [REDACTED:phone_number] now"
    assert [f.detector for f in findings] == ["phone_number", "credit_card"]
    assert findings[1].fingerprint == fingerprint(CARD)


def test_a_pem_block_is_redacted_whole_even_when_cut_short(scrubber: Scrubber) -> None:
    cut = PEM[: PEM.index("-----END")]
    redacted, findings = scrubber.scrub_text(f"key: {cut}")
    assert redacted == "key: [REDACTED:private_key]"
    assert [f.detector for f in findings] == ["private_key"]


def test_redacted_output_is_not_matched_again(scrubber: Scrubber) -> None:
    text = f"postgres://admin:s3cr3t@db/app Bearer abcDEF123456 {EMAIL} {CARD}"
    once, _ = scrubber.scrub_text(text)
    assert scrubber.scrub_text(once) == (once, ())


# --- the walk ------------------------------------------------------------------------


def test_nested_values_and_their_paths(scrubber: Scrubber) -> None:
    args = {
        "to": EMAIL,
        "items": [{"body": "fine"}, {"body": "fine"}, {"body": f"key {AWS}"}],
        "odd key": CARD,
        "n": 3,
    }
    result = scrubber.scrub(args)
    assert result.value == {
        "to": "[REDACTED:email]",
        "items": [{"body": "fine"}, {"body": "fine"}, {"body": "key [REDACTED:aws_access_key_id]"}],
        "odd key": "[REDACTED:credit_card]",
        "n": 3,
    }
    assert [(f.detector, f.path) for f in result.findings] == [
        ("email", "$.to"),
        ("aws_access_key_id", "$.items[2].body"),
        ("credit_card", '$["odd key"]'),
    ]
    assert result.blocked == ()


def test_dict_keys_are_scanned_and_paths_use_the_redacted_key(scrubber: Scrubber) -> None:
    result = scrubber.scrub({"contacts": {EMAIL: {"note": f"card {CARD}"}}})
    assert result.value == {
        "contacts": {"[REDACTED:email]": {"note": "card [REDACTED:credit_card]"}}
    }
    assert [(f.detector, f.path) for f in result.findings] == [
        ("email", '$.contacts["[REDACTED:email]"]#key'),
        ("credit_card", '$.contacts["[REDACTED:email]"].note'),
    ]
    for finding in result.findings:
        assert EMAIL not in finding.path


def test_keys_that_redact_alike_do_not_overwrite_each_other(scrubber: Scrubber) -> None:
    args = {EMAIL: 1, "bob@example.org": 2, "[REDACTED:email]": 3}
    result = scrubber.scrub(args)
    assert result.value == {
        "[REDACTED:email] (2)": 1,
        "[REDACTED:email] (3)": 2,
        "[REDACTED:email]": 3,
    }
    assert [f.path for f in result.findings] == [
        '$["[REDACTED:email] (2)"]#key',
        '$["[REDACTED:email] (3)"]#key',
    ]


def test_non_string_keys_are_kept_and_named_without_stringifying(scrubber: Scrubber) -> None:
    class Key:
        def __hash__(self) -> int:
            return 1

        def __repr__(self) -> str:
            raise AssertionError("repr called")

    odd = Key()
    args = {1: EMAIL, None: EMAIL, False: EMAIL, (1, 2): EMAIL, odd: EMAIL, b"raw": EMAIL}
    result = scrubber.scrub(args)
    assert isinstance(result.value, dict)
    assert list(result.value) == [1, None, False, (1, 2), odd, b"raw"]
    assert [f.path for f in result.findings] == [
        "$[1]",
        "$[null]",
        "$[false]",
        "$[<tuple>]",
        "$[<Key>]",
        '$[b"raw"]',
    ]


def test_bytes_keys_are_scanned(scrubber: Scrubber) -> None:
    result = scrubber.scrub({EMAIL.encode(): 1, b"plain": 2})
    assert result.value == {"[REDACTED:email]": 1, b"plain": 2}
    assert [f.path for f in result.findings] == ['$["[REDACTED:email]"]#key']


def test_tuples_stay_tuples_and_lists_stay_lists(scrubber: Scrubber) -> None:
    result = scrubber.scrub({"t": (EMAIL, 1, [EMAIL]), "l": [EMAIL]})
    assert result.value == {
        "t": ("[REDACTED:email]", 1, ["[REDACTED:email]"]),
        "l": ["[REDACTED:email]"],
    }
    assert isinstance(result.value, dict)
    assert type(result.value["t"]) is tuple
    assert type(result.value["t"][2]) is list
    assert [f.path for f in result.findings] == ["$.t[0]", "$.t[2][0]", "$.l[0]"]


def test_top_level_strings_tuples_and_bytes(scrubber: Scrubber) -> None:
    assert scrubber.scrub(EMAIL).value == "[REDACTED:email]"
    assert scrubber.scrub(EMAIL).findings[0].path == "$"
    assert scrubber.scrub((EMAIL,)).value == ("[REDACTED:email]",)
    assert scrubber.scrub(EMAIL.encode()).value == "[REDACTED:email]"


def test_bytes_are_decoded_scanned_and_kept_when_clean(scrubber: Scrubber) -> None:
    clean = b"nothing here \xff\xfe"
    dirty = b"\xff to " + EMAIL.encode()
    result = scrubber.scrub({"a": clean, "b": dirty, "c": bytearray(dirty)})
    assert isinstance(result.value, dict)
    assert result.value["a"] is clean
    assert result.value["b"] == "\ufffd to [REDACTED:email]"
    assert result.value["c"] == "\ufffd to [REDACTED:email]"
    assert [f.path for f in result.findings] == ["$.b", "$.c"]


class Explosive:
    """An object that must never be turned into text."""

    def __str__(self) -> str:
        raise RuntimeError("__str__ called")

    def __repr__(self) -> str:
        raise RuntimeError("__repr__ called")

    def __format__(self, spec: str) -> str:
        raise RuntimeError("__format__ called")


def test_opaque_values_pass_through_untouched(scrubber: Scrubber) -> None:
    boom = Explosive()
    values: list[object] = [
        boom,
        1,
        2.5,
        None,
        True,
        {1, 2},
        frozenset(),
        10**5000,
        memoryview(b"x"),
    ]
    result = scrubber.scrub({"x": values, "email": EMAIL})
    assert isinstance(result.value, dict)
    assert all(a is b for a, b in zip(result.value["x"], values, strict=True))
    assert result.value["x"] is values  # nothing in it changed
    assert [f.detector for f in result.findings] == ["email"]


def test_string_subclasses_are_scanned_without_their_overrides(scrubber: Scrubber) -> None:
    class Sneaky(str):
        __slots__ = ()

        def __len__(self) -> int:
            raise RuntimeError("len called")

        def isascii(self) -> bool:
            raise RuntimeError("isascii called")

    result = scrubber.scrub({"s": Sneaky(f"to {EMAIL}"), "t": Sneaky("clean")})
    assert result.value == {"s": "to [REDACTED:email]", "t": "clean"}


def test_input_is_never_mutated_and_clean_parts_are_shared(scrubber: Scrubber) -> None:
    clean_part = {"deep": [1, "two", ("three",)]}
    args: dict[str, Any] = {"keep": clean_part, "dirty": [EMAIL, {"k": EMAIL}], EMAIL: (EMAIL,)}
    before = copy.deepcopy(args)
    result = scrubber.scrub(args)
    assert args == before
    assert args["dirty"][1]["k"] == EMAIL
    assert isinstance(result.value, dict)
    assert result.value is not args
    assert result.value["keep"] is clean_part  # copy-on-write: nothing changed there


def test_a_clean_value_is_returned_as_is(scrubber: Scrubber) -> None:
    args = {"q": "weather in paris", "n": [1, 2, {"x": "y"}]}
    result = scrubber.scrub(args)
    assert result.value is args
    assert (result.findings, result.blocked) == ((), ())


# --- bounds --------------------------------------------------------------------------


def test_a_cycle_is_refused(scrubber: Scrubber) -> None:
    loop: list[object] = [EMAIL]
    loop.append(loop)
    with pytest.raises(ScrubLimitExceeded) as info:
        scrubber.scrub({"x": loop})
    assert info.value.bound == "max_depth"
    assert info.value.limit == 32
    assert EMAIL not in str(info.value)
    cyclic: dict[str, object] = {}
    cyclic["self"] = cyclic
    with pytest.raises(ScrubLimitExceeded):
        scrubber.scrub(cyclic)


@pytest.mark.parametrize("kind", ["list", "dict", "tuple"])
def test_twenty_thousand_levels_deep_is_refused_not_a_recursion_error(
    scrubber: Scrubber, kind: str
) -> None:
    deep: object = f"secret {EMAIL}"
    for _ in range(20_000):
        deep = [deep] if kind == "list" else {"a": deep} if kind == "dict" else (deep,)
    with pytest.raises(ScrubLimitExceeded, match="max_depth of 32") as info:
        scrubber.scrub(deep)
    assert isinstance(info.value, GhostError)
    assert isinstance(info.value, ValueError)
    assert EMAIL not in str(info.value)


def test_deep_nesting_is_bounded_by_our_limit_even_when_it_is_large() -> None:
    # The walk keeps its own stack: a limit far above Python's recursion limit works.
    scrubber = Scrubber(fingerprint_key=KEY, max_depth=50_000)
    deep: object = EMAIL
    for _ in range(20_000):
        deep = [deep]
    result = scrubber.scrub(deep)
    assert [f.path for f in result.findings] == ["$" + "[0]" * 20_000]


def test_the_depth_limit_is_exact() -> None:
    scrubber = Scrubber(fingerprint_key=KEY, max_depth=2)
    assert scrubber.scrub([[[EMAIL]]]).value == [[["[REDACTED:email]"]]]  # depths 0, 1, 2
    with pytest.raises(ScrubLimitExceeded):
        scrubber.scrub([[[[EMAIL]]]])


def test_megabytes_of_text_are_refused(scrubber: Scrubber) -> None:
    with pytest.raises(ScrubLimitExceeded, match="max_bytes of 1048576") as info:
        scrubber.scrub({"blob": f"{EMAIL} " + "x" * (2 << 20)})
    assert info.value.bound == "max_bytes"
    assert EMAIL not in str(info.value)
    with pytest.raises(ScrubLimitExceeded):
        scrubber.scrub(["y" * 1000] * 2000)  # many small strings add up
    with pytest.raises(ScrubLimitExceeded):
        scrubber.scrub_text("z" * (2 << 20))


def test_the_size_limit_counts_utf8_bytes_and_one_per_value() -> None:
    scrubber = Scrubber(fingerprint_key=KEY, max_bytes=10)
    assert scrubber.scrub("a" * 9).value == "a" * 9  # 1 value + 9 bytes
    with pytest.raises(ScrubLimitExceeded):
        scrubber.scrub("a" * 10)
    with pytest.raises(ScrubLimitExceeded):
        scrubber.scrub("é" * 5)  # 5 characters, 10 bytes
    with pytest.raises(ScrubLimitExceeded):
        scrubber.scrub([1] * 10)  # 11 values, no text


def test_shared_references_cannot_blow_up_the_walk(scrubber: Scrubber) -> None:
    # 2**60 paths through a few dozen objects: the per-value cost ends it quickly.
    bomb: list[object] = [1]
    for _ in range(60):
        bomb = [bomb, bomb]
    started = time.perf_counter()
    with pytest.raises(ScrubLimitExceeded):
        Scrubber(fingerprint_key=KEY, max_depth=100).scrub(bomb)
    assert time.perf_counter() - started < 5


ADVERSARIAL = [
    "a" * 300_000,
    "-----BEGIN RSA PRIVATE KEY-----" * 9_000,
    "-----BEGIN PRIVATE KEY-----\n" + "A" * 300_000,
    "1" * 300_000,
    "1 " * 150_000,
    "1-" * 150_000,
    "+1 " * 100_000,
    "+1" + " 1" * 150_000,
    "(415) " * 50_000,
    "a@" * 150_000,
    "a." * 150_000 + "@",
    "a" * 300_000 + "@x",
    "eyJ" * 100_000,
    "eyJabcdefghij." * 20_000,
    "bearer " * 40_000,
    "://a:" * 60_000,
    "x://" + "a" * 300_000 + ":",
    "GB82 " * 60_000,
    "GB82" + "A" * 300_000,
    "sk-" * 100_000,
    "sk-" + "a" * 300_000,
    "AKIA" * 75_000,
    "-" * 300_000,
]


@pytest.mark.parametrize("text", ADVERSARIAL, ids=lambda text: repr(text[:12]))
def test_patterns_run_in_linear_time(scrubber: Scrubber, text: str) -> None:
    # Each input is ~300 KB; a quadratic pattern would take minutes, a linear one
    # well under a second.
    started = time.perf_counter()
    scrubber.scrub_text(text)
    assert time.perf_counter() - started < 3


@settings(max_examples=15, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            [
                "a",
                "A",
                "1",
                " ",
                "-",
                ".",
                "@",
                ":",
                "/",
                "+",
                "(",
                ")",
                "eyJ",
                "AKIA",
                "GB82",
                "sk-",
            ]
        ),
        min_size=1,
        max_size=6,
    ),
)
def test_repeated_pattern_fragments_scan_in_linear_time(fragments: list[str]) -> None:
    unit = "".join(fragments)
    text = unit * (100_000 // len(unit))
    started = time.perf_counter()
    Scrubber(fingerprint_key=KEY).scrub_text(text)
    assert time.perf_counter() - started < 3


# --- configuration, exemptions, blocking ---------------------------------------------


def test_unknown_detectors_are_named() -> None:
    with pytest.raises(ValueError, match="'emial'"):
        Scrubber(fingerprint_key=KEY, detectors=["email", "emial"])
    with pytest.raises(ValueError, match="'nope'"):
        Scrubber(fingerprint_key=KEY, block=["nope"])


def test_bad_configuration_is_refused() -> None:
    with pytest.raises(TypeError):
        Scrubber(fingerprint_key=KEY, detectors="email")
    with pytest.raises(ValueError, match="empty"):
        Scrubber(fingerprint_key=b"")
    with pytest.raises(ValueError, match="negative"):
        Scrubber(fingerprint_key=KEY, max_depth=-1)
    with pytest.raises(TypeError):
        Scrubber(fingerprint_key=KEY).scrub({}, exempt="to")
    with pytest.raises(ValueError, match="empty segment"):
        Scrubber(fingerprint_key=KEY).scrub({}, exempt=["a..b"])


def test_only_the_chosen_detectors_run_plus_the_blocking_ones() -> None:
    scrubber = Scrubber(fingerprint_key=KEY, detectors=["email"], block=["private_key"])
    assert scrubber.detectors == ("private_key", "email")
    assert scrubber.blocking == frozenset({"private_key"})
    result = scrubber.scrub(f"{EMAIL} {AWS} {PEM}")
    assert result.value == f"[REDACTED:email] {AWS} [REDACTED:private_key]"
    assert result.blocked == ("private_key",)
    assert Scrubber(fingerprint_key=KEY, detectors=["*"]).detectors == tuple(
        d.name for d in DETECTORS
    )


def test_exempt_paths_skip_redacting_detectors(scrubber: Scrubber) -> None:
    args = {
        "to": EMAIL,
        "body": EMAIL,
        "headers": {"cc": [EMAIL], "bcc": EMAIL},
        "items": [{"owner": EMAIL, "note": EMAIL}],
    }
    result = scrubber.scrub(args, exempt=["to", "headers.cc", "items.owner"])
    assert result.value == {
        "to": EMAIL,
        "body": "[REDACTED:email]",
        "headers": {"cc": [EMAIL], "bcc": "[REDACTED:email]"},
        "items": [{"owner": EMAIL, "note": "[REDACTED:email]"}],
    }
    assert [f.path for f in result.findings] == ["$.body", "$.headers.bcc", "$.items[0].note"]


def test_exempt_paths_cover_keys_below_them(scrubber: Scrubber) -> None:
    result = scrubber.scrub({"to": {EMAIL: "Alice"}, "cc": {EMAIL: "Alice"}}, exempt=["to"])
    assert result.value == {"to": {EMAIL: "Alice"}, "cc": {"[REDACTED:email]": "Alice"}}


def test_blocking_detectors_ignore_exemptions() -> None:
    scrubber = Scrubber(fingerprint_key=KEY, block=["private_key"])
    result = scrubber.scrub({"to": f"{EMAIL} {PEM}"}, exempt=["to"])
    assert result.value == {"to": f"{EMAIL} [REDACTED:private_key]"}
    assert [(f.detector, f.path) for f in result.findings] == [("private_key", "$.to")]
    assert result.blocked == ("private_key",)


def test_block_all_blocks_every_detector_and_exempts_nothing() -> None:
    scrubber = Scrubber(fingerprint_key=KEY, block_all=True)
    result = scrubber.scrub({"to": EMAIL, "card": CARD, "x": EMAIL}, exempt=["to"])
    assert result.value == {
        "to": "[REDACTED:email]",
        "card": "[REDACTED:credit_card]",
        "x": "[REDACTED:email]",
    }
    assert result.blocked == ("credit_card", "email")  # sorted, unique


def test_redacting_detectors_do_not_block(scrubber: Scrubber) -> None:
    assert scrubber.scrub({"k": PEM}).blocked == ()


# --- fingerprints --------------------------------------------------------------------


def test_fingerprints_are_keyed_hmacs_of_the_matched_text() -> None:
    one = Scrubber(fingerprint_key=b"one").scrub({"a": AWS, "b": f"x {AWS} y"})
    two = Scrubber(fingerprint_key=b"two").scrub({"a": AWS})
    assert one.findings[0].fingerprint == fingerprint(AWS, b"one")
    assert one.findings[0].fingerprint == one.findings[1].fingerprint  # same secret, same print
    assert two.findings[0].fingerprint == fingerprint(AWS, b"two")
    assert one.findings[0].fingerprint != two.findings[0].fingerprint


def test_findings_never_hold_the_secret(scrubber: Scrubber) -> None:
    result = scrubber.scrub({EMAIL: f"Bearer abcDEF123456ghi {AWS}"})
    for finding in result.findings:
        for field in (finding.detector, finding.path, finding.fingerprint):
            for secret in (EMAIL, "abcDEF123456ghi", AWS):
                assert secret not in field


def test_a_lone_surrogate_is_fingerprinted_not_crashed_on(scrubber: Scrubber) -> None:
    result = scrubber.scrub({"\ud800key": "\udfff alice@example.com"})
    assert result.value == {"\ud800key": "\udfff [REDACTED:email]"}
    assert result.findings[0].path == '$["\\ud800key"]'


# --- properties ----------------------------------------------------------------------

_CLEAN_TEXT = st.text(alphabet="abcdefghijklmnopqrstuvwxyz éßø漢", max_size=12)
_CLEAN_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False),
    _CLEAN_TEXT,
    _CLEAN_TEXT.map(str.encode),
)
_CLEAN_VALUES = st.recursive(
    _CLEAN_SCALARS,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.lists(children, max_size=3).map(tuple),
        st.dictionaries(_CLEAN_TEXT, children, max_size=4),
    ),
    max_leaves=16,
)


@st.composite
def values_with_a_secret(draw: st.DrawFn) -> tuple[object, str, str]:
    """A JSON-like value with one secret embedded somewhere: in a string, a key or bytes."""
    detector, text, secret = draw(scrubber_secrets())
    carrier = f"{draw(_CLEAN_TEXT)} {text} {draw(_CLEAN_TEXT)}"
    placed: object = draw(
        st.sampled_from(
            [
                carrier,
                [carrier],
                (1, carrier),
                {carrier: 1},
                carrier.encode(),
                {"deep": [{"deeper": carrier}]},
            ]
        )
    )
    base = draw(st.dictionaries(_CLEAN_TEXT, _CLEAN_VALUES, max_size=3))
    base[draw(_CLEAN_TEXT)] = placed
    return base, detector, secret


def strings_in(value: object) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, bytes):
        yield value.decode("utf-8", "replace")
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from strings_in(key)
            yield from strings_in(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from strings_in(item)


@given(values_with_a_secret())
def test_an_embedded_secret_never_survives(case: tuple[object, str, str]) -> None:
    value, detector, secret = case
    result = Scrubber(fingerprint_key=KEY).scrub(value)
    assert detector in {f.detector for f in result.findings}
    assert secret not in repr(result.value)
    for text in strings_in(result.value):
        assert secret not in text
    for finding in result.findings:
        assert secret not in f"{finding.detector} {finding.path} {finding.fingerprint}"


@given(values_with_a_secret())
def test_scrubbing_is_idempotent(case: tuple[object, str, str]) -> None:
    scrubber = Scrubber(fingerprint_key=KEY)
    once = scrubber.scrub(case[0])
    twice = scrubber.scrub(once.value)
    assert twice.findings == ()
    assert twice.value == once.value


@given(_CLEAN_VALUES)
def test_values_without_secrets_come_back_equal(value: object) -> None:
    result = Scrubber(fingerprint_key=KEY).scrub(value)
    assert result.findings == ()
    assert result.value is value


def test_other_mappings_and_sets_are_walked_too() -> None:
    from types import MappingProxyType

    scrubber = Scrubber(fingerprint_key=b"k")
    proxied = MappingProxyType({"to": "jane.doe@example.com"})
    result = scrubber.scrub({"a": proxied, "s": {"jane.doe@example.com", 1}, "f": frozenset({"x"})})
    assert result.value == {
        "a": {"to": "[REDACTED:email]"},
        "s": {"[REDACTED:email]", 1},
        "f": frozenset({"x"}),
    }
    assert isinstance(result.value["s"], set)
    assert [f.detector for f in result.findings] == ["email", "email"]
