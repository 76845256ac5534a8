"""`CheckpointCheck` through `verify_run`: each rule of the checkpoint check, pinned by its tamper.

The runs are real (`write_gate_run`), signed or not; each edit is made on a
faithful copy (`StoredRun`), so what a test changed is the only thing wrong.
The roots are also recomputed here by an independent RFC 6962
implementation, and the note signatures checked with ``cryptography`` alone.
"""

from __future__ import annotations

import base64
import hashlib
from pathlib import Path

import pytest
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from analysis import IntegrityCheck, RunStatus, RunVerification, SignatureCheck, verify_run
from audit import NoteSigner, make_checkpoint_note, parse_checkpoint_note
from runtime import sha256_hex
from tests.analysis.stored_run import GateRun, StoredRun, write_gate_run

C = IntegrityCheck
RUN, CHECKPOINT, A_ALLOW, D_ALLOW = range(4)
FINAL_CHECKPOINT, SEAL = 13, 14
KEY = Ed25519PrivateKey.generate()
OTHER = Ed25519PrivateKey.generate()


@pytest.fixture(scope="module")
def signed(tmp_path_factory: pytest.TempPathFactory) -> GateRun:
    return write_gate_run(tmp_path_factory.mktemp("signed") / "run.mcap", signing_key=KEY)


@pytest.fixture
def signed_stored(signed: GateRun) -> StoredRun:
    return StoredRun.load(signed.path)


def problems(result: RunVerification, check: IntegrityCheck) -> list[tuple[int | None, str]]:
    return [(p.position, p.message) for p in result.problems if p.check is check]


# --- an independent check of what the sink wrote ------------------------------------------------


def rfc6962_root(leaves: list[bytes]) -> bytes:
    """RFC 6962 §2.1, recursively, straight from the definition."""
    if not leaves:
        return hashlib.sha256(b"").digest()
    if len(leaves) == 1:
        return hashlib.sha256(b"\x00" + leaves[0]).digest()
    split = 1
    while split * 2 < len(leaves):
        split *= 2
    left, right = rfc6962_root(leaves[:split]), rfc6962_root(leaves[split:])
    return hashlib.sha256(b"\x01" + left + right).digest()


def test_every_root_recomputes_and_every_signature_verifies_independently(
    signed_stored: StoredRun,
) -> None:
    messages = signed_stored.messages
    public = KEY.public_key()
    checked = 0
    for position, message in enumerate(messages):
        if message.topic != "/checkpoints":
            continue
        record = message.record
        root = rfc6962_root([m.data for m in messages[:position]])
        assert record["root_hash"] == root.hex()
        text, _, signature_line = record["note"].partition("\n\n")
        assert text.split("\n") == [
            f"ghost.run/{messages[0].record['run_id']}",
            str(position),
            base64.b64encode(root).decode(),
        ]
        raw = base64.b64decode(signature_line.rstrip("\n").split(" ")[2])
        public.verify(raw[4:], (text + "\n").encode())  # raises InvalidSignature if not
        with pytest.raises(InvalidSignature):
            public.verify(raw[4:], (text + "x\n").encode())
        checked += 1
    assert checked == 2


# --- signed runs ------------------------------------------------------------------------------


def test_a_signed_run_verifies_against_its_declared_key_and_says_what_that_proves(
    signed: GateRun,
) -> None:
    result = verify_run(signed.path)

    assert result.ok
    assert (result.signed, result.signatures, result.checkpoint_count) == (
        True,
        SignatureCheck.DECLARED_KEY,
        2,
    )
    assert "proves consistency, not authorship" in result.summary


def test_a_signed_run_verifies_against_the_key_given(signed: GateRun) -> None:
    result = verify_run(signed.path, public_key=KEY.public_key())

    assert result.ok
    assert result.signatures is SignatureCheck.GIVEN_KEY
    assert "signed by the key given" in result.summary


