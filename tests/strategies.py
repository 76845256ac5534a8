"""Hypothesis strategies shared by the test suites (one file, as attrs keeps them).

Append new strategies; other suites import from here.
"""

from __future__ import annotations

from hypothesis import strategies as st

from analysis import (
    ANALYSIS_VERSION,
    ApprovalTraceRecord,
    ChainStatus,
    DecisionTraceRecord,
    DecisionTraceReport,
)
from runtime import PendingApproval, Resolution, RuntimeVerdict

# --- analysis: decision trace reports -------------------------------------------------

sha256_hexes = st.text(alphabet="0123456789abcdef", min_size=64, max_size=64)
"""Lowercase hex SHA-256 digests."""

_INT64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)
_NANOS = st.integers(min_value=0, max_value=2**63 - 1)
# Non-ASCII included on purpose: the report keeps it as is (ensure_ascii=False).
_TEXT = st.text(max_size=20)


@st.composite
def decision_trace_records(draw: st.DrawFn) -> DecisionTraceRecord:
    """A `DecisionTraceRecord` whose status agrees with its two hashes."""
    status = draw(st.sampled_from(ChainStatus))
    claimed: str | None
    recomputed: str | None
    if status is ChainStatus.VERIFIED:
        claimed = recomputed = draw(sha256_hexes)
    elif status is ChainStatus.BROKEN:
        recomputed = draw(sha256_hexes)
        # A claim is whatever the log said: usually a digest, sometimes junk.
        claimed = draw(st.one_of(sha256_hexes, _TEXT).filter(lambda text: text != recomputed))
    elif status is ChainStatus.ASSESSMENT_MISSING:
        claimed, recomputed = draw(st.one_of(sha256_hexes, _TEXT)), None
    else:
        claimed = recomputed = None
    return DecisionTraceRecord(
        timestamp_ns=draw(_INT64),
        decision_kind=draw(st.sampled_from(RuntimeVerdict)),
        decision_reason=draw(_TEXT),
        policy_id=draw(st.sampled_from(["support-agent", "ops", "política-ñ", ""])),
        claimed_assessment_sha256=claimed,
        recomputed_assessment_sha256=recomputed,
        chain_status=status,
        analysis_version=ANALYSIS_VERSION,
        decision_id=draw(st.uuids().map(str)),
        matched_policy=draw(st.none() | _TEXT),
        trace_id=draw(st.text(alphabet="0123456789abcdef", min_size=32, max_size=32)),
        latency_ns=draw(_NANOS),
        agent=draw(st.none() | st.sampled_from(["support", "analyst", "ops/cleaner", "ñ"])),
        verb=draw(st.none() | _TEXT),
        resource=draw(st.none() | _TEXT),
        detectors=tuple(sorted(set(draw(st.lists(st.sampled_from(_DETECTORS), max_size=3))))),
        stage_ns=draw(st.dictionaries(st.sampled_from(_STAGES), _NANOS, max_size=3)),
        trace_origin=draw(st.none() | st.sampled_from(["parent", "span", "new"])),
    )


_DETECTORS = ("aws_access_key", "email", "private_key", "card")
_STAGES = ("policy", "narrow", "scrub")


@st.composite
def decision_trace_reports(draw: st.DrawFn) -> DecisionTraceReport:
    """A `DecisionTraceReport` whose counts and timestamps agree with its records."""
    records = tuple(draw(st.lists(decision_trace_records(), max_size=8)))
    return DecisionTraceReport.from_records(
        records,
        source_mcap_sha256=draw(sha256_hexes),
        duplicate_assessment_count=draw(st.integers(min_value=0, max_value=5)),
        truncated=draw(st.booleans()),
        problems=draw(st.lists(_TEXT, max_size=3)),
    )


# --- runtime: JSON values and records ------------------------------------------------


def json_values(*, floats: bool = True) -> st.SearchStrategy[object]:
    """JSON-representable values: what a tool's arguments usually are."""
    scalars = st.one_of(
        st.none(),
        st.booleans(),
        st.integers(min_value=-(2**63), max_value=2**63 - 1),
        st.text(max_size=20),
        *([st.floats(allow_nan=False, allow_infinity=False)] if floats else []),
    )
    return st.recursive(
        scalars,
        lambda children: st.one_of(
            st.lists(children, max_size=4),
            st.dictionaries(st.text(max_size=8), children, max_size=4),
        ),
        max_leaves=20,
    )


