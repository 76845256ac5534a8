"""The charts of ``ghost report``: plotly figures drawn from the page's aggregates.

Each function turns one bounded aggregate of `analysis._report_data` into a
plotly figure, returned as plain JSON data (``{"data": [...], "layout": {...}}``)
for the page to embed and plotly.js to draw. The figures' size depends on the
number of bins and series, never on the number of decisions.

plotly is an optional dependency (``pip install 'ghost-sdk[report]'``):
this module imports it at the top, and only the report imports this module.

Text from the run (series, rule names) is already printable; plotly.js reads
a small HTML-like markup in labels, legends and hover text (``<b>``, ``<br>``,
``<a href=...>``), so every label goes through `markup_text` first, which
writes ``&``, ``<`` and ``>`` as entities: plotly shows them, it does not obey them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import plotly.graph_objects as go  # type: ignore[import-untyped]

from analysis._report_bins import Histogram, Timeline, utc_text
from analysis._report_data import RuleCounts

__all__ = [
    "OUTCOME_COLORS",
    "STAGE_COLORS",
    "VERDICT_COLORS",
    "duration_figure",
    "markup_text",
    "rules_figure",
    "time_unit",
    "timeline_figure",
]

VERDICT_COLORS: Final = {
    "allow": "#2e7d32",
    "narrow": "#00897b",
    "scrub": "#1e88e5",
    "pending": "#f9a825",
    "deny": "#c62828",
}
"""One colour per verdict, the same in every chart and in the table."""
OUTCOME_COLORS: Final = {"approved": "#2e7d32", "rejected": "#c62828", "expired": "#757575"}
"""One colour per approval outcome."""
STAGE_COLORS: Final = {"policy": "#5e35b1", "narrow": "#00897b", "scrub": "#1e88e5"}
_OTHER_COLORS: Final = ("#6d4c41", "#8e24aa", "#546e7a", "#d81b60", "#7cb342")
_GREY: Final = "#9e9e9e"
_RULE: Final = "#455a64"

_TIME_UNITS: Final = (
    (86_400_000_000_000, "days"),
    (3_600_000_000_000, "hours"),
    (60_000_000_000, "minutes"),
    (1_000_000_000, "seconds"),
    (1_000_000, "milliseconds"),
    (1_000, "microseconds"),
    (1, "nanoseconds"),
)
_FONT: Final = "system-ui, -apple-system, Segoe UI, Roboto, sans-serif"
_HEIGHT: Final = 340


def markup_text(text: str) -> str:
    """``text`` as plotly label markup that shows exactly ``text`` (``&``, ``<``, ``>`` escaped)."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def time_unit(width_ns: int) -> tuple[int, str]:
    """The largest unit of time not longer than ``width_ns``: ``(unit_ns, name)``."""
    for unit_ns, name in _TIME_UNITS:
        if unit_ns <= width_ns:
            return unit_ns, name
    return _TIME_UNITS[-1]


def _layout(**changes: Any) -> dict[str, Any]:
    layout: dict[str, Any] = {
        "template": "plotly_white",
        "height": _HEIGHT,
        "margin": {"l": 60, "r": 20, "t": 10, "b": 60},
        "font": {"family": _FONT, "size": 13},
        "legend": {"orientation": "h", "yanchor": "bottom", "y": 1.02, "x": 0},
        "hoverlabel": {"namelength": -1},
    }
    layout.update(changes)
    return layout


def _plain(figure: go.Figure) -> dict[str, Any]:
    data = figure.to_plotly_json()
    return {"data": data["data"], "layout": data["layout"]}


