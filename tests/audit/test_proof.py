"""Inclusion proofs (ADR 0015): built from real runs, checked without them, forgeries refused.

Runs are written by `McapAuditSink`, signed and unsigned; roots and audit
paths are recomputed by the independent RFC 6962 of `tests.audit.proofs`;
every rule of `audit._proof` is pinned by a proof that breaks it alone.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import string
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from hypothesis import given
from hypothesis import strategies as st

from audit import (
    MAX_AUDIT_PATH,
    MAX_PROOF_BYTES,
    PROOF_FORMAT,
    InclusionProof,
    ProofError,
    ProvenRecord,
    build_inclusion_proof,
    check_proof,
    load_proof,
    parse_proof,
)
from runtime import canonical_bytes, sha256_hex
from tests.audit.proofs import audit_path, chain, forge, mth, run_record, stored_records
from tests.records import approval, assessment, decision, write_run

DECISION_ID = "019b76da-a800-77db-8310-120029fa0dd1"
SIGNED_KEY = Ed25519PrivateKey.generate()
OTHER_KEY = Ed25519PrivateKey.generate()


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("proof-runs")
    unsigned, signed = base / "unsigned.mcap", base / "signed.mcap"
    # A checkpoint every 3 records: several checkpoints, so the choice among them shows.
    write_run(unsigned, decisions=4, checkpoint_every_records=3)
    write_run(signed, decisions=4, checkpoint_every_records=3, signing_key=SIGNED_KEY)
    return {"unsigned": unsigned, "signed": signed}


def decision_ids(path: Path) -> list[str]:
    return [
        json.loads(data)["decision_id"]
        for topic, data in stored_records(path)
        if topic == "/decisions"
    ]


@pytest.fixture(scope="module")
def proofs(runs: dict[str, Path]) -> dict[str, list[dict[str, Any]]]:
    return {
        name: [parse_proof(build_inclusion_proof(path, d).to_bytes()) for d in decision_ids(path)]
        for name, path in runs.items()
    }


def problems(document: Any, key: Ed25519PrivateKey | None = None) -> tuple[str, ...]:
    result = check_proof(document, None if key is None else key.public_key())
    assert result.ok == (not result.problems)
    return result.problems


def only(document: Any, needle: str, key: Ed25519PrivateKey | None = None) -> None:
    found = problems(document, key)
    assert len(found) == 1, found
    assert needle in found[0], found


# --- valid proofs of real runs ------------------------------------------------------------


@pytest.mark.parametrize("name", ["unsigned", "signed"])
def test_every_decision_of_a_real_run_has_a_valid_proof(
    runs: dict[str, Path], proofs: dict[str, list[dict[str, Any]]], name: str
) -> None:
    records = stored_records(runs[name])
    run_id = json.loads(records[0][1])["run_id"]
    for document, decision_id in zip(proofs[name], decision_ids(runs[name]), strict=True):
        result = check_proof(document)
        assert result.ok, result.problems
        assert result.decision_id == document["decision_id"] == decision_id
        seq = next(
            i
            for i, (topic, data) in enumerate(records)
            if topic == "/decisions" and json.loads(data)["decision_id"] == decision_id
        )
        assert result.leaf_index == seq
        assert result.verdict == json.loads(records[seq][1])["verdict"]
        assert result.run_id == run_id
        assert result.tree_size == document["tree_size"]
        assert result.summary == (
            f"valid: decision {decision_id} (verdict {result.verdict}) is record seq {seq} of"
            f" run {run_id}, under a checkpoint of {result.tree_size} records; {result.signature}"
        )


def test_roots_and_paths_match_an_independent_rfc_6962(
    runs: dict[str, Path], proofs: dict[str, list[dict[str, Any]]]
) -> None:
    for name, path in runs.items():
        data = [record for _, record in stored_records(path)]
        for document in proofs[name]:
            size = document["tree_size"]
            assert document["root_hash"] == mth(data[:size]).hex()
            for entry in document["records"]:
                index = entry["leaf_index"]
                assert entry["record"].encode() == data[index]
                assert entry["audit_path"] == [n.hex() for n in audit_path(index, data[:size])]


def test_the_first_checkpoint_covering_every_record_is_chosen(
    runs: dict[str, Path], proofs: dict[str, list[dict[str, Any]]]
) -> None:
    records = stored_records(runs["unsigned"])
    checkpoints = [json.loads(data) for topic, data in records if topic == "/checkpoints"]
    sizes = sorted(c["tree_size"] for c in checkpoints)
    assert len(sizes) >= 4
    chosen = set()
    for document in proofs["unsigned"]:
        last = max(entry["leaf_index"] for entry in document["records"])
        expected = min(size for size in sizes if size > last)
        assert document["tree_size"] == expected
        note = next(c["note"] for c in checkpoints if c["tree_size"] == expected)
        assert document["checkpoint_note"] == note
        chosen.add(expected)
    assert len(chosen) > 1  # not always the last one


def test_a_proof_holds_the_run_assessment_decision_and_approval(
    proofs: dict[str, list[dict[str, Any]]],
) -> None:
    pending, allowed = proofs["unsigned"][0], proofs["unsigned"][1]
    assert [e["role"] for e in pending["records"]] == ["run", "assessment", "decision", "approval"]
    assert [e["role"] for e in allowed["records"]] == ["run", "assessment", "decision"]
    records = [json.loads(e["record"]) for e in pending["records"]]
    assert records[3]["decision_sha256"] == sha256_hex(pending["records"][2]["record"].encode())
    assert records[2]["assessment_sha256"] == sha256_hex(pending["records"][1]["record"].encode())


def test_signature_outcomes_say_what_they_show(proofs: dict[str, list[dict[str, Any]]]) -> None:
    signed, unsigned = proofs["signed"][1], proofs["unsigned"][1]
    key_id = json.loads(signed["records"][0]["record"])["signing"]["key_id"]

    assert check_proof(signed, SIGNED_KEY.public_key()).signature == (
        f"signed by the public key given (key id {key_id}): authorship shown"
    )
    assert check_proof(signed).signature == (
        f"signed by the key the run itself declares (key id {key_id}), which shows"
        " consistency, not authorship: give --public-key to check who signed"
    )
    assert check_proof(unsigned).signature.startswith("the checkpoint is unsigned: ")
    assert "not who wrote them" in check_proof(unsigned).signature


def test_the_bytes_sort_keys_keep_non_ascii_and_end_in_a_newline(runs: dict[str, Path]) -> None:
    path = runs["unsigned"]
    data = build_inclusion_proof(path, decision_ids(path)[0]).to_bytes()

    assert data.endswith(b"}\n")
    assert "café".encode() in data  # the decision's reason, kept as UTF-8
    document = json.loads(data)
    assert list(document) == sorted(document)
    assert (
        data == (json.dumps(document, ensure_ascii=False, indent=2, sort_keys=True) + "\n").encode()
    )


# --- any single change is refused -----------------------------------------------------------


def _leaves(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path to a value in the document (containers included)."""
    found = [path]
    if isinstance(value, dict):
        for key in value:
            found += _leaves(value[key], (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += _leaves(item, (*path, index))
    return found


def _get(document: Any, path: tuple[Any, ...]) -> Any:
    for step in path:
        document = document[step]
    return document


def _set(document: Any, path: tuple[Any, ...], value: Any) -> None:
    _get(document, path[:-1])[path[-1]] = value


@st.composite
def _changed(draw: st.DrawFn, value: Any) -> Any:
    if type(value) is str:
        chars = list(value)
        kind = draw(st.sampled_from(["replace", "delete", "insert"] if chars else ["insert"]))
        at = draw(st.integers(0, max(len(chars) - 1, 0)))
        new = draw(st.sampled_from('0aAf+/=\n {}"\\é—'))
        if kind == "replace":
            if chars[at] == new:
                new = "1" if new != "1" else "2"
            chars[at] = new
        elif kind == "delete":
            del chars[at]
        else:
            chars.insert(at, new)
        return "".join(chars)
    if type(value) is int:
        return draw(
            st.one_of(
                st.integers(-3, 2**64).filter(lambda n: n != value),
                st.sampled_from([True, False, None, str(value), float(value)]),
            )
        )
    if type(value) is list:
        items = list(value)
        kind = draw(st.sampled_from(["drop", "duplicate", "swap", "add"] if items else ["add"]))
        if kind == "drop":
            del items[draw(st.integers(0, len(items) - 1))]
        elif kind == "duplicate":
            items.append(copy.deepcopy(items[draw(st.integers(0, len(items) - 1))]))
        elif kind == "swap" and len(items) > 1:
            i = draw(st.integers(0, len(items) - 2))
            items[i], items[i + 1] = items[i + 1], items[i]
        else:
            items.append("00" * 32)
        return items
    if type(value) is dict:
        items = dict(value)
        if items and draw(st.booleans()):
            del items[draw(st.sampled_from(sorted(items)))]
        else:
            items["extra"] = 1
        return items
    return draw(st.sampled_from(["x", 0, None, [], {}]))


def _is_dropped_approval(document: dict[str, Any], path: tuple[Any, ...], new: Any) -> bool:
    # A proof without its approval is a valid, smaller proof: it claims nothing about one.
    if path != ("records",) or len(new) != len(document["records"]) - 1:
        return False
    return [e.get("role") for e in new] == [
        e["role"] for e in document["records"] if e["role"] != "approval"
    ]


@given(data=st.data())
def test_any_single_change_to_any_field_is_refused(
    proofs: dict[str, list[dict[str, Any]]], data: st.DataObject
) -> None:
    name = data.draw(st.sampled_from(["unsigned", "signed"]))
    document = copy.deepcopy(data.draw(st.sampled_from(proofs[name])))
    path = data.draw(st.sampled_from(_leaves(document)[1:]))
    old = _get(document, path)
    new = data.draw(_changed(old))
    if new == old and type(new) is type(old):
        return  # a swap of a one-element list changes nothing
    if _is_dropped_approval(document, path, new):
        return
    _set(document, path, new)

    assert problems(document), (path, old, new)
    if name == "signed":
        assert problems(document, SIGNED_KEY), (path, old, new)


@pytest.mark.parametrize("name", ["unsigned", "signed"])
def test_the_right_key_is_needed_for_a_signed_proof(
    proofs: dict[str, list[dict[str, Any]]], name: str
) -> None:
    document = proofs[name][0]

    found = problems(document, OTHER_KEY)

    if name == "unsigned":
        assert found == (
            "a public key was given, but the run is unsigned: nothing shows who wrote it",
        )
    else:
        assert len(found) == 2, found
        assert found[0].startswith("the run declares the signing key ")
        assert "not the public key given" in found[0]
        assert found[1].startswith("the checkpoint signature does not verify: ")


# --- forged proofs: each rule alone ---------------------------------------------------------


def honest(
    *,
    signing_key: Ed25519PrivateKey | None = None,
    note_key: Ed25519PrivateKey | None = None,
    run: dict[str, Any] | None = None,
    with_approval: bool = True,
    **decision_changes: Any,
) -> tuple[list[bytes], dict[str, Any]]:
    """A small chained run and a valid proof of its decision (seq 2), built by `forge`."""
    records: list[dict[str, Any]] = [run or run_record(signing_key)]
    records.append(assessment(DECISION_ID))
    data = chain(records)
    d = decision(DECISION_ID, sha256_hex(data[1]), verdict="pending")
    d.update(decision_changes)
    records.append(d)
    data = chain(records)
    if with_approval:
        records.append(approval(DECISION_ID, sha256_hex(data[2])))
    records.append(
        {"schema": "ghost.seal/1", "stamp_ns": 9, "record_count": 9, "head_sha256": "c" * 64}
    )
    data = chain(records)
    roles = {"run": 0, "assessment": 1, "decision": 2}
    if with_approval:
        roles["approval"] = 3
    key = signing_key if note_key is None else note_key
    return data, forge(data, roles, decision_id=DECISION_ID, note_key=key)


def test_the_forger_builds_valid_proofs() -> None:
    assert problems(honest()[1]) == ()
    assert problems(honest(signing_key=SIGNED_KEY)[1], SIGNED_KEY) == ()
    assert problems(honest(with_approval=False)[1]) == ()


def test_a_decision_without_an_assessment_needs_none() -> None:
    records = [run_record(), decision(DECISION_ID, None)]
    data = chain(records)
    document = forge(data, {"run": 0, "decision": 1}, decision_id=DECISION_ID)
    assert problems(document) == ()

    records = [run_record(), assessment(DECISION_ID), decision(DECISION_ID, None)]
    data = chain(records)
    document = forge(data, {"run": 0, "assessment": 1, "decision": 2}, decision_id=DECISION_ID)
    only(document, "is not the one the decision's assessment_sha256 names")


def test_a_claimed_assessment_must_be_there() -> None:
    _, document = honest()
    del document["records"][1]
    only(document, "the decision names an assessment, and the proof holds none")


def test_the_assessment_must_be_of_the_same_decision() -> None:
    other = "019b76da-a800-77db-8310-120029fa0dd2"
    records = [run_record(), assessment(other)]
    data = chain(records)
    records.append(decision(DECISION_ID, sha256_hex(data[1])))
    data = chain(records)
    document = forge(data, {"run": 0, "assessment": 1, "decision": 2}, decision_id=DECISION_ID)
    only(document, "the assessment record is for another decision_id")


def test_the_decision_must_be_the_one_claimed() -> None:
    data, _ = honest()
    document = forge(
        data,
        {"run": 0, "assessment": 1, "decision": 2},
        decision_id="019b76da-a800-77db-8310-120029fa0dd2",
    )
    only(document, "the decision record's decision_id is not the proof's decision_id")


def test_the_approval_must_link_to_the_decision() -> None:
    records = [run_record(), assessment(DECISION_ID)]
    data = chain(records)
    records.append(decision(DECISION_ID, sha256_hex(data[1])))
    records.append(approval(DECISION_ID, "d" * 64))
    records.append(approval("019b76da-a800-77db-8310-120029fa0dd2", sha256_hex(chain(records)[2])))
    data = chain(records)
    roles = {"run": 0, "assessment": 1, "decision": 2}
    only(
        forge(data, {**roles, "approval": 3}, decision_id=DECISION_ID),
        "the approval record's decision_sha256 is not the decision's address",
    )
    only(
        forge(data, {**roles, "approval": 4}, decision_id=DECISION_ID),
        "the approval record is for another decision_id",
    )


def test_the_note_must_be_of_this_run() -> None:
    data, _ = honest()
    roles = {"run": 0, "assessment": 1, "decision": 2, "approval": 3}
    document = forge(
        data, roles, decision_id=DECISION_ID, run_id="019b76da-a800-757d-b7da-f716e732c89c"
    )
    only(document, "the checkpoint note's origin is not the run's (ghost.run/<run_id>)")


def test_a_proof_for_a_smaller_tree_is_valid_when_it_covers_the_records() -> None:
    data, _ = honest()
    roles = {"run": 0, "assessment": 1, "decision": 2, "approval": 3}
    assert problems(forge(data, roles, decision_id=DECISION_ID, tree_size=4)) == ()
    # A record beyond the tree cannot be in it.
    document = forge(data, roles, decision_id=DECISION_ID, tree_size=3)
    document["records"][3]["audit_path"] = []
    only(
        document,
        "the approval record's audit path does not lead from leaf 3 to root_hash"
        " in a tree of 3 leaves",
    )


def test_an_unsigned_run_has_an_unsigned_note() -> None:
    _, document = honest(note_key=SIGNED_KEY)
    only(document, "the checkpoint note is signed, but the run declares no signing key")


def test_a_signed_run_has_exactly_its_one_signature() -> None:
    document = honest(signing_key=SIGNED_KEY)[1]
    note = document["checkpoint_note"]
    text = note[: note.index("\n\n") + 1]
    signature = note[note.index("\n\n") + 1 :]

    found = problems({**document, "checkpoint_note": text})
    assert found == (
        "the checkpoint note carries 0 signatures, not the run key's one",
        "the checkpoint signature does not verify: no signature by a known key (known: "
        + json.loads(document["records"][0]["record"])["signing"]["key_name"]
        + ")",
    )
    twice = note + signature[1:]
    only({**document, "checkpoint_note": twice}, "carries 2 signatures, not the run key's one")


def test_a_signature_by_another_key_under_the_run_key_name_is_refused() -> None:
    data, _ = honest(signing_key=SIGNED_KEY)
    forged = forge(
        data,
        {"run": 0, "assessment": 1, "decision": 2, "approval": 3},
        decision_id=DECISION_ID,
        note_key=OTHER_KEY,
    )
    found = problems(forged)
    assert len(found) == 1
    assert found[0].startswith("the checkpoint signature does not verify: ")


def test_the_declared_key_id_must_be_the_declared_keys() -> None:
    run = run_record(SIGNED_KEY)
    run["signing"]["key_id"] = "e" * 64
    _, document = honest(run=run, note_key=SIGNED_KEY)
    only(document, "the run's signing key_id is not the SHA-256 of its public_key")
    only(document, "the run's signing key_id is not the SHA-256 of its public_key", SIGNED_KEY)


def test_a_declared_key_that_is_not_canonical_base64_is_no_key() -> None:
    run = run_record(SIGNED_KEY)
    key = run["signing"]["public_key"]
    # The last character before '=' carries 2 stray bits: set one, and base64 is not
    # canonical. (Set in the alphabet's index: flipping the ASCII code of "A" gives "@".)
    alphabet = string.ascii_uppercase + string.ascii_lowercase + string.digits + "+/"
    stray = alphabet[alphabet.index(key[42]) | 1]
    run["signing"]["public_key"] = key[:42] + stray + "="
    _, document = honest(run=run, note_key=SIGNED_KEY)
    only(document, "the run's signing public_key is not canonical base64")
    only(document, "the run's signing public_key is not canonical base64", SIGNED_KEY)
    assert check_proof(document).signature == (
        "the checkpoint signature was not checked: the run's declared key is unreadable"
    )


# --- the document's shape ---------------------------------------------------------------------


def valid() -> dict[str, Any]:
    return honest()[1]


def test_not_an_object() -> None:
    result = check_proof([])  # type: ignore[arg-type]
    assert result.problems[0] == "the proof is not a JSON object"
    assert (result.decision_id, result.verdict, result.run_id) == (None, None, None)
    assert (result.leaf_index, result.tree_size, result.signature) == (None, None, "")


def test_missing_and_unknown_fields() -> None:
    document = valid()
    del document["root_hash"], document["tree_size"]
    document["zz"] = 1
    document["extra"] = 2
    found = problems(document)
    assert found == (
        "the proof lacks the field(s) root_hash, tree_size",
        "the proof has unknown field(s) extra, zz",
        "the checkpoint note is for 5 leaves, not tree_size",
        "the checkpoint note's root is not root_hash",
    )


def test_the_format_must_be_this_one() -> None:
    only(
        {**valid(), "format": "ghost.inclusion-proof/2"},
        f"the proof's format is not {PROOF_FORMAT!r}",
    )


@pytest.mark.parametrize("value", [1, None, ["x"], True])
def test_decision_id_must_be_a_string(value: object) -> None:
    found = problems({**valid(), "decision_id": value})
    assert found[0] == "the proof's decision_id is not a str"


def test_a_missing_decision_id_is_one_problem() -> None:
    document = valid()
    del document["decision_id"]
    found = problems(document)
    assert found[0] == "the proof lacks the field(s) decision_id"
    assert found[1] == "the decision record's decision_id is not the proof's decision_id"
    assert len(found) == 2


@pytest.mark.parametrize("value", [0, -1, True, 2**63, "5", 5.0])
def test_tree_size_must_be_a_positive_int64(value: object) -> None:
    found = problems({**valid(), "tree_size": value})
    assert found[0] == "tree_size is not an integer from 1 to 2**63 - 1"


def test_tree_size_bounds_are_inclusive() -> None:
    # 2**63 - 1 is a size (the note says otherwise: one problem, not two).
    found = problems({**valid(), "tree_size": 2**63 - 1})
    assert not any(p.startswith("tree_size is not") for p in found)


@pytest.mark.parametrize("value", ["A" * 64, "a" * 63, "a" * 65, "g" * 64, 5, ["a" * 64]])
def test_root_hash_must_be_lowercase_hex(value: object) -> None:
    found = problems({**valid(), "root_hash": value})
    assert found[0] == "root_hash is not a SHA-256 hash in lowercase hex"
    assert found[1] == "the checkpoint note's root is not root_hash"


@pytest.mark.parametrize("value", [{}, "x", 5])
def test_records_must_be_an_array(value: object) -> None:
    found = problems({**valid(), "records": value})
    assert found == ("records is not an array",)


def test_records_need_a_run_and_a_decision() -> None:
    found = problems({**valid(), "records": []})
    assert found == ("records holds no run record", "records holds no decision record")


def test_records_hold_at_most_four() -> None:
    document = valid()
    document["records"] += [5, 6]
    found = problems(document)
    assert found == ("records[4] is not an object", "records holds more than 4 records")


def test_a_role_appears_once() -> None:
    document = valid()
    document["records"].append(copy.deepcopy(document["records"][0]))
    del document["records"][3]
    found = problems(document)
    assert found == ("records[3] is a second run record",)


def test_records_are_in_seq_order() -> None:
    document = valid()
    records = document["records"]
    records[2], records[3] = records[3], records[2]
    only(document, "records are not in the order run, assessment, decision, approval")


@pytest.mark.parametrize("role", ["seal", "", 1, None, "Run"])
def test_the_role_is_one_of_four(role: object) -> None:
    document = valid()
    document["records"][3]["role"] = role
    only(document, "records[3]'s role is not one of run, assessment, decision, approval")


def test_record_fields_are_exact() -> None:
    document = valid()
    del document["records"][3]["leaf_index"]
    document["records"][3]["x"] = 1
    found = problems(document)
    assert found == (
        "records[3] lacks the field(s) leaf_index",
        "records[3] has unknown field(s) x",
    )


@pytest.mark.parametrize("value", [-1, True, 2**63, "3", None])
def test_leaf_index_is_a_non_negative_int64(value: object) -> None:
    document = valid()
    document["records"][3]["leaf_index"] = value
    found = problems(document)
    assert (
        "the approval record (records[3])'s leaf_index is not an integer from 0 to 2**63 - 1"
        in found
    )


def test_a_leaf_index_must_be_the_seq() -> None:
    document = valid()
    document["records"][3]["leaf_index"] = 2
    only(document, "the approval record (records[3]) has seq 3, but leaf_index 2")


@pytest.mark.parametrize("value", ["x", {}, None])
def test_the_audit_path_is_an_array(value: object) -> None:
    document = valid()
    document["records"][3]["audit_path"] = value
    only(
        document,
        "the approval record (records[3])'s audit_path is not an array of at most 64 hashes",
    )


def test_the_audit_path_holds_at_most_64_hashes() -> None:
    document = valid()
    document["records"][3]["audit_path"] = ["00" * 32] * (MAX_AUDIT_PATH + 1)
    only(document, "audit_path is not an array of at most 64 hashes")
    document["records"][3]["audit_path"] = ["00" * 32] * MAX_AUDIT_PATH
    only(document, "the approval record's audit path does not lead from leaf 3")


def test_every_audit_path_element_is_a_hash() -> None:
    document = valid()
    path = document["records"][3]["audit_path"]
    path[1] = path[1].upper()
    only(document, "the approval record (records[3])'s audit_path[1] is not a SHA-256 hash")


def test_a_wrong_audit_path_element_breaks_the_proof() -> None:
    document = valid()
    document["records"][3]["audit_path"][0] = "00" * 32
    only(
        document,
        "the approval record's audit path does not lead from leaf 3 to root_hash"
        " in a tree of 5 leaves",
    )


@pytest.mark.parametrize("value", [5, None, {}, b"x"])
def test_the_record_is_a_string(value: object) -> None:
    document = valid()
    document["records"][3]["record"] = value
    only(document, "the approval record (records[3])'s record is not a str")


def test_a_record_with_a_lone_surrogate_is_not_utf8() -> None:
    document = valid()
    document["records"][3]["record"] = '{"x":"\ud800"}'
    only(
        document,
        "the approval record (records[3]) is not valid UTF-8 text (it holds a lone surrogate)",
    )


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("{", "the message is not valid JSON"),
        ("[1]", "the message is JSON an array, not an object"),
        ('{"a":1,"a":1}', "the message is not strict JSON"),
        ('{"a":NaN}', "the message is not strict JSON"),
    ],
)
def test_the_record_is_a_strict_json_object(text: str, needle: str) -> None:
    document = valid()
    document["records"][3]["record"] = text
    only(document, f"the approval record (records[3]): {needle}")


