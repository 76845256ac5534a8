"""The error `audit` adds to ghost's tree (drawn in `runtime._errors`).

::

    GhostError
    └── AuditError                 a decision that could not be recorded
        └── LogFormatError         a file that is not a readable ghost audit log

Writing failures raise `AuditError` itself; `LogFormatError` is the reader's:
the file cannot be read as a ghost audit log at all (as opposed to a log that
reads but fails verification, which the reader reports as problems).
"""

from __future__ import annotations

from pathlib import Path

from runtime import AuditError

__all__ = ["LogFormatError"]


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