def test_another_key_is_named_at_run_and_at_every_note(signed: GateRun) -> None:
    other = OTHER.public_key()

    result = verify_run(signed.path, public_key=other)

    assert result.status is RunStatus.TAMPERED
    found = problems(result, C.CHECKPOINT)
    assert [position for position, _ in found] == [RUN, CHECKPOINT, FINAL_CHECKPOINT]
    declared = signed_stored_key_id()
    assert found[0][1] == (
        f"the run declares signing key {declared}, not the key given"
        f" ({hashlib.sha256(raw(other)).hexdigest()})"
    )
    assert found[1][1].startswith(
        "its note's signature does not verify against the public key given: no signature by a"
        " known key"
    )


def raw(key: Ed25519PublicKey) -> bytes:
    from cryptography.hazmat.primitives import serialization

    return key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def signed_stored_key_id() -> str:
    return hashlib.sha256(raw(KEY.public_key())).hexdigest()


def test_a_note_left_unsigned_in_a_signed_run_is_named(
    signed_stored: StoredRun, tmp_path: Path
) -> None:
    note = signed_stored.messages[FINAL_CHECKPOINT].record["note"]
    signed_stored.edit(FINAL_CHECKPOINT, note=note.partition("\n\n")[0] + "\n")
    signed_stored.rechain()

    result = verify_run(signed_stored.write(tmp_path / "t.mcap"))

    assert problems(result, C.CHECKPOINT) == [
        (
            FINAL_CHECKPOINT,
            (
                "its note carries 0 signature line(s), but a ghost sink signs each note exactly"
                " once, with the key and name /run declares"
            ),
        ),
        (
            FINAL_CHECKPOINT,
            (
                "its note's signature does not verify against the key the run declares: no"
                f" signature by a known key (known: ghost/{signed_stored_key_id()[:16]})"
            ),
        ),
    ]


def test_a_note_whose_signature_was_copied_onto_another_text_is_named(
    signed_stored: StoredRun, tmp_path: Path
) -> None:
    signed_stored.edit(D_ALLOW, reason="edited")
    signed_stored.rechain()  # keeps the final note's old signature over a new root

    result = verify_run(signed_stored.write(tmp_path / "t.mcap"))

    found = problems(result, C.CHECKPOINT)
    assert [position for position, _ in found] == [FINAL_CHECKPOINT]
    assert found[0][1].startswith(
        "its note's signature does not verify against the key the run declares: the signature"
        f" by ghost/{signed_stored_key_id()[:16]}"
    )


def test_a_declared_key_whose_id_is_not_its_own_is_named(
    signed_stored: StoredRun, tmp_path: Path
) -> None:
    signing = dict(signed_stored.messages[RUN].record["signing"])
    signing["key_id"] = "0" * 64
    signed_stored.edit(RUN, signing=signing)
    signed_stored.rechain()

    result = verify_run(signed_stored.write(tmp_path / "t.mcap"))

    found = problems(result, C.CHECKPOINT)
    assert found[0][0] == RUN
    assert found[0][1].startswith("its signing key cannot be used")
    # No usable key: the notes' lines are not checked against one.
    assert [position for position, _ in found] == [RUN]


def test_a_re_signed_forgery_passes_alone_and_fails_with_the_key(
    signed_stored: StoredRun, tmp_path: Path
) -> None:
    signed_stored.edit(D_ALLOW, reason="edited")
    signed_stored.rechain(signer=NoteSigner(OTHER))
    path = signed_stored.write(tmp_path / "t.mcap")

    assert verify_run(path).ok
    assert verify_run(path, public_key=KEY.public_key()).status is RunStatus.TAMPERED


# --- unsigned runs ----------------------------------------------------------------------------


def test_an_unsigned_run_with_a_public_key_is_named_once(gate_run: GateRun) -> None:
    result = verify_run(gate_run.path, public_key=KEY.public_key())

    assert problems(result, C.CHECKPOINT) == [
        (
            RUN,
            (
                f"a public key was given (key id {signed_stored_key_id()}), but the run declares"
                " no signing key: its checkpoints are unsigned, so nothing shows the key holder"
                " wrote it"
            ),
        )
    ]


