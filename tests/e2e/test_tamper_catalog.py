"""The tamper catalog (issue 6): every edit of a real run, and what ``ghost verify`` says about it.

The runs are written through the real stack (`Gate`, `Policy`,
`McapAuditSink`, signed with an Ed25519 key) and hold every record type:
``/run``, its checkpoint, assessments, decisions of all five verdicts, an
approval, the final checkpoint, the seal. Each tamper is
applied to a faithful copy (`StoredRun`: same channels, every CRC fresh, so
the tamper is the only thing wrong) or to the sink's own bytes, and then
``ghost verify --public-key`` must exit 3 with a line that names the record
touched: its ``seq`` and topic, and its decision id where it has one.

* The full matrix runs in-process through `analysis._cli.main` (fast); a
  representative subset runs the real ``ghost`` console script.
* A bare tail cut is truncation (exit 4), at every record boundary and a
  dense sample of bytes — and tampering (exit 3) with an anchor from a
  checkpoint the cut removed; the untouched run is intact (exit 0).
* Edit-and-re-chain forgeries recompute ``seq``, ``prev_sha256``, every
  checkpoint (tree size, root, head, note) and the seal (and, for the
  thorough forger, every ``assessment_sha256`` and ``decision_sha256``),
  without the signing key. On the signed run, with ``--public-key``, every
  one is caught by the notes' signatures. On an unsigned run, those still
  caught are caught by what the forger cannot recompute consistently — a
  decision/assessment/approval link, the policy attachment; those no
  unsigned file can reveal are strict xfails, documenting what an unsigned,
  unanchored log cannot prove. A forger who re-signs with a key of their
  own passes without ``--public-key`` (consistency, not authorship) and is
  caught with it.
"""

from __future__ import annotations

import json
import subprocess
import uuid
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from analysis._cli import main
from audit import SCHEMAS, TOPICS, Durability, NoteSigner
from runtime import canonical_bytes, make_uuid7, sha256_hex
from tests.analysis.stored_run import StoredMessage, StoredRun, write_gate_run
from tests.e2e.test_cli import GHOST_SCRIPT

# The shape of a gate run (`write_gate_run`): one topic per position.
SHAPE = (
    "/run",
    "/checkpoints",
    *("/assessments", "/decisions") * 5,
    "/approvals",
    "/checkpoints",
    "/seal",
)
LAST = len(SHAPE) - 1
FIRST_CHECKPOINT, FINAL_CHECKPOINT = 1, LAST - 1
A_ALLOW, D_ALLOW, A_DENY, D_DENY, A_PENDING, D_PENDING = range(2, 8)
APPROVAL = 12
ONLY_SIGNATURES = pytest.mark.xfail(
    strict=True,
    raises=AssertionError,
    reason="an unsigned log cannot reveal a thorough re-chaining: only a signature does",
)
ONLY_ANCHORS = pytest.mark.xfail(
    strict=True,
    raises=AssertionError,
    reason="an unsigned, unanchored log cannot reveal a cut tail that was re-sealed",
)
KEY = Ed25519PrivateKey.generate()


def write_public_key(path: Path, key: Ed25519PrivateKey) -> Path:
    public = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    path.write_bytes(public)
    return path


