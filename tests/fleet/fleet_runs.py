"""A fleet of small real runs, written through the real gate and sink, some of them damaged.

`write_fleet` writes ``count`` runs over several days through `Gate` +
`McapAuditSink` (each run a different mix of the five actions of
`tests.analysis.stored_run.ACTIONS`, the pending one resolved by alice),
then damages a few as an attacker or a crash would: bytes flipped inside
a record (a decision's reason, a deny's verdict, a denied action's resource), one
file cut short, one file that is not MCAP at all.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

from audit import McapAuditSink
from runtime import Gate, Policy
from runtime.testing import ManualClock
from tests.analysis.stored_run import ACTIONS
from tests.records import STAMP_NS
from tests.runtime.conftest import POLICY

__all__ = ["DAY_NS", "FLIPS", "write_fleet", "write_gate_fleet_run"]

DAY_NS: Final = 86_400 * 1_000_000_000

FLIPS: Final = (
    (b'"reason":"', b'"reason":"#'),  # the first decision's reason: still readable, chain broken
    (b'"verdict":"deny"', b'"verdict":"denx"'),  # a deny no reader can count
    # The denied action's assessment names another resource: still readable, chain broken.
    (b'"resource":"file:/data/x"', b'"resource":"file:/data/y"'),
)
"""Tampering, in place and length-preserving: (bytes found, bytes written over them)."""


def write_gate_fleet_run(path: Path, index: int, *, every_action: bool = False) -> Path:
    """Write run ``index`` of a fleet: day ``index % 3``, a mix of actions chosen by ``index``.

    With ``every_action``, all five actions, in order.
    """
    start = STAMP_NS + (index % 3) * DAY_NS + index * 1_000_000
    sink = McapAuditSink(path, clock=ManualClock(time_ns=start))
    gate = Gate(
        Policy.from_dict(POLICY), sink=sink, clock=ManualClock(time_ns=start, step_ns=1_000 + index)
    )
    chosen = [action for position, action in enumerate(ACTIONS) if (index >> position) & 1 == 0]
    for action in ACTIONS if every_action else chosen or ACTIONS:
        decision = gate.check(action)
        if decision.verdict.value == "pending":
            gate.approvals.resolve(decision.decision_id, approved=index % 2 == 0, approver="alice")
    sink.close()
    return path


def write_fleet(directory: Path, count: int = 50) -> dict[str, str]:
    """Write ``count`` runs into ``directory``; return each file's name -> what was done to it.

    The last five: three tampered (`FLIPS`), one truncated (cut at 60 %), one
    not MCAP. The others are intact.
    """
    kinds: dict[str, str] = {}
    for index in range(count - 2):
        path = write_gate_fleet_run(
            directory / f"run-{index:03d}.mcap", index, every_action=index >= count - 5
        )
        kinds[path.name] = "intact"
    for (found, written), index in zip(FLIPS, range(count - 5, count - 2), strict=True):
        path = directory / f"run-{index:03d}.mcap"
        data = path.read_bytes()
        at = data.index(found)
        path.write_bytes(data[:at] + written + data[at + len(written) :])
        kinds[path.name] = "tampered"
    cut = write_gate_fleet_run(directory / f"run-{count - 2:03d}.mcap", count - 2)
    data = cut.read_bytes()
    cut.write_bytes(data[: len(data) * 6 // 10])
    kinds[cut.name] = "truncated"
    foreign = directory / f"run-{count - 1:03d}.mcap"
    foreign.write_bytes(b"this is not an MCAP file\n" * 40)
    kinds[foreign.name] = "unreadable"
    return kinds
