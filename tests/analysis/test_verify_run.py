"""`verify_run` over real runs: each check, pinned by the tamper it exists to catch.

Every file is written by the real sink, or rebuilt from one by `StoredRun`
with every CRC fresh, so that the edit a test makes is the only thing wrong
with the file; each test then asserts exactly which problems the verifier
names, so removing or weakening any one check fails a test.
"""

from __future__ import annotations

import json
import zlib
from dataclasses import replace
from pathlib import Path

import pytest
from mcap.records import Attachment, Schema

from analysis import IntegrityCheck, RunStatus, RunVerification, verify_run
from audit import LogFormatError, McapAuditSink, NoteError
from runtime import canonical_bytes, sha256_hex
from tests.analysis.stored_run import GateRun, StoredRun
from tests.records import append_decisions, make_run_start

C = IntegrityCheck

# Positions in a gate run (see `write_gate_run`): a checkpoint after /run and before the seal.
RUN, CHECKPOINT, A_ALLOW, D_ALLOW, A_DENY, D_DENY, A_PENDING, D_PENDING = range(8)
A_NARROW, D_NARROW, A_SCRUB, D_SCRUB, APPROVAL, FINAL_CHECKPOINT, SEAL = range(8, 15)
RECORDS = 15


def found(result: RunVerification) -> list[tuple[IntegrityCheck, int | None]]:
    """The problems as (check, position) pairs, in the order listed."""
    return [(problem.check, problem.position) for problem in result.problems]


def verify_edit(run: StoredRun, out: Path) -> RunVerification:
    return verify_run(run.write(out))


# --- an intact run ----------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["process", "fsync", "chunk"])
def test_an_untouched_run_is_intact(gate_runs: dict[str, GateRun], mode: str) -> None:
    run = gate_runs[mode]
    data = run.path.read_bytes()

    result = verify_run(run.path)

    assert result.status is RunStatus.INTACT
    assert result.ok
    assert result.problems == ()
    assert result.problem_count == 0
    assert (result.sealed, result.truncated) == (True, False)
    assert result.record_count == result.verified_prefix == RECORDS
    assert result.per_topic_counts == {
        "/run": 1,
        "/checkpoints": 2,
        "/assessments": 5,
        "/decisions": 5,
        "/approvals": 1,
        "/seal": 1,
    }
    assert result.source_sha256 == sha256_hex(data)
    assert result.path == run.path
    assert result.open_assessments == 0
    assert result.signed is False
    assert result.run_id is not None
    assert len(result.run_id) == 36
    assert result.summary.startswith("intact: 15 records, seq 0-14 verify as a linked chain")
    assert result.checkpoint_count == 2
    assert "not who wrote it" in result.summary


def test_the_verified_head_is_the_last_records_content_address(
    gate_run: GateRun, stored: StoredRun
) -> None:
    result = verify_run(gate_run.path)

    assert result.verified_head_sha256 == sha256_hex(stored.messages[-1].data)


def test_a_rewritten_but_identical_run_is_intact(stored: StoredRun, out: Path) -> None:
    # The rebuilt file differs in bytes, not in content: the baseline of every edit below.
    assert verify_edit(stored, out).status is RunStatus.INTACT


def test_verification_is_deterministic(gate_run: GateRun) -> None:
    assert verify_run(gate_run.path) == verify_run(gate_run.path)


# --- json, schema, canonical: a record on its own ----------------------------------------------


def test_a_message_that_is_not_json_is_named(stored: StoredRun, out: Path) -> None:
    stored.messages[D_DENY].data = b"\x00 not json"

    result = verify_edit(stored, out)

    # The assessment it rested on is left without a decision, which the end of the run names.
    # The final checkpoint's root covers the garbled bytes, not the decision it replaced.
    assert found(result) == [
        (C.JSON, D_DENY),
        (C.CHAIN, A_PENDING),
        (C.CHECKPOINT, FINAL_CHECKPOINT),
        (C.LINKS, A_DENY),
    ]
    problem = result.problems[0]
    assert (problem.topic, problem.seq, problem.decision_id) == ("/decisions", None, None)
    assert problem.record_sha256 == sha256_hex(b"\x00 not json")
    assert "cannot be read" in problem.message
    assert result.verified_prefix == D_DENY


