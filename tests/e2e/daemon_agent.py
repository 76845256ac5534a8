"""An agent process for the audit-daemon tests: a real gate on a `SocketAuditSink`.

    python -m tests.e2e.daemon_agent SOCKET COUNT close|hold [--as UID:GID] [--try PATH ...]

Checks ``COUNT`` actions (alternating allow and deny), printing one JSON
line per acknowledged decision (``{"event": "decided", "decision_id",
"decision_sha256", "assessment_sha256"}``), flushed at once, so that a test
can read what was acknowledged before it kills the process. Then ``close``
seals the run and prints ``{"event": "closed", "run_id", "file"}``; ``hold``
prints ``{"event": "holding"}`` and waits for stdin to close (a test then
kills it).

``--as UID:GID`` drops to that user and group once everything is imported
(the interpreter of the test machine may live where other users cannot
read, so it cannot be started as them); ``--try PATH`` then, after the
close, tries to open each path (``{file}`` in it: the run's file name) for
reading and for appending and prints
``{"event": "tried", "path", "read", "append"}`` with ``"denied"`` or ``"opened"``.
"""

from __future__ import annotations

import json
import os
import sys

from audit import SocketAuditSink
from runtime import Action, Gate, Policy
from tests.runtime.conftest import POLICY


def _say(**event: object) -> None:
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()


def _try_open(path: str) -> None:
    outcome = {}
    for mode in ("rb", "ab"):
        try:
            with open(path, mode):
                outcome[mode] = "opened"
        except PermissionError:
            outcome[mode] = "denied"
    _say(event="tried", path=path, read=outcome["rb"], append=outcome["ab"])


def main(argv: list[str]) -> int:
    socket_path, count, then = argv[0], int(argv[1]), argv[2]
    rest = argv[3:]
    tries: list[str] = []
    while rest:
        flag, value, rest = rest[0], rest[1], rest[2:]
        if flag == "--as":
            uid, gid = (int(part) for part in value.split(":"))
            os.setgroups([])
            os.setgid(gid)
            os.setuid(uid)
        elif flag == "--try":
            tries.append(value)
    policy = Policy.from_dict(POLICY)
    sink = SocketAuditSink(socket_path, deadline_s=30.0)
    gate = Gate(policy, sink=sink)
    for i in range(count):
        verb = "search" if i % 2 == 0 else "delete"
        decision = gate.check(Action("agent", verb, "tool:search", {"i": i}))
        _say(
            event="decided",
            decision_id=decision.decision_id,
            decision_sha256=decision.decision_sha256,
            assessment_sha256=decision.assessment_sha256,
        )
    if then == "hold":
        _say(event="holding", run_id=sink.run_id, file=sink.run_file)
        sys.stdin.read()
        return 0
    sink.close()
    for path in tries:
        _try_open(path.format(file=sink.run_file))
    _say(event="closed", run_id=sink.run_id, file=sink.run_file)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
