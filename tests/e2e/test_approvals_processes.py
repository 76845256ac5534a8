"""Approvals across real processes: an agent, the SQLite store, real MCAP runs, the ``ghost`` CLI.

The agent is ``tests/e2e/approval_agent.py`` in its own interpreter (real
clock, poll interval 0.05 s); the operator is ``ghost approvals`` in another.
Only the store's file and the MCAP files pass between them.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
from collections import Counter
from pathlib import Path
from typing import IO, Any

from audit import read_run
from tests.e2e.test_cli import ghost

ROOT = Path(__file__).resolve().parents[2]
LINE_TIMEOUT_S = 60.0


class Agent:
    """An approval agent subprocess whose JSON lines are read with a timeout."""

    def __init__(self, *args: str | Path, cwd: Path) -> None:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "src")])}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.e2e.approval_agent", *map(str, args)],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        self._lines: queue.Queue[bytes] = queue.Queue()
        assert self.process.stdout is not None
        self._reader = threading.Thread(target=self._read, args=(self.process.stdout,), daemon=True)
        self._reader.start()
        del cwd  # the agent runs from the repository root (it imports tests.*)

    def _read(self, stream: IO[bytes]) -> None:
        for line in stream:
            self._lines.put(line)
        self._lines.put(b"")

    def event(self) -> dict[str, Any]:
        """The next JSON line (fails the test when the agent ends or stays silent first)."""
        try:
            line = self._lines.get(timeout=LINE_TIMEOUT_S)
        except queue.Empty:
            self.kill()
            raise AssertionError("the agent printed nothing in time") from None
        if not line:
            raise AssertionError(f"the agent ended early: {self.finish()!r}")
        event = json.loads(line)
        assert isinstance(event, dict)
        return event

    def finish(self) -> bytes:
        """Wait for the agent to exit 0; return its stderr."""
        try:
            _, stderr = self.process.communicate(timeout=LINE_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.kill()
            raise
        assert self.process.returncode == 0, stderr.decode(errors="replace")
        return stderr

    def kill(self) -> None:
        """SIGKILL the agent and reap it."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
        self.process.communicate(timeout=LINE_TIMEOUT_S)


def _approvals(path: Path) -> list[dict[str, Any]]:
    return [dict(r.record) for r in read_run(path).records if r.topic == "/approvals" and r.record]


def _decisions(path: Path) -> dict[str, dict[str, Any]]:
    return {
        r.record["decision_id"]: {**r.record, "address": r.sha256}
        for r in read_run(path).records
        if r.topic == "/decisions" and r.record
    }


def _listed(store: Path, cwd: Path) -> list[str]:
    result = ghost("approvals", "list", "--store", store, cwd=cwd)
    assert result.returncode == 0, result.stderr
    return [line.split()[0] for line in result.stdout.decode().splitlines()]


def _report(path: Path) -> dict[str, Any]:
    result = ghost("trace-decisions", "--mcap", path, cwd=path.parent)
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert isinstance(document, dict)
    return document


def _verify(path: Path) -> int:
    return ghost("verify", "--mcap", path, cwd=path.parent).returncode


def test_an_operator_approves_from_the_cli_while_the_agent_waits(tmp_path: Path) -> None:
    store, run = tmp_path / "approvals.db", tmp_path / "run.mcap"
    agent = Agent("hold", store, run, "refund", "250", cwd=tmp_path)
    try:
        pending = agent.event()
        assert pending["event"] == "pending"
        decision_id = pending["decision_id"]
        assert _listed(store, tmp_path) == [decision_id]
        approved = ghost(
            "approvals",
            "approve",
            decision_id,
            "--store",
            store,
            "--approver",
            "alice",
            cwd=tmp_path,
        )
        assert approved.returncode == 0, approved.stderr
        resolved = agent.event()
        agent.finish()
    finally:
        agent.kill()
    assert resolved["outcome"] == "approved"
    assert resolved["approver"] == "alice"
    assert resolved["executed"] == {"amount": 250, "currency": "EUR"}
    assert _listed(store, tmp_path) == []

    assert _verify(run) == 0
    (record,) = _approvals(run)
    decision = _decisions(run)[decision_id]
    assert record["decision_sha256"] == decision["address"] == pending["decision_sha256"]
    assert record["outcome"] == "approved"
    assert record["approver"] == "alice"
    report = _report(run)
    assert report["per_approval_outcome_counts"] == {"approved": 1}
    assert report["unresolved_pending_decision_ids"] == []
    # The second resolution, from the CLI, is refused: it names the outcome that won.
    again = ghost(
        "approvals", "reject", decision_id, "--store", store, "--approver", "bob", cwd=tmp_path
    )
    assert again.returncode == 5
    assert b"already resolved (approved" in again.stderr