def test_a_schema_violation_in_an_assessment_is_named(stored: StoredRun, out: Path) -> None:
    # The mutation-testing hole of issue 6: an assessment with `agent: 42`.
    stored.edit(A_DENY, agent=42)

    result = verify_edit(stored, out)

    assert found(result) == [
        (C.SCHEMA, A_DENY),
        (C.CHAIN, D_DENY),
        (C.LINKS, D_DENY),
        (C.CHECKPOINT, FINAL_CHECKPOINT),
    ]
    assert "$.agent: expected string, got an integer" in result.problems[0].message


def test_a_record_on_the_wrong_topic_is_named(stored: StoredRun, out: Path) -> None:
    # An assessment moved onto the decisions channel: valid for its schema, wrong for its topic.
    stored.messages[A_DENY].topic = "/decisions"

    result = verify_edit(stored, out)

    checks = found(result)
    assert checks[0] == (C.SCHEMA, A_DENY)
    assert "must have schema 'ghost.decision/1', but its schema is 'ghost.assessment/1'" in (
        result.problems[0].message
    )
    assert (C.LINKS, D_DENY) in checks  # the decision finds no assessment before it


def test_a_schema_field_that_is_no_ghost_schema_is_described_not_quoted(
    stored: StoredRun, out: Path
) -> None:
    stored.edit(A_DENY, schema="\x1b[31mevil")

    result = verify_edit(stored, out)

    topic_problem = next(p for p in result.problems if "must have schema" in p.message)
    assert topic_problem.message.endswith("but its schema is a string")


def test_a_record_re_encoded_non_canonically_is_named_once(stored: StoredRun, out: Path) -> None:
    record = stored.messages[D_DENY].record
    stored.messages[D_DENY].data = json.dumps(record, indent=1).encode()

    result = verify_edit(stored, out)

    # Only the record itself: its address is its canonical form's, so no link breaks.
    assert found(result) == [(C.CANONICAL, D_DENY)]
    problem = result.problems[0]
    assert problem.decision_id == record["decision_id"]
    assert problem.seq == D_DENY
    assert sha256_hex(canonical_bytes(record)) in problem.message
    assert result.verified_prefix == D_DENY


def test_a_record_with_no_canonical_form_is_named(stored: StoredRun, out: Path) -> None:
    text = stored.messages[D_DENY].data.decode().replace('"latency_ns":', '"latency_ns":1.5,"x":')
    stored.messages[D_DENY].data = text.encode()

    result = verify_edit(stored, out)

    checks = found(result)
    assert (C.CANONICAL, D_DENY) in checks
    assert (C.CHAIN, A_PENDING) in checks  # the stored bytes are all the address it has
    canonical = next(p for p in result.problems if p.check is C.CANONICAL)
    assert "no canonical form" in canonical.message


# --- seq ----------------------------------------------------------------------------------


def test_a_deleted_record_is_a_gap(stored: StoredRun, out: Path) -> None:
    del stored.messages[A_PENDING]

    result = verify_edit(stored, out)

    seq_problems = [p for p in result.problems if p.check is C.SEQ]
    assert [(p.position, p.seq) for p in seq_problems] == [(A_PENDING, D_PENDING)]
    assert "seq jumps from 5 to 7: 1 record missing before it" in seq_problems[0].message


def test_a_gap_of_several_records_says_how_many(stored: StoredRun, out: Path) -> None:
    del stored.messages[A_DENY : A_PENDING + 1]

    result = verify_edit(stored, out)

    message = next(p.message for p in result.problems if p.check is C.SEQ)
    assert "seq jumps from 3 to 7: 3 records missing before it" in message


def test_a_duplicated_record_is_a_repeat(stored: StoredRun, out: Path) -> None:
    stored.messages.insert(D_DENY + 1, replace(stored.messages[D_DENY]))

    result = verify_edit(stored, out)

    seq_problems = [p for p in result.problems if p.check is C.SEQ]
    assert [(p.position, p.seq) for p in seq_problems] == [(D_DENY + 1, D_DENY)]
    assert "seq 5 follows seq 5: a record repeated or out of order" in seq_problems[0].message


