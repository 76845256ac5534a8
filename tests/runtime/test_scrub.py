"""The scrubber's walk and API: plain data, numbers, keys and paths, bounds, exemptions."""

from __future__ import annotations

import copy
import hashlib
import hmac
import math
import threading
from collections import OrderedDict, UserString, deque
from collections.abc import Iterator
from enum import Enum
from types import MappingProxyType
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from runtime import (
    EvaluationError,
    Finding,
    GhostError,
    Scrubber,
    ScrubLimitExceeded,
    ScrubResult,
    UnsupportedValue,
)
from runtime._detectors import DETECTORS
from runtime._redaction import FINDING_COST, MAX_ROUNDS, REACH_AFTER, REACH_BEFORE, VERIFY_COST
from runtime._scanner import ATTEMPT_COST, HIT_COST
from runtime._walk import CONTAINER_COST, KEY_COST, VALUE_COST
from tests.strategies import scrubber_secrets

KEY = b"test-fingerprint-key"
AWS = "AKIAIOSFODNN7EXAMPLE"
EMAIL = "alice@example.com"
CARD = "4111 1111 1111 1111"
PEM = (
    "-----BEGIN RSA PRIVATE KEY-----\n"
    "MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun\n"
    "-----END RSA PRIVATE KEY-----"
)


@pytest.fixture(scope="module")
def scrubber() -> Scrubber:
    return Scrubber(fingerprint_key=KEY)


def fingerprint(secret: str, key: bytes = KEY) -> str:
    return hmac.new(key, secret.encode(), hashlib.sha256).hexdigest()


def paths(result: ScrubResult) -> list[tuple[str, str]]:
    return [(f.detector, f.path) for f in result.findings]


# --- the walk ------------------------------------------------------------------------------


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
    assert paths(result) == [
        ("email", "$.to"),
        ("aws_access_key_id", "$.items[2].body"),
        ("credit_card", '$["odd key"]'),
    ]
    assert result.blocked == ()


def test_findings_come_in_walk_order_keys_before_values(scrubber: Scrubber) -> None:
    result = scrubber.scrub({"a": [EMAIL, {EMAIL: AWS}], "b": AWS})
    assert paths(result) == [
        ("email", "$.a[0]"),
        ("email", '$.a[1]["[REDACTED:email]"]#key'),
        ("aws_access_key_id", '$.a[1]["[REDACTED:email]"]'),
        ("aws_access_key_id", "$.b"),
    ]


def test_top_level_values(scrubber: Scrubber) -> None:
    assert scrubber.scrub(EMAIL).value == "[REDACTED:email]"
    assert scrubber.scrub(EMAIL).findings[0].path == "$"
    assert scrubber.scrub([EMAIL]).value == ["[REDACTED:email]"]
    assert scrubber.scrub(EMAIL.encode()).value == b"[REDACTED:email]"
    assert scrubber.scrub(None).value is None
    assert scrubber.scrub(41111111111111111).findings == ()  # 17 digits, Luhn-invalid


def test_a_clean_value_is_returned_as_is(scrubber: Scrubber) -> None:
    args = {"q": "weather in paris", "n": [1, 2.5, {"x": "y", "t": True, "z": None}], "b": b"\xff"}
    result = scrubber.scrub(args)
    assert result.value is args
    assert (result.findings, result.blocked) == ((), ())


def test_input_is_never_mutated_and_clean_parts_are_shared(scrubber: Scrubber) -> None:
    clean_part = {"deep": [1, "two", ["three"]]}
    args: dict[str, Any] = {"keep": clean_part, "dirty": [EMAIL, {"k": EMAIL}], EMAIL: [EMAIL]}
    before = copy.deepcopy(args)
    result = scrubber.scrub(args)
    assert args == before
    assert isinstance(result.value, dict)
    assert result.value is not args
    assert result.value["keep"] is clean_part  # copy-on-write: nothing changed there
    assert result.value["dirty"] is not args["dirty"]
    assert type(result.value) is dict
    assert type(result.value["dirty"]) is list


def test_bytes_are_scanned_as_they_are_and_stay_bytes(scrubber: Scrubber) -> None:
    clean = b"nothing here \xff\xfe"
    dirty = b"\xff to " + EMAIL.encode() + b" \x00\x80"
    result = scrubber.scrub({"a": clean, "b": dirty})
    assert isinstance(result.value, dict)
    assert result.value["a"] is clean
    assert result.value["b"] == b"\xff to [REDACTED:email] \x00\x80"  # nothing else touched
    assert paths(result) == [("email", "$.b")]
    assert result.findings[0].fingerprint == fingerprint(EMAIL)


def test_non_ascii_text_around_secrets_is_kept(scrubber: Scrubber) -> None:
    text = f"été {EMAIL} 漢字 \U0001f600 {CARD} ø"
    assert scrubber.scrub(text).value == (
        "été [REDACTED:email] 漢字 \U0001f600 [REDACTED:credit_card] ø"
    )


