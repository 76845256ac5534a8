"""The errors `audit` adds to ghost's tree (drawn in `runtime._errors`).

::

    GhostError
    └── AuditError                 a decision that could not be recorded
        ├── LogFormatError         a file that is not a readable ghost audit log
        ├── KeyFileError           a signing or verifying key file that cannot be used
        ├── NoteError              a checkpoint note that is malformed or fails its signatures
        └── ProofError             an inclusion proof that cannot be read, or cannot be built

Writing failures raise `AuditError` itself; `LogFormatError` is the reader's:
the file cannot be read as a ghost audit log at all (as opposed to a log that
reads but fails verification, which the reader reports as problems).
`KeyFileError` names a key file (``ghost keygen``, ``--public-key``) and what
is wrong with it; `NoteError` says why a note (a ``/checkpoints`` record's, or
an anchor file's) cannot be trusted. `ProofError` is the prover's and the proof
reader's: a file that is not an inclusion proof at all (as opposed to a proof
that reads but does not verify, which the checker reports as problems), or a
run from which no proof can be built.
"""

from __future__ import annotations

from pathlib import Path

from runtime import AuditError

__all__ = ["KeyFileError", "LogFormatError", "NoteError", "ProofError"]


class LogFormatError(AuditError):
    """A file is not a readable ghost audit log.

    Attributes:
        path: the file that was read.
        problem: why it cannot be read, as a sentence fragment a user can act on.
    """

    def __init__(self, path: Path, problem: str) -> None:
        self.path = path
        self.problem = problem
        super().__init__(f"{path}: not a readable ghost audit log: {problem}")


class KeyFileError(AuditError):
    """A key file cannot be written, read, or used as an Ed25519 key.

    Attributes:
        path: the key file.
        problem: what is wrong, as a sentence fragment a user can act on.
    """

    def __init__(self, path: Path, problem: str) -> None:
        self.path = path
        self.problem = problem
        super().__init__(f"{path}: not a usable Ed25519 key file: {problem}")


class NoteError(AuditError):
    """A checkpoint note is malformed, or its signatures do not verify.

    Attributes:
        problem: what is wrong with the note, without quoting it.
        path: the note file it was read from (an anchor), or None.
    """

    def __init__(self, problem: str, *, path: Path | None = None) -> None:
        self.problem = problem
        self.path = path
        where = "" if path is None else f"{path}: "
        super().__init__(f"{where}checkpoint note rejected: {problem}")


class ProofError(AuditError):
    """An inclusion proof cannot be read as one, or cannot be built from a run.

    Attributes:
        problem: what is wrong, as a sentence fragment a user can act on.
        path: the proof file or the run it concerns, or None.
    """

    def __init__(self, problem: str, *, path: Path | None = None) -> None:
        self.problem = problem
        self.path = path
        where = "" if path is None else f"{path}: "
        super().__init__(f"{where}no inclusion proof: {problem}")
