"""An agent process for the cross-process approval tests: a real gate, MCAP sink and SQLite store.

    python -m tests.e2e.approval_agent hold STORE MCAP VERB AMOUNT
    python -m tests.e2e.approval_agent resume STORE MCAP DECISION_ID
    python -m tests.e2e.approval_agent crowd STORE MCAP THREADS TASKS

Every event is one JSON line on stdout, flushed at once, so that a test can
read it while the agent still waits:

* ``hold``: checks one action (``VERB`` on ``payments:stripe``), prints
  ``{"event": "pending", ...}`` (decision id and address, run id), waits for
  the decision through ``gate.approvals.wait`` (real clock), executes it when
  approved, prints ``{"event": "resolved", ...}`` and closes its sink.
* ``resume``: opens a new run over the same store (a restarted agent), waits
  for ``DECISION_ID`` (an earlier run's decision), executes it when approved,
  prints ``resolved`` and closes.
* ``crowd``: ``THREADS`` threads and ``TASKS`` asyncio tasks share one gate,
  sink and store. Each holds one decision and prints ``pending`` with the
  ``by`` that should resolve it: ``"thread"`` (a resolver thread here does),
  ``"cli"`` (the test does, with ``ghost approvals``) or ``"expiry"`` (a rule
  of half a second). Then all wait; ``{"event": "done", "outcomes": {...}}``.

Exit 0 when the run closed; an exception is a traceback and exit 1.
"""

from __future__ import annotations

import asyncio
import json
import sys
import threading
from pathlib import Path
from typing import Any

from audit import McapAuditSink
from runtime import Action, Approval, Decision, Gate, Policy, SqliteApprovalStore

POLL_S = 0.05
WAIT_S = 60.0  # every wait is bounded: a test that loses the agent still ends

AGENT_POLICY: dict[str, Any] = {
    "policy_id": "approval-agent",
    "default": "deny",
    "rules": [
        {
            "id": "refunds",
            "verbs": ["refund"],
            "resources": ["payments:*"],
            "effect": "approval",
            "approval": {"timeout_s": 120, "approvers": ["alice", "bob"]},
        },
        {
            "id": "quick",
            "verbs": ["quick"],
            "resources": ["payments:*"],
            "effect": "approval",
            "approval": {"timeout_s": 0.5, "approvers": ["alice"]},
        },
        {"id": "search", "verbs": ["search"], "effect": "allow"},
    ],
}


_STDOUT = threading.Lock()


def _emit(event: str, **fields: Any) -> None:
    # One write per line under a lock: ``print`` writes the text and its newline
    # separately, so two threads printing at once can share one line.
    line = json.dumps({"event": event, **fields}, sort_keys=True) + "\n"
    with _STDOUT:
        sys.stdout.write(line)
        sys.stdout.flush()


def _action(verb: str, amount: int) -> Action:
    return Action("support", verb, "payments:stripe", {"amount": amount, "currency": "EUR"})


def _open(store_path: str, mcap_path: str) -> tuple[Gate, McapAuditSink, SqliteApprovalStore]:
    store = SqliteApprovalStore(store_path)
    sink = McapAuditSink(Path(mcap_path))
    gate = Gate(Policy.from_dict(AGENT_POLICY), sink=sink, approvals=store, approval_poll_s=POLL_S)
    return gate, sink, store


def _pending(decision: Decision, sink: McapAuditSink, **extra: Any) -> None:
    assert decision.verdict == "pending", decision.reason
    _emit(
        "pending",
        decision_id=decision.decision_id,
        decision_sha256=decision.decision_sha256,
        run_id=sink.run_id,
        **extra,
    )


def _resolved(gate: Gate, approval: Approval, args: Any) -> None:
    executed = gate.approvals.execute(approval, args) if approval.approved else None
    _emit(
        "resolved",
        decision_id=approval.decision_id,
        outcome=approval.outcome,
        approver=approval.approver,
        final_verdict=approval.final_verdict.value,
        decision_run_id=approval.decision_run_id,
        approval_sha256=approval.approval_sha256,
        executed=executed,
    )