def test_a_lone_surrogate_is_scanned_and_fingerprinted(scrubber: Scrubber) -> None:
    result = scrubber.scrub({"\ud800key": f"\udfff {EMAIL}", "k": "x\ud800bob@x.com"})
    assert result.value == {"\ud800key": "\udfff [REDACTED:email]", "k": "x\ud800[REDACTED:email]"}
    assert result.findings[0].path == '$["\\ud800key"]'


# --- plain data only ---------------------------------------------------------------------


class Explosive:
    """An object that must never be turned into text."""

    def __str__(self) -> str:
        raise RuntimeError("__str__ called")

    __repr__ = __str__


class Colour(Enum):
    RED = 1


def _gen() -> Iterator[int]:
    yield 1


class Sub(str):
    __slots__ = ()


class IntSub(int):
    pass


class DictSub(dict):  # type: ignore[type-arg]
    pass


@pytest.mark.parametrize(
    ("value", "type_name"),
    [
        ((EMAIL,), "tuple"),
        ({EMAIL}, "set"),
        (frozenset(), "frozenset"),
        (Explosive(), "Explosive"),
        (Colour.RED, "Colour"),
        (deque([EMAIL]), "deque"),
        (memoryview(b"x"), "memoryview"),
        (bytearray(b"x"), "bytearray"),
        (UserString(EMAIL), "UserString"),
        (_gen(), "generator"),
        ({}.keys(), "dict_keys"),
        (MappingProxyType({}), "mappingproxy"),
        (OrderedDict(), "OrderedDict"),
        (Sub(EMAIL), "Sub"),
        (IntSub(1), "IntSub"),
        (DictSub(), "DictSub"),
        (1j, "complex"),
    ],
)
def test_anything_that_is_not_plain_data_is_refused(
    scrubber: Scrubber, value: object, type_name: str
) -> None:
    with pytest.raises(UnsupportedValue) as info:
        scrubber.scrub({"a": [1, value]})
    assert (info.value.type_name, info.value.path) == (type_name, "$.a[1]")
    assert isinstance(info.value, EvaluationError)
    assert isinstance(info.value, TypeError)
    assert EMAIL not in str(info.value)


@pytest.mark.parametrize(
    ("value", "problem"), [(math.nan, "NaN"), (math.inf, "infinite"), (-math.inf, "infinite")]
)
def test_non_finite_floats_are_refused(scrubber: Scrubber, value: float, problem: str) -> None:
    with pytest.raises(UnsupportedValue, match=problem) as info:
        scrubber.scrub({"x": {"y": value}})
    assert (info.value.type_name, info.value.path) == ("float", "$.x.y")


@pytest.mark.parametrize("key", [1, None, True, (1, 2), b"raw", 1.5])
def test_non_string_keys_are_refused(scrubber: Scrubber, key: object) -> None:
    with pytest.raises(UnsupportedValue, match="dict key") as info:
        scrubber.scrub({"outer": {key: EMAIL}})
    assert info.value.type_name == type(key).__name__
    assert info.value.path == "$.outer"


def test_refusal_paths_and_type_names_are_redacted(scrubber: Scrubber) -> None:
    secret_class = type(AWS, (), {})
    with pytest.raises(UnsupportedValue) as info:
        scrubber.scrub({CARD: {EMAIL: [secret_class()]}})
    message = str(info.value)
    for secret in (AWS, CARD, EMAIL):
        assert secret not in message
    assert info.value.type_name == "[REDACTED:aws_access_key_id]"
    assert info.value.path == '$["[REDACTED:credit_card]"]["[REDACTED:email]"][0]'


def test_booleans_and_none_pass_through(scrubber: Scrubber) -> None:
    value = {"t": True, "f": False, "n": None}
    assert scrubber.scrub(value).value is value


# --- numbers (issue 5, class 4) -------------------------------------------------------------


def test_a_card_sent_as_an_int_is_found(scrubber: Scrubber) -> None:
    result = scrubber.scrub({"card": 4111111111111111, "neg": -4111111111111111})
    assert result.value == {"card": "[REDACTED:credit_card]", "neg": "-[REDACTED:credit_card]"}
    assert result.findings[0] == Finding("credit_card", "$.card", fingerprint("4111111111111111"))


def test_a_phone_number_sent_as_an_int_is_found(scrubber: Scrubber) -> None:
    result = scrubber.scrub({"phone": 14155552671})
    assert result.value == {"phone": "[REDACTED:phone_number]"}


def test_floats_are_scanned_as_their_shortest_decimal_text(scrubber: Scrubber) -> None:
    result = scrubber.scrub([4111111111111111.0, 0.4111111111111111, 14155552671.0, 1e300])
    assert result.value == [
        "[REDACTED:credit_card].0",
        0.4111111111111111,
        "[REDACTED:phone_number].0",
        1e300,
    ]


