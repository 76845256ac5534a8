"""The scrubber: removes secrets and PII from an action's arguments before it runs.

A `Scrubber` is built once per gate (all pattern and configuration work happens
there) and reused for every call. `Scrubber.scrub` walks a value -- dicts, lists,
tuples, strings, bytes -- and returns a `ScrubResult`: a scrubbed copy in which
every secret is replaced by ``[REDACTED:<detector>]``, the findings (detector, JSON
path, keyed fingerprint; never the secret itself), and the names of the blocking
detectors that fired (their findings deny the action).

What is walked, and how:

* ``dict`` and any other ``Mapping``: keys and values. A ``str`` or ``bytes``
  key is scanned like a value and replaced by its redacted form; other keys
  are kept as they are. When two keys redact to the same text, the later one
  gets a `` (2)``, `` (3)``... suffix, so no entry is lost.
* ``list``, ``tuple``, ``set`` and ``frozenset``: each item (a set's in its
  iteration order); a tuple stays a tuple and a set a set.
* ``str``: scanned. ``bytes``/``bytearray``: decoded as UTF-8 (invalid bytes
  become U+FFFD) and scanned; if anything is found the value becomes the
  redacted ``str``, otherwise the original bytes are kept.
* anything else (numbers, None, arbitrary objects) is passed through
  untouched. It is never converted to text: ``__str__`` and ``__repr__`` may
  raise, or print a secret.

The result is copy-on-write: a container in which nothing changed is returned
as the same object, a changed one as a new plain ``dict``/``list``/``tuple``/``set``.
The input is never mutated.

Paths are JSONPath-like: ``$`` is the value itself, ``.name`` a dict key that is
an identifier, ``["odd key"]`` any other string key (JSON-escaped), ``[2]`` a
list or tuple index; non-string keys are written ``[3]``, ``[true]``,
``[null]``, ``[b"..."]`` or ``[<TypeName>]``. Paths are built from the
*redacted* keys, so they never hold a secret. A finding inside a dict key has
the path of its (redacted) entry followed by ``#key``:
``$.headers["[REDACTED:email]"]#key``.

Bounds, both raising `ScrubLimitExceeded` (the gate turns it into ``deny``:
what cannot be scanned is never passed on unscanned):

* depth: the value itself is at depth 0 and a container's items one deeper; a
  container deeper than ``max_depth`` raises. A cycle is an infinitely deep
  value and ends the same way. The walk keeps its own stack, so no nesting can
  reach Python's recursion limit.
* size: each value visited costs 1, and each string scanned costs its length in
  UTF-8 bytes (a bytes value: the UTF-8 length of its decoded text); the walk
  raises as soon as the total exceeds ``max_bytes``, before scanning further.
  The per-value cost bounds payloads with no text, such as a list that holds
  itself many times over.

Overlapping matches: each candidate *claims* its whole match and *redacts* its
secret (the same text, except that ``bearer_token`` claims ``Bearer`` and
``url_credentials`` claims the scheme separator and host as context). Candidates
are ordered leftmost claim first, then longest, then blocking detectors before
others, then catalogue order. The first of a run of overlapping claims names the
``[REDACTED:…]`` marker, and the marker covers the secrets of the whole run, so
no part of any secret survives. A candidate whose claim lies wholly inside an
earlier one is part of that finding (the JWT that is a bearer token, the
"password@host.tld" of a connection string) and is not reported separately --
unless its detector is blocking: blocking findings are never dropped.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from json.encoder import encode_basestring
from typing import Any, Final, Literal, TypeAlias

from runtime._detectors import DETECTOR_NAMES, DETECTORS, Detector
from runtime._errors import GhostError

__all__ = ["Finding", "ScrubLimitExceeded", "ScrubResult", "Scrubber"]


@dataclass(frozen=True, slots=True)
class Finding:
    """One secret or piece of PII the scrubber removed.

    Attributes:
        detector: the name of the detector that recognised it.
        path: where it was, as a JSONPath-like string built from redacted keys
            (``$.items[2].body``; ``…#key`` for a finding inside a dict key).
        fingerprint: hex HMAC-SHA256 of the matched text under the scrubber's
            fingerprint key: equal secrets can be correlated, never recovered.
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


class ScrubLimitExceeded(GhostError, ValueError):
    """A value is too deep (or cyclic) or too large to scrub; it must not be used.

    The message names the bound and its limit, never any of the value's content.

    Attributes:
        bound: ``"max_depth"`` or ``"max_bytes"``.
        limit: the configured limit that was exceeded.
    """

    def __init__(self, bound: Literal["max_depth", "max_bytes"], limit: int) -> None:
        self.bound = bound
        self.limit = limit
        if bound == "max_depth":
            what = f"nests deeper than the scrubber's max_depth of {limit} (or is cyclic)"
        else:
            what = (
                f"exceeds the scrubber's max_bytes of {limit}"
                " (UTF-8 bytes of text scanned, plus one per value)"
            )
        super().__init__(f"value {what}; it cannot be scrubbed and must not be used")


# An exemption trie node: None (nothing exempt at or below), True (exempt here
# and everywhere below), or the children of a dict whose keys lead to exemptions.
_Exempt: TypeAlias = "dict[str, _Exempt] | bool | None"

_IDENTIFIER: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_PUSHED: Final = object()  # _visit's answer when it pushed a frame instead of returning a value
_LIST: Final = 0
_TUPLE: Final = 1
_DICT: Final = 2
_SET: Final = 3
_FROZENSET: Final = 4


# Text that a detector without hints can match: two adjacent digits, or "+" and a
# digit. It starts with a character class, so the engine skips to candidates fast.
_NUMERIC: Final = re.compile(r"[0-9+](?:(?<=[0-9])[0-9]|(?<=\+)[1-9])")

# One validated candidate: (claim start, claim end, blocking?, catalogue index,
# detector name, secret start, secret end). The claim is the whole match, the
# secret the part that is redacted; "Bearer " and a URL's host are claimed as
# context (so that a JWT inside the token, or the "password@host.tld" that looks
# like an email, is seen as part of this finding) but not redacted.
_Hit: TypeAlias = tuple[int, int, bool, int, str, int, int]


# Dict keys repeat from call to call (a tool's arguments have the same names each
# time); a plan remembers the short keys it found clean, so that they cost one set
# lookup. Only keys: values may be secrets no detector knows (a password), and are
# not kept beyond the call.
_CLEAN_MAX_CHARS: Final = 64
_CLEAN_MAX_ENTRIES: Final = 4096

# Bound on rescans of redacted text (see Scrubber._text); never reached in practice.
_MAX_PASSES: Final = 16


class _Plan:
    """A set of detectors, ready to scan text."""

    __slots__ = ("clean", "hinted", "hints", "numeric")

    def __init__(self, entries: list[tuple[Detector, int, bool]]) -> None:
        # entries: (detector, catalogue index, blocking?)
        self.hinted = tuple(entry for entry in entries if entry[0].hints)
        self.numeric = tuple(entry for entry in entries if not entry[0].hints)
        # One search for any hint at all: every alternative starts with a literal,
        # so the engine skips ahead to candidate characters.
        hints = [re.escape(hint) for entry in self.hinted for hint in entry[0].hints]
        self.hints = re.compile("|".join(hints)) if hints else None
        self.clean: set[str] = set()

    def hits(self, text: str, *, key: bool = False) -> list[_Hit] | None:
        """Return the validated candidates in ``text``, or None when there are none.

        ``key``: the text is a dict key, which may be remembered as clean.
        """
        short = key and len(text) <= _CLEAN_MAX_CHARS
        if short and text in self.clean:
            return None
        found: list[_Hit] = []
        if self.hints is not None and self.hints.search(text) is not None:
            for entry in self.hinted:
                for hint in entry[0].hints:
                    if hint in text:
                        _search(entry, text, found)
                        break
        if self.numeric and _NUMERIC.search(text) is not None:
            for entry in self.numeric:
                _search(entry, text, found)
        if found:
            return found
        if short:
            if len(self.clean) >= _CLEAN_MAX_ENTRIES:
                self.clean.clear()
            self.clean.add(text)
        return None


def _search(entry: tuple[Detector, int, bool], text: str, found: list[_Hit]) -> None:
    detector, order, blocking = entry
    search = detector.pattern.search
    group = detector.group
    validator = detector.validator
    pos = 0
    while (match := search(text, pos)) is not None:
        claim_start, claim_end = match.span()
        start, end = match.span(group)
        if validator is not None:
            keep = validator(text[start:end])
            if not keep:
                # A rejected candidate may overlap a genuine one that starts later.
                pos = claim_start + 1
                continue
            if keep < end - start:
                # Trimmed: the rest is not part of this finding, and may start the next.
                end = claim_end = start + keep
        found.append((claim_start, claim_end, blocking, order, detector.name, start, end))
        pos = max(claim_end, claim_start + 1)


class _Walk:
    """The mutable state of one `Scrubber.scrub` call."""

    __slots__ = ("blocked", "budget", "findings")

    def __init__(self, budget: int) -> None:
        self.findings: list[Finding] = []
        self.blocked: set[str] = set()
        self.budget = budget


class _Frame:
    """A container being walked: its items, where the walk is, and its copy if changed."""

    __slots__ = ("depth", "index", "items", "key", "kind", "node", "out", "src")

    def __init__(self, kind: int, src: object, items: list[Any], depth: int, node: _Exempt) -> None:
        self.kind = kind
        self.src = src
        self.items = items  # list/tuple: the items; dict: (key, value) pairs
        self.depth = depth
        self.node = node
        self.index = 0
        self.key: object = None  # dict: the (redacted) key of the current item
        self.out: list[object] | dict[object, object] | None = None  # allocated on first change


class Scrubber:
    """Finds and redacts secrets and PII in tool-call arguments.

    Build one per gate and reuse it: construction compiles the prefilters, and
    `scrub` is safe to call from several threads at once.

    Args:
        detectors: names of the detectors to run (``"*"`` or None: all of them).
        block: names of detectors whose findings deny the action. A blocking
            detector always runs, even if ``detectors`` omits it, and ignores
            exemptions.
        block_all: every running detector blocks (the policy's ``action = "block"``).
        fingerprint_key: the HMAC-SHA256 key for finding fingerprints (non-empty).
        max_depth: the deepest container accepted (the value itself is depth 0).
        max_bytes: the size budget: UTF-8 bytes of text scanned plus one per value.

    Raises:
        ValueError: an unknown detector name (named in the message), an empty
            fingerprint key, or a negative bound.
        TypeError: ``detectors`` or ``block`` is a single string, or the key is not bytes.
    """

    __slots__ = ("_active", "_blocking", "_blocking_plan", "_full_plan", "_hmac", "_limits")

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
        entries = [
            (detector, order, detector.name in blocking)
            for order, detector in enumerate(DETECTORS)
            if detector.name in active
        ]
        self._active = tuple(d.name for d, _, _ in entries)
        self._blocking = frozenset(blocking)
        self._full_plan = _Plan(entries)
        self._blocking_plan = _Plan([entry for entry in entries if entry[2]])
        # Keyed once; each fingerprint copies this state instead of re-deriving the pads.
        self._hmac = hmac.new(bytes(fingerprint_key), digestmod=hashlib.sha256)
        self._limits = (max_depth, max_bytes)

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
            value: the arguments (any value; see the module docstring for what is walked).
            exempt: argument paths in dotted form (``"to"``, ``"headers.cc"``),
                relative to the top-level dict. Everything at or under them is
                not scanned by non-blocking detectors. Lists on the way are
                transparent: ``"items.body"`` exempts the ``body`` of every item.

        Returns:
            The scrubbed value, the findings in walk order, and the blocking
            detectors that fired.

        Raises:
            ScrubLimitExceeded: the value nests deeper than ``max_depth`` (or is
                cyclic), or is larger than ``max_bytes``.
            ValueError: an exempt path with an empty segment.
            TypeError: ``exempt`` is a single string.
        """
        walk = _Walk(self._limits[1])
        result = self._walk(value, _exemption_trie(exempt), walk)
        return ScrubResult(result, tuple(walk.findings), tuple(sorted(walk.blocked)))

    def scrub_text(self, text: str) -> tuple[str, tuple[Finding, ...]]:
        """Redact one string (an action's agent, verb or resource); findings have path ``$``.

        Every running detector applies, blocking or not; the caller decides
        what a blocking finding here means.

        Raises:
            ScrubLimitExceeded: the text is larger than ``max_bytes``.
            TypeError: ``text`` is not a str.
        """
        if not isinstance(text, str):
            raise TypeError("scrub_text takes a str")
        walk = _Walk(self._limits[1] - 1)  # the string is one value, as in `scrub`
        result = self._text(text, self._full_plan, walk, [], None)
        assert isinstance(result, str)
        return result, tuple(walk.findings)

    # -- the walk -----------------------------------------------------------------------

    def _walk(self, root: object, trie: _Exempt, walk: _Walk) -> object:
        # An explicit stack instead of recursion: the depth bound, not Python's
        # recursion limit, decides how deep a value may be.
        stack: list[_Frame] = []
        result = self._visit(root, 0, trie, walk, stack)
        while stack:
            frame = stack[-1]
            if result is not _PUSHED:
                _store(frame, result)
            if frame.index >= len(frame.items):
                stack.pop()
                result = _finish(frame)
                continue
            item = frame.items[frame.index]
            node = frame.node
            if frame.kind == _DICT:
                assert isinstance(item, tuple)
                key, item = item
                if node is not None and node is not True:
                    assert isinstance(node, dict)
                    node = node.get(key) if isinstance(key, str) else None
                frame.key = self._key(frame, key, node, walk, stack)
            result = self._visit(item, frame.depth + 1, node, walk, stack)
        return result

    def _visit(
        self, value: object, depth: int, node: _Exempt, walk: _Walk, stack: list[_Frame]
    ) -> object:
        """Return the scrubbed ``value``, or push a frame for a container and return _PUSHED."""
        walk.budget -= 1
        if walk.budget < 0:
            raise ScrubLimitExceeded("max_bytes", self._limits[1])
        plan = self._blocking_plan if node is True else self._full_plan
        if isinstance(value, str):
            return self._text(value, plan, walk, stack, None)
        kind: int
        if isinstance(value, dict):
            kind, items = _DICT, list(dict.items(value))
        elif isinstance(value, Mapping):
            # Any other mapping (MappingProxyType, a framework's own) is walked
            # like a dict; if its methods raise, the gate denies.
            kind, items = _DICT, list(value.items())
        elif isinstance(value, list):
            kind, items = _LIST, list.copy(value)
        elif isinstance(value, tuple):
            kind, items = _TUPLE, list(tuple.__iter__(value))
        elif isinstance(value, set | frozenset):
            kind = _FROZENSET if isinstance(value, frozenset) else _SET
            items = list(value)
        elif isinstance(value, bytes | bytearray):
            return self._bytes(value, plan, walk, stack, None)
        else:
            return value  # opaque: never stringified
        if depth > self._limits[0]:
            raise ScrubLimitExceeded("max_depth", self._limits[0])
        if not items:
            return value
        stack.append(_Frame(kind, value, items, depth, node))
        return _PUSHED

    def _key(
        self, frame: _Frame, key: object, node: _Exempt, walk: _Walk, stack: list[_Frame]
    ) -> object:
        """Scan a dict key; return the key to store (redacted and made unique if it changed)."""
        plan = self._blocking_plan if node is True else self._full_plan
        if isinstance(key, str):
            text: object = str.__str__(key)
        elif isinstance(key, bytes):
            text = key
        else:
            return key
        # Findings are recorded once the final key (and so the path) is known.
        pending: list[tuple[str, str, bool]] = []
        if isinstance(text, str):
            new = self._text(text, plan, walk, stack, pending)
        else:
            assert isinstance(text, bytes)
            new = self._bytes(text, plan, walk, stack, pending)
        if not pending:
            return key
        assert isinstance(new, str)
        src = frame.src
        assert isinstance(src, dict)
        taken = frame.out if frame.out is not None else src
        candidate, number = new, 1
        while dict.__contains__(src, candidate) or candidate in taken:
            number += 1
            candidate = f"{new} ({number})"
        frame.key = candidate
        path = _path(stack) + "#key"
        for name, fingerprint, blocking in pending:
            walk.findings.append(Finding(name, path, fingerprint))
            if blocking:
                walk.blocked.add(name)
        return candidate

    def _bytes(
        self,
        value: bytes | bytearray,
        plan: _Plan,
        walk: _Walk,
        stack: list[_Frame],
        pending: list[tuple[str, str, bool]] | None,
    ) -> object:
        text = str(value, "utf-8", "replace")  # the buffer itself: no overridable method runs
        scrubbed = self._text(text, plan, walk, stack, pending)
        return value if scrubbed is text else scrubbed

    def _text(
        self,
        text: str,
        plan: _Plan,
        walk: _Walk,
        stack: list[_Frame],
        pending: list[tuple[str, str, bool]] | None,
    ) -> object:
        """Scan one string; return it unchanged (the same object) or redacted.

        Findings go to ``walk`` under the current path, or, for a dict key, to
        ``pending`` (the key's final path is not known yet).
        """
        plain = str.__str__(text)  # a str subclass's overrides never run
        walk.budget -= len(plain) if plain.isascii() else len(_utf8(plain))
        if walk.budget < 0:
            raise ScrubLimitExceeded("max_bytes", self._limits[1])
        hits = plan.hits(plain, key=pending is not None)
        if hits is None:
            return text
        recorded: list[tuple[str, str, bool]] = []
        # A redaction can expose text that was glued to a secret ("…0006ghp_…": the
        # card's digits hid the token's start), so the result is scanned again until
        # it is clean: scrubbing is idempotent. Every pass redacts text that is not
        # a marker, so this ends; the bound is a guard, never reached in practice.
        for _ in range(_MAX_PASSES):
            plain = self._redact(plain, hits, recorded)
            found = plan.hits(plain)
            if found is None:
                break
            hits = found
        if pending is not None:
            pending.extend(recorded)
        else:
            path = _path(stack)
            for name, fingerprint, blocking in recorded:
                walk.findings.append(Finding(name, path, fingerprint))
                if blocking:
                    walk.blocked.add(name)
        return plain

    def _redact(self, text: str, hits: list[_Hit], recorded: list[tuple[str, str, bool]]) -> str:
        """Replace each run of overlapping candidates by one marker; record the findings."""
        hits.sort(key=_hit_order)
        parts: list[str] = []
        cursor = 0  # end of the text already copied or redacted
        label = ""
        claimed = -1  # end of the current run of overlapping claims
        low = high = 0  # the text the current run's marker replaces
        for claim_start, claim_end, blocking, _, name, start, end in hits:
            if claim_start >= claimed:
                if claimed >= 0:
                    parts.append(text[cursor:low])
                    parts.append(f"[REDACTED:{label}]")
                    cursor = high
                label, claimed, low, high = name, claim_end, start, end
            elif claim_end > claimed:
                # Overlaps and reaches further: one marker covers both secrets.
                claimed, low, high = claim_end, min(low, start), max(high, end)
            elif blocking:
                low, high = min(low, start), max(high, end)
            else:
                continue  # wholly inside an earlier claim: part of that finding
            recorded.append((name, self._fingerprint(text[start:end]), blocking))
        parts.append(text[cursor:low])
        parts.append(f"[REDACTED:{label}]")
        parts.append(text[high:])
        return "".join(parts)

    def _fingerprint(self, secret: str) -> str:
        mac = self._hmac.copy()
        mac.update(_utf8(secret))
        return mac.hexdigest()


def _utf8(text: str) -> bytes:
    # surrogatepass: a lone surrogate is still text a caller passed, and must be
    # measured and fingerprinted, not crash the scrubber.
    return text.encode("utf-8", "surrogatepass")


def _hit_order(hit: _Hit) -> tuple[int, int, bool, int]:
    start, end, blocking, order = hit[:4]
    return (start, -end, not blocking, order)


def _store(frame: _Frame, result: object) -> None:
    """Record the scrubbed form of the frame's current item and move to the next."""
    index = frame.index
    frame.index = index + 1
    if frame.kind == _DICT:
        key, original = frame.items[index]
        new_key = frame.key
        if frame.out is None:
            if result is original and new_key is key:
                return
            frame.out = dict(frame.items[:index])
        assert isinstance(frame.out, dict)
        frame.out[new_key] = result
        return
    if frame.out is None:
        if result is frame.items[index]:
            return
        frame.out = frame.items[:index]
    assert isinstance(frame.out, list)
    frame.out.append(result)


def _finish(frame: _Frame) -> object:
    if frame.out is None:
        return frame.src
    if frame.kind == _TUPLE:
        return tuple(frame.out)
    if frame.kind == _SET:
        return set(frame.out)
    if frame.kind == _FROZENSET:
        return frozenset(frame.out)
    return frame.out


def _path(stack: list[_Frame]) -> str:
    """The JSONPath-like path of the item the innermost frame is visiting."""
    parts = ["$"]
    for frame in stack:
        if frame.kind == _DICT:
            parts.append(_key_segment(frame.key))
        else:
            parts.append(f"[{frame.index}]")
    return "".join(parts)


def _key_segment(key: object) -> str:
    if isinstance(key, str):
        key = str.__str__(key)
        if _IDENTIFIER.fullmatch(key):
            return "." + key
        return f"[{_quote(key)}]"
    if key is None or isinstance(key, bool):
        return f"[{json.dumps(key)}]"
    if type(key) is int:
        return f"[{key}]" if -(10**18) < key < 10**18 else "[<int>]"
    if isinstance(key, bytes):
        return f"[b{_quote(str(key, 'utf-8', 'replace'))}]"
    return f"[<{type(key).__name__}>]"


def _quote(text: str) -> str:
    quoted: str = encode_basestring(text)
    if not quoted.isascii():
        try:
            quoted.encode("utf-8")
        except UnicodeEncodeError:
            # A lone surrogate: escape it, so that the path stays valid Unicode.
            quoted = json.dumps(text)
    return quoted


def _exemption_trie(exempt: Collection[str]) -> _Exempt:
    if isinstance(exempt, str):
        raise TypeError("exempt takes a collection of dotted paths, not one string")
    if not exempt:
        return None
    root: dict[str, _Exempt] = {}
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
