"""``ghost audit-daemon`` as a real process, with real gates in other processes (ADR 0034)."""

from __future__ import annotations

import json
import os
import signal
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import pytest

from analysis import RunStatus, verify_run
from audit import SocketAuditSink, read_run
from runtime import Action, AuditError, Gate, Policy, RuntimeVerdict
from tests.runtime.conftest import POLICY

ROOT = Path(__file__).resolve().parents[2]
BOUND_S = 60.0  # every wait is bounded: a lost process still ends the test


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{ROOT}"}


@dataclass
class Daemon:
    process: subprocess.Popen[str]
    socket: Path
    out: Path

    def runs(self) -> list[Path]:
        return sorted(self.out.glob("*.mcap"))


def _start_daemon(tmp: Path, *extra: str, launcher: list[str] | None = None) -> Daemon:
    sock, out = tmp / "audit.sock", tmp / "runs"
    command = launcher or [sys.executable, "-m", "analysis"]
    verb = [] if launcher else ["audit-daemon"]
    with (tmp / "daemon.log").open("w") as log:
        process = subprocess.Popen(
            [*command, *verb, "--socket", str(sock), "--out", str(out), *extra],
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
            env=_env(),
            cwd=tmp,
        )
    assert process.stdout is not None
    line = process.stdout.readline()
    if not line:
        process.wait(BOUND_S)
        _close_pipes(process)
    assert line == f"ghost audit-daemon: listening on {sock}\n", (tmp / "daemon.log").read_text()
    return Daemon(process, sock, out)


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[Daemon]:
    started = _start_daemon(tmp_path)
    yield started
    _stop(started)


def _stop(started: Daemon) -> None:
    if started.process.poll() is None:
        started.process.send_signal(signal.SIGTERM)
        assert started.process.wait(BOUND_S) == 0
    _close_pipes(started.process)


def _close_pipes(process: subprocess.Popen[str]) -> None:
    for pipe in (process.stdin, process.stdout, process.stderr):
        if pipe is not None:
            pipe.close()


def _agent(sock: Path, count: int, then: str, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.e2e.daemon_agent", str(sock), str(count), then, *extra],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=_env(),
        cwd=ROOT,
    )


def _events(stream: IO[str] | None, until: str) -> list[dict[str, Any]]:
    assert stream is not None
    events: list[dict[str, Any]] = []
    for line in stream:
        events.append(json.loads(line))
        if events[-1]["event"] == until:
            return events
    raise AssertionError(f"the agent ended before {until!r}: {events}")


def _records(path: Path) -> list[tuple[str, Mapping[str, Any]]]:
    return [(r.topic, json.loads(r.data)) for r in read_run(path).records]


def _addresses(path: Path) -> set[str]:
    from runtime import sha256_hex

    return {sha256_hex(r.data) for r in read_run(path).records}


def _wait_intact(path: Path) -> None:
    deadline = time.monotonic() + BOUND_S
    while verify_run(path).status is not RunStatus.INTACT:
        assert time.monotonic() < deadline, verify_run(path).summary
        time.sleep(0.02)


def test_concurrent_agents_get_separate_intact_sealed_runs(daemon: Daemon) -> None:
    agents = [_agent(daemon.socket, 30, "close") for _ in range(4)]
    results = [_events(agent.stdout, "closed") for agent in agents]
    for agent in agents:
        assert agent.wait(BOUND_S) == 0
        _close_pipes(agent)
    assert len(daemon.runs()) == 4
    for agent, events in zip(agents, results, strict=True):
        closed = events[-1]
        path = daemon.out / closed["file"]
        verification = verify_run(path)
        assert verification.status is RunStatus.INTACT, verification.summary
        assert verification.run_id == closed["run_id"]
        # The kernel's word for who was at the other end, and the daemon's own identity.
        assert verification.writer is not None
        assert verification.writer.peer_pid == agent.pid
        assert verification.writer.pid == daemon.process.pid
        records = _records(path)
        assert records[0][1]["pid"] == agent.pid
        decided = [e for e in events if e["event"] == "decided"]
        in_file = [r["decision_id"] for topic, r in records if topic == "/decisions"]
        assert in_file == [e["decision_id"] for e in decided]
        # The addresses the gate handed out are those of the bytes the daemon wrote.
        addresses = _addresses(path)
        for event in decided:
            assert {event["decision_sha256"], event["assessment_sha256"]} <= addresses
        assert "ended" not in records[-1][1]  # closed by its gate