def test_the_first_record_must_be_seq_0(stored: StoredRun, out: Path) -> None:
    del stored.messages[RUN]

    result = verify_edit(stored, out)

    assert (C.SEQ, 0) in found(result)
    message = next(p.message for p in result.problems if p.check is C.SEQ)
    assert "the first record has seq 1, but a run's first record is seq 0" in message


def test_an_unreadable_record_does_not_make_every_later_seq_wrong(
    stored: StoredRun, out: Path
) -> None:
    stored.messages[D_DENY].data = b"garbage"

    result = verify_edit(stored, out)

    assert [p for p in result.problems if p.check is C.SEQ] == []


# --- the chain ------------------------------------------------------------------------------


def test_an_edited_record_breaks_the_next_link(stored: StoredRun, out: Path) -> None:
    stored.edit(D_DENY, verdict="allow")
    edited = stored.messages[D_DENY]

    result = verify_edit(stored, out)

    assert found(result) == [(C.CHAIN, A_PENDING), (C.CHECKPOINT, FINAL_CHECKPOINT)]
    message = result.problems[0].message
    # The line names the record that was altered: its seq, topic, decision and address.
    decision_id = edited.record["decision_id"]
    assert f"seq {D_DENY} (/decisions, decision {decision_id})" in message
    assert sha256_hex(edited.data) in message
    assert result.verified_prefix == A_PENDING
    assert result.verified_head_sha256 == sha256_hex(stored.messages[D_DENY].data)


def test_the_first_record_links_to_nothing(stored: StoredRun, out: Path) -> None:
    stored.edit(RUN, prev_sha256="e" * 64)

    result = verify_edit(stored, out)

    chain = [p for p in result.problems if p.check is C.CHAIN]
    assert [p.position for p in chain] == [RUN, CHECKPOINT]
    assert "no record precedes it in the file" in chain[0].message
    assert result.verified_prefix == 0
    assert result.verified_head_sha256 is None


def test_swapped_records_break_the_chain(stored: StoredRun, out: Path) -> None:
    messages = stored.messages
    messages[A_PENDING], messages[D_PENDING] = messages[D_PENDING], messages[A_PENDING]

    result = verify_edit(stored, out)

    checks = found(result)
    assert (C.CHAIN, A_PENDING) in checks
    assert (C.CHAIN, D_PENDING) in checks
    assert (C.SEQ, D_PENDING) in checks


# --- /run -----------------------------------------------------------------------------------


def test_a_deleted_run_record_is_tampering_not_a_foreign_file(stored: StoredRun, out: Path) -> None:
    del stored.messages[RUN]

    result = verify_edit(stored, out)

    assert result.status is RunStatus.TAMPERED
    run_problems = [p for p in result.problems if p.check is C.RUN]
    assert [p.position for p in run_problems] == [0]
    assert "the first record is on /checkpoints" in run_problems[0].message
    assert result.run_id is None
    # The attachment is checked against /run alone, not whatever record came first.
    assert [p for p in result.problems if p.check is C.ATTACHMENT] == []


def test_a_run_record_that_is_not_first_is_named(stored: StoredRun, out: Path) -> None:
    messages = stored.messages
    messages.insert(A_DENY, messages.pop(RUN))

    result = verify_edit(stored, out)

    run_problems = [p.position for p in result.problems if p.check is C.RUN]
    assert run_problems == [0, A_DENY]


def test_a_run_record_second_is_named(stored: StoredRun, out: Path) -> None:
    messages = stored.messages
    messages[RUN], messages[A_ALLOW] = messages[A_ALLOW], messages[RUN]

    result = verify_edit(stored, out)

    assert [p.position for p in result.problems if p.check is C.RUN] == [0, A_ALLOW]


