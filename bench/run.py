"""Gate overhead, measured as ratios against a peer timed in the same run.

Peer: the least any auditing layer must do per call — encode the arguments
canonically and hash them (`runtime.value_sha256`). The gate does that and
also matches rules, narrows, scrubs, traces and writes two chained records.
Ratios, not absolute times, are what compare across machines; the absolute
numbers are printed for context only.

Run with ``make bench``; results go to BENCHMARKS.md.
"""

from __future__ import annotations

import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import structlog

from analysis._demo import demo_policy_path
from audit import McapAuditSink, MemoryAuditSink
from runtime import Action, Gate, Policy, value_sha256

ROUNDS = 7
CALLS = 2_000

ACTIONS = [
    Action("support", "query", "db:customers", {"table": "customers", "limit": 500, "where": "x"}),
    Action("researcher", "search", "tool:web_search", {"query": "refund policy best practice"}),
    Action("support", "send", "mail:c", {"to": "a@example.com", "body": "your refund is sent"}),
    Action("support", "refund", "payments:stripe", {"amount": 20, "currency": "EUR"}),
]


def per_call_ns(fn: Callable[[Action], object]) -> float:
    """Median over rounds of the mean time per call."""
    samples = []
    for _ in range(ROUNDS):
        start = time.perf_counter_ns()
        for i in range(CALLS):
            fn(ACTIONS[i % len(ACTIONS)])
        samples.append((time.perf_counter_ns() - start) / CALLS)
    return statistics.median(samples)


def main() -> None:
    structlog.configure(logger_factory=structlog.PrintLoggerFactory(sys.stderr))
    policy = Policy.from_toml(demo_policy_path())
    peer = per_call_ns(lambda a: value_sha256(a.args))
    # validate=False: the memory sink's field-by-field schema check is for tests,
    # and would be measured here instead of the gate.
    memory_gate = Gate(policy, sink=MemoryAuditSink(validate=False))
    results = {"gate + memory sink (validate=False)": per_call_ns(memory_gate.check)}
    with tempfile.TemporaryDirectory() as tmp:
        for mode in ("process", "chunk"):
            with McapAuditSink(Path(tmp) / f"{mode}.mcap", durability=mode) as sink:  # type: ignore[arg-type]
                results[f"gate + MCAP sink ({mode})"] = per_call_ns(Gate(policy, sink=sink).check)
    lines = [
        "# Benchmarks",
        "",
        "Produced by `make bench` (`python bench/run.py`); ratios are against the peer",
        "measured in the same run: canonical encoding + SHA-256 of the arguments",
        "(`runtime.value_sha256`), the floor for any auditing layer.",
        "",
        (
            f"Python {platform.python_version()} on {platform.machine()},"
            f" {ROUNDS} rounds x {CALLS} calls, median of per-round means."
        ),
        "",
        "| what | per call (µs) | ratio to peer |",
        "|---|---:|---:|",
        f"| peer: value_sha256(args) | {peer / 1000:.1f} | 1.0 |",
    ]
    lines += [f"| {name} | {ns / 1000:.1f} | {ns / peer:.1f} |" for name, ns in results.items()]
    text = "\n".join(lines) + "\n"
    Path("BENCHMARKS.md").write_text(text)
    sys.stdout.write(text)


if __name__ == "__main__":
    main()
