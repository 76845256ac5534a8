"""Another process checking actions against a shared SQLite counter store, for the race tests.

    python counter_worker.py STORE CHECKS MAX_COUNT

Builds a gate whose policy allows ``send`` up to MAX_COUNT per window (a
limited deny rule beside an allow rule), on a `ManualClock` that every worker
starts at the same reading, so that all checks fall in one window. Prints
``ready``, waits for one line on stdin (so that a test starts several at the
same moment), makes CHECKS checks, and prints ``{"allowed": N,
"denied_reasons": [...]}``.
"""

from __future__ import annotations

import json
import sys

from audit import MemoryAuditSink
from runtime import Action, Gate, Policy, RuntimeVerdict, SqliteCounterStore
from runtime.testing import ManualClock


def main(argv: list[str]) -> int:
    path, checks, max_count = argv[0], int(argv[1]), int(argv[2])
    policy = Policy.from_dict(
        {
            "policy_id": "rate",
            "rules": [
                {
                    "id": "send-rate",
                    "verbs": ["send"],
                    "effect": "deny",
                    "limit": {"key": "agent", "window_s": 3600, "max_count": max_count},
                },
                {"id": "send", "verbs": ["send"], "effect": "allow"},
            ],
        }
    )
    store = SqliteCounterStore(path, busy_timeout_s=120)
    gate = Gate(policy, sink=MemoryAuditSink(), clock=ManualClock(), counters=store)
    print("ready", flush=True)
    sys.stdin.readline()
    allowed = 0
    reasons: set[str] = set()
    for _ in range(checks):
        decision = gate.check(Action(agent="mailer", verb="send", resource="mail:x"))
        if decision.verdict is RuntimeVerdict.ALLOW:
            allowed += 1
        else:
            reasons.add(decision.reason)
    store.close()
    print(json.dumps({"allowed": allowed, "denied_reasons": sorted(reasons)}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
