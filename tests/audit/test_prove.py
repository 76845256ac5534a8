"""Building inclusion proofs from real runs: what is proved, and what cannot be."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from audit import McapAuditSink, ProofError, build_inclusion_proof, check_proof, read_run
from runtime import make_uuid7
from runtime.testing import ManualClock
from tests.analysis.stored_run import StoredRun, write_gate_run
from tests.records import STAMP_NS, approval, assessment, decision, make_run_start, write_run


def ids(path: Path) -> list[str]:
    return [r.record["decision_id"] for r in read_run(path).records_on("/decisions") if r.record]


def sink(path: Path, **options: object) -> McapAuditSink:
    result = McapAuditSink(path, clock=ManualClock(), **options)  # type: ignore[arg-type]
    result.open_run(make_run_start())
    return result


@pytest.mark.parametrize("durability", ["process", "fsync", "chunk"])
def test_every_decision_of_a_gate_run_is_proved(tmp_path: Path, durability: str) -> None:
    run = write_gate_run(tmp_path / "run.mcap", durability=durability)  # type: ignore[arg-type]
    for made in run.decisions:
        proof = build_inclusion_proof(run.path, made.decision_id)
        result = check_proof(proof.to_json())
        assert result.ok, result.problems
        assert result.verdict == made.verdict.value
        decision_record = next(r for r in proof.records if r.role == "decision")
        assert json.loads(decision_record.data)["decision_id"] == made.decision_id


def test_a_signed_run_is_proved_under_its_key(tmp_path: Path) -> None:
    key = Ed25519PrivateKey.generate()
    path = tmp_path / "run.mcap"
    write_run(path, decisions=2, signing_key=key)
    proof = build_inclusion_proof(path, ids(path)[1])
    assert check_proof(proof.to_json(), key.public_key()).ok
    assert "\n\n\u2014 ghost/" in proof.checkpoint_note


def test_a_decision_not_in_the_run(tmp_path: Path) -> None:
    path = tmp_path / "run.mcap"
    write_run(path)
    with pytest.raises(ProofError) as caught:
        build_inclusion_proof(path, "019b76da-a800-77db-8310-000000000000")
    assert caught.value.problem == (
        "the run holds no decision with decision_id '019b76da-a800-77db-8310-000000000000'"
    )


def test_a_decision_logged_twice_is_not_proved(tmp_path: Path) -> None:
    path = tmp_path / "run.mcap"
    writer = sink(path)
    decision_id = make_uuid7(STAMP_NS)
    for _ in range(2):
        writer.append("/decisions", decision(decision_id, None))
    writer.close()
    with pytest.raises(ProofError, match="the run holds 2 decisions with decision_id"):
        build_inclusion_proof(path, decision_id)


def test_a_missing_assessment_is_not_proved(tmp_path: Path) -> None:
    path = tmp_path / "run.mcap"
    writer = sink(path)
    decision_id = make_uuid7(STAMP_NS)
    writer.append("/assessments", assessment(decision_id))  # not the one the decision names
    writer.append("/decisions", decision(decision_id, "f" * 64))
    writer.close()
    with pytest.raises(ProofError) as caught:
        build_inclusion_proof(path, decision_id)
    assert caught.value.problem == "the decision's assessment is not in the run"


def test_a_decision_without_an_assessment_is_proved_alone(tmp_path: Path) -> None:
    path = tmp_path / "run.mcap"
    writer = sink(path)
    decision_id = make_uuid7(STAMP_NS)
    writer.append("/decisions", decision(decision_id, None))
    writer.close()
    proof = build_inclusion_proof(path, decision_id)
    assert [r.role for r in proof.records] == ["run", "decision"]
    assert check_proof(proof.to_json()).ok


def test_only_the_approval_of_this_decision_is_taken(tmp_path: Path) -> None:
    path = tmp_path / "run.mcap"
    writer = sink(path)
    decision_id = make_uuid7(STAMP_NS)
    a_sha = writer.append("/assessments", assessment(decision_id))
    d_sha = writer.append("/decisions", decision(decision_id, a_sha, verdict="pending"))
    writer.append("/approvals", approval(decision_id, "e" * 64))  # of no decision here
    writer.append(
        "/approvals", approval(decision_id, d_sha, outcome="rejected", final_verdict="deny")
    )
    writer.close()
    proof = build_inclusion_proof(path, decision_id)
    assert [(r.role, r.leaf_index) for r in proof.records] == [
        ("run", 0),
        ("assessment", 2),
        ("decision", 3),
        ("approval", 5),
    ]
    assert json.loads(proof.records[3].data)["outcome"] == "rejected"
    assert check_proof(proof.to_json()).ok


def test_no_checkpoint_covers_a_decision_after_the_last_one(tmp_path: Path) -> None:
    path = tmp_path / "crashed.mcap"
    writer = sink(path)
    decision_id = make_uuid7(STAMP_NS)
    writer.append("/decisions", decision(decision_id, None))  # never closed: a crash
    try:
        with pytest.raises(ProofError) as caught:
            build_inclusion_proof(path, decision_id)
        assert caught.value.problem == (
            "no checkpoint covers the decision's records (the last is seq 2) yet: the run ends"
            " before the next checkpoint"
        )
    finally:
        writer.close()
    assert check_proof(build_inclusion_proof(path, decision_id).to_json()).ok


def test_a_crashed_run_proves_its_checkpointed_prefix(tmp_path: Path) -> None:
    path = tmp_path / "crashed.mcap"
    writer = write_run(path, decisions=3, checkpoint_every_records=3, close=False)
    try:
        first = ids(path)[0]
        proof = build_inclusion_proof(path, first)
        assert check_proof(proof.to_json()).ok
    finally:
        writer.close()


def test_reading_stops_at_damage_and_what_is_before_it_is_proved(tmp_path: Path) -> None:
    path = tmp_path / "run.mcap"
    write_run(path, decisions=4, checkpoint_every_records=3)
    decisions = ids(path)
    stored = StoredRun.load(path)
    position = stored.index("/decisions", 2)
    seq = stored.messages[position].record["seq"]
    del stored.messages[position]
    damaged = stored.write(tmp_path / "damaged.mcap")

    assert check_proof(build_inclusion_proof(damaged, decisions[0]).to_json()).ok
    with pytest.raises(ProofError) as caught:
        build_inclusion_proof(damaged, decisions[3])
    assert caught.value.problem.startswith("the run holds no decision with decision_id")
    assert caught.value.problem.endswith(
        f" (reading stopped at the record in place of seq {seq}: the run is damaged there;"
        " `ghost verify` says how)"
    )


def test_a_run_without_its_run_record_is_not_proved(tmp_path: Path) -> None:
    path = tmp_path / "run.mcap"
    write_run(path)
    first = ids(path)[0]
    stored = StoredRun.load(path)
    del stored.messages[0]
    with pytest.raises(ProofError) as caught:
        build_inclusion_proof(stored.write(tmp_path / "headless.mcap"), first)
    assert caught.value.problem.startswith("the run has no /run record at seq 0 (reading stopped")


def test_an_edited_record_gives_a_proof_that_does_not_verify(tmp_path: Path) -> None:
    path = tmp_path / "run.mcap"
    write_run(path, decisions=2)
    target = ids(path)[1]
    stored = StoredRun.load(path)
    stored.edit(stored.index("/decisions", 1), verdict="deny")
    edited = stored.write(tmp_path / "edited.mcap")

    result = check_proof(build_inclusion_proof(edited, target).to_json())
    assert not result.ok
    assert "the checkpoint note's root is not root_hash" in result.problems