def records() -> st.SearchStrategy[dict[str, object]]:
    """Audit-record-shaped objects: string keys, no floats."""
    return st.dictionaries(st.text(max_size=8), json_values(floats=False), max_size=6)


# --- runtime: secrets for the scrubber -----------------------------------------------

_UPPER_DIGITS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
_ALNUM = "abcdefghijklmnopqrstuvwxyz" + _UPPER_DIGITS
_B64URL_CHARS = _ALNUM + "_-"


def _luhn_check_digit(payload: str) -> str:
    total = 0
    for index, char in enumerate(reversed(payload)):
        value = int(char)
        if index % 2 == 0:  # doubled: the check digit will sit to the right
            value = value * 2 - 9 if value > 4 else value * 2
        total += value
    return str(-total % 10)


def _iban_check_digits(country: str, bban: str) -> str:
    rearranged = bban + country + "00"
    remainder = int("".join(str(int(char, 36)) for char in rearranged)) % 97
    return f"{98 - remainder:02d}"


def _chunks(text: str, sep: str) -> str:
    return sep.join(text[i : i + 4] for i in range(0, len(text), 4))


@st.composite
def scrubber_secrets(draw: st.DrawFn) -> tuple[str, str, str]:
    """``(detector, text, secret)``: text to embed, and the part the scrubber must remove.

    Format-valid, obviously fake values for every detector (random bodies, valid
    checksums), each as a standalone token that ends at a word boundary.
    """
    kind = draw(st.sampled_from(sorted(_SECRET_MAKERS)))
    text, secret = draw(_SECRET_MAKERS[kind])
    return kind, text, secret


def _same(strategy: st.SearchStrategy[str]) -> st.SearchStrategy[tuple[str, str]]:
    return strategy.map(lambda text: (text, text))


def _fixed(alphabet: str, size: int) -> st.SearchStrategy[str]:
    return st.text(alphabet=alphabet, min_size=size, max_size=size)


@st.composite
def _card(draw: st.DrawFn) -> tuple[str, str]:
    payload = draw(st.sampled_from("23456")) + draw(_fixed("0123456789", 14))
    number = payload + _luhn_check_digit(payload)
    text = _chunks(number, draw(st.sampled_from(["", " ", "-"])))
    return text, text


@st.composite
def _iban(draw: st.DrawFn) -> tuple[str, str]:
    country, size = draw(st.sampled_from([("GB", 18), ("DE", 18), ("FR", 23), ("NO", 11)]))
    bban = draw(_fixed(_UPPER_DIGITS, size))
    compact = country + _iban_check_digits(country, bban) + bban
    text = compact if draw(st.booleans()) else _chunks(compact, " ")
    return text, text


@st.composite
def _ssn(draw: st.DrawFn) -> tuple[str, str]:
    area = draw(st.integers(1, 899).filter(lambda n: n != 666))
    group, serial = draw(st.integers(1, 99)), draw(st.integers(1, 9999))
    text = f"{area:03d}-{group:02d}-{serial:04d}"
    return text, text


@st.composite
def _phone(draw: st.DrawFn) -> tuple[str, str]:
    digits = st.text(alphabet="0123456789", min_size=3, max_size=3)
    cc = draw(st.integers(1, 99))
    text = f"+{cc} {draw(digits)} {draw(digits)} {draw(digits)}{draw(digits)[:1]}"
    return text, text


@st.composite
def _bearer(draw: st.DrawFn) -> tuple[str, str]:
    token = draw(_fixed(_B64URL_CHARS + "._~+/", 24)) + draw(_fixed("0123456789", 2))
    return f"Bearer {token}", token


