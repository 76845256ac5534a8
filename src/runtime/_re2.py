"""The few RE2 calls ghost makes, typed (google-re2 ships no type information).

RE2 runs in time linear in the input, whatever the pattern: no backtracking,
so no crafted argument or resource can make a glob or a ``match`` condition
slow (SPEC §4). Patterns are compiled once, when a policy is loaded.

Texts are passed as UTF-8 ``bytes``: google-re2's ``str`` API re-encodes the
whole text and maps every offset back on each call, which costs several times
the match itself. Callers encode once and may match the same bytes many times.
"""

from __future__ import annotations

from typing import Any

import re2

__all__ = ["Regex", "RegexError", "escape"]


class RegexError(ValueError):
    """A pattern RE2 cannot compile (unsupported syntax, or too large).

    Attributes:
        detail: RE2's description of the problem (about the pattern, never the text).
    """

    def __init__(self, detail: str) -> None:
        self.detail = detail
        super().__init__(detail)


class Regex:
    """One compiled RE2 pattern, matched against UTF-8 bytes.

    Args:
        pattern: RE2 syntax (https://github.com/google/re2/wiki/Syntax).
        dot_nl: whether ``.`` also matches a newline.

    Raises:
        RegexError: RE2 rejects the pattern.
    """

    __slots__ = ("_compiled", "pattern")

    def __init__(self, pattern: str, *, dot_nl: bool = False) -> None:
        self.pattern = pattern
        options: Any = re2.Options()
        # RE2 would log a rejected pattern to stderr itself; the library stays silent.
        options.log_errors = False
        # Callers only ask whether there is a match: no submatch bookkeeping.
        options.never_capture = True
        options.dot_nl = dot_nl
        try:
            self._compiled: Any = re2.compile(pattern, options)
        except re2.error as exc:
            detail = exc.args[0] if exc.args else "rejected by RE2"
            if isinstance(detail, bytes):
                detail = detail.decode("utf-8", "replace")
            raise RegexError(str(detail)) from None
        except UnicodeEncodeError:
            raise RegexError("the pattern is not valid Unicode text") from None

    def __repr__(self) -> str:
        return f"Regex({self.pattern!r})"

    def search(self, data: bytes) -> bool:
        """Whether the pattern matches anywhere in ``data`` (UTF-8)."""
        return self._compiled.search(data) is not None

    def fullmatch(self, data: bytes) -> bool:
        """Whether the pattern matches all of ``data`` (UTF-8)."""
        return self._compiled.fullmatch(data) is not None


def escape(text: str) -> str:
    """``text`` as an RE2 pattern that matches exactly that text."""
    escaped: str = re2.escape(text)
    return escaped