def test_a_killed_agent_loses_no_acknowledged_decision_and_its_run_is_sealed(
    daemon: Daemon,
) -> None:
    agent = _agent(daemon.socket, 7, "hold")
    events = _events(agent.stdout, "holding")
    agent.send_signal(signal.SIGKILL)
    agent.wait(BOUND_S)
    _close_pipes(agent)
    path = daemon.out / events[-1]["file"]
    _wait_intact(path)
    records = _records(path)
    assert records[-1][0] == "/seal"
    assert records[-1][1]["ended"] == "disconnected"
    addresses = _addresses(path)
    decided = [e for e in events if e["event"] == "decided"]
    assert len(decided) == 7
    assert all(e["decision_sha256"] in addresses for e in decided)


def test_a_killed_daemon_fails_the_next_check_and_keeps_every_acknowledged_decision(
    daemon: Daemon,
) -> None:
    sink = SocketAuditSink(daemon.socket, deadline_s=30.0)
    gate = Gate(Policy.from_dict(POLICY), sink=sink)
    acknowledged = [gate.check(Action("bot", "search", "tool:search", {"i": i})) for i in range(9)]
    daemon.process.send_signal(signal.SIGKILL)
    daemon.process.wait(BOUND_S)
    with pytest.raises(AuditError, match="action must not run"):
        gate.check(Action("bot", "search", "tool:search", {"i": 99}))
    with pytest.raises(AuditError, match="cannot be reached again"):  # it tries once, in vain
        gate.check(Action("bot", "search", "tool:search", {"i": 100}))
    sink.close()
    (path,) = daemon.runs()
    verification = verify_run(path)
    assert verification.status is RunStatus.TRUNCATED, verification.summary
    addresses = _addresses(path)
    for decision in acknowledged:
        assert {decision.decision_sha256, decision.assessment_sha256} <= addresses


def test_an_approval_after_a_restart_names_the_run_that_holds_its_decision(
    tmp_path: Path,
) -> None:
    first = _start_daemon(tmp_path)
    sink = SocketAuditSink(first.socket, deadline_s=30.0)
    gate = Gate(Policy.from_dict(POLICY), sink=sink)
    held = gate.check(Action("bot", "refund", "payments:stripe", {"amount": 80}))
    assert held.verdict is RuntimeVerdict.PENDING
    old_run = sink.run_id
    first.process.send_signal(signal.SIGTERM)
    first.process.wait(BOUND_S)
    _close_pipes(first.process)
    with pytest.raises(AuditError):  # the check that finds the daemon gone fails closed
        gate.check(Action("bot", "search", "tool:search", {}))
    second = _start_daemon(tmp_path)
    try:
        gate.check(Action("bot", "search", "tool:search", {}))  # reconnects: a new run
        assert sink.run_id != old_run
        gate.approvals.resolve(held.decision_id, approved=True, approver="alice")
        sink.close()
    finally:
        _stop(second)
    new_path = second.out / f"{sink.run_id}.mcap"
    (approval,) = [r for topic, r in _records(new_path) if topic == "/approvals"]
    assert approval["decision_run_id"] == old_run  # the decision is in the run before
    assert verify_run(new_path).status is RunStatus.INTACT