def test_a_complete_file_without_records_is_no_run(tmp_path: Path) -> None:
    path = tmp_path / "empty.mcap"
    McapAuditSink(path).close()  # ghost's channels, no run opened

    result = verify_run(path)

    assert found(result) == [(C.RUN, None)]
    assert "not a single record" in result.problems[0].message
    assert result.status is RunStatus.TAMPERED


def test_a_file_holding_only_ghosts_header_is_not_a_ghost_log(tmp_path: Path) -> None:
    # A sink opened but never given its run (a crash before the gate was built)
    # leaves only a header (and, once the run opens, ghost's channels travel in the
    # /run record's chunk): no ghost channel, no record -- nothing to verify (SPEC §6).
    path = tmp_path / "opened.mcap"
    sink = McapAuditSink(path)
    try:
        with pytest.raises(LogFormatError, match="not a ghost audit log"):
            verify_run(path)
    finally:
        sink.close()


# --- the seal -------------------------------------------------------------------------------


def test_a_seal_with_the_wrong_count_is_named(stored: StoredRun, out: Path) -> None:
    stored.edit(SEAL, record_count=RECORDS)

    result = verify_edit(stored, out)

    assert found(result) == [(C.SEAL, SEAL)]
    assert "its record_count is 15, but 14 records precede it" in result.problems[0].message
    assert result.sealed is False


def test_a_seal_naming_the_wrong_head_is_named(stored: StoredRun, out: Path) -> None:
    stored.edit(SEAL, head_sha256="e" * 64)

    result = verify_edit(stored, out)

    assert found(result) == [(C.SEAL, SEAL)]
    assert f"its head_sha256 is {'e' * 64}, but the record before it" in result.problems[0].message
    assert result.sealed is False


def test_a_seal_with_an_unreadable_count_shows_its_type(stored: StoredRun, out: Path) -> None:
    stored.edit(SEAL, record_count="14")

    result = verify_edit(stored, out)

    seal = next(p for p in result.problems if p.check is C.SEAL)
    assert "its record_count is a string, but 14 records precede it" in seal.message


def test_a_seal_over_one_record_counts_in_the_singular(tmp_path: Path) -> None:
    path = tmp_path / "one.mcap"
    with McapAuditSink(path) as sink:
        sink.open_run(make_run_start())

    stored = StoredRun.load(path)
    stored.messages[1:-1] = []  # /run and the seal alone
    stored.edit(1, record_count=2)
    result = verify_run(stored.write(tmp_path / "edited.mcap"))

    seal = next(p for p in result.problems if p.check is C.SEAL)
    assert "its record_count is 2, but 1 record precede it" in seal.message


def test_a_seal_as_the_first_record_seals_nothing(stored: StoredRun, out: Path) -> None:
    stored.messages[RUN:SEAL] = []
    stored.edit(0, seq=0, prev_sha256=None, record_count=0)

    result = verify_edit(stored, out)

    seal = [p for p in result.problems if p.check is C.SEAL]
    assert [p.position for p in seal] == [0]
    assert "there is no run for it to seal" in seal[0].message


def test_records_after_the_seal_are_named(stored: StoredRun, out: Path) -> None:
    # A forged pair appended after the seal, correctly chained from it.
    forged = [replace(stored.messages[A_ALLOW]), replace(stored.messages[D_ALLOW])]
    stored.messages.extend(forged)

    result = verify_edit(stored, out)

    after = [p for p in result.problems if p.check is C.SEAL]
    assert [p.position for p in after] == [RECORDS, RECORDS + 1]
    assert "it follows the seal (seq 14 (/seal))" in after[0].message
    assert result.sealed is False
    assert result.verified_prefix == RECORDS


def test_a_second_seal_is_after_the_seal(stored: StoredRun, out: Path) -> None:
    stored.messages.append(replace(stored.messages[SEAL]))

    result = verify_edit(stored, out)

    assert (C.SEAL, RECORDS) in found(result)


def test_an_unreadable_seal_is_a_json_problem_only(stored: StoredRun, out: Path) -> None:
    stored.messages[SEAL].data = b"sealed, honestly"

    result = verify_edit(stored, out)

    assert found(result) == [(C.JSON, SEAL)]
    assert result.sealed is False