def test_ordinary_numbers_are_left_alone(scrubber: Scrubber) -> None:
    values = [0, -1, 2**31 - 1, 2**32, 1700000000, 1700000000123, 10**30, -(10**25), 3.14, 1e-9]
    assert scrubber.scrub(values).value is values


def test_numbers_at_the_scan_bounds() -> None:
    # Only integer parts of 11 to 20 digits are scanned; check both ends with a
    # budget that just fits their text.
    tight = Scrubber(fingerprint_key=KEY, max_bytes=VALUE_COST + 10)
    tight.scrub(10**10 - 1)  # 10 digits: not scanned, so not charged
    with pytest.raises(ScrubLimitExceeded):
        tight.scrub(10**10)  # 11 digits: scanned
    with pytest.raises(ScrubLimitExceeded):
        tight.scrub(-(10**10))
    tight.scrub(10**20)  # 21 digits
    with pytest.raises(ScrubLimitExceeded):
        tight.scrub(10**20 - 1)
    tight.scrub(9_999_999_999.5)
    with pytest.raises(ScrubLimitExceeded):
        tight.scrub(1e10)
    tighter = Scrubber(fingerprint_key=KEY, max_bytes=VALUE_COST + 5)
    tighter.scrub(1e20)  # "1e+20": not scanned
    with pytest.raises(ScrubLimitExceeded):
        tighter.scrub(9.9e19)  # "9.9e+19": scanned


def test_booleans_are_not_numbers_here(scrubber: Scrubber) -> None:
    assert scrubber.scrub([True, False]).findings == ()


# --- keys and paths (issue 5, class 5) --------------------------------------------------------


def test_dict_keys_are_scanned_and_paths_use_the_redacted_key(scrubber: Scrubber) -> None:
    result = scrubber.scrub({"contacts": {EMAIL: {"note": f"card {CARD}"}}})
    assert result.value == {
        "contacts": {"[REDACTED:email]": {"note": "card [REDACTED:credit_card]"}}
    }
    assert paths(result) == [
        ("email", '$.contacts["[REDACTED:email]"]#key'),
        ("credit_card", '$.contacts["[REDACTED:email]"].note'),
    ]


def test_keys_that_redact_alike_do_not_overwrite_each_other(scrubber: Scrubber) -> None:
    args = {EMAIL: 1, "bob@example.org": 2, "[REDACTED:email]": 3, "[REDACTED:email] (2)": 4}
    result = scrubber.scrub(args)
    assert result.value == {
        "[REDACTED:email] (3)": 1,
        "[REDACTED:email] (4)": 2,
        "[REDACTED:email]": 3,
        "[REDACTED:email] (2)": 4,
    }
    assert [f.path for f in result.findings] == [
        '$["[REDACTED:email] (3)"]#key',
        '$["[REDACTED:email] (4)"]#key',
    ]


def test_a_key_redacted_to_itself_keeps_its_place(scrubber: Scrubber) -> None:
    result = scrubber.scrub({"a": 1, f"x {EMAIL}": {"y": EMAIL}, "z": 2})
    assert isinstance(result.value, dict)
    assert list(result.value) == ["a", "x [REDACTED:email]", "z"]
    assert result.value["x [REDACTED:email]"] == {"y": "[REDACTED:email]"}


def test_path_keys_are_redacted_by_every_detector_whatever_the_policy_lists() -> None:
    only_email = Scrubber(fingerprint_key=KEY, detectors=["email"])
    result = only_email.scrub({"4111111111111111": {AWS: EMAIL}})
    assert result.value == {
        "4111111111111111": {AWS: "[REDACTED:email]"}
    }  # keys kept as policy says
    (finding,) = result.findings
    assert finding.path == '$["[REDACTED:credit_card]"]["[REDACTED:aws_access_key_id]"]'
    assert "4111111111111111" not in finding.path
    assert AWS not in finding.path


def test_a_blocking_finding_under_an_exempt_key_never_names_the_key_raw() -> None:
    scrubber = Scrubber(fingerprint_key=KEY, block=["private_key"])
    result = scrubber.scrub({"cards": {"4111111111111111": PEM}}, exempt=["cards"])
    assert result.value == {"cards": {"4111111111111111": "[REDACTED:private_key]"}}
    assert result.blocked == ("private_key",)
    assert [f.path for f in result.findings] == ['$.cards["[REDACTED:credit_card]"]']


def test_path_segments_are_ascii_json_strings(scrubber: Scrubber) -> None:
    result = scrubber.scrub({'a"b\\c\n': {"é漢\U0001f600": EMAIL}, "ok_1": [EMAIL], "1x": EMAIL})
    assert [f.path for f in result.findings] == [
        '$["a\\"b\\\\c\\u000a"]["\\u00e9\\u6f22\\ud83d\\ude00"]',
        "$.ok_1[0]",
        '$["1x"]',
    ]