@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGTERM], ids=["killed", "stopped"])
def test_a_restarted_daemon_takes_the_gate_back_in_a_run_that_follows_the_old_one(
    tmp_path: Path, how: signal.Signals
) -> None:
    first = _start_daemon(tmp_path)
    sink = SocketAuditSink(first.socket, deadline_s=30.0)
    gate = Gate(Policy.from_dict(POLICY), sink=sink)
    before = [gate.check(Action("bot", "search", "tool:search", {"i": i})) for i in range(5)]
    old_run, old_count, old_head = sink.run_id, sink.record_count, sink.head_sha256
    first.process.send_signal(how)
    first.process.wait(BOUND_S)
    _close_pipes(first.process)
    for i in range(2):  # while the daemon is away, every check fails: nothing runs unaudited
        with pytest.raises(AuditError, match="action must not run"):
            gate.check(Action("bot", "search", "tool:search", {"lost": i}))
    second = _start_daemon(tmp_path)  # the same socket and output directory
    try:
        after = [gate.check(Action("bot", "delete", "file:/x", {"i": i})) for i in range(3)]
        assert sink.run_id != old_run
        sink.close()
    finally:
        _stop(second)
    old_path, new_path = tmp_path / "runs" / f"{old_run}.mcap", second.out / f"{sink.run_id}.mcap"
    assert sorted(second.runs()) == sorted([old_path, new_path])
    old = verify_run(old_path)
    if how is signal.SIGKILL:
        assert old.status is RunStatus.TRUNCATED, old.summary
    else:
        assert old.status is RunStatus.INTACT, old.summary
        assert _records(old_path)[-1][1]["ended"] == "daemon_stopped"
    # The old run's acknowledged head is where the sink said it was.
    (head,) = [r for r in read_run(old_path).records if json.loads(r.data)["seq"] == old_count - 1]
    assert head.sha256 == old_head
    new = verify_run(new_path)
    assert new.status is RunStatus.INTACT, new.summary
    run_record = _records(new_path)[0][1]
    assert run_record["follows"] == {
        "run_id": old_run,
        "record_count": old_count,
        "head_sha256": old_head,
    }
    assert new.writer is not None
    assert f"follows run {old_run} at record {old_count - 1}, head {old_head}" in new.summary
    assert "follows" not in _records(old_path)[0][1]
    old_addresses, new_addresses = _addresses(old_path), _addresses(new_path)
    for decision in before:
        assert {decision.decision_sha256, decision.assessment_sha256} <= old_addresses
    for decision in after:
        assert {decision.decision_sha256, decision.assessment_sha256} <= new_addresses


def test_a_follows_link_the_daemon_cannot_confirm_is_refused(daemon: Daemon) -> None:
    with SocketAuditSink(daemon.socket) as sink:
        Gate(Policy.from_dict(POLICY), sink=sink).check(Action("bot", "search", "tool:x", {}))
    real = {"run_id": sink.run_id, "record_count": sink.record_count - 1}
    head_of_real = sink.head_sha256
    assert head_of_real is not None
    claims = [
        {**real, "head_sha256": head_of_real},  # the head's address, one record early
        {**real, "record_count": 2, "head_sha256": head_of_real},  # another record's address
        {**real, "run_id": "01890000-0000-7000-8000-000000000000", "head_sha256": "a" * 64},
        {**real, "run_id": f"../runs/{sink.run_id}", "head_sha256": head_of_real},
        {**real, "record_count": 10**6, "head_sha256": head_of_real},
    ]
    for claim in claims:
        conn = _raw(daemon.socket)
        conn.sendall(_frame({**_open_frame(), "follows": claim}))
        answers = _answers_until_closed(conn)  # refused, and the connection cut
        conn.close()
        assert answers[0]["ok"] is False, claim
        assert answers[0]["fatal"] is True
        assert "follows link is refused" in answers[0]["error"]
    assert daemon.runs() == [daemon.out / f"{sink.run_id}.mcap"]  # nothing forged was written
    # The true head is accepted: a reconnecting gate's claim as the sink makes it.
    conn = _raw(daemon.socket)
    good = {"run_id": sink.run_id, "record_count": sink.record_count, "head_sha256": head_of_real}
    conn.sendall(_frame({**_open_frame(), "follows": good}))
    conn.shutdown(socket.SHUT_WR)
    answers = _answers_until_closed(conn)
    conn.close()
    assert answers[0]["ok"] is True, answers
    _wait_intact(daemon.out / answers[0]["file"])
    assert _records(daemon.out / answers[0]["file"])[0][1]["follows"] == good


