"""Text from a run, made safe to print: one line, every non-printable character escaped.

Agents choose their names, verbs and resources, and a file's records and paths
may be anyone's: printed as they are, a control sequence would rewrite the
user's terminal, a bidirectional override reorder what they read, a newline
forge a line of output. Every command prints such text through `printable`.
"""

from __future__ import annotations

__all__ = ["printable"]


def printable(text: str, *, limit: int | None = None) -> str:
    """Return ``text`` with each non-printable character escaped, cut after ``limit`` characters.

    Args:
        text: what to show.
        limit: the most characters shown before an ellipsis (None: all).
    """
    if limit is not None and len(text) > limit:
        text = text[:limit] + "…"
    if text.isprintable():
        return text
    return "".join(
        char if char.isprintable() else char.encode("unicode_escape").decode("ascii")
        for char in text
    )