def test_the_record_is_canonical() -> None:
    document = valid()
    record = json.loads(document["records"][3]["record"])
    document["records"][3]["record"] = json.dumps(record, sort_keys=True)
    only(document, "the approval record (records[3]) is not in canonical form (SPEC §5)")
    document["records"][3]["record"] = '{"a":1.5}'
    only(document, "the approval record (records[3]) is not in canonical form (SPEC §5)")


def test_the_record_has_its_role_schema() -> None:
    document = valid()
    document["records"][3]["role"] = "assessment"
    document["records"][1]["role"] = "approval"
    found = problems(document)
    assert found == (
        "the approval record (records[1]) is not a ghost.approval/1 record",
        "the assessment record (records[3]) is not a ghost.assessment/1 record",
        "the decision names an assessment, and the proof holds none",
    )


def test_the_record_matches_its_schema() -> None:
    document = valid()
    record = json.loads(document["records"][3]["record"])
    record["wait_ns"] = -1
    record["outcome"] = "maybe"
    record["approver"] = 5
    record["final_verdict"] = 1
    document["records"][3]["record"] = canonical_bytes(record).decode()
    found = problems(document)
    assert len(found) == 1
    assert found[0].startswith("the approval record (records[3]) breaks its schema: $.approver: ")
    assert found[0].count("; ") == 2  # three schema problems named, not four


