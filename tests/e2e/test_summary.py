"""``ghost summary``: one run at a glance, on real runs, in a real subprocess."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from analysis import build_decision_trace_report, verify_run
from analysis._summary import summarize
from analysis._summary_render import render_summary
from audit import McapAuditSink
from runtime import make_uuid7
from runtime.testing import ManualClock
from tests.analysis.test_trace_statistics import MS, _write_known_run
from tests.e2e.test_cli import assert_one_error_line, ghost
from tests.records import (
    STAMP_NS,
    assessment,
    decision,
    make_run_start,
    write_run,
    write_tampered_run,
)


@pytest.fixture
def known(tmp_path: Path) -> Path:
    path = tmp_path / "known.mcap"
    _write_known_run(path)
    return path


def _lines(path: Path, *args: str) -> list[str]:
    result = ghost("summary", path, *args, cwd=path.parent)
    assert result.returncode == 0, result.stderr
    assert result.stderr == b""
    assert b"\x1b" not in result.stdout  # piped: no escape codes
    return result.stdout.decode().splitlines()


def test_the_summary_of_a_known_run_says_what_happened(known: Path) -> None:
    lines = _lines(known)

    assert lines[0] == str(known)
    assert lines[1] == "integrity: INTACT: every check passed, and the run is sealed"
    assert lines[2] == "decisions: 10  (deny=2  pending=3  narrow=0  scrub=1  allow=4)"
    text = "\n".join(lines)
    # Latency: 1 2 3 4 5 6 7 8 10 20 ms -> p50 5 ms, p90 10 ms, p99 20 ms.
    (all_row,) = [line for line in lines if line.startswith("all ")]
    assert all_row.split() == [
        "all",
        "10",
        "1",
        "ms",
        "5",
        "ms",
        "10",
        "ms",
        "20",
        "ms",
        "20",
        "ms",
    ]
    rules = lines[lines.index("top rules") + 2 : lines.index("top rules") + 6]
    assert [line.split() for line in rules] == [
        ["read-public", "3"],
        ["refunds", "3"],
        ["web-search", "2"],
        ["no-shell", "1"],
    ]
    denied = lines[lines.index("top denied actions") + 2 :][:2]
    assert [line.split() for line in denied] == [
        ["ops/cleaner", "read", "file:/data/q3.txt", "1"],
        ["support", "read", "file:/data/q3.txt", "1"],
    ]
    assert (
        "approvals: approved=2  expired=1; pending never resolved: 1; wait p50 5 s, max 600 s"
        in lines
    )
    assert lines[-1] == "detectors: email=3  aws_access_key=1"
    assert "problem" not in text


def test_the_json_summary_carries_the_same_facts(known: Path) -> None:
    result = ghost("summary", "--mcap", known, "--json", cwd=known.parent)

    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert document["status"] == "intact"
    assert (document["sealed"], document["truncated"], document["problem_count"]) == (
        True,
        False,
        0,
    )
    assert document["verdict_counts"] == {
        "allow": 4,
        "deny": 2,
        "narrow": 0,
        "pending": 3,
        "scrub": 1,
    }
    assert document["latency_ns"] == {
        "count": 10,
        "min_ns": 1 * MS,
        "p50_ns": 5 * MS,
        "p90_ns": 10 * MS,
        "p99_ns": 20 * MS,
        "max_ns": 20 * MS,
    }
    assert document["top_rules"][0] == {"rule": "read-public", "count": 3}
    assert document["top_denied"][0] == {
        "agent": "ops/cleaner",
        "verb": "read",
        "resource": "file:/data/q3.txt",
        "count": 1,
    }
    assert document["approval_counts"] == {"approved": 2, "expired": 1}
    assert document["unresolved_pending"] == 1
    assert document["top_detectors"] == [
        {"detector": "email", "count": 3},
        {"detector": "aws_access_key", "count": 1},
    ]


def test_a_truncated_run_says_so_first(tmp_path: Path) -> None:
    live, path = tmp_path / "live.mcap", tmp_path / "cut.mcap"
    sink = write_run(live, decisions=3, close=False)
    path.write_bytes(live.read_bytes())  # what a crash leaves: no seal, no footer
    sink.close()
    lines = _lines(path)
    assert lines[1] == "integrity: TRUNCATED: a correctly linked prefix, unsealed (a crash?)"
    assert lines[2].startswith("decisions: 3 ")


def test_a_tampered_run_says_so_first(tmp_path: Path) -> None:
    edited = write_tampered_run(tmp_path)
    lines = _lines(edited)
    assert lines[1] == "integrity: TAMPERED: the log fails its integrity checks"
    assert "problem(s): run `ghost verify` on the file to list them" in lines[2]


def test_text_from_the_run_cannot_restyle_the_terminal(tmp_path: Path) -> None:
    path = tmp_path / "hostile.mcap"
    agent = "[bold red]evil[/bold red]\x1b[2J\u202eoops"
    with McapAuditSink(path, clock=ManualClock()) as sink:
        sink.open_run(make_run_start())
        decision_id = make_uuid7(STAMP_NS)
        a_sha = sink.append("/assessments", assessment(decision_id, agent=agent))
        sink.append("/decisions", decision(decision_id, a_sha, verdict="deny"))

    output = "\n".join(_lines(path))

    assert "[bold red]evil[/bold red]\\x1b[2J\\u202eoops" in output  # shown, not obeyed
    assert "\u202e" not in output


def test_a_terminal_gets_colour_and_no_color_turns_it_off(known: Path) -> None:
    summary = summarize(build_decision_trace_report(known), verify_run(known))
    coloured, plain = io.StringIO(), io.StringIO()
    render_summary(summary, name="run", file=coloured, terminal=True, color=True)
    render_summary(summary, name="run", file=plain, terminal=True, color=False)

    assert "\x1b[" in coloured.getvalue()
    assert "INTACT" in coloured.getvalue()
    assert "\x1b[" not in plain.getvalue().replace("\x1b[0m", "")
    assert "integrity: INTACT" in plain.getvalue()


def test_a_missing_file_is_one_error_line_and_exit_1(tmp_path: Path) -> None:
    result = ghost("summary", tmp_path / "nope.mcap", cwd=tmp_path)
    assert result.returncode == 1
    assert_one_error_line(result, "cannot read")


@pytest.mark.parametrize("arguments", [[], ["a.mcap", "--mcap", "b.mcap"], ["--colour"]])
def test_the_run_is_named_exactly_once(tmp_path: Path, arguments: list[str]) -> None:
    result = ghost("summary", *arguments, cwd=tmp_path)
    assert result.returncode == 2
    assert b"usage: ghost" in result.stderr
    assert b"Traceback" not in result.stderr


def test_ghost_help_lists_summary(tmp_path: Path) -> None:
    result = ghost("--help", cwd=tmp_path)
    assert result.returncode == 0
    assert b"summary" in result.stdout


@pytest.mark.parametrize("command", [["verify"], ["trace-decisions"], ["summary"]])
def test_every_run_command_takes_the_run_as_path_or_mcap(known: Path, command: list[str]) -> None:
    positional = ghost(*command, known, cwd=known.parent)
    optional = ghost(*command, "--mcap", known, cwd=known.parent)
    assert positional.returncode == optional.returncode == 0, positional.stderr
    assert positional.stdout == optional.stdout
    twice = ghost(*command, known, "--mcap", known, cwd=known.parent)
    assert twice.returncode == 2
    assert f"usage: ghost {command[0]}".encode() in twice.stderr
    assert b"give the run once" in twice.stderr


def test_ghost_help_gives_every_command_one_short_line(tmp_path: Path) -> None:
    result = ghost("--help", cwd=tmp_path)
    lines = result.stdout.decode().splitlines()
    listed = lines[lines.index("  COMMAND") + 1 : lines.index("options:") - 1]
    names = [line.split()[0] for line in listed if line.startswith("    ") and line[4] != " "]
    assert names == [
        "verify", "trace-decisions", "summary", "report", "demo", "keygen", "prove",
        "verify-proof", "approvals", "mcp-proxy", "export", "fleet", "audit-daemon", "policy",
    ]  # fmt: skip
    assert all(len(line) <= 80 for line in listed), listed
    assert len(listed) == len(names)  # each help on its command's line, trace-decisions too
