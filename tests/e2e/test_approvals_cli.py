"""``ghost approvals list|approve|reject`` as an operator runs them, on a real SQLite store.

Real subprocesses. Exit codes: 0 done; 1 the store cannot be used (missing,
not a ghost store, damaged, newer, locked); 2 usage; 5 a refused resolution
(unknown id, already resolved, approver not allowed, expired). Text an agent
wrote is shown quoted and escaped; nothing ends in a traceback.
"""

from __future__ import annotations

import sqlite3
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from analysis._cli import EXIT_FAILURE, EXIT_OK, EXIT_REFUSED, EXIT_USAGE
from analysis._cli_approvals import _EXIT_FAILURE, _EXIT_OK, _escaped, _quoted, _time_left
from runtime import ApprovalError, Resolution, RuntimeVerdict, SqliteApprovalStore
from tests.e2e.test_cli import assert_one_error_line, ghost
from tests.runtime.test_approval_store import make_pending

HOUR_NS = 3_600 * 10**9
HOSTILE = 'mail:"x"\x1b[2J\\n\n\u202e\u2028\x7f\x85end'


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "approvals.db"


@pytest.fixture
def store(path: Path) -> Iterator[SqliteApprovalStore]:
    with SqliteApprovalStore(path) as opened:
        yield opened


def pending_for_now(decision_id: str = "d-1", *, left_ns: int = HOUR_NS, **fields: Any) -> Any:
    now = time.time_ns()
    return make_pending(decision_id, created_ns=now - 1, expires_ns=now + left_ns, **fields)