@pytest.fixture(scope="module")
def public_pem(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The public half of the key the catalog's runs are signed with."""
    return write_public_key(tmp_path_factory.mktemp("key") / "ghost.pub.pem", KEY)


@pytest.fixture(scope="module", params=["process", "chunk"])
def sink_file(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A signed run as the sink wrote it, in each durability mode (each lays files out its way)."""
    mode: Durability = request.param
    directory = tmp_path_factory.mktemp(f"catalog-{mode}")
    return write_gate_run(directory / "run.mcap", durability=mode, signing_key=KEY).path


@pytest.fixture(scope="module")
def base(sink_file: Path) -> StoredRun:
    """The run's contents, to copy and tamper with."""
    stored = StoredRun.load(sink_file)
    assert tuple(message.topic for message in stored.messages) == SHAPE
    return stored


@pytest.fixture(scope="module")
def unsigned_base(tmp_path_factory: pytest.TempPathFactory) -> StoredRun:
    """An unsigned run's contents: what re-chaining can forge without a signature to break."""
    path = write_gate_run(tmp_path_factory.mktemp("catalog-unsigned") / "run.mcap").path
    stored = StoredRun.load(path)
    assert tuple(message.topic for message in stored.messages) == SHAPE
    return stored


@dataclass(frozen=True)
class Verdict:
    code: int
    lines: list[str]


def verify(
    path: Path,
    capsys: pytest.CaptureFixture[str],
    key: Path | None = None,
    anchors: Sequence[Path] = (),
) -> Verdict:
    """``ghost verify`` in-process, with the run's public key unless told otherwise."""
    args = ["verify", "--mcap", str(path)]
    if key is not None:
        args += ["--public-key", str(key)]
    for anchor in anchors:
        args += ["--anchor", str(anchor)]
    code = main(args)
    captured = capsys.readouterr()
    assert captured.err == ""
    return Verdict(code, captured.out.splitlines())


def verify_script(path: Path, key: Path) -> Verdict:
    result = subprocess.run(
        [GHOST_SCRIPT, "verify", "--mcap", path, "--public-key", key],
        capture_output=True,
        timeout=120,
        check=False,
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
    for name in sorted(SCHEMAS[TOPICS[topic]]["required"])  # opt-in fields: not in this run
]


@pytest.mark.parametrize(("position", "name"), FIELD_CASES)
def test_changing_any_field_of_any_record_is_caught(
    base: StoredRun,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    public_pem: Path,
    position: int,
    name: str,
) -> None:
    run = base.copy()
    original = run.messages[position]
    run.edit(position, **{name: changed(name, original.record[name])})

    verdict = verify(run.write(tmp_path / "t.mcap"), capsys, public_pem)

    assert verdict.code == 3, verdict.lines
    assert_names(verdict, original, position, run.messages[position])


# --- delete, insert, duplicate, swap -----------------------------------------------------------


@pytest.mark.parametrize("position", range(len(SHAPE)))
def test_deleting_any_record_is_caught(
    base: StoredRun,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    public_pem: Path,
    position: int,
) -> None:
    run = base.copy()
    del run.messages[position]

    verdict = verify(run.write(tmp_path / "t.mcap"), capsys, public_pem)

    assert verdict.code == 3, verdict.lines
    if position == 0:
        expected = "problem: seq 1 /checkpoints"  # now first, where /run should be
        assert any(line.startswith(expected) and "run: the first" in line for line in verdict.lines)
    elif position == LAST:
        assert any("holds no readable /seal record" in line for line in verdict.lines)
    else:
        after = base.messages[position + 1]
        assert_names(verdict, after, position + 1)
        assert any("missing before it" in line for line in verdict.lines)


def forged_decision(base: StoredRun) -> StoredMessage:
    """A well-formed decision for a decision that never happened, canonically stored."""
    template = base.messages[D_ALLOW]
    record = {**template.record, "decision_id": make_uuid7(1), "verdict": "allow"}
    return template.with_record(record)


@pytest.mark.parametrize("position", range(1, len(SHAPE)))
def test_inserting_a_record_anywhere_is_caught(
    base: StoredRun,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    public_pem: Path,
    position: int,
) -> None:
    run = base.copy()
    forged = forged_decision(base)
    run.messages.insert(position, forged)

    verdict = verify(run.write(tmp_path / "t.mcap"), capsys, public_pem)

    assert verdict.code == 3, verdict.lines
    assert_names(verdict, forged, position)


@pytest.mark.parametrize("position", range(len(SHAPE)))
def test_duplicating_any_record_is_caught(
    base: StoredRun,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    public_pem: Path,
    position: int,
) -> None:
    run = base.copy()
    run.messages.insert(position + 1, replace(run.messages[position]))

    verdict = verify(run.write(tmp_path / "t.mcap"), capsys, public_pem)

    assert verdict.code == 3, verdict.lines
    assert_names(verdict, base.messages[position], position)


@pytest.mark.parametrize("position", range(len(SHAPE) - 1))
def test_swapping_any_two_neighbours_is_caught(
    base: StoredRun,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    public_pem: Path,
    position: int,
) -> None:
    run = base.copy()
    messages = run.messages
    messages[position], messages[position + 1] = messages[position + 1], messages[position]

    verdict = verify(run.write(tmp_path / "t.mcap"), capsys, public_pem)

    assert verdict.code == 3, verdict.lines
    assert_names(verdict, base.messages[position], position)


def test_two_decisions_swapped_are_caught(
    base: StoredRun, tmp_path: Path, capsys: pytest.CaptureFixture[str], public_pem: Path
) -> None:
    run = base.copy()
    messages = run.messages
    messages[D_ALLOW], messages[D_DENY] = messages[D_DENY], messages[D_ALLOW]

    verdict = verify(run.write(tmp_path / "t.mcap"), capsys, public_pem)

    assert verdict.code == 3
    assert_names(verdict, base.messages[D_ALLOW], D_ALLOW)
    assert_names(verdict, base.messages[D_DENY], D_DENY)


def test_a_forged_pair_appended_after_the_seal_is_caught(
    base: StoredRun, tmp_path: Path, capsys: pytest.CaptureFixture[str], public_pem: Path
) -> None:
    run = base.copy()
    seal_address = sha256_hex(run.messages[LAST].data)
    assessment = run.messages[A_ALLOW].record
    decision_id = make_uuid7(2)
    forged_a = {
        **assessment,
        "decision_id": decision_id,
        "seq": LAST + 1,
        "prev_sha256": seal_address,
    }
    a_data = canonical_bytes(forged_a)
    forged_d = {
        **run.messages[D_ALLOW].record,
        "decision_id": decision_id,
        "seq": LAST + 2,
        "prev_sha256": sha256_hex(a_data),
        "assessment_sha256": sha256_hex(a_data),
    }
    templates = ((forged_a, run.messages[A_ALLOW]), (forged_d, run.messages[D_ALLOW]))
    for record, template in templates:
        run.messages.append(replace(template.with_record(record), sequence=record["seq"]))

    verdict = verify(run.write(tmp_path / "t.mcap"), capsys, public_pem)

    assert verdict.code == 3
    assert_names(verdict, run.messages[LAST + 1], LAST + 1)
    assert any("it follows the seal" in line for line in verdict.lines)


# --- encoding and MCAP fields ------------------------------------------------------------------


@pytest.mark.parametrize("position", range(len(SHAPE)))
def test_re_encoding_any_record_non_canonically_is_caught(
    base: StoredRun,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    public_pem: Path,
    position: int,
) -> None:
    run = base.copy()
    record = run.messages[position].record
    run.messages[position].data = json.dumps(record, ensure_ascii=True, sort_keys=False).encode()
    assert run.messages[position].data != base.messages[position].data

    verdict = verify(run.write(tmp_path / "t.mcap"), capsys, public_pem)

    assert verdict.code == 3
    assert_names(verdict, run.messages[position], position)
    assert any(": canonical: " in line for line in verdict.lines)


@pytest.mark.parametrize("field", ["log_time", "sequence"])
@pytest.mark.parametrize("position", range(len(SHAPE)))
def test_changing_log_time_or_sequence_of_any_record_is_caught(
    base: StoredRun,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    public_pem: Path,
    position: int,
    field: str,
) -> None:
    run = base.copy()
    message = run.messages[position]
    setattr(message, field, getattr(message, field) + 1)

    verdict = verify(run.write(tmp_path / "t.mcap"), capsys, public_pem)

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
    sink_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], public_pem: Path
) -> None:
    data = bytearray(sink_file.read_bytes())
    (data_end,) = offsets_of(bytes(data), 0x0F)
    data[data_end + 9 : data_end + 13] = bytes(4)
    path = tmp_path / "t.mcap"
    path.write_bytes(data)

    verdict = verify(path, capsys, public_pem)

    assert verdict.code == 3
    assert verdict.lines[0] == (
        f"problem: file: file: the data-section CRC (DataEnd at byte {data_end}) is zero,"
        " but ghost always writes it: the file was altered after it was written"
    )


