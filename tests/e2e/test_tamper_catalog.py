"""The tamper catalog (issue 6): every edit of a real run, and what ``ghost verify`` says about it.

The runs are written through the real stack (`Gate`, `Policy`,
`McapAuditSink`) and hold every record type: ``/run``, assessments,
decisions of all five verdicts, an approval, the seal. Each tamper is
applied to a faithful copy (`StoredRun`: same channels, every CRC fresh, so
the tamper is the only thing wrong) or to the sink's own bytes, and then
``ghost verify`` must exit 3 with a line that names the record touched:
its ``seq`` and topic, and its decision id where it has one.

* The full matrix runs in-process through `analysis._cli.main` (fast); a
  representative subset runs the real ``ghost`` console script.
* A bare tail cut is truncation (exit 4), at every record boundary and a
  dense sample of bytes; the untouched run is intact (exit 0).
* Edit-and-re-chain forgeries recompute ``seq``, ``prev_sha256`` and the
  seal (and, for the thorough forger, every ``assessment_sha256`` and
  ``decision_sha256``). Those still caught are caught by what the forger
  cannot recompute consistently — a decision/assessment/approval link, the
  policy attachment. Those no single unsigned file can reveal are marked
  ``xfail(strict=True)``: they must start passing, and be un-marked, when
  signed checkpoints and anchors land (issue 6 items 2, 3 and 5).
"""

from __future__ import annotations

import json
import subprocess
import uuid
import zlib
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest

from analysis._cli import main
from audit import SCHEMAS, TOPICS, Durability
from runtime import canonical_bytes, make_uuid7, sha256_hex
from tests.analysis.stored_run import StoredMessage, StoredRun, write_gate_run
from tests.e2e.test_cli import GHOST_SCRIPT

# The shape of a gate run (`write_gate_run`): one topic per position.
SHAPE = (
    "/run",
    *("/assessments", "/decisions") * 5,
    "/approvals",
    "/seal",
)
LAST = len(SHAPE) - 1
D_PENDING, APPROVAL = 6, 11
ONLY_SIGNATURES = pytest.mark.xfail(
    strict=True,
    raises=AssertionError,
    reason="only signed checkpoints (issue 6 item 3) reveal a thorough re-chaining: extend then",
)
ONLY_ANCHORS = pytest.mark.xfail(
    strict=True,
    raises=AssertionError,
    reason="only an anchor (issue 6 item 5) reveals a cut tail that was re-sealed",
)


