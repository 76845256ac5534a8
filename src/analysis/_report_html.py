"""``ghost report``'s page: one self-contained HTML file that works offline.

The page is built from a `analysis._report_data.ReportPage` and holds, in order:

1. **The integrity verdict**, as static HTML text (it needs no script): intact,
   truncated or tampered, the problem count and the first problems.
2. The overview and the latency, stage and wait statistics, as static tables.
3. The charts (`analysis._report_charts`) and the decision table, drawn by
   scripts from data embedded in the page.

How text from the run is kept text (ADR 0020): an agent chooses its name, verb
and resource, and a log can be edited, so none of it may become markup or code.

* Static HTML: every text is escaped with `html.escape` (quotes too).
* Data for the scripts: JSON inside ``<script type="application/json">``
  elements, which a browser never runs, with ``<``, ``>``, ``&``, U+2028 and
  U+2029 written as ``\\u`` escapes, so no text can close the element or open a
  comment (`script_json`). The scripts read it with ``JSON.parse`` and put it
  into the page only with ``textContent``; plotly labels are escaped for its
  markup by `analysis._report_charts.markup_text`.
* A Content-Security-Policy allows exactly the page's two scripts (by their
  SHA-256), inline styles and ``data:`` images, and nothing else: no other
  script can run, and nothing can be fetched, even if an escape were wrong.

plotly.js is inlined once (from the ``plotly`` package, the optional extra
``ghost-sdk[report]``, imported by this module: only ``ghost report`` imports it);
the table script and the style sheet are package files beside this module
(``report.js``, ``report.css``).
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
from collections.abc import Iterable, Mapping, Sequence
from importlib import resources
from typing import Any, Final

from plotly.offline import get_plotlyjs  # type: ignore[import-untyped]

from analysis._printable import printable
from analysis._report_bins import Histogram, utc_text
from analysis._report_charts import (
    OUTCOME_COLORS,
    STAGE_COLORS,
    VERDICT_COLORS,
    duration_figure,
    rules_figure,
    timeline_figure,
)
from analysis._report_data import MAX_TEXT, TEXT_COLUMNS, DecisionColumns, Integrity, ReportPage
from analysis._trace_stats import LatencyStats
from analysis._verify_model import RunStatus

__all__ = ["format_duration", "render_report_html", "script_json"]

_STATUS_HEADLINE: Final = {
    RunStatus.INTACT: "INTACT",
    RunStatus.TRUNCATED: "TRUNCATED",
    RunStatus.TAMPERED: "TAMPERED",
}
_STATUS_TEXT: Final = {
    RunStatus.INTACT: "every integrity check passed, and the run is sealed.",
    RunStatus.TRUNCATED: (
        "the records read are a correctly linked prefix of the run, but it ends early and"
        " unsealed, as a crash leaves it. What follows covers the records before the cut."
    ),
    RunStatus.TAMPERED: (
        "the log fails its integrity checks: it was edited or corrupted. What follows is"
        " what the file claims, not evidence."
    ),
}
_CSP: Final = (
    "default-src 'none'; script-src {hashes}; style-src 'unsafe-inline'; img-src data:;"
    " base-uri 'none'; form-action 'none'"
)
_JSON_ESCAPES: Final = (
    ("&", "\\u0026"),
    ("<", "\\u003c"),
    (">", "\\u003e"),
    ("\u2028", "\\u2028"),
    ("\u2029", "\\u2029"),
)


def script_json(value: Any) -> str:
    """``value`` as JSON that is safe inside a ``<script type="application/json">`` element.

    ``<``, ``>`` and ``&`` can occur in JSON only inside strings, where their
    ``\\u`` escapes mean the same: so no ``</script>`` or ``<!--`` can appear.

    Raises:
        ValueError: a float that is not finite (JSON has none).
    """
    text = json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    for char, escape in _JSON_ESCAPES:
        text = text.replace(char, escape)
    return text


def format_duration(ns: int) -> str:
    """A duration a person reads at a glance: ns, µs, ms or s, three significant digits."""
    magnitude = abs(ns)
    for unit, scale in (("s", 1_000_000_000), ("ms", 1_000_000), ("µs", 1_000)):
        if magnitude >= scale:
            return f"{ns / scale:.3g} {unit}"
    return f"{ns} ns"


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _asset(name: str) -> str:
    return resources.files("analysis").joinpath(name).read_text(encoding="utf-8")


def _integrity_html(integrity: Integrity) -> str:
    status = integrity.status
    parts = [
        f'<section id="integrity" class="integrity {status.value}" role="status">',
        f"<h2>Integrity: <strong>{_STATUS_HEADLINE[status]}</strong></h2>",
        f"<p>{_e(_STATUS_TEXT[status])}</p>",
        f"<p><code>ghost verify</code>: {_e(integrity.summary)}</p>",
    ]
    if integrity.first_problems:
        shown = len(integrity.first_problems)
        parts.append(
            f"<p>The first {shown} of {integrity.problem_count} (all of them:"
            " <code>ghost verify</code> on the file):</p>"
        )
        parts.append(_list(integrity.first_problems))
    if integrity.unreadable_count:
        parts.append(
            f"<p>{integrity.unreadable_count} record(s) could not be read for this report, or"
            " break their schema (each line says whether it is counted below):</p>"
        )
        parts.append(_list(integrity.first_unreadable))
    parts.append("</section>")
    return "\n".join(parts)


def _list(items: Iterable[str]) -> str:
    return "<ul>" + "".join(f"<li><code>{_e(item)}</code></li>" for item in items) + "</ul>"


def _pairs_table(caption: str, header: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    head = "".join(f"<th scope=col>{_e(name)}</th>" for name in header)
    body = "".join(
        "<tr>" + "".join(f"<td>{_e(cell)}</td>" for cell in row) + "</tr>" for row in rows
    )
    return f"<table class=facts><caption>{_e(caption)}</caption><tr>{head}</tr>{body}</table>"


def _stats_table(caption: str, rows: Sequence[tuple[str, LatencyStats]]) -> str:
    if not rows:
        return ""
    return _pairs_table(
        caption,
        ("", "count", "min", "p50", "p90", "p99", "max"),
        (
            (
                name,
                s.count,
                *map(format_duration, (s.min_ns, s.p50_ns, s.p90_ns, s.p99_ns, s.max_ns)),
            )
            for name, s in rows
        ),
    )


def _overview_html(page: ReportPage) -> str:
    when = ""
    if page.first_ns is not None and page.last_ns is not None:
        span = format_duration(page.last_ns - page.first_ns)
        when = f", from {utc_text(page.first_ns)} to {utc_text(page.last_ns)} ({span})"
    tables = [
        _pairs_table("decisions per verdict", ("verdict", "decisions"), page.verdict_counts),
        _pairs_table(
            "decisions per chain status", ("chain status", "decisions"), page.chain_counts
        ),
        _pairs_table("approvals per outcome", ("outcome", "approvals"), page.approval_counts),
    ]
    if page.detectors:
        tables.append(
            _pairs_table("detectors that fired", ("detector", "decisions"), page.detectors)
        )
    return (
        '<section id="overview"><h2>Overview</h2>'
        f"<p><strong>{page.total_decisions}</strong> decision(s){_e(when)};"
        f" {page.unresolved_pending} pending decision(s) no approval of the run resolves.</p>"
        f'<div class="facts-row">{"".join(tables)}</div></section>'
    )


def _chart_box(
    chart_id: str, title: str, figure: dict[str, Any] | None, empty: str, stats: str
) -> str:
    inner = (
        f'<div class="chart" id="{chart_id}"></div>'
        if figure is not None
        else f'<p class="empty">{_e(empty)}</p>'
    )
    return f'<figure class="box"><h2>{_e(title)}</h2>{inner}{stats}</figure>'


def _omitted(histogram: Histogram | None) -> str:
    if histogram is None or not histogram.omitted_series:
        return ""
    return (
        f'<p class="empty">{histogram.omitted_series} more series, with fewer values,'
        " are not shown.</p>"
    )


def _charts(page: ReportPage) -> tuple[str, list[dict[str, Any]]]:
    def durations(
        histogram: Histogram | None, colors: Mapping[str, str], share_of: str
    ) -> dict[str, Any] | None:
        if histogram is None:
            return None
        return duration_figure(histogram, colors=colors, share_of=share_of)

    charts = [
        (
            "chart-timeline",
            "Decisions over time, by verdict",
            None if page.timeline is None else timeline_figure(page.timeline),
            "No decisions.",
            "",
        ),
        (
            "chart-latency",
            "Latency per verdict (gate entry to verdict)",
            durations(page.latency_by_verdict, VERDICT_COLORS, "verdict's decisions"),
            "No decisions.",
            _stats_table("latency per verdict (nearest rank)", page.latency_stats),
        ),
        (
            "chart-stages",
            "Time per gate stage",
            durations(page.latency_by_stage, STAGE_COLORS, "stage's timings"),
            "No assessment times a stage.",
            _omitted(page.latency_by_stage)
            + _stats_table("time per stage (nearest rank)", page.stage_stats),
        ),
        (
            "chart-waits",
            "Approval wait (pending verdict to resolution)",
            durations(page.wait_by_outcome, OUTCOME_COLORS, "outcome's approvals"),
            "No approvals in this run.",
            _stats_table("approval wait per outcome (nearest rank)", page.wait_stats),
        ),
        ("chart-rules", "Decisions per rule", rules_figure(page.rules), "No decisions.", ""),
    ]
    parts = [_chart_box(*chart) for chart in charts]
    figures = [
        {"id": chart_id, "figure": figure}
        for chart_id, _, figure, _, _ in charts
        if figure is not None
    ]
    return '<section id="charts">' + "".join(parts) + "</section>", figures


def _table_data(table: DecisionColumns) -> dict[str, Any]:
    first = 0 if table.first_ns is None else table.first_ns
    # Milliseconds and the rest apart: a time in ns is beyond a JavaScript number's exact range.
    first_ms, first_rest_ns = divmod(first, 1_000_000)
    return {
        "count": table.row_count,
        "first_ms": first_ms,
        "first_rest_ns": first_rest_ns,
        "offset_ns": table.offset_ns,
        "latency_ns": table.latency_ns,
        "columns": {
            name: {"values": table.values[name], "codes": table.codes[name]}
            for name in TEXT_COLUMNS
        },
    }


_TABLE_HTML: Final = """<section id="decisions"><h2>Decisions</h2>
<p class="hint">Every decision of the run, in stream order (#). Click a heading to sort.
The search matches verdict, agent, verb, resource, rule and chain status (case-insensitive);
&mdash; is unknown (no assessment logged) or, for the rule, the policy default.
Texts longer than {max_text} characters are cut.</p>
<div class="controls">
<label>Search <input id="search" type="search" autocomplete="off" spellcheck="false"></label>
<label>Verdict <select id="filter-verdict"><option value="">all</option></select></label>
<label>Chain <select id="filter-chain"><option value="">all</option></select></label>
<span id="table-status" aria-live="polite"></span>
</div>
<table id="decision-table"><thead><tr></tr></thead><tbody></tbody></table>
<div class="pager">
<button type="button" id="page-first">&laquo; first</button>
<button type="button" id="page-prev">&lsaquo; previous</button>
<label>page <input id="page-number" type="number" min="1" value="1"></label>
of <span id="page-count">1</span>
<button type="button" id="page-next">next &rsaquo;</button>
<button type="button" id="page-last">last &raquo;</button>
</div>
<noscript><p>The charts and this table are drawn by scripts in the page.
The integrity verdict and the statistics above need none.</p></noscript>
</section>"""


def _script_hash(text: str) -> str:
    digest = hashlib.sha256(text.encode("utf-8")).digest()
    return "'sha256-" + base64.b64encode(digest).decode("ascii") + "'"


def render_report_html(page: ReportPage, *, name: str, version: str = "") -> bytes:
    """The whole report page as UTF-8 bytes.

    Args:
        page: what to show.
        name: the run's file name, as the user gave it (shown, escaped).
        version: the ghost-sdk version that made the page (shown when given).

    Raises:
        RuntimeError: the plotly.js bundle could close its script element (never seen;
            checked because the page's safety rests on it).
    """
    plotly_js = get_plotlyjs()
    if "</script" in plotly_js.lower() or "<!--" in plotly_js:
        raise RuntimeError("the plotly.js bundle cannot be inlined: it holds </script or <!--")
    app_js = _asset("report.js")
    charts_html, figures = _charts(page)
    shown_name = _e(printable(name, limit=MAX_TEXT))
    made_by = f"ghost-sdk {_e(version)}" if version else "ghost-sdk"
    csp = _CSP.format(hashes=f"{_script_hash(plotly_js)} {_script_hash(app_js)}")
    document = "\n".join(
        [
            "<!DOCTYPE html>",
            '<html lang="en"><head><meta charset="utf-8">',
            f'<meta http-equiv="Content-Security-Policy" content="{_e(csp)}">',
            '<meta name="viewport" content="width=device-width, initial-scale=1">',
            f"<title>ghost report: {shown_name}</title>",
            f"<style>{_asset('report.css')}</style>",
            "</head><body>",
            (
                f'<header><h1>ghost report</h1><p class="file">{shown_name}</p>'
                f'<p class="meta">file SHA-256 <code>{_e(page.source_sha256)}</code>'
                f" &middot; made by {made_by}</p></header>"
            ),
            "<main>",
            _integrity_html(page.integrity),
            _overview_html(page),
            charts_html,
            _TABLE_HTML.format(max_text=MAX_TEXT),
            "</main>",
            f'<script type="application/json" id="ghost-charts">{script_json(figures)}</script>',
            (
                '<script type="application/json" id="ghost-decisions">'
                f"{script_json(_table_data(page.table))}</script>"
            ),
            f"<script>{plotly_js}</script>",
            f"<script>{app_js}</script>",
            "</body></html>",
            "",
        ]
    )
    return document.encode("utf-8")
