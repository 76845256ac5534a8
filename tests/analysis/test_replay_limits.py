"""Replay and explain of limited rules use counter state, never a recount (ADRs 0032, 0033)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from analysis import ReplayStatus, replay_run
from audit import McapAuditSink
from runtime import Action, Gate, Policy, explain_action
from runtime.testing import ManualClock


def _policy(*, limited: bool = True, extra: list[dict[str, Any]] | None = None) -> Policy:
    rules: list[dict[str, Any]] = []
    if limited:
        rules.append(
            {"id": "rate", "verbs": ["send"], "effect": "deny",
             "limit": {"key": "agent", "window_s": 3600, "max_count": 2}}
        )  # fmt: skip
    rules += extra or []
    rules.append({"id": "send", "verbs": ["send"], "effect": "allow"})
    return Policy.from_dict({"policy_id": "mail", "rules": rules})


def _run(path: Path, **gate: Any) -> list[str]:
    with McapAuditSink(path) as sink:
        checks = Gate(_policy(), sink=sink, clock=ManualClock(), record_args="scrubbed", **gate)
        return [
            checks.check(Action("bot", "send", "mail:x", {"to": "t"})).verdict.value
            for _ in range(4)
        ]


def test_replay_under_the_run_s_own_policy_reproduces_the_limit_s_verdicts(
    tmp_path: Path,
) -> None:
    path = tmp_path / "run.mcap"
    assert _run(path) == ["allow", "allow", "deny", "deny"]
    report = replay_run(path)
    assert [d.status for d in report.decisions] == [ReplayStatus.SAME] * 4
    assert [d.rule for d in report.decisions] == ["send", "send", "rate", "rate"]


def test_dropping_the_limited_rule_changes_exactly_the_decisions_it_denied(
    tmp_path: Path,
) -> None:
    path = tmp_path / "run.mcap"
    _run(path)
    report = replay_run(path, _policy(limited=False))
    statuses = [d.status for d in report.decisions]
    assert statuses == [ReplayStatus.SAME, ReplayStatus.SAME, ReplayStatus.CHANGED,
                        ReplayStatus.CHANGED]  # fmt: skip
    assert [d.verdict for d in report.decisions] == ["allow"] * 4


def test_a_limited_rule_the_run_never_counted_is_not_replayed_on_a_guess(tmp_path: Path) -> None:
    path = tmp_path / "run.mcap"
    _run(path)
    new = {"id": "burst", "verbs": ["send"], "effect": "deny",
           "limit": {"key": "agent", "window_s": 60, "max_count": 1}}  # fmt: skip
    report = replay_run(path, _policy(extra=[new]))
    assert [d.status for d in report.decisions] == [ReplayStatus.NOT_REPLAYABLE] * 4
    assert all("burst" in d.note for d in report.decisions)


def test_explain_takes_a_limited_rule_as_under_its_limit() -> None:
    explanation = explain_action(_policy(), "bot", "send", "mail:x", {"to": "t"})
    assert explanation.verdict == "allow"
    assert explanation.matched_policy == "send"