def test_clean_keys_are_remembered_for_paths(scrubber: Scrubber) -> None:
    scrubber.scrub({"remember_me": EMAIL})
    assert "remember_me" in scrubber._clean
    scrubber.scrub({"x" * 65: EMAIL})
    assert "x" * 65 not in scrubber._clean  # too long to remember
    fresh = Scrubber(fingerprint_key=KEY)
    for index in range(4097):
        fresh.record_text(f"k{index}")
    assert len(fresh._clean) == 1  # cleared when full, then the newest


# --- record_text --------------------------------------------------------------------------------


def test_record_text_uses_every_detector() -> None:
    only_email = Scrubber(fingerprint_key=KEY, detectors=["email"])
    resource = f"mail:{EMAIL}?card=4111111111111111&key={AWS}"
    assert only_email.record_text(resource) == (
        "mail:[REDACTED:email]?card=[REDACTED:credit_card]&key=[REDACTED:aws_access_key_id]"
    )
    assert only_email.scrub_text(resource)[0] == (
        "mail:[REDACTED:email]?card=4111111111111111&key=" + AWS
    )


def test_record_text_never_raises() -> None:
    scrubber = Scrubber(fingerprint_key=KEY, max_bytes=100)
    assert scrubber.record_text("a" * 99) == "a" * 99
    assert scrubber.record_text("a" * 101) == "<text of 101 characters that could not be scrubbed>"
    assert scrubber.record_text("a" * 10 + EMAIL).startswith("<text of 27 characters")
    assert scrubber.record_text(123) == "<not a string>"  # type: ignore[arg-type]
    default = Scrubber(fingerprint_key=KEY)
    assert default.record_text(f"\ud800{EMAIL}\x00\x1b") == "\ud800[REDACTED:email]\x00\x1b"
    assert default.record_text(Sub(EMAIL)) == "[REDACTED:email]"


# --- scrub_text ----------------------------------------------------------------------------------


def test_scrub_text_uses_this_scrubbers_detectors() -> None:
    scrubber = Scrubber(fingerprint_key=KEY, detectors=["aws_access_key_id"])
    redacted, findings = scrubber.scrub_text(f"{AWS} {EMAIL}")
    assert redacted == f"[REDACTED:aws_access_key_id] {EMAIL}"
    assert findings == (Finding("aws_access_key_id", "$", fingerprint(AWS)),)
    with pytest.raises(TypeError):
        scrubber.scrub_text(b"bytes")  # type: ignore[arg-type]
    assert scrubber.scrub_text(Sub("clean")) == ("clean", ())
    with pytest.raises(ScrubLimitExceeded):
        Scrubber(fingerprint_key=KEY, max_bytes=5).scrub_text("abcdef")


# --- bounds -----------------------------------------------------------------------------------


def test_a_cycle_is_refused(scrubber: Scrubber) -> None:
    loop: list[object] = [EMAIL]
    loop.append(loop)
    with pytest.raises(ScrubLimitExceeded) as info:
        scrubber.scrub({"x": loop})
    assert (info.value.bound, info.value.limit) == ("max_depth", 32)
    assert EMAIL not in str(info.value)
    cyclic: dict[str, object] = {}
    cyclic["self"] = cyclic
    with pytest.raises(ScrubLimitExceeded):
        scrubber.scrub(cyclic)


@pytest.mark.parametrize("kind", ["list", "dict"])
def test_twenty_thousand_levels_deep_is_refused_not_a_recursion_error(
    scrubber: Scrubber, kind: str
) -> None:
    deep: object = f"secret {EMAIL}"
    for _ in range(20_000):
        deep = [deep] if kind == "list" else {"a": deep}
    with pytest.raises(ScrubLimitExceeded, match="max_depth of 32") as info:
        scrubber.scrub(deep)
    assert isinstance(info.value, GhostError)
    assert isinstance(info.value, ValueError)


def test_deep_nesting_is_bounded_by_our_limit_even_when_it_is_large() -> None:
    scrubber = Scrubber(fingerprint_key=KEY, max_depth=50_000, max_bytes=1 << 30)
    deep: object = EMAIL
    for _ in range(20_000):
        deep = [deep]
    result = scrubber.scrub(deep)
    assert [f.path for f in result.findings] == ["$" + "[0]" * 20_000]