def test_zeroing_a_chunk_crc_is_caught(
    sink_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], public_pem: Path
) -> None:
    # Every durability mode writes indexed chunks.
    data = bytearray(sink_file.read_bytes())
    chunk = offsets_of(bytes(data), 0x06)[0]
    data[chunk + 33 : chunk + 37] = bytes(4)
    (data_end,) = offsets_of(bytes(data), 0x0F)
    data[data_end + 9 : data_end + 13] = zlib.crc32(data[:data_end]).to_bytes(4, "little")
    path = tmp_path / "t.mcap"
    path.write_bytes(data)

    verdict = verify(path, capsys, public_pem)

    assert verdict.code == 3
    assert verdict.lines[0].startswith(f"problem: file: file: the CRC of the chunk at byte {chunk}")


@pytest.mark.parametrize("how", ["altered", "removed", "replaced"])
def test_altering_or_removing_the_policy_attachment_is_caught(
    base: StoredRun, tmp_path: Path, capsys: pytest.CaptureFixture[str], public_pem: Path, how: str
) -> None:
    run = base.copy()
    policy = run.attachments[0]
    if how == "altered":
        run.attachments[0] = replace(policy, data=policy.data.replace(b"deny", b"allow", 1))
    elif how == "removed":
        run.attachments.clear()
    else:
        run.attachments[0] = replace(policy, data=b'policy_id = "x"\ndefault = "allow"\n')

    verdict = verify(run.write(tmp_path / "t.mcap"), capsys, public_pem)

    assert verdict.code == 3
    assert any(line.startswith("problem: seq 0 /run: attachment:") for line in verdict.lines)


