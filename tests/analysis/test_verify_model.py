"""The values of run verification: a status true to its facts, lines that name records."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from analysis import IntegrityCheck, RunProblem, RunStatus, RunVerification, SignatureCheck
from analysis._verify_model import MAX_LISTED_PROBLEMS, status_of

PROBLEM = RunProblem(IntegrityCheck.CHAIN, "it is wrong", position=4, seq=4, topic="/decisions")


def make(**changes: Any) -> RunVerification:
    fields: dict[str, Any] = {
        "path": Path("run.mcap"),
        "source_sha256": "a" * 64,
        "status": RunStatus.INTACT,
        "problems": (),
        "problem_count": 0,
        "truncated": False,
        "sealed": True,
        "record_count": 3,
        "verified_prefix": 3,
        "verified_head_sha256": "b" * 64,
        "per_topic_counts": {"/run": 1, "/decisions": 1, "/seal": 1},
        "run_id": None,
        "open_assessments": 0,
        "signed": False,
    }
    fields.update(changes)
    return RunVerification(**fields)


@pytest.mark.parametrize(
    ("problems", "sealed", "truncated", "status"),
    [
        (False, True, False, RunStatus.INTACT),
        (False, True, True, RunStatus.TRUNCATED),
        (False, False, True, RunStatus.TRUNCATED),
        (False, False, False, RunStatus.TRUNCATED),
        (True, True, False, RunStatus.TAMPERED),
        (True, False, True, RunStatus.TAMPERED),
    ],
)
def test_the_status_follows_from_the_facts(
    problems: bool,
    sealed: bool,
    truncated: bool,
    status: RunStatus,
) -> None:
    assert status_of(problems=problems, sealed=sealed, truncated=truncated) is status


def test_an_intact_verification_is_ok() -> None:
    result = make()

    assert result.ok
    assert result.status == "intact"
    assert result.per_topic_counts == {"/run": 1, "/decisions": 1, "/seal": 1}
    assert hash(result.per_topic_counts) == hash(make().per_topic_counts)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"status": RunStatus.TAMPERED}, "status 'tampered' contradicts the facts"),
        ({"sealed": False}, "they make it 'truncated'"),
        ({"truncated": True}, "they make it 'truncated'"),
        ({"problems": (PROBLEM,), "problem_count": 1}, "they make it 'tampered'"),
        ({"problems": (PROBLEM,), "problem_count": 0}, "problem_count 0 disagrees with 1"),
        ({"problem_count": 2}, "problem_count 2 disagrees with 0"),
        ({"verified_prefix": 4}, r"verified_prefix 4 is outside 0\.\.3"),
        ({"verified_prefix": -1}, r"verified_prefix -1 is outside"),
        ({"record_count": 4, "verified_prefix": 4}, "per_topic_counts do not add up"),
        ({"verified_head_sha256": None}, "verified_head_sha256 is set exactly when"),
        ({"verified_prefix": 0}, "verified_head_sha256 is set exactly when"),
        ({"source_sha256": "A" * 64}, "source_sha256 must be 64 lowercase hex"),
        ({"status": "unknown"}, "'unknown' is not a valid RunStatus"),
    ],
)
def test_a_contradictory_verification_cannot_be_built(
    changes: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        make(**changes)


def test_problems_may_be_counted_beyond_those_listed() -> None:
    result = make(status=RunStatus.TAMPERED, problems=[PROBLEM] * 2, problem_count=5, sealed=False)

    assert result.problems == (PROBLEM, PROBLEM)  # a list is frozen into a tuple
    assert result.summary == (
        "tampered: 5 integrity problems (3 not listed) in 3 records;"
        " seq 0-2 verify as a linked chain; not sealed"
    )
    assert MAX_LISTED_PROBLEMS == 1000


def test_the_summary_of_one_problem_is_singular() -> None:
    result = make(status=RunStatus.TAMPERED, problems=[PROBLEM], problem_count=1)

    assert result.summary == (
        "tampered: 1 integrity problem in 3 records; seq 0-2 verify as a linked chain; sealed"
    )


def test_the_summary_of_a_truncated_run() -> None:
    one = make(
        status=RunStatus.TRUNCATED,
        sealed=False,
        truncated=True,
        record_count=1,
        verified_prefix=1,
        per_topic_counts={"/run": 1},
    )
    cut_after_seal = make(status=RunStatus.TRUNCATED, truncated=True)

    assert one.summary.startswith(
        "truncated: 1 record, seq 0 verifies; not sealed: the run ends early, as a crash leaves it;"
    )
    assert "a crash and a deliberate cut look the same" in one.summary
    assert cut_after_seal.summary.startswith(
        "truncated: 3 records, seq 0-2 verify as a linked chain; sealed, but the file is cut"
        " after the seal"
    )


def test_the_summary_of_an_intact_run_owns_up_to_what_it_cannot_show() -> None:
    assert make().summary == (
        "intact: 3 records, seq 0-2 verify as a linked chain, sealed; unsigned: this shows the"
        " log is self-consistent, not who wrote it: an edit followed by a recomputed chain and"
        " checkpoints would pass"
    )


def test_the_summary_says_against_which_key_the_notes_were_checked() -> None:
    given = make(checkpoint_count=2, signatures=SignatureCheck.GIVEN_KEY).summary
    declared = make(checkpoint_count=1, signatures=SignatureCheck.DECLARED_KEY).summary

    assert given.endswith(
        "sealed; 2 checkpoint notes signed by the key given: no one without that key rewrote,"
        " cut or re-sealed it"
    )
    assert declared.endswith(
        "sealed; 1 checkpoint note verifies against the key the run itself declares, which"
        " proves consistency, not authorship (a forger can re-sign with a key of their own):"
        " give --public-key to prove who wrote it"
    )


def test_two_notes_verify_against_the_declared_key_in_the_plural() -> None:
    summary = make(checkpoint_count=2, signatures=SignatureCheck.DECLARED_KEY).summary

    assert "sealed; 2 checkpoint notes verify against the key the run itself declares" in summary


def test_the_summary_counts_the_anchors_that_match() -> None:
    one = make(anchors_checked=1, anchors_matched=1).summary
    two = make(anchors_checked=2, anchors_matched=2, status=RunStatus.TRUNCATED, truncated=True)

    assert one.endswith(
        "; 1 anchor held outside the file match its tree, so nothing they cover was cut or"
        " rewritten"
    )
    assert two.summary.endswith(
        "; 2 anchors held outside the file match its tree, so nothing they cover was cut or"
        " rewritten"
    )
    assert "look the same" not in two.summary


def test_anchors_that_do_not_match_make_a_run_tampered() -> None:
    with pytest.raises(ValueError, match="matches every anchor given"):
        make(anchors_checked=2, anchors_matched=1)
    with pytest.raises(ValueError, match=r"outside 0\.\.1"):
        make(anchors_checked=1, anchors_matched=2)


def test_a_summary_with_no_verified_record() -> None:
    result = make(
        status=RunStatus.TAMPERED,
        problems=[PROBLEM],
        problem_count=1,
        verified_prefix=0,
        verified_head_sha256=None,
    )

    assert "no record verifies from seq 0" in result.summary


# --- problems -----------------------------------------------------------------------------


def test_a_problem_names_its_record() -> None:
    problem = RunProblem(
        IntegrityCheck.LINKS,
        "it claims another assessment",
        position=6,
        seq=6,
        topic="/decisions",
        decision_id="0194a3c1-7e2f-7000-8000-000000000001",
        record_sha256="c" * 64,
    )

    assert str(problem) == (
        "seq 6 /decisions decision 0194a3c1-7e2f-7000-8000-000000000001: links:"
        " it claims another assessment"
    )


def test_a_problem_without_a_readable_seq_names_the_position() -> None:
    problem = RunProblem(IntegrityCheck.JSON, "not JSON", position=3, topic="/seal")

    assert str(problem) == "record #3 (no readable seq) /seal: json: not JSON"


def test_a_problem_about_the_file_says_so() -> None:
    problem = RunProblem("reader", "a chunk is corrupt")  # type: ignore[arg-type]

    assert problem.check is IntegrityCheck.READER
    assert str(problem) == "file: reader: a chunk is corrupt"
    assert problem.where == "file"


def test_a_problem_naming_a_record_needs_its_position() -> None:
    with pytest.raises(ValueError, match="must name the record position"):
        RunProblem(IntegrityCheck.SEQ, "x", seq=3)
    with pytest.raises(ValueError, match="must name the record position"):
        RunProblem(IntegrityCheck.SEQ, "x", topic="/run")


def test_a_problem_on_a_record_whose_topic_is_unknown_says_so() -> None:
    problem = RunProblem(IntegrityCheck.SEQ, "x", position=2, seq=2)

    assert problem.where == "seq 2 ?"


def test_a_verification_defaults_to_no_checkpoint_no_signature_no_anchor() -> None:
    result = make()

    assert (result.checkpoint_count, result.signatures) == (0, SignatureCheck.UNSIGNED)
    assert (result.anchors_checked, result.anchors_matched) == (0, 0)


def test_a_verification_takes_its_enums_by_value() -> None:
    result = make(status="intact", signatures="given_key")

    assert result.status is RunStatus.INTACT
    assert result.signatures is SignatureCheck.GIVEN_KEY


def test_a_negative_anchor_count_is_refused() -> None:
    with pytest.raises(ValueError, match=r"anchors_matched -1 is outside 0\.\.0"):
        make(anchors_matched=-1, status=RunStatus.TAMPERED, problems=[PROBLEM])


def test_a_verification_is_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        make().sealed = False  # type: ignore[misc]


def test_a_problem_is_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        PROBLEM.message = "other"  # type: ignore[misc]


def test_every_check_has_a_lowercase_name() -> None:
    assert all(check.value == check.value.lower() for check in IntegrityCheck)
    assert len({check.value for check in IntegrityCheck}) == len(IntegrityCheck)


def test_a_truncated_run_signed_by_the_key_given_says_so() -> None:
    one = make(
        status=RunStatus.TRUNCATED,
        truncated=True,
        checkpoint_count=1,
        signatures=SignatureCheck.GIVEN_KEY,
    )
    two = make(
        status=RunStatus.TRUNCATED,
        truncated=True,
        checkpoint_count=2,
        signatures=SignatureCheck.GIVEN_KEY,
    )
    declared = make(
        status=RunStatus.TRUNCATED,
        truncated=True,
        checkpoint_count=2,
        signatures=SignatureCheck.DECLARED_KEY,
    )

    assert one.summary.endswith(
        "look the same; the 1 checkpoint note it holds is signed by the key given"
    )
    assert two.summary.endswith("; the 2 checkpoint notes it holds are signed by the key given")
    assert declared.summary.endswith("a crash and a deliberate cut look the same")


def test_check_and_signature_names_are_the_documented_ones() -> None:
    # Problem lines and the summary print these names; scripts that read
    # `ghost verify` output match on them, so each one is contract.
    from analysis import IntegrityCheck, SignatureCheck

    assert {check.name.lower(): check.value for check in IntegrityCheck} == {
        name: name
        for name in (
            "reader", "file", "json", "schema", "canonical", "topic", "seq", "chain",
            "run", "seal", "mcap", "attachment", "links", "checkpoint", "anchor",
        )
    }  # fmt: skip
    assert [check.value for check in SignatureCheck] == ["given_key", "declared_key", "unsigned"]