def test_a_signature_on_an_unsigned_runs_note_is_named(stored: StoredRun, out: Path) -> None:
    record = stored.messages[FINAL_CHECKPOINT].record
    signer = NoteSigner(KEY)
    note = make_checkpoint_note(
        stored.messages[RUN].record["run_id"],
        record["tree_size"],
        bytes.fromhex(record["root_hash"]),
        signer,
    )
    stored.edit(FINAL_CHECKPOINT, note=note)
    stored.rechain()

    result = verify_run(stored.write(out))

    assert problems(result, C.CHECKPOINT) == [
        (
            FINAL_CHECKPOINT,
            (
                "its note carries 1 signature line(s), but the run declares no signing key, and a"
                " ghost sink without one signs nothing"
            ),
        )
    ]


# --- the tree head ----------------------------------------------------------------------------


def test_a_tree_size_that_is_not_the_seq_is_named(stored: StoredRun, out: Path) -> None:
    stored.edit(CHECKPOINT, tree_size=2)

    result = verify_run(stored.write(out))

    messages = [message for position, message in problems(result, C.CHECKPOINT)]
    assert messages[:2] == [
        "its tree_size is 2, but its seq is 1: a ghost checkpoint covers every record before it",
        "its tree_size is 2, but 1 record precede it in the file",
    ]
    assert "its note states tree size 1, but its tree_size is 2" in messages


def test_a_tree_size_matching_a_wrong_seq_is_named_by_position(
    stored: StoredRun, out: Path
) -> None:
    stored.edit(FINAL_CHECKPOINT, tree_size=12, seq=12)

    result = verify_run(stored.write(out))

    assert (FINAL_CHECKPOINT, "its tree_size is 12, but 13 records precede it in the file") in (
        problems(result, C.CHECKPOINT)
    )


def test_a_wrong_root_is_named(stored: StoredRun, out: Path) -> None:
    real = stored.messages[CHECKPOINT].record["root_hash"]
    stored.edit(CHECKPOINT, root_hash="e" * 64)

    result = verify_run(stored.write(out))

    # The final checkpoint covers the edited one, so its root differs too.
    assert problems(result, C.CHECKPOINT)[:2] == [
        (
            CHECKPOINT,
            (
                f"its root_hash is {'e' * 64}, but the RFC 6962 root of the 1 records before it is"
                f" {real}: a record it covers was altered, removed, inserted or reordered"
            ),
        ),
        (CHECKPOINT, f"its note states root {real}, but its root_hash is {'e' * 64}"),
    ]


def test_a_root_over_an_edited_record_is_named(stored: StoredRun, out: Path) -> None:
    stored.edit(RUN, host="elsewhere")

    result = verify_run(stored.write(out))

    found = problems(result, C.CHECKPOINT)
    assert [position for position, _ in found] == [CHECKPOINT, CHECKPOINT, FINAL_CHECKPOINT]
    assert found[0][1].startswith("its root_hash is")
    assert found[1][1].startswith("its head_sha256 is")


def test_a_wrong_head_is_named(stored: StoredRun, out: Path) -> None:
    stored.edit(CHECKPOINT, head_sha256="e" * 64)

    result = verify_run(stored.write(out))

    run_address = sha256_hex(stored.messages[RUN].data)
    assert problems(result, C.CHECKPOINT)[:1] == [
        (
            CHECKPOINT,
            (
                f"its head_sha256 is {'e' * 64}, but the record before it, seq 0 (/run), has"
                f" content address {run_address}"
            ),
        )
    ]


def test_a_note_that_does_not_parse_is_named(stored: StoredRun, out: Path) -> None:
    stored.edit(CHECKPOINT, note="not a note\n")

    result = verify_run(stored.write(out))

    found = problems(result, C.CHECKPOINT)
    assert found[0][1].startswith("its note is not a checkpoint note: a checkpoint text is")