def test_a_run_of_one_record_without_its_seal_lost_it(stored: StoredRun, out: Path) -> None:
    del stored.messages[A_ALLOW:]

    result = verify_edit(stored, out)

    assert found(result) == [(C.SEAL, None)]


def test_a_complete_file_without_a_seal_lost_it(stored: StoredRun, out: Path) -> None:
    del stored.messages[SEAL]

    result = verify_edit(stored, out)

    assert found(result) == [(C.SEAL, None)]
    assert "holds no readable /seal record" in result.problems[0].message
    assert (result.sealed, result.truncated, result.status) == (False, False, RunStatus.TAMPERED)


# --- MCAP fields ----------------------------------------------------------------------------


def test_a_changed_log_time_is_named(stored: StoredRun, out: Path) -> None:
    stored.messages[D_DENY].log_time += 1

    result = verify_edit(stored, out)

    assert found(result) == [(C.MCAP, D_DENY)]
    assert "log_time" in result.problems[0].message


def test_a_changed_sequence_is_named(stored: StoredRun, out: Path) -> None:
    stored.messages[D_DENY].sequence = 99

    result = verify_edit(stored, out)

    assert found(result) == [(C.MCAP, D_DENY)]
    assert "its MCAP sequence is 99, but its seq 5 makes it 5" in result.problems[0].message


def test_a_changed_publish_time_alone_is_not_a_problem(stored: StoredRun, out: Path) -> None:
    # publish_time is not part of ghost's contract: nothing reads it.
    stored.messages[D_DENY].publish_time += 1

    assert verify_edit(stored, out).ok


# --- the policy attachment ------------------------------------------------------------------


def test_an_altered_policy_attachment_is_named(stored: StoredRun, out: Path) -> None:
    stored.attachments[0] = replace(stored.attachments[0], data=stored.attachments[0].data + b"#")

    result = verify_edit(stored, out)

    assert found(result) == [(C.ATTACHMENT, RUN)]
    message = result.problems[0].message
    assert "no attachment holds the policy source it names" in message
    assert sha256_hex(stored.attachments[0].data) in message  # what the file holds instead


def test_a_removed_policy_attachment_is_named(stored: StoredRun, out: Path) -> None:
    stored.attachments.clear()

    result = verify_edit(stored, out)

    assert found(result) == [(C.ATTACHMENT, RUN)]
    assert "(attachments: none)" in result.problems[0].message


def test_a_policy_attachment_at_another_time_is_named(stored: StoredRun, out: Path) -> None:
    stored.attachments[0] = replace(stored.attachments[0], log_time=1)

    result = verify_edit(stored, out)

    assert found(result) == [(C.ATTACHMENT, RUN)]
    assert "has MCAP log_time 1, but the run's stamp_ns is" in result.problems[0].message


def test_a_policy_attached_twice_is_named(stored: StoredRun, out: Path) -> None:
    stored.attachments.append(stored.attachments[0])

    result = verify_edit(stored, out)

    assert found(result) == [(C.ATTACHMENT, RUN)]
    assert "attached 2 times" in result.problems[0].message


def test_an_extra_attachment_is_named(stored: StoredRun, out: Path) -> None:
    stored.attachments.append(
        Attachment(create_time=0, log_time=0, name="evil\nname", media_type="text/plain", data=b"x")
    )

    result = verify_edit(stored, out)

    assert found(result) == [(C.ATTACHMENT, None)]
    message = result.problems[0].message
    assert "'evil\\nname'" in message
    assert "\n" not in message


def test_the_attachment_check_needs_a_readable_run_record(stored: StoredRun, out: Path) -> None:
    stored.messages[RUN].data = b"not json"
    stored.attachments.clear()

    result = verify_edit(stored, out)

    assert [p for p in result.problems if p.check is C.ATTACHMENT] == []


def test_a_long_attachment_name_is_clipped(stored: StoredRun, out: Path) -> None:
    stored.attachments.append(
        Attachment(create_time=0, log_time=0, name="n" * 500, media_type="x", data=b"x")
    )

    message = verify_edit(stored, out).problems[0].message

    assert "n" * 59 + "…" in message
    assert "n" * 60 not in message


