"""``ghost report`` in a real headless browser: every chart drawn, every decision there, no error.

Debian's Chromium is driven by playwright (``tools.report_browser``). When
Chromium is missing, the fixture installs Debian's package (as root, with
apt-get); where that cannot be done the tests are skipped with the reason.
Every page load also checks that the console logged no error, that no
dialog opened and that the page asked for nothing but itself.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from analysis import RunStatus, build_decision_trace_report
from analysis._printable import printable
from tests.analysis.report_pages import (
    HOSTILE_AGENT,
    HOSTILE_RESOURCE,
    HOSTILE_RULE,
    decision,
    page_of,
    varied_records,
)
from tests.e2e.test_cli import ghost

pytest.importorskip("plotly", reason="the report extra (plotly) is not installed")
pytest.importorskip("playwright.sync_api", reason="playwright is not installed (the test extra)")

from analysis._report_html import render_report_html
from tools.report_browser import PageEvents, find_chromium, launch, load_report

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

CHARTS = ["chart-timeline", "chart-latency", "chart-stages", "chart-waits", "chart-rules"]
_ROWS = "rows => rows.map(row => Array.from(row.cells).map(cell => cell.textContent))"
_CHARTS = """() => Array.from(document.querySelectorAll('.chart')).map(chart => ({
    id: chart.id,
    drawn: chart.getAttribute('data-drawn'),
    svgs: chart.querySelectorAll('svg.main-svg').length,
    bars: chart.querySelectorAll('.trace.bars .point path').length,
    values: (chart.data || []).reduce((n, trace) => n + (trace.x ? trace.x.length : 0), 0),
}))"""


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    chromium, why = find_chromium(install=True)
    if chromium is None:
        pytest.skip(f"no headless Chromium: {why}")
    with launch(chromium) as running:
        yield running


@pytest.fixture
def opened(browser: Browser) -> Iterator[Any]:
    """Open a report page; afterwards, check it behaved and close it."""
    pages: list[tuple[Page, PageEvents, str]] = []

    def open_page(path: Path) -> tuple[Page, PageEvents]:
        page, events = load_report(browser, path)
        pages.append((page, events, path.resolve().as_uri()))
        return page, events

    yield open_page
    for page, events, address in pages:
        page.close()
        assert events.errors == []
        assert events.dialogs == []
        assert events.refused == []
        assert set(events.requests) == {address}


def _rows(page: Page) -> list[list[str]]:
    rows: list[list[str]] = page.eval_on_selector_all("#decision-table tbody tr", _ROWS)
    return rows


def _status(page: Page) -> str:
    """The table's status line, its en dash spelt as a hyphen."""
    return page.inner_text("#table-status").replace("\u2013", "-")


def _wait_for_status(page: Page, before: str) -> str:
    page.wait_for_function(
        "before => document.getElementById('table-status').textContent.replace('\u2013', '-')"
        " !== before",
        arg=before,
    )
    return _status(page)


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("demo")
    run, html = folder / "demo.mcap", folder / "report.html"
    assert ghost("demo", "--out", run, cwd=folder).returncode == 0
    result = ghost("report", run, "--html", html, cwd=folder)
    assert result.returncode == 0, result.stderr
    return run, html


def test_the_demo_report_draws_every_chart_and_lists_every_decision(
    opened: Any, demo: tuple[Path, Path]
) -> None:
    run, html = demo
    page, _ = opened(html)
    report = build_decision_trace_report(run)

    charts = page.evaluate(_CHARTS)
    assert [chart["id"] for chart in charts] == CHARTS
    for chart in charts:
        assert chart["drawn"] == "true", chart
        assert chart["svgs"] > 0, chart
        assert chart["bars"] > 0, chart
    rules = {chart["id"]: chart for chart in charts}["chart-rules"]
    assert rules["bars"] == len(report.per_matched_policy_counts) + 1  # and the default's bar
    assert page.inner_text("#integrity h2") == "Integrity: INTACT"

    rows = _rows(page)
    assert len(rows) == report.total_decisions == 31
    assert [row[0] for row in rows] == [str(index + 1) for index in range(31)]
    assert [row[2] for row in rows] == [r.decision_kind.value for r in report.records]
    assert [row[3:7] for row in rows] == [
        [value or "—" for value in (r.agent, r.verb, r.resource, r.matched_policy)]
        for r in report.records
    ]
    assert {row[8] for row in rows} == {"verified"}
    assert _status(page) == "decisions 1-31 of 31 shown"


