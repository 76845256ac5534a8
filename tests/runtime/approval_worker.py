"""Another process acting on a SQLite approval store, for the concurrency tests.

    python approval_worker.py resolve STORE DECISION_ID OUTCOME APPROVER
    python approval_worker.py open STORE

Each prints ``ready``, waits for one line on stdin (so that a test can start
several at the same moment), acts, and prints one JSON line: ``{"won": true}``
or ``{"won": false, "error": TYPE, "message": TEXT}``. ``resolve`` opens the
store before ``ready``; ``open`` opens (creating) it after, to race creation.
"""

from __future__ import annotations

import json
import sys
import time

from runtime import ApprovalError, Resolution, SqliteApprovalStore


def main(argv: list[str]) -> int:
    command, path, *rest = argv
    if command == "open":
        print("ready", flush=True)
        sys.stdin.readline()
        try:
            with SqliteApprovalStore(path, busy_timeout_s=60) as store:
                store.pending()
        except ApprovalError as exc:
            return _report(exc)
        return _report(None)
    decision_id, outcome, approver = rest
    store = SqliteApprovalStore(path, create=False, busy_timeout_s=60)
    print("ready", flush=True)
    sys.stdin.readline()
    try:
        store.resolve(Resolution(decision_id, outcome, approver, time.time_ns()))
    except ApprovalError as exc:
        return _report(exc)
    finally:
        store.close()
    return _report(None)


def _report(exc: ApprovalError | None) -> int:
    if exc is None:
        print(json.dumps({"won": True}), flush=True)
    else:
        result = {"won": False, "error": type(exc).__name__, "message": str(exc)}
        print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