@pytest.mark.parametrize("topic", list(TOPICS))
def test_emptying_any_channel_schema_is_caught(
    base: StoredRun,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    public_pem: Path,
    topic: str,
) -> None:
    run = base.copy()
    index = next(i for i, s in enumerate(run.schemas) if s.name == TOPICS[topic])
    run.schemas[index] = replace(run.schemas[index], data=b"")

    verdict = verify(run.write(tmp_path / "t.mcap"), capsys, public_pem)

    assert verdict.code == 3
    assert any(f"is named {TOPICS[topic]} but does not carry" in line for line in verdict.lines)


# --- edit and re-chain ------------------------------------------------------------------------


Forgery = Callable[[StoredRun], None]


def edit_assessment(run: StoredRun) -> None:
    run.edit(A_DENY, agent="someone-else")


def flip_verdict(run: StoredRun) -> None:
    run.edit(D_DENY, verdict="allow")


def flip_pending(run: StoredRun) -> None:
    run.edit(D_PENDING, verdict="allow")  # the decision the approval names


def edit_last_decision(run: StoredRun) -> None:
    run.edit(APPROVAL - 1, reason="nothing to see here")


def point_run_at_another_policy(run: StoredRun) -> None:
    run.edit(0, policy_source_sha256="e" * 64)


def delete_a_pair(run: StoredRun) -> None:
    del run.messages[A_DENY : D_DENY + 1]


def delete_the_pending_pair(run: StoredRun) -> None:
    del run.messages[A_PENDING : D_PENDING + 1]


def delete_a_decision(run: StoredRun) -> None:
    del run.messages[D_DENY]


def duplicate_a_pair(run: StoredRun) -> None:
    run.messages[A_PENDING:A_PENDING] = [replace(m) for m in run.messages[A_DENY : D_DENY + 1]]


def insert_a_forged_pair(run: StoredRun) -> None:
    decision_id = make_uuid7(3)
    pair = [
        m.with_record({**m.record, "decision_id": decision_id})
        for m in run.messages[A_ALLOW : D_ALLOW + 1]
    ]
    run.messages[APPROVAL - 2 : APPROVAL - 2] = pair


def swap_two_pairs(run: StoredRun) -> None:
    first, second = slice(A_ALLOW, D_ALLOW + 1), slice(APPROVAL - 4, APPROVAL - 2)
    run.messages[first], run.messages[second] = run.messages[second], run.messages[first]


def edit_decision_policy(run: StoredRun) -> None:
    run.edit(D_DENY, policy_sha256="e" * 64)


def cut_and_reseal(run: StoredRun) -> None:
    del run.messages[A_PENDING + 2 : FINAL_CHECKPOINT]


def insert_a_checkpoint(run: StoredRun) -> None:
    run.messages.insert(A_PENDING, replace(run.messages[FIRST_CHECKPOINT]))


def delete_the_first_checkpoint(run: StoredRun) -> None:
    del run.messages[FIRST_CHECKPOINT]


def delete_the_final_checkpoint(run: StoredRun) -> None:
    del run.messages[FINAL_CHECKPOINT]


