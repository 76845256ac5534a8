"""The chain every sink shares: seq, prev_sha256, content addresses, the seal."""

from __future__ import annotations

import dataclasses
import hashlib
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from audit import TOPICS
from audit._chain import (
    Chain,
    ChainedRecord,
    check_appendable,
    check_record,
    make_run_record,
)
from runtime import AuditError, canonical_bytes, content_address
from tests.records import STAMP_NS, make_run_start


def _run_record() -> dict[str, Any]:
    return make_run_record(make_run_start(), "process")


def _note(stamp_ns: int, **fields: Any) -> dict[str, Any]:
    return {"schema": "ghost.decision/1", "stamp_ns": stamp_ns, **fields}


def test_run_record_is_seq_zero_with_null_prev() -> None:
    chain = Chain()
    linked = chain.link("/run", _run_record())
    assert linked.record["seq"] == 0
    assert linked.record["prev_sha256"] is None
    assert linked.data == canonical_bytes(linked.record)
    assert linked.sha256 == hashlib.sha256(linked.data).hexdigest()
    assert linked.sha256 == content_address(linked.record)


def test_link_does_not_advance_until_commit() -> None:
    chain = Chain()
    first = chain.link("/run", _run_record())
    assert chain.next_seq == 0
    assert chain.head_sha256 is None
    chain.commit(first)
    assert chain.next_seq == 1
    assert chain.head_sha256 == first.sha256


def test_commit_refuses_a_record_that_does_not_extend_the_head() -> None:
    chain = Chain()
    first = chain.link("/run", _run_record())
    chain.commit(first)
    with pytest.raises(AuditError, match="does not extend"):
        chain.commit(first)


def _forged(linked: ChainedRecord, **changes: Any) -> ChainedRecord:
    record = {**linked.record, **changes}
    data = canonical_bytes(record)
    return ChainedRecord(linked.topic, record, data, hashlib.sha256(data).hexdigest())


def test_commit_refuses_the_right_seq_with_a_forged_prev_sha256() -> None:
    chain = Chain()
    chain.commit(chain.link("/run", _run_record()))
    linked = chain.link("/decisions", _note(STAMP_NS))
    with pytest.raises(AuditError, match="seq 1 does not extend"):
        chain.commit(_forged(linked, prev_sha256="f" * 64))
    with pytest.raises(AuditError, match="does not extend"):
        chain.commit(_forged(linked, prev_sha256=None))
    assert (chain.next_seq, chain.head_sha256) == (1, linked.record["prev_sha256"])
    chain.commit(linked)
    assert chain.head_sha256 == linked.sha256


def test_commit_refuses_the_right_prev_sha256_with_a_forged_seq() -> None:
    chain = Chain()
    chain.commit(chain.link("/run", _run_record()))
    linked = chain.link("/decisions", _note(STAMP_NS))
    for seq in (0, 2, 1 + 2**32):
        with pytest.raises(AuditError, match=f"seq {seq} does not extend"):
            chain.commit(_forged(linked, seq=seq))
    assert chain.next_seq == 1
    chain.commit(linked)
    assert chain.next_seq == 2


def test_the_first_record_must_have_a_null_prev() -> None:
    chain = Chain()
    linked = chain.link("/run", _run_record())
    with pytest.raises(AuditError, match="does not extend"):
        chain.commit(_forged(linked, prev_sha256="0" * 64))
    chain.commit(linked)


def test_head_stamp_follows_commits() -> None:
    chain = Chain()
    assert chain.head_stamp_ns == 0
    chain.commit(chain.link("/run", _run_record()))
    assert chain.head_stamp_ns == STAMP_NS
    chain.link("/decisions", _note(STAMP_NS + 5))
    assert chain.head_stamp_ns == STAMP_NS  # linking alone changes nothing
    chain.commit(chain.link("/decisions", _note(STAMP_NS + 7)))
    assert chain.head_stamp_ns == STAMP_NS + 7


@given(st.lists(st.integers(min_value=0, max_value=2**63 - 1), min_size=1, max_size=30))
def test_seq_is_gapless_and_each_record_links_to_the_one_before(stamps: list[int]) -> None:
    chain = Chain()
    run = chain.link("/run", _run_record())
    chain.commit(run)
    previous = run.sha256
    for index, stamp in enumerate(stamps, start=1):
        linked = chain.link("/decisions", _note(stamp, n=index))
        assert linked.record["seq"] == index
        assert linked.record["prev_sha256"] == previous
        assert linked.sha256 == content_address(linked.record)
        chain.commit(linked)
        previous = linked.sha256
    seal = chain.seal_record(0)
    assert seal["record_count"] == len(stamps) + 1
    assert seal["head_sha256"] == previous
    # The seal is never stamped before the record it follows.
    assert seal["stamp_ns"] == stamps[-1]