def _raw(sock: Path) -> socket.socket:
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.settimeout(BOUND_S)
    conn.connect(str(sock))
    return conn


def _frame(message: Mapping[str, Any]) -> bytes:
    body = json.dumps(message, sort_keys=True, separators=(",", ":")).encode()
    return struct.pack(">I", len(body)) + body


def _answers_until_closed(conn: socket.socket) -> list[Mapping[str, Any]]:
    data = b""
    while chunk := conn.recv(65536):
        data += chunk
    answers = []
    while data:
        (length,) = struct.unpack(">I", data[:4])
        answers.append(json.loads(data[4 : 4 + length]))
        data = data[4 + length :]
    return answers


def _open_frame(n: int = 0) -> dict[str, Any]:
    import base64

    from runtime import sha256_hex

    source = b'policy_id = "raw"\n'
    return {
        "op": "open",
        "n": n,
        "protocol": "ghost.audit-wire/1",
        "run": {
            "policy_id": "raw",
            "policy_sha256": "0" * 64,
            "policy_source": base64.b64encode(source).decode(),
            "policy_source_name": "policy.toml",
            "policy_source_media_type": "application/toml",
            "policy_source_sha256": sha256_hex(source),
            "sdk_version": "0",
            "stamp_ns": time.time_ns(),
        },
    }


def _with_shadow(shadow: object) -> dict[str, Any]:
    frame = _open_frame()
    frame["run"]["shadow"] = shadow
    return frame


BAD_CLIENTS = {
    "malformed": [struct.pack(">I", 9) + b"not json!"],
    "oversized": [struct.pack(">I", 2**31)],
    "duplicate keys": [struct.pack(">I", 25) + b'{"n":0,"n":1,"op":"open"}'],
    "not open first": [_frame({"op": "append", "n": 0, "topic": "/decisions", "record": {}})],
    "out of order": [_frame(_open_frame()), _frame({"op": "close", "n": 7})],
    "repeated n": [_frame(_open_frame()), _frame(_open_frame(0))],
    "unknown op": [_frame(_open_frame()), _frame({"op": "rewrite", "n": 1})],
    "cut frame": [_frame(_open_frame()), struct.pack(">I", 100) + b"{"],
    "shadow not an object": [_frame(_with_shadow("candidate"))],
    "shadow source not base64": [
        _frame(
            _with_shadow(
                {
                    "policy_id": "c",
                    "policy_sha256": "0" * 64,
                    "source": "!!",
                    "source_name": "c.toml",
                    "source_media_type": "application/toml",
                    "source_sha256": "0" * 64,
                }
            )
        )
    ],
}


@pytest.mark.parametrize("frames", list(BAD_CLIENTS.values()), ids=list(BAD_CLIENTS))
def test_a_client_breaking_the_protocol_is_cut_and_other_runs_go_on(
    daemon: Daemon, frames: list[bytes]
) -> None:
    sink = SocketAuditSink(daemon.socket, deadline_s=30.0)
    gate = Gate(Policy.from_dict(POLICY), sink=sink)
    before = gate.check(Action("bot", "search", "tool:search", {"i": 1}))
    bad = _raw(daemon.socket)
    for frame in frames:
        bad.sendall(frame)
    if frames[-1].endswith(b"{"):
        bad.shutdown(socket.SHUT_WR)  # the frame is cut: the daemon sees its end
    answers = _answers_until_closed(bad)  # the daemon closed the connection
    bad.close()
    if not frames[-1].endswith(b"{"):
        assert answers[-1]["ok"] is False
        assert answers[-1]["fatal"] is True
    after = gate.check(Action("bot", "delete", "file:/x"))
    sink.close()
    good = daemon.out / f"{sink.run_id}.mcap"
    assert verify_run(good).status is RunStatus.INTACT
    assert {before.decision_sha256, after.decision_sha256} <= _addresses(good)
    for other in daemon.runs():
        if other != good:  # the bad client's run, when it got as far as opening one
            _wait_intact(other)
            ended = _records(other)[-1][1]["ended"]
            assert ended == ("disconnected" if frames[-1].endswith(b"{") else "protocol_error")