def test_two_live_agents_on_one_store_log_each_resolution_once(tmp_path: Path) -> None:
    # Each agent watches the other's decision too (it was in the store when it
    # started); the store's claim lets exactly one of them log each resolution.
    store = tmp_path / "approvals.db"
    runs = [tmp_path / "first.mcap", tmp_path / "second.mcap"]
    first = Agent("hold", store, runs[0], "refund", "250", cwd=tmp_path)
    second: Agent | None = None
    try:
        pendings = [first.event()]
        second = Agent("hold", store, runs[1], "refund", "300", cwd=tmp_path)
        pendings.append(second.event())
        for index, pending in enumerate(pendings):
            verb = "approve" if index == 0 else "reject"
            result = ghost(
                "approvals", verb, pending["decision_id"], "--store", store,
                "--approver", "alice", cwd=tmp_path,
            )  # fmt: skip
            assert result.returncode == 0, result.stderr
        resolved = [first.event(), second.event()]
        first.finish()
        second.finish()
    finally:
        first.kill()
        if second is not None:
            second.kill()

    assert [r["outcome"] for r in resolved] == ["approved", "rejected"]
    assert resolved[0]["executed"] == {"amount": 250, "currency": "EUR"}
    logged = {run: _approvals(run) for run in runs}
    everywhere = [record for records in logged.values() for record in records]
    assert Counter(r["decision_id"] for r in everywhere) == {p["decision_id"]: 1 for p in pendings}
    for pending, result in zip(pendings, resolved, strict=True):
        # Whichever agent logged it, the waiting one was handed that very record.
        (run,) = [
            r for r in runs if any(a["decision_id"] == result["decision_id"] for a in logged[r])
        ]
        addresses = {
            rec.sha256 for rec in read_run(run).records if rec.topic == "/approvals"
            and rec.record and rec.record["decision_id"] == pending["decision_id"]
        }  # fmt: skip
        assert addresses == {result["approval_sha256"]}
    for run in runs:
        assert _verify(run) == 0
    assert _listed(store, tmp_path) == []


def test_a_killed_agent_s_approval_is_resolved_from_the_cli_and_lands_in_the_next_run(
    tmp_path: Path,
) -> None:
    store = tmp_path / "approvals.db"
    first_run, second_run = tmp_path / "first.mcap", tmp_path / "second.mcap"
    first = Agent("hold", store, first_run, "refund", "250", cwd=tmp_path)
    try:
        pending = first.event()
    finally:
        first.kill()  # SIGKILL while it waits
    assert first.process.returncode == -signal.SIGKILL
    decision_id = pending["decision_id"]
    assert _listed(store, tmp_path) == [decision_id]
    approved = ghost(
        "approvals", "approve", decision_id, "--store", store, "--approver", "bob", cwd=tmp_path
    )
    assert approved.returncode == 0, approved.stderr

    second = Agent("resume", store, second_run, decision_id, cwd=tmp_path)
    try:
        started, resolved = second.event(), second.event()
        second.finish()
    finally:
        second.kill()
    assert resolved["outcome"] == "approved"
    assert resolved["decision_run_id"] == pending["run_id"] != started["run_id"]
    assert resolved["executed"] == {"amount": 250, "currency": "EUR"}

    (record,) = _approvals(second_run)
    assert record["decision_id"] == decision_id
    assert record["decision_run_id"] == pending["run_id"]
    assert record["decision_sha256"] == pending["decision_sha256"]
    assert record["decision_sha256"] == _decisions(first_run)[decision_id]["address"]
    assert record["outcome"] == "approved"
    assert _verify(second_run) == 0
    assert _verify(first_run) == 4  # cut short by the kill
    assert _report(first_run)["unresolved_pending_decision_ids"] == [decision_id]
    assert _report(second_run)["per_approval_outcome_counts"] == {"approved": 1}
    assert _listed(store, tmp_path) == []


def test_a_killed_agent_s_approval_is_resolved_after_the_restart(tmp_path: Path) -> None:
    store = tmp_path / "approvals.db"
    first_run, second_run = tmp_path / "first.mcap", tmp_path / "second.mcap"
    first = Agent("hold", store, first_run, "refund", "250", cwd=tmp_path)
    try:
        pending = first.event()
    finally:
        first.kill()
    decision_id = pending["decision_id"]
    second = Agent("resume", store, second_run, decision_id, cwd=tmp_path)
    try:
        second.event()  # started: the restarted agent waits on the earlier run's decision
        assert _listed(store, tmp_path) == [decision_id]
        rejected = ghost(
            "approvals",
            "reject",
            decision_id,
            "--store",
            store,
            "--approver",
            "alice",
            cwd=tmp_path,
        )
        assert rejected.returncode == 0, rejected.stderr
        resolved = second.event()
        second.finish()
    finally:
        second.kill()
    assert resolved["outcome"] == "rejected"
    assert resolved["final_verdict"] == "deny"
    assert resolved["executed"] is None
    (record,) = _approvals(second_run)
    assert record["outcome"] == "rejected"
    assert record["decision_run_id"] == pending["run_id"]
    assert record["decision_sha256"] == _decisions(first_run)[decision_id]["address"]
    assert _verify(second_run) == 0
    assert _verify(first_run) == 4


