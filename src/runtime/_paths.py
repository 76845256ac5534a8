"""Path text: the one way ghost reads a ``/``-separated path before judging it (ADR 0009).

Two things are judged by their path: an action's resource, before glob
matching (`runtime._resource`), and an argument that ``narrow.within``
confines (`runtime._narrowing`). Both are read here, the same way:

1. **Root.** A text that starts with ``scheme://authority`` keeps that as its
   root, as written. Otherwise the root is the text before the first ``/``
   (``file:`` in ``file:/data/x``; empty in ``/data/x``; all of ``db:orders``).
2. **Segments.** The rest is split on ``/``. Empty segments (repeated ``/``, a
   trailing ``/``) and ``.`` are dropped; ``..`` removes the segment before it.
   A path that keeps no segment is its root alone (``file:/data/..`` is
   ``file:``), except that the root directory ``/`` stays ``/``.
3. **Refusal.** Wherever another reader — a filesystem, a URL parser, a web
   server, Windows — could resolve the text to something else, it is refused
   with `PathProblem` instead of guessed at:

   * a ``..`` above the root, or a root that is itself ``.`` or ``..``
     (``../x``, ``file:..``);
   * a backslash (a separator on Windows, an escape elsewhere);
   * a percent escape of ``.``, ``/``, ``\\`` or a control character; escapes
     that decode to bytes that are not UTF-8 (the overlong ``%c0%ae``); text
     that still holds an escape once decoded (double encoding: ``%252e``,
     ``%%32e``). Escapes of unreserved characters (RFC 3986: letters, digits,
     ``-_~``) are decoded and other escapes get uppercase hex, so ``%41`` and
     ``A`` are one resource;
   * a compatibility character that NFKC folds into ``/ \\ % ? # ;`` or into a
     dot segment (fullwidth solidus U+FF0F, two-dot leader U+2025);
   * a segment made only of dots and spaces other than ``.`` and ``..``
     (Windows trims trailing dots and spaces), or ``.``/``..`` before a ``;``,
     ``?`` or ``#`` (``..;`` is ``..`` to some servers);
   * a ``.`` or ``..`` segment after a ``?`` or ``#``: a URL reader leaves it in
     the query, a path reader resolves it.

   Every reading of the text (as written, with escapes normalised, decoded
   once, NFKC-folded) must resolve to the same segments.

Each step is a single pass over the text: time is linear in its length.
"""

from __future__ import annotations

import re
import string
import unicodedata
from typing import Final

__all__ = ["PathProblem", "canonical_path", "check_characters", "check_prefix", "confine_path"]

CLIMBS: Final = "climbs above its root"
DOT_ROOT: Final = "starts with a '.' or '..' segment"
DOTLIKE: Final = (
    "holds a segment of dots and spaces other than '.' and '..' (or one before"
    " ';', '?' or '#'), which tools read differently"
)
QUERY_DOT: Final = "holds a '.' or '..' segment after a '?' or '#', which tools read differently"
BACKSLASH: Final = "holds a backslash"
ESCAPED_SEPARATOR: Final = "holds a percent-encoded '.', '/' or '\\'"
ESCAPED_CONTROL: Final = "holds a percent-encoded control character"
NOT_UTF8: Final = "percent-encodes bytes that are not UTF-8 text (an overlong '.' or '/')"
DOUBLE_ENCODED: Final = "is percent-encoded more than once"
READS_DIFFERENTLY: Final = "resolves to other segments once percent-decoded"
LOOKALIKE: Final = (
    "holds a compatibility form (such as fullwidth) of '/', '\\', '%', '?', '#' or ';'"
)
DOT_LOOKALIKE: Final = "holds a compatibility form (such as fullwidth) of a '.' or '..' segment"
CONTROL: Final = "holds a control character"
SURROGATE: Final = "is not valid Unicode text (a lone surrogate)"
NUL: Final = "holds a NUL byte"
LEADING_SLASHES: Final = "starts with '//'"
TILDE: Final = "starts with '~' (a home directory to a shell)"
OUTSIDE: Final = "resolves to a path outside it"

