"""Issue 11's budget row: what a limited rule costs a check (ADR 0032).

The same action — a refund of 20 EUR — through three gates that differ only
in their policy and counter store:

* **peer**: an allow rule alone (no limit: the check pays one attribute test);
* a limited ``deny`` rule beside it (`limit = { key = ["agent",
  "args.currency"], max_sum = "args.amount", ... }`) on the default
  `MemoryCounterStore`: key and amount read, one atomic reserve, one settle;
* the same on a `SqliteCounterStore` (WAL, ``synchronous = FULL``): two
  committed transactions per check (reserve, then settle), each synced.

Every gate writes to `McapAuditSink` in ``process`` mode, so the rows are
audited decisions. The limit is set so high that every check is allowed and
spends: the cost measured is the one every permitted action pays. Timed one
call at a time, interleaved round by round; percentiles are over every call.
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from audit import McapAuditSink
from bench._harness import Row, Section
from bench.decision import sampled
from runtime import Action, Gate, Policy, SqliteCounterStore

__all__ = ["run"]

_REFUND = Action("support", "refund", "payments:stripe", {"amount": 20, "currency": "EUR"})
_MAX_MEMORY_RATIO = 1.5
_ALLOW: Mapping[str, Any] = {"id": "refunds", "verbs": ["refund"], "effect": "allow"}
_LIMIT: Mapping[str, Any] = {
    "id": "refund-budget",
    "verbs": ["refund"],
    "effect": "deny",
    "limit": {
        "key": ["agent", "args.currency"],
        "window_s": 3600,
        "max_sum": "args.amount",
        "sum_max": 10**12,
    },
}


def _percentile(values: list[int], fraction: float) -> float:
    ordered = sorted(values)
    return float(ordered[min(len(ordered) - 1, int(fraction * len(ordered)))])


def run(*, quick: bool = False) -> list[Section]:
    """Time a check with and without a limited rule (module docstring).

    Args:
        quick: fewer rounds (a smoke run, for the tests).

    Returns:
        One section.
    """
    rounds, calls = (4, 10) if quick else (30, 40)
    plain = Policy.from_dict({"policy_id": "bench-budget", "rules": [dict(_ALLOW)]})
    limited = Policy.from_dict({"policy_id": "bench-budget", "rules": [dict(_LIMIT), _ALLOW]})
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        sinks = [McapAuditSink(folder / f"{name}.mcap") for name in ("plain", "memory", "sqlite")]
        counters = SqliteCounterStore(folder / "counters.db")
        gates = {
            "plain": Gate(plain, sink=sinks[0]),
            "memory": Gate(limited, sink=sinks[1]),
            "sqlite": Gate(limited, sink=sinks[2], counters=counters),
        }
        for name, gate in gates.items():
            if gate.check(_REFUND).verdict.value != "allow":
                raise RuntimeError(f"the {name} bench gate does not allow the refund")
        samples = sampled(
            {name: (lambda g=gate: g.check(_REFUND)) for name, gate in gates.items()},
            rounds=rounds,
            calls=calls,
        )
        for sink in sinks:
            sink.close()
        counters.close()
    return [_section(samples, rounds * calls)]


def _section(samples: dict[str, list[int]], checks: int) -> Section:
    p50 = {name: _percentile(values, 0.5) for name, values in samples.items()}
    p99 = {name: _percentile(values, 0.99) for name, values in samples.items()}
    memory = p50["memory"] / p50["plain"]
    return Section(
        "Budget: a limited rule's cost per check",
        "One refund (verdict: allow) through `Gate.check` with `McapAuditSink` (`process`"
        " mode). Peer: the same policy without its limited rule. The limited rule is a sum"
        " limit per agent and currency, never exceeded, so every check reserves and spends."
        " Per-call times.",
        (
            Row("peer: gate.check, no limit, p50", p50["plain"] / 1e3, "µs"),
            Row("peer: gate.check, no limit, p99", p99["plain"] / 1e3, "µs"),
            Row(
                "gate.check, limit on MemoryCounterStore, p50",
                p50["memory"] / 1e3,
                "µs",
                ratio=memory,
                target=f"≤ {_MAX_MEMORY_RATIO:.1f}× the peer's p50",
                holds=memory <= _MAX_MEMORY_RATIO,
            ),
            Row(
                "gate.check, limit on MemoryCounterStore, p99",
                p99["memory"] / 1e3,
                "µs",
                ratio=p99["memory"] / p99["plain"],
            ),
            Row(
                "gate.check, limit on SqliteCounterStore, p50",
                p50["sqlite"] / 1e3,
                "µs",
                ratio=p50["sqlite"] / p50["plain"],
            ),
            Row(
                "gate.check, limit on SqliteCounterStore, p99",
                p99["sqlite"] / 1e3,
                "µs",
                ratio=p99["sqlite"] / p99["plain"],
            ),
        ),
        notes=(
            (
                "The in-memory store adds the key's canonical JSON, two SHA-256/HMAC digests,"
                " a reservation under a lock (a deque and a running total: O(1)) and a settle."
                " The SQLite store adds two committed transactions, each synced"
                " (`synchronous = FULL`): that is the price of counts that survive a crash and"
                " are shared between processes. Its `SUM` reads the counter's entries in the"
                f" window, so it grows with them ({checks:,} here by the end)."
            ),
        ),
    )