def test_a_rejection_from_the_cli_and_an_expiry_each_reach_the_waiting_agent(
    tmp_path: Path,
) -> None:
    # One store each: a queue adopts every decision pending in its store when it
    # starts, so two live agents on one store would each log the other's resolutions.
    store, other_store = tmp_path / "approvals.db", tmp_path / "other.db"
    rejected_run, expired_run = tmp_path / "rejected.mcap", tmp_path / "expired.mcap"
    rejecting = Agent("hold", store, rejected_run, "refund", "300", cwd=tmp_path)
    expiring = Agent("hold", other_store, expired_run, "quick", "400", cwd=tmp_path)  # 0.5 s
    try:
        to_reject, to_expire = rejecting.event(), expiring.event()
        reject = ghost(
            "approvals", "reject", to_reject["decision_id"], "--store", store,
            "--approver", "bob", cwd=tmp_path,
        )  # fmt: skip
        assert reject.returncode == 0, reject.stderr
        rejected, expired = rejecting.event(), expiring.event()
        rejecting.finish()
        expiring.finish()
    finally:
        rejecting.kill()
        expiring.kill()
    assert (rejected["outcome"], rejected["final_verdict"]) == ("rejected", "deny")
    assert (expired["outcome"], expired["final_verdict"]) == ("expired", "deny")
    assert expired["approver"] is None
    assert [r["outcome"] for r in _approvals(rejected_run)] == ["rejected"]
    assert [r["outcome"] for r in _approvals(expired_run)] == ["expired"]
    for run in (rejected_run, expired_run):
        assert _verify(run) == 0
    assert _report(expired_run)["per_approval_outcome_counts"] == {"expired": 1}

    # A second resolution of either is refused, and says what won.
    for decision, outcome, path in (
        (to_reject, "rejected", store),
        (to_expire, "expired", other_store),
    ):
        again = ghost(
            "approvals", "approve", decision["decision_id"], "--store", path,
            "--approver", "alice", cwd=tmp_path,
        )  # fmt: skip
        assert again.returncode == 5
        assert f"already resolved ({outcome}".encode() in again.stderr


def test_threads_and_tasks_share_a_gate_sink_and_store_resolved_by_a_thread_and_the_cli(
    tmp_path: Path,
) -> None:
    store, run = tmp_path / "approvals.db", tmp_path / "run.mcap"
    threads, tasks = 6, 9
    agent = Agent("crowd", store, run, str(threads), str(tasks), cwd=tmp_path)
    by: dict[str, str] = {}
    cli_outcomes: dict[str, str] = {}
    try:
        while len(by) < threads + tasks:
            event = agent.event()
            assert event["event"] == "pending"
            by[event["decision_id"]] = event["by"]
            if event["by"] != "cli":
                continue
            action = "approve" if len(cli_outcomes) % 2 == 0 else "reject"
            result = ghost(
                "approvals", action, event["decision_id"], "--store", store,
                "--approver", "alice", cwd=tmp_path,
            )  # fmt: skip
            assert result.returncode == 0, result.stderr
            cli_outcomes[event["decision_id"]] = {"approve": "approved", "reject": "rejected"}[
                action
            ]
        done = agent.event()
        agent.finish()
    finally:
        agent.kill()
    outcomes: dict[str, str] = done["outcomes"]
    assert set(outcomes) == set(by)
    for decision_id, kind in by.items():
        if kind == "expiry":
            assert outcomes[decision_id] == "expired"
        elif kind == "cli":
            assert outcomes[decision_id] == cli_outcomes[decision_id]
        else:
            assert outcomes[decision_id] in ("approved", "rejected")
    assert {outcomes[d] for d, k in by.items() if k == "thread"} == {"approved", "rejected"}

    assert _verify(run) == 0
    records = _approvals(run)
    assert sorted(r["decision_id"] for r in records) == sorted(by)  # one record each
    decisions = _decisions(run)
    for record in records:
        assert record["decision_sha256"] == decisions[record["decision_id"]]["address"]
        assert record["outcome"] == outcomes[record["decision_id"]]
    report = _report(run)
    assert report["unresolved_pending_decision_ids"] == []
    assert report["per_approval_outcome_counts"] == dict(Counter(outcomes.values()))
    assert _listed(store, tmp_path) == []
