"""``/checkpoints`` records: what each holds, when one is due, and how a reader checks one.

A checkpoint record (``ghost.checkpoint/1``) commits to every record before
it, in two ways at once:

* ``tree_size`` — the records ``seq`` 0 … ``tree_size`` - 1 it covers. ghost's
  writer always covers *every* record before the checkpoint, so a
  checkpoint's ``tree_size`` equals its own ``seq``, and its ``head_sha256``
  (the content address of record ``tree_size`` - 1) equals its
  ``prev_sha256``;
* ``root_hash`` — the RFC 6962 root of those records (`audit._merkle`), hex;
* ``note`` — the same tree head as a C2SP checkpoint note (`audit._note`)
  with origin ``ghost.run/<run_id>``, signed when the sink has a key.

The schedule (SPEC §5), which `CheckpointSchedule` decides:

1. right after the ``/run`` record (``tree_size`` 1);
2. after a record that brings the count of records since the last
   checkpoint (that checkpoint not counted) to ``every_records`` (default 100);
3. after a record that arrives ``every_ns`` (default 1 s) or more after the
   last checkpoint, on the sink's monotonic clock. Time is looked at only
   when a record arrives: a sink never wakes up on its own, so an idle run
   writes nothing until its next record or its seal;
4. at close, immediately before the seal — always, even right after another
   checkpoint — so the record before every seal is a checkpoint covering
   everything before it.

Outside the file, every checkpoint note is also emitted as an anchor
(`audit._anchor`).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from audit._errors import NoteError
from audit._note import (
    MAX_NOTE_BYTES,
    Checkpoint,
    Note,
    NoteVerification,
    format_note,
    parse_checkpoint,
    parse_note,
    verify_note,
)
from audit._signing import NoteSigner, NoteVerifier
from runtime import Clock

__all__ = [
    "CHECKPOINT_SCHEMA",
    "ORIGIN_PREFIX",
    "CheckpointNote",
    "CheckpointSchedule",
    "checkpoint_origin",
    "load_checkpoint_note",
    "make_checkpoint_note",
    "make_checkpoint_record",
    "parse_checkpoint_note",
]

CHECKPOINT_SCHEMA: Final = "ghost.checkpoint/1"
ORIGIN_PREFIX: Final = "ghost.run/"
"""A run's checkpoint origin is this followed by its ``run_id``."""


def checkpoint_origin(run_id: str) -> str:
    """Return the checkpoint origin (first note line) of run ``run_id``."""
    return ORIGIN_PREFIX + run_id


def make_checkpoint_note(
    run_id: str, tree_size: int, root_hash: bytes, signer: NoteSigner | None
) -> str:
    """Return the checkpoint note of a run's tree head: signed by ``signer``, or unsigned.

    Raises:
        NoteError: the fields do not make a valid checkpoint text.
    """
    text = Checkpoint(checkpoint_origin(run_id), tree_size, root_hash).text()
    # Parsed back before signing: a note ghost writes is one its own reader accepts.
    parse_checkpoint(text)
    return format_note(text, () if signer is None else (signer,))


def make_checkpoint_record(
    *,
    stamp_ns: int,
    run_id: str,
    tree_size: int,
    root_hash: bytes,
    head_sha256: str,
    signer: NoteSigner | None,
) -> dict[str, Any]:
    """Return a ``ghost.checkpoint/1`` record without ``seq``/``prev_sha256``.

    Args:
        stamp_ns: the wall-clock stamp.
        run_id: the run's id (the note's origin).
        tree_size: how many records, from ``seq`` 0, the checkpoint covers.
        root_hash: their RFC 6962 root (32 bytes).
        head_sha256: the content address of record ``tree_size`` - 1.
        signer: the sink's note signer, or None for an unsigned note.
    """
    return {
        "schema": CHECKPOINT_SCHEMA,
        "stamp_ns": stamp_ns,
        "tree_size": tree_size,
        "root_hash": root_hash.hex(),
        "head_sha256": head_sha256,
        "note": make_checkpoint_note(run_id, tree_size, root_hash, signer),
    }