@pytest.mark.parametrize("value", [5, None, b"x"])
def test_the_note_is_a_string(value: object) -> None:
    only({**valid(), "checkpoint_note": value}, "checkpoint_note is not a string")


def test_a_note_that_is_no_checkpoint_note() -> None:
    only({**valid(), "checkpoint_note": "x\n"}, "checkpoint_note is not a checkpoint note: ")


def test_the_note_names_the_tree_size() -> None:
    document = valid()
    note = document["checkpoint_note"].replace("\n5\n", "\n4\n")
    only(
        {**document, "checkpoint_note": note}, "the checkpoint note is for 4 leaves, not tree_size"
    )


def test_an_unparsable_note_skips_the_signature_check_but_is_a_problem() -> None:
    _, document = honest(signing_key=SIGNED_KEY)
    only({**document, "checkpoint_note": "nonsense"}, "checkpoint_note is not a checkpoint note")
    only({**document, "checkpoint_note": 7}, "checkpoint_note is not a string")


def test_the_invalid_summary_counts_problems() -> None:
    one = check_proof({**valid(), "format": "x"})
    assert one.summary == "invalid: 1 problem; the proof shows nothing"
    two = check_proof({**valid(), "format": "x", "zz": 5})
    assert two.summary == "invalid: 2 problems; the proof shows nothing"
    assert not two.ok


