"""C2SP signed notes and tlog checkpoints, byte-exact (c2sp.org/signed-note, /tlog-checkpoint).

A checkpoint note, as ghost writes it::

    ghost.run/<run_id>
    <tree size, decimal>
    <root hash, standard base64>

    — <key name> <base64(4-byte key hash ‖ 64-byte Ed25519 signature)>

The rules this module holds (each pinned by a test; Go's
``golang.org/x/mod/sumdb/note`` is the reference implementation):

1. The **text** is the checkpoint body: exactly three non-empty lines, each
   ending in ``\\n`` — origin, tree size (ASCII decimal, no leading zero
   unless 0, at most 2**63 - 1), root hash (standard base64 of 32 bytes, in
   its canonical spelling, ``=`` padding included). ghost writes no
   extension lines and accepts none: a note ghost reads is one ghost could
   have written, byte for byte.
2. A **signed** note is the text, a blank line (``\\n``), then one line per
   signature: em dash U+2014, space, key name, space, base64 of the key hash
   and the signature, ``\\n``. The signature is over the text exactly
   (its final newline included, the blank line not).
3. An **unsigned** note (a run without a signing key) is the text alone:
   no blank line, no signature line. It can be anchored, not authenticated.
4. A note is valid UTF-8 with no control character but ``\\n``, at most
   64 KiB, with at most 100 signatures; anything else is refused whole.
5. Verifying against known keys (`verify_note`), as C2SP requires: a
   signature whose key name and key hash match no known key is ignored
   (reported in `NoteVerification.unknown`); one that matches a known key
   must verify, or the whole note is rejected; and a note with no verified
   signature by a known key is rejected.

Pure: strings and bytes in, values or `NoteError` out; no I/O.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from audit._errors import NoteError
from audit._merkle import HASH_SIZE
from audit._signing import NoteSigner, NoteVerifier, check_key_name, strict_b64decode

__all__ = [
    "MAX_NOTE_BYTES",
    "MAX_NOTE_SIGNATURES",
    "SIGNATURE_LINE_PREFIX",
    "Checkpoint",
    "Note",
    "NoteSignature",
    "NoteVerification",
    "format_note",
    "parse_checkpoint",
    "parse_note",
    "verify_note",
]

SIGNATURE_LINE_PREFIX: Final = "\u2014 "
"""What opens every signature line: an em dash (U+2014) and a space."""

MAX_NOTE_BYTES: Final = 64 * 1024
"""The largest note accepted (a ghost checkpoint note is under 300 bytes)."""

MAX_NOTE_SIGNATURES: Final = 100
"""The most signature lines accepted (C2SP: at least 16 must be)."""

_INT64_MAX: Final = 2**63 - 1
_DIGITS: Final = frozenset("0123456789")
_KEY_HASH_SIZE: Final = 4


@dataclass(frozen=True, slots=True)
class NoteSignature:
    """One signature line of a note.

    Attributes:
        name: the key name.
        key_hash: the 4-byte key hash the signature opens with.
        signature: the signature bytes after the key hash (64 for Ed25519).
    """

    name: str
    key_hash: bytes
    signature: bytes

    @property
    def line(self) -> str:
        """The signature line exactly as written, newline included."""
        encoded = base64.b64encode(self.key_hash + self.signature).decode()
        return f"{SIGNATURE_LINE_PREFIX}{self.name} {encoded}\n"


@dataclass(frozen=True, slots=True)
class Note:
    """A parsed note: its signed text and its signature lines (none when unsigned).

    Attributes:
        text: the text the signatures cover, ending in ``\\n``.
        signatures: the signature lines, in order.
    """

    text: str
    signatures: tuple[NoteSignature, ...]

    def __str__(self) -> str:
        """The note exactly as written."""
        if not self.signatures:
            return self.text
        return self.text + "\n" + "".join(signature.line for signature in self.signatures)


@dataclass(frozen=True, slots=True)
class NoteVerification:
    """What `verify_note` found: signatures verified by known keys, and the rest.

    Attributes:
        verified: the signatures made by a known key, each checked.
        unknown: signatures by keys not known to the caller (ignored, as C2SP says).
    """

    verified: tuple[NoteSignature, ...]
    unknown: tuple[NoteSignature, ...]


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """A C2SP ``tlog-checkpoint`` body: which log, how many leaves, what root.

    Attributes:
        origin: the log's identity (``ghost.run/<run_id>``).
        tree_size: the number of leaves (records ``seq`` 0 … ``tree_size`` - 1).
        root_hash: the 32-byte RFC 6962 root of those leaves.
    """

    origin: str
    tree_size: int
    root_hash: bytes

    def text(self) -> str:
        """Return the note text: origin, size and base64 root, one line each."""
        root = base64.b64encode(self.root_hash).decode()
        return f"{self.origin}\n{self.tree_size}\n{root}\n"


def format_note(text: str, signers: Sequence[NoteSigner] = ()) -> str:
    """Return ``text`` as a note signed by each of ``signers`` (unsigned when there are none).

    Raises:
        NoteError: ``text`` is not a valid note text (empty, not ending in a
            newline, with a blank line, a control character, or not UTF-8).
    """
    encoded = _check_text(text)
    if _has_blank_line(text):
        raise NoteError("a note text must not contain a blank line")
    lines = []
    for signer in signers:
        signature = NoteSignature(
            name=signer.name, key_hash=signer.key_hash, signature=signer.sign(encoded)
        )
        lines.append(signature.line)
    if not lines:
        return text
    return text + "\n" + "".join(lines)


def parse_note(note: str) -> Note:
    """Parse a note strictly (rules 2-4 of the module docstring); signatures are not checked.

    Returns:
        The text and its signature lines; no signatures for an unsigned note.

    Raises:
        NoteError: the note breaks any rule; the message says which, without
            quoting the note.
    """
    if not isinstance(note, str):
        raise NoteError(f"a note is text, not {type(note).__name__}")
    _check_text(note)
    split = note.rfind("\n\n")
    if split < 0:
        return Note(text=note, signatures=())
    text, block = note[: split + 1], note[split + 2 :]
    if not block:
        raise NoteError("a blank line must be followed by at least one signature line")
    lines = block[:-1].split("\n")
    if len(lines) > MAX_NOTE_SIGNATURES:
        raise NoteError(f"more than {MAX_NOTE_SIGNATURES} signature lines")
    return Note(text=text, signatures=tuple(_parse_signature(line) for line in lines))


def verify_note(note: Note, verifiers: Sequence[NoteVerifier]) -> NoteVerification:
    """Check ``note``'s signatures against the known keys ``verifiers`` (rule 5).

    Returns:
        Which signatures verified, and which were by unknown keys.

    Raises:
        NoteError: a signature by a known key does not verify, two different
            known keys share one name and key hash, or no known key signed.
    """
    known: dict[tuple[str, bytes], NoteVerifier] = {}
    for verifier in verifiers:
        slot = (verifier.name, verifier.key_hash)
        previous = known.setdefault(slot, verifier)
        if previous.public_key != verifier.public_key:
            raise NoteError(
                f"two different known keys are both named {verifier.name!r}"
                f" with key hash {verifier.key_hash.hex()}"
            )
    text = note.text.encode()
    verified: list[NoteSignature] = []
    unknown: list[NoteSignature] = []
    for signature in note.signatures:
        match = known.get((signature.name, signature.key_hash))
        if match is None:
            unknown.append(signature)
        elif match.verify(text, signature.signature):
            verified.append(signature)
        else:
            raise NoteError(
                f"the signature by {signature.name} (key hash {signature.key_hash.hex()})"
                " does not verify: the note was altered or signed with another key"
            )
    if not verified:
        names = ", ".join(sorted({verifier.name for verifier in known.values()})) or "none"
        raise NoteError(f"no signature by a known key (known: {names})")
    return NoteVerification(verified=tuple(verified), unknown=tuple(unknown))


def parse_checkpoint(text: str) -> Checkpoint:
    """Parse a checkpoint body strictly (rule 1 of the module docstring).

    Args:
        text: a note's text (`Note.text`), final newline included.

    Raises:
        NoteError: it is not exactly three lines of origin, size and root.
    """
    if not isinstance(text, str) or not text.endswith("\n"):
        raise NoteError("a checkpoint text ends with a newline")
    lines = text[:-1].split("\n")
    if len(lines) != 3:
        raise NoteError(
            f"a checkpoint text is exactly three lines (origin, size, root), not {len(lines)}"
        )
    origin, size_text, root_text = lines
    try:
        check_key_name(origin)
    except ValueError:
        raise NoteError(
            "the checkpoint origin must be non-empty, without spaces, '+' or control characters"
        ) from None
    if not size_text or not set(size_text) <= _DIGITS or (size_text[0] == "0" and size_text != "0"):
        raise NoteError("the tree size must be a decimal number without leading zeros")
    tree_size = int(size_text)
    if tree_size > _INT64_MAX:
        raise NoteError("the tree size is beyond the signed 64-bit range")
    root = strict_b64decode(root_text)
    if root is None or len(root) != HASH_SIZE:
        raise NoteError(f"the root hash must be the canonical standard base64 of {HASH_SIZE} bytes")
    return Checkpoint(origin=origin, tree_size=tree_size, root_hash=root)


def _check_text(text: str) -> bytes:
    """Check the note-wide rules (rule 4, and a final newline); return the UTF-8 bytes."""
    if not text:
        raise NoteError("a note is empty")
    # Checked before encoding too: a huge string is refused without copying it.
    if len(text) > MAX_NOTE_BYTES:
        raise NoteError(f"a note is at most {MAX_NOTE_BYTES} bytes")
    try:
        encoded = text.encode("utf-8")
    except UnicodeEncodeError:
        raise NoteError("a note must be valid UTF-8 (it holds a lone surrogate)") from None
    if len(encoded) > MAX_NOTE_BYTES:
        raise NoteError(f"a note is at most {MAX_NOTE_BYTES} bytes")
    if any(char < " " and char != "\n" for char in text):
        raise NoteError("a note must not contain control characters other than newline")
    if not text.endswith("\n"):
        raise NoteError("a note ends with a newline")
    return encoded


def _has_blank_line(text: str) -> bool:
    return text.startswith("\n") or "\n\n" in text


def _parse_signature(line: str) -> NoteSignature:
    if not line.startswith(SIGNATURE_LINE_PREFIX):
        raise NoteError("a signature line starts with an em dash (U+2014) and a space")
    name, separator, encoded = line[len(SIGNATURE_LINE_PREFIX) :].partition(" ")
    try:
        check_key_name(name)
    except ValueError:
        raise NoteError("a signature line's key name is empty or holds a space or '+'") from None
    raw = strict_b64decode(encoded) if separator else None
    if raw is None or len(raw) <= _KEY_HASH_SIZE:
        raise NoteError(
            "a signature is the canonical standard base64 of a 4-byte key hash and a signature"
        )
    return NoteSignature(name=name, key_hash=raw[:_KEY_HASH_SIZE], signature=raw[_KEY_HASH_SIZE:])