FORGERIES: dict[str, tuple[Forgery, bool]] = {
    "assessment-chain-only": (edit_assessment, False),
    "verdict-chain-only": (flip_verdict, False),
    "delete-pair-chain-only": (delete_a_pair, False),
    "approved-decision-relinked": (flip_pending, True),
    "run-policy-relinked": (point_run_at_another_policy, True),
    "approved-pair-deleted-relinked": (delete_the_pending_pair, True),
    "decision-deleted-relinked": (delete_a_decision, True),
    "pair-duplicated-relinked": (duplicate_a_pair, True),
    "decision-policy-relinked": (edit_decision_policy, True),
    "last-decision-chain-only": (edit_last_decision, False),
    "assessment-relinked": (edit_assessment, True),
    "verdict-relinked": (flip_verdict, True),
    "pair-deleted-relinked": (delete_a_pair, True),
    "pair-inserted-relinked": (insert_a_forged_pair, True),
    "pairs-swapped-relinked": (swap_two_pairs, True),
    "tail-cut-resealed": (cut_and_reseal, True),
    "checkpoint-inserted-relinked": (insert_a_checkpoint, True),
    "first-checkpoint-deleted-relinked": (delete_the_first_checkpoint, True),
    "final-checkpoint-deleted-relinked": (delete_the_final_checkpoint, True),
}


@pytest.mark.parametrize("name", list(FORGERIES))
def test_edit_and_re_chain_of_a_signed_run_is_caught_with_its_key(
    base: StoredRun,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    public_pem: Path,
    name: str,
) -> None:
    forgery, relink = FORGERIES[name]
    run = base.copy()
    forgery(run)
    run.rechain(relink=relink)

    verdict = verify(run.write(tmp_path / "t.mcap"), capsys, public_pem)

    assert verdict.code == 3, verdict.lines
    assert any(line.startswith("problem: seq ") for line in verdict.lines), verdict.lines


# What an unsigned log cannot reveal: the cases its own consistency does not give away.
UNSIGNED_MARKS = {
    "last-decision-chain-only": ONLY_SIGNATURES,
    "assessment-relinked": ONLY_SIGNATURES,
    "verdict-relinked": ONLY_SIGNATURES,
    "pair-deleted-relinked": ONLY_SIGNATURES,
    "pair-inserted-relinked": ONLY_SIGNATURES,
    "pairs-swapped-relinked": ONLY_SIGNATURES,
    "checkpoint-inserted-relinked": ONLY_SIGNATURES,
    "tail-cut-resealed": ONLY_ANCHORS,
}


