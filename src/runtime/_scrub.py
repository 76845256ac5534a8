"""The scrubber: removes secrets and PII from an action's arguments before it runs (SPEC §4).

A `Scrubber` is built once per gate (the detector plans are compiled once per
process and shared) and reused for every call. `Scrubber.scrub` takes the
gate's snapshot of the arguments -- plain data only -- and returns a
`ScrubResult`: a copy in which every secret is replaced by
``[REDACTED:<detector>]``, the findings (detector, JSON path, keyed
fingerprint; never the secret itself), and the blocking detectors that fired.

How, in four steps (ADR 0010):

1. The walk (`runtime._walk`) checks that the value is plain data, bounds its
   depth and size, and lists every text: strings, bytes, dict keys, and the
   decimal text of numbers that could be a card or a phone number.
2. All texts are joined into one buffer (NUL between them) and scanned in one
   RE2 pass over every detector's hint (`runtime._scanner`), so a call costs
   one scan however many strings the arguments hold.
3. Each text with candidates is redacted to a fixpoint (`runtime._redaction`):
   no detector finds anything in the output, or the call is refused.
4. The walk rebuilds, copy-on-write, only the containers that changed.

Bounds, all raising `ScrubLimitExceeded` (the gate denies: what cannot be
scrubbed is never passed on): ``max_depth`` (nesting, cycles included),
``max_bytes`` (a budget charged for the UTF-8 bytes scanned and a fixed cost
per value, key, hint hit, anchored attempt, finding and local rescan, so that
its size bounds the time of a call whatever the input), and the ``fixpoint``
round bound. A value that is not plain data raises `UnsupportedValue`.

Paths are JSONPath-like: ``$`` is the value itself, ``.name`` a dict key that is
an identifier, ``["odd key"]`` any other key (JSON string, ASCII), ``[2]`` a list
index; ``#key`` marks a finding inside a key. Path segments are the keys *as
they are in the output*, redacted again by every detector whatever the
policy's detector list, inside ``scrub_exempt`` subtrees too: a key is never a
way into the log. `Scrubber.record_text` does the same for the action's agent,
verb and resource.
"""

from __future__ import annotations

import hashlib
from bisect import bisect_right
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any, Final

from runtime._detectors import DETECTOR_NAMES, DETECTORS
from runtime._errors import ScrubLimitExceeded
from runtime._redaction import Hit, redact
from runtime._scanner import Candidate, Meter, Plan, make_plan
from runtime._walk import KEY, Exempt, Text, Walk, replacement

__all__ = ["Finding", "ScrubLimitExceeded", "ScrubResult", "Scrubber"]

# Keys repeat from call to call (a tool's arguments have the same names each
# time): short keys found clean by every detector are remembered, so that naming
# them in a path costs a set lookup. Only keys, never values.
_SHA256_BLOCK: Final = 64
_IPAD: Final = bytes(byte ^ 0x36 for byte in range(256))
_OPAD: Final = bytes(byte ^ 0x5C for byte in range(256))

_CLEAN_MAX_CHARS: Final = 64
_CLEAN_MAX_ENTRIES: Final = 4096


@dataclass(frozen=True, slots=True)
class Finding:
    """One secret or piece of PII the scrubber removed.

    Attributes:
        detector: the name of the detector that recognised it.
        path: where it was, JSONPath-like, built from redacted keys
            (``$.items[2].body``; ``…#key`` for a finding inside a dict key).
        fingerprint: hex HMAC-SHA256 of the matched text (its UTF-8 bytes) under
            the scrubber's fingerprint key: equal secrets correlate, never recover.
    """

    detector: str
    path: str
    fingerprint: str


@dataclass(frozen=True, slots=True)
class ScrubResult:
    """What `Scrubber.scrub` returns.

    Attributes:
        value: the scrubbed value (copy-on-write; the input is never mutated).
        findings: every finding, in walk order (a key before its value).
        blocked: sorted, unique names of blocking detectors that found
            something; non-empty means the action must be denied.
    """

    value: object
    findings: tuple[Finding, ...]
    blocked: tuple[str, ...]