def test_the_depth_limit_is_exact() -> None:
    scrubber = Scrubber(fingerprint_key=KEY, max_depth=2)
    assert scrubber.scrub([[[EMAIL]]]).value == [[["[REDACTED:email]"]]]  # depths 0, 1, 2
    assert scrubber.scrub({"a": {"b": {"c": 1}}}).findings == ()
    with pytest.raises(ScrubLimitExceeded):
        scrubber.scrub([[[[EMAIL]]]])
    with pytest.raises(ScrubLimitExceeded):
        scrubber.scrub({"a": {"b": {"c": {}}}})
    assert Scrubber(fingerprint_key=KEY, max_depth=0).scrub([1]).value == [1]
    with pytest.raises(ScrubLimitExceeded):
        Scrubber(fingerprint_key=KEY, max_depth=0).scrub([[1]])


def test_megabytes_of_text_are_refused(scrubber: Scrubber) -> None:
    with pytest.raises(ScrubLimitExceeded, match="max_bytes of 1048576") as info:
        scrubber.scrub({"blob": f"{EMAIL} " + "x" * (2 << 20)})
    assert info.value.bound == "max_bytes"
    assert EMAIL not in str(info.value)
    with pytest.raises(ScrubLimitExceeded):
        scrubber.scrub(["y" * 1000] * 2000)
    with pytest.raises(ScrubLimitExceeded):
        scrubber.scrub_text("z" * (2 << 20))


def test_the_size_budget_is_exact() -> None:
    # A string: one value plus its UTF-8 bytes.
    exact = Scrubber(fingerprint_key=KEY, max_bytes=VALUE_COST + 9)
    assert exact.scrub("a" * 9).value == "a" * 9
    with pytest.raises(ScrubLimitExceeded):
        exact.scrub("a" * 10)
    with pytest.raises(ScrubLimitExceeded):
        Scrubber(fingerprint_key=KEY, max_bytes=VALUE_COST + 9).scrub("é" * 5)  # 10 bytes
    # A list: itself (a value and a container) and each item.
    listed = VALUE_COST + CONTAINER_COST + 3 * VALUE_COST
    Scrubber(fingerprint_key=KEY, max_bytes=listed).scrub([1, 2, 3])
    with pytest.raises(ScrubLimitExceeded):
        Scrubber(fingerprint_key=KEY, max_bytes=listed - 1).scrub([1, 2, 3])
    # A dict: each key costs KEY_COST and its bytes.
    keyed = VALUE_COST + CONTAINER_COST + KEY_COST + 2 + VALUE_COST
    Scrubber(fingerprint_key=KEY, max_bytes=keyed).scrub({"ab": None})
    with pytest.raises(ScrubLimitExceeded):
        Scrubber(fingerprint_key=KEY, max_bytes=keyed - 1).scrub({"ab": None})
    # Bytes cost their length.
    Scrubber(fingerprint_key=KEY, max_bytes=VALUE_COST + 4).scrub(b"abcd")
    with pytest.raises(ScrubLimitExceeded):
        Scrubber(fingerprint_key=KEY, max_bytes=VALUE_COST + 3).scrub(b"abcd")


def test_the_budget_runs_through_walk_scan_and_redaction() -> None:
    # One value of 20 bytes; one hint hit ("AKIA", 4 bytes read back); one anchored
    # attempt matching 20 bytes; one finding. What the walk spends, the scan cannot.
    cost = VALUE_COST + 20 + HIT_COST + 4 + ATTEMPT_COST + 20 + FINDING_COST
    assert Scrubber(fingerprint_key=KEY, max_bytes=cost).scrub(AWS).value == (
        "[REDACTED:aws_access_key_id]"
    )
    with pytest.raises(ScrubLimitExceeded):
        Scrubber(fingerprint_key=KEY, max_bytes=cost - 1).scrub(AWS)
    # One text alone: no value to walk.
    assert Scrubber(fingerprint_key=KEY, max_bytes=cost - VALUE_COST).scrub_text(AWS)[1]
    with pytest.raises(ScrubLimitExceeded):
        Scrubber(fingerprint_key=KEY, max_bytes=cost - VALUE_COST - 1).scrub_text(AWS)


def test_the_cost_model_is_the_documented_one() -> None:
    # ADR 0010 states these figures and bench/scrub.py measures them: change all three.
    assert (VALUE_COST, CONTAINER_COST, KEY_COST) == (96, 384, 96)
    assert (HIT_COST, ATTEMPT_COST, FINDING_COST, VERIFY_COST) == (1536, 384, 3072, 256)
    assert (MAX_ROUNDS, REACH_BEFORE, REACH_AFTER) == (4, 800, 72)


def test_shared_references_cannot_blow_up_the_walk() -> None:
    # 2**60 paths through a few dozen objects: the per-value cost ends it quickly.
    bomb: list[object] = [1]
    for _ in range(60):
        bomb = [bomb, bomb]
    with pytest.raises(ScrubLimitExceeded):
        Scrubber(fingerprint_key=KEY, max_depth=100).scrub(bomb)


