"""Outside text on its way into the log: bounded, scrubbed by every detector, escaped."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from runtime._recorded import RecordedText, escape, type_name

AWS_KEY = "AKIAIOSFODNN7EXAMPLE"


def redact(text: str) -> str:
    return text.replace(AWS_KEY, "[REDACTED:aws_access_key_id]")


RECORDED = RecordedText(redact, max_chars=20)


@pytest.mark.parametrize(
    ("text", "escaped"),
    [
        ("plain", "plain"),
        ("a\x00b", "a\\u0000b"),
        ("\x1f\x7f\x80\x9f", "\\u001f\\u007f\\u0080\\u009f"),
        ("x" + chr(0xD800), "x\\ud800"),
        ("\u202a\u202e\u2066\u2069", "\\u202a\\u202e\\u2066\\u2069"),
        ("é\xa0\u2028😀", "é\xa0\u2028😀"),  # printable or ordinary: kept
    ],
)
def test_escape(text: str, escaped: str) -> None:
    assert escape(text) == escaped


@given(st.text(alphabet=st.characters(codec=None, min_codepoint=0, max_codepoint=0x10FFFF)))
def test_escaped_text_is_always_valid_utf8_without_controls(text: str) -> None:
    out = escape(text)
    out.encode("utf-8")
    assert not any(ord(char) < 0x20 or 0x7F <= ord(char) <= 0x9F for char in out)


def test_secrets_are_redacted_before_escaping() -> None:
    # Escaping first would glue "…0001" to the key, hiding it from a detector.
    recorded = RecordedText(redact, max_chars=100)
    assert recorded(f"\x01{AWS_KEY}") == "\\u0001[REDACTED:aws_access_key_id]"


def test_the_bound_is_inclusive_and_longer_text_keeps_only_its_length() -> None:
    assert RECORDED("x" * 20) == "x" * 20
    assert RECORDED("x" * 21) == "<21 characters, not recorded: longer than 20>"


def test_non_strings_are_recorded_by_type_name() -> None:
    assert RECORDED(42) == "<not a string: int>"
    recorded = RecordedText(redact, max_chars=100)
    assert recorded(type(AWS_KEY, (), {})()) == "<not a string: [REDACTED:aws_access_key_id]>"


def test_a_redactor_that_fails_keeps_only_the_length() -> None:
    def failing(text: str) -> str:
        raise MemoryError

    assert RecordedText(failing, max_chars=10)("abc") == (
        "<3 characters, not recorded: they could not be scrubbed>"
    )


def test_type_name_runs_none_of_the_value_code_and_is_bounded() -> None:
    class Meta(type):
        @property
        def __name__(cls) -> str:  # type: ignore[override]
            raise RuntimeError("never called")

    class Quiet(metaclass=Meta):
        pass

    assert type_name(Quiet()) == "Quiet"
    assert type_name(type("N" * 200, (), {})()) == "N" * 77 + "..."
    assert type_name(type("N" * 80, (), {})()) == "N" * 80