def timeline_figure(timeline: Timeline) -> dict[str, Any]:
    """Decisions per time bin, stacked by verdict (verdicts with no decision left out)."""
    unit_ns, unit = time_unit(timeline.width_ns)
    width = timeline.width_ns / unit_ns
    bins = range(timeline.bin_count)
    # Each bar stands at the middle of its bin, in units since the first bin's start.
    centres = [(index + 0.5) * width for index in bins]
    spans = [
        f"{utc_text(timeline.start_ns + index * timeline.width_ns)} +"
        f" {timeline.width_ns / unit_ns:g} {unit}"
        for index in bins
    ]
    figure = go.Figure(
        layout=_layout(
            barmode="stack",
            bargap=0.05,
            xaxis={"title": {"text": f"{unit} since {utc_text(timeline.start_ns)}"}},
            yaxis={"title": {"text": "decisions"}, "rangemode": "tozero"},
        )
    )
    for verdict, counts in timeline.counts:
        if not any(counts):
            continue
        figure.add_trace(
            go.Bar(
                name=verdict,
                x=centres,
                y=list(counts),
                width=width,
                marker={"color": VERDICT_COLORS.get(verdict, _GREY)},
                customdata=spans,
                hovertemplate="%{customdata}<br>%{y} decision(s)<extra>%{fullData.name}</extra>",
            )
        )
    return _plain(figure)


def duration_figure(
    histogram: Histogram, *, colors: Mapping[str, str], share_of: str
) -> dict[str, Any]:
    """Bars per duration bin and series, as the share of the series' values in each bin.

    Shares, not counts, so that a verdict of ten decisions and one of a million
    can be compared; the hover text gives the count.

    Args:
        histogram: the binned durations.
        colors: a colour per series name (others get a colour of their own).
        share_of: what a series counts, for the y axis title (``"verdict's decisions"``).
    """
    labels = [markup_text(b.label) for b in histogram.bins]
    figure = go.Figure(
        layout=_layout(
            barmode="group",
            bargap=0.15,
            xaxis={"title": {"text": "duration (log-scaled bins)"}, "type": "category"},
            yaxis={"title": {"text": f"% of the {share_of}"}, "rangemode": "tozero"},
        )
    )
    extra = iter(_OTHER_COLORS * (len(histogram.series) // len(_OTHER_COLORS) + 1))
    for (name, counts), total in zip(histogram.series, histogram.totals, strict=True):
        figure.add_trace(
            go.Bar(
                name=markup_text(name),
                x=labels,
                y=[round(100 * count / total, 3) for count in counts],
                customdata=list(counts),
                marker={"color": colors.get(name) or next(extra)},
                hovertemplate="%{x}: %{customdata} (%{y:.1f} %)<extra>%{fullData.name}</extra>",
            )
        )
    return _plain(figure)


def rules_figure(rules: RuleCounts) -> dict[str, Any] | None:
    """Decisions per rule, most first; the rest and the policy default as bars of their own.

    None when no decision was decided at all (no decisions).
    """
    bars = [(rule, count, _RULE) for rule, count in rules.top]
    if rules.other_rules:
        bars.append((f"({rules.other_rules} other rules)", rules.other_decisions, _GREY))
    if rules.default_decisions:
        bars.append(("(no rule: the policy default)", rules.default_decisions, _GREY))
    if not bars:
        return None
    labels = [markup_text(label) for label, _, _ in bars]
    # Numbered positions with tick labels: two rules that print alike keep a bar each.
    positions = list(range(len(bars)))
    figure = go.Figure(
        go.Bar(
            orientation="h",
            x=[count for _, count, _ in bars],
            y=positions,
            marker={"color": [color for _, _, color in bars]},
            customdata=labels,
            hovertemplate="%{customdata}: %{x} decision(s)<extra></extra>",
        ),
        layout=_layout(
            height=100 + 24 * len(bars),
            margin={"l": 20, "r": 20, "t": 10, "b": 50},
            xaxis={"title": {"text": "decisions"}, "rangemode": "tozero"},
            yaxis={
                "tickvals": positions,
                "ticktext": labels,
                "autorange": "reversed",
                "automargin": True,
            },
            showlegend=False,
        ),
    )
    return _plain(figure)