# --- reading a proof file -----------------------------------------------------------------------


def test_parse_proof_reads_a_proof() -> None:
    document = valid()
    assert parse_proof(json.dumps(document).encode()) == document


@pytest.mark.parametrize(
    ("data", "needle"),
    [
        (b"\xff", "the file is not strict JSON: not UTF-8"),
        (b'{"a":1,"a":2}', "the file is not strict JSON: the key 'a' appears twice"),
        (b'{"a":NaN}', "the file is not strict JSON"),
        (b"{", "the file is not JSON (Expecting property name"),
        (b'{"a":' + b"1" * 5000 + b"}", "the file cannot be parsed as JSON (ValueError)"),
        (b"[" * 100_000 + b"]" * 100_000, "the file cannot be parsed as JSON (RecursionError)"),
        (b"[]", "the file is JSON, but not an object"),
        (b'{"format":"ghost.inclusion-proof/2"}', "the object has no field format = "),
        (b"{}", "the object has no field format = 'ghost.inclusion-proof/1'"),
    ],
)
def test_parse_proof_refuses_what_is_not_a_proof(data: bytes, needle: str) -> None:
    with pytest.raises(ProofError) as caught:
        parse_proof(data)
    assert needle in caught.value.problem
    assert caught.value.path is None
    assert str(caught.value).startswith("no inclusion proof: ")