# RFC 3986 scheme, then "//" and the authority up to the next "/".
_AUTHORITY: Final = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://[^/]*")
_ESCAPE: Final = re.compile(r"%([0-9A-Fa-f]{2})")
_ESCAPE_BYTES: Final = re.compile(rb"%([0-9A-Fa-f]{2})")
_CONTROLS_OR_SURROGATES: Final = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff]")
_SURROGATES: Final = re.compile("[\ud800-\udfff]")
_UNRESERVED: Final = frozenset(string.ascii_letters + string.digits + "-_~")
_FORBIDDEN_ESCAPES: Final = frozenset(b"./\\")
# Characters whose NFKC lookalikes change how a path splits or reads.
_STRUCTURAL: Final = "/\\%?#;"

# How a text resolves: (parts that form the root, indices of the parts kept).
Shape = tuple[int, tuple[int, ...]]


class PathProblem(ValueError):
    """A path text that another reader could resolve differently; callers re-raise it typed.

    Attributes:
        problem: a fixed phrase that completes "it ..." ("climbs above its root").
    """

    def __init__(self, problem: str) -> None:
        self.problem = problem
        super().__init__(problem)


def canonical_path(text: str, *, controls: bool) -> str:
    """Return the canonical reading of ``text`` (see the module docstring).

    Args:
        text: a resource or an absolute path.
        controls: whether any control character is refused (resources), or
            only NUL (argument paths, where POSIX allows the rest).

    Raises:
        PathProblem: the text is ambiguous or climbs above its root.
    """
    check_characters(text, controls=controls)
    if "\\" in text:
        raise PathProblem(BACKSLASH)
    normalised = decoded = text
    if "%" in text:
        normalised, decoded = _normalise_escapes(text)
    canonical, shape = _resolve(normalised)
    if "%" in text:
        for reading in (text, decoded):
            if reading != normalised:
                try:
                    other = _resolve(reading)[1]
                except PathProblem:
                    raise PathProblem(READS_DIFFERENTLY) from None
                if other != shape:
                    raise PathProblem(READS_DIFFERENTLY)
    _check_lookalikes(decoded, shape)
    return canonical


def confine_path(value: str, prefix: str) -> str:
    """Return ``value`` as a canonical absolute path under ``prefix``.

    A relative ``value`` is taken under ``prefix``. The result is ``prefix``
    itself or a path below it, whatever ``value`` holds.

    Args:
        value: the argument's text.
        prefix: a canonical absolute path (`check_prefix`).

    Raises:
        PathProblem: ``value`` holds a NUL byte, starts with ``//`` or ``~``,
            is ambiguous (`canonical_path`), or resolves outside ``prefix``.
    """
    if value.startswith("//"):
        raise PathProblem(LEADING_SLASHES)  # POSIX leaves '//' to the implementation
    if value.startswith("~") or value[:3].upper() == "%7E":
        raise PathProblem(TILDE)
    # A relative value is taken under the prefix ('//x' under '/' resolves to '/x').
    joined = value if value.startswith("/") else f"{prefix}/{value}"
    resolved = canonical_path(joined, controls=False)
    if resolved == prefix or resolved.startswith("/" if prefix == "/" else prefix + "/"):
        return resolved
    raise PathProblem(OUTSIDE)


def check_prefix(prefix: str) -> str | None:
    """Why ``prefix`` cannot be a ``within`` directory, or None when it can.

    A prefix is an absolute path in canonical form (``/data/public``, not
    ``/data/public/`` or ``/data/./public``), so that containment is a plain
    comparison of canonical texts.
    """
    if not prefix.startswith("/") or prefix.startswith("//"):
        return "must be an absolute path, starting with a single '/'"
    try:
        canonical = canonical_path(prefix, controls=True)
    except PathProblem as exc:
        return f"cannot be used: it {exc.problem}"
    if canonical != prefix:
        return f"must be in canonical form: write {canonical!r}"
    return None


def check_characters(text: str, *, controls: bool) -> None:
    """Refuse a lone surrogate, and control characters (all, or only NUL).

    Raises:
        PathProblem: such a character is in ``text``.
    """
    if controls:
        hit = _CONTROLS_OR_SURROGATES.search(text)
        if hit is not None:
            raise PathProblem(CONTROL if _SURROGATES.match(hit.group()) is None else SURROGATE)
    elif _SURROGATES.search(text) is not None:
        raise PathProblem(SURROGATE)
    elif "\x00" in text:
        raise PathProblem(NUL)