# --- the structure ghost writes: CRCs and schemas -------------------------------------------


def data_end_offset(data: bytes) -> int:
    """The offset of the DataEnd record's CRC field."""
    position = 8
    while position < len(data):
        opcode = data[position]
        length = int.from_bytes(data[position + 1 : position + 9], "little")
        if opcode == 0x0F:
            return position + 9
        position += 9 + length
    raise AssertionError("no DataEnd record")


def test_a_zeroed_data_crc_is_named(gate_run: GateRun, tmp_path: Path) -> None:
    data = bytearray(gate_run.path.read_bytes())
    crc = data_end_offset(bytes(data))
    assert data[crc : crc + 4] != b"\0\0\0\0"
    data[crc : crc + 4] = b"\0\0\0\0"
    path = tmp_path / "zeroed.mcap"
    path.write_bytes(data)

    result = verify_run(path)

    assert found(result) == [(C.FILE, None)]
    assert result.problems[0].message.startswith("the data-section CRC (DataEnd at byte")
    assert "is zero, but ghost always writes it" in result.problems[0].message


def test_an_edit_in_place_behind_a_zeroed_crc_is_still_caught(tmp_path: Path) -> None:
    path = tmp_path / "run.mcap"
    with McapAuditSink(path) as sink:
        sink.open_run(make_run_start())
        append_decisions(sink, 3)
    data = bytearray(path.read_bytes())
    crc = data_end_offset(bytes(data))
    data[crc : crc + 4] = b"\0\0\0\0"
    at = data.index(b'"verdict":"allow"')
    data[at : at + 17] = b'"verdict":"scrub"'
    path.write_bytes(data)

    result = verify_run(path)

    # Every mode writes indexed chunks now: the chunk's own CRC catches the edit.
    checks = {problem.check for problem in result.problems}
    assert {C.FILE, C.READER} <= checks
    assert any("fails its CRC check" in p.message for p in result.problems)
    assert result.status is RunStatus.TAMPERED


def chunk_offsets(data: bytes) -> list[int]:
    """The offsets of every Chunk record's uncompressed_crc field."""
    offsets: list[int] = []
    position = 8
    while position + 9 <= len(data):
        opcode = data[position]
        length = int.from_bytes(data[position + 1 : position + 9], "little")
        if opcode == 0x06:
            offsets.append(position + 9 + 24)
        if opcode == 0x02:
            break
        position += 9 + length
    return offsets


def with_fresh_data_crc(data: bytearray) -> bytearray:
    """Recompute the data-section CRC, as a careful forger would after an edit."""
    crc = data_end_offset(bytes(data))
    data[crc : crc + 4] = zlib.crc32(data[: crc - 9]).to_bytes(4, "little")
    return data


def test_a_chunk_that_does_not_decompress_is_the_readers_to_name(
    gate_runs: dict[str, GateRun], tmp_path: Path
) -> None:
    data = bytearray(gate_runs["chunk"].path.read_bytes())
    # The zstd frame's magic number: past the CRC (4), the compression string (4 + 4)
    # and the records' length (8). A flipped byte deeper in the frame may inflate to
    # garbage that only the CRC catches, depending on the run's bytes; this never does.
    data[chunk_offsets(bytes(data))[-1] + 4 + 16] ^= 0xFF
    path = tmp_path / "corrupt-chunk.mcap"
    path.write_bytes(with_fresh_data_crc(data))

    result = verify_run(path)

    # The seal was in the lost chunk.
    assert found(result) == [(C.READER, None), (C.SEAL, None)]
    assert "is corrupt (zstd" in result.problems[0].message


def test_a_zeroed_chunk_crc_is_named(gate_runs: dict[str, GateRun], tmp_path: Path) -> None:
    data = bytearray(gate_runs["chunk"].path.read_bytes())
    offsets = chunk_offsets(bytes(data))
    assert offsets
    data[offsets[0] : offsets[0] + 4] = b"\0\0\0\0"
    data = with_fresh_data_crc(data)
    path = tmp_path / "zeroed-chunk.mcap"
    path.write_bytes(data)

    result = verify_run(path)

    assert found(result) == [(C.FILE, None)]
    assert result.problems[0].message.startswith(f"the CRC of the chunk at byte {offsets[0] - 33}")


