"""MemoryAuditSink: the same chain as the file sink, in memory."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from audit import AuditEntry, MemoryAuditSink
from runtime import AuditError, AuditSink, canonical_bytes, content_address, sha256_hex
from tests.records import append_decisions, decision, make_run_start


def _assert_chain(entries: tuple[AuditEntry, ...]) -> None:
    previous = None
    for seq, entry in enumerate(entries):
        assert entry.record["seq"] == seq
        assert entry.record["prev_sha256"] == previous
        assert entry.data == canonical_bytes(entry.record)
        assert entry.sha256 == sha256_hex(entry.data) == content_address(entry.record)
        previous = entry.sha256


def test_is_an_audit_sink() -> None:
    assert isinstance(MemoryAuditSink(), AuditSink)


def test_chain_and_seal() -> None:
    with MemoryAuditSink() as sink:
        run = make_run_start()
        sink.open_run(run)
        addresses = append_decisions(sink, 3)
        assert sink.record_count == 2 + len(addresses)
    assert sink.run is run
    entries = sink.entries
    _assert_chain(entries)
    assert [entry.topic for entry in entries[:2]] == ["/run", "/checkpoints"]
    assert [entry.sha256 for entry in entries[2:-2]] == addresses
    final, seal = entries[-2:]
    assert final.topic == "/checkpoints"
    assert final.record["tree_size"] == final.record["seq"] == len(entries) - 2
    assert seal.topic == "/seal"
    assert seal.record["record_count"] == len(entries) - 1 == seal.record["seq"]
    assert seal.record["head_sha256"] == final.sha256
    assert len(sink.records("/decisions")) == 3
    assert sink.records("/run")[0]["policy_source_sha256"] == run.policy_source_sha256
    assert sink.record_count == len(entries)


def test_close_is_idempotent_and_refuses_later_records() -> None:
    sink = MemoryAuditSink()
    sink.open_run(make_run_start())
    sink.close()
    sink.close()
    assert sink.closed
    assert [entry.topic for entry in sink.entries] == [
        "/run", "/checkpoints", "/checkpoints", "/seal"
    ]  # fmt: skip
    with pytest.raises(AuditError, match="closed"):
        sink.append("/decisions", decision("x", None))
    with pytest.raises(AuditError, match="closed"):
        sink.open_run(make_run_start())


def test_close_without_run_writes_nothing() -> None:
    sink = MemoryAuditSink()
    sink.close()
    assert sink.entries == ()


def test_misuse() -> None:
    sink = MemoryAuditSink()
    with pytest.raises(AuditError, match="before open_run"):
        sink.append("/decisions", decision("x", None))
    sink.open_run(make_run_start())
    with pytest.raises(AuditError, match="already called"):
        sink.open_run(make_run_start())
    with pytest.raises(AuditError, match="must have schema"):
        sink.append("/decisions", {"schema": "ghost.approval/1", "stamp_ns": 1})


def test_validation_refuses_a_record_off_its_schema_and_keeps_the_chain() -> None:
    sink = MemoryAuditSink()
    sink.open_run(make_run_start())
    bad = decision("01a22865-5348-7e1b-9d2f-351c74086c5e", None, verdict="maybe")
    with pytest.raises(AuditError, match=r"\$\.verdict: must be one of"):
        sink.append("/decisions", bad)
    assert len(sink.entries) == 2  # /run and its checkpoint
    assert sink.record_count == 2
    # Without validation the same record is kept: shallow checks only.
    loose = MemoryAuditSink(validate=False)
    loose.open_run(make_run_start())
    loose.append("/decisions", bad)
    assert loose.records("/decisions")[0]["verdict"] == "maybe"


def test_entries_do_not_follow_later_changes_to_the_callers_record() -> None:
    sink = MemoryAuditSink(validate=False)
    sink.open_run(make_run_start())
    record: dict[str, Any] = decision("d", None)
    sink.append("/decisions", record)
    record["reason"] = "changed"
    assert sink.records("/decisions")[0]["reason"] != "changed"
    with pytest.raises(TypeError):
        sink.entries[1].record["reason"] = "x"  # type: ignore[index]


def test_concurrent_appends_form_one_gapless_chain() -> None:
    # No time-based checkpoints: how many there are must not depend on the machine's speed.
    sink = MemoryAuditSink(checkpoint_every_ns=2**62)
    sink.open_run(make_run_start())
    barrier = threading.Barrier(8)

    def work() -> None:
        barrier.wait()
        append_decisions(sink, 10)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    sink.close()
    appended = 8 * 21
    checkpoints = 1 + appended // 100 + 1
    assert len(sink.entries) == 1 + appended + checkpoints + 1
    assert len(sink.records("/checkpoints")) == checkpoints
    _assert_chain(sink.entries)


def test_validation_covers_the_sinks_own_records(monkeypatch: pytest.MonkeyPatch) -> None:
    # A sink bug that broke its own /checkpoints record must not pass silently.
    import audit._recorder as recorder

    real = recorder.make_checkpoint_record

    def broken(**fields: Any) -> dict[str, Any]:
        return {**real(**fields), "tree_size": 0}

    monkeypatch.setattr(recorder, "make_checkpoint_record", broken)
    sink = MemoryAuditSink()
    with pytest.raises(AuditError, match=r"/checkpoints does not match .*\$\.tree_size"):
        sink.open_run(make_run_start())


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="durability must be"):
        MemoryAuditSink(durability="never")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="checkpoint_every_records"):
        MemoryAuditSink(checkpoint_every_records=0)
    with pytest.raises(TypeError, match="Ed25519PrivateKey"):
        MemoryAuditSink(signing_key="not a key")  # type: ignore[arg-type]


# --- run_id and close hooks (ADR 0016) -------------------------------------------------------


def test_run_id_is_the_run_records() -> None:
    sink = MemoryAuditSink()
    assert sink.run_id is None
    sink.open_run(make_run_start())
    assert sink.run_id == sink.entries[0].record["run_id"]


def test_close_hooks_run_once_in_order_before_the_seal_and_may_append() -> None:
    sink = MemoryAuditSink()
    sink.open_run(make_run_start())
    calls: list[str] = []
    sink.on_close(lambda: calls.append("first"))

    def appending() -> None:
        calls.append("second")
        append_decisions(sink, 1)

    sink.on_close(appending)
    sink.close()
    sink.close()
    assert calls == ["first", "second"]
    topics = [entry.topic for entry in sink.entries]
    assert topics[-4:] == ["/decisions", "/approvals", "/checkpoints", "/seal"]


def test_a_failing_close_hook_still_seals_then_raises() -> None:
    sink = MemoryAuditSink()
    sink.open_run(make_run_start())
    ran: list[str] = []

    def failing() -> None:
        raise OSError("disk full")

    sink.on_close(failing)
    sink.on_close(lambda: ran.append("after"))
    with pytest.raises(AuditError, match=r"a close hook failed \(OSError\)"):
        sink.close()
    assert ran == ["after"]  # the later hooks still ran
    assert sink.closed
    assert sink.entries[-1].topic == "/seal"