def test_parse_proof_bounds_the_size() -> None:
    body = b'{"format":"ghost.inclusion-proof/1","pad":"'
    exact = body + b"x" * (MAX_PROOF_BYTES - len(body) - 2) + b'"}'
    assert len(exact) == MAX_PROOF_BYTES
    assert parse_proof(exact)["format"] == PROOF_FORMAT
    with pytest.raises(ProofError, match="larger than 1048576 bytes"):
        parse_proof(exact + b" ")


def test_load_proof_reads_and_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "proof.json"
    path.write_bytes(json.dumps(valid()).encode())
    assert load_proof(path) == valid() | {"checkpoint_note": load_proof(path)["checkpoint_note"]}

    path.write_bytes(b"[]")
    with pytest.raises(ProofError) as caught:
        load_proof(path)
    assert caught.value.path == path
    assert str(caught.value) == f"{path}: no inclusion proof: the file is JSON, but not an object"


def test_load_proof_reads_no_more_than_the_bound(tmp_path: Path) -> None:
    path = tmp_path / "big.json"
    path.write_bytes(b" " * (MAX_PROOF_BYTES + 10))
    with pytest.raises(ProofError, match="larger than"):
        load_proof(path)


@pytest.mark.parametrize("kind", ["missing", "directory"])
def test_load_proof_of_an_unreadable_file(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "proof.json"
    if kind == "directory":
        path.mkdir()
    with pytest.raises(ProofError) as caught:
        load_proof(path)
    assert caught.value.problem.startswith("it cannot be read (")
    assert caught.value.path == path


# --- boundaries and absent fields ----------------------------------------------------------------


def test_each_absent_top_level_field_is_named_once() -> None:
    for field in ("format", "records", "checkpoint_note"):
        document = valid()
        del document[field]
        found = problems(document)
        assert found[0] == f"the proof lacks the field(s) {field}"
        assert not any(f"{field} is not" in problem for problem in found[1:]), found
    document = valid()
    del document["format"]
    assert problems(document) == ("the proof lacks the field(s) format",)
    document = valid()
    del document["checkpoint_note"]
    assert problems(document) == ("the proof lacks the field(s) checkpoint_note",)


@pytest.mark.parametrize("field", ["role", "leaf_index", "record", "audit_path"])
def test_each_absent_record_field_is_named_once(field: str) -> None:
    document = valid()
    del document["records"][3][field]
    found = problems(document)
    assert found[0] == f"records[3] lacks the field(s) {field}"
    if field == "role":
        assert found[1] == "records[3]'s role is not one of run, assessment, decision, approval"
        assert len(found) == 2
    else:
        assert found == (f"records[3] lacks the field(s) {field}",)


def test_unknown_field_names_are_clipped() -> None:
    document = valid()
    document["k" * 50] = 1
    assert problems(document) == (f"the proof has unknown field(s) {'k' * 40}",)


def test_a_tree_of_one_leaf_is_a_size() -> None:
    found = problems({**valid(), "tree_size": 1})
    assert "tree_size is not an integer from 1 to 2**63 - 1" not in found
    assert found  # but no proof of two records fits it


def test_the_largest_leaf_index_is_an_index() -> None:
    document = valid()
    document["records"][3]["leaf_index"] = 2**63 - 1
    only(document, "the approval record (records[3]) has seq 3, but leaf_index 9223372036854775807")


def test_an_unreadable_file_names_the_os_reason(tmp_path: Path) -> None:
    with pytest.raises(ProofError) as caught:
        load_proof(tmp_path / "missing.json")
    assert caught.value.problem == "it cannot be read (No such file or directory)"


def test_the_run_record_is_leaf_0() -> None:
    # A /run record anywhere else is one no honest writer makes, even under a real key.
    first = canonical_bytes({**run_record(), "seq": 0, "prev_sha256": None, "run_id": "x"})
    records = [run_record(), decision(DECISION_ID, None)]
    late = canonical_bytes({**records[0], "seq": 1, "prev_sha256": None})
    d = canonical_bytes({**records[1], "seq": 2, "prev_sha256": sha256_hex(late)})
    document = forge([first, late, d], {"run": 1, "decision": 2}, decision_id=DECISION_ID)
    only(document, "the run record is leaf 1; a run's /run record is seq 0")


def test_results_and_proofs_are_frozen(proofs: dict[str, list[dict[str, Any]]]) -> None:
    result = check_proof(proofs["unsigned"][0])
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.problems = ("forged",)  # type: ignore[misc]
    proof = honest_proof()
    with pytest.raises(dataclasses.FrozenInstanceError):
        proof.tree_size = 1  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        proof.records[0].leaf_index = 1  # type: ignore[misc]


def honest_proof() -> InclusionProof:
    return InclusionProof(
        decision_id=DECISION_ID,
        tree_size=2,
        root_hash=b"\x00" * 32,
        checkpoint_note="",
        records=(ProvenRecord(role="run", leaf_index=0, data=b"{}", audit_path=()),),
    )