@pytest.fixture(scope="module", params=["process", "chunk"])
def sink_file(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run as the sink wrote it, in each durability mode that lays the file out differently."""
    mode: Durability = request.param
    directory = tmp_path_factory.mktemp(f"catalog-{mode}")
    return write_gate_run(directory / "run.mcap", durability=mode).path


@pytest.fixture(scope="module")
def base(sink_file: Path) -> StoredRun:
    """The run's contents, to copy and tamper with."""
    stored = StoredRun.load(sink_file)
    assert tuple(message.topic for message in stored.messages) == SHAPE
    return stored


@dataclass(frozen=True)
class Verdict:
    code: int
    lines: list[str]


def verify(path: Path, capsys: pytest.CaptureFixture[str]) -> Verdict:
    code = main(["verify", "--mcap", str(path)])
    captured = capsys.readouterr()
    assert captured.err == ""
    return Verdict(code, captured.out.splitlines())


def verify_script(path: Path) -> Verdict:
    result = subprocess.run(
        [GHOST_SCRIPT, "verify", "--mcap", path], capture_output=True, timeout=120, check=False
    )
    assert b"Traceback" not in result.stderr
    return Verdict(result.returncode, result.stdout.decode().splitlines())


def names(line: str, topic: str, seqs: set[int], decision_ids: set[str]) -> bool:
    """Whether a problem line names a record: its seq and topic, and its decision id if any."""
    placed = any(f"seq {s} {topic}" in line or f"seq {s} ({topic}" in line for s in seqs)
    return placed and (not decision_ids or any(d in line for d in decision_ids))


def assert_names(verdict: Verdict, message: StoredMessage, seq: int, *also: StoredMessage) -> None:
    seqs = {seq}
    ids: set[str] = set()
    for version in (message, *also):
        try:
            record = version.record
        except ValueError:
            continue
        if type(record.get("seq")) is int:
            seqs.add(record["seq"])
        if _is_uuid(record.get("decision_id")):
            ids.add(record["decision_id"])
    problems = [line for line in verdict.lines if line.startswith("problem: ")]
    assert any(names(line, message.topic, seqs, ids) for line in problems), verdict.lines


def _is_uuid(value: object) -> bool:
    if not isinstance(value, str):
        return False
    try:
        return str(uuid.UUID(value)) == value
    except ValueError:
        return False


# --- change any field of any record -----------------------------------------------------------


def changed(name: str, value: Any) -> Any:
    """A different value for a field, of the same JSON type and shape where there is one."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1
    if value is None:
        return "e" * 16 if name.endswith("span_id") else "e" * 64
    if isinstance(value, str):
        if _is_uuid(value):
            return str(uuid.UUID(int=uuid.UUID(value).int ^ 1))
        if value and all(c in "0123456789abcdef" for c in value):
            return value[:-1] + ("0" if value[-1] != "0" else "1")
        return value + "x"
    if isinstance(value, list):
        return [*value, value[0]] if value else ["x"]
    if isinstance(value, dict):
        key = sorted(value)[0]
        return {**value, key: changed(key, value[key])}
    raise AssertionError(f"no change for {name}: {value!r}")


FIELD_CASES = [
    pytest.param(position, name, id=f"{position}{topic}.{name}")
    for position, topic in enumerate(SHAPE)
    for name in sorted(SCHEMAS[TOPICS[topic]]["properties"])
]


@pytest.mark.parametrize(("position", "name"), FIELD_CASES)
def test_changing_any_field_of_any_record_is_caught(
    base: StoredRun, tmp_path: Path, capsys: pytest.CaptureFixture[str], position: int, name: str
) -> None:
    run = base.copy()
    original = run.messages[position]
    run.edit(position, **{name: changed(name, original.record[name])})

    verdict = verify(run.write(tmp_path / "t.mcap"), capsys)

    assert verdict.code == 3, verdict.lines
    assert_names(verdict, original, position, run.messages[position])


# --- delete, insert, duplicate, swap -----------------------------------------------------------


@pytest.mark.parametrize("position", range(len(SHAPE)))
def test_deleting_any_record_is_caught(
    base: StoredRun, tmp_path: Path, capsys: pytest.CaptureFixture[str], position: int
) -> None:
    run = base.copy()
    del run.messages[position]

    verdict = verify(run.write(tmp_path / "t.mcap"), capsys)

    assert verdict.code == 3, verdict.lines
    if position == 0:
        expected = "problem: seq 1 /assessments"  # now first, where /run should be
        assert any(line.startswith(expected) and "run: the first" in line for line in verdict.lines)
    elif position == LAST:
        assert any("holds no readable /seal record" in line for line in verdict.lines)
    else:
        after = base.messages[position + 1]
        assert_names(verdict, after, position + 1)
        assert any("missing before it" in line for line in verdict.lines)


def forged_decision(base: StoredRun) -> StoredMessage:
    """A well-formed decision for a decision that never happened, canonically stored."""
    template = base.messages[2]
    record = {**template.record, "decision_id": make_uuid7(1), "verdict": "allow"}
    return template.with_record(record)


@pytest.mark.parametrize("position", range(1, len(SHAPE)))
def test_inserting_a_record_anywhere_is_caught(
    base: StoredRun, tmp_path: Path, capsys: pytest.CaptureFixture[str], position: int
) -> None:
    run = base.copy()
    forged = forged_decision(base)
    run.messages.insert(position, forged)

    verdict = verify(run.write(tmp_path / "t.mcap"), capsys)

    assert verdict.code == 3, verdict.lines
    assert_names(verdict, forged, position)


@pytest.mark.parametrize("position", range(len(SHAPE)))
def test_duplicating_any_record_is_caught(
    base: StoredRun, tmp_path: Path, capsys: pytest.CaptureFixture[str], position: int
) -> None:
    run = base.copy()
    run.messages.insert(position + 1, replace(run.messages[position]))

    verdict = verify(run.write(tmp_path / "t.mcap"), capsys)

    assert verdict.code == 3, verdict.lines
    assert_names(verdict, base.messages[position], position)


@pytest.mark.parametrize("position", range(len(SHAPE) - 1))
def test_swapping_any_two_neighbours_is_caught(
    base: StoredRun, tmp_path: Path, capsys: pytest.CaptureFixture[str], position: int
) -> None:
    run = base.copy()
    messages = run.messages
    messages[position], messages[position + 1] = messages[position + 1], messages[position]

    verdict = verify(run.write(tmp_path / "t.mcap"), capsys)

    assert verdict.code == 3, verdict.lines
    assert_names(verdict, base.messages[position], position)


def test_two_decisions_swapped_are_caught(
    base: StoredRun, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = base.copy()
    messages = run.messages
    messages[2], messages[4] = messages[4], messages[2]

    verdict = verify(run.write(tmp_path / "t.mcap"), capsys)

    assert verdict.code == 3
    assert_names(verdict, base.messages[2], 2)
    assert_names(verdict, base.messages[4], 4)


def test_a_forged_pair_appended_after_the_seal_is_caught(
    base: StoredRun, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = base.copy()
    seal_address = sha256_hex(run.messages[LAST].data)
    assessment = run.messages[1].record
    decision_id = make_uuid7(2)
    forged_a = {
        **assessment,
        "decision_id": decision_id,
        "seq": LAST + 1,
        "prev_sha256": seal_address,
    }
    a_data = canonical_bytes(forged_a)
    forged_d = {
        **run.messages[2].record,
        "decision_id": decision_id,
        "seq": LAST + 2,
        "prev_sha256": sha256_hex(a_data),
        "assessment_sha256": sha256_hex(a_data),
    }
    for record, template in ((forged_a, run.messages[1]), (forged_d, run.messages[2])):
        run.messages.append(replace(template.with_record(record), sequence=record["seq"]))

    verdict = verify(run.write(tmp_path / "t.mcap"), capsys)

    assert verdict.code == 3
    assert_names(verdict, run.messages[LAST + 1], LAST + 1)
    assert any("it follows the seal" in line for line in verdict.lines)


# --- encoding and MCAP fields ------------------------------------------------------------------


@pytest.mark.parametrize("position", range(len(SHAPE)))
def test_re_encoding_any_record_non_canonically_is_caught(
    base: StoredRun, tmp_path: Path, capsys: pytest.CaptureFixture[str], position: int
) -> None:
    run = base.copy()
    record = run.messages[position].record
    run.messages[position].data = json.dumps(record, ensure_ascii=True, sort_keys=False).encode()
    assert run.messages[position].data != base.messages[position].data

    verdict = verify(run.write(tmp_path / "t.mcap"), capsys)

    assert verdict.code == 3
    assert_names(verdict, run.messages[position], position)
    assert any(": canonical: " in line for line in verdict.lines)


@pytest.mark.parametrize("field", ["log_time", "sequence"])
@pytest.mark.parametrize("position", range(len(SHAPE)))
def test_changing_log_time_or_sequence_of_any_record_is_caught(
    base: StoredRun,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    position: int,
    field: str,
) -> None:
    run = base.copy()
    message = run.messages[position]
    setattr(message, field, getattr(message, field) + 1)

    verdict = verify(run.write(tmp_path / "t.mcap"), capsys)

    assert verdict.code == 3
    assert_names(verdict, message, position)
    assert any(f": mcap: its MCAP {field}" in line for line in verdict.lines)


# --- the file around the records ---------------------------------------------------------------


def offsets_of(data: bytes, opcode: int) -> list[int]:
    """Where each top-level record of ``opcode`` starts."""
    found: list[int] = []
    position = 8
    while position + 9 <= len(data):
        length = int.from_bytes(data[position + 1 : position + 9], "little")
        if data[position] == opcode:
            found.append(position)
        position += 9 + length
    return found


def test_zeroing_the_data_crc_is_caught(
    sink_file: Path, base: StoredRun, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = bytearray(sink_file.read_bytes())
    (data_end,) = offsets_of(bytes(data), 0x0F)
    data[data_end + 9 : data_end + 13] = bytes(4)
    path = tmp_path / "t.mcap"
    path.write_bytes(data)

    verdict = verify(path, capsys)

    assert verdict.code == 3
    assert any(
        line.startswith("problem: file: file: its data-section CRC is zero")
        for line in verdict.lines
    )


def test_zeroing_a_chunk_crc_is_caught(
    sink_file: Path, base: StoredRun, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    if not base.chunked:
        pytest.skip("only a chunked run has chunk CRCs")
    data = bytearray(sink_file.read_bytes())
    chunk = offsets_of(bytes(data), 0x06)[0]
    data[chunk + 33 : chunk + 37] = bytes(4)
    (data_end,) = offsets_of(bytes(data), 0x0F)
    data[data_end + 9 : data_end + 13] = zlib.crc32(data[:data_end]).to_bytes(4, "little")
    path = tmp_path / "t.mcap"
    path.write_bytes(data)

    verdict = verify(path, capsys)

    assert verdict.code == 3
    assert verdict.lines[0].startswith("problem: file: file: chunk 1 has a zero CRC")


@pytest.mark.parametrize("how", ["altered", "removed", "replaced"])
def test_altering_or_removing_the_policy_attachment_is_caught(
    base: StoredRun, tmp_path: Path, capsys: pytest.CaptureFixture[str], how: str
) -> None:
    run = base.copy()
    policy = run.attachments[0]
    if how == "altered":
        run.attachments[0] = replace(policy, data=policy.data.replace(b"deny", b"allow", 1))
    elif how == "removed":
        run.attachments.clear()
    else:
        run.attachments[0] = replace(policy, data=b'policy_id = "x"\ndefault = "allow"\n')

    verdict = verify(run.write(tmp_path / "t.mcap"), capsys)

    assert verdict.code == 3
    assert any(line.startswith("problem: seq 0 /run: attachment:") for line in verdict.lines)


@pytest.mark.parametrize("topic", list(TOPICS))
def test_emptying_any_channel_schema_is_caught(
    base: StoredRun, tmp_path: Path, capsys: pytest.CaptureFixture[str], topic: str
) -> None:
    run = base.copy()
    index = next(i for i, s in enumerate(run.schemas) if s.name == TOPICS[topic])
    run.schemas[index] = replace(run.schemas[index], data=b"")

    verdict = verify(run.write(tmp_path / "t.mcap"), capsys)

    assert verdict.code == 3
    assert any(f"is named {TOPICS[topic]} but does not carry" in line for line in verdict.lines)


# --- edit and re-chain ------------------------------------------------------------------------


Forgery = Callable[[StoredRun], None]


def edit_assessment(run: StoredRun) -> None:
    run.edit(3, agent="someone-else")


def flip_verdict(run: StoredRun) -> None:
    run.edit(4, verdict="allow")  # the deny decision


def flip_pending(run: StoredRun) -> None:
    run.edit(D_PENDING, verdict="allow")  # the decision the approval names


def edit_last_decision(run: StoredRun) -> None:
    run.edit(10, reason="nothing to see here")


def point_run_at_another_policy(run: StoredRun) -> None:
    run.edit(0, policy_source_sha256="e" * 64)


def delete_a_pair(run: StoredRun) -> None:
    del run.messages[3:5]


def delete_the_pending_pair(run: StoredRun) -> None:
    del run.messages[5:7]


def delete_a_decision(run: StoredRun) -> None:
    del run.messages[4]


def duplicate_a_pair(run: StoredRun) -> None:
    run.messages[5:5] = [replace(m) for m in run.messages[3:5]]


def insert_a_forged_pair(run: StoredRun) -> None:
    decision_id = make_uuid7(3)
    pair = [m.with_record({**m.record, "decision_id": decision_id}) for m in run.messages[1:3]]
    run.messages[9:9] = pair


def swap_two_pairs(run: StoredRun) -> None:
    run.messages[1:3], run.messages[7:9] = run.messages[7:9], run.messages[1:3]


def edit_decision_policy(run: StoredRun) -> None:
    run.edit(4, policy_sha256="e" * 64)


def cut_and_reseal(run: StoredRun) -> None:
    del run.messages[7:LAST]


@pytest.mark.parametrize(
    ("forgery", "relink"),
    [
        # Caught: the forger re-chains but leaves a link pointing at the old record.
        pytest.param(edit_assessment, False, id="assessment-chain-only"),
        pytest.param(flip_verdict, False, id="verdict-chain-only"),
        pytest.param(delete_a_pair, False, id="delete-pair-chain-only"),
        # Caught even from a thorough forger: what no re-chaining makes consistent.
        pytest.param(flip_pending, True, id="approved-decision-relinked"),
        pytest.param(point_run_at_another_policy, True, id="run-policy-relinked"),
        pytest.param(delete_the_pending_pair, True, id="approved-pair-deleted-relinked"),
        pytest.param(delete_a_decision, True, id="decision-deleted-relinked"),
        pytest.param(duplicate_a_pair, True, id="pair-duplicated-relinked"),
        pytest.param(edit_decision_policy, True, id="decision-policy-relinked"),
        # Not caught by any check a single unsigned file allows.
        pytest.param(
            edit_last_decision, False, id="last-decision-chain-only", marks=ONLY_SIGNATURES
        ),
        pytest.param(edit_assessment, True, id="assessment-relinked", marks=ONLY_SIGNATURES),
        pytest.param(flip_verdict, True, id="verdict-relinked", marks=ONLY_SIGNATURES),
        pytest.param(delete_a_pair, True, id="pair-deleted-relinked", marks=ONLY_SIGNATURES),
        pytest.param(
            insert_a_forged_pair, True, id="pair-inserted-relinked", marks=ONLY_SIGNATURES
        ),
        pytest.param(swap_two_pairs, True, id="pairs-swapped-relinked", marks=ONLY_SIGNATURES),
        pytest.param(cut_and_reseal, True, id="tail-cut-resealed", marks=ONLY_ANCHORS),
    ],
)
def test_edit_and_re_chain(
    base: StoredRun,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    forgery: Forgery,
    relink: bool,
) -> None:
    run = base.copy()
    forgery(run)
    run.rechain(relink=relink)

    verdict = verify(run.write(tmp_path / "t.mcap"), capsys)

    assert verdict.code == 3, verdict.lines
    assert any(line.startswith("problem: seq ") for line in verdict.lines), verdict.lines


# --- what is not tampering ------------------------------------------------------------------


def test_the_untouched_run_is_intact(
    sink_file: Path, base: StoredRun, capsys: pytest.CaptureFixture[str]
) -> None:
    verdict = verify(sink_file, capsys)

    assert verdict.code == 0
    assert len(verdict.lines) == 1
    assert ": intact: 13 records" in verdict.lines[0]


def cut_offsets(data: bytes) -> list[int]:
    """Every record boundary (and a byte either side), and every 97th byte."""
    offsets = set(range(0, len(data), 97))
    position = 8
    while position + 9 <= len(data):
        offsets |= {position - 1, position, position + 1}
        position += 9 + int.from_bytes(data[position + 1 : position + 9], "little")
    offsets |= {len(data) - 1, len(data) - 4}
    return sorted(offset for offset in offsets if 0 <= offset < len(data))


def test_a_bare_tail_cut_is_truncation_never_tampering(
    sink_file: Path, base: StoredRun, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = sink_file.read_bytes()
    path = tmp_path / "cut.mcap"
    codes: list[int] = []
    for offset in cut_offsets(data):
        path.write_bytes(data[:offset])
        codes.append(main(["verify", "--mcap", str(path)]))
        capsys.readouterr()

    # Before the channels are complete the file is not recognisably a ghost log (1);
    # from there on every cut is a crash's truncation (4), and never tampering (3).
    first_four = codes.index(4)
    assert set(codes[:first_four]) == {1}
    assert set(codes[first_four:]) == {4}


# --- the real console script, for a representative subset -------------------------------------


def test_the_console_script_gives_the_same_verdicts(
    sink_file: Path, base: StoredRun, tmp_path: Path
) -> None:
    cases: dict[str, Forgery] = {
        "field": lambda run: run.edit(4, verdict="allow"),
        "delete": lambda run: run.messages.__delitem__(5),
        "append": lambda run: run.messages.append(replace(run.messages[2])),
        "encoding": lambda run: setattr(run.messages[2], "data", run.messages[2].data + b" "),
        "attachment": lambda run: run.attachments.clear(),
        "schema": lambda run: run.schemas.__setitem__(0, replace(run.schemas[0], data=b"")),
        "log_time": lambda run: setattr(run.messages[3], "log_time", 5),
    }
    for name, forgery in cases.items():
        run = base.copy()
        forgery(run)
        verdict = verify_script(run.write(tmp_path / f"{name}.mcap"))
        assert verdict.code == 3, (name, verdict.lines)
        assert verdict.lines[-1].split(": ")[1] == "tampered", (name, verdict.lines)

    data = sink_file.read_bytes()
    cut = tmp_path / "cut.mcap"
    cut.write_bytes(data[: len(data) // 2])
    assert verify_script(cut).code == 4
    assert verify_script(sink_file).code == 0