def test_a_note_of_another_run_is_named(stored: StoredRun, out: Path) -> None:
    record = stored.messages[CHECKPOINT].record
    other = "0" * 8 + "-0000-7000-8000-" + "0" * 12
    note = make_checkpoint_note(other, 1, bytes.fromhex(record["root_hash"]), None)
    stored.edit(CHECKPOINT, note=note)

    result = verify_run(stored.write(out))

    run_id = stored.messages[RUN].record["run_id"]
    assert (
        CHECKPOINT,
        f"its note's origin is not ghost.run/{run_id}: the note is another run's",
    ) in problems(result, C.CHECKPOINT)


def test_the_first_and_last_checkpoints_must_be_there(stored: StoredRun, out: Path) -> None:
    del stored.messages[FINAL_CHECKPOINT]
    del stored.messages[CHECKPOINT]
    stored.rechain()

    result = verify_run(stored.write(out))

    assert problems(result, C.CHECKPOINT) == [
        (
            1,
            (
                "the record after /run is not a checkpoint, but a ghost sink writes one right after"
                " /run: it was removed or records were inserted"
            ),
        ),
        (
            SEAL - 2,
            (
                "the record before the seal is not a checkpoint, but a ghost sink always writes a"
                " final checkpoint covering every record before the seal"
            ),
        ),
    ]


# --- anchors ----------------------------------------------------------------------------------


def notes_of(stored: StoredRun) -> list[str]:
    return [record["note"] for record in stored.records_on("/checkpoints")]


def test_every_checkpoint_of_the_run_is_a_matching_anchor(
    gate_run: GateRun, stored: StoredRun
) -> None:
    notes = notes_of(stored)

    result = verify_run(gate_run.path, anchors=[notes[0], parse_checkpoint_note(notes[1])])

    assert result.ok
    assert (result.anchors_checked, result.anchors_matched) == (2, 2)


def test_an_anchor_beyond_a_cut_file_is_a_cut_tail(
    gate_runs: dict[str, GateRun], tmp_path: Path
) -> None:
    gate_run = gate_runs["process"]  # uncompressed: the cut is placed by a record's bytes
    stored = StoredRun.load(gate_run.path)
    data = gate_run.path.read_bytes()
    cut = tmp_path / "cut.mcap"
    cut.write_bytes(data[: data.index(b'"schema":"ghost.approval/1"')])

    plain = verify_run(cut)
    anchored = verify_run(cut, anchors=notes_of(stored))

    assert plain.status is RunStatus.TRUNCATED
    assert anchored.status is RunStatus.TAMPERED
    held = plain.record_count
    assert problems(anchored, C.ANCHOR) == [
        (
            None,
            (
                f"anchor 2 of 2: it is for tree size 13, but the file holds only {held} records:"
                " records that were written have been cut off (a crash never removes what a"
                " checkpoint note has seen)"
            ),
        )
    ]
    assert anchored.anchors_matched == 1


def test_an_anchor_within_a_cut_file_keeps_it_truncated(
    gate_runs: dict[str, GateRun], tmp_path: Path
) -> None:
    gate_run = gate_runs["process"]  # uncompressed: the cut is placed by a record's bytes
    stored = StoredRun.load(gate_run.path)
    data = gate_run.path.read_bytes()
    cut = tmp_path / "cut.mcap"
    cut.write_bytes(data[: data.index(b'"schema":"ghost.seal/1"')])

    result = verify_run(cut, anchors=notes_of(stored))

    assert result.status is RunStatus.TRUNCATED
    assert result.anchors_matched == 2
    assert "2 anchors held outside the file match its tree" in result.summary