def test_ordinary_payloads_use_a_small_part_of_the_budget() -> None:
    # The budget is meant for adversarial input: a realistic tool call with a few
    # findings fits many times over (bench/scrub.py reports the figures).
    args = {
        "to": [EMAIL, "bob@example.org"],
        "subject": "Quarterly report",
        "body": "Hi team, the numbers are attached. " * 100 + "Call +1 415 555 2671.",
        "rows": [{"id": index, "name": f"row {index}", "ok": True} for index in range(100)],
    }
    Scrubber(fingerprint_key=KEY, max_bytes=1 << 18).scrub(args)  # a quarter of the default


# --- configuration, exemptions, blocking -------------------------------------------------------


def test_unknown_detectors_are_named() -> None:
    with pytest.raises(ValueError, match="'emial'"):
        Scrubber(fingerprint_key=KEY, detectors=["email", "emial"])
    with pytest.raises(ValueError, match="'nope'"):
        Scrubber(fingerprint_key=KEY, block=["nope"])


def test_bad_configuration_is_refused() -> None:
    with pytest.raises(TypeError):
        Scrubber(fingerprint_key=KEY, detectors="email")
    with pytest.raises(TypeError):
        Scrubber(fingerprint_key=KEY, block="email")
    with pytest.raises(TypeError):
        Scrubber(fingerprint_key="key")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="empty"):
        Scrubber(fingerprint_key=b"")
    with pytest.raises(ValueError, match="negative"):
        Scrubber(fingerprint_key=KEY, max_depth=-1)
    with pytest.raises(ValueError, match="negative"):
        Scrubber(fingerprint_key=KEY, max_bytes=-1)
    with pytest.raises(TypeError):
        Scrubber(fingerprint_key=KEY).scrub({}, exempt="to")
    with pytest.raises(ValueError, match="empty segment"):
        Scrubber(fingerprint_key=KEY).scrub({}, exempt=["a..b"])
    Scrubber(fingerprint_key=bytearray(b"k"), max_depth=0, max_bytes=0)


def test_only_the_chosen_detectors_run_plus_the_blocking_ones() -> None:
    scrubber = Scrubber(fingerprint_key=KEY, detectors=["email"], block=["private_key"])
    assert scrubber.detectors == ("private_key", "email")
    assert scrubber.blocking == frozenset({"private_key"})
    result = scrubber.scrub(f"{EMAIL} {AWS} {PEM}")
    assert result.value == f"[REDACTED:email] {AWS} [REDACTED:private_key]"
    assert result.blocked == ("private_key",)
    everything = tuple(d.name for d in DETECTORS)
    assert Scrubber(fingerprint_key=KEY, detectors=["*"]).detectors == everything
    assert Scrubber(fingerprint_key=KEY).detectors == everything
    assert Scrubber(fingerprint_key=KEY, detectors=[]).detectors == ()
    assert Scrubber(fingerprint_key=KEY, detectors=[]).scrub(EMAIL).value == EMAIL


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


def test_a_shorter_exempt_path_covers_a_longer_one(scrubber: Scrubber) -> None:
    args = {"a": {"b": EMAIL, "c": EMAIL}, "d": EMAIL}
    for exempt in (["a", "a.b"], ["a.b", "a"]):
        assert scrubber.scrub(args, exempt=exempt).value == {
            "a": {"b": EMAIL, "c": EMAIL},
            "d": "[REDACTED:email]",
        }
    assert scrubber.scrub(args, exempt=["a.b", "x.y"]).value == {
        "a": {"b": EMAIL, "c": "[REDACTED:email]"},
        "d": "[REDACTED:email]",
    }
    assert scrubber.scrub([EMAIL], exempt=["0"]).value == [
        "[REDACTED:email]"
    ]  # lists have no names


def test_numbers_under_an_exempt_path_are_exempt_too() -> None:
    args = {"card": 4111111111111111, "cards": [4111111111111111.0], "n": 4111111111111111}
    assert Scrubber(fingerprint_key=KEY).scrub(args, exempt=["card", "cards"]).value == {
        "card": 4111111111111111,
        "cards": [4111111111111111.0],
        "n": "[REDACTED:credit_card]",
    }
    blocking = Scrubber(fingerprint_key=KEY, block=["credit_card"])
    result = blocking.scrub(args, exempt=["card", "cards"])
    assert [f.path for f in result.findings] == ["$.card", "$.cards[0]", "$.n"]


def test_blocking_detectors_ignore_exemptions() -> None:
    scrubber = Scrubber(fingerprint_key=KEY, block=["private_key"])
    result = scrubber.scrub({"to": f"{EMAIL} {PEM}"}, exempt=["to"])
    assert result.value == {"to": f"{EMAIL} [REDACTED:private_key]"}
    assert paths(result) == [("private_key", "$.to")]
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
    assert scrubber.blocking == frozenset(scrubber.detectors)


