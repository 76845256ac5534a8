"""Text that goes into the audit log from outside: scrubbed, escaped, bounded (SPEC §3-§4).

An attacker controls an action's agent, verb and resource, the keys of its
arguments, and -- through the types it sends -- the type names that appear in
a deny's reason. All of it reaches the log only through `RecordedText`:

1. **Bounded.** A name longer than the gate's ``max_name_chars`` is recorded
   as a placeholder stating its length: the gate denied it without reading
   it, and the log does not read it either.
2. **Scrubbed by every detector**, whatever the policy's ``[scrub]`` list
   says (policy matching uses the originals): ``mail:{to}`` carries an address,
   and a resource can carry a key. Scrubbing runs on the raw text, before
   escaping, so that an escape can never glue a secret to its neighbours and
   hide it from a detector.
3. **Escaped.** Control characters (C0, DEL, C1), lone surrogates and
   bidirectional overrides/isolates become ``\\uXXXX``. A lone surrogate or a
   NUL is therefore never a reason for a record to be unwritable, and an
   attempt can never keep itself out of the log.

A value that is not a string is recorded by its (scrubbed, escaped, bounded)
type name. Nothing here raises.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Final

__all__ = ["RecordedText", "escape", "type_name"]

_ESCAPED: Final = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff\u202a-\u202e\u2066-\u2069]")
_MAX_TYPE_NAME: Final = 80


def _escape_match(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def escape(text: str) -> str:
    """Return ``text`` with control characters, lone surrogates and bidi controls as ``\\uXXXX``."""
    return _ESCAPED.sub(_escape_match, text)


def type_name(value: object) -> str:
    """The name of ``value``'s type, as plain text of at most 80 characters.

    A class can be named anything (a secret, megabytes, a ``str`` subclass);
    this reads the name without running any of the value's code.
    """
    name = type.__dict__["__name__"].__get__(type(value))
    text = str.__str__(name) if isinstance(name, str) else "?"
    return text if len(text) <= _MAX_TYPE_NAME else text[: _MAX_TYPE_NAME - 3] + "..."


class RecordedText:
    """Turns outside text into what the log may hold.

    Args:
        redact: the scrubber's redaction by every detector; must accept any
            ``str`` (lone surrogates included). If it raises, the text is
            recorded as a placeholder that states only its length.
        max_chars: longer text is recorded as a placeholder stating its length.
    """

    __slots__ = ("_max_chars", "_redact")

    def __init__(self, redact: Callable[[str], str], *, max_chars: int) -> None:
        self._redact = redact
        self._max_chars = max_chars

    def __call__(self, value: object) -> str:
        """Return the recordable form of ``value`` (never raises)."""
        if not isinstance(value, str):
            return f"<not a string: {self(type_name(value))}>"
        text = str.__str__(value)
        if len(text) > self._max_chars:
            return f"<{len(text)} characters, not recorded: longer than {self._max_chars}>"
        try:
            redacted = self._redact(text)
        except Exception:  # noqa: BLE001 - a log entry must never fail; keep only the size
            return f"<{len(text)} characters, not recorded: they could not be scrubbed>"
        return escape(redacted)