def test_a_zeroed_summary_crc_is_named(gate_run: GateRun, tmp_path: Path) -> None:
    data = bytearray(gate_run.path.read_bytes())
    footer_crc = len(data) - 8 - 4
    data[footer_crc : footer_crc + 4] = b"\0\0\0\0"
    path = tmp_path / "zeroed-summary.mcap"
    path.write_bytes(data)

    result = verify_run(path)

    assert found(result) == [(C.FILE, None)]
    assert result.problems[0].message.startswith("the summary CRC (Footer at byte")


def edit_schema(stored: StoredRun, schema_name: str, **changes: object) -> None:
    index = next(i for i, schema in enumerate(stored.schemas) if schema.name == schema_name)
    stored.schemas[index] = replace(stored.schemas[index], **changes)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "changes",
    [{"data": b""}, {"data": b'{"type":"object"}'}, {"encoding": "protobuf"}],
    ids=["emptied", "altered", "re-encoded"],
)
def test_an_altered_ghost_schema_is_named(
    stored: StoredRun, out: Path, changes: dict[str, object]
) -> None:
    edit_schema(stored, "ghost.decision/1", **changes)

    result = verify_edit(stored, out)

    file_problems = [p for p in result.problems if p.check is C.FILE]
    assert len(file_problems) == 1  # the summary repeats the schema: named once all the same
    assert "schema 3 is named ghost.decision/1 but does not carry that ghost schema" in (
        file_problems[0].message
    )
    assert result.status is RunStatus.TAMPERED


def test_a_schema_renamed_away_from_its_channel_is_a_reader_problem(
    stored: StoredRun, out: Path
) -> None:
    edit_schema(stored, "ghost.decision/1", name="", encoding="", data=b"")

    result = verify_edit(stored, out)

    assert found(result) == [(C.READER, None)]
    assert "/decisions does not carry the ghost.decision/1 JSON schema" in (
        result.problems[0].message
    )


def test_a_foreign_schema_is_left_to_the_reader(stored: StoredRun, out: Path) -> None:
    # A schema with a name that is not ghost's is not compared with anything.
    free = max(schema.id for schema in stored.schemas) + 1
    stored.schemas.append(Schema(id=free, name="Image", encoding="jsonschema", data=b"{}"))

    assert verify_edit(stored, out).ok


def test_a_cut_file_has_no_data_crc_to_check(gate_run: GateRun, tmp_path: Path) -> None:
    data = gate_run.path.read_bytes()
    path = tmp_path / "cut.mcap"
    path.write_bytes(data[: data_end_offset(data) + 2])

    result = verify_run(path)

    assert result.status is RunStatus.TRUNCATED
    assert result.problems == ()


def test_a_schema_record_that_does_not_parse_is_named(stored: StoredRun, out: Path) -> None:
    stored.write(out)
    data = bytearray(out.read_bytes())
    # Make the first schema's name invalid UTF-8: the reader skips the record, naming it.
    at = data.index(b"ghost.run/1")
    data[at] = 0xFF
    out.write_bytes(data)

    result = verify_run(out)

    reader = [p.message for p in result.problems if p.check is C.READER]
    assert any("not UTF-8" in message or "skipped" in message for message in reader), reader
    assert result.status is RunStatus.TAMPERED


# --- reader problems ------------------------------------------------------------------------


def test_a_byte_flipped_in_place_is_a_crc_failure(
    gate_runs: dict[str, GateRun], tmp_path: Path
) -> None:
    data = bytearray(gate_runs["process"].path.read_bytes())
    at = data.index(b'"verdict":"deny"')
    data[at + 11] = ord("D")
    path = tmp_path / "flipped.mcap"
    path.write_bytes(data)

    result = verify_run(path)

    assert found(result)[0] == (C.READER, None)
    assert "fails its CRC check" in result.problems[0].message
    assert result.status is RunStatus.TAMPERED