def test_an_anchor_over_a_rewritten_past_is_named(
    gate_run: GateRun, stored: StoredRun, out: Path
) -> None:
    notes = notes_of(stored)
    stored.edit(D_ALLOW, reason="rewritten")
    stored.rechain()
    path = stored.write(out)
    assert verify_run(path).ok  # unsigned: the rewrite is self-consistent

    result = verify_run(path, anchors=notes)

    found = problems(result, C.ANCHOR)
    assert [message.split(":")[0] for _, message in found] == ["anchor 2 of 2"]
    assert found[0][1].endswith(
        "the file's records seq 0-12 have root"
        f" {stored.messages[FINAL_CHECKPOINT].record['root_hash']}: the past was rewritten"
    )


def test_an_anchor_of_another_run_is_named(gate_run: GateRun, tmp_path: Path) -> None:
    other = write_gate_run(tmp_path / "other.mcap")
    note = notes_of(StoredRun.load(other.path))[0]

    result = verify_run(gate_run.path, anchors=[note])

    run_id = verify_run(gate_run.path).run_id
    assert problems(result, C.ANCHOR) == [
        (
            None,
            (
                "anchor 1 of 1: it is not a checkpoint of this run: its origin is not"
                f" ghost.run/{run_id}"
            ),
        )
    ]


def test_an_anchor_needs_a_readable_run_id(stored: StoredRun, out: Path) -> None:
    note = notes_of(stored)[0]
    stored.edit(RUN, run_id="not-a-uuid")

    result = verify_run(stored.write(out), anchors=[note])

    assert problems(result, C.ANCHOR) == [
        (
            None,
            (
                "anchor 1 of 1: it is for tree size 1, but the run has no readable run id to match"
                " its origin against"
            ),
        )
    ]
    assert result.run_id is None


def test_a_signed_anchor_is_checked_against_the_key_given(
    signed: GateRun, signed_stored: StoredRun
) -> None:
    good = notes_of(signed_stored)[1]
    checkpoint = parse_checkpoint_note(good).checkpoint
    text = checkpoint.text()
    foreign = NoteSigner(OTHER, name=f"ghost/{signed_stored_key_id()[:16]}")
    forged = (
        text
        + "\n"
        + good.partition("\n\n")[2].replace(
            good.partition("\n\n")[2].split(" ")[2],
            base64.b64encode(NoteSigner(KEY).key_hash + foreign.sign(text.encode())).decode()
            + "\n",
        )
    )

    assert verify_run(signed.path, public_key=KEY.public_key(), anchors=[good]).ok
    result = verify_run(signed.path, public_key=KEY.public_key(), anchors=[forged])
    assert [message.split(":")[0] for _, message in problems(result, C.ANCHOR)] == ["anchor 1 of 1"]
    assert (
        "its signature does not verify against the public key given"
        in (problems(result, C.ANCHOR)[0][1])
    )
    # Without a key, an anchor is checked by its tree head alone.
    assert verify_run(signed.path, anchors=[forged]).ok


def test_an_anchor_exactly_as_large_as_the_file_holds_is_not_a_cut(
    gate_runs: dict[str, GateRun], tmp_path: Path
) -> None:
    gate_run = gate_runs["process"]  # uncompressed: the cut is placed by a record's bytes
    stored = StoredRun.load(gate_run.path)
    data = gate_run.path.read_bytes()
    final = data.rindex(b'"schema":"ghost.checkpoint/1"')
    cut = tmp_path / "cut.mcap"
    cut.write_bytes(data[:final])  # inside the final checkpoint: records 0-12 remain

    result = verify_run(cut, anchors=notes_of(stored)[1:])

    assert result.record_count == FINAL_CHECKPOINT
    assert (result.status, result.anchors_matched) == (RunStatus.TRUNCATED, 1)


@pytest.mark.parametrize("root", ["E" * 64, "e" * 63, "g" * 64, 7], ids=str)
def test_a_root_that_is_not_lowercase_hex_is_left_to_the_schema_check(
    stored: StoredRun, out: Path, root: object
) -> None:
    stored.edit(CHECKPOINT, root_hash=root)

    result = verify_run(stored.write(out))

    assert (C.SCHEMA, CHECKPOINT) in [(p.check, p.position) for p in result.problems]
    # Not compared: no root is claimed, so none can be said to differ.
    assert not any(
        p.position == CHECKPOINT and "root" in p.message
        for p in result.problems
        if p.check is C.CHECKPOINT
    )


