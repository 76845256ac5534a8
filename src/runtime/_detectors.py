"""The detector catalogue: what the scrubber recognises as a secret or as PII.

Each `Detector` is a name, one regular expression compiled once at import, the
group of that expression that *is* the secret (the part that is redacted and
fingerprinted), an optional validator that confirms a candidate (a checksum, a
range), and *hints*: substrings every match holds, so that a clean string
costs a few substring tests instead of fifteen regex searches.

=================  ==============================================================
detector           what it matches
=================  ==============================================================
aws_access_key_id  ``AKIA``/``ASIA``/``ABIA``/``ACCA``/``A3T?`` + 16 upper-case
                   alphanumerics (an AWS access key id)
github_token       ``ghp_``/``gho_``/``ghu_``/``ghs_``/``ghr_`` + 36+ alphanumerics,
                   and fine-grained ``github_pat_…`` tokens
slack_token        ``xoxb-``/``xoxp-``/``xoxa-``/``xoxr-``/``xoxs-``/``xoxe-``/``xoxo-``
                   and app-level ``xapp-`` tokens
openai_api_key     ``sk-…`` keys (also ``sk-proj-``, ``sk-svcacct-``, ``sk-admin-``):
                   20+ token characters holding a digit and a letter
google_api_key     ``AIza`` + 35 token characters
stripe_key         secret and restricted keys: ``sk_live_``/``sk_test_``/
                   ``rk_live_``/``rk_test_`` + 10+ alphanumerics
private_key        a whole PEM ``-----BEGIN … PRIVATE KEY-----`` block, through its
                   ``-----END … PRIVATE KEY-----`` line; a block cut short is
                   redacted to where its base64 body stops
jwt                ``eyJ…`` header, payload and (possibly empty) signature, three
                   base64url parts joined by dots
bearer_token       the token after ``Bearer``/``bearer``/``BEARER``: 8+ RFC 6750 token
                   characters; ``Bearer`` itself is kept
url_credentials    the ``user:password`` before ``@`` in ``scheme://user:password@host``
                   (URLs and connection strings); the scheme and host are kept
email              ``local@domain.tld`` addresses
credit_card        13-19 digits, bare or grouped by spaces or dashes (4-4-4-4,
                   4-4-4-4-3, 4-6-5), first digit 2-6 (the card networks), Luhn-valid
iban               ISO 13616 IBANs, compact or in groups of four, mod-97 valid
phone_number       ``+<country code>`` numbers of 8-15 digits, compact or grouped,
                   and North American ``(415) 555-2671`` / ``415-555-2671`` forms
us_ssn             ``NNN-NN-NNNN`` outside the never-issued ranges (area 000, 666,
                   9xx; group 00; serial 0000)
=================  ==============================================================

Every pattern is written to run in linear time on Python's backtracking engine:
quantifiers are bounded or possessive, and where a pattern could start at any
position of a long run of token characters, a lookbehind lets it start only at
the run's first character (otherwise a failed match would be retried from every
position of the run: quadratic time).

The phone, card and IBAN detectors are deliberately conservative: a long bare
number (a timestamp, an order id) is not a phone number; a 13-digit millisecond
timestamp starts with 1, which no card network uses.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

__all__ = ["DETECTORS", "DETECTOR_NAMES", "Detector"]


@dataclass(frozen=True, slots=True)
class Detector:
    """One kind of secret or PII the scrubber looks for.

    Attributes:
        name: the detector's name, as written in a policy and in findings.
        pattern: the compiled expression that finds candidates.
        hints: substrings of which every match holds at least one; the
            scrubber runs ``pattern`` only on text that holds one (a substring
            test is far cheaper than a regex search). Empty: every match holds
            two adjacent digits or a ``+`` before a digit, and the scrubber runs
            the pattern only on text that does.
        group: the group of ``pattern`` whose text is the secret: redacted and
            fingerprinted (0: the whole match). The rest of the match is context
            that the scrubber keeps but counts as part of this finding when
            resolving overlaps.
        validator: given a candidate's secret text, returns how many of its
            leading characters are a genuine finding (0: none). Most return all
            or nothing; the card and IBAN validators may trim a trailing group
            that the pattern took greedily. None: every candidate is a finding.
    """

    name: str
    pattern: re.Pattern[str]
    hints: tuple[str, ...] = ()
    group: int = 0
    validator: Callable[[str], int] | None = None


_DIGIT: Final = re.compile(r"[0-9]")
_LETTER: Final = re.compile(r"[A-Za-z]")


def _has_digit_and_letter(text: str) -> int:
    # Random key material holds both; an English slug after "sk-" rarely holds a digit.
    return len(text) if _DIGIT.search(text) and _LETTER.search(text) else 0


def _not_a_word(text: str) -> int:
    # "bearer bonds", "Bearer Authentication": prose, not a token. A random token of
    # 8+ characters is essentially never all lower-case, all upper-case or title-case letters.
    if text.isalpha() and (text.islower() or text.isupper() or text.istitle()):
        return 0
    return len(text)


def _luhn_ok(digits: str) -> bool:
    total = 0
    for index, char in enumerate(reversed(digits)):
        value = ord(char) - 48
        if index % 2:
            value *= 2
            if value > 9:  # the Luhn rule: add the two digits of the double
                value -= 9
        total += value
    return total % 10 == 0


def _group_ends(text: str, separators: str) -> list[int]:
    """Offsets where a group of ``text`` ends, longest prefix last."""
    ends = [index for index, char in enumerate(text) if char in separators]
    ends.append(len(text))
    return ends


def _card_length(text: str) -> int:
    # The pattern may take a short trailing group that is not part of the card
    # ("4111 1111 1111 1111 12/27"): try group-aligned prefixes, longest first.
    for end in reversed(_group_ends(text, " -")):
        digits = text[:end].replace(" ", "").replace("-", "")
        if len(digits) < 13:  # the shortest card number
            break
        if len(digits) <= 19 and digits[0] in "23456" and _luhn_ok(digits):
            return end
    return 0


def _mod97(compact: str) -> int:
    # ISO 7064 MOD 97-10 over the rearranged IBAN, letters as 10..35, digit by digit
    # so no big integer is built.
    remainder = 0
    for char in compact[4:] + compact[:4]:
        value = int(char, 36)
        remainder = (remainder * (100 if value > 9 else 10) + value) % 97
    return remainder


def _iban_length(text: str) -> int:
    # As for cards, a trailing group of following text may have been taken greedily.
    for end in reversed(_group_ends(text, " ")):
        compact = text[:end].replace(" ", "")
        if len(compact) < 15:  # the shortest IBAN (Norway)
            break
        if len(compact) <= 34 and _mod97(compact) == 1:  # the longest IBAN
            return end
    return 0


def _phone_length(text: str) -> int:
    if not text.startswith("+"):
        return len(text)  # the North American forms are fully checked by the pattern
    # E.164 allows at most 15 digits; fewer than 8 is a short code or arithmetic. The
    # pattern may have taken groups of a following number: try shorter prefixes too.
    for end in reversed(_group_ends(text, " .-")):
        digits = sum(char in "0123456789" for char in text[:end])
        if digits < 8:
            break
        if digits <= 15:
            return end
    return 0


def _ssn_length(text: str) -> int:
    area, group, serial = text[:3], text[4:6], text[7:]
    if area in {"000", "666"} or area[0] == "9" or group == "00" or serial == "0000":
        return 0
    return len(text)


# Characters of base64url and of most API tokens.
_B64URL = r"[A-Za-z0-9_-]"

# The four numeric detectors are the only ones without a literal hint, so they
# run on any text holding a digit pair and must be cheap there. Python's engine
# skips quickly to a possible first character only when a pattern *starts* with
# a character class, so these patterns consume their first character and then
# check the boundary before it with a lookbehind that spans both characters:
# "[0-9](?<![0-9]{2})" is "a digit not preceded by a digit".

DETECTORS: Final[tuple[Detector, ...]] = (
    Detector(
        "aws_access_key_id",
        re.compile(r"(?<![A-Za-z0-9])(?:A[KS]IA|ABIA|ACCA|A3T[A-Z0-9])[A-Z0-9]{16}(?![A-Za-z0-9])"),
        hints=("AKIA", "ASIA", "ABIA", "ACCA", "A3T"),
    ),
    Detector(
        "github_token",
        re.compile(
            r"(?<![A-Za-z0-9_])(?:gh[pousr]_[A-Za-z0-9]{36,}+|github_pat_[A-Za-z0-9_]{22,}+)"
        ),
        hints=("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
    ),
    Detector(
        "slack_token",
        re.compile(r"(?<![A-Za-z0-9])(?:xox[abeoprs]|xapp)-[A-Za-z0-9-]{10,}+"),
        hints=("xox", "xapp-"),
    ),
    Detector(
        "openai_api_key",
        re.compile(rf"(?<!{_B64URL})sk-{_B64URL}{{20,}}+"),
        hints=("sk-",),
        validator=_has_digit_and_letter,
    ),
    Detector(
        "google_api_key",
        re.compile(rf"(?<!{_B64URL})AIza{_B64URL}{{35}}(?!{_B64URL})"),
        hints=("AIza",),
    ),
    Detector(
        "stripe_key",
        re.compile(r"(?<![A-Za-z0-9_])[rs]k_(?:live|test)_[A-Za-z0-9]{10,}+"),
        hints=("k_live_", "k_test_"),
    ),
    Detector(
        "private_key",
        re.compile(
            # The body may hold '-' (encrypted-key headers such as "Proc-Type") but not
            # five in a row: it stops at the END line or at the next BEGIN, so a text full
            # of unterminated headers is still scanned in linear time.
            r"-----BEGIN (?:[A-Z0-9]{1,20} ){0,6}PRIVATE KEY(?: BLOCK)?-----"
            r"(?:[A-Za-z0-9+/=\s:,.\\]++|-(?!----))*+"
            r"(?:-----END (?:[A-Z0-9]{1,20} ){0,6}PRIVATE KEY(?: BLOCK)?-----)?"
        ),
        hints=("-----BEGIN ",),
    ),
    Detector(
        "jwt",
        re.compile(rf"(?<!{_B64URL})eyJ{_B64URL}{{8,}}+\.{_B64URL}{{2,}}+\.{_B64URL}*+"),
        hints=("eyJ",),
    ),
    Detector(
        "bearer_token",
        re.compile(r"(?<![A-Za-z0-9_])(?:[Bb]earer|BEARER)[ \t]{1,16}+([A-Za-z0-9._~+/=-]{8,}+)"),
        hints=("earer", "EARER"),
        group=1,
        validator=_not_a_word,
    ),
    Detector(
        "url_credentials",
        # Anchored at "://" (a fast literal search); the scheme is not part of the secret.
        # The password runs to the last '@' before the host, so an unencoded '@' in it
        # (or in the user name) does not leave part of it behind. The user part excludes
        # '[' so that a redacted "[REDACTED:…]" is not matched again.
        # The host is matched too, as context: an email-like "password@host.tld" is
        # then seen as part of this finding, not as an address of its own.
        re.compile(
            r"""(?<=[A-Za-z0-9+.-])://([^\s:/?#\[\]"'<>]{0,256}+:[^\s/?#"'<>]{1,256})"""
            r"""@[^\s/?#"'<>@]*+"""
        ),
        hints=("://",),
        group=1,
    ),
    Detector(
        "email",
        re.compile(
            r"(?<![A-Za-z0-9._%+-])[A-Za-z0-9._%+-]++@"
            r"(?:[A-Za-z0-9-]{1,63}\.){1,8}[A-Za-z]{2,63}(?![A-Za-z0-9-])"
        ),
        hints=("@",),
    ),
    Detector(
        "credit_card",
        re.compile(
            r"""[0-9](?<![0-9]{2})         # a first digit not preceded by a digit
            (?: [0-9]{12,18}                                # bare
              | [0-9]{3} (?P<sep>[ -]) [0-9]{4} (?P=sep) [0-9]{4} (?P=sep) [0-9]{1,4}
                (?: (?P=sep) [0-9]{1,3} )?                  # 4-4-4-4, 4-4-4-4-3
              | [0-9]{3} (?P<amex>[ -]) [0-9]{6} (?P=amex) [0-9]{4,5}   # 4-6-5, 4-6-4
            ) (?![0-9])""",
            re.VERBOSE,
        ),
        validator=_card_length,
    ),
    Detector(
        "iban",
        re.compile(
            r"""[A-Z](?<![A-Za-z0-9][A-Z])   # a country code not preceded by a letter or digit
            [A-Z] [0-9]{2}
            (?: [A-Z0-9]{11,30}                             # compact
              | (?:\ [A-Z0-9]{4}){2,7} (?:\ [A-Z0-9]{1,3})? # in groups of four
            ) (?![A-Za-z0-9])""",
            re.VERBOSE,
        ),
        validator=_iban_length,
    ),
    Detector(
        "phone_number",
        re.compile(
            # Groups are separated by exactly one separator (or a parenthesised area
            # code), so a run of digits can be split only one way: no backtracking blowup.
            r"""[+(1-9](?<![\w+.-][+(1-9])  # a first character not glued to a word or number
            (?: (?<=\+) [1-9][0-9]{0,14}
                (?: (?: [ .-] | [ .-]? \( [0-9]{1,4} \) [ .-]? ) [0-9]{1,12} ){0,6}
              | (?<=1) [ .-] (?: \( [2-9][0-9]{2} \) [ .-]? | [2-9][0-9]{2} [ .-] )
                [2-9][0-9]{2} [ .-] [0-9]{4}                # 1-415-555-2671
              | (?<=\() [2-9][0-9]{2} \) [ .-]? [2-9][0-9]{2} [ .-] [0-9]{4}  # (415) 555-2671
              | (?<=[2-9]) [0-9]{2} [ .-] [2-9][0-9]{2} [ .-] [0-9]{4}        # 415-555-2671
            ) (?![0-9]) (?![.-][0-9])""",
            re.VERBOSE,
        ),
        validator=_phone_length,
    ),
    Detector(
        "us_ssn",
        re.compile(
            r"""[0-9](?<![0-9]{2})(?<![0-9]-[0-9])  # not preceded by a digit or "digit-"
            [0-9]{2} - [0-9]{2} - [0-9]{4} (?![0-9]) (?!-[0-9])""",
            re.VERBOSE,
        ),
        validator=_ssn_length,
    ),
)
"""Every detector, in catalogue order (the order that breaks ties between them)."""

DETECTOR_NAMES: Final[frozenset[str]] = frozenset(detector.name for detector in DETECTORS)
"""The names a policy may list under ``[scrub]``."""
