"""``/checkpoints``: what each record commits to, when one is written, and the anchors.

Roots are recomputed with the independent recursive RFC 6962 of
``tests/audit/test_merkle.py``, and signatures checked with `cryptography`
alone, for memory and file runs alike.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from structlog.testing import capture_logs

from audit import (
    CheckpointNote,
    McapAuditSink,
    MemoryAuditSink,
    NoteError,
    NoteVerifier,
    load_checkpoint_note,
    parse_checkpoint_note,
    read_run,
    schema_problems,
)
from audit._anchor import AnchorEmitter
from audit._checkpoint import CheckpointSchedule, checkpoint_origin, make_checkpoint_record
from runtime import AuditError, make_uuid7
from runtime.testing import ManualClock
from tests.audit.test_merkle import _mth
from tests.records import append_decisions, decision, make_run_start


def _id(n: int) -> str:
    return make_uuid7(1_767_225_600_000_000_000 + n)


KEY = Ed25519PrivateKey.from_private_bytes(hashlib.sha256(b"ghost checkpoint tests").digest())
NEVER = 2**62  # an interval no test reaches: only record counts trigger checkpoints


def _check_run(
    records: Sequence[tuple[str, Mapping[str, Any], bytes]], public: Ed25519PublicKey | None
) -> list[Mapping[str, Any]]:
    """Check every checkpoint of a run against the records before it; return them."""
    run = records[0][1]
    checkpoints = []
    for seq, (topic, record, _) in enumerate(records):
        if topic != "/checkpoints":
            continue
        checkpoints.append(record)
        assert schema_problems(record) == ()
        covered = [data for _, _, data in records[:seq]]
        # ghost covers every record before a checkpoint.
        assert record["tree_size"] == seq == len(covered)
        assert record["root_hash"] == _mth(covered).hex()
        assert record["head_sha256"] == hashlib.sha256(covered[-1]).hexdigest()
        assert record["head_sha256"] == record["prev_sha256"]
        note: str = record["note"]
        root_b64 = base64.b64encode(bytes.fromhex(record["root_hash"])).decode()
        text = f"ghost.run/{run['run_id']}\n{seq}\n{root_b64}\n"
        if public is None:
            assert note == text
            continue
        assert note.startswith(text + "\n\u2014 ")
        name, signature = note[len(text) + 3 :].removesuffix("\n").split(" ")
        assert name == run["signing"]["key_name"]
        raw = base64.b64decode(signature)
        assert len(raw) == 4 + 64
        public.verify(raw[4:], text.encode())  # cryptography alone
        raw_key = base64.b64decode(run["signing"]["public_key"])
        assert raw[:4] == hashlib.sha256(name.encode() + b"\n\x01" + raw_key).digest()[:4]
    # The schedule's ends: right after /run, and immediately before the seal.
    assert records[1][0] == "/checkpoints"
    assert records[-1][0] == "/seal"
    assert records[-2][0] == "/checkpoints"
    return checkpoints


def _memory(sink: MemoryAuditSink) -> list[tuple[str, Mapping[str, Any], bytes]]:
    return [(entry.topic, entry.record, entry.data) for entry in sink.entries]


def _file(path: Path) -> list[tuple[str, Mapping[str, Any], bytes]]:
    log = read_run(path)
    assert log.problems == ()
    return [(r.topic, r.record, r.data) for r in log.records if r.record is not None]


@pytest.mark.parametrize("signed", [False, True])
@pytest.mark.parametrize("every", [1, 2, 3, 7, 100])
def test_memory_run_checkpoints(signed: bool, every: int) -> None:
    key = KEY if signed else None
    with MemoryAuditSink(
        signing_key=key, checkpoint_every_records=every, checkpoint_every_ns=NEVER
    ) as sink:
        sink.open_run(make_run_start())
        append_decisions(sink, 6)  # 13 records
    checkpoints = _check_run(_memory(sink), KEY.public_key() if signed else None)
    appended = [seq for seq, (t, _, _) in enumerate(_memory(sink)) if t not in ("/run", "/seal")]
    # One after /run, one per `every` appended records, and the final one.
    assert len(checkpoints) == 1 + 13 // every + 1
    assert len(appended) == 13 + len(checkpoints)


@pytest.mark.parametrize("durability", ["process", "fsync", "chunk"])
@pytest.mark.parametrize("signed", [False, True])
def test_file_run_checkpoints(tmp_path: Path, durability: Any, signed: bool) -> None:
    path = tmp_path / "run.mcap"
    key = KEY if signed else None
    with McapAuditSink(
        path, durability=durability, signing_key=key, checkpoint_every_records=4
    ) as sink:
        sink.open_run(make_run_start())
        append_decisions(sink, 5)
    records = _file(path)
    _check_run(records, KEY.public_key() if signed else None)
    run = records[0][1]
    if signed:
        public = base64.b64decode(run["signing"]["public_key"])
        assert run["signing"]["key_id"] == hashlib.sha256(public).hexdigest()
        assert run["signing"]["key_name"] == "ghost/" + run["signing"]["key_id"][:16]
    else:
        assert run["signing"] is None


def test_a_custom_key_name(tmp_path: Path) -> None:
    with MemoryAuditSink(signing_key=KEY, key_name="example.com/auditor") as sink:
        sink.open_run(make_run_start())
    (checkpoint,) = sink.records("/checkpoints")[:1]
    assert sink.records("/run")[0]["signing"]["key_name"] == "example.com/auditor"
    parsed = parse_checkpoint_note(checkpoint["note"])
    verifier = NoteVerifier.for_key(KEY.public_key(), "example.com/auditor")
    assert parsed.verify([verifier]).verified == parsed.note.signatures
    with pytest.raises(ValueError, match="key name"):
        MemoryAuditSink(signing_key=KEY, key_name="has space")


def test_a_checkpoint_after_exactly_every_records() -> None:
    with MemoryAuditSink(checkpoint_every_records=3, checkpoint_every_ns=NEVER) as sink:
        sink.open_run(make_run_start())
        for count in range(1, 8):
            sink.append("/decisions", decision(_id(count), None))
            topics = [entry.topic for entry in sink.entries]
            # seq: 0 run, 1 cp, then records; a checkpoint follows every third.
            assert topics[-1] == ("/checkpoints" if count % 3 == 0 else "/decisions"), count


def test_a_checkpoint_once_the_interval_has_passed() -> None:
    clock = ManualClock()
    with MemoryAuditSink(
        clock=clock, checkpoint_every_records=1000, checkpoint_every_ns=500
    ) as sink:
        sink.open_run(make_run_start())
        sink.append("/decisions", decision(_id(97), None))
        clock.advance(499)
        sink.append("/decisions", decision(_id(98), None))
        clock.advance(1)  # 500 ns since the checkpoint after /run
        sink.append("/decisions", decision(_id(99), None))
        sink.append("/decisions", decision(_id(100), None))  # the clock stands still
        clock.advance(10_000)  # idle: nothing is written while nothing arrives
        assert sink.entries[-1].topic == "/decisions"
        sink.append("/decisions", decision(_id(101), None))
    topics = [entry.topic.strip("/")[0] for entry in sink.entries]
    assert "".join(topics) == "rcdddcddccs"  # run, cp, a b c, cp, d e, cp, final cp, seal


def test_checkpoints_are_stamped_by_the_sinks_clock_never_before_the_record_before() -> None:
    clock = ManualClock(time_ns=5_000)
    with MemoryAuditSink(clock=clock) as sink:
        sink.open_run(make_run_start(stamp_ns=1_000))
        sink.append("/decisions", decision(_id(100), None, stamp_ns=9_000))  # a gate clock ahead
    stamps = [(entry.topic, entry.record["stamp_ns"]) for entry in sink.entries]
    assert stamps == [
        ("/run", 1_000), ("/checkpoints", 5_000), ("/decisions", 9_000),
        ("/checkpoints", 9_000), ("/seal", 9_000),
    ]  # fmt: skip


def test_the_final_checkpoint_is_written_even_right_after_another() -> None:
    with MemoryAuditSink(checkpoint_every_records=1, checkpoint_every_ns=NEVER) as sink:
        sink.open_run(make_run_start())
        sink.append("/decisions", decision(_id(100), None))
    topics = [entry.topic for entry in sink.entries]
    assert topics == ["/run", "/checkpoints", "/decisions", "/checkpoints", "/checkpoints", "/seal"]
    _check_run(_memory(sink), None)


def test_schedule_boundaries() -> None:
    clock = ManualClock()
    schedule = CheckpointSchedule(every_records=3, every_ns=100, clock=clock)
    schedule.written(2)  # a checkpoint at seq 1: tree size 2 once it is committed
    assert not schedule.due(3)
    assert not schedule.due(4)
    assert schedule.due(5)
    clock.advance(99)
    assert not schedule.due(3)
    clock.advance(1)
    assert schedule.due(3)
    schedule.written(6)
    assert not schedule.due(7)
    assert schedule.due(9)


def test_a_fresh_schedule_counts_from_the_start() -> None:
    schedule = CheckpointSchedule(every_records=3, every_ns=100, clock=ManualClock())
    assert not schedule.due(2)
    assert schedule.due(3)
    assert not hasattr(schedule, "__dict__")  # slotted: no stray attribute can shadow the state


def test_schedule_with_a_zero_interval_checkpoints_after_every_record() -> None:
    schedule = CheckpointSchedule(every_records=100, every_ns=0, clock=ManualClock())
    schedule.written(2)
    assert schedule.due(3)


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"every_records": 0}, ValueError, "at least 1"),
        ({"every_records": -5}, ValueError, "at least 1"),
        ({"every_ns": -1}, ValueError, "must not be negative"),
        ({"every_records": True}, TypeError, "integer"),
        ({"every_records": 1.5}, TypeError, "integer"),
        ({"every_ns": False}, TypeError, "integer"),
        ({"every_ns": 0.5}, TypeError, "integer"),
    ],
)
def test_schedule_refuses_bad_intervals(kwargs: dict[str, Any], error: type, message: str) -> None:
    arguments: dict[str, Any] = {"every_records": 100, "every_ns": 10, **kwargs}
    with pytest.raises(error, match=message):
        CheckpointSchedule(**arguments, clock=ManualClock())
    with pytest.raises(error, match=message):
        MemoryAuditSink(
            checkpoint_every_records=arguments["every_records"],
            checkpoint_every_ns=arguments["every_ns"],
        )


def test_make_checkpoint_record() -> None:
    root = hashlib.sha256(b"root").digest()
    record = make_checkpoint_record(
        stamp_ns=7, run_id="r-1", tree_size=3, root_hash=root, head_sha256="c" * 64, signer=None
    )
    assert record == {
        "schema": "ghost.checkpoint/1",
        "stamp_ns": 7,
        "tree_size": 3,
        "root_hash": root.hex(),
        "head_sha256": "c" * 64,
        "note": f"ghost.run/r-1\n3\n{base64.b64encode(root).decode()}\n",
    }
    assert checkpoint_origin("r-1") == "ghost.run/r-1"


def test_checkpoint_note_run_id() -> None:
    with MemoryAuditSink() as sink:
        sink.open_run(make_run_start())
    note = parse_checkpoint_note(sink.records("/checkpoints")[0]["note"])
    assert note.run_id == sink.records("/run")[0]["run_id"]
    foreign = parse_checkpoint_note("example.com/log\n1\n" + "A" * 43 + "=\n")
    assert foreign.run_id is None


# Anchors.


def _provider() -> tuple[TracerProvider, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


def test_anchors_are_a_structlog_event_and_a_span_event_per_checkpoint() -> None:
    provider, exporter = _provider()
    with capture_logs() as events, MemoryAuditSink(
        signing_key=KEY, checkpoint_every_records=2, checkpoint_every_ns=NEVER,
        tracer_provider=provider,
    ) as sink:  # fmt: skip
        sink.open_run(make_run_start())
        append_decisions(sink, 2)
    checkpoints = sink.records("/checkpoints")
    run_id = sink.records("/run")[0]["run_id"]
    expected = [
        {
            "run_id": run_id,
            "tree_size": c["tree_size"],
            "root_hash": c["root_hash"],
            "note": c["note"],
        }
        for c in checkpoints
    ]
    logged = [event for event in events if event["event"] == "ghost.checkpoint"]
    assert [{k: e[k] for k in ("run_id", "tree_size", "root_hash", "note")} for e in logged] == (
        expected
    )
    assert all(event["log_level"] == "info" for event in logged)
    spans = exporter.get_finished_spans()
    assert [span.name for span in spans] == ["ghost.audit.checkpoint"] * len(checkpoints)
    for span, fields in zip(spans, expected, strict=True):
        (event,) = span.events
        assert event.name == "ghost.checkpoint"
        assert dict(event.attributes or {}) == fields
        assert span.parent is None  # a root span: no parent's sampling can drop it
        assert span.instrumentation_scope is not None
        assert span.instrumentation_scope.name == "ghost.audit"


def test_an_anchor_links_to_the_current_span() -> None:
    provider, exporter = _provider()
    sink = MemoryAuditSink(tracer_provider=provider)
    with provider.get_tracer("app").start_as_current_span("agent step") as outer:
        sink.open_run(make_run_start())
    sink.close()  # outside any span: no link
    by_name = {span.name: span for span in exporter.get_finished_spans() if span.links}
    (anchor,) = by_name.values()
    (link,) = anchor.links
    assert link.context.span_id == outer.get_span_context().span_id
    assert anchor.context.trace_id != outer.get_span_context().trace_id


def test_anchors_use_the_global_tracer_provider_by_default(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    provider, exporter = _provider()
    emitter = AnchorEmitter()  # built before the provider is set: the proxy follows it
    monkeypatch.setattr(trace, "_TRACER_PROVIDER", provider)
    emitter.emit("r", {"tree_size": 1, "root_hash": "a" * 64, "note": "n"})
    (span,) = exporter.get_finished_spans()
    assert span.name == "ghost.audit.checkpoint"


def test_a_failing_tracer_never_breaks_a_record() -> None:
    class Broken(TracerProvider):
        def get_tracer(self, *args: Any, **kwargs: Any) -> Any:
            class Tracer:
                def start_span(self, *args: Any, **kwargs: Any) -> Any:
                    raise RuntimeError("exporter down")

            return Tracer()

    with capture_logs() as events, MemoryAuditSink(tracer_provider=Broken()) as sink:
        sink.open_run(make_run_start())
        sink.append("/decisions", decision(_id(100), None))
    assert len(sink.records("/checkpoints")) == 2
    assert [e["event"] for e in events] == ["ghost.checkpoint", "ghost.checkpoint"]


def test_a_failing_span_event_still_ends_the_span() -> None:
    ended: list[bool] = []

    class Span:
        def add_event(self, *args: Any, **kwargs: Any) -> None:
            raise RuntimeError("bad attributes")

        def end(self) -> None:
            ended.append(True)

    class Provider(TracerProvider):
        def get_tracer(self, *args: Any, **kwargs: Any) -> Any:
            class Tracer:
                def start_span(self, *args: Any, **kwargs: Any) -> Any:
                    return Span()

            return Tracer()

    AnchorEmitter(Provider()).emit("r", {"tree_size": 1, "root_hash": "a" * 64, "note": "n"})
    assert ended == [True]


@pytest.mark.parametrize("durability", ["process", "fsync"])
def test_file_anchors_follow_each_write(tmp_path: Path, durability: Any) -> None:
    provider, exporter = _provider()
    path = tmp_path / "run.mcap"
    with McapAuditSink(
        path, durability=durability, checkpoint_every_records=2, tracer_provider=provider
    ) as sink:
        sink.open_run(make_run_start())
        assert len(exporter.get_finished_spans()) == 1
        sink.append("/decisions", decision(_id(97), None))
        sink.append("/decisions", decision(_id(98), None))
        assert len(exporter.get_finished_spans()) == 2
    checkpoints = [r.record for r in read_run(path).records if r.topic == "/checkpoints"]
    spans = exporter.get_finished_spans()
    assert [dict(s.events[0].attributes or {})["note"] for s in spans] == [
        c["note"] for c in checkpoints if c is not None
    ]


def test_chunk_mode_anchors_wait_for_their_chunk(tmp_path: Path) -> None:
    provider, exporter = _provider()
    path = tmp_path / "run.mcap"
    sink = McapAuditSink(
        path, durability="chunk", checkpoint_every_records=2, tracer_provider=provider
    )
    sink.open_run(make_run_start())
    assert len(exporter.get_finished_spans()) == 1  # the /run chunk is written at once
    for name in "abcd":
        sink.append("/decisions", decision(_id(ord(name)), None))
    # Two checkpoints sit in the open chunk: anchoring them could name a tree a crash loses.
    assert len(exporter.get_finished_spans()) == 1
    assert len([r for r in read_run(path).records if r.topic == "/checkpoints"]) == 1
    sink.close()
    spans = exporter.get_finished_spans()
    assert [dict(s.events[0].attributes or {})["tree_size"] for s in spans] == [1, 4, 7, 8]


def test_chunk_mode_anchors_leave_with_their_chunk(tmp_path: Path) -> None:
    provider, exporter = _provider()
    path = tmp_path / "run.mcap"
    sink = McapAuditSink(
        path,
        durability="chunk",
        chunk_size=1,  # every message fills a chunk
        checkpoint_every_records=2,
        tracer_provider=provider,
    )
    sink.open_run(make_run_start())
    sink.append("/decisions", decision(_id(97), None))
    sink.append("/decisions", decision(_id(98), None))
    assert [
        dict(s.events[0].attributes or {})["tree_size"] for s in exporter.get_finished_spans()
    ] == [1, 4]
    on_disk = {
        r.record["tree_size"]
        for r in read_run(path).records
        if r.topic == "/checkpoints" and r.record
    }
    assert on_disk == {1, 4}
    sink.close()


def test_a_failed_run_emits_no_anchor_for_what_was_not_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    provider, exporter = _provider()
    sink = McapAuditSink(tmp_path / "run.mcap", tracer_provider=provider)
    sink.open_run(make_run_start())

    def full_disk(*args: object, **kwargs: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(sink._writer, "add_message", full_disk)
    with pytest.raises(AuditError):
        sink.append("/decisions", decision(_id(100), None))
    sink.close()
    assert len(exporter.get_finished_spans()) == 1


# Anchor files.


def test_an_anchor_file_is_the_note_as_emitted(tmp_path: Path) -> None:
    with capture_logs() as events, MemoryAuditSink(signing_key=KEY) as sink:
        sink.open_run(make_run_start())
    note = events[-1]["note"]
    anchor = tmp_path / "anchor.note"
    anchor.write_bytes(note.encode())
    loaded = load_checkpoint_note(anchor)
    assert isinstance(loaded, CheckpointNote)
    assert str(loaded.note) == note == sink.records("/checkpoints")[-1]["note"]
    assert loaded.verify([NoteVerifier.for_key(KEY.public_key())]).verified


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", "empty"),
        (b"\xff\xfe", "not UTF-8"),
        (b"x" * (64 * 1024 + 1), "larger than"),
        (b"ghost.run/r\n1\nAAAA\n", "32 bytes"),
        (b"ghost.run/r\n1\n" + b"A" * 43 + b"=\n\n", "signature line"),
        (b"ghost.run/r\n1\n" + b"A" * 43 + b"=\r\n", "control characters"),
        (b"ghost.run/r\n1\n" + b"A" * 43 + b"=", "newline"),
    ],
)
def test_a_bad_anchor_file_names_itself(tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / "anchor.note"
    path.write_bytes(content)
    with pytest.raises(NoteError, match=message) as raised:
        load_checkpoint_note(path)
    assert raised.value.path == path
    assert str(raised.value).startswith(f"{path}: checkpoint note rejected: ")


def test_an_anchor_file_of_exactly_the_note_limit_is_read_and_judged_as_a_note(
    tmp_path: Path,
) -> None:
    # The limit is inclusive, as for a note itself: 64 KiB is read and parsed (and
    # refused for what it says), one byte more is refused unread.
    path = tmp_path / "anchor.note"
    path.write_bytes(b"x" * (64 * 1024 - 1) + b"\n")
    with pytest.raises(NoteError, match="exactly three lines") as raised:
        load_checkpoint_note(path)
    assert "larger than" not in str(raised.value)


def test_a_missing_or_unreadable_anchor_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(NoteError, match="no such file"):
        load_checkpoint_note(tmp_path / "absent.note")
    with pytest.raises(NoteError, match="directory"):
        load_checkpoint_note(tmp_path)
    path = tmp_path / "a.note"
    path.write_bytes(b"x\n")

    def broken(*args: object, **kwargs: object) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(Path, "open", broken)
    with pytest.raises(NoteError, match=r"it cannot be read \(Input/output error\)$"):
        load_checkpoint_note(path)
