"""The detector catalogue: what the scrubber recognises as a secret or as PII.

A `Detector` is a name and one or more `Rule`s. A rule has a *hint*, an
RE2 expression that marks where a candidate may start (all the hints of a
scrubber run as one linear-time pass over the text), an anchored RE2
*pattern* matched there, and a *span* function that validates the match
(checksums, ranges, lengths) and says which part is the secret. Everything
is matched on UTF-8 bytes, ASCII character classes only (ADR 0010).

=================  ==============================================================
detector           what it matches
=================  ==============================================================
aws_access_key_id  ``AKIA``/``ASIA``/``ABIA``/``ACCA``/``A3T?`` + 16 upper-case
                   alphanumerics, a whole word
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
basic_auth         the credentials after ``Basic``/``basic``/``BASIC``: base64 that
                   decodes to ``user:password`` (RFC 7617); ``Basic`` itself is kept
url_credentials    the ``user:password`` before ``@`` in ``scheme://user:password@host``
                   (URLs and connection strings); the password may hold ``/``,
                   ``#``, ``?``, ``@`` and ``:``; the scheme and host are kept
email              ``local@domain.tld`` addresses (domain of at most 253 characters)
credit_card        13-19 digits, bare or grouped by spaces or dashes (4-4-4-4,
                   4-4-4-4-3, 4-6-5), first digit 2-6 (the card networks), Luhn-valid,
                   a whole word: a digit run glued to letters (a hex hash) is not a card
iban               ISO 13616 IBANs, any case, compact or in groups of four: a known
                   country with its exact length, mod-97 valid
phone_number       ``+`` numbers with 10 to 15 digits (the E.164 evidence), compact or
                   grouped; North American ``(415) 555-2671``, ``415-555-2671``,
                   ``1-415-555-2671``; and ``14155552671`` (E.164 without its ``+``)
us_ssn             ``NNN-NN-NNNN`` or ``NNN NN NNNN`` outside the never-issued ranges
                   (area 000, 666, 9xx; group 00; serial 0000)
=================  ==============================================================

Word boundaries: every candidate starts and ends at an RE2 word boundary
(``\\b``, ASCII word characters) or at a character that cannot continue it,
so that a redaction marker (``[`` … ``]``) beside it changes nothing a
neighbouring candidate depends on (ADR 0010: the one-pass fixpoint). Numbers
never match inside a decimal fraction (``0.4111111111111111``), so floats
and CSV columns of them are not cards.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, TypeAlias

from runtime._validators import (
    IBAN_LENGTHS,
    basic_credentials,
    card_length,
    has_digit_and_letter,
    iban_length,
    not_a_word,
    phone_length,
    port_and_path,
    ssn_ok,
)

__all__ = ["DETECTORS", "DETECTOR_NAMES", "NUMBER_DIGITS", "Detector", "Rule", "Span"]

Span: TypeAlias = tuple[int, int, int, int]
"""A validated candidate: (claim start, claim end, secret start, secret end), buffer offsets.

