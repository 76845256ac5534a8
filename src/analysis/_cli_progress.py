"""The progress bar the reading commands draw on stderr for a large run.

Reading a run of a million decisions takes a while; a person at a terminal
should see that it moves. The bar is drawn only when stderr is a terminal and
the file is at least `PROGRESS_MIN_BYTES`: piped or redirected, and for the
small runs tests and demos make, stderr carries errors and warnings only. The
bar is transient (it is erased when reading ends), so what the command then
prints is the same with or without it.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TextIO

from analysis._analyze import Progress

__all__ = ["PROGRESS_MIN_BYTES", "progress_bar"]

PROGRESS_MIN_BYTES = 16 * 1024 * 1024
"""Files smaller than this are read without a bar (a second or so at most)."""


@contextmanager
def progress_bar(
    path: Path, *, stream: TextIO | None = None, min_bytes: int = PROGRESS_MIN_BYTES
) -> Iterator[Progress | None]:
    """Yield a progress callback drawing a bar on ``stream``, or None when none is wanted.

    Args:
        path: the file about to be read (its size decides).
        stream: where to draw (default: ``sys.stderr``); only a terminal gets a bar.
        min_bytes: the smallest file that gets one.
    """
    out = sys.stderr if stream is None else stream
    try:
        size = os.stat(path).st_size
    except OSError:
        size = 0  # the reader reports why it cannot read the file
    if size < min_bytes or not out.isatty():
        yield None
        return
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        TextColumn,
        TimeRemainingColumn,
        TransferSpeedColumn,
    )
    from rich.progress import Progress as Bar

    columns = (
        TextColumn("reading"),
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        TimeRemainingColumn(),
    )
    with Bar(*columns, console=Console(file=out), transient=True) as bar:
        task = bar.add_task("reading", total=size)

        def advance(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        yield advance
