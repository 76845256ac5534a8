"""Glob patterns for a rule's agents, verbs and resources, compiled once.

Segments are separated by ``/``. ``*`` matches within a segment, ``?`` one
character of a segment, and ``**`` — which must be a whole segment — any
number of segments, none included (``file:/data/**`` matches ``file:/data``).
Everything else is literal.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

__all__ = ["GlobError", "compile_globs"]


class GlobError(ValueError):
    """A glob pattern is malformed (re-raised by the policy loader as `PolicyError`)."""


def _segment_regex(segment: str, pattern: str) -> str:
    if "**" in segment:
        raise GlobError(f"bad glob {pattern!r}: '**' must be a whole segment between '/'")
    out: list[str] = []
    for char in segment:
        if char == "*":
            out.append("[^/]*")
        elif char == "?":
            out.append("[^/]")
        else:
            out.append(re.escape(char))
    return "".join(out)


def _glob_regex(pattern: str) -> str:
    if not isinstance(pattern, str) or not pattern:
        raise GlobError("a glob must be a non-empty string")
    segments = pattern.split("/")
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
        out.append(_segment_regex(segment, pattern))
    return "".join(out)


def compile_globs(patterns: Sequence[str]) -> re.Pattern[str]:
    """Compile a list of globs into one anchored regex that matches if any glob does.

    Raises:
        GlobError: a pattern is empty, not a string, or uses ``**`` inside a segment.
    """
    alternatives = [_glob_regex(p) for p in patterns]
    return re.compile("(?:" + "|".join(alternatives) + r")\Z", re.DOTALL)