The *secret* is what is redacted and fingerprinted; the *claim* is the whole
match, context included (``Bearer``, a URL's scheme and host), and decides
which overlapping candidates are part of one finding.
"""

SpanFunction: TypeAlias = Callable[[bytes, int, int], "Span | None"]


@dataclass(frozen=True, slots=True)
class Rule:
    """One way a detector finds candidates.

    Attributes:
        hint: RE2 source; a candidate of this rule starts where the hint matches
            (every position where ``pattern`` matches and ``span`` accepts is a
            position where ``hint`` matches: a test holds every rule to this).
        pattern: RE2 source, matched anchored at the hint's position.
        span: given the buffer and the bounds of the anchored match, the
            validated `Span`, or None when the match is not a finding.
        lead: bytes of which one of the three bytes at the hint's position must
            be, or the pattern is not tried (a cheap check for rules whose
            pattern starts with a consumed boundary character). Empty: no check.
        first: the bytes a hint match can start with; empty: derived from the
            hint by RE2 (a byte range, so a superset).
        peek: (offset, bytes): the byte at that offset from the hint's position
            must be one of these, or the pattern is not tried (a one-byte test
            instead of an RE2 call). None: no test.
        max_length: the longest match the span function accepts; the anchored
            match is cut there, so that a failing attempt reads at most this many
            bytes (the pattern itself stays counter-free, its DFA small). None:
            unbounded (the pattern is a literal prefix and runs, or bounded itself).
        runs: the pattern is a literal prefix and then runs of one class, so a
            hit inside this rule's previous match (a ``sk-`` inside an
            ``sk-…-sk-…`` key) can only find what that match covered: it is
            skipped, which keeps such input linear.

    A test holds every rule to ``first``, ``lead`` and ``peek``: they may only
    skip positions where the pattern cannot match.
    """

    hint: str
    pattern: str
    span: SpanFunction
    lead: bytes = b""
    first: bytes = b""
    peek: tuple[int, bytes] | None = None
    max_length: int | None = None
    runs: bool = False


@dataclass(frozen=True, slots=True)
class Detector:
    """One kind of secret or PII the scrubber looks for.

    Attributes:
        name: the detector's name, as written in a policy and in findings.
        rules: the ways it finds candidates.
    """

    name: str
    rules: tuple[Rule, ...]


def _whole(buf: bytes, start: int, end: int) -> Span:
    return (start, end, start, end)


def _checked(check: Callable[[bytes], bool], skip: int = 0) -> SpanFunction:
    """A span function: the whole match, if ``check`` accepts its bytes after ``skip``."""

    def span(buf: bytes, start: int, end: int) -> Span | None:
        return (start, end, start, end) if check(buf[start + skip : end]) else None

    return span


def _trimmed(length: Callable[[bytes], int], *, digits_first: bool = False) -> SpanFunction:
    """A span function for validators that may trim a trailing group.

    ``digits_first``: the match starts with one or two boundary characters
    that are not part of the number (a consumed boundary, see `_NUMBER_START`).
    """

    def span(buf: bytes, start: int, end: int) -> Span | None:
        if digits_first:
            while buf[start] not in _DIGIT_BYTES:
                start += 1
        size = length(buf[start:end])
        return (start, start + size, start, start + size) if size else None

    return span


def _after_keyword(keyword_size: int, check: Callable[[bytes], bool]) -> SpanFunction:
    """A span function for ``Bearer <token>`` / ``Basic <token>``: the token is the secret."""

    def span(buf: bytes, start: int, end: int) -> Span | None:
        token = start + keyword_size
        while buf[token] in b" \t":
            token += 1
        return (start, end, token, end) if check(buf[token:end]) else None

    return span


def _url_credentials(buf: bytes, start: int, end: int) -> Span | None:
    # start: the scheme character before "://"; the host holds no '@', so the
    # last '@' of the match is the one before the host. The claim ends with the
    # host (the delimiter the pattern read after it is context). The pattern
    # leaves the lengths to this check (a small DFA): user name and password of
    # at most 256 bytes, host of at most 253.
    secret = start + 4
    at = buf.rfind(b"@", secret, end)
    colon = buf.index(b":", secret, at)
    if buf[at + 1 : at + 2] == b"[":
        host_end = buf.index(b"]", at) + 1
    else:
        host = _HOST_RUN.match(buf, at + 1)
        assert host is not None  # `*` always matches
        host_end = host.end()
    if (
        colon - secret > 256
        or at - colon > 257
        or host_end - at > 254
        or port_and_path(buf[colon + 1 : at])
    ):
        return None
    return (start, host_end, secret, at)


_DIGIT_BYTES: Final = frozenset(b"0123456789")
_DIGITS: Final = b"0123456789"
_LETTERS: Final = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
_LOCAL: Final = _LETTERS + b"0123456789._%+-"
_SCHEME: Final = _LETTERS + b"0123456789+.-"
_HOST_RUN: Final = re.compile(rb"[A-Za-z0-9._~%-]*")


def _email(buf: bytes, start: int, end: int) -> Span | None:
    # start: the last character of the local part (the hint sits on "x@d"). The
    # local part runs back to the first byte that cannot be in it, however far
    # (a run glued to another secret is redacted with it, in one round); it is
    # read back in chunks, and runs of different '@'s never overlap, so the whole
    # scan reads each byte at most once. The pattern leaves the domain's limits
    # to this check (so that its DFA stays small): at most 253 bytes, labels of
    # at most 63.
    domain = end - start - 2
    if domain > 253 or (domain > 63 and max(map(len, buf[start + 2 : end].split(b"."))) > 63):
        return None
    local = start
    while local > 0:
        low = max(0, local - 256)
        chunk = buf[low:local]
        local -= len(chunk) - len(chunk.rstrip(_LOCAL))
        if local > low:
            break  # stopped at a byte that cannot be in a local part
    return (local, end, local, end)


# A digit run that may be a number: at the start of the text or after a character
# that is not a word character nor '.', or after a '.' that does not follow a digit
# (so the fraction of "0.4111111111111111" is never a card or a phone number).
_NUMBER_START: Final = r"(?:^|[^0-9A-Za-z_.]|(?:^|[^0-9])\.)"
_B64URL: Final = r"[A-Za-z0-9_-]"
_PEM_BODY: Final = r"[A-Za-z0-9+/=\t\n\f\r :,.\\]"
_PEM_LABEL: Final = r"(?:[A-Z0-9]{1,20} ){0,6}PRIVATE KEY(?: BLOCK)?-----"
_IBAN_COUNTRIES: Final = "|".join(sorted(code.decode() for code in IBAN_LENGTHS))
_IBAN_BODY: Final = (
    r"[0-9]{2}(?:[A-Za-z0-9]{11,30}|(?: [A-Za-z0-9]{4}){2,7}(?: [A-Za-z0-9]{1,3})?)\b"
)
_CARD: Final = (
    _NUMBER_START + r"[2-6](?:[0-9]{12,18}"
    r"|[0-9]{3}(?: [0-9]{4}){2} [0-9]{1,4}(?: [0-9]{1,3})?"
    r"|[0-9]{3}(?:-[0-9]{4}){2}-[0-9]{1,4}(?:-[0-9]{1,3})?"
    r"|[0-9]{3} [0-9]{6} [0-9]{4,5}|[0-9]{3}-[0-9]{6}-[0-9]{4,5})\b"
)
# Characters a URL's user name / password may not hold: controls, space, quotes, <>,
# brackets (RFC 3986 gen-delims that are never unencoded in userinfo; also the two
# ends of a redaction marker), and DEL.
_URL_USER: Final = r"""[^\x00-\x20:/?#\[\]@"'<>\x7f]"""
_URL_PASSWORD: Final = r"""[^\x00-\x20\[\]"'<>\x7f]"""  # noqa: S105 - a character class
_URL_MAX: Final = 4 + 256 + 1 + 256 + 1 + 253 + 1  # scheme char, ://, user:password@host, delimiter
_NANP_1: Final = (
    r"\b1[ .-](?:\([2-9][0-9]{2}\)[ .-]?|[2-9][0-9]{2}[ .-])[2-9][0-9]{2}[ .-][0-9]{4}\b"
)
_NANP_PAREN: Final = r"\([2-9][0-9]{2}\)[ .-]?[2-9][0-9]{2}[ .-][0-9]{4}\b"
_NANP_BARE: Final = r"\b[2-9][0-9]{2}[ .-][2-9][0-9]{2}[ .-][0-9]{4}\b"
_E164_NANP: Final = _NUMBER_START + r"1[2-9][0-9]{2}[2-9][0-9]{6}\b"
_SSN: Final = r"\b[0-9]{3}(?:-[0-9]{2}-|[ ][0-9]{2}[ ])[0-9]{4}\b"


def _same(
    pattern: str,
    span: SpanFunction = _whole,
    *,
    lead: bytes = b"",
    peek: tuple[int, bytes] | None = None,
) -> Rule:
    """A rule whose hint is its pattern (bounded patterns that start at a boundary)."""
    return Rule(pattern, pattern, span, lead, peek=peek)


DETECTORS: Final[tuple[Detector, ...]] = (
    Detector(
        "aws_access_key_id",
        (
            Rule(
                r"\b(?:A3T|AKIA|ASIA|ABIA|ACCA)",
                r"\b(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}\b",
                _whole,
                peek=(1, b"3KSBC"),
            ),
        ),
    ),
    Detector(
        "github_token",
        (
            Rule(
                r"\b(?:gh[pousr]_|github_pat_)",
                r"\b(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})",
                _whole,
                peek=(1, b"hi"),
            ),
        ),
    ),
    Detector(
        "slack_token",
        (
            Rule(
                r"\b(?:xox[abeoprs]|xapp)-",
                r"\b(?:xox[abeoprs]|xapp)-[A-Za-z0-9-]{10,}",
                _whole,
                peek=(1, b"oa"),
                runs=True,
            ),
        ),
    ),
    Detector(
        "openai_api_key",
        (
            Rule(
                r"\bsk-",
                rf"\bsk-{_B64URL}{{20,}}",
                _checked(has_digit_and_letter, 3),
                peek=(1, b"k"),
                runs=True,
            ),
        ),
    ),
    Detector(
        "google_api_key",
        (
            Rule(
                r"\bAIza",
                rf"\bAIza{_B64URL}{{34}}(?:[A-Za-z0-9_]\b|-)",
                _whole,
                peek=(1, b"I"),
            ),
        ),
    ),
    Detector(
        "stripe_key",
        (
            Rule(
                r"\b[rs]k_(?:live|test)_",
                r"\b[rs]k_(?:live|test)_[A-Za-z0-9]{10,}",
                _whole,
                peek=(1, b"k"),
            ),
        ),
    ),
    Detector(
        "private_key",
        (
            Rule(
                r"-----BEGIN ",
                # The body may hold up to four '-' in a row (encrypted-key headers such
                # as "Proc-Type") but not five: it stops at the END line.
                rf"-----BEGIN {_PEM_LABEL}(?:{_PEM_BODY}|-{{1,4}}{_PEM_BODY})*"
                rf"(?:-----END {_PEM_LABEL})?",
                _whole,
                peek=(1, b"-"),
            ),
        ),
    ),
    Detector(
        "jwt",
        (
            Rule(
                r"\beyJ",
                rf"\beyJ{_B64URL}{{8,1000}}\.{_B64URL}{{2,}}\.{_B64URL}*",
                _whole,
                peek=(1, b"y"),
            ),
        ),
    ),
    Detector(
        "bearer_token",
        (
            Rule(
                r"\b(?:[Bb]earer|BEARER)[ \t]",
                r"\b(?:[Bb]earer|BEARER)[ \t]{1,16}[A-Za-z0-9._~+/=-]{8,}",
                _after_keyword(6, not_a_word),
                first=b"Bb",
                peek=(1, b"eE"),
            ),
        ),
    ),
    Detector(
        "basic_auth",
        (
            Rule(
                r"\b(?:[Bb]asic|BASIC)[ \t]",
                r"\b(?:[Bb]asic|BASIC)[ \t]{1,16}[A-Za-z0-9+/]{4,}={0,2}",
                _after_keyword(5, basic_credentials),
                first=b"Bb",
                peek=(1, b"aA"),
            ),
        ),
    ),
    Detector(
        "url_credentials",
        (
            Rule(
                # The password is lazy: it ends at the first '@' that a host and a
                # delimiter follow, so "p@ss@host" keeps its '@' and a later '@' in the
                # path is not taken.
                rf"[A-Za-z0-9+.-]://{_URL_USER}*:",
                rf"[A-Za-z0-9+.-]://{_URL_USER}*:{_URL_PASSWORD}+?@"
                r"(?:[A-Za-z0-9._~%-]+|\[[0-9A-Fa-f:.]{2,45}\])"
                r"(?:[^A-Za-z0-9._~%@-]|$)",
                _url_credentials,
                first=_SCHEME,
                peek=(1, b":"),
                max_length=_URL_MAX,
            ),
        ),
    ),
    Detector(
        "email",
        (
            Rule(
                r"[A-Za-z0-9._%+-]@[A-Za-z0-9-]",
                r"[A-Za-z0-9._%+-]@(?:[A-Za-z0-9-]+\.)+[A-Za-z]{2,}\b",
                _email,
                first=_LOCAL,
                peek=(1, b"@"),
                max_length=2 + 253 + 1,
            ),
        ),
    ),
    Detector(
        "credit_card",
        (_same(_CARD, _trimmed(card_length, digits_first=True), lead=b"23456"),),
    ),
    Detector(
        "iban",
        (
            Rule(
                rf"\b(?i:{_IBAN_COUNTRIES})" + _IBAN_BODY,
                r"\b[A-Za-z]{2}" + _IBAN_BODY,
                _trimmed(iban_length),
                first=_LETTERS,
                peek=(2, _DIGITS),
            ),
        ),
    ),
    Detector(
        "phone_number",
        (
            Rule(
                r"\+[1-9](?:[ .()-]{0,3}[0-9]){9}",
                r"\+[1-9][0-9]{0,14}(?:(?:[ .-]|[ .-]?\([0-9]{1,4}\)[ .-]?)[0-9]{1,12}){0,6}\b",
                _trimmed(phone_length),
                peek=(1, b"123456789"),
            ),
            _same(_NANP_1, peek=(1, b" .-")),
            _same(_NANP_PAREN, peek=(1, b"23456789")),
            _same(_NANP_BARE, peek=(3, b" .-")),
            _same(_E164_NANP, _trimmed(len, digits_first=True), lead=b"1"),
        ),
    ),
    Detector("us_ssn", (_same(_SSN, _checked(ssn_ok), peek=(3, b" -")),)),
)
"""Every detector, in catalogue order (the order that breaks ties between them)."""

DETECTOR_NAMES: Final[frozenset[str]] = frozenset(detector.name for detector in DETECTORS)
"""The names a policy may list under ``[scrub]``."""

NUMBER_DIGITS: Final = range(11, 20)
"""The digit counts of a bare digit run that some detector can match (phone: 11, cards: 13-19).

The scrubber scans a number's decimal text only when its integer part has
this many digits; a test holds the catalogue to it.
"""