# --- edges the rules above do not reach -----------------------------------------------------


def test_an_anchor_of_the_empty_tree_matches_every_run(
    stored: StoredRun, gate_run: GateRun
) -> None:
    from audit import EMPTY_ROOT, Checkpoint, checkpoint_origin

    empty = Checkpoint(checkpoint_origin(stored.messages[RUN].record["run_id"]), 0, EMPTY_ROOT)

    result = verify_run(gate_run.path, anchors=[empty.text()])

    assert (result.ok, result.anchors_matched) == (True, 1)


def test_a_run_record_that_is_not_first_gives_no_run_id(stored: StoredRun, out: Path) -> None:
    note = notes_of(stored)[0]
    stored.messages.insert(A_ALLOW, stored.messages.pop(RUN))

    result = verify_run(stored.write(out), anchors=[note])

    assert problems(result, C.ANCHOR) == [
        (
            None,
            (
                "anchor 1 of 1: it is for tree size 1, but the run has no readable run id to match"
                " its origin against"
            ),
        )
    ]


def with_signing(stored: StoredRun, **changes: object) -> None:
    stored.edit(RUN, signing={**stored.messages[RUN].record["signing"], **changes})
    stored.rechain()


@pytest.mark.parametrize(
    "changes",
    [
        {"public_key": 7},
        {"key_name": 7},
        {"public_key": "x"},
        {"key_name": "two words"},
    ],
    ids=["key-not-text", "name-not-text", "key-not-base64", "name-not-a-key-name"],
)
def test_a_declared_key_that_cannot_be_used_is_named(
    signed_stored: StoredRun, tmp_path: Path, changes: dict[str, object]
) -> None:
    with_signing(signed_stored, **changes)

    result = verify_run(signed_stored.write(tmp_path / "t.mcap"))

    assert [p for p, message in problems(result, C.CHECKPOINT)] == [RUN]
    assert problems(result, C.CHECKPOINT)[0][1].startswith("its signing key cannot be used")


def test_a_declared_key_with_stray_characters_cannot_be_used(
    signed_stored: StoredRun, tmp_path: Path
) -> None:
    encoded = signed_stored.messages[RUN].record["signing"]["public_key"]
    with_signing(signed_stored, public_key=encoded[:10] + "*" + encoded[10:])

    result = verify_run(signed_stored.write(tmp_path / "t.mcap"))

    assert [p for p, _ in problems(result, C.CHECKPOINT)] == [RUN]


def test_a_given_key_against_an_unusable_declared_key_is_named(
    signed_stored: StoredRun, tmp_path: Path
) -> None:
    with_signing(signed_stored, public_key="x")

    result = verify_run(signed_stored.write(tmp_path / "t.mcap"), public_key=KEY.public_key())

    found = problems(result, C.CHECKPOINT)
    assert found[1] == (
        RUN,
        f"the run declares signing an unusable key, not the key given ({signed_stored_key_id()})",
    )


def test_a_run_signed_under_its_own_key_name_verifies_with_the_key(tmp_path: Path) -> None:
    from audit import McapAuditSink
    from runtime.testing import ManualClock
    from tests.records import append_decisions, make_run_start

    path = tmp_path / "named.mcap"
    with McapAuditSink(path, signing_key=KEY, key_name="acme-audit", clock=ManualClock()) as sink:
        sink.open_run(make_run_start())
        append_decisions(sink, 2)
    note = notes_of(StoredRun.load(path))[-1]
    assert "\u2014 acme-audit " in note

    result = verify_run(path, public_key=KEY.public_key(), anchors=[note])

    assert result.ok, result.problems
    assert (result.signatures, result.anchors_matched) == (SignatureCheck.GIVEN_KEY, 1)
