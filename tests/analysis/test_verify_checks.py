"""The record checks one by one, fed records built here: every rule and every branch.

`test_verify_run` shows each check catching its tamper in a real file; this
module pins the rules themselves, including the cases a small real run
cannot reach (``seq`` past 2^32, an unknown topic, every way a
decision, an assessment and an approval can disagree).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Mapping
from dataclasses import replace
from types import MappingProxyType
from typing import Any

import pytest

from analysis import IntegrityCheck, RunProblem
from analysis._run_facts import (
    RecordFacts,
    RunEnd,
    _clip,
    is_sealed,
    read_facts,
    shown,
    shown_schema,
)
from analysis._verify_chain import (
    ChainCheck,
    KnownTopicsCheck,
    McapFieldsCheck,
    RunRecordCheck,
    SealCheck,
    SeqCheck,
)
from analysis._verify_links import DecisionLinkCheck, PolicyAttachmentCheck
from audit import TOPICS, LoggedAttachment, LoggedRecord
from runtime import canonical_bytes, make_uuid7, sha256_hex
from tests.records import POLICY_SOURCE, STAMP_NS, approval, assessment, decision

C = IntegrityCheck
ID_1 = make_uuid7(STAMP_NS + 1_000_000)
ID_2 = make_uuid7(STAMP_NS + 2_000_000)


def facts(
    position: int,
    topic: str,
    record: Mapping[str, Any],
    *,
    log_time: int | None = None,
    sequence: int | None = None,
) -> RecordFacts:
    """The facts of a record stored canonically at ``position``, seq = position."""
    full = {"seq": position, "prev_sha256": "0" * 64, **record}
    data = canonical_bytes(full)
    logged = LoggedRecord(
        topic=topic,
        log_time_ns=full["stamp_ns"] if log_time is None else log_time,
        sequence=full["seq"] % 2**32 if sequence is None else sequence,
        data=data,
        sha256=sha256_hex(data),
        record=MappingProxyType(full),
        problem=None,
        publish_time_ns=full["stamp_ns"],
        channel_id=1,
        offset=position,
        offset_in_chunk=None,
    )
    result, problems = read_facts(position, logged, TOPICS)
    assert [p for p in problems if p.check is not C.SCHEMA] == []
    return result


def stored_record(
    topic: str, data: bytes, record: Mapping[str, Any] | None, problem: str | None
) -> LoggedRecord:
    """A record as the reader returns it, MCAP times and sequence 1."""
    return LoggedRecord(
        topic=topic,
        log_time_ns=1,
        sequence=1,
        data=data,
        sha256=sha256_hex(data),
        record=record,
        problem=problem,
        publish_time_ns=1,
        channel_id=1,
        offset=0,
        offset_in_chunk=None,
    )


def messages(problems: Iterable[RunProblem]) -> list[str]:
    return [problem.message for problem in problems]


END_SEALED = RunEnd(record_count=10, truncated=False, sealed=True, attachments=())
END_CRASHED = RunEnd(record_count=10, truncated=True, sealed=False, attachments=())
END_CUT_AFTER_SEAL = RunEnd(record_count=10, truncated=True, sealed=True, attachments=())
END_COMPLETE_UNSEALED = RunEnd(record_count=10, truncated=False, sealed=False, attachments=())


# --- decisions and assessments --------------------------------------------------------------


class Links:
    """A DecisionLinkCheck fed one record at a time, positions counted for us."""

    def __init__(self) -> None:
        self.check = DecisionLinkCheck()
        self.position = 0

    def feed(self, topic: str, record: Mapping[str, Any]) -> tuple[RecordFacts, list[RunProblem]]:
        self.position += 1
        fed = facts(self.position, topic, record)
        return fed, list(self.check.visit(fed))

    def assess(self, decision_id: str = ID_1, **changes: Any) -> RecordFacts:
        fed, problems = self.feed("/assessments", assessment(decision_id, **changes))
        assert problems == []
        return fed

    def decide(
        self, claim: str | None, decision_id: str = ID_1, **changes: Any
    ) -> tuple[RecordFacts, list[RunProblem]]:
        return self.feed("/decisions", decision(decision_id, claim, **changes))


def test_a_decision_resting_on_its_assessment_passes() -> None:
    links = Links()
    first = links.assess()
    assert links.check.open_assessments == 1

    _, problems = links.decide(first.address)

    assert problems == []
    assert links.check.open_assessments == 0
    assert list(links.check.finish(END_SEALED)) == []


def test_a_decision_claiming_no_assessment_passes_when_none_was_logged() -> None:
    links = Links()

    _, problems = links.decide(None)

    assert problems == []


def test_a_decision_claiming_no_assessment_while_one_is_logged_is_named() -> None:
    links = Links()
    links.assess()

    fed, problems = links.decide(None)

    assert messages(problems) == [
        (
            "it claims no assessment (assessment_sha256 is null), but its assessment is logged"
            f" (seq 1 (/assessments, decision {ID_1}))"
        )
    ]
    assert problems[0].position == fed.position
    assert problems[0].decision_id == ID_1
    assert problems[0].check is C.LINKS


def test_a_decision_claiming_an_assessment_that_is_not_there_is_named() -> None:
    links = Links()

    _, problems = links.decide("e" * 64)

    assert messages(problems) == [
        f"it claims assessment {'e' * 64}, but no assessment for this decision precedes it"
    ]


def test_a_decision_claiming_another_decisions_assessment_is_named() -> None:
    links = Links()
    other = links.assess(ID_2)

    _, problems = links.decide(other.address)

    assert messages(problems) == [
        (
            f"it claims assessment {other.address}, but it claims the assessment of decision"
            f" {ID_2}: records were swapped or re-linked"
        )
    ]


def test_a_claimed_assessment_is_no_longer_open_to_claims() -> None:
    links = Links()
    first = links.assess()
    links.decide(first.address)

    _, problems = links.decide(first.address, decision_id=ID_2)

    # Its one decision has it: a second claim finds nothing open, and says so.
    assert messages(problems) == [
        f"it claims assessment {first.address}, but no assessment for this decision precedes it"
    ]


def test_a_claim_that_is_not_a_hash_is_described() -> None:
    links = Links()

    _, problems = links.decide(claim=True)  # type: ignore[arg-type]

    assert messages(problems) == [
        "it claims assessment a boolean, but no assessment for this decision precedes it"
    ]


def test_a_decision_whose_assessment_hashes_differently_is_named() -> None:
    links = Links()
    first = links.assess()

    _, problems = links.decide("e" * 64)

    assert messages(problems) == [
        (
            f"it claims assessment {'e' * 64}, but its assessment, seq 1 (/assessments,"
            f" decision {ID_1}), has content address {first.address}"
        )
    ]


@pytest.mark.parametrize("name", ["policy_id", "policy_sha256", "trace_id", "span_id"])
def test_a_decision_that_disagrees_with_its_assessment_is_named(name: str) -> None:
    links = Links()
    first = links.assess()
    value = "f" * len(str(first.field(name)))

    _, problems = links.decide(first.address, **{name: value})

    assert len(problems) == 1
    assert problems[0].message.startswith(f"its {name} differ from its assessment's (seq 1")


def test_every_disagreeing_field_is_listed() -> None:
    links = Links()
    first = links.assess()

    _, problems = links.decide(first.address, policy_id="other", trace_id="f" * 32)

    assert messages(problems)[0].startswith("its policy_id, trace_id differ")


def test_a_second_decision_with_the_same_id_is_named() -> None:
    links = Links()
    first = links.assess()
    links.decide(first.address)

    _, problems = links.decide(first.address)

    assert messages(problems) == [
        (
            f"a second decision with this decision_id (the first is seq 2 (/decisions,"
            f" decision {ID_1}))"
        )
    ]


def test_a_second_assessment_for_one_decision_is_named() -> None:
    links = Links()
    links.assess()

    _, problems = links.feed("/assessments", assessment(ID_1, agent="other"))

    assert messages(problems) == [
        (
            f"a second assessment for this decision (the first is seq 1 (/assessments,"
            f" decision {ID_1})): a gate logs one"
        )
    ]
    # The first stays the one its decision must rest on.
    assert links.check.open_assessments == 1


def test_an_assessment_after_its_decision_is_named() -> None:
    links = Links()
    links.decide(None)

    _, problems = links.feed("/assessments", assessment(ID_1))

    assert messages(problems) == [
        (
            f"an assessment for a decision already logged (seq 1 (/decisions, decision {ID_1})):"
            " a gate logs the assessment first"
        )
    ]
    assert links.check.open_assessments == 0


def test_records_without_a_readable_decision_id_are_left_to_the_schema_check() -> None:
    links = Links()

    for topic, record in (
        ("/assessments", assessment("not-a-uuid")),
        ("/decisions", decision("not-a-uuid", "e" * 64)),
        ("/approvals", approval("not-a-uuid", "e" * 64)),
    ):
        _, problems = links.feed(topic, record)
        assert problems == []
    assert links.check.open_assessments == 0


def test_records_on_other_topics_are_not_linked() -> None:
    links = Links()

    _, problems = links.feed("/seal", {**decision(ID_1, "e" * 64), "schema": "ghost.seal/1"})

    assert problems == []


# --- approvals ------------------------------------------------------------------------------


def pending_decision(links: Links) -> RecordFacts:
    first = links.assess()
    fed, problems = links.decide(first.address, verdict="pending")
    assert problems == []
    return fed


def test_an_approval_of_a_pending_decision_passes() -> None:
    links = Links()
    pending = pending_decision(links)

    _, problems = links.feed("/approvals", approval(ID_1, pending.address))

    assert problems == []


def test_an_approval_of_an_unlogged_decision_is_named() -> None:
    links = Links()

    _, problems = links.feed("/approvals", approval(ID_1, "e" * 64))

    assert messages(problems) == ["it resolves a decision that is not logged before it"]


def test_an_approval_naming_the_wrong_address_is_named() -> None:
    links = Links()
    pending = pending_decision(links)

    _, problems = links.feed("/approvals", approval(ID_1, "e" * 64))

    assert messages(problems) == [
        (
            f"it names its decision by content address {'e' * 64}, but the decision, seq 2"
            f" (/decisions, decision {ID_1}), has content address {pending.address}"
        )
    ]


@pytest.mark.parametrize(
    ("verdict", "said"),
    [("allow", "'allow'"), ("deny", "'deny'"), ("Pending", "a string"), (7, "7")],
)
def test_an_approval_of_a_decision_that_is_not_pending_is_named(verdict: object, said: str) -> None:
    links = Links()
    first = links.assess()
    decided, _ = links.decide(first.address, verdict=verdict)

    _, problems = links.feed("/approvals", approval(ID_1, decided.address))

    assert messages(problems) == [
        (
            f"it resolves a decision (seq 2 (/decisions, decision {ID_1})) whose verdict is"
            f" {said}, not 'pending'"
        )
    ]


def test_a_second_approval_of_one_decision_is_named() -> None:
    links = Links()
    pending = pending_decision(links)
    links.feed("/approvals", approval(ID_1, pending.address))

    _, problems = links.feed("/approvals", approval(ID_1, pending.address, outcome="rejected"))

    assert messages(problems) == [
        f"a second approval for this decision (the first is seq 3 (/approvals, decision {ID_1}))"
    ]


# --- approvals of a decision in an earlier run (decision_run_id, ADR 0016) -------------------

THIS_RUN = make_uuid7(STAMP_NS)
EARLIER_RUN = make_uuid7(STAMP_NS - 3_600_000_000_000)


def run_links(run_id: str = THIS_RUN) -> Links:
    """Links whose /run record (position 0) names ``run_id``."""
    links = Links()
    run = {"schema": "ghost.run/1", "stamp_ns": STAMP_NS, "run_id": run_id}
    assert list(links.check.visit(facts(0, "/run", run))) == []
    return links


def test_an_approval_of_a_decision_of_an_earlier_run_passes() -> None:
    links = run_links()

    _, problems = links.feed("/approvals", approval(ID_1, "e" * 64, decision_run_id=EARLIER_RUN))

    assert problems == []


def test_an_approval_naming_this_run_as_the_decisions_is_named() -> None:
    links = run_links()

    _, problems = links.feed("/approvals", approval(ID_1, "e" * 64, decision_run_id=THIS_RUN))

    assert messages(problems) == [
        "its decision_run_id names this run; an approval of a decision of this run says null"
    ]


def test_an_approval_claiming_another_run_for_a_decision_of_this_one_is_named() -> None:
    links = run_links()
    pending = pending_decision(links)

    _, problems = links.feed(
        "/approvals", approval(ID_1, pending.address, decision_run_id=EARLIER_RUN)
    )

    assert messages(problems) == [
        (
            f"it says its decision is in run {EARLIER_RUN}, but the decision is logged in this"
            f" run (seq 2 (/decisions, decision {ID_1}))"
        )
    ]


def test_a_second_approval_of_a_decision_of_an_earlier_run_is_named() -> None:
    links = run_links()
    links.feed("/approvals", approval(ID_1, "e" * 64, decision_run_id=EARLIER_RUN))

    _, problems = links.feed(
        "/approvals", approval(ID_1, "e" * 64, decision_run_id=EARLIER_RUN, outcome="expired")
    )

    assert messages(problems) == [
        f"a second approval for this decision (the first is seq 1 (/approvals, decision {ID_1}))"
    ]


def test_an_earlier_runs_approval_then_a_local_one_is_a_second_approval() -> None:
    links = run_links()
    links.feed("/approvals", approval(ID_2, "e" * 64, decision_run_id=EARLIER_RUN))
    first = links.assess(ID_2)
    pending, _ = links.decide(first.address, ID_2, verdict="pending")

    _, problems = links.feed("/approvals", approval(ID_2, pending.address))

    assert messages(problems) == [
        f"a second approval for this decision (the first is seq 1 (/approvals, decision {ID_2}))"
    ]


def test_a_run_record_elsewhere_does_not_set_the_run() -> None:
    links = Links()
    # Not at position 0: not this run's /run record, so it names no run.
    links.check.visit(
        facts(5, "/run", {"schema": "ghost.run/1", "stamp_ns": STAMP_NS, "run_id": THIS_RUN})
    )

    _, problems = links.feed("/approvals", approval(ID_1, "e" * 64, decision_run_id=THIS_RUN))

    assert problems == []


# --- the end of the run ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("end", "named"),
    [
        (END_SEALED, True),
        (END_COMPLETE_UNSEALED, True),
        (END_CUT_AFTER_SEAL, True),
        (END_CRASHED, False),
    ],
    ids=["sealed", "complete-unsealed", "cut-after-seal", "crashed"],
)
def test_an_assessment_without_its_decision_is_named_unless_a_crash_explains_it(
    end: RunEnd, named: bool
) -> None:
    links = Links()
    lonely = links.assess()

    problems = list(links.check.finish(end))

    if named:
        assert [(p.position, p.decision_id) for p in problems] == [(lonely.position, ID_1)]
        assert "no decision claims this assessment, yet the run was closed" in (problems[0].message)
    else:
        assert problems == []
    assert links.check.open_assessments == 1


# --- seq, MCAP fields, topics, checkpoints --------------------------------------------------


def test_mcap_sequence_wraps_at_2_to_the_32() -> None:
    check = McapFieldsCheck()
    seq = 2**32 + 5
    record = {**decision(ID_1, None), "seq": seq}

    assert list(check.visit(facts(1, "/decisions", record, sequence=5))) == []
    problems = list(check.visit(facts(1, "/decisions", record, sequence=seq - 2**31)))
    assert messages(problems) == [
        f"its MCAP sequence is {seq - 2**31}, but its seq {seq} makes it 5"
    ]


def test_mcap_fields_of_an_unreadable_record_are_not_compared() -> None:
    logged = stored_record("/decisions", b"x", None, "not JSON")
    unreadable, _ = read_facts(3, logged, TOPICS)

    assert list(McapFieldsCheck().visit(unreadable)) == []


def test_a_log_time_that_differs_is_named() -> None:
    problems = list(
        McapFieldsCheck().visit(facts(1, "/decisions", decision(ID_1, None), log_time=7))
    )

    assert messages(problems) == [f"its MCAP log_time is 7, but its stamp_ns is {STAMP_NS}"]


def test_seq_resumes_after_a_gap() -> None:
    check = SeqCheck()
    records = [facts(0, "/run", {"stamp_ns": 1, "schema": "ghost.run/1"})]
    records.append(facts(1, "/decisions", {**decision(ID_1, None), "seq": 5}))
    records.append(facts(2, "/decisions", {**decision(ID_2, None), "seq": 6}))

    found = [list(check.visit(record)) for record in records]

    assert [len(problems) for problems in found] == [0, 1, 0]


def test_a_record_on_a_topic_the_verifier_does_not_know_is_not_verified() -> None:
    check = KnownTopicsCheck({"/run"})
    unknown = facts(3, "/checkpoints", {"schema": "ghost.checkpoint/1", "stamp_ns": 1})

    problems = list(check.visit(unknown))

    assert messages(problems) == [
        (
            "this verifier does not know how to check records on /checkpoints, so the record"
            " is not verified"
        )
    ]
    assert problems[0].check is C.TOPIC
    assert list(check.visit(facts(0, "/run", {"schema": "ghost.run/1", "stamp_ns": 1}))) == []
    assert list(check.finish(END_SEALED)) == []


# --- what a message may show ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "text"),
    [
        ("a" * 64, "a" * 64),
        (ID_1, ID_1),
        ("A" * 64, "a string"),
        ("a" * 63, "a string"),
        ("line\nbreak", "a string"),
        (10**20 - 1, str(10**20 - 1)),
        (-(10**20) + 1, str(-(10**20) + 1)),
        (10**20, "a very large integer"),
        (-(10**20), "a very large integer"),
        (True, "a boolean"),
        (None, "null"),
        ([1], "an array"),
        (1.5, "a number"),
    ],
)
def test_a_message_shows_only_validated_values(value: object, text: str) -> None:
    assert shown(value) == text


def test_a_record_that_the_reader_could_not_parse_says_why() -> None:
    def unreadable(problem: str | None) -> str:
        logged = stored_record("/seal", b"x", None, problem)
        _, problems = read_facts(0, logged, TOPICS)
        assert [p.check for p in problems] == [C.JSON]
        return problems[0].message

    assert unreadable("the message is JSON null") == (
        "the message cannot be read: the message is JSON null"
    )
    assert unreadable(None) == "the message cannot be read: it is not a JSON object"


def test_a_long_reason_for_no_canonical_form_is_clipped() -> None:
    huge = 10**200  # parses as JSON, but no record may hold it
    data = canonical_bytes({"schema": "ghost.seal/1"})[:-1] + f',"stamp_ns":{huge}}}'.encode()
    logged = stored_record("/seal", data, MappingProxyType(json.loads(data)), None)

    _, problems = read_facts(0, logged, TOPICS)

    canonical = next(p for p in problems if p.check is C.CANONICAL)
    reason = canonical.message.split(" (", 1)[1]
    assert reason.startswith("integer 1000")
    assert reason.endswith("…)")
    assert len(reason) == 161  # 159 characters, the ellipsis, the parenthesis


# --- the shape checks' boundaries (pinned for mutation testing, ADR 0014) -------------------


def test_mcap_sequence_wraps_at_2_to_the_32_not_before() -> None:
    # seq 2^31 + 5 is stored as itself: a modulus of 2^31 would call it 5.
    seq = 2**31 + 5
    record = {**decision(ID_1, None), "seq": seq}

    assert list(McapFieldsCheck().visit(facts(1, "/decisions", record, sequence=seq))) == []
    problems = list(McapFieldsCheck().visit(facts(1, "/decisions", record, sequence=5)))
    assert messages(problems) == [f"its MCAP sequence is 5, but its seq {seq} makes it {seq}"]


def test_both_mcap_fields_are_named_when_both_differ() -> None:
    record = decision(ID_1, None)

    problems = list(McapFieldsCheck().visit(facts(1, "/decisions", record, log_time=7, sequence=9)))

    assert messages(problems) == [
        f"its MCAP log_time is 7, but its stamp_ns is {STAMP_NS}",
        "its MCAP sequence is 9, but its seq 1 makes it 1",
    ]
    assert [p.check for p in problems] == [C.MCAP, C.MCAP]


def test_an_unreadable_seq_takes_its_place_without_a_seq_problem() -> None:
    check = SeqCheck()
    run = facts(0, "/run", {"stamp_ns": 1, "schema": "ghost.run/1"})
    no_seq = facts(1, "/decisions", {**decision(ID_1, None), "seq": "one"}, sequence=1)
    after = facts(2, "/decisions", decision(ID_2, None))

    assert [list(check.visit(f)) for f in (run, no_seq, after)] == [[], [], []]


def test_a_run_whose_first_seq_is_not_0_is_named_once() -> None:
    check = SeqCheck()
    first = facts(0, "/run", {"stamp_ns": 1, "schema": "ghost.run/1", "seq": 3})

    problems = list(check.visit(first))

    assert messages(problems) == ["the first record has seq 3, but a run's first record is seq 0"]
    assert problems[0].check is C.SEQ
    # It counts on from there.
    assert list(check.visit(facts(4, "/decisions", decision(ID_1, None)))) == []


END_EMPTY = RunEnd(record_count=0, truncated=False, sealed=False, attachments=())
END_EMPTY_CUT = RunEnd(record_count=0, truncated=True, sealed=False, attachments=())


@pytest.mark.parametrize(
    ("end", "run_problem", "seal_problem"),
    [
        (END_EMPTY, True, False),
        (END_EMPTY_CUT, False, False),
        (END_COMPLETE_UNSEALED, False, True),
        # Only the /run record, in a complete file: its seal was removed too.
        (RunEnd(record_count=1, truncated=False, sealed=False, attachments=()), False, True),
        (END_CRASHED, False, False),
    ],
    ids=["complete-empty", "cut-empty", "complete-unsealed", "run-record-only", "crashed"],
)
def test_what_the_end_of_a_run_without_a_seal_tells(
    end: RunEnd, run_problem: bool, seal_problem: bool
) -> None:
    run = list(RunRecordCheck().finish(end))
    seal = list(SealCheck().finish(end))

    assert [p.check for p in run] == ([C.RUN] if run_problem else [])
    assert [p.check for p in seal] == ([C.SEAL] if seal_problem else [])
    if run:
        assert "not a single record" in run[0].message
    if seal:
        assert "holds no readable /seal record" in seal[0].message


def test_a_seal_that_was_read_is_not_missing_at_the_end() -> None:
    check = SealCheck()
    run = facts(0, "/run", {"stamp_ns": 1, "schema": "ghost.run/1"})
    seal = facts(
        1,
        "/seal",
        {"schema": "ghost.seal/1", "stamp_ns": 1, "record_count": 1, "head_sha256": run.address},
    )

    assert list(check.visit(run)) == []
    assert list(check.visit(seal)) == []
    assert list(check.finish(END_COMPLETE_UNSEALED)) == []


def test_an_unreadable_seal_is_left_to_the_json_check_and_still_ends_the_run() -> None:
    check = SealCheck()
    unreadable, _ = read_facts(1, stored_record("/seal", b"x", None, "not JSON"), TOPICS)
    later = facts(2, "/decisions", decision(ID_1, None))

    assert list(check.visit(unreadable)) == []
    problems = list(check.visit(later))

    assert messages(problems) == [
        (
            "it follows the seal (record #1 (/seal)): nothing may follow a run's seal, so it was"
            " added after the run was closed"
        )
    ]


def test_the_first_record_must_be_run_and_no_other() -> None:
    check = RunRecordCheck()

    first = list(check.visit(facts(0, "/decisions", decision(ID_1, None))))
    again = list(check.visit(facts(1, "/run", {"stamp_ns": 1, "schema": "ghost.run/1"})))
    fine = list(RunRecordCheck().visit(facts(0, "/run", {"stamp_ns": 1, "schema": "ghost.run/1"})))
    later = list(check.visit(facts(2, "/decisions", decision(ID_2, None))))

    assert [p.check for p in first + again] == [C.RUN, C.RUN]
    assert first[0].message.startswith("the first record is on /decisions, but a run begins")
    assert again[0].message.startswith("a /run record at position 1: only a run's first")
    assert fine == []
    assert later == []


def test_the_chain_links_each_record_to_the_one_before() -> None:
    check = ChainCheck()
    run = facts(0, "/run", {"stamp_ns": 1, "schema": "ghost.run/1", "prev_sha256": None})
    linked = facts(1, "/decisions", {**decision(ID_1, None), "prev_sha256": run.address})
    broken = facts(2, "/decisions", {**decision(ID_2, None), "prev_sha256": "e" * 64})

    assert list(check.visit(run)) == []
    assert list(check.visit(linked)) == []
    problems = list(check.visit(broken))

    assert messages(problems) == [
        (
            f"its prev_sha256 is {'e' * 64}, but the record before it, seq 1 (/decisions, decision"
            f" {ID_1}), has content address {linked.address}: that record was altered, or this"
            " link was, or records between them were removed"
        )
    ]
    assert problems[0].check is C.CHAIN


def test_a_first_record_that_names_a_predecessor_is_named() -> None:
    problems = list(ChainCheck().visit(facts(0, "/run", {"stamp_ns": 1, "schema": "ghost.run/1"})))

    assert messages(problems) == [
        (
            f"its prev_sha256 is {'0' * 64}, but no record precedes it in the file: the records"
            " before it were removed"
        )
    ]


def test_a_record_without_a_link_is_left_to_the_schema_check_but_counts_as_previous() -> None:
    check = ChainCheck()
    unreadable, _ = read_facts(0, stored_record("/run", b"x", None, "not JSON"), TOPICS)
    no_link = replace(
        facts(1, "/decisions", decision(ID_1, None)),
        record=MappingProxyType({"schema": "ghost.decision/1"}),
    )
    after = facts(2, "/decisions", {**decision(ID_2, None), "prev_sha256": no_link.address})

    assert list(check.visit(unreadable)) == []
    assert list(check.visit(no_link)) == []
    assert list(check.visit(after)) == []


# --- the policy attachment, one rule at a time ----------------------------------------------

POLICY_SHA256 = sha256_hex(POLICY_SOURCE)


def attached(
    data: bytes = POLICY_SOURCE, *, name: str = "policy.toml", log_time: int = STAMP_NS
) -> LoggedAttachment:
    return LoggedAttachment(
        name=name,
        media_type="application/toml",
        log_time_ns=log_time,
        data=data,
        sha256=sha256_hex(data),
        create_time_ns=log_time,
        offset=0,
    )


def attachment_problems(*attachments: LoggedAttachment) -> list[RunProblem]:
    check = PolicyAttachmentCheck()
    run = facts(
        0,
        "/run",
        {"schema": "ghost.run/1", "stamp_ns": STAMP_NS, "policy_source_sha256": POLICY_SHA256},
    )
    assert list(check.visit(run)) == []
    assert list(check.visit(facts(1, "/decisions", decision(ID_1, None)))) == []
    end = RunEnd(record_count=2, truncated=False, sealed=True, attachments=attachments)
    return list(check.finish(end))


def test_the_policy_attached_once_at_the_run_stamp_passes() -> None:
    assert attachment_problems(attached()) == []


def test_no_policy_attachment_lists_what_is_attached() -> None:
    other = attached(b"x", name="a")
    another = attached(b"y", name="b")

    assert messages(attachment_problems()) == [
        (
            "no attachment holds the policy source it names (policy_source_sha256"
            f" {POLICY_SHA256}): the policy attachment was altered or removed (attachments: none)"
        )
    ]
    problems = attachment_problems(other, another)
    assert [(p.check, p.position) for p in problems] == [(C.ATTACHMENT, 0)]
    assert problems[0].message.endswith(
        f"(attachments: 'a', sha256 {other.sha256}; 'b', sha256 {another.sha256})"
    )


def test_a_policy_attached_twice_is_named_once() -> None:
    assert messages(attachment_problems(attached(), attached())) == [
        "its policy source is attached 2 times; a sink attaches it once"
    ]


def test_a_policy_attached_at_another_time_is_named() -> None:
    assert messages(attachment_problems(attached(log_time=STAMP_NS + 1))) == [
        (
            f"its policy attachment has MCAP log_time {STAMP_NS + 1}, but the run's stamp_ns is"
            f" {STAMP_NS}"
        )
    ]


def test_an_attachment_besides_the_policy_is_named_as_the_files() -> None:
    extra = attached(b"x", name="notes.txt")

    problems = attachment_problems(attached(), extra)

    assert messages(problems) == [
        (
            "an attachment that is not the run's policy source ('notes.txt', sha256"
            f" {extra.sha256}): a ghost sink attaches only the policy"
        )
    ]
    assert problems[0].position is None


@pytest.mark.parametrize(
    ("length", "shown_name"),
    [(60, "n" * 60), (61, "n" * 59 + "…")],
)
def test_an_attachment_name_is_clipped_past_60_characters(length: int, shown_name: str) -> None:
    extra = attached(b"x", name="n" * length)

    (problem,) = attachment_problems(attached(), extra)

    assert f"({shown_name!r}, sha256 {extra.sha256})" in problem.message


# --- sealed, as the report and the verifier share it ----------------------------------------


def sealed_run(count: int | None = None, head: str | None = None) -> list[LoggedRecord]:
    run = facts(0, "/run", {"schema": "ghost.run/1", "stamp_ns": 1})
    last = facts(1, "/decisions", decision(ID_1, None))
    seal = facts(
        2,
        "/seal",
        {
            "schema": "ghost.seal/1",
            "stamp_ns": 1,
            "record_count": 2 if count is None else count,
            "head_sha256": last.address if head is None else head,
        },
    )
    return [run.logged, last.logged, seal.logged]


def test_a_run_is_sealed_by_a_last_seal_that_counts_and_names_the_records() -> None:
    assert is_sealed(sealed_run(), TOPICS) is True


def test_a_run_with_no_decision_is_sealed_by_the_seal_after_its_run_record() -> None:
    run = facts(0, "/run", {"schema": "ghost.run/1", "stamp_ns": 1})
    seal = facts(
        1,
        "/seal",
        {"schema": "ghost.seal/1", "stamp_ns": 1, "record_count": 1, "head_sha256": run.address},
    )

    assert is_sealed([run.logged, seal.logged], TOPICS) is True


@pytest.mark.parametrize(
    "records",
    [
        [],
        sealed_run()[:2],
        sealed_run(count=3),
        sealed_run(head="e" * 64),
        sealed_run()[2:],
        [*sealed_run()[:2], stored_record("/seal", b"x", None, "not JSON")],
    ],
    ids=["empty", "no-seal", "wrong-count", "wrong-head", "seal-alone", "unreadable-seal"],
)
def test_a_run_is_not_sealed_otherwise(records: list[LoggedRecord]) -> None:
    assert is_sealed(records, TOPICS) is False


def test_only_an_integer_field_reads_as_an_integer() -> None:
    record = facts(0, "/run", {"schema": "ghost.run/1", "stamp_ns": 1, "flag": True, "text": "7"})

    assert record.integer("stamp_ns") == 1
    assert (record.integer("flag"), record.integer("text"), record.integer("absent")) == (
        None,
        None,
        None,
    )


def test_record_facts_and_the_run_end_are_frozen() -> None:
    record = facts(0, "/run", {"schema": "ghost.run/1", "stamp_ns": 1})

    with pytest.raises(dataclasses.FrozenInstanceError):
        record.seq = 5  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        END_SEALED.sealed = False  # type: ignore[misc]


@pytest.mark.parametrize(
    ("text", "shown_text"),
    [("d" * 160, "d" * 160), ("d" * 161, "d" * 159 + "…")],
)
def test_a_detail_is_clipped_past_160_characters(text: str, shown_text: str) -> None:
    assert _clip(text) == shown_text


def test_a_schema_field_is_quoted_only_when_it_is_a_ghost_schema() -> None:
    names = TOPICS.values()

    assert shown_schema("ghost.run/1", names) == "'ghost.run/1'"
    assert shown_schema("evil\nschema", names) == "a string"
    assert shown_schema(7, names) == "7"


def test_a_claim_that_cannot_be_looked_up_is_described_not_a_crash() -> None:
    links = Links()
    links.assess(ID_2)

    # An array is unhashable: looking it up among the open assessments would raise.
    _, problems = links.decide(claim=["e" * 64])  # type: ignore[arg-type]

    assert messages(problems) == [
        "it claims assessment an array, but no assessment for this decision precedes it"
    ]
