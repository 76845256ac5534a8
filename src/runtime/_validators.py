"""Validators: the checks a candidate passes after its pattern matched.

Each function takes the UTF-8 bytes of a candidate (or the buffer and the
candidate's bounds) and answers in constant work per byte, in C where it can:
`bytes.translate` tables and slices instead of per-character Python loops.
They never raise on any input.

The card and IBAN validators may *trim*: a pattern takes a trailing group of
following text greedily ("4111 1111 1111 1111 12/27"), so they try the
group-aligned prefixes, longest first, and return how many leading bytes are
the finding (0: none).
"""

from __future__ import annotations

import binascii
from typing import Final

__all__ = [
    "IBAN_LENGTHS",
    "basic_credentials",
    "card_length",
    "has_digit_and_letter",
    "iban_length",
    "luhn_ok",
    "not_a_word",
    "phone_length",
    "port_and_path",
    "ssn_ok",
]

_ALL: Final = bytes(range(256))
_DIGITS: Final = b"0123456789"
_LETTERS: Final = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
# `translate(None, delete)` keeps what `delete` omits: these keep digits / letters only.
_NOT_DIGITS: Final = bytes(b for b in _ALL if b not in _DIGITS)
_NOT_LETTERS: Final = bytes(b for b in _ALL if b not in _LETTERS)
# For each separator set `_group_ends` uses: a table that turns them all into spaces.
_TO_SPACE: Final = {
    seps: bytes.maketrans(seps, b" " * len(seps)) for seps in (b" -", b" ", b" .-(")
}
# Luhn: a digit's value, and the value of its double with the digits summed (7 -> 14 -> 5).
_PLAIN: Final = bytes.maketrans(_DIGITS, bytes(range(10)))
_DOUBLED: Final = bytes.maketrans(_DIGITS, bytes([0, 2, 4, 6, 8, 1, 3, 5, 7, 9]))
# IBAN: letters count as 10..35 (ISO 13616), either case; digits as themselves. Indexed by
# byte: a list comprehension over this table and one join beat `str.translate` with a dict.
_IBAN_DIGITS: Final[tuple[str, ...]] = tuple(
    chr(b)
    if 0x30 <= b <= 0x39
    else str(b - 0x37)
    if 0x41 <= b <= 0x5A
    else str(b - 0x57)
    if 0x61 <= b <= 0x7A
    else ""
    for b in range(256)
)

IBAN_LENGTHS: Final[dict[bytes, int]] = {
    b"AD": 24,
    b"AE": 23,
    b"AL": 28,
    b"AT": 20,
    b"AZ": 28,
    b"BA": 20,
    b"BE": 16,
    b"BG": 22,
    b"BH": 22,
    b"BI": 27,
    b"BR": 29,
    b"BY": 28,
    b"CH": 21,
    b"CR": 22,
    b"CY": 28,
    b"CZ": 24,
    b"DE": 22,
    b"DJ": 27,
    b"DK": 18,
    b"DO": 28,
    b"EE": 20,
    b"EG": 29,
    b"ES": 24,
    b"FI": 18,
    b"FK": 18,
    b"FO": 18,
    b"FR": 27,
    b"GB": 22,
    b"GE": 22,
    b"GI": 23,
    b"GL": 18,
    b"GR": 27,
    b"GT": 28,
    b"HR": 21,
    b"HU": 28,
    b"IE": 22,
    b"IL": 23,
    b"IQ": 23,
    b"IS": 26,
    b"IT": 27,
    b"JO": 30,
    b"KW": 30,
    b"KZ": 20,
    b"LB": 28,
    b"LC": 32,
    b"LI": 21,
    b"LT": 20,
    b"LU": 20,
    b"LV": 21,
    b"LY": 25,
    b"MC": 27,
    b"MD": 24,
    b"ME": 22,
    b"MK": 19,
    b"MN": 20,
    b"MR": 27,
    b"MT": 31,
    b"MU": 30,
    b"NI": 28,
    b"NL": 18,
    b"NO": 15,
    b"OM": 23,
    b"PK": 24,
    b"PL": 28,
    b"PS": 29,
    b"PT": 25,
    b"QA": 29,
    b"RO": 24,
    b"RS": 22,
    b"RU": 33,
    b"SA": 24,
    b"SC": 31,
    b"SD": 18,
    b"SE": 24,
    b"SI": 19,
    b"SK": 24,
    b"SM": 27,
    b"SO": 23,
    b"ST": 25,
    b"SV": 28,
    b"TL": 23,
    b"TN": 24,
    b"TR": 26,
    b"UA": 29,
    b"VA": 22,
    b"VG": 24,
    b"XK": 20,
    b"YE": 30,
}
"""IBAN length by country (the SWIFT IBAN registry): a candidate must have exactly this length."""


def digits_of(text: bytes) -> bytes:
    """The ASCII digits of ``text``, in order."""
    return text.translate(None, _NOT_DIGITS)


def luhn_ok(digits: bytes) -> bool:
    """Whether a string of ASCII digits passes the Luhn check (ISO/IEC 7812)."""
    total = sum(digits[-1::-2].translate(_PLAIN)) + sum(digits[-2::-2].translate(_DOUBLED))
    return total % 10 == 0