def approvals(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess[bytes]:
    return ghost("approvals", *args, cwd=cwd)


def assert_refused(result: subprocess.CompletedProcess[bytes], *needles: str) -> None:
    assert result.returncode == EXIT_REFUSED, result.stderr
    assert_one_error_line(result, *needles)


def assert_printable_lines(data: bytes) -> list[str]:
    text = data.decode("utf-8")
    lines = text.split("\n")
    assert lines[-1] == ""
    for line in lines[:-1]:
        assert line.isprintable(), line
    return lines[:-1]


def test_the_exit_codes_are_distinct_and_shared_with_the_other_commands() -> None:
    assert (_EXIT_OK, _EXIT_FAILURE) == (EXIT_OK, EXIT_FAILURE)
    assert len({EXIT_OK, EXIT_FAILURE, EXIT_USAGE, 3, 4, 130, EXIT_REFUSED}) == 7


# --- list ------------------------------------------------------------------------------------


def test_list_prints_one_escaped_line_per_pending_approval_oldest_first(
    store: SqliteApprovalStore, path: Path
) -> None:
    now = time.time_ns()
    store.add(
        make_pending(
            "b-hostile",
            agent="evil\nagent",
            verb='send" approvers=anyone',
            resource=HOSTILE,
            reason="held\tby rule",
            approvers=("alice", 'bob"'),
            created_ns=now - 2,
            expires_ns=now + 3 * 24 * HOUR_NS + 5 * HOUR_NS + HOUR_NS // 2,
        )
    )
    store.add(
        make_pending(
            "a-anyone", approvers=None, created_ns=now - 1, expires_ns=now + 91 * 60 * 10**9 - 10**9
        )
    )
    store.add(make_pending("c-no-one", approvers=(), created_ns=now, expires_ns=now + 90 * 10**9))
    store.add(make_pending("d-expired", created_ns=now - 5, expires_ns=now - 4))
    store.add(make_pending("e-resolved", created_ns=now - 9, expires_ns=now + HOUR_NS))
    store.resolve(Resolution("e-resolved", "approved", "alice", now))

    result = approvals("list", "--store", path, cwd=path.parent)

    assert result.returncode == EXIT_OK, result.stderr
    assert result.stderr == b""
    lines = assert_printable_lines(result.stdout)
    assert [line.split("  ")[0] for line in lines] == [
        "d-expired",
        "b-hostile",
        "a-anyone",
        "c-no-one",
    ]
    hostile = lines[1]
    assert hostile == (
        'b-hostile  agent="evil\\x0aagent"  verb="send\\" approvers=anyone"'
        '  resource="mail:\\"x\\"\\x1b[2J\\\\n\\x0a\\u202e\\u2028\\x7f\\x85end"'
        '  reason="held\\x09by rule"  approvers="alice","bob\\""  left=3d05h'
    )
    assert lines[0].endswith('approvers="alice","bob"  left=expired')
    assert lines[2].endswith("  approvers=anyone  left=1h30m")
    assert "  approvers=none  left=" in lines[3]
    assert 'resource="mail:bob@example.com"' in lines[2]
    assert "reason=\"rule 'mail-needs-ok' holds it for approval\"" in lines[2]


def test_list_of_a_store_with_nothing_pending_prints_nothing(
    store: SqliteApprovalStore, path: Path
) -> None:
    result = approvals("list", "--store", path, cwd=path.parent)

    assert (result.returncode, result.stdout, result.stderr) == (EXIT_OK, b"", b"")


def test_the_console_script_lists_too(store: SqliteApprovalStore, path: Path) -> None:
    store.add(pending_for_now())

    result = ghost("approvals", "list", "--store", path, cwd=path.parent, script=True)

    assert result.returncode == EXIT_OK, result.stderr
    assert result.stdout.startswith(b'd-1  agent="mailer"')


# --- approve and reject ------------------------------------------------------------------------


def test_approve_resolves_and_the_agents_store_sees_it(
    store: SqliteApprovalStore, path: Path
) -> None:
    store.add(pending_for_now(held_verdict=RuntimeVerdict.NARROW))
    before = time.time_ns()

    result = approvals("approve", "d-1", "--store", path, "--approver", "alice", cwd=path.parent)

    after = time.time_ns()
    assert result.returncode == EXIT_OK, result.stderr
    assert result.stderr == b""
    assert result.stdout == (
        b'approved d-1 by "alice": agent="mailer" verb="send"'
        b' resource="mail:bob@example.com" final_verdict=narrow\n'
    )
    resolution = store.get("d-1")[1]  # the agent's own connection, open all along
    assert resolution is not None
    assert (resolution.outcome, resolution.approver) == ("approved", "alice")
    assert before <= resolution.resolved_ns <= after
    assert [r for _, r in store.unrecorded()] == [resolution]


def test_reject_resolves_as_rejected(store: SqliteApprovalStore, path: Path) -> None:
    store.add(pending_for_now(resource=HOSTILE))

    result = approvals("reject", "d-1", "--store", path, "--approver", "bob", cwd=path.parent)

    assert result.returncode == EXIT_OK, result.stderr
    (line,) = assert_printable_lines(result.stdout)
    assert line.startswith('rejected d-1 by "bob": agent="mailer" verb="send" resource="mail:\\"x')
    assert line.endswith(" final_verdict=deny")
    resolution = store.get("d-1")[1]
    assert resolution is not None
    assert (resolution.outcome, resolution.approver) == ("rejected", "bob")


def test_anyone_may_resolve_when_no_rule_lists_approvers(
    store: SqliteApprovalStore, path: Path
) -> None:
    store.add(pending_for_now(approvers=None))

    result = approvals("approve", "d-1", "--store", path, "--approver", "carol", cwd=path.parent)

    assert result.returncode == EXIT_OK, result.stderr
    assert store.get("d-1")[1] is not None


def test_an_unknown_decision_is_refused(store: SqliteApprovalStore, path: Path) -> None:
    store.add(pending_for_now())

    result = approvals("approve", "d-2", "--store", path, "--approver", "alice", cwd=path.parent)

    assert_refused(result, "cannot approve d-2: no decision 'd-2' awaits approval")
    assert store.get("d-1")[1] is None


def test_a_second_resolution_is_refused_naming_the_first(
    store: SqliteApprovalStore, path: Path
) -> None:
    store.add(pending_for_now())
    first = approvals("reject", "d-1", "--store", path, "--approver", "bob", cwd=path.parent)
    assert first.returncode == EXIT_OK, first.stderr

    second = approvals("approve", "d-1", "--store", path, "--approver", "alice", cwd=path.parent)

    assert_refused(second, 'cannot approve d-1: it is already resolved (rejected by "bob")')
    resolution = store.get("d-1")[1]
    assert resolution is not None
    assert resolution.outcome == "rejected"


def test_an_approver_not_on_the_list_is_refused(store: SqliteApprovalStore, path: Path) -> None:
    store.add(pending_for_now())

    for action in ("approve", "reject"):
        result = approvals(action, "d-1", "--store", path, "--approver", "mallory", cwd=path.parent)
        assert_refused(
            result,
            f"cannot {action} d-1: 'mallory' may not resolve decision d-1 (allowed: alice, bob)",
        )
    assert store.get("d-1")[1] is None


def test_an_expired_decision_is_refused(store: SqliteApprovalStore, path: Path) -> None:
    now = time.time_ns()
    store.add(make_pending(created_ns=now - 2 * HOUR_NS, expires_ns=now - HOUR_NS))

    result = approvals("approve", "d-1", "--store", path, "--approver", "alice", cwd=path.parent)

    assert_refused(result, "d-1 has expired: it can no longer be resolved")
    assert store.get("d-1")[1] is None
    assert len(store.pending()) == 1  # expiry is the agent's to record, not the command's


@pytest.mark.parametrize("name", ["", " alice", "al\nice", "\x1b[31malice", "alice\u202e"])
def test_an_odd_approver_name_is_refused_and_shown_escaped(
    store: SqliteApprovalStore, path: Path, name: str
) -> None:
    store.add(pending_for_now(approvers=None))

    result = approvals("approve", "d-1", "--store", path, "--approver", name, cwd=path.parent)

    assert_refused(result, "an approver is a non-empty name without control characters")
    assert result.stderr.decode().rstrip("\n").isprintable()
    assert store.get("d-1")[1] is None


def test_a_hostile_decision_id_is_shown_quoted_and_escaped(
    store: SqliteApprovalStore, path: Path
) -> None:
    store.add(pending_for_now("id \x1b[2J"))

    listed = approvals("list", "--store", path, cwd=path.parent)
    refused = approvals("approve", "other\n", "--store", path, "--approver", "x", cwd=path.parent)

    (line,) = assert_printable_lines(listed.stdout)
    assert line.startswith('"id \\x1b[2J"  agent=')
    assert_refused(refused, 'cannot approve "other\\x0a": no decision')


# --- a store that cannot be used ---------------------------------------------------------------


def _foreign(path: Path) -> None:
    connection = sqlite3.connect(path)
    connection.execute("CREATE TABLE notes (text TEXT)")
    connection.commit()
    connection.close()


def _newer(path: Path) -> None:
    SqliteApprovalStore(path).close()
    connection = sqlite3.connect(path)
    connection.execute("UPDATE ghost_schema SET version = 2")
    connection.commit()
    connection.close()


@pytest.mark.parametrize(
    ("make", "problem"),
    [
        (lambda path: None, "does not exist"),
        (lambda path: path.mkdir(), "is a directory, not an approval store"),
        (lambda path: path.touch(), "is empty, not a ghost approval store"),
        (lambda path: path.write_bytes(b"%PDF-1.7\n" * 100), "is not a SQLite database"),
        (_foreign, "is another application's SQLite database"),
        (_newer, "was written by a newer ghost (schema version 2; this one reads 1)"),
    ],
)
@pytest.mark.parametrize(
    "command",
    [["list"], ["approve", "d-1", "--approver", "alice"], ["reject", "d-1", "--approver", "bob"]],
)
def test_a_store_that_cannot_be_used_exits_1_and_is_left_alone(
    path: Path, make: Any, problem: str, command: list[str]
) -> None:
    make(path)
    before = path.read_bytes() if path.is_file() else None

    result = approvals(*command, "--store", path, cwd=path.parent)

    assert result.returncode == EXIT_FAILURE
    assert_one_error_line(result, f"approval store {path}: {problem}")
    assert (path.read_bytes() if path.is_file() else None) == before
    if before is None and not path.is_dir():
        assert not path.exists()


def test_a_store_locked_past_the_busy_timeout_exits_1(
    store: SqliteApprovalStore, path: Path
) -> None:
    store.add(pending_for_now())
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    holder.execute("DELETE FROM ghost_schema WHERE 0")
    try:
        result = approvals(
            "approve", "d-1", "--store", path, "--approver", "alice", cwd=path.parent
        )
    finally:
        holder.execute("ROLLBACK")
        holder.close()

    assert result.returncode == EXIT_FAILURE
    assert_one_error_line(result, "stayed locked by another connection")
    assert store.get("d-1")[1] is None


# --- prune ---------------------------------------------------------------------------------------


def test_prune_forgets_what_is_settled_for_good_and_keeps_the_rest(
    store: SqliteApprovalStore, path: Path
) -> None:
    day_ns = 86_400 * 10**9
    now = time.time_ns()
    for decision_id, age_days in (("a", 40), ("b", 10), ("c", 40)):
        expires = now - age_days * day_ns
        store.add(make_pending(decision_id, created_ns=expires - 1, expires_ns=expires))
        store.resolve(Resolution(decision_id, "expired", None, expires))
        if decision_id != "c":  # c is resolved but no log holds it yet
            store.mark_recorded(decision_id, "e" * 64, 5)
    store.add(pending_for_now("waiting"))

    result = approvals("prune", "--store", path, "--older-than", "30", cwd=path.parent)

    assert result.returncode == EXIT_OK, result.stderr
    assert result.stdout == (
        b"pruned 1 decision: resolved, logged, and past their deadline by more than 30 days\n"
    )
    with pytest.raises(ApprovalError, match="awaits approval"):
        store.get("a")
    assert store.record_of("b") is not None
    assert [p.decision_id for p, _ in store.unrecorded()] == ["c"]
    assert [p.decision_id for p in store.pending()] == ["waiting"]
    again = approvals("prune", "--store", path, "--older-than", "0", cwd=path.parent)
    assert again.returncode == EXIT_OK, again.stderr
    assert again.stdout.startswith(b"pruned 1 decision:")  # b, whose deadline has passed
    assert [p.decision_id for p in store.pending()] == ["waiting"]


def test_prune_of_a_missing_store_exits_1_and_creates_nothing(tmp_path: Path) -> None:
    result = approvals("prune", "--store", tmp_path / "x.db", "--older-than", "1", cwd=tmp_path)
    assert result.returncode == EXIT_FAILURE
    assert_one_error_line(result, "does not exist")
    assert not (tmp_path / "x.db").exists()


# --- usage ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "arguments",
    [
        [],
        ["list"],
        ["forget", "--store", "x.db"],
        ["approve", "--store", "x.db", "--approver", "alice"],
        ["approve", "d-1", "--store", "x.db"],
        ["reject", "d-1", "--approver", "alice"],
        ["list", "--store", "x.db", "--approver", "alice"],
        ["prune", "--store", "x.db"],
        ["prune", "--store", "x.db", "--older-than", "-1"],
        ["prune", "--store", "x.db", "--older-than", "nan"],
        ["prune", "--store", "x.db", "--older-than", "inf"],
        ["prune", "--store", "x.db", "--older-than", "100001"],
        ["prune", "--store", "x.db", "--older-than", "a week"],
    ],
)
def test_a_malformed_command_line_exits_2(tmp_path: Path, arguments: list[str]) -> None:
    result = approvals(*arguments, cwd=tmp_path)

    assert result.returncode == EXIT_USAGE
    assert b"Traceback" not in result.stderr
    assert b"usage: ghost" in result.stderr
    assert not (tmp_path / "x.db").exists()


