"""One streaming pass over a captured run: its verification and its decision trace together.

``ghost summary`` and ``ghost report`` need both views of a run: whether it is
intact (`verify_run`) and what the agents did (the decision trace report).
Reading the file twice doubles the time on a long run, and holding it whole
(`audit.read_run`) costs memory in proportion to its bytes. `analyze_run` reads
it once with `audit.iter_run`: every item goes to the verifier's checks and,
if it is a record, to a `TraceBuilder`. What stays in memory is what the two
results hold (the report's records, the verifier's bounded problem list and
per-check state), not the file's messages.

`run_items` is the same stream with a progress callback, for the commands
that need only one of the views (``ghost verify`` with `verify_items`,
``ghost trace-decisions`` with `trace_items`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Final

from analysis._decision_trace import TraceBuilder
from analysis._trace_model import DecisionTraceReport
from analysis._verify import _anchor_note, _check_public_key, verify_items
from analysis._verify_model import RunVerification

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    from audit import CheckpointNote, RunItem

__all__ = ["PROGRESS_STEPS", "Progress", "RunAnalysis", "analyze_run", "run_items"]

Progress = Callable[[int, int], None]
"""Told ``(bytes_read, file_bytes)`` as a run is read (see `PROGRESS_STEPS`)."""

PROGRESS_STEPS: Final = 200
"""How many times, at most, a progress callback hears of a reading, not counting its end."""


@dataclass(frozen=True, slots=True)
class RunAnalysis:
    """Both offline views of one run, from one reading of its file.

    Attributes:
        verification: what `verify_run` says of the file.
        report: the decision trace report of the same bytes.
    """

    verification: RunVerification
    report: DecisionTraceReport


def analyze_run(
    path: str | os.PathLike[str],
    *,
    public_key: Ed25519PublicKey | None = None,
    anchors: Iterable[str | CheckpointNote] = (),
    progress: Progress | None = None,
) -> RunAnalysis:
    """Verify a captured run and build its decision trace report, reading the file once.

    Args:
        path: the MCAP file a ghost audit sink wrote.
        public_key, anchors: as `verify_run`.
        progress: called with ``(bytes_read, file_bytes)`` as reading goes on.

    Returns:
        The verification and the report; each equals what `verify_run` and
        `build_decision_trace_report` return for the same file.

    Raises:
        audit.LogFormatError: as `verify_run`.
        audit.NoteError, TypeError: as `verify_run` (a bad anchor or key).
    """
    _check_public_key(public_key)
    notes = tuple(_anchor_note(anchor) for anchor in anchors)
    builder = TraceBuilder()
    verification = verify_items(
        _traced(run_items(path, progress=progress), builder), public_key=public_key, anchors=notes
    )
    report = builder.finish(
        source_sha256=verification.source_sha256, truncated=verification.truncated
    )
    return RunAnalysis(verification=verification, report=report)


def run_items(
    path: str | os.PathLike[str], *, progress: Progress | None = None
) -> Iterator[RunItem]:
    """`audit.iter_run` of ``path``, telling ``progress`` how far into the file it is.

    Raises:
        audit.LogFormatError: as `audit.iter_run`, when iterated.
    """
    from audit import iter_run

    items = iter_run(Path(path))
    if progress is None:
        yield from items
        return
    yield from _reported(items, path, progress)


def _reported(
    items: Iterator[RunItem], path: str | os.PathLike[str], progress: Progress
) -> Iterator[RunItem]:
    from audit import LoggedRecord, ReadEnd

    try:
        total = os.stat(path).st_size
    except OSError:
        total = 0  # iter_run says why it cannot read the file, on the first item
    step = max(1, total // PROGRESS_STEPS)
    due = step
    for item in items:
        if isinstance(item, LoggedRecord) and item.offset >= due:
            progress(min(item.offset, total), total)
            due = item.offset + step
        elif isinstance(item, ReadEnd):
            progress(item.size_bytes, item.size_bytes)
        yield item


def _traced(items: Iterable[RunItem], builder: TraceBuilder) -> Iterator[RunItem]:
    for item in items:
        builder.take(item)
        yield item