@pytest.mark.parametrize(
    "name",
    [pytest.param(name, marks=UNSIGNED_MARKS.get(name, ()), id=name) for name in FORGERIES],
)
def test_edit_and_re_chain_of_an_unsigned_run(
    unsigned_base: StoredRun, tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    forgery, relink = FORGERIES[name]
    run = unsigned_base.copy()
    forgery(run)
    run.rechain(relink=relink)

    verdict = verify(run.write(tmp_path / "t.mcap"), capsys)

    assert verdict.code == 3, verdict.lines
    assert any(line.startswith("problem: seq ") for line in verdict.lines), verdict.lines


def test_a_forger_who_re_signs_with_a_key_of_their_own_is_caught_only_by_the_key(
    base: StoredRun, tmp_path: Path, capsys: pytest.CaptureFixture[str], public_pem: Path
) -> None:
    run = base.copy()
    flip_verdict(run)
    run.rechain(signer=NoteSigner(Ed25519PrivateKey.generate()))
    path = run.write(tmp_path / "t.mcap")

    alone = verify(path, capsys)
    with_key = verify(path, capsys, public_pem)

    assert alone.code == 0, alone.lines
    assert "proves consistency, not authorship" in alone.lines[-1]
    assert with_key.code == 3, with_key.lines
    assert with_key.lines[0].startswith("problem: seq 0 /run: checkpoint: the run declares")
    assert [line.split(": checkpoint: ")[0] for line in with_key.lines[1:-1]] == [
        f"problem: seq {FIRST_CHECKPOINT} /checkpoints",
        f"problem: seq {FINAL_CHECKPOINT} /checkpoints",
    ]


# --- what is not tampering ------------------------------------------------------------------


def test_the_untouched_signed_run_is_intact_with_its_key(
    sink_file: Path, capsys: pytest.CaptureFixture[str], public_pem: Path
) -> None:
    verdict = verify(sink_file, capsys, public_pem)

    assert verdict.code == 0
    assert len(verdict.lines) == 1
    assert f": intact: {len(SHAPE)} records" in verdict.lines[0]
    assert "2 checkpoint notes signed by the key given" in verdict.lines[0]


def test_the_untouched_unsigned_run_is_intact(
    unsigned_base: StoredRun, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    verdict = verify(unsigned_base.write(tmp_path / "t.mcap"), capsys)

    assert verdict.code == 0, verdict.lines
    assert "unsigned: this shows the log is self-consistent, not who wrote it" in verdict.lines[0]


def cut_offsets(data: bytes) -> list[int]:
    """Every record boundary (and a byte either side), and every 97th byte."""
    offsets = set(range(0, len(data), 97))
    position = 8
    while position + 9 <= len(data):
        offsets |= {position - 1, position, position + 1}
        position += 9 + int.from_bytes(data[position + 1 : position + 9], "little")
    offsets |= {len(data) - 1, len(data) - 4}
    return sorted(offset for offset in offsets if 0 <= offset < len(data))


def test_a_bare_tail_cut_is_truncation_and_tampering_beyond_an_anchor(
    sink_file: Path,
    base: StoredRun,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    public_pem: Path,
) -> None:
    from analysis import verify_run

    data = sink_file.read_bytes()
    anchor = tmp_path / "final.note"
    anchor.write_text(base.messages[FINAL_CHECKPOINT].record["note"], encoding="utf-8")
    path = tmp_path / "cut.mcap"
    codes: list[int] = []
    anchored: list[tuple[int, int]] = []
    for offset in cut_offsets(data):
        path.write_bytes(data[:offset])
        code = main(["verify", "--mcap", str(path), "--public-key", str(public_pem)])
        codes.append(code)
        if code == 4:
            held = verify_run(path).record_count
            anchored.append((held, verify(path, capsys, public_pem, [anchor]).code))
        capsys.readouterr()

    # Before the header is complete the file is not recognisably a ghost log (1);
    # from there on every cut is a crash's truncation (4), and never tampering (3).
    first_four = codes.index(4)
    assert set(codes[:first_four]) == {1}
    assert set(codes[first_four:]) == {4}
    # With the final checkpoint's note held outside, a cut that removed a record it
    # covers is tampering; a cut after them all is still a crash.
    assert anchored
    for held, code in anchored:
        assert code == (3 if held < FINAL_CHECKPOINT else 4), (held, code)
    assert {code for _, code in anchored} == {3, 4}


# --- the real console script, for a representative subset -------------------------------------


def test_the_console_script_gives_the_same_verdicts(
    sink_file: Path, base: StoredRun, tmp_path: Path, public_pem: Path
) -> None:
    cases: dict[str, Forgery] = {
        "field": lambda run: run.edit(D_DENY, verdict="allow"),
        "delete": lambda run: run.messages.__delitem__(A_PENDING),
        "append": lambda run: run.messages.append(replace(run.messages[D_ALLOW])),
        "encoding": lambda run: setattr(
            run.messages[D_ALLOW], "data", run.messages[D_ALLOW].data + b" "
        ),
        "attachment": lambda run: run.attachments.clear(),
        "schema": lambda run: run.schemas.__setitem__(0, replace(run.schemas[0], data=b"")),
        "log_time": lambda run: setattr(run.messages[A_DENY], "log_time", 5),
        "rechain": lambda run: (flip_verdict(run), run.rechain()),
    }
    for name, forgery in cases.items():
        run = base.copy()
        forgery(run)
        verdict = verify_script(run.write(tmp_path / f"{name}.mcap"), public_pem)
        assert verdict.code == 3, (name, verdict.lines)
        assert verdict.lines[-1].split(": ")[1] == "tampered", (name, verdict.lines)

    data = sink_file.read_bytes()
    cut = tmp_path / "cut.mcap"
    cut.write_bytes(data[: len(data) // 2])
    assert verify_script(cut, public_pem).code == 4
    assert verify_script(sink_file, public_pem).code == 0
