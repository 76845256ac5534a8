"""Approvals end to end: real MCAP runs, a restart, threads and asyncio, verify and report.

The store here is the in-memory one shared by two gates in one process, which
is what a restart looks like to the queue (the SQLite store, tested with its
own command line, makes the same happen across processes).
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from pathlib import Path
from typing import Any

from audit import McapAuditSink, read_run
from runtime import (
    Approval,
    Gate,
    MemoryApprovalStore,
    Policy,
    Resolution,
    canonical_bytes,
    check_resolution,
)
from runtime.testing import ManualClock
from tests.audit.mcap_tools import rewrite_mcap
from tests.e2e.test_cli import ghost
from tests.runtime.approvals import APPROVAL_POLICY, S, refund, search


def _report(path: Path) -> dict[str, Any]:
    result = ghost("trace-decisions", "--mcap", path, cwd=path.parent)
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert isinstance(document, dict)
    return document


def _approvals(path: Path) -> list[dict[str, Any]]:
    return [dict(r.record) for r in read_run(path).records if r.topic == "/approvals" and r.record]


def test_a_pending_approval_survives_a_restart_and_lands_in_the_new_run(tmp_path: Path) -> None:
    clock = ManualClock()
    store = MemoryApprovalStore()
    policy = Policy.from_dict(APPROVAL_POLICY)
    first_path, second_path = tmp_path / "first.mcap", tmp_path / "second.mcap"

    # The first run: three decisions held, then the process dies.
    first_sink = McapAuditSink(first_path)
    first = Gate(policy, sink=first_sink, clock=clock, approvals=store)
    to_approve = first.check(refund(100))
    clock.advance(1_000_000)  # distinct stamps: pending() lists oldest first
    to_expire = first.check(refund(5000))  # 60 s
    clock.advance(1_000_000)
    resolved_meanwhile = first.check(refund(300))
    first_run_id = first_sink.run_id
    assert first_run_id is not None
    # What a SIGKILL now would leave: the file as it is, unsealed. (The sink is then
    # closed, before anything is resolved, only to release the file.)
    crashed_path = tmp_path / "crashed.mcap"
    crashed_path.write_bytes(first_path.read_bytes())
    first_sink.close()

    # While no agent runs, an operator rejects one through the store (as the CLI does).
    clock.advance(10 * S)
    held, _ = store.get(resolved_meanwhile.decision_id)
    rejection = Resolution(resolved_meanwhile.decision_id, "rejected", "bob", clock.time_ns())
    check_resolution(held, rejection)
    store.resolve(rejection)

    # The restart: a new gate and a new run over the same store.
    with McapAuditSink(second_path) as second_sink:
        second = Gate(policy, sink=second_sink, clock=clock, approvals=store)
        # The rejection no log held was recorded as the new run began.
        assert [r["outcome"] for r in _approvals(second_sink.path)] == ["rejected"]
        waiting = [p.decision_id for p in second.approvals.pending()]
        assert waiting == [to_approve.decision_id, to_expire.decision_id]
        approval = second.approvals.resolve(to_approve.decision_id, approved=True, approver="alice")
        assert approval.decision_run_id == first_run_id
        assert second.approvals.execute(approval, to_approve.args) == dict(to_approve.args)
        clock.advance(60 * S)
        second.check(search())  # records the expiry
        second_run_id = second_sink.run_id

    records = _approvals(second_path)
    by_decision = {r["decision_id"]: r for r in records}
    assert [r["outcome"] for r in records] == ["rejected", "approved", "expired"]
    for decision in (to_approve, to_expire, resolved_meanwhile):
        record = by_decision[decision.decision_id]
        assert record["decision_sha256"] == decision.decision_sha256  # the original's address
        assert record["decision_run_id"] == first_run_id != second_run_id
    assert _approvals(first_path) == []
    assert store.unrecorded() == []
    assert store.pending() == []

    # Both runs verify: the crashed one as cut short, the others intact and sealed.
    assert ghost("verify", "--mcap", crashed_path, cwd=tmp_path).returncode == 4
    for path in (first_path, second_path):
        verified = ghost("verify", "--mcap", path, cwd=tmp_path)
        assert verified.returncode == 0, verified.stdout.decode()

    first_report, second_report = _report(crashed_path), _report(second_path)
    assert first_report["unresolved_pending_decision_ids"] == [
        to_approve.decision_id,
        to_expire.decision_id,
        resolved_meanwhile.decision_id,
    ]
    assert first_report["per_approval_outcome_counts"] == {}
    assert second_report["per_approval_outcome_counts"] == {
        "approved": 1,
        "expired": 1,
        "rejected": 1,
    }
    assert second_report["unresolved_pending_decision_ids"] == []

    # An approval edited to claim its decision is in this run is named by verify.
    def claim_this_run(topic: str, data: bytes) -> bytes:
        if topic != "/approvals":
            return data
        return canonical_bytes({**json.loads(data), "decision_run_id": second_run_id})

    edited = tmp_path / "edited.mcap"
    rewrite_mcap(second_path, edited, claim_this_run)
    result = ghost("verify", "--mcap", edited, cwd=tmp_path)
    assert result.returncode == 3
    assert b"its decision_run_id names this run" in result.stdout


def test_threads_and_tasks_share_one_gate_one_sink_one_store(tmp_path: Path) -> None:
    clock = ManualClock()
    path = tmp_path / "run.mcap"
    results: list[Approval] = []
    lock = threading.Lock()
    with McapAuditSink(path) as sink:
        gate = Gate(Policy.from_dict(APPROVAL_POLICY), sink=sink, clock=clock, approval_poll_s=0.01)

        def agent_thread(index: int) -> None:
            decision = gate.check(refund(100 + index))
            approval = gate.approvals.wait(decision.decision_id, timeout_s=60)
            if approval.approved:
                gate.approvals.execute(approval, decision.args)
            with lock:
                results.append(approval)

        async def agent_task(index: int) -> Approval:
            decision = await gate.acheck(refund(400 + index))
            await gate.acheck(search())
            return await gate.approvals.wait_async(decision.decision_id, timeout_s=60)

        async def tasks() -> list[Approval]:
            return list(await asyncio.gather(*(agent_task(i) for i in range(20))))

        threads = [threading.Thread(target=agent_thread, args=(i,)) for i in range(8)]
        for thread in threads:
            thread.start()
        loop_results: list[Approval] = []
        loop_thread = threading.Thread(target=lambda: loop_results.extend(asyncio.run(tasks())))
        loop_thread.start()

        # A human works through what waits, from this thread: approve, reject, leave one.
        seen: set[str] = set()
        while len(seen) < 28:
            for pending in gate.approvals.pending():
                if pending.decision_id in seen:
                    continue
                seen.add(pending.decision_id)
                if len(seen) % 7 == 0:
                    continue  # left to expire
                gate.approvals.resolve(
                    pending.decision_id, approved=len(seen) % 3 != 0, approver="alice"
                )
            time.sleep(0.001)
        clock.advance(600 * S)  # the ones left over expire
        for thread in threads:
            thread.join(timeout=60)
        loop_thread.join(timeout=60)
        results.extend(loop_results)

    assert len(results) == 28
    outcomes = {a.outcome for a in results}
    assert outcomes == {"approved", "rejected", "expired"}
    verified = ghost("verify", "--mcap", path, cwd=tmp_path)
    assert verified.returncode == 0, verified.stdout.decode()
    report = _report(path)
    assert report["unresolved_pending_decision_ids"] == []
    counts = report["per_approval_outcome_counts"]
    assert sum(counts.values()) == 28
    assert counts["expired"] == 4