@st.composite
def _url_credentials(draw: st.DrawFn) -> tuple[str, str]:
    # Lower-case user names: "D:u" of a "[REDACTED:url_credentials]" marker must not
    # look like a surviving "user:password".
    user = draw(st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789", min_size=1, max_size=8))
    password = draw(st.text(alphabet=_ALNUM + "!$%*@", min_size=1, max_size=12))
    return f"postgres://{user}:{password}@db.example.com/app", f"{user}:{password}"


@st.composite
def _email(draw: st.DrawFn) -> tuple[str, str]:
    local = draw(st.text(alphabet=_ALNUM + "._+-", min_size=1, max_size=12))
    domain = draw(st.text(alphabet=_ALNUM, min_size=1, max_size=10))
    tld = draw(st.sampled_from(["com", "org", "co.uk", "example"]))
    text = f"{local}@{domain}.{tld}"
    return text, text


@st.composite
def _private_key(draw: st.DrawFn) -> tuple[str, str]:
    kind = draw(st.sampled_from(["RSA ", "EC ", "OPENSSH ", "ENCRYPTED ", ""]))
    lines = draw(st.lists(_fixed(_ALNUM + "+/", 64), min_size=1, max_size=4))
    body = "\n".join(lines)
    text = f"-----BEGIN {kind}PRIVATE KEY-----\n{body}==\n-----END {kind}PRIVATE KEY-----"
    return text, text


@st.composite
def _jwt(draw: st.DrawFn) -> tuple[str, str]:
    parts = [draw(st.text(alphabet=_B64URL_CHARS, min_size=10, max_size=40)) for _ in range(3)]
    text = f"eyJ{parts[0]}.eyJ{parts[1]}.{parts[2]}"
    return text, text


@st.composite
def _openai(draw: st.DrawFn) -> tuple[str, str]:
    body = draw(_fixed(_B64URL_CHARS, 40))
    text = "sk-" + draw(st.sampled_from(["", "proj-", "svcacct-"])) + "a1" + body
    return text, text


_SECRET_MAKERS: dict[str, st.SearchStrategy[tuple[str, str]]] = {
    "aws_access_key_id": _same(
        st.sampled_from(["AKIA", "ASIA"]).flatmap(
            lambda p: _fixed(_UPPER_DIGITS, 16).map(p.__add__)
        )
    ),
    "github_token": _same(_fixed(_ALNUM, 36).map("ghp_".__add__)),
    "slack_token": _same(_fixed(_ALNUM, 24).map("xoxb-1234567890-".__add__)),
    "openai_api_key": _openai(),
    "google_api_key": _same(_fixed(_B64URL_CHARS, 35).map("AIza".__add__)),
    "stripe_key": _same(_fixed(_ALNUM, 24).map("sk_live_".__add__)),
    "private_key": _private_key(),
    "jwt": _jwt(),
    "bearer_token": _bearer(),
    "url_credentials": _url_credentials(),
    "email": _email(),
    "credit_card": _card(),
    "iban": _iban(),
    "phone_number": _phone(),
    "us_ssn": _ssn(),
}


# --- runtime: action snapshots and hostile disguises ---------------------------------
#
# Each class below is a subclass of a plain type whose every overridable method lies.
# The gate's snapshot must read the base type's value (SPEC §3), so a disguised value
# decides, hashes and runs exactly like the plain value it disguises.


class LyingStr(str):
    """A str whose methods all lie."""

    __slots__ = ()

    def __str__(self) -> str:
        return "LIE"

    def __repr__(self) -> str:
        return "LIE"

    def __len__(self) -> int:
        return 0

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter("LIE")

    def encode(self, *args: object, **kwargs: object) -> bytes:  # type: ignore[override]
        return b"LIE"

    def isascii(self) -> bool:
        return True

    def strip(self, *args: object) -> str:  # type: ignore[override]
        return "LIE"


class LyingInt(int):
    """An int whose conversions lie."""

    def __int__(self) -> int:
        return 666

    def __index__(self) -> int:
        return 666

    def __repr__(self) -> str:
        return "666"

    def __eq__(self, other: object) -> bool:
        return True

    def __hash__(self) -> int:
        return 0

    def __gt__(self, other: object) -> bool:
        return False

    def __lt__(self, other: object) -> bool:
        return False


class LyingFloat(float):
    """A float whose conversions lie."""

    def __float__(self) -> float:
        return 6.66

    def __repr__(self) -> str:
        return "6.66"

    def __gt__(self, other: object) -> bool:
        return False

    def __lt__(self, other: object) -> bool:
        return False


class LyingBytes(bytes):
    """A bytes whose conversions lie."""

    def __bytes__(self) -> bytes:
        return b"LIE"

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(b"LIE")

    def decode(self, *args: object, **kwargs: object) -> str:  # type: ignore[override]
        return "LIE"


class LyingDict(dict):  # type: ignore[type-arg]
    """A dict whose views and lookups lie (its storage holds the truth)."""

    def items(self):  # type: ignore[no-untyped-def, override]
        return [("LIE", "LIE")]

    def keys(self):  # type: ignore[no-untyped-def, override]
        return ["LIE"]

    def values(self):  # type: ignore[no-untyped-def, override]
        return ["LIE"]

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(["LIE"])

    def __getitem__(self, key: object) -> object:
        return "LIE"

    def get(self, key: object, default: object = None) -> object:  # type: ignore[override]
        return "LIE"

    def __contains__(self, key: object) -> bool:
        return True

    def __len__(self) -> int:
        return 0


class LyingList(list):  # type: ignore[type-arg]
    """A list whose iteration and lookups lie."""

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(["LIE"])

    def __getitem__(self, index: object) -> object:
        return "LIE"

    def __len__(self) -> int:
        return 0

    def copy(self) -> list:  # type: ignore[type-arg]
        return ["LIE"]


class LyingTuple(tuple):  # type: ignore[type-arg]
    """A tuple whose iteration lies."""

    __slots__ = ()

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(["LIE"])

    def __getitem__(self, index: object) -> object:
        return "LIE"

    def __len__(self) -> int:
        return 0


def plain_form(value: object) -> object:
    """What the snapshot makes of a plain value: tuples become lists, the rest as is."""
    if isinstance(value, dict):
        return {key: plain_form(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [plain_form(item) for item in value]
    return value


@st.composite
def disguised(draw: st.DrawFn, value: object) -> object:
    """``value`` (plain JSON-like data) with random parts replaced by lying subclasses."""
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, str):
        return LyingStr(value) if draw(st.booleans()) else value
    if isinstance(value, int):
        return LyingInt(value) if draw(st.booleans()) else value
    if isinstance(value, float):
        return LyingFloat(value) if draw(st.booleans()) else value
    if isinstance(value, bytes):
        return LyingBytes(value) if draw(st.booleans()) else value
    if isinstance(value, dict):
        items = {
            (LyingStr(key) if draw(st.booleans()) else key): draw(disguised(item))
            for key, item in value.items()
        }
        return LyingDict(items) if draw(st.booleans()) else items
    assert isinstance(value, list | tuple)
    items_list = [draw(disguised(item)) for item in value]
    kind = draw(st.sampled_from([list, tuple, LyingList, LyingTuple]))
    return kind(items_list)


def argument_dicts(*, floats: bool = True) -> st.SearchStrategy[dict[str, object]]:
    """Tool arguments: a dict of JSON-like values, bytes included."""
    leaf = st.one_of(json_values(floats=floats), st.binary(max_size=8))
    return st.dictionaries(st.text(max_size=8), leaf, max_size=6)


# --- runtime: path-like text for resources, globs and `within` -------------------------

# Pieces an attacker would splice into a resource or a path argument: separators,
# dot segments, percent-encoded and fullwidth forms, query and parameter marks.
_PATH_PIECES = (
    "/", "//", ".", "..", "a", "b", "data", "public", "secret", "x.txt", "%2e", "%2E",
    "%2f", "%5c", "%25", "%252e", "%%32e", "%41", "%c3%a9", "%c0%ae", "\\", "?", "#",
    ";", "..;", "...", ". ", " ", "~", "\uff0f", "\uff0e", "\u2025", "\u2026", "é",
    "file:", "https://h", ":", "\x00",
)  # fmt: skip


def path_texts(*, start: str = "") -> st.SearchStrategy[str]:
    """Hostile path-like text: ``start`` followed by spliced tricky pieces."""
    return st.lists(st.sampled_from(_PATH_PIECES), max_size=12).map(
        lambda pieces: start + "".join(pieces)
    )


def glob_segments(alphabet: str = "ab*?é") -> st.SearchStrategy[str]:
    """One segment of a resource glob: ``**`` or a run of literals and wildcards."""
    return st.one_of(st.just("**"), st.text(alphabet=alphabet, min_size=1, max_size=4))


# --- runtime: adversarial text for the scrubber's scanner (issue 5) ------------------

# Pieces of every detector's syntax, whole secrets, and the punctuation that glues
# them: random concatenations reach the corners of the hints, the anchored
# patterns, the validators and the boundaries between candidates.
SCANNER_FRAGMENTS: tuple[str, ...] = (
    "AKIAIOSFODNN7EXAMPLE",
    "AKIA",
    "A3T",
    "ghp_a1B2c3D4e5a1B2c3D4e5a1B2c3D4e5a1B2c3",
    "gh",
    "xoxb-",
    "xoxb-1234567890-abcdefghij",
    "sk-",
    "sk-proj-abc123DEF456ghi789JKL0",
    "sk_live_",
    "sk_live_abcdefghij12",
    "AIza",
    "AIzaSyA1234567890abcdefghijklmnopqrs-",
    "-----BEGIN PRIVATE KEY-----\nMIIab+/=\n",
    "-----END PRIVATE KEY-----",
    "-----BEGIN ",
    "eyJ",
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.sig",
    "Bearer ",
    "Bearer abcDEF123456",
    "Basic ",
    "Basic dXNlcjpwYXNz",
    "://",
    "x://a:",
    "postgres://u:p@ss@db.example.com/x",
    "@",
    "bob@x.com",
    "alice@example.co.uk",
    "4111111111111111",
    "4111 1111 1111 1111",
    "4111-1111-1111-1111",
    "3782 822463 10005",
    "GB82WEST12345698765432",
    "gb82 west 1234 5698 7654 32",
    "GB82 ",
    "+14155552671",
    "+44 20 7946 0958",
    "+1 ",
    "(415) 555-2671",
    "415-555-2671",
    "14155552671",
    "219-09-9999",
    "123 45 6789",
    "0.4111111111111111",
    "[REDACTED:email]",
    "é",
    "\x00",
    " ",
    "  ",
    "-",
    ".",
    "_",
    "+",
    ":",
    "/",
    "(",
    ")",
    "#",
    "=",
    "~",
    "%",
    "\n",
    ",",
    ";",
    "[",
    "]",
    "'",
    '"',
    "a",
    "Z",
    "0",
    "1",
    "9",
)


def scanner_texts(*, max_fragments: int = 8) -> st.SearchStrategy[str]:
    """Concatenations of `SCANNER_FRAGMENTS`: text dense in near-secrets and glue."""
    return st.lists(st.sampled_from(SCANNER_FRAGMENTS), max_size=max_fragments).map("".join)


# --- analysis: decision trace reports with approvals (issue 7) -------------------------------


@st.composite
def decision_trace_reports_with_approvals(draw: st.DrawFn) -> DecisionTraceReport:
    """A `DecisionTraceReport` whose approval counts and unresolved list are drawn too."""
    report = draw(decision_trace_reports())
    ids = [record.decision_id for record in report.records]
    # Of this run's decisions, or of an earlier run's (those resolve nothing here).
    this_run = st.tuples(st.sampled_from(ids), st.none()) if ids else st.nothing()
    earlier = st.tuples(st.uuids().map(str), st.uuids().map(str))
    approvals = [
        ApprovalTraceRecord(decision_id, outcome, wait_ns, run_id)
        for (decision_id, run_id), outcome, wait_ns in draw(
            st.lists(
                st.tuples(
                    this_run | earlier,
                    st.sampled_from(("approved", "rejected", "expired")),
                    _NANOS,
                ),
                max_size=6,
            )
        )
    ]
    return DecisionTraceReport.from_records(
        report.records,
        source_mcap_sha256=report.source_mcap_sha256,
        duplicate_assessment_count=report.duplicate_assessment_count,
        truncated=report.truncated,
        sealed=draw(st.booleans()),
        approvals=approvals,
        problems=report.problems,
    )


# --- runtime: W3C tracestate (issue 7, ADR 0018) -------------------------------------

TRACESTATE_KEY_FIRST = "abcdefghijklmnopqrstuvwxyz0123456789"
TRACESTATE_KEY_CHARS = TRACESTATE_KEY_FIRST + "_-*/@"
TRACESTATE_VALUE_CHARS = "".join(chr(c) for c in range(0x20, 0x7F) if chr(c) not in ",=")


def tracestate_keys() -> st.SearchStrategy[str]:
    """Level 2 keys: a letter or digit, then up to 255 of ``a-z 0-9 _ - * / @``."""
    first = st.sampled_from(TRACESTATE_KEY_FIRST)
    rest = st.text(TRACESTATE_KEY_CHARS, max_size=255)
    return st.builds(str.__add__, first, rest)


def tracestate_values() -> st.SearchStrategy[str]:
    """Values: 1-256 printable ASCII characters but ``,`` and ``=``, not ending in a space."""
    body = st.text(TRACESTATE_VALUE_CHARS, max_size=255)
    last = st.sampled_from(TRACESTATE_VALUE_CHARS.replace(" ", ""))
    return st.builds(str.__add__, body, last)


def tracestate_members(max_size: int = 32) -> st.SearchStrategy[list[tuple[str, str]]]:
    """Lists of valid members with distinct keys."""
    return st.lists(
        st.tuples(tracestate_keys(), tracestate_values()),
        max_size=max_size,
        unique_by=lambda member: member[0],
    )


@st.composite
def tracestate_headers(draw: st.DrawFn, members: list[tuple[str, str]]) -> str:
    """``members`` written as a header with random optional whitespace and empty members."""
    ows = st.text(" \t", max_size=3)
    parts: list[str] = []
    for key, value in members:
        parts.extend(draw(ows) for _ in range(draw(st.integers(0, 2))))  # empty members
        parts.append(f"{draw(ows)}{key}={value}{draw(ows)}")
    parts.extend(draw(ows) for _ in range(draw(st.integers(0, 2))))
    return ",".join(parts)


def invalid_tracestate_members() -> st.SearchStrategy[str]:
    """Members that break the grammar: each one must make the whole header drop."""
    key = tracestate_keys()
    value = tracestate_values()
    bad_first = st.sampled_from("_-*/@ABZ.é")
    bad_key_char = st.sampled_from("ABZ.:;é\x00\x7f")
    bad_value_char = st.sampled_from("=\x00\x1f\x7f\té€")
    return st.one_of(
        st.builds("{}{}={}".format, bad_first, st.text(TRACESTATE_KEY_CHARS, max_size=8), value),
        st.builds(lambda k, c, v: f"{k}{c}={v}", key, bad_key_char, value),
        st.builds(lambda k, v: f"{k[0] * 257}={v}", key, value),  # key too long
        st.builds(lambda k: f"{k}=", key),  # empty value
        st.builds(lambda k: k, key),  # no "="
        st.builds(lambda k: f"={k}", key),  # empty key
        st.builds(lambda k, v, c: f"{k}={v}{c}{v}", key, value, bad_value_char),
        st.builds(lambda k, v: f"{k}={v[-1] * 257}", key, value),  # value too long
    )


# --- runtime: approvals (the ApprovalStore records) ------------------------------------

# Text a store must keep exactly: any valid Unicode (NUL, newlines, escapes, RTL marks),
# never a lone surrogate, which no log can hold (stores refuse it).
_APPROVAL_TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=24)
# Wall-clock nanoseconds, and far beyond: stores keep Python ints exactly, past 64 bits.
_APPROVAL_NS = st.one_of(
    st.integers(min_value=0, max_value=2**63 - 1),
    st.integers(min_value=-(2**80), max_value=2**80),
    st.sampled_from([2**63 - 1, 2**63, -(2**63), -(2**63) - 1, 2**64, 0]),
)


@st.composite
def pending_approvals(
    draw: st.DrawFn, *, decision_id: st.SearchStrategy[str] | None = None
) -> PendingApproval:
    """A `runtime.PendingApproval` with hostile text, big times and every approver form.

    ``approvers`` is None (anyone), the empty tuple (no one) or a list that may
    repeat names (the record sorts and deduplicates it).
    """
    created_ns = draw(_APPROVAL_NS)
    return PendingApproval(
        decision_id=draw(decision_id if decision_id is not None else _APPROVAL_TEXT),
        decision_sha256=draw(sha256_hexes),
        run_id=draw(st.none() | _APPROVAL_TEXT),
        agent=draw(_APPROVAL_TEXT),
        verb=draw(_APPROVAL_TEXT),
        resource=draw(_APPROVAL_TEXT),
        reason=draw(_APPROVAL_TEXT),
        matched_policy=draw(st.none() | _APPROVAL_TEXT),
        held_verdict=draw(
            st.sampled_from([RuntimeVerdict.ALLOW, RuntimeVerdict.NARROW, RuntimeVerdict.SCRUB])
        ),
        executed_args_sha256=draw(sha256_hexes),
        policy_sha256=draw(sha256_hexes),
        approvers=draw(st.none() | st.lists(_APPROVAL_TEXT, max_size=4).map(tuple)),
        created_ns=created_ns,
        expires_ns=created_ns + draw(st.integers(min_value=0, max_value=2**70)),
    )


@st.composite
def resolutions(draw: st.DrawFn, decision_id: str) -> Resolution:
    """A `runtime.Resolution` of ``decision_id``: any outcome, its approver rule kept."""
    outcome = draw(st.sampled_from(["approved", "rejected", "expired"]))
    approver = None if outcome == "expired" else draw(_APPROVAL_TEXT)
    return Resolution(
        decision_id=decision_id,
        outcome=outcome,
        approver=approver,
        resolved_ns=draw(_APPROVAL_NS),
    )


# --- runtime: budgets (ADR 0032) ----------------------------------------------------------

budget_steps = st.lists(
    st.tuples(
        # how far the clock moves first (ns): often nothing, sometimes a whole window
        st.sampled_from([0, 0, 1, 250, 999, 1_000, 1_001, 3_000]),
        # the amount, in whole units
        st.integers(min_value=0, max_value=7),
        # whether another rule denies the action anyway (it must not consume)
        st.booleans(),
    ),
    max_size=40,
)
"""Steps of a budget scenario: (advance_ns, amount, denied_by_another_rule)."""


# --- analysis: reader items of a run, for the decision trace (the streamed report) -----------

# Few ids and addresses, so that decisions share ids, claims match and duplicates abound.
_RUN_IDS = (
    "0194a3c1-7e2f-7000-8000-000000000001",
    "0194a3c1-7e2f-7000-8000-000000000002",
    "0194a3c1-7e2f-7000-8000-000000000003",
    "é-ñ-☕",
    "",
)
_RUN_ADDRESSES = ("a" * 64, "b" * 64, "c" * 64)
_RUN_INTS = st.one_of(
    st.integers(min_value=0, max_value=10**6),
    st.sampled_from([2**63 - 1, 2**63, 2**64 - 1, 2**64, 2**70, -1, -(2**63), -(2**63) - 1]),
    st.integers(min_value=-(2**200), max_value=2**200),
)
_LONE_SURROGATES = st.sampled_from(["\ud800", "a\udfffb"])
_RUN_TEXT = st.one_of(st.text(max_size=6), st.sampled_from(["café ☕", "\u2028", "\x00\x7f"]))
_ODD = st.one_of(st.none(), st.booleans(), st.integers(), _LONE_SURROGATES)
_RUN_VERDICTS = st.sampled_from(
    ["allow", "deny", "pending", "pending", "narrow", "scrub"] * 2 + ["?"]
)


def _sometimes(draw: st.DrawFn, value: st.SearchStrategy[object]) -> object:
    """A field as the gate writes it nine times in ten, else what a crafted file holds."""
    return draw(_ODD if draw(st.integers(0, 9)) == 0 else value)


@st.composite
def _trace_record(draw: st.DrawFn, topic: str) -> dict[str, object]:
    from tests.records import approval, assessment, decision

    decision_id = _sometimes(draw, st.sampled_from(_RUN_IDS))
    record: dict[str, object]
    if topic == "/assessments":
        record = assessment("")
        record.update(
            decision_id=decision_id,
            agent=_sometimes(draw, _RUN_TEXT),
            verb=_sometimes(draw, _RUN_TEXT),
            findings=[
                {"detector": _sometimes(draw, st.sampled_from(("email", "card", "ñ")))}
                for _ in range(draw(st.integers(0, 3)))
            ],
            stage_ns=draw(
                st.dictionaries(st.sampled_from(("policy", "narrow", "scrub", "é")), _RUN_INTS)
            ),
        )
        if draw(st.booleans()):
            record["shadow"] = {
                "verdict": _sometimes(draw, _RUN_VERDICTS),
                "matched_policy": _sometimes(draw, _RUN_TEXT),
                "policy_id": _sometimes(draw, st.sampled_from(("candidate", "ops"))),
                "error": draw(st.none() | st.just("boom")),
            }
    elif topic == "/decisions":
        record = decision("", None)
        record.update(
            assessment_sha256=_sometimes(draw, st.sampled_from(_RUN_ADDRESSES)),
            decision_id=decision_id,
            verdict=_sometimes(draw, _RUN_VERDICTS),
            reason=_sometimes(
                draw, st.one_of(_RUN_TEXT, st.just("rule 'r' denies it (over its limit)"))
            ),
            matched_policy=draw(st.none() | st.sampled_from(("r", "read-public", "é"))),
            policy_id=_sometimes(draw, st.sampled_from(("support-agent", "ops", "política"))),
            stamp_ns=_sometimes(draw, _RUN_INTS),
            latency_ns=_sometimes(draw, _RUN_INTS),
            trace_origin=_sometimes(draw, st.sampled_from(("generated", "parent", "bogus"))),
        )
    elif topic == "/approvals":
        record = approval("", "d" * 64)
        record.update(
            decision_id=decision_id,
            outcome=_sometimes(draw, st.sampled_from(("approved", "rejected", "expired", "no"))),
            wait_ns=_sometimes(draw, _RUN_INTS),
            decision_run_id=draw(st.none() | st.none() | st.sampled_from(_RUN_IDS)),
        )
    else:
        record = {"schema": draw(st.sampled_from(("ghost.seal/1", "ghost.run/1"))), "seq": 0}
    if draw(st.integers(0, 19)) == 0:
        del record[draw(st.sampled_from(sorted(record)))]
    return record


@st.composite
def trace_run_items(draw: st.DrawFn) -> list[object]:
    """What `audit.iter_run` could yield of a damaged or crafted run, for the decision trace.

    Records on every topic the trace reads (and a few it does not), their
    fields mostly as the gate writes them and otherwise mistyped, missing,
    beyond 64 bits or holding lone surrogates; decision ids and assessment
    addresses from small pools (so ids repeat, claims verify or break and
    assessments come before, after and instead of one another); records that
    are not JSON; reader problems; and sometimes file positions out of the
    order the items come in (a record whose channel a damaged file defines
    late). The last item is the `audit.ReadEnd`.
    """
    import json

    from audit import LoggedRecord, ProblemKind, ReadProblem
    from runtime import sha256_hex
    from tests.records import read_end

    topics = draw(
        st.lists(
            st.sampled_from(
                ["/assessments", "/decisions", "/assessments", "/decisions", "/approvals", "/seal"]
            ),
            max_size=14,
        )
    )
    offsets = list(range(len(topics)))
    if draw(st.booleans()):
        offsets = draw(st.permutations(offsets))
    items: list[object] = []
    for index, (topic, offset) in enumerate(zip(topics, offsets, strict=True)):
        if draw(st.integers(0, 11)) == 0:
            message = draw(st.one_of(_RUN_TEXT, _RUN_TEXT, _LONE_SURROGATES))
            items.append(ReadProblem(ProblemKind.CHUNK_CRC_MISMATCH, None, f"damage: {message}"))
        record: dict[str, object] | None = draw(_trace_record(topic))
        problem = None
        if draw(st.integers(0, 11)) == 0:
            record, problem = None, "it is not valid JSON: Expecting value: line 1 column 1"
        data = json.dumps(record, ensure_ascii=True).encode()
        address = sha256_hex(data)
        if topic == "/assessments" and draw(st.integers(0, 3)):
            address = draw(st.sampled_from(_RUN_ADDRESSES))
        items.append(
            LoggedRecord(
                topic=topic,
                log_time_ns=index,
                sequence=index,
                data=data,
                sha256=address,
                record=record,
                problem=problem,
                publish_time_ns=index,
                channel_id=2,
                offset=64 + 100 * offset,
                offset_in_chunk=draw(st.none() | st.integers(0, 2**32)),
            )
        )
    items.append(read_end(source_sha256=draw(sha256_hexes), truncated=draw(st.booleans())))
    return items