def test_redacting_detectors_do_not_block(scrubber: Scrubber) -> None:
    assert scrubber.scrub({"k": PEM}).blocked == ()


# --- fingerprints ----------------------------------------------------------------------------


def test_fingerprints_are_keyed_hmacs_of_the_matched_text() -> None:
    one = Scrubber(fingerprint_key=b"one").scrub({"a": AWS, "b": f"x {AWS} y"})
    two = Scrubber(fingerprint_key=b"two").scrub({"a": AWS})
    assert one.findings[0].fingerprint == fingerprint(AWS, b"one")
    assert one.findings[0].fingerprint == one.findings[1].fingerprint
    assert two.findings[0].fingerprint == fingerprint(AWS, b"two")


def test_findings_never_hold_the_secret(scrubber: Scrubber) -> None:
    result = scrubber.scrub({EMAIL: f"Bearer abcDEF123456ghi {AWS}"})
    for finding in result.findings:
        for field in (finding.detector, finding.path, finding.fingerprint):
            for secret in (EMAIL, "abcDEF123456ghi", AWS):
                assert secret not in field


def test_scrub_is_safe_from_several_threads(scrubber: Scrubber) -> None:
    errors: list[BaseException] = []

    def work() -> None:
        try:
            for index in range(300):
                result = scrubber.scrub({f"k{index}": f"{EMAIL} {index}"})
                assert result.value == {f"k{index}": f"[REDACTED:email] {index}"}
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []


# --- properties -----------------------------------------------------------------------------

_CLEAN_TEXT = st.text(alphabet="abcdefghijklmnopqrstuvwxyz éßø漢", max_size=12)
_CLEAN_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    # Numbers are scanned as their decimal text: a random 15-digit one can be a card.
    st.integers(-(10**10) + 1, 10**10 - 1),
    st.floats(-1e10, 1e10, exclude_min=True, exclude_max=True),
    _CLEAN_TEXT,
    _CLEAN_TEXT.map(str.encode),
)
_CLEAN_VALUES = st.recursive(
    _CLEAN_SCALARS,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
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
                [1, carrier],
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
    elif isinstance(value, list):
        for item in value:
            yield from strings_in(item)


@given(values_with_a_secret())
def test_an_embedded_secret_never_survives(case: tuple[object, str, str]) -> None:
    value, detector, secret = case
    result = Scrubber(fingerprint_key=KEY).scrub(value)
    assert detector in {f.detector for f in result.findings}
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
def test_values_without_secrets_come_back_as_they_are(value: object) -> None:
    result = Scrubber(fingerprint_key=KEY).scrub(value)
    assert result.findings == ()
    assert result.value is value


# --- the walk's edges: numbers scanned, budgets met mid-container, exempt bytes, quoting -----


def smallest_budget(value: object) -> int:
    """The smallest ``max_bytes`` under which ``value`` is scrubbed without a limit error."""
    low, high = 1, 1 << 16
    while low < high:
        middle = (low + high) // 2
        try:
            Scrubber(fingerprint_key=KEY, detectors=[], max_bytes=middle).scrub(value)
        except ScrubLimitExceeded:
            low = middle + 1
        else:
            high = middle
    return low


@pytest.mark.parametrize(
    ("number", "scanned"),
    [
        (10**10 - 1, False),
        (10**10, True),
        (-(10**10), True),
        (10**20 - 1, True),
        (10**20, False),
        (1e10, True),
        (1e20, False),
    ],
)
def test_only_numbers_of_11_to_20_digits_are_scanned_as_text(number: float, scanned: bool) -> None:
    # A scanned number costs its text's length on top of what any value costs.
    extra = len(repr(number)) if scanned else 0
    assert smallest_budget({"n": number}) == smallest_budget({"n": None}) + extra


def test_a_container_over_budget_is_refused_before_its_next_item_is_read() -> None:
    # At one byte under the budget of ["aaaa", None], the text "aaaa" overspends by one:
    # the set after it is never read, so the error is the budget's, not the set's.
    budget = smallest_budget(["aaaa", None]) - 1
    with pytest.raises(ScrubLimitExceeded):
        Scrubber(fingerprint_key=KEY, max_bytes=budget).scrub(["aaaa", {1}])


def test_exempt_bytes_are_sent_as_they_are(scrubber: Scrubber) -> None:
    secret = AWS.encode()
    exempt = scrubber.scrub({"raw": secret, "other": secret}, exempt=["raw"])

    assert exempt.value["raw"] == secret
    assert exempt.value["other"] != secret
    assert [f.path for f in exempt.findings] == ["$.other"]


def test_a_key_redacted_onto_another_takes_the_first_free_number(scrubber: Scrubber) -> None:
    result = scrubber.scrub({EMAIL: 1, "[REDACTED:email]": 2})
    assert result.value == {"[REDACTED:email] (2)": 1, "[REDACTED:email]": 2}


@pytest.mark.parametrize(
    ("text", "quoted"),
    [
        ("~ !", '"~ !"'),
        ("\x1f", '"\\u001f"'),
        ("\x7f", '"\\u007f"'),
        ("\uffff", '"\\uffff"'),
        ("\U00010000", '"\\ud800\\udc00"'),
        ("\ud800", '"\\ud800"'),
        ('"\\', '"\\"\\\\"'),
    ],
)
def test_a_path_quotes_keys_as_printable_ascii_json(text: str, quoted: str) -> None:
    from runtime._walk import _quote

    assert _quote(text) == quoted


@given(st.text())
def test_a_quoted_key_is_printable_ascii_json_of_the_same_text(text: str) -> None:
    import json

    from runtime._walk import _quote

    quoted = _quote(text)
    assert all(0x20 <= ord(char) < 0x7F for char in quoted)
    assert json.loads(quoted) == text


# --- the API's refusals, fingerprints under long keys, texts after the first in a buffer ---


def test_misused_arguments_are_refused_with_what_to_pass_instead() -> None:
    with pytest.raises(TypeError, match=r"^detectors and block take a collection of names"):
        Scrubber(fingerprint_key=KEY, detectors="email")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"^fingerprint_key must be bytes$"):
        Scrubber(fingerprint_key="not bytes")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"^scrub_text takes a str$"):
        Scrubber(fingerprint_key=KEY).scrub_text(b"bytes")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"^exempt takes a collection of dotted paths"):
        Scrubber(fingerprint_key=KEY).scrub({}, exempt="to")


