"""``ghost summary`` for a person: a `RunSummary` drawn with rich, or plain when piped.

Integrity comes first, on its own line, because everything below it is only
as good as the log. On a terminal the status is coloured (green intact,
yellow truncated, red tampered); piped, or with ``NO_COLOR`` set, the same
text comes out without escape codes or box drawing, in aligned columns that
``grep`` and ``awk`` can read.

Every string from the run (agents, verbs, resources, rule and detector names)
may have come from an agent: each is made printable (control and
bidirectional characters escaped) and handed to rich as plain `Text`, never
as markup, so a crafted resource cannot restyle the terminal or inject a link.
"""

from __future__ import annotations

from typing import IO, Final

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from analysis._printable import printable
from analysis._summary import RunSummary
from analysis._trace_stats import LatencyStats
from analysis._verify_model import RunStatus

__all__ = ["render_summary"]

_STATUS_STYLE: Final = {
    RunStatus.INTACT: "bold green",
    RunStatus.TRUNCATED: "bold yellow",
    RunStatus.TAMPERED: "bold red",
}
_STATUS_TEXT: Final = {
    RunStatus.INTACT: "INTACT: every check passed, and the run is sealed",
    RunStatus.TRUNCATED: "TRUNCATED: a correctly linked prefix, unsealed (a crash?)",
    RunStatus.TAMPERED: "TAMPERED: the log fails its integrity checks",
}
_TEXT_COLUMNS: Final = frozenset({"verdict", "rule", "agent", "verb", "resource"})
_LONGEST: Final = 120  # characters of one name or resource shown before an ellipsis
_WIDTH: Final = 100  # piped output: wide enough for a resource, fixed so diffs stay stable
_SHADOW_IDS: Final = 3  # decision ids shown per shadow disagreement (JSON has the report's)


def render_summary(
    summary: RunSummary, *, name: str, file: IO[str], terminal: bool, color: bool
) -> None:
    """Write ``summary`` to ``file``.

    Args:
        summary: what to show.
        name: the run's file name, as the user gave it.
        file: where to write.
        terminal: ``file`` is a terminal: rich's layout and box drawing.
        color: colour the status and headings (only on a terminal).
    """
    console = Console(
        file=file,
        force_terminal=terminal,
        no_color=not color,
        color_system="auto" if terminal and color else None,
        width=None if terminal else _WIDTH,
        highlight=False,
        emoji=False,
        markup=False,
        soft_wrap=not terminal,
    )
    frame = box.SIMPLE_HEAD if terminal else None
    status = Text(f"integrity: {_STATUS_TEXT[summary.status]}")
    if color:
        status.stylize(_STATUS_STYLE[summary.status])
    console.print(Text(_printable(name)))
    console.print(status)
    if summary.problem_count:
        console.print(
            Text(
                f"  {summary.problem_count} problem(s): run `ghost verify` on the file to list them"
            )
        )
    if summary.report_problems:
        console.print(
            Text(f"  {summary.report_problems} record(s) could not be read or break their schema")
        )
    verdicts = "  ".join(f"{verdict}={count}" for verdict, count in summary.verdict_counts)
    console.print(Text(f"decisions: {summary.total_decisions}  ({verdicts})"))

    if summary.latency is not None:
        table = _table("latency", ["verdict", "count", "min", "p50", "p90", "p99", "max"], frame)
        table.add_row(*_stats_row("all", summary.latency))
        for verdict, stats in summary.latency_by_verdict:
            table.add_row(*_stats_row(verdict, stats))
        console.print(table)
    if summary.top_rules:
        table = _table("top rules", ["rule", "decisions"], frame)
        for rule, count in summary.top_rules:
            table.add_row(Text(_printable(rule)), Text(str(count)))
        console.print(table)
    if summary.top_denied:
        table = _table("top denied actions", ["agent", "verb", "resource", "denials"], frame)
        for action in summary.top_denied:
            table.add_row(
                *(Text(_shown(part)) for part in (action.agent, action.verb, action.resource)),
                Text(str(action.count)),
            )
        console.print(table)
    outcomes = "  ".join(f"{outcome}={count}" for outcome, count in summary.approval_counts)
    line = f"approvals: {outcomes or 'none'}; pending never resolved: {summary.unresolved_pending}"
    if summary.approval_wait is not None:
        wait = summary.approval_wait
        line += f"; wait p50 {_duration(wait.p50_ns)}, max {_duration(wait.max_ns)}"
    console.print(Text(line))
    if summary.top_detectors:
        fired = "  ".join(f"{_printable(name)}={count}" for name, count in summary.top_detectors)
        console.print(Text(f"detectors: {fired}"))
    else:
        console.print(Text("detectors: none fired"))
    if summary.shadow_decisions:
        _shadow(console, summary, frame)


def _shadow(console: Console, summary: RunSummary, frame: box.Box | None) -> None:
    """The shadow's disagreements (ADR 0031): one sentence per verdict pair, then its rules."""
    differing = sum(d.count for d in summary.shadow_disagreements)
    console.print(
        Text(
            f"shadow: {summary.shadow_decisions} decision(s) shadowed;"
            f" {differing} would have been decided otherwise"
        )
    )
    for disagreement in summary.shadow_disagreements:
        shown = ", ".join(disagreement.decision_ids[:_SHADOW_IDS])
        more = ", ..." if disagreement.count > _SHADOW_IDS else ""
        console.print(Text(f"  {disagreement.sentence}: {shown}{more}"))
    if summary.shadow_rules:
        table = _table("shadow rules", ["rule", "disagreements"], frame)
        for rule, count in summary.shadow_rules:
            table.add_row(Text(_printable(rule)), Text(str(count)))
        console.print(table)


def _table(title: str, columns: list[str], frame: box.Box | None) -> Table:
    """A table whose text columns are left-aligned and whose numbers are right-aligned."""
    table = Table(title=title, title_justify="left", box=frame, show_edge=False, pad_edge=False)
    for column in columns:
        numeric = column not in _TEXT_COLUMNS
        table.add_column(column, justify="right" if numeric else "left", no_wrap=True)
    return table


def _stats_row(name: str, stats: LatencyStats) -> list[Text]:
    values = (stats.min_ns, stats.p50_ns, stats.p90_ns, stats.p99_ns, stats.max_ns)
    return [Text(name), Text(str(stats.count)), *(Text(_duration(v)) for v in values)]


def _duration(ns: int) -> str:
    """A duration a person reads at a glance: ns, µs, ms or s, three significant digits."""
    magnitude = abs(ns)
    for unit, scale in (("s", 1_000_000_000), ("ms", 1_000_000), ("µs", 1_000)):
        if magnitude >= scale:
            return f"{ns / scale:.3g} {unit}"
    return f"{ns} ns"


def _shown(part: str | None) -> str:
    return "?" if part is None else _printable(part)


def _printable(text: str) -> str:
    return printable(text, limit=_LONGEST)
