"""``ghost report`` at scale: build time, page size and browser load time for many decisions.

The report of a run must stay usable at a million decisions (issue 8): the
charts come from aggregates whose size does not grow with the run, and the
table embeds the decisions as dictionary-encoded columns and draws one page of
rows at a time. This benchmark builds a synthetic `DecisionTraceReport` (the
run's reading is `bench.verify`'s subject, not this one's), with a realistic
mix of verdicts, agents, verbs, rules and latencies and a chosen number of
distinct resources, then measures:

* the aggregation (`build_report_page`) and the rendering (`render_report_html`);
* the page's size, and its bytes per decision;
* in headless Chromium (Debian's ``/usr/bin/chromium`` driven by playwright;
  skipped when either is missing): the time from navigation until every chart
  is drawn and the first page of the table is shown, then one search and one
  sort by resource over every decision.

Run it with ``python -m bench.report [--decisions N] [--resources N]``. Not part of
``make bench`` (it needs the ``report`` extra and a browser).
"""

from __future__ import annotations

import argparse
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

from analysis import ChainStatus, DecisionTraceRecord, DecisionTraceReport
from analysis._report_data import build_report_page
from analysis._report_html import render_report_html
from analysis._trace_model import ANALYSIS_VERSION
from analysis._verify_model import RunStatus, RunVerification
from bench._harness import Row, Section
from tools.report_browser import CHROMIUM_ARGS

__all__ = ["load_in_chromium", "run", "synthetic_report"]

_VERDICTS = ("allow",) * 14 + ("narrow", "scrub", "scrub", "pending", "deny", "deny")
_AGENTS = tuple(f"agent-{index}" for index in range(10))
_VERBS = ("read", "query", "search", "send", "refund", "fetch", "write", "delete")
_RULES = (None, *(f"rule-{index:02d}" for index in range(30)))
_STAMP_NS = 1_767_225_600_000_000_000
_SHA = "a" * 64


