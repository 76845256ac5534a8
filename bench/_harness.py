"""The shape every benchmark shares: interleaved rounds, medians, ratios to a peer, targets.

A benchmark module exposes ``run(quick: bool) -> Section``. Timings are medians
over interleaved rounds (every candidate timed once per round, in turn), so
that a noisy neighbour on a shared machine slows all of them alike; what is
reported is a ratio to a peer or floor measured in the same rounds, and
whether the target stated beside it holds. Absolute times are printed for
context only.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

__all__ = ["Row", "Section", "interleaved", "render"]


@dataclass(frozen=True, slots=True)
class Row:
    """One measured line of a section.

    Attributes:
        name: what was measured.
        value: the measurement, in ``unit``.
        unit: ``"µs"``, ``"MB/s"``, ``"B"``, ...
        ratio: ``value`` relative to the section's peer or floor (None: no ratio).
        target: the target as a sentence (``"≤ 100×"``), or None.
        holds: whether the target holds (None when there is no target).
    """

    name: str
    value: float
    unit: str
    ratio: float | None = None
    target: str | None = None
    holds: bool | None = None


@dataclass(frozen=True, slots=True)
class Section:
    """A group of rows measured together against one peer."""

    title: str
    description: str
    rows: tuple[Row, ...]
    notes: tuple[str, ...] = field(default=())
    kept: str | None = None
    """The section's text as an earlier run wrote it, when it was not re-measured."""


def interleaved(
    candidates: dict[str, Callable[[], object]], *, rounds: int, calls: int
) -> dict[str, float]:
    """Median seconds per call of each candidate, over ``rounds`` interleaved rounds."""
    samples: dict[str, list[float]] = {name: [] for name in candidates}
    for _ in range(rounds):
        for name, fn in candidates.items():
            start = time.perf_counter()
            for _ in range(calls):
                fn()
            samples[name].append((time.perf_counter() - start) / calls)
    return {name: statistics.median(values) for name, values in samples.items()}


def _number(value: float) -> str:
    if value >= 100:
        return f"{value:,.0f}"
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def render(sections: Sequence[Section], *, header: Sequence[str]) -> str:
    """The markdown of BENCHMARKS.md."""
    lines = list(header)
    for section in sections:
        if section.kept is not None:
            lines += ["", f"## {section.title}", "", section.kept]
            continue
        lines += ["", f"## {section.title}", "", section.description, ""]
        lines += ["| what | value | ratio | target | holds |", "|---|---:|---:|---|:---:|"]
        for row in section.rows:
            ratio = "" if row.ratio is None else f"{_number(row.ratio)}×"
            holds = "" if row.holds is None else ("yes" if row.holds else "**no**")
            lines.append(
                f"| {row.name} | {_number(row.value)} {row.unit} | {ratio}"
                f" | {row.target or ''} | {holds} |"
            )
        if section.notes:
            lines.append("")
            lines += [f"- {note}" for note in section.notes]
    return "\n".join(lines) + "\n"