@pytest.mark.parametrize("length", [1, 32, 63, 64, 65, 200])
def test_fingerprints_are_hmac_sha256_under_a_key_of_any_length(length: int) -> None:
    key = bytes(range(256))[:length] if length <= 256 else b"k" * length
    (finding,) = Scrubber(fingerprint_key=key).scrub({"k": AWS}).findings
    assert finding.fingerprint == hmac.new(key, AWS.encode(), hashlib.sha256).hexdigest()


def test_a_bytearray_key_is_a_key(scrubber: Scrubber) -> None:
    (finding,) = Scrubber(fingerprint_key=bytearray(KEY)).scrub({"k": AWS}).findings
    assert finding.fingerprint == fingerprint(AWS)


def test_overlapping_candidates_resolve_alike_in_any_text_of_a_buffer(scrubber: Scrubber) -> None:
    # Every text of a value is scanned in one buffer; a text after the first must have
    # its candidates' claims placed where its secrets are, or overlaps resolve wrongly.
    text = "postgres://admin:s3cr3t@db.example.com/app"
    alone = scrubber.scrub({"url": text})
    behind = scrubber.scrub({"a": "padding " * 5, "b": "x", "url": text})

    assert (
        behind.value["url"]
        == alone.value["url"]
        == ("postgres://[REDACTED:url_credentials]@db.example.com/app")
    )
    assert [f.detector for f in behind.findings] == ["url_credentials"]


def test_a_blocking_detector_still_leaves_the_rest_of_a_text_to_the_others() -> None:
    # With an exempt path, the exempt texts get a second scan by the blocking detectors
    # only; the other texts keep what every detector made of them.
    scrubber = Scrubber(fingerprint_key=KEY, block=["aws_access_key_id"])
    result = scrubber.scrub({"to": EMAIL, "body": f"{AWS} {EMAIL}"}, exempt=["to"])
    assert result.value == {
        "to": EMAIL,
        "body": "[REDACTED:aws_access_key_id] [REDACTED:email]",
    }


def test_exempt_paths_sharing_a_prefix_are_all_exempt(scrubber: Scrubber) -> None:
    args = {"a": {"b": {"c": EMAIL, "d": EMAIL, "e": EMAIL}}}
    result = scrubber.scrub(args, exempt=["a.b.c", "a.b.d"])
    assert result.value == {"a": {"b": {"c": EMAIL, "d": EMAIL, "e": "[REDACTED:email]"}}}


def test_recorded_text_resolves_overlaps_as_a_redacting_scrubber_does(scrubber: Scrubber) -> None:
    # What the log keeps: the URL's password goes, its host stays (no detector blocks here).
    url = "postgres://admin:s3cr3t@db.example.com/app"
    assert scrubber.record_text(url) == "postgres://[REDACTED:url_credentials]@db.example.com/app"


def test_findings_and_results_are_frozen(scrubber: Scrubber) -> None:
    result = scrubber.scrub({"k": AWS})
    with pytest.raises(AttributeError):
        result.value = {}  # type: ignore[misc]
    with pytest.raises(AttributeError):
        result.findings[0].path = "$"  # type: ignore[misc]