def synthetic_report(decisions: int, resources: int, *, seed: int = 8) -> DecisionTraceReport:
    """A report of ``decisions`` decisions over ``resources`` distinct resources."""
    chooser = random.Random(seed)
    records = []
    stamp = _STAMP_NS
    for index in range(decisions):
        stamp += chooser.randrange(1_000, 2_000_000)
        latency = int(chooser.lognormvariate(11.5, 0.8))
        records.append(
            DecisionTraceRecord(
                timestamp_ns=stamp,
                decision_kind=chooser.choice(_VERDICTS),  # type: ignore[arg-type]
                decision_reason="synthetic",
                policy_id="bench",
                claimed_assessment_sha256=_SHA,
                recomputed_assessment_sha256=_SHA,
                chain_status=ChainStatus.VERIFIED,
                analysis_version=ANALYSIS_VERSION,
                decision_id=f"d-{index}",
                matched_policy=chooser.choice(_RULES),
                trace_id="0" * 32,
                latency_ns=latency,
                agent=chooser.choice(_AGENTS),
                verb=chooser.choice(_VERBS),
                resource=f"file:/data/customers/{chooser.randrange(resources):07d}/record.json",
                stage_ns={"policy": latency // 4, "narrow": latency // 16, "scrub": latency // 3},
            )
        )
    return DecisionTraceReport.from_records(records, source_mcap_sha256=_SHA, sealed=True)


def _verification() -> RunVerification:
    return RunVerification(
        path=Path("bench.mcap"),
        source_sha256=_SHA,
        status=RunStatus.INTACT,
        problems=(),
        problem_count=0,
        truncated=False,
        sealed=True,
        record_count=0,
        verified_prefix=0,
        verified_head_sha256=None,
        per_topic_counts={},
        run_id=None,
        open_assessments=0,
        signed=False,
    )


def load_in_chromium(page_path: Path) -> dict[str, float] | None:
    """Seconds to load ``page_path`` until ready, to search and to sort; None without a browser."""
    chromium = shutil.which("chromium")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        return None
    if chromium is None:
        return None
    with sync_playwright() as driver:
        browser = driver.chromium.launch(executable_path=chromium, args=list(CHROMIUM_ARGS))
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        start = time.perf_counter()
        page.goto(page_path.as_uri(), timeout=300_000)
        page.wait_for_selector("body[data-ready=true]", timeout=300_000)
        loaded = time.perf_counter() - start
        # Navigation timing: the page parsed and its scripts run (the table drawn), in ms.
        interactive = page.evaluate(
            "() => performance.getEntriesByType('navigation')[0].domInteractive"
        )
        before = page.inner_text("#table-status")
        start = time.perf_counter()
        page.fill("#search", "0000123")
        page.wait_for_function(
            "before => document.getElementById('table-status').textContent !== before",
            arg=before,
            timeout=120_000,
        )
        searched = time.perf_counter() - start - 0.15  # the search box waits 150 ms for typing
        page.fill("#search", "")
        page.wait_for_function(
            "() => !document.getElementById('table-status').textContent.includes('in the run')"
        )
        start = time.perf_counter()
        page.click("th[data-column=resource] button")
        page.wait_for_selector("th[data-column=resource][aria-sort=ascending]", timeout=120_000)
        sorted_s = time.perf_counter() - start
        start = time.perf_counter()
        page.click("th[data-column=latency] button")
        page.wait_for_selector("th[data-column=latency][aria-sort=ascending]", timeout=120_000)
        sorted_latency = time.perf_counter() - start
        browser.close()
    return {
        "load": loaded,
        "interactive": interactive / 1e3,
        "search": searched,
        "sort": sorted_s,
        "sort_number": sorted_latency,
    }


def measure(decisions: int, resources: int) -> tuple[list[Row], list[str]]:
    """The rows and notes of one size."""
    start = time.perf_counter()
    report = synthetic_report(decisions, resources)
    made = time.perf_counter() - start
    start = time.perf_counter()
    page = build_report_page(_verification(), report)
    aggregated = time.perf_counter() - start
    start = time.perf_counter()
    data = render_report_html(page, name="bench.mcap")
    rendered = time.perf_counter() - start
    label = f"{decisions:,} decisions, {resources:,} resources"
    rows = [
        Row(f"build_report_page, {label}", aggregated, "s"),
        Row(f"render_report_html, {label}", rendered, "s"),
        Row(f"page size, {label}", len(data) / 1e6, "MB"),
        Row(f"page bytes per decision, {label}", len(data) / max(decisions, 1), "B"),
    ]
    notes = [f"{label}: the synthetic report took {made:.1f} s to build (not the report's cost)."]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "report.html"
        path.write_bytes(data)
        timings = load_in_chromium(path)
    if timings is None:
        notes.append("no chromium or playwright: the page was not loaded in a browser.")
    else:
        rows += [
            Row(f"chromium: load until drawn, {label}", timings["load"], "s"),
            Row(f"chromium: of which parsed, table shown, {label}", timings["interactive"], "s"),
            Row(f"chromium: search every decision, {label}", timings["search"], "s"),
            Row(f"chromium: sort by resource, {label}", timings["sort"], "s"),
            Row(f"chromium: sort by latency, {label}", timings["sort_number"], "s"),
        ]
    return rows, notes


def run(
    *, quick: bool = False, decisions: int | None = None, resources: int | None = None
) -> list[Section]:
    """The ``ghost report`` section."""
    sizes = [(decisions or (10_000 if quick else 1_000_000), resources or 10_000)]
    rows: list[Row] = []
    notes: list[str] = []
    for count, distinct in sizes:
        more_rows, more_notes = measure(count, distinct)
        rows += more_rows
        notes += more_notes
    return [
        Section(
            "ghost report at scale",
            (
                "Seconds to aggregate and render the HTML report of a synthetic run, the"
                " page's size, and headless Chromium's time to load it (until every chart"
                " is drawn and the table shown), to search and to sort every decision."
            ),
            tuple(rows),
            notes=tuple(notes),
        )
    ]


def main(argv: list[str] | None = None) -> int:
    """Print the section for the sizes asked."""
    from bench._harness import render

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="10,000 decisions")
    parser.add_argument("--decisions", type=int, help="how many decisions (default 1,000,000)")
    parser.add_argument("--resources", type=int, help="distinct resources (default 10,000)")
    args = parser.parse_args(argv)
    sections = run(quick=args.quick, decisions=args.decisions, resources=args.resources)
    sys.stdout.write(render(sections, header=["# ghost report at scale"]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