@pytest.fixture(scope="module")
def varied(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("varied") / "varied.html"
    path.write_bytes(render_report_html(page_of(varied_records(1_234)), name="varied.mcap"))
    return path


def test_the_table_pages_searches_filters_and_sorts(opened: Any, varied: Path) -> None:
    page, _ = opened(varied)
    records = varied_records(1_234)
    assert _status(page) == "decisions 1-50 of 1,234 shown"
    assert page.inner_text("#page-count") == "25"

    page.click("#page-next")
    assert _rows(page)[0][0] == "51"
    page.fill("#page-number", "25")
    page.dispatch_event("#page-number", "change")
    assert len(_rows(page)) == 1_234 - 24 * 50
    assert page.is_disabled("#page-next")

    # Search: a substring of the resource, in any case; file:/data/007.txt is every 97th.
    before = _status(page)
    page.fill("#search", "FILE:/Data/007")
    status = _wait_for_status(page, before)
    expected = [str(index + 1) for index in range(1_234) if index % 97 == 7]
    assert status == f"decisions 1-{len(expected)} of {len(expected)} shown (1,234 in the run)"
    assert [row[0] for row in _rows(page)] == expected
    page.fill("#search", "")
    _wait_for_status(page, status)

    # The verdict filter.
    before = _status(page)
    page.select_option("#filter-verdict", label="deny")
    denied = sum(1 for r in records if r.decision_kind.value == "deny")
    assert _wait_for_status(page, before) == f"decisions 1-50 of {denied} shown (1,234 in the run)"
    assert {row[2] for row in _rows(page)} == {"deny"}
    page.select_option("#filter-verdict", label="all")

    # Sorting: by latency up, then down; by resource, ties in stream order.
    def first_page(key: Any, *, reverse: bool = False) -> list[str]:
        ranked = sorted(range(1_234), key=lambda i: (key(records[i]), -i if reverse else i))
        return [str(i + 1) for i in (ranked[::-1] if reverse else ranked)[:50]]

    page.click("th[data-column=latency] button")
    assert [row[0] for row in _rows(page)] == first_page(lambda r: r.latency_ns)
    assert page.get_attribute("th[data-column=latency]", "aria-sort") == "ascending"
    page.click("th[data-column=latency] button")
    assert [row[0] for row in _rows(page)] == first_page(lambda r: r.latency_ns, reverse=True)
    assert page.get_attribute("th[data-column=latency]", "aria-sort") == "descending"
    page.click("th[data-column=resource] button")
    assert [row[0] for row in _rows(page)] == first_page(lambda r: r.resource)
    assert page.get_attribute("th[data-column=latency]", "aria-sort") is None


def test_text_from_the_run_is_shown_literally_and_never_runs(opened: Any, tmp_path: Path) -> None:
    records = [
        decision(0, agent=HOSTILE_AGENT, resource=HOSTILE_RESOURCE, matched_policy=HOSTILE_RULE),
        decision(1, decision_kind="deny", verb="<svg onload=alert(4)>"),
    ]
    problem = "<img src=x onerror=alert(5)> </script><script>alert(6)</script>"
    page_data = page_of(records, status=RunStatus.TAMPERED, problems=[problem])
    path = tmp_path / "hostile.html"
    path.write_bytes(render_report_html(page_data, name="<img src=x onerror=alert(7)>.mcap"))

    page, events = opened(path)

    assert page.evaluate("() => document.querySelectorAll('img, svg [onload]').length") == 0
    assert page.inner_text("#integrity h2") == "Integrity: TAMPERED"
    assert page.inner_text("#integrity li") == f"file: chain: {problem}"
    assert page.inner_text("header .file") == "<img src=x onerror=alert(7)>.mcap"
    rows = _rows(page)
    assert rows[0][3] == printable(HOSTILE_AGENT)
    assert "\\ud800" in rows[0][3]  # a lone surrogate, shown escaped
    assert rows[0][5] == HOSTILE_RESOURCE
    assert rows[0][6] == HOSTILE_RULE
    assert rows[1][4] == "<svg onload=alert(4)>"
    ticks = page.eval_on_selector_all(
        "#chart-rules .ytick text", "ticks => ticks.map(t => t.textContent)"
    )
    assert HOSTILE_RULE in ticks  # plotly shows the rule's markup as text
    assert events.dialogs == []