@dataclass(frozen=True, slots=True)
class CheckpointNote:
    """A checkpoint note, parsed: its tree head and its signature lines.

    Attributes:
        checkpoint: origin, tree size and root hash.
        note: the text and the signature lines (none when unsigned).
    """

    checkpoint: Checkpoint
    note: Note

    @property
    def run_id(self) -> str | None:
        """The run id the origin names, or None if the origin is not ``ghost.run/…``."""
        origin = self.checkpoint.origin
        return origin[len(ORIGIN_PREFIX) :] if origin.startswith(ORIGIN_PREFIX) else None

    def verify(self, verifiers: Sequence[NoteVerifier]) -> NoteVerification:
        """Check the signatures against known keys (see `audit._note.verify_note`).

        Raises:
            NoteError: a known key's signature fails, or no known key signed.
        """
        return verify_note(self.note, verifiers)


def parse_checkpoint_note(note: str) -> CheckpointNote:
    """Parse a checkpoint note strictly: the note's form, then its three-line text.

    Signatures are parsed, not checked: call `CheckpointNote.verify`.

    Raises:
        NoteError: the note is not a ghost checkpoint note, byte for byte.
    """
    parsed = parse_note(note)
    return CheckpointNote(checkpoint=parse_checkpoint(parsed.text), note=parsed)


def load_checkpoint_note(path: str | os.PathLike[str]) -> CheckpointNote:
    """Read an anchor file (``ghost verify --anchor NOTE_FILE``) and parse its note.

    The file holds one note exactly as emitted (the ``note`` field of a
    ``ghost.checkpoint`` event), UTF-8, nothing before or after it.

    Raises:
        NoteError: the file is missing, unreadable, too large, not UTF-8, or
            not a checkpoint note (``NoteError.path`` names the file).
    """
    source = Path(os.fspath(path))
    try:
        with source.open("rb") as stream:
            data = stream.read(MAX_NOTE_BYTES + 1)
    except FileNotFoundError:
        raise NoteError("there is no such file", path=source) from None
    except IsADirectoryError:
        raise NoteError("it is a directory, not a note file", path=source) from None
    except OSError as exc:
        raise NoteError(f"it cannot be read ({exc.strerror or exc})", path=source) from None
    if len(data) > MAX_NOTE_BYTES:
        raise NoteError(f"it is larger than {MAX_NOTE_BYTES} bytes", path=source)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise NoteError("it is not UTF-8 text", path=source) from None
    try:
        return parse_checkpoint_note(text)
    except NoteError as exc:
        raise NoteError(exc.problem, path=source) from None


class CheckpointSchedule:
    """Decides when the next checkpoint is due (rules 2 and 3 of the module docstring).

    Args:
        every_records: write one once this many records follow the last checkpoint.
        every_ns: write one after a record that arrives this long after the
            last checkpoint (monotonic clock); 0 means after every record.
        clock: the monotonic clock read (`runtime.Clock`).

    Raises:
        ValueError: ``every_records`` below 1 or ``every_ns`` below 0.
    """

    __slots__ = ("_clock", "_every_ns", "_every_records", "_last_end", "_last_ns")

    def __init__(self, *, every_records: int, every_ns: int, clock: Clock) -> None:
        if isinstance(every_records, bool) or not isinstance(every_records, int):
            raise TypeError("checkpoint_every_records must be an integer")
        if isinstance(every_ns, bool) or not isinstance(every_ns, int):
            raise TypeError("checkpoint_every_ns must be an integer")
        if every_records < 1:
            raise ValueError(f"checkpoint_every_records must be at least 1, got {every_records}")
        if every_ns < 0:
            raise ValueError(f"checkpoint_every_ns must not be negative, got {every_ns}")
        self._every_records = every_records
        self._every_ns = every_ns
        self._clock = clock
        self._last_end = 0
        self._last_ns = clock.monotonic_ns()

    def written(self, tree_size: int) -> None:
        """Note that a checkpoint was committed; ``tree_size`` counts it."""
        self._last_end = tree_size
        self._last_ns = self._clock.monotonic_ns()

    def due(self, tree_size: int) -> bool:
        """Return whether a checkpoint is due now that ``tree_size`` records are committed."""
        if tree_size - self._last_end >= self._every_records:
            return True
        return self._clock.monotonic_ns() - self._last_ns >= self._every_ns