def _group_ends(text: bytes, separators: bytes) -> list[int]:
    """Offsets where a group of ``text`` ends (before each separator, and the end), longest last."""
    ends: list[int] = []
    end = -1
    for group in text.translate(_TO_SPACE[separators]).split(b" "):
        end += len(group) + 1
        ends.append(end)
    return ends


def card_length(text: bytes) -> int:
    """How many leading bytes of a card candidate are a card number (0: none).

    13 to 19 digits, Luhn-valid; the first digit (2-6) is the pattern's. A
    trailing group the pattern took ("... 12/27") is dropped if that makes it valid.
    """
    if text.isdigit():  # the common, ungrouped form: one candidate, the whole run
        return len(text) if 13 <= len(text) <= 19 and luhn_ok(text) else 0
    ends = _group_ends(text, b" -")
    digits = digits_of(text)
    if len(digits) + len(ends) - 1 == len(text):
        # Digits and separators only (what the pattern hands over): the i-th group end
        # has i separators before it, so its digits are a prefix of ``digits``.
        for group in range(len(ends) - 1, -1, -1):
            count = ends[group] - group
            if count < 13:
                break
            if count <= 19 and luhn_ok(digits[:count]):
                return ends[group]
        return 0
    for end in reversed(ends):
        digits = digits_of(text[:end])
        if len(digits) < 13:  # the shortest card number
            break
        if len(digits) <= 19 and luhn_ok(digits):
            return end
    return 0


def _mod97(compact: bytes) -> int:
    """ISO 7064 MOD 97-10 of an alphanumeric IBAN (either case): 1 when valid."""
    table = _IBAN_DIGITS
    rest = compact[4:]
    # The account part is mostly digits (all of it in most countries): no table there.
    digits = rest.decode("ascii") if rest.isdigit() else "".join([table[byte] for byte in rest])
    return int(digits + "".join([table[byte] for byte in compact[:4]])) % 97


def iban_length(text: bytes) -> int:
    """How many leading bytes of an IBAN candidate are an IBAN (0: none).

    Case-insensitive; the country must be in `IBAN_LENGTHS` with exactly its
    length, and the ISO 7064 MOD 97-10 checksum must hold. A trailing group
    that belongs to the following text is dropped when the rest has the length.
    """
    expected = IBAN_LENGTHS.get(text[:2].upper())
    if expected is None:
        return 0
    # Only one group-aligned prefix can have the country's length: the one that ends
    # right after the ``expected``-th non-space character. Its offset is the least
    # fixpoint of end = expected + (spaces before end), reached from below in at most
    # one step per space (each `count` runs in C).
    end = expected
    while True:
        further = expected + text.count(b" ", 0, end)
        if further == end:
            break
        end = further
    if end > len(text) or text[end : end + 1] not in (b"", b" "):
        return 0  # too short, or the group there runs past the length: no IBAN
    compact = text[:end].replace(b" ", b"")
    # Alphanumeric only: anything else has no MOD 97 value and is no IBAN.
    return end if compact.isalnum() and _mod97(compact) == 1 else 0


def phone_length(text: bytes) -> int:
    """How many leading bytes of a ``+`` phone candidate are an E.164 number (0: none).

    E.164 evidence: 10 to 15 digits, country code included. Fewer is a short
    number or a code (``+12345678``); groups of a following number that push
    it past 15 are dropped.
    """
    for end in reversed(_group_ends(text, b" .-(")):
        count = len(digits_of(text[:end]))
        if count < 10:
            break
        if count <= 15:
            return end
    return 0


def ssn_ok(text: bytes) -> bool:
    """Whether ``NNN-NN-NNNN`` (or spaced) is outside the never-issued SSN ranges."""
    area, group, serial = text[:3], text[4:6], text[7:11]
    return not (area in (b"000", b"666") or area[:1] == b"9" or group == b"00" or serial == b"0000")


def has_digit_and_letter(text: bytes) -> bool:
    """Random key material holds both; an English slug rarely holds a digit."""
    return bool(text.translate(None, _NOT_DIGITS)) and bool(text.translate(None, _NOT_LETTERS))


def not_a_word(token: bytes) -> bool:
    """False for prose after "Bearer" ("bearer bonds"): all-lower, all-upper or title case."""
    return not (token.isalpha() and (token.islower() or token.isupper() or token.istitle()))


def basic_credentials(token: bytes) -> bool:
    """Whether a Basic-auth token is base64 of ``user:password`` (RFC 7617)."""
    try:
        decoded = binascii.a2b_base64(token, strict_mode=True)
    except (binascii.Error, ValueError):
        return False
    return len(decoded) >= 3 and b":" in decoded


def port_and_path(password: bytes) -> bool:
    """Whether a URL's "password" is really a port and a path (``host:8080/x@y``)."""
    digits = len(password) - len(password.lstrip(_DIGITS))
    return 1 <= digits <= 5 and password[digits : digits + 1] == b"/"
