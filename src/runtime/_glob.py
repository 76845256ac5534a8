"""Glob patterns for a rule's agents, verbs and resources (SPEC §4 "Globs", ADR 0009).

Two dialects, both matching the whole text:

* **names** (``agents``, ``verbs``) have no segments: ``*`` matches any run of
  characters, ``/`` included, and ``?`` any one character. ``ops/*`` matches
  ``ops/cleaner``; ``*`` matches every name, the empty one too.
* **resources** are ``/``-separated: ``*`` matches within a segment, ``?`` one
  character other than ``/``, and ``**`` — which must be a whole segment — any
  number of segments, none included (``file:/data/**`` matches ``file:/data``,
  ``file:/data/x/y``, not ``file:/database``). A resource glob is matched
  against canonical resources only (`runtime._resource`), so it must be in
  canonical form itself: a glob no canonical resource could match is an error.

Every other character is literal; there is no escape. Matching takes time
linear in the text: a literal, "everything", a literal directory followed by
``/**`` and a literal followed by one final ``*`` are plain string operations,
and the other patterns of a list are compiled, once per policy, into one RE2
alternation.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from runtime._errors import UnsupportedValue
from runtime._paths import PathProblem, canonical_path, check_characters
from runtime._re2 import Regex, RegexError, escape

__all__ = ["GlobError", "GlobSet"]

_WILDCARDS: Final = frozenset("*?")
# Stand-ins for the wildcards while a resource glob is checked for canonical form:
# private-use characters, which NFKC leaves alone and no reading treats as special.
_STAR: Final = "\ue000"
_QUESTION: Final = "\ue001"


class GlobError(ValueError):
    """A glob pattern is malformed (the policy loader re-raises it as `PolicyError`)."""


def _has_wildcard(text: str) -> bool:
    return not _WILDCARDS.isdisjoint(text)


class GlobSet:
    """The globs of one rule field, compiled: `matches` says whether any of them matches.

    Args:
        patterns: the globs, non-empty strings.
        resources: True for the resource dialect, False for names.
        field: what the texts are (``"agent"``, ``"verb"``, ``"resource"``),
            for the error a non-string text raises.
        fast: whether the common shapes use string operations (False sends
            every pattern through RE2; tests compare the two).

    Raises:
        GlobError: a pattern is not a non-empty string, holds a control
            character, has ``**`` inside a resource segment, is not in
            canonical form (resources), or RE2 rejects the compiled set.
    """

    __slots__ = (
        "_everything",
        "_exact",
        "_field",
        "_prefixes",
        "_regex",
        "_segment_prefixes",
        "_subtrees",
        "patterns",
    )

    def __init__(
        self, patterns: Sequence[str], *, resources: bool, field: str, fast: bool = True
    ) -> None:
        if isinstance(patterns, str) or not patterns:
            raise GlobError("globs come as a non-empty list of patterns")
        self.patterns = tuple(patterns)
        self._field = field
        self._everything = False
        exact: set[str] = set()
        prefixes: list[str] = []  # names: text starts with it
        segment_prefixes: list[str] = []  # resources: text starts with it, no '/' after
        subtrees: list[tuple[str, str]] = []  # resources: text is it, or below it
        general: list[str] = []
        for pattern in self.patterns:
            _check_pattern(pattern, resources=resources)
            head = pattern.rstrip("*")
            if not fast:
                general.append(pattern)
            elif not _has_wildcard(pattern):
                exact.add(pattern)
            elif (pattern == "**") if resources else not head:
                self._everything = True
            elif not resources and not _has_wildcard(head):
                prefixes.append(head)
            elif resources and pattern.endswith("/**") and not _has_wildcard(pattern[:-3]):
                subtrees.append((pattern[:-3], pattern[:-2]))
            elif resources and pattern == head + "*" and not _has_wildcard(head):
                segment_prefixes.append(head)
            else:
                general.append(pattern)
        self._exact = frozenset(exact)
        self._prefixes = tuple(prefixes)
        self._segment_prefixes = tuple(segment_prefixes)
        self._subtrees = tuple(subtrees)
        self._regex: Regex | None = None
        if general:
            translate = _resource_regex if resources else _name_regex
            alternatives = "|".join(translate(p) for p in general)
            try:
                self._regex = Regex(f"(?:{alternatives})", dot_nl=True)
            except RegexError as exc:
                raise GlobError(f"the globs cannot be compiled: {exc.detail}") from None

    def __repr__(self) -> str:
        return f"GlobSet({list(self.patterns)!r})"

    @property
    def literals(self) -> frozenset[str] | None:
        """The patterns as a set when none has a wildcard (what a verb index can use)."""
        if any(_has_wildcard(p) for p in self.patterns):
            return None
        return frozenset(self.patterns)

    def matches(self, text: str) -> bool:
        """Whether any glob matches all of ``text`` (a canonical resource, for resources).

        Raises:
            UnsupportedValue: ``text`` is not a ``str``, or not valid Unicode.
        """
        if type(text) is not str:
            raise UnsupportedValue(type(text).__name__, self._field, "not a string")
        if self._everything or text in self._exact:
            return True
        for head, below in self._subtrees:
            if text == head or text.startswith(below):
                return True
        for head in self._prefixes:
            if text.startswith(head):
                return True
        for head in self._segment_prefixes:
            if text.startswith(head) and text.find("/", len(head)) < 0:
                return True
        if self._regex is None:
            return False
        try:
            data = text.encode("utf-8")
        except UnicodeEncodeError:
            raise UnsupportedValue("str", self._field, "not valid Unicode text") from None
        return self._regex.fullmatch(data)


def _check_pattern(pattern: object, *, resources: bool) -> None:
    if not isinstance(pattern, str) or not pattern:
        raise GlobError("a glob must be a non-empty string")
    try:
        # A name is as free as a resource, but one that holds a control character or
        # a lone surrogate never reaches matching: such a glob could never match.
        check_characters(pattern, controls=True)
    except PathProblem as exc:
        raise GlobError(f"bad glob {pattern!r}: it {exc.problem}") from None
    if resources:
        _check_resource_pattern(pattern)


def _check_resource_pattern(pattern: str) -> None:
    for segment in pattern.split("/"):
        if "**" in segment and segment != "**":
            raise GlobError(f"bad glob {pattern!r}: '**' must be a whole segment between '/'")
    stand_in = pattern.replace("*", _STAR).replace("?", _QUESTION)
    try:
        canonical = canonical_path(stand_in, controls=True)
    except PathProblem as exc:
        raise GlobError(
            f"bad glob {pattern!r}: a resource that {exc.problem} is denied before any glob"
            " sees it, so this glob could never match"
        ) from None
    if canonical != stand_in:
        written = canonical.replace(_STAR, "*").replace(_QUESTION, "?")
        raise GlobError(
            f"bad glob {pattern!r}: resources are matched in canonical form ('//' collapsed,"
            f" '.' and '..' resolved, no trailing '/', percent escapes normalised), which"
            f" this glob is not, so it could never match; write {written!r}"
        )


def _name_regex(pattern: str) -> str:
    return "".join(".*" if c == "*" else "." if c == "?" else escape(c) for c in pattern)


def _segment_regex(segment: str) -> str:
    return "".join("[^/]*" if c == "*" else "[^/]" if c == "?" else escape(c) for c in segment)


def _resource_regex(pattern: str) -> str:
    segments: list[str] = []
    for segment in pattern.split("/"):
        if segment != "**" or not segments or segments[-1] != "**":
            segments.append(segment)  # `**/**` is `**`: any number of segments, twice

    if segments == ["**"]:
        return ".*"
    last = len(segments) - 1
    out: list[str] = []
    for index, segment in enumerate(segments):
        if segment == "**":
            # A `**` segment absorbs its neighbouring separators, so it can match zero segments.
            if index == 0:
                out.append("(?:.*/)?")
            elif index == last:
                out.append("(?:/.*)?")
            else:
                out.append("/(?:.*/)?")
            continue
        if index > 0 and segments[index - 1] != "**":
            out.append("/")
        out.append(_segment_regex(segment))
    return "".join(out)