def hold(store_path: str, mcap_path: str, verb: str, amount: str) -> None:
    gate, sink, store = _open(store_path, mcap_path)
    with store, sink:
        decision = gate.check(_action(verb, int(amount)))
        _pending(decision, sink)
        approval = gate.approvals.wait(decision.decision_id, timeout_s=WAIT_S)
        _resolved(gate, approval, decision.args)


def resume(store_path: str, mcap_path: str, decision_id: str) -> None:
    gate, sink, store = _open(store_path, mcap_path)
    with store, sink:
        _emit("started", run_id=sink.run_id)
        approval = gate.approvals.wait(decision_id, timeout_s=WAIT_S)
        # A restarted agent rebuilds the arguments it would run from its own state;
        # here they are the ones the first run held (the test's refund of 250).
        _resolved(gate, approval, {"amount": 250, "currency": "EUR"})


def _by(index: int) -> tuple[str, str]:
    """Who resolves the decision of agent ``index``, and the verb that makes it pending."""
    kind = ("thread", "cli", "expiry")[index % 3]
    return kind, "quick" if kind == "expiry" else "refund"


def crowd(store_path: str, mcap_path: str, threads: str, tasks: str) -> None:
    gate, sink, store = _open(store_path, mcap_path)
    n_threads, n_tasks = int(threads), int(tasks)
    outcomes: dict[str, str] = {}
    lock = threading.Lock()
    for_thread: list[str] = []
    wanted = sum(_by(i)[0] == "thread" for i in range(n_threads + n_tasks))
    handed = threading.Condition(lock)

    def held(index: int, decision: Decision) -> None:
        kind, _ = _by(index)
        _pending(decision, sink, by=kind, index=index)
        if kind == "thread":
            with handed:
                for_thread.append(decision.decision_id)
                handed.notify_all()

    def done(approval: Approval, args: Any) -> None:
        if approval.approved:
            gate.approvals.execute(approval, args)
        with lock:
            outcomes[approval.decision_id] = approval.outcome

    def agent_thread(index: int) -> None:
        _, verb = _by(index)
        decision = gate.check(_action(verb, 100 + index))
        held(index, decision)
        gate.check(Action("researcher", "search", "tool:web", {"query": "q"}))
        done(gate.approvals.wait(decision.decision_id, timeout_s=WAIT_S), decision.args)

    async def agent_task(index: int) -> None:
        _, verb = _by(index)
        decision = await gate.acheck(_action(verb, 100 + index))
        held(index, decision)
        await gate.acheck(Action("researcher", "search", "tool:web", {"query": "q"}))
        approval = await gate.approvals.wait_async(decision.decision_id, timeout_s=WAIT_S)
        done(approval, decision.args)

    async def all_tasks() -> None:
        await asyncio.gather(*(agent_task(n_threads + i) for i in range(n_tasks)))

    def resolver() -> None:
        # A human at this process's console: approves even, rejects odd (in hand-over order).
        resolved = 0

        def handed_over() -> bool:
            return len(for_thread) > resolved

        while resolved < wanted:
            with handed:
                if not handed.wait_for(handed_over, timeout=WAIT_S):
                    raise TimeoutError("the agents never handed over their decisions")
                decision_id = for_thread[resolved]
            gate.approvals.resolve(decision_id, approved=resolved % 2 == 0, approver="bob")
            resolved += 1

    with store, sink:
        workers = [threading.Thread(target=agent_thread, args=(i,)) for i in range(n_threads)]
        workers.append(threading.Thread(target=lambda: asyncio.run(all_tasks())))
        workers.append(threading.Thread(target=resolver))
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join(timeout=WAIT_S)
            assert not worker.is_alive(), "an agent never finished"
        _emit("done", outcomes=outcomes, run_id=sink.run_id)


def main(argv: list[str]) -> int:
    command, *rest = argv
    if command == "hold":
        hold(*rest)
    elif command == "resume":
        resume(*rest)
    else:
        crowd(*rest)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