def test_link_does_not_mutate_the_callers_record() -> None:
    chain = Chain()
    record = _run_record()
    before = dict(record)
    chain.link("/run", record)
    assert record == before


def test_run_must_be_first_and_only_first() -> None:
    chain = Chain()
    with pytest.raises(AuditError, match="/run record must be the first"):
        chain.link("/decisions", _note(STAMP_NS))
    chain.commit(chain.link("/run", _run_record()))
    with pytest.raises(AuditError, match="/run record must be the first"):
        chain.link("/run", _run_record())


def test_seal_before_run_is_refused() -> None:
    with pytest.raises(AuditError, match="before its /run record"):
        Chain().seal_record(STAMP_NS)


def test_a_record_without_canonical_form_is_an_audit_error() -> None:
    chain = Chain()
    chain.commit(chain.link("/run", _run_record()))
    with pytest.raises(AuditError, match="cannot be encoded"):
        chain.link("/decisions", _note(STAMP_NS, latency=1.5))
    assert chain.next_seq == 1


@pytest.mark.parametrize(
    ("topic", "record", "message"),
    [
        ("/nope", _note(1), "not a ghost audit topic"),
        ("/decisions", {"schema": "ghost.approval/1", "stamp_ns": 1}, "must have schema"),
        ("/decisions", {"stamp_ns": 1}, "must have schema"),
        ("/decisions", _note(-1), "non-negative integer"),
        ("/decisions", _note(True), "non-negative integer"),  # noqa: FBT003 - the bad value
        ("/decisions", {"schema": "ghost.decision/1", "stamp_ns": "1"}, "non-negative integer"),
        ("/decisions", _note(1, seq=3), "must not carry seq"),
        ("/decisions", _note(1, prev_sha256=None), "must not carry prev_sha256"),
        ("/decisions", ["not", "a", "mapping"], "must be a mapping"),
    ],
)
def test_check_record_refuses(topic: str, record: Any, message: str) -> None:
    with pytest.raises(AuditError, match=message):
        check_record(topic, record)
    # check_appendable is check_record plus the sink topics: it must refuse the same
    # records itself, without relying on the chain that runs after it.
    with pytest.raises(AuditError, match=message):
        check_appendable(topic, record)


@pytest.mark.parametrize("topic", ["/run", "/seal", "/checkpoints"])
def test_sink_topics_cannot_be_appended(topic: str) -> None:
    # A gate that could append a checkpoint could forge a tree head.
    record = {"schema": TOPICS[topic], "stamp_ns": 1}
    with pytest.raises(AuditError, match="written by the sink itself"):
        check_appendable(topic, record)
    check_record(topic, record)  # the sink itself may


@pytest.mark.parametrize("topic", ["/assessments", "/decisions", "/approvals"])
def test_gate_topics_can_be_appended(topic: str) -> None:
    check_appendable(topic, {"schema": TOPICS[topic], "stamp_ns": 1})


def test_run_record_declares_its_signing_key() -> None:
    signing = {"key_id": "e" * 64, "key_name": "ghost/eeee", "public_key": "A" * 43 + "="}
    record = make_run_record(make_run_start(), "fsync", signing)
    assert record["signing"] == signing
    assert record["signing"] is not signing  # a copy: the caller's dict cannot change it
    assert record["durability"] == "fsync"


def test_run_record_fields() -> None:
    record = _run_record()
    assert record["schema"] == "ghost.run/1"
    assert record["stamp_ns"] == STAMP_NS
    assert record["durability"] == "process"
    assert record["signing"] is None
    assert record["run_id"][14] == "7"  # a UUIDv7


def test_run_record_refuses_a_source_hash_that_does_not_match() -> None:
    bad = dataclasses.replace(make_run_start(), policy_source=b"x")
    with pytest.raises(AuditError, match="not the SHA-256 of policy_source"):
        make_run_record(bad, "process")


def test_link_checks_the_record_itself() -> None:
    # Sinks check first too, but the chain must not depend on them.
    chain = Chain()
    chain.commit(chain.link("/run", _run_record()))
    with pytest.raises(AuditError, match="must have schema"):
        chain.link("/decisions", {"schema": "ghost.approval/1", "stamp_ns": 1})
    with pytest.raises(AuditError, match="must not carry seq"):
        chain.link("/decisions", _note(1, seq=1))
    assert chain.next_seq == 1


def test_a_chained_record_is_frozen() -> None:
    linked = Chain().link("/run", _run_record())
    with pytest.raises(dataclasses.FrozenInstanceError):
        linked.sha256 = "0" * 64  # type: ignore[misc]