def _normalise_escapes(text: str) -> tuple[str, str]:
    """(``text`` with its escapes in canonical form, ``text`` percent-decoded once)."""
    for match in _ESCAPE.finditer(text):
        byte = int(match.group(1), 16)
        if byte in _FORBIDDEN_ESCAPES:
            raise PathProblem(ESCAPED_SEPARATOR)
        if byte < 0x20 or byte == 0x7F:
            raise PathProblem(ESCAPED_CONTROL)
    try:
        decoded = _ESCAPE_BYTES.sub(_escaped_byte, text.encode("utf-8")).decode("utf-8")
    except UnicodeDecodeError:
        raise PathProblem(NOT_UTF8) from None
    # What a second decoding would change is a way past any check made on one decoding.
    if _ESCAPE.search(decoded) is not None:
        raise PathProblem(DOUBLE_ENCODED)
    return _ESCAPE.sub(_canonical_escape, text), decoded


def _escaped_byte(match: re.Match[bytes]) -> bytes:
    return bytes.fromhex(match.group(1).decode("ascii"))


def _canonical_escape(match: re.Match[str]) -> str:
    hex_digits = match.group(1)
    char = chr(int(hex_digits, 16))
    return char if char in _UNRESERVED else "%" + hex_digits.upper()


def _check_lookalikes(text: str, shape: Shape) -> None:
    if text.isascii() or unicodedata.is_normalized("NFKC", text):
        return
    folded = unicodedata.normalize("NFKC", text)
    # NFKC never removes one of these ASCII characters (no canonical composition
    # starts with one; a test checks this over all of Unicode), so a higher count
    # means that a lookalike was folded into one.
    if any(folded.count(char) != text.count(char) for char in _STRUCTURAL):
        raise PathProblem(LOOKALIKE)
    try:
        folded_shape = _resolve(folded)[1]
    except PathProblem:
        raise PathProblem(DOT_LOOKALIKE) from None
    if folded_shape != shape:
        raise PathProblem(DOT_LOOKALIKE)


def _is_dotlike(segment: str) -> bool:
    """Whether a segment is made of dots and spaces up to its first ``;``, ``?`` or ``#``."""
    if segment[:1] not in (".", " "):
        return False  # the common case, decided by the first character
    end = len(segment)
    for stop in ";?#":
        at = segment.find(stop)
        if 0 <= at < end:
            end = at
    head = segment[:end]
    return bool(head) and not head.strip(". ")


def _resolve(text: str) -> tuple[str, Shape]:
    parts = text.split("/")
    authority = _AUTHORITY.match(text)
    if authority is not None:
        root_parts = 3  # "scheme:", "", "authority"
        tail = parts[2]
    else:
        root_parts = 1
        tail = parts[0].rpartition(":")[2]
    if _is_dotlike(tail):
        raise PathProblem(DOT_ROOT if tail in (".", "..") else DOTLIKE)
    root = "/".join(parts[:root_parts])
    if len(parts) == root_parts:
        return root, (root_parts, ())  # no path after the root: nothing to resolve
    rest = text[len(root) :]
    if "/." not in rest and "/ " not in rest and "//" not in rest and rest[-1] != "/":
        # The common case: no empty segment, and none that starts with a dot or a
        # space (which every dot segment and dot-like one does): all are kept.
        return text, (root_parts, tuple(range(root_parts, len(parts))))
    in_query = "?" in root or "#" in root
    kept: list[int] = []
    for index in range(root_parts, len(parts)):
        segment = parts[index]
        if segment in (".", ".."):
            if in_query:
                raise PathProblem(QUERY_DOT)
            if segment == "..":
                if not kept:
                    raise PathProblem(CLIMBS)
                kept.pop()
        elif segment:
            if _is_dotlike(segment):
                raise PathProblem(DOTLIKE)
            kept.append(index)
            in_query = in_query or "?" in segment or "#" in segment
    # A trailing '/' is dropped like any empty segment; only the root directory
    # itself ('/', '//', '/a/..') keeps one, since '' is the empty resource.
    canonical = root + "/" + "/".join([parts[i] for i in kept]) if kept else root or "/"
    return canonical, (root_parts, tuple(kept))