def test_a_refused_record_fails_that_call_only(daemon: Daemon) -> None:
    with SocketAuditSink(daemon.socket) as sink:
        gate = Gate(Policy.from_dict(POLICY), sink=sink)
        forged = {"schema": "ghost.checkpoint/1", "stamp_ns": 1}
        with pytest.raises(AuditError, match="written by the sink itself"):
            sink.append("/checkpoints", forged)
        with pytest.raises(AuditError, match="must not carry seq"):
            sink.append("/decisions", {"schema": "ghost.decision/1", "stamp_ns": 1, "seq": 5})
        # A record that breaks its schema would make the daemon's file read as tampered.
        with pytest.raises(AuditError, match=r"does not match ghost\.decision/1"):
            sink.append("/decisions", {"schema": "ghost.decision/1", "stamp_ns": 1})
        decision = gate.check(Action("bot", "search", "tool:search", {}))
    path = daemon.out / f"{sink.run_id}.mcap"
    assert verify_run(path).status is RunStatus.INTACT
    assert decision.decision_sha256 in _addresses(path)


def test_a_shadowed_gate_s_candidate_is_attached_by_the_daemon_too(daemon: Daemon) -> None:
    from audit import read_run

    candidate = Policy.from_dict({"policy_id": "next", "default": "deny", "rules": []})
    with SocketAuditSink(daemon.socket) as sink:
        gate = Gate(Policy.from_dict(POLICY), sink=sink, shadow=candidate)
        gate.check(Action("bot", "search", "tool:search", {}))
    path = daemon.out / f"{sink.run_id}.mcap"
    assert verify_run(path).status is RunStatus.INTACT
    records = dict(_records(path)[:1])
    assert records["/run"]["shadow"]["policy_id"] == "next"
    assessment = next(r for topic, r in _records(path) if topic == "/assessments")
    assert assessment["shadow"]["verdict"] == "deny"
    attached = read_run(path).attachments
    assert len(attached) == 2  # the enforced policy and the candidate
    assert candidate.source in {a.data for a in attached}


def test_sigterm_seals_the_open_runs_and_the_agent_then_fails_closed(daemon: Daemon) -> None:
    sink = SocketAuditSink(daemon.socket, deadline_s=30.0)
    gate = Gate(Policy.from_dict(POLICY), sink=sink)
    decision = gate.check(Action("bot", "search", "tool:search", {}))
    daemon.process.send_signal(signal.SIGTERM)
    assert daemon.process.wait(BOUND_S) == 0
    with pytest.raises(AuditError):
        gate.check(Action("bot", "search", "tool:search", {}))
    sink.close()
    (path,) = daemon.runs()
    assert verify_run(path).status is RunStatus.INTACT
    assert _records(path)[-1][1]["ended"] == "daemon_stopped"
    assert decision.decision_sha256 in _addresses(path)
    assert not daemon.socket.exists()


def test_the_socket_and_the_runs_are_the_daemon_users_alone(daemon: Daemon) -> None:
    assert daemon.socket.stat().st_mode & 0o777 == 0o600
    assert daemon.out.stat().st_mode & 0o777 == 0o700


def test_an_unreachable_daemon_fails_the_gate_closed(tmp_path: Path) -> None:
    with pytest.raises(AuditError, match="cannot reach the audit daemon"):
        SocketAuditSink(tmp_path / "nobody.sock")


def test_a_daemon_slower_than_the_deadline_fails_the_gate_closed(tmp_path: Path) -> None:
    path = tmp_path / "silent.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(1)  # accepts (the kernel queues the connection) but never answers
    try:
        sink = SocketAuditSink(path, deadline_s=0.05)
        with pytest.raises(AuditError, match="no answer within"):
            Gate(Policy.from_dict(POLICY), sink=sink)
    finally:
        listener.close()