class Scrubber:
    """Finds and redacts secrets and PII in tool-call arguments.

    Build one per gate and reuse it; `scrub` is safe to call from several
    threads at once.

    Args:
        detectors: names of the detectors to run (``"*"`` or None: all of them).
        block: names of detectors whose findings deny the action. A blocking
            detector always runs, even if ``detectors`` omits it, and ignores
            exemptions.
        block_all: every running detector blocks (the policy's ``action = "block"``).
        fingerprint_key: the HMAC-SHA256 key for finding fingerprints (non-empty).
        max_depth: the deepest container accepted (the value itself is depth 0).
        max_bytes: the size budget, in bytes (see the module docstring).

    Raises:
        ValueError: an unknown detector name (named in the message), an empty
            fingerprint key, or a negative bound.
        TypeError: ``detectors`` or ``block`` is a single string, or the key is not bytes.
    """

    __slots__ = (
        "_active",
        "_blocking",
        "_clean",
        "_exempt_plan",
        "_hmac",
        "_limits",
        "_plan",
        "_record",
    )

    def __init__(
        self,
        *,
        detectors: Collection[str] | None = None,
        block: Collection[str] = (),
        block_all: bool = False,
        fingerprint_key: bytes,
        max_depth: int = 32,
        max_bytes: int = 1 << 20,
    ) -> None:
        if isinstance(detectors, str) or isinstance(block, str):
            raise TypeError("detectors and block take a collection of names, not one string")
        if not isinstance(fingerprint_key, bytes | bytearray):
            raise TypeError("fingerprint_key must be bytes")
        if not fingerprint_key:
            raise ValueError("fingerprint_key must not be empty")
        if max_depth < 0 or max_bytes < 0:
            raise ValueError("max_depth and max_bytes must not be negative")
        wanted = DETECTOR_NAMES if detectors is None or "*" in detectors else set(detectors)
        unknown = sorted({*wanted, *block} - DETECTOR_NAMES)
        if unknown:
            raise ValueError(f"unknown detector {', '.join(map(repr, unknown))}")
        active = set(wanted) | set(block)
        blocking = set(active) if block_all else set(block)
        entries = tuple(
            (index, detector.name in blocking)
            for index, detector in enumerate(DETECTORS)
            if detector.name in active
        )
        self._active = tuple(DETECTORS[index].name for index, _ in entries)
        self._blocking = frozenset(blocking)
        self._plan = make_plan(entries)
        self._exempt_plan = make_plan(tuple(entry for entry in entries if entry[1]))
        self._record = make_plan(tuple((index, False) for index in range(len(DETECTORS))))
        self._hmac = _hmac_states(bytes(fingerprint_key))
        self._limits = (max_depth, max_bytes)
        self._clean: set[str] = set()

    @property
    def detectors(self) -> tuple[str, ...]:
        """The names of the detectors this scrubber runs, in catalogue order."""
        return self._active

    @property
    def blocking(self) -> frozenset[str]:
        """The names of the detectors whose findings deny the action."""
        return self._blocking

    def scrub(self, value: object, *, exempt: Collection[str] = ()) -> ScrubResult:
        """Return ``value`` with every secret and piece of PII redacted.

        Args:
            value: plain data: ``dict`` with ``str`` keys, ``list``, ``str``,
                ``bytes``, ``int``, finite ``float``, ``bool``, ``None`` (exact types).
            exempt: argument paths in dotted form (``"to"``, ``"headers.cc"``),
                relative to the top-level dict. Everything at or under them (keys
                included) is not scanned by non-blocking detectors. Lists on the
                way are transparent: ``"items.body"`` exempts the ``body`` of every item.

        Returns:
            The scrubbed value, the findings in walk order, and the blocking
            detectors that fired.

        Raises:
            UnsupportedValue: a value (or key) that is not plain data; its path
                and type name are redacted by every detector.
            ScrubLimitExceeded: too deep (or cyclic), over the size budget, or
                no fixpoint within the round bound.
            ValueError: an exempt path with an empty segment.
            TypeError: ``exempt`` is a single string.
        """
        trie = _exemption_trie(exempt)
        max_depth, max_bytes = self._limits
        meter = Meter(max_bytes)
        walk = Walk(max_depth, meter, self.record_text)
        walk.collect(value, trie)
        texts = walk.texts
        results: dict[int, tuple[bytes, list[Hit]]] = {}
        regular = [index for index, text in enumerate(texts) if not text[5]]
        self._scan(self._plan, texts, regular, results, meter)
        if len(regular) < len(texts):
            exempted = [index for index, text in enumerate(texts) if text[5]]
            self._scan(self._exempt_plan, texts, exempted, results, meter)
        if not results:
            return ScrubResult(value, (), ())
        out = value
        changed: list[tuple[Text, list[Hit]]] = []
        for index in sorted(results):
            text = texts[index]
            redacted, hits = results[index]
            new = replacement(text, redacted)
            if text[0] < 0:
                out = new
            else:
                walk.change(text, new)
            changed.append((text, hits))
        if walk.nodes:
            out = walk.rebuild(value)
        findings: list[Finding] = []
        blocked: set[str] = set()
        for text, hits in changed:
            path = walk.path(text[0], text[1], key=text[2] == KEY)
            for index, secret, blocking in hits:
                name = DETECTORS[index].name
                findings.append(Finding(name, path, self._fingerprint(secret)))
                if blocking:
                    blocked.add(name)
        return ScrubResult(out, tuple(findings), tuple(sorted(blocked)))

    def scrub_text(self, text: str) -> tuple[str, tuple[Finding, ...]]:
        """Redact one string with this scrubber's detectors; findings have path ``$``.

        Every running detector applies, blocking or not; the caller decides
        what a blocking finding here means.

        Raises:
            ScrubLimitExceeded: the text is over the size budget, or no fixpoint.
            TypeError: ``text`` is not a str.
        """
        if not isinstance(text, str):
            raise TypeError("scrub_text takes a str")
        plain = str.__str__(text)
        redacted, hits = self._redact_one(self._plan, plain)
        findings = tuple(
            Finding(DETECTORS[index].name, "$", self._fingerprint(secret))
            for index, secret, _ in hits
        )
        return redacted, findings

    def record_text(self, text: str) -> str:
        """``text`` redacted by every detector, whatever the policy lists; never raises.

        For what the gate records: the action's agent, verb and resource, and
        the segments of finding paths. Text over the size budget (or that does
        not reach a fixpoint) becomes a placeholder stating only its length;
        a non-str, ``"<not a string>"``. Lone surrogates, NUL and other control
        characters are scanned like any character and kept (escaping them is the
        recorder's job).
        """
        if not isinstance(text, str):
            return "<not a string>"
        plain = str.__str__(text)
        clean = self._clean
        if plain in clean:
            return plain
        try:
            redacted, hits = self._redact_one(self._record, plain)
        except Exception:  # noqa: BLE001 - never raise: a placeholder keeps only the length
            return f"<text of {len(plain)} characters that could not be scrubbed>"
        if not hits and len(plain) <= _CLEAN_MAX_CHARS:
            if len(clean) >= _CLEAN_MAX_ENTRIES:
                clean.clear()
            clean.add(plain)
        return redacted

    # -- scanning ----------------------------------------------------------------------

    def _redact_one(self, plan: Plan, text: str) -> tuple[str, list[Hit]]:
        meter = Meter(self._limits[1])
        data = text.encode("utf-8", "surrogatepass")
        meter.charge(len(data))
        found: list[Candidate] = []
        plan.scan(data, 0, len(data), meter, found)
        if not found:
            return text, []
        redacted, hits = redact(plan, data, found, meter)
        return redacted.decode("utf-8", "surrogatepass"), hits

    @staticmethod
    def _scan(
        plan: Plan,
        texts: list[Text],
        indexes: list[int],
        results: dict[int, tuple[bytes, list[Hit]]],
        meter: Meter,
    ) -> None:
        """Scan the texts at ``indexes`` in one buffer; store each redacted one in ``results``."""
        if not indexes:
            return
        datas = [texts[index][3] for index in indexes]
        buffer = b"\x00".join(datas)
        found: list[Candidate] = []
        plan.scan(buffer, 0, len(buffer), meter, found)
        if not found:
            return
        starts: list[int] = []
        offset = 0
        for data in datas:
            starts.append(offset)
            offset += len(data) + 1
        per_text: dict[int, list[Candidate]] = {}
        for claim_start, minus_end, redacting, order, start, end in found:
            which = bisect_right(starts, claim_start) - 1
            base = starts[which]
            per_text.setdefault(which, []).append(
                (claim_start - base, minus_end + base, redacting, order, start - base, end - base)
            )
        for which, candidates in per_text.items():
            results[indexes[which]] = redact(plan, datas[which], candidates, meter)

    def fingerprint(self, data: bytes) -> str:
        """HMAC-SHA256 hex of ``data`` under the fingerprint key (how budget keys are recorded)."""
        return self._fingerprint(data)

    def _fingerprint(self, secret: bytes) -> str:
        # HMAC-SHA256 (RFC 2104) from the two padded-key states hashed once at construction.
        inner, outer = self._hmac
        inner = inner.copy()
        inner.update(secret)
        outer = outer.copy()
        outer.update(inner.digest())
        digest: str = outer.hexdigest()
        return digest


def _hmac_states(key: bytes) -> tuple[Any, Any]:
    """SHA-256 states after the inner and outer padded key of HMAC-SHA256 (RFC 2104)."""
    if len(key) > _SHA256_BLOCK:
        key = hashlib.sha256(key).digest()
    key = key.ljust(_SHA256_BLOCK, b"\0")
    inner = hashlib.sha256(key.translate(_IPAD))
    outer = hashlib.sha256(key.translate(_OPAD))
    return inner, outer


def _exemption_trie(exempt: Collection[str]) -> Exempt:
    if isinstance(exempt, str):
        raise TypeError("exempt takes a collection of dotted paths, not one string")
    if not exempt:
        return None
    root: dict[str, Exempt] = {}
    for dotted in exempt:
        segments = dotted.split(".")
        if not all(segments):
            raise ValueError(f"exempt path {dotted!r} has an empty segment")
        node = root
        for segment in segments[:-1]:
            child = node.get(segment)
            if child is True:
                break  # a shorter path already exempts everything below
            if not isinstance(child, dict):
                child = node[segment] = {}
            node = child
        else:
            node[segments[-1]] = True
    return root
