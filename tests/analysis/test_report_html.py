"""The report page's HTML: data kept as text, scripts allowed by hash, charts from aggregates."""

from __future__ import annotations

import base64
import hashlib
import json
import re
from html.parser import HTMLParser
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

pytest.importorskip("plotly", reason="the report extra (plotly) is not installed")

from analysis import ApprovalTraceRecord, RunStatus
from analysis._report_bins import Timeline
from analysis._report_charts import (
    duration_figure,
    markup_text,
    rules_figure,
    time_unit,
    timeline_figure,
)
from analysis._report_data import RuleCounts
from analysis._report_html import format_duration, render_report_html, script_json
from tests.analysis.report_pages import (
    HOSTILE_AGENT,
    HOSTILE_RESOURCE,
    HOSTILE_RULE,
    decision,
    page_of,
    varied_records,
)


class _Scripts(HTMLParser):
    """The page's script elements (type and text) and its Content-Security-Policy."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=False)
        self.scripts: list[tuple[str | None, str]] = []
        self.csp: str | None = None
        self._open: str | bool | None = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag == "script":
            self._open = found.get("type")
            self.scripts.append((found.get("type"), ""))
        if tag == "meta" and found.get("http-equiv") == "Content-Security-Policy":
            self.csp = found.get("content")

    def handle_data(self, data: str) -> None:
        if self._open is not False:
            kind, text = self.scripts[-1]
            self.scripts[-1] = (kind, text + data)

    def handle_endtag(self, tag: str) -> None:
        if tag == "script":
            self._open = False


def _parse(page_html: bytes) -> _Scripts:
    parser = _Scripts()
    parser.feed(page_html.decode("utf-8"))
    return parser


def _hostile_page() -> bytes:
    records = [
        decision(
            0,
            agent=HOSTILE_AGENT,
            resource=HOSTILE_RESOURCE,
            matched_policy=HOSTILE_RULE,
            verb="\u2029",
            stage_ns={"<i>stage</i>": 5},
        ),
        decision(1, decision_kind="deny", agent="ok", matched_policy=HOSTILE_RULE),
    ]
    page = page_of(records, status=RunStatus.TAMPERED, problems=["<b>forged</b> & </script>"])
    return render_report_html(page, name="<run>.mcap")


# --- embedding JSON ------------------------------------------------------------------------------


@given(st.recursive(st.text() | st.integers() | st.none(), lambda inner: st.lists(inner)))
def test_script_json_keeps_the_value_and_never_closes_its_element(value: Any) -> None:
    text = script_json(value)
    assert json.loads(text) == value
    for dangerous in ("<", ">", "&", "\u2028", "\u2029"):
        assert dangerous not in text


def test_script_json_escapes_exactly_the_five_characters() -> None:
    assert script_json(["</script><!--&\u2028\u2029é"]) == (
        '["\\u003c/script\\u003e\\u003c!--\\u0026\\u2028\\u2029é"]'
    )


def test_script_json_refuses_what_json_cannot_hold() -> None:
    with pytest.raises(ValueError, match="JSON compliant"):
        script_json([float("nan")])


# --- the page's scripts and policy ---------------------------------------------------------------


def test_the_page_runs_exactly_its_two_scripts_and_the_policy_names_them() -> None:
    parsed = _parse(render_report_html(page_of(varied_records(30)), name="run.mcap"))

    kinds = [kind for kind, _ in parsed.scripts]
    assert kinds == ["application/json", "application/json", None, None]
    assert parsed.csp is not None
    hashes = re.findall(r"'sha256-([A-Za-z0-9+/=]+)'", parsed.csp)
    expected = [
        base64.b64encode(hashlib.sha256(text.encode()).digest()).decode()
        for kind, text in parsed.scripts
        if kind is None
    ]
    assert hashes == expected
    assert "default-src 'none'" in parsed.csp
    assert "unsafe-inline" not in parsed.csp.split("script-src")[1].split(";")[0]
    assert "Plotly" in parsed.scripts[2][1]


def test_text_from_the_run_never_becomes_markup() -> None:
    page_html = _hostile_page()
    text = page_html.decode("utf-8")

    parsed = _parse(page_html)
    assert len(parsed.scripts) == 4  # no script element came from the data
    for raw in ("<img", "<b>", "</script><script>", "alert(1)</script>", "<i>stage"):
        assert raw not in text.replace(parsed.scripts[2][1], "").replace(parsed.scripts[3][1], "")
    assert "&lt;b&gt;forged&lt;/b&gt; &amp; &lt;/script&gt;" in text  # the problem, escaped
    assert "&lt;run&gt;.mcap" in text
    decisions = json.loads(parsed.scripts[1][1])
    assert decisions["columns"]["resource"]["values"] == [None, HOSTILE_RESOURCE]
    # Control, bidirectional, separator and lone-surrogate characters are shown escaped.
    assert decisions["columns"]["agent"]["values"] == [
        "<img src=x onerror=alert(2)>\\u2028\\x1b[2J\\u202e\\ud800",
        "ok",
    ]
    assert decisions["columns"]["verb"]["values"] == [None, "\\u2029"]


def test_chart_labels_from_the_run_are_escaped_for_plotly() -> None:
    charts = json.loads(_parse(_hostile_page()).scripts[0][1])
    figures = {chart["id"]: chart["figure"] for chart in charts}
    rules = figures["chart-rules"]
    assert rules["layout"]["yaxis"]["ticktext"] == [
        "&lt;b&gt;bold&lt;/b&gt;&lt;img src=x onerror=alert(3)&gt;&amp;amp;"
    ]
    stage_names = [trace["name"] for trace in figures["chart-stages"]["data"]]
    assert stage_names == ["&lt;i&gt;stage&lt;/i&gt;"]


@pytest.mark.parametrize(
    ("status", "headline"),
    [
        (RunStatus.INTACT, "INTACT"),
        (RunStatus.TRUNCATED, "TRUNCATED"),
        (RunStatus.TAMPERED, "TAMPERED"),
    ],
)
def test_the_integrity_verdict_comes_first_as_text(status: RunStatus, headline: str) -> None:
    text = render_report_html(page_of([decision(0)], status=status), name="r").decode()
    body = text[text.index("<body>") :]
    first_section = body[body.index("<section") : body.index("</section>")]
    assert f'class="integrity {status.value}"' in first_section
    assert f"Integrity: <strong>{headline}</strong>" in first_section
    assert body.index("<section") < body.index('id="overview"') < body.index('id="charts"')


def test_a_tampered_page_lists_its_problems() -> None:
    page = page_of([decision(0)], status=RunStatus.TAMPERED, problems=["one", "two"])
    text = render_report_html(page, name="r").decode()
    assert "tampered: 2 integrity problems" in text  # verify_run's own line
    assert "The first 2 of 2" in text
    assert "<li><code>file: chain: one</code></li><li><code>file: chain: two</code></li>" in text


def test_series_beyond_the_limit_are_said_to_be_left_out() -> None:
    records = [decision(index, stage_ns={f"stage-{index}": index}) for index in range(11)]
    text = render_report_html(page_of(records), name="r").decode()
    assert "3 more series, with fewer values, are not shown." in text
    assert "more series" not in render_report_html(page_of(records[:8]), name="r").decode()


def test_the_page_is_the_same_for_the_same_run() -> None:
    page = page_of(varied_records(50))
    assert render_report_html(page, name="r") == render_report_html(page, name="r")


def test_the_overview_says_how_many_decisions_over_what_time() -> None:
    records = [decision(0, timestamp_ns=1_500_000), decision(1, timestamp_ns=2_000_000)]
    text = render_report_html(page_of(records), name="r").decode()
    assert (
        "<strong>2</strong> decision(s), from 1970-01-01 00:00:00.001500000 UTC to"
        " 1970-01-01 00:00:00.002000000 UTC (500 µs); 0 pending" in text
    )
    empty = render_report_html(page_of([]), name="r").decode()
    assert "<strong>0</strong> decision(s); 0 pending" in empty


def test_a_run_without_decisions_has_a_page_without_charts() -> None:
    parsed = _parse(render_report_html(page_of([]), name="empty.mcap"))
    assert json.loads(parsed.scripts[0][1]) == []
    assert json.loads(parsed.scripts[1][1])["count"] == 0


def test_the_table_data_splits_the_first_time_for_javascript() -> None:
    stamp = 1_767_225_600_123_456_789
    page = page_of([decision(0, timestamp_ns=stamp), decision(1, timestamp_ns=stamp + 5)])
    data = json.loads(_parse(render_report_html(page, name="r")).scripts[1][1])
    # Milliseconds fit a JavaScript number exactly; the nanoseconds below them ride apart.
    assert (data["first_ms"], data["first_rest_ns"]) == (1_767_225_600_123, 456_789)
    assert data["offset_ns"] == [0, 5]


def test_the_charts_are_drawn_from_the_aggregates() -> None:
    records = varied_records(70)
    approvals = [ApprovalTraceRecord(records[4].decision_id, "approved", 3 * 10**9)]
    data = render_report_html(page_of(records, approvals=approvals), name="r")
    charts = json.loads(_parse(data).scripts[0][1])
    assert [chart["id"] for chart in charts] == [
        "chart-timeline", "chart-latency", "chart-stages", "chart-waits", "chart-rules",
    ]  # fmt: skip
    timeline = charts[0]["figure"]
    assert sum(sum(trace["y"]) for trace in timeline["data"]) == 70


# --- the figures ---------------------------------------------------------------------------------


def test_a_label_shows_exactly_its_text_in_plotly() -> None:
    assert markup_text("<b>&amp;</b>") == "&lt;b&gt;&amp;amp;&lt;/b&gt;"
    assert markup_text("plain") == "plain"


def test_the_timeline_leaves_out_verdicts_without_decisions() -> None:
    figure = timeline_figure(
        Timeline(start_ns=0, width_ns=2_000_000, counts=(("deny", (1, 0)), ("allow", (0, 0))))
    )
    (trace,) = figure["data"]
    assert (trace["name"], trace["y"], trace["x"], trace["width"]) == ("deny", [1, 0], [1, 3], 2)
    assert figure["layout"]["xaxis"]["title"]["text"] == (
        "milliseconds since 1970-01-01 00:00:00.000000000 UTC"
    )


def test_durations_are_shown_as_shares_of_their_series() -> None:
    from analysis._report_bins import histogram

    found = histogram({"deny": [1, 3, 3, 3], "allow": [3]})
    assert found is not None
    figure = duration_figure(found, colors={"deny": "#000000"}, share_of="x")
    allow, deny = figure["data"]  # no order given: by name
    assert (deny["y"], deny["customdata"]) == ([25.0, 75.0], [1, 3])
    assert (allow["y"], allow["customdata"]) == ([0.0, 100.0], [0, 1])
    assert deny["marker"]["color"] == "#000000"
    assert allow["marker"]["color"] != "#000000"


def test_the_rule_chart_names_the_rest_and_the_default() -> None:
    figure = rules_figure(RuleCounts(top=(("a", 5), ("a", 2)), other_rules=3, other_decisions=4,
                                     default_decisions=6))  # fmt: skip
    assert figure is not None
    (bars,) = figure["data"]
    assert bars["x"] == [5, 2, 4, 6]
    assert bars["y"] == [0, 1, 2, 3]  # rules that print alike keep a bar each
    assert figure["layout"]["yaxis"]["ticktext"] == [
        "a", "a", "(3 other rules)", "(no rule: the policy default)",
    ]  # fmt: skip
    assert rules_figure(RuleCounts((), 0, 0, 0)) is None
    only_default = rules_figure(RuleCounts((), 0, 0, 2))
    assert only_default is not None
    assert only_default["layout"]["yaxis"]["ticktext"] == ["(no rule: the policy default)"]


@pytest.mark.parametrize(
    ("width", "unit"),
    [
        (1, "nanoseconds"), (999, "nanoseconds"), (1_000, "microseconds"),
        (5_000_000, "milliseconds"), (10**9, "seconds"), (59 * 10**9, "seconds"),
        (60 * 10**9, "minutes"), (3_600 * 10**9, "hours"), (86_400 * 10**9, "days"),
        (0, "nanoseconds"),
    ],
)  # fmt: skip
def test_the_time_axis_unit_fits_the_bin_width(width: int, unit: str) -> None:
    assert time_unit(width)[1] == unit


@pytest.mark.parametrize(
    ("ns", "text"),
    [
        (0, "0 ns"), (999, "999 ns"), (1_000, "1 µs"), (52_000, "52 µs"), (1_234_567, "1.23 ms"),
        (10**9, "1 s"), (600 * 10**9, "600 s"), (-2_000, "-2 µs"),
    ],
)  # fmt: skip
def test_durations_read_at_a_glance(ns: int, text: str) -> None:
    assert format_duration(ns) == text