def test_verify_names_the_writer_of_a_daemon_run(daemon: Daemon) -> None:
    with SocketAuditSink(daemon.socket) as sink:
        Gate(Policy.from_dict(POLICY), sink=sink).check(Action("bot", "search", "tool:x", {}))
    result = subprocess.run(
        [sys.executable, "-m", "analysis", "verify", str(daemon.out / f"{sink.run_id}.mcap")],
        capture_output=True,
        text=True,
        env=_env(),
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert (
        f"written by ghost audit-daemon (pid {daemon.process.pid}, uid {os.geteuid()})"
        f" for the agent process pid {os.getpid()}, uid {os.geteuid()}" in result.stdout
    )


def test_a_second_daemon_on_the_same_socket_is_refused(daemon: Daemon) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "analysis", "audit-daemon", "--socket", str(daemon.socket),
         "--out", str(daemon.out)],
        capture_output=True,
        text=True,
        env=_env(),
        check=False,
    )  # fmt: skip
    assert result.returncode == 1
    assert "another audit daemon is listening" in result.stderr


def _useradd(name: str) -> tuple[int, int]:
    import pwd

    subprocess.run(
        ["/usr/sbin/useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name],
        check=True,
        capture_output=True,
    )
    entry = pwd.getpwnam(name)
    return entry.pw_uid, entry.pw_gid


@pytest.mark.skipif(
    os.geteuid() != 0 or not Path("/usr/sbin/useradd").exists(),
    reason="needs root and useradd to create the daemon's and the agent's users",
)
def test_the_agents_user_can_open_neither_the_key_nor_the_runs() -> None:
    import shutil
    import tempfile
    import uuid

    tag = uuid.uuid4().hex[:8]
    daemon_user, agent_user = f"ghd{tag}", f"gha{tag}"
    work = Path(tempfile.mkdtemp(prefix="ghost-daemon-users-"))
    started: Daemon | None = None
    try:
        daemon_uid, daemon_gid = _useradd(daemon_user)
        agent_uid, agent_gid = _useradd(agent_user)
        # The daemon's home: traversable by all (the socket lives here), writable by it alone.
        os.chmod(work, 0o755)  # noqa: S103 -- the agent must reach the socket in it
        os.chown(work, daemon_uid, daemon_gid)
        subprocess.run(
            [sys.executable, "-m", "analysis", "keygen", "--out", str(work / "signer")],
            check=True,
            env=_env(),
        )
        for path in (work / "signer.key", work / "signer.pub"):
            os.chown(path, daemon_uid, daemon_gid)
        started = _start_daemon(
            work,
            "--signing-key",
            str(work / "signer.key"),
            "--group",
            str(agent_gid),
            launcher=[
                sys.executable,
                "-m",
                "tests.e2e.daemon_as",
                f"{daemon_uid}:{daemon_gid}:{agent_gid}",
            ],
        )
        agent = _agent(
            started.socket,
            5,
            "close",
            "--as",
            f"{agent_uid}:{agent_gid}",
            "--try",
            str(work / "signer.key"),
            "--try",
            str(started.out / "{file}"),
        )
        events = _events(agent.stdout, "closed")
        assert agent.wait(BOUND_S) == 0
        _close_pipes(agent)
        tried = [e for e in events if e["event"] == "tried"]
        assert len(tried) == 2
        for attempt in tried:  # the key, then the run the agent just wrote
            assert (attempt["read"], attempt["append"]) == ("denied", "denied"), attempt
        run = started.out / events[-1]["file"]
        assert run.stat().st_uid == daemon_uid
        from audit import load_public_key

        verification = verify_run(run, public_key=load_public_key(work / "signer.pub"))
        assert verification.status is RunStatus.INTACT, verification.summary
        assert verification.writer is not None
        assert (verification.writer.uid, verification.writer.peer_uid) == (daemon_uid, agent_uid)
        assert verification.writer.peer_pid == agent.pid
    finally:
        if started is not None:
            _stop(started)
        for name in (agent_user, daemon_user):
            subprocess.run(["/usr/sbin/userdel", name], check=False, capture_output=True)
        shutil.rmtree(work, ignore_errors=True)
