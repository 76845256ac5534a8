"""`verify_run` streams: it holds far less than the run read into memory would take.

Measured by allocation (tracemalloc), not time, and relative to `read_run` on
the same file in the same test: a verifier that collected the run first
would allocate at least what `read_run` does.
"""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable
from pathlib import Path

from analysis import verify_run
from analysis._verify import verify_items
from audit import McapAuditSink, iter_run, read_run
from tests.records import append_decisions, make_run_start


def peak_bytes(work: Callable[[], object]) -> int:
    tracemalloc.start()
    try:
        work()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_verification_holds_a_fraction_of_the_run(tmp_path: Path) -> None:
    path = tmp_path / "run.mcap"
    with McapAuditSink(path, durability="chunk") as sink:
        sink.open_run(make_run_start())
        append_decisions(sink, 300)

    assert verify_run(path).ok
    streamed = peak_bytes(lambda: verify_run(path))
    collected = peak_bytes(lambda: read_run(path))

    assert streamed * 2 < collected, (streamed, collected)


def test_verify_items_consumes_the_stream_it_is_given(tmp_path: Path) -> None:
    path = tmp_path / "run.mcap"
    with McapAuditSink(path) as sink:
        sink.open_run(make_run_start())
        append_decisions(sink, 3)
    items = iter_run(path)

    result = verify_items(items)

    assert result == verify_run(path)
    assert next(items, None) is None
