"""``ghost policy check | explain | replay`` as a user runs them: real subprocesses, real runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from analysis._demo import SCRIPT, demo_policy_path
from audit import MemoryAuditSink
from runtime import Gate, Policy

ROOT = Path(__file__).parents[2]


def ghost(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{ROOT}", "NO_COLOR": "1"}
    return subprocess.run(
        [sys.executable, "-m", "analysis", *args],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        timeout=300,
    )


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("demo") / "demo.mcap"
    done = ghost("demo", "--out", str(out))
    assert done.returncode == 0, done.stderr
    return out


def test_check_exit_codes_and_lines(tmp_path: Path) -> None:
    good = ghost("policy", "check", str(demo_policy_path()))
    assert good.returncode == 0
    assert "ok (toml, 10 rules)" in good.stdout
    bad = tmp_path / "bad.toml"
    bad.write_text(
        'policy_id = "p"\n\n[[rules]]\nid = "a"\neffect = "alow"\n\n'
        '[[rules]]\nid = "b"\neffect = "narrow"\nnarrow.clamp = { limit = "x" }\n'
    )
    found = ghost("policy", "check", str(bad))
    assert found.returncode == 7
    assert f'{bad}:5: rule "a": effect:' in found.stdout
    assert f'{bad}:10: rule "b": narrow.clamp.limit:' in found.stdout
    assert found.stdout.rstrip().endswith("2 problems")
    assert ghost("policy", "check", str(tmp_path / "missing.toml")).returncode == 1
    assert ghost("policy", "check").returncode == 2
    binary = tmp_path / "binary.toml"
    binary.write_bytes(os.urandom(4096) + b"\xff")
    hostile = ghost("policy", "check", str(binary))
    assert hostile.returncode == 7
    assert "Traceback" not in hostile.stderr


def test_explain_shows_rules_and_never_a_secret() -> None:
    secret = "AKIAIOSFODNN7EXAMPLE"
    args = json.dumps({"amount": 30, "currency": "EUR", "note": f"key {secret}"})
    for extra in ((), ("--json",)):
        done = ghost(
            "policy", "explain", str(demo_policy_path()), "--agent", "support",
            "--verb", "refund", "--resource", "payments:stripe", "--args", args, *extra,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert secret not in done.stdout + done.stderr
    document = json.loads(done.stdout)
    assert document["verdict"] == "scrub"
    assert document["matched_policy"] == "small-refunds"
    near = {rule["id"]: rule for rule in document["rules"]}
    # The approval rule's scope matched, its condition (amount > 50) did not: a near miss.
    assert near["large-refunds-need-approval"]["near_miss"] is True
    assert near["small-refunds"]["matched"] is True
    assert document["args"]["note"] == "key [REDACTED:aws_access_key_id]"
    assert ghost("policy", "explain", str(demo_policy_path()), "--agent", "a", "--verb", "v",
                 "--resource", "r", "--args", "[1]").returncode == 2  # fmt: skip


def test_replay_of_the_demo_under_its_own_policy_reproduces_every_verdict(demo_run: Path) -> None:
    done = ghost("policy", "replay", "--mcap", str(demo_run), "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    document = json.loads(done.stdout)
    assert document["own_policy"] is True
    assert document["counts"]["same"] == len(SCRIPT)
    assert document["counts"]["not_replayable"] == 0


def _verdicts_under(policy: Policy) -> list[str]:
    """The verdicts a real Gate gives the demo's scripted actions under ``policy``."""
    gate = Gate(policy, sink=MemoryAuditSink())
    return [gate.check(step.action).verdict.value for step in SCRIPT]


def test_replay_under_a_modified_policy_reports_exactly_what_changes(
    demo_run: Path, tmp_path: Path
) -> None:
    text = demo_policy_path().read_text()
    modified = text.replace('id = "web-search"\n', 'id = "web-search"\nagents = ["analyst"]\n')
    modified = modified.replace("{ amount = { gt = 50 } }", "{ amount = { gt = 30 } }")
    assert modified != text
    new = tmp_path / "modified.toml"
    new.write_text(modified)
    before = _verdicts_under(Policy.from_toml(demo_policy_path()))
    after = _verdicts_under(Policy.from_toml(new))
    expected = {i for i, (old, now) in enumerate(zip(before, after, strict=True)) if old != now}
    assert expected  # the modification matters
    done = ghost("policy", "replay", "--mcap", str(demo_run), "--policy", str(new), "--json")
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    decisions = document["decisions"]
    assert len(decisions) == len(SCRIPT)
    changed = {i for i, d in enumerate(decisions) if d["status"] == "changed"}
    assert changed == expected
    for i in changed:
        assert (decisions[i]["recorded_verdict"], decisions[i]["verdict"]) == (before[i], after[i])
    text_out = ghost("policy", "replay", "--mcap", str(demo_run), "--policy", str(new))
    assert f"{len(expected)} verdicts would change" in text_out.stdout


def test_replay_of_a_run_without_stored_arguments_says_what_it_cannot_replay(
    tmp_path: Path,
) -> None:
    from audit import McapAuditSink

    run = tmp_path / "run.mcap"
    with McapAuditSink(run) as sink:
        gate = Gate(Policy.from_toml(demo_policy_path()), sink=sink)
        for step in SCRIPT[:16]:
            if step.human is None:
                gate.check(step.action)
    done = ghost("policy", "replay", "--mcap", str(run), "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    document = json.loads(done.stdout)
    assert document["args_stored"] == 0
    statuses = {d["status"] for d in document["decisions"]}
    assert statuses <= {"same", "not_replayable"}
    conditional = [d for d in document["decisions"] if d["verb"] == "refund"]
    assert conditional
    assert all(d["status"] == "not_replayable" for d in conditional)
    assert all("conditions" in d["note"] for d in conditional)
    assert ghost("policy", "replay", "--mcap", str(tmp_path / "nope.mcap")).returncode == 1
