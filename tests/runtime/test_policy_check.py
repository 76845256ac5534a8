"""check_policy gathers every problem at its line; the loader still stops at the first."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from audit import McapAuditSink, read_run
from runtime import Action, Gate, Policy, PolicyError
from runtime._policy_check import check_policy

BAD = """policy_id = "p"
default = "maybe"

[[rules]]
id = "refunds"
verbs = ["refund"]
effect = "narrow"
narrow.clamp = { limit = "lots" }

[[rules]]
id = "ok"
effect = "allow"

[[rules]]
id = "typo"
efect = "deny"
effect = "deny"
"""


def test_every_problem_is_reported_at_its_line(tmp_path: Path) -> None:
    path = tmp_path / "policy.toml"
    path.write_text(BAD)
    result = check_policy(path)
    shown = [str(p) for p in result.problems]
    assert shown == [
        f"{path}:2: default: must be 'deny' or 'allow', not 'maybe'",
        f'{path}:8: rule "refunds": narrow.clamp.limit: a clamp bound must be a finite number',
        (
            f'{path}:16: rule "typo": efect: unknown key (allowed here: agents, approval,'
            " description, effect, id, limit, narrow, resources, scrub_exempt, shadow, verbs, when)"
        ),
    ]
    # The loader is not weakened: it still refuses at the first problem.
    with pytest.raises(PolicyError) as caught:
        Policy.from_toml(path)
    assert caught.value.field == "default"


def test_a_good_policy_checks_clean_and_loads() -> None:
    demo = Path(__file__).parents[2] / "src" / "analysis" / "demo_policy.toml"
    result = check_policy(demo)
    assert result.ok
    assert result.rule_count == 10


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b"\xff\xfe" + "policy_id = 'p'".encode("utf-16-le"), "not UTF-8"),
        (b"policy_id = 'p'\x00", "NUL byte"),
        (b"a = " + b"[" * 100_000 + b"]" * 100_000, "nests too deeply"),
        (b"policy_id = \n", "not valid TOML"),
    ],
)
def test_hostile_files_give_problems_not_tracebacks(
    tmp_path: Path, data: bytes, expected: str
) -> None:
    path = tmp_path / "hostile.toml"
    path.write_bytes(data)
    result = check_policy(path)
    assert not result.ok
    assert expected in result.problems[0].problem


def test_a_huge_file_is_refused_unread(tmp_path: Path) -> None:
    path = tmp_path / "huge.toml"
    with path.open("wb") as stream:
        stream.truncate(9 * 1024 * 1024)
    assert "larger than" in check_policy(path).problems[0].problem


def test_cedar_problems_are_each_placed_at_their_statement(tmp_path: Path) -> None:
    pytest.importorskip("cedarpy")
    path = tmp_path / "policy.cedar"
    path.write_text(
        '// a comment; with a semicolon\n@id("ok")\npermit(principal, action, resource);\n\n'
        '@id("broken")\npermit(principal, action, resource) when { context.x > };\n\n'
        '@id("clamp")\n@ghost_effect("narrow")\n@ghost_narrow_clamp("{ limit = \'x\' }")\n'
        "permit(principal, action, resource);\n"
    )
    lines = [(p.line, p.rule) for p in check_policy(path).problems]
    assert lines == [(5, "broken"), (10, "clamp")]


SECRETS = ("AKIAIOSFODNN7EXAMPLE", "4111111111111111", "jane.doe@example.com")


def test_stored_arguments_are_scrubbed_and_never_hold_a_secret(tmp_path: Path) -> None:
    policy = Policy.from_dict(
        {
            "policy_id": "p",
            "rules": [
                {"id": "mail", "verbs": ["send"], "effect": "allow", "scrub_exempt": ["to"]},
            ],
        }
    )
    run = tmp_path / "run.mcap"
    with McapAuditSink(run) as sink:
        gate = Gate(policy, sink=sink, record_args="scrubbed")
        action = Action(
            "a", "send", "mail:x", {"to": SECRETS[2], "body": f"{SECRETS[0]} {SECRETS[1]}", "n": 3}
        )
        decision = gate.check(action)
        assert decision.args["to"] == SECRETS[2]  # exempt: the tool gets it ...
    data = run.read_bytes()
    records = [r.record for r in read_run(run).records if r.record is not None]
    text = json.dumps([dict(r) for r in records])
    for secret in SECRETS:  # ... the log never does
        assert secret.encode() not in data
        assert secret not in text
    (assessment,) = [r for r in records if r["schema"] == "ghost.assessment/1"]
    stored = json.loads(assessment["args_scrubbed"])
    assert stored["n"] == 3
    assert stored["to"] == "[REDACTED:email]"


def test_arguments_are_not_stored_by_default(tmp_path: Path) -> None:
    policy = Policy.from_dict({"policy_id": "p", "default": "allow"})
    run = tmp_path / "run.mcap"
    with McapAuditSink(run) as sink:
        Gate(policy, sink=sink).check(Action("a", "v", "r", {"x": "plain value"}))
    records = [r.record for r in read_run(run).records if r.record is not None]
    (assessment,) = [r for r in records if r["schema"] == "ghost.assessment/1"]
    assert "args_scrubbed" not in assessment
    assert b"plain value" not in run.read_bytes()
    with (
        McapAuditSink(tmp_path / "x.mcap") as other,
        pytest.raises(ValueError, match="record_args"),
    ):
        Gate(policy, sink=other, record_args="raw")  # type: ignore[arg-type]