def test_the_help_documents_the_refusal_code(tmp_path: Path) -> None:
    for arguments in (["--help"], ["approve", "--help"], ["reject", "--help"]):
        result = approvals(*arguments, cwd=tmp_path)
        assert result.returncode == EXIT_OK
        words = " ".join(result.stdout.decode().split())  # however argparse wrapped it
        assert f"{EXIT_REFUSED}: the resolution was refused" in words or (
            f"{EXIT_REFUSED}: refused (no such decision, already resolved" in words
        )
    top = ghost("--help", cwd=tmp_path)
    assert b"approvals" in top.stdout


# --- the pieces, in process -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("left_ns", "shown"),
    [
        (-(10**30), "expired"),
        (-1, "expired"),
        (0, "expired"),
        (1, "1s"),
        (10**9, "1s"),
        (10**9 + 1, "2s"),
        (59 * 10**9, "59s"),
        (60 * 10**9, "1m00s"),
        (61 * 10**9, "1m01s"),
        (3_599 * 10**9, "59m59s"),
        (3_600 * 10**9, "1h00m"),
        (3_660 * 10**9, "1h01m"),
        (86_399 * 10**9, "23h59m"),
        (86_400 * 10**9, "1d00h"),
        (90_000 * 10**9, "1d01h"),
        (2**80, "13992196986d06h"),
    ],
)
def test_time_left_rounds_up_and_shows_two_units(left_ns: int, shown: str) -> None:
    assert _time_left(left_ns) == shown


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("plain", '"plain"'),
        ('say "hi"', '"say \\"hi\\""'),
        ("back\\slash", '"back\\\\slash"'),
        ("\x00\x1f\x7f\x9f", '"\\x00\\x1f\\x7f\\x9f"'),
        ("\u200b\u202e\u2028\ufeff", '"\\u200b\\u202e\\u2028\\ufeff"'),
        ("\U000e0041", '"\\U000e0041"'),
        ("\ud800", '"\\ud800"'),
        ("café ü 日本", '"café ü 日本"'),
    ],
)
def test_quoting_escapes_quotes_backslashes_and_everything_unprintable(
    text: str, shown: str
) -> None:
    assert _quoted(text) == shown


def test_error_lines_escape_what_cannot_be_printed_but_keep_quotes() -> None:
    assert _escaped('no "d-1\n" here\x1b') == 'no "d-1\\x0a" here\\x1b'
    assert _escaped("ok 'as is' \\") == "ok 'as is' \\"