def test_a_chunk_altered_in_place_is_a_crc_failure(
    gate_runs: dict[str, GateRun], tmp_path: Path
) -> None:
    data = bytearray(gate_runs["chunk"].path.read_bytes())
    offsets = chunk_offsets(bytes(data))
    last = offsets[-1] + 4 + 100  # inside the compressed records of the last chunk
    data[last] ^= 0xFF
    path = tmp_path / "flipped-chunk.mcap"
    path.write_bytes(with_fresh_data_crc(data))

    result = verify_run(path)

    assert found(result)[0] == (C.READER, None)
    assert "chunk" in result.problems[0].message
    assert result.status is RunStatus.TAMPERED


# --- not a ghost log ------------------------------------------------------------------------


def test_a_missing_file_raises(tmp_path: Path) -> None:
    with pytest.raises(LogFormatError, match="no such file"):
        verify_run(tmp_path / "missing.mcap")


def test_an_mcap_file_with_nothing_in_it_is_not_a_ghost_log(tmp_path: Path) -> None:
    from mcap.writer import Writer

    path = tmp_path / "bare.mcap"
    with path.open("wb") as stream:
        writer = Writer(stream)
        writer.start()
        writer.finish()

    with pytest.raises(LogFormatError, match="not a ghost audit log"):
        verify_run(path)


def test_the_magic_followed_by_garbage_is_not_a_ghost_log(tmp_path: Path) -> None:
    path = tmp_path / "garbage.mcap"
    path.write_bytes(b"\x89MCAP0\r\n" + b"\x01" * 64)

    with pytest.raises(LogFormatError, match="what follows is not MCAP"):
        verify_run(path)


# --- arguments ------------------------------------------------------------------------------


def test_a_public_key_of_the_wrong_type_is_refused(gate_run: GateRun) -> None:
    with pytest.raises(TypeError, match="public_key must be an Ed25519PublicKey"):
        verify_run(gate_run.path, public_key=b"-----BEGIN PUBLIC KEY-----")  # type: ignore[arg-type]


def test_an_anchor_that_is_not_text_is_refused(gate_run: GateRun) -> None:
    with pytest.raises(
        TypeError, match="an anchor is a checkpoint note, as text or parsed, not bytes"
    ):
        verify_run(gate_run.path, anchors=[b"note"])  # type: ignore[list-item]


def test_a_public_key_on_an_unsigned_run_is_a_problem(gate_run: GateRun) -> None:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    key = Ed25519PrivateKey.generate().public_key()

    result = verify_run(gate_run.path, public_key=key)

    assert found(result) == [(C.CHECKPOINT, RUN)]
    assert "the run declares no signing key" in result.problems[0].message
    assert result.status is RunStatus.TAMPERED


def test_an_anchor_that_is_not_a_note_is_refused(gate_run: GateRun) -> None:
    with pytest.raises(NoteError):
        verify_run(gate_run.path, anchors=("note one\n",))


def test_anchors_may_be_any_iterable(gate_run: GateRun, stored: StoredRun) -> None:
    note = stored.messages[FINAL_CHECKPOINT].record["note"]

    result = verify_run(gate_run.path, anchors=iter([note]))

    assert (result.ok, result.anchors_checked, result.anchors_matched) == (True, 1, 1)


# --- many problems --------------------------------------------------------------------------


def test_problems_beyond_the_limit_are_counted_not_listed(tmp_path: Path) -> None:
    path = tmp_path / "big.mcap"
    with McapAuditSink(path) as sink:
        sink.open_run(make_run_start())
        append_decisions(sink, 510)
    stored = StoredRun.load(path)
    for message in stored.messages[1:-1]:
        message.data = json.dumps(message.record, indent=1).encode()

    result = verify_run(stored.write(tmp_path / "re-encoded.mcap"))

    records = len(stored.messages)
    assert result.problem_count == records - 2  # every record between /run and /seal
    assert len(result.problems) == 1000
    assert (
        f"{records - 2} integrity problems ({records - 1002} not listed) in {records} records"
        in (result.summary)
    )
