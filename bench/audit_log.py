"""What the audit log costs per decision: bytes on disk and microseconds, per durability mode.

Each row runs the real gate (`runtime.Gate` under the bundled demo policy)
into a real `audit.McapAuditSink` for ``decisions`` checks, then seals the
file. A decision is one ``check``: an assessment and a decision record, plus
a share of the checkpoints (one per 100 records by default; none from the
1-second timer during a short run) and of the run header and seal. Bytes
are the sealed file's size divided by the number of decisions; time is the
median over ``rounds`` of the wall time of the checks and the close,
divided likewise. ``signed`` runs sign every checkpoint note with an
Ed25519 key. ``fsync`` rows measure this machine's disk as much as ghost.

Use `audit_log_rows` from ``bench/run.py``, or run this file for a table.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from analysis._demo import demo_policy_path
from audit import Durability, McapAuditSink
from bench._harness import Row, Section
from runtime import Action, Gate, Policy

__all__ = ["AuditLogRow", "audit_log_rows", "main", "run"]

_ACTIONS = [
    Action("support", "query", "db:customers", {"table": "customers", "limit": 500, "where": "x"}),
    Action("researcher", "search", "tool:web_search", {"query": "refund policy best practice"}),
    Action("support", "send", "mail:c", {"to": "a@example.com", "body": "your refund is sent"}),
    Action("support", "refund", "payments:stripe", {"amount": 20, "currency": "EUR"}),
]
_MODES: tuple[Durability, ...] = ("process", "fsync", "chunk")


@dataclass(frozen=True, slots=True)
class AuditLogRow:
    """One measured configuration.

    Attributes:
        durability: the sink's mode.
        signed: whether checkpoint notes were signed.
        decisions: how many checks the run held.
        bytes_per_decision: sealed file size / decisions.
        us_per_decision: median wall time per check (close included), in microseconds.
    """

    durability: Durability
    signed: bool
    decisions: int
    bytes_per_decision: float
    us_per_decision: float


def _one_run(path: Path, durability: Durability, policy: Policy, *, signed: bool, n: int) -> int:
    key = Ed25519PrivateKey.generate() if signed else None
    sink = McapAuditSink(path, durability=durability, signing_key=key)
    gate = Gate(policy, sink=sink)
    start = time.perf_counter_ns()
    for index in range(n):
        gate.check(_ACTIONS[index % len(_ACTIONS)])
    sink.close()
    return time.perf_counter_ns() - start


def audit_log_rows(
    decisions: int = 2_000, rounds: int = 3, modes: tuple[Durability, ...] = _MODES
) -> list[AuditLogRow]:
    """Measure bytes and microseconds per decision for each mode, unsigned and signed.

    Args:
        decisions: checks per run.
        rounds: runs per configuration; the median time is kept.
        modes: the durability modes to measure.

    Returns:
        One row per (mode, signed), modes in the order given, unsigned first.
    """
    policy = Policy.from_toml(demo_policy_path())
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for durability in modes:
            for signed in (False, True):
                times, size = [], 0
                for round_index in range(rounds):
                    path = Path(tmp) / f"{durability}-{signed}-{round_index}.mcap"
                    times.append(_one_run(path, durability, policy, signed=signed, n=decisions))
                    size = path.stat().st_size
                rows.append(
                    AuditLogRow(
                        durability=durability,
                        signed=signed,
                        decisions=decisions,
                        bytes_per_decision=size / decisions,
                        us_per_decision=statistics.median(times) / decisions / 1000,
                    )
                )
    return rows


def run(*, quick: bool = False) -> list[Section]:
    """The section for BENCHMARKS.md: bytes and µs per decision, by mode, signed or not."""
    measured = audit_log_rows(decisions=500 if quick else 2_000, rounds=1 if quick else 3)
    rows: list[Row] = []
    for row in measured:
        label = f"{row.durability}{', signed' if row.signed else ''}"
        rows.append(Row(f"{label}: bytes per decision", row.bytes_per_decision, "B"))
        rows.append(Row(f"{label}: time per decision", row.us_per_decision, "µs"))
    return [
        Section(
            "What the audit log costs per decision",
            "A real gate under the demo policy into a real `McapAuditSink`, sealed: the file's"
            " size and the wall time of the checks and the close, per decision (an"
            " assessment, a decision, and a share of checkpoints, header and seal)."
            " `process` and `fsync` write one indexed chunk per record, so that every"
            " indexed reader lists every message; `fsync` rows measure this disk too.",
            tuple(rows),
        )
    ]


def main() -> None:
    """Print the rows as a Markdown table."""
    lines = [
        "| durability | signed | bytes / decision | µs / decision |",
        "|---|---|---:|---:|",
    ]
    lines += [
        f"| {row.durability} | {'yes' if row.signed else 'no'} |"
        f" {row.bytes_per_decision:.0f} | {row.us_per_decision:.1f} |"
        for row in audit_log_rows()
    ]
    sys.stdout.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
