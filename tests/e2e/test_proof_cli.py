"""``ghost keygen``, ``ghost prove`` and ``ghost verify-proof`` as a user runs them.

Real subprocesses, real key files, real runs written by `McapAuditSink`
(signed with the key ``keygen`` wrote, and unsigned). ``verify-proof``: 0
valid, 3 invalid (one line per problem, then a summary), 1 unreadable or not
a proof, 2 usage; never a traceback.
"""

from __future__ import annotations

import json
import stat
import subprocess
from pathlib import Path

import pytest

from audit import load_private_key, load_public_key, read_run
from tests.analysis.stored_run import StoredRun
from tests.e2e.test_cli import assert_one_error_line, ghost
from tests.records import write_run


def lines(result: subprocess.CompletedProcess[bytes]) -> list[str]:
    return result.stdout.decode().splitlines()


def decision_ids(path: Path) -> list[str]:
    return [r.record["decision_id"] for r in read_run(path).records_on("/decisions") if r.record]


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("keys")
    result = ghost("keygen", "--out", base / "signer", cwd=base)
    assert result.returncode == 0, result.stderr
    return base / "signer"


@pytest.fixture(scope="module")
def signed_run(keys: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("signed") / "run.mcap"
    write_run(path, decisions=3, signing_key=load_private_key(f"{keys}.key"))
    return path


@pytest.fixture(scope="module")
def unsigned_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("unsigned") / "run.mcap"
    write_run(path, decisions=3)
    return path


def prove(run: Path, tmp_path: Path, index: int = 1) -> Path:
    out = tmp_path / f"proof-{index}.json"
    result = ghost(
        "prove", "--mcap", run, "--decision", decision_ids(run)[index], "--out", out, cwd=tmp_path
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr == b""
    return out


# --- keygen ---------------------------------------------------------------------------------


def test_keygen_writes_a_usable_pair(tmp_path: Path) -> None:
    result = ghost("keygen", "--out", tmp_path / "k", cwd=tmp_path)

    assert result.returncode == 0, result.stderr
    assert result.stderr == b""
    private, public = tmp_path / "k.key", tmp_path / "k.pub"
    assert stat.S_IMODE(private.stat().st_mode) == 0o600
    assert private.read_bytes().startswith(b"-----BEGIN PRIVATE KEY-----")
    assert public.read_bytes().startswith(b"-----BEGIN PUBLIC KEY-----")
    pair = load_private_key(private)
    assert pair.public_key() == load_public_key(public)
    out = lines(result)
    assert out[0] == f"private key: {private} (mode 0600: keep it secret; the sink signs with it)"
    assert out[1] == f"public key: {public} (give it to auditors: ghost verify --public-key)"
    assert out[2].startswith("key id: ")
    assert len(out[2]) == len("key id: ") + 64
    assert out[3] == f"key name: ghost/{out[2][len('key id: ') :][:16]}"


def test_keygen_never_replaces_a_file(tmp_path: Path) -> None:
    (tmp_path / "k.pub").write_bytes(b"mine")

    result = ghost("keygen", "--out", tmp_path / "k", cwd=tmp_path)

    assert result.returncode == 1
    assert_one_error_line(result, f"cannot write {tmp_path / 'k.pub'}", "already exists")
    assert (tmp_path / "k.pub").read_bytes() == b"mine"
    assert not (tmp_path / "k.key").exists()


def test_keygen_into_a_missing_directory_fails_cleanly(tmp_path: Path) -> None:
    result = ghost("keygen", "--out", tmp_path / "no" / "k", cwd=tmp_path)

    assert result.returncode == 1
    assert_one_error_line(result, "cannot be created")


def test_keygen_needs_out(tmp_path: Path) -> None:
    result = ghost("keygen", cwd=tmp_path)

    assert result.returncode == 2
    assert b"--out" in result.stderr


# --- prove and verify-proof: valid ------------------------------------------------------------


def test_a_signed_proof_verifies_with_the_auditors_key(
    signed_run: Path, keys: Path, tmp_path: Path
) -> None:
    proof = prove(signed_run, tmp_path)

    result = ghost("verify-proof", proof, "--public-key", f"{keys}.pub", cwd=tmp_path)

    assert result.returncode == 0, result.stdout
    assert result.stderr == b""
    (summary,) = lines(result)
    assert summary.startswith(f"{proof}: valid: decision {decision_ids(signed_run)[1]} ")
    assert summary.endswith("): authorship shown")


def test_without_a_key_a_signed_proof_shows_consistency_not_authorship(
    signed_run: Path, tmp_path: Path
) -> None:
    proof = prove(signed_run, tmp_path, index=0)

    result = ghost("verify-proof", proof, cwd=tmp_path)

    assert result.returncode == 0, result.stdout
    (summary,) = lines(result)
    assert "consistency, not authorship: give --public-key to check who signed" in summary


def test_prove_prints_what_the_proof_shows(unsigned_run: Path, tmp_path: Path) -> None:
    out = tmp_path / "p.json"
    decision_id = decision_ids(unsigned_run)[2]

    result = ghost(
        "prove", "--mcap", unsigned_run, "--decision", decision_id, "--out", out, cwd=tmp_path
    )

    assert result.returncode == 0, result.stderr
    (summary,) = lines(result)
    assert summary.startswith(f"{out}: valid: decision {decision_id} (verdict allow) is record seq")
    assert json.loads(out.read_bytes())["decision_id"] == decision_id


def test_an_unsigned_proof_is_valid_and_says_it_is_unsigned(
    unsigned_run: Path, tmp_path: Path
) -> None:
    proof = prove(unsigned_run, tmp_path)

    result = ghost("verify-proof", proof, cwd=tmp_path)

    assert result.returncode == 0, result.stdout
    assert "the checkpoint is unsigned" in lines(result)[0]


# --- verify-proof: invalid (3) ------------------------------------------------------------------


def test_an_unsigned_proof_with_a_public_key_is_invalid(
    unsigned_run: Path, keys: Path, tmp_path: Path
) -> None:
    proof = prove(unsigned_run, tmp_path)

    result = ghost("verify-proof", proof, "--public-key", f"{keys}.pub", cwd=tmp_path)

    assert result.returncode == 3
    assert lines(result) == [
        "problem: a public key was given, but the run is unsigned: nothing shows who wrote it",
        f"{proof}: invalid: 1 problem; the proof shows nothing",
    ]


def test_a_proof_under_another_key_is_invalid(signed_run: Path, tmp_path: Path) -> None:
    proof = prove(signed_run, tmp_path)
    assert ghost("keygen", "--out", tmp_path / "other", cwd=tmp_path).returncode == 0

    result = ghost("verify-proof", proof, "--public-key", tmp_path / "other.pub", cwd=tmp_path)

    assert result.returncode == 3
    *problems, summary = lines(result)
    assert problems[0].startswith("problem: the run declares the signing key ")
    assert summary == f"{proof}: invalid: {len(problems)} problems; the proof shows nothing"


def test_a_flipped_verdict_is_invalid(signed_run: Path, keys: Path, tmp_path: Path) -> None:
    proof = prove(signed_run, tmp_path)
    document = json.loads(proof.read_bytes())
    decision = document["records"][2]
    decision["record"] = decision["record"].replace('"verdict":"allow"', '"verdict":"deny"')
    proof.write_text(json.dumps(document))

    result = ghost("verify-proof", proof, "--public-key", f"{keys}.pub", cwd=tmp_path)

    assert result.returncode == 3
    assert lines(result)[0] == (
        "problem: the decision record's audit path does not lead from leaf"
        f" {decision['leaf_index']} to root_hash in a tree of {document['tree_size']} leaves"
    )
    assert "Traceback" not in result.stderr.decode()


def test_odd_types_are_problems_not_tracebacks(unsigned_run: Path, tmp_path: Path) -> None:
    proof = prove(unsigned_run, tmp_path)
    document = json.loads(proof.read_bytes())
    document["tree_size"] = 2**70
    document["records"][0]["audit_path"] = {"x": [1.5]}
    document["records"][1] = "\u001b[31m"
    proof.write_text(json.dumps(document))

    result = ghost("verify-proof", proof, cwd=tmp_path)

    assert result.returncode == 3
    assert result.stderr == b""
    out = lines(result)
    assert "problem: tree_size is not an integer from 1 to 2**63 - 1" in out
    assert "problem: records[1] is not an object" in out
    assert "\x1b" not in result.stdout.decode()


# --- 1: not a proof, unreadable; 2: usage ---------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        (b"[]", "the file is JSON, but not an object"),
        (b'{"a":NaN}', "not strict JSON"),
        (b'{"format":"x"}', "the object has no field format"),
        (b"\x00\xff", "not strict JSON: not UTF-8"),
        (b'{"n":' + b"9" * 10_000 + b"}", "cannot be parsed as JSON (ValueError)"),
        (b" " * (1024 * 1024 + 1), "larger than 1048576 bytes"),
    ],
)
def test_what_is_not_a_proof_exits_1(content: bytes, needle: str, tmp_path: Path) -> None:
    path = tmp_path / "proof.json"
    path.write_bytes(content)

    result = ghost("verify-proof", path, cwd=tmp_path)

    assert result.returncode == 1
    assert_one_error_line(result, f"cannot use {path}: ", needle)


@pytest.mark.parametrize("kind", ["missing", "directory"])
def test_an_unreadable_proof_exits_1(kind: str, tmp_path: Path) -> None:
    path = tmp_path / "proof.json"
    if kind == "directory":
        path.mkdir()

    result = ghost("verify-proof", path, cwd=tmp_path)

    assert result.returncode == 1
    assert_one_error_line(result, "it cannot be read")


def test_an_unusable_public_key_exits_1(unsigned_run: Path, tmp_path: Path) -> None:
    proof = prove(unsigned_run, tmp_path)
    key = tmp_path / "key.pem"
    key.write_bytes(b"not a key")

    result = ghost("verify-proof", proof, "--public-key", key, cwd=tmp_path)

    assert result.returncode == 1
    assert_one_error_line(result, "it is not a PEM public key")


def test_verify_proof_needs_a_proof(tmp_path: Path) -> None:
    result = ghost("verify-proof", cwd=tmp_path)

    assert result.returncode == 2
    assert b"PROOF.json" in result.stderr


# --- prove: what cannot be proved ----------------------------------------------------------------


def test_prove_a_decision_the_run_does_not_hold(unsigned_run: Path, tmp_path: Path) -> None:
    out = tmp_path / "p.json"

    result = ghost(
        "prove", "--mcap", unsigned_run, "--decision", "nope", "--out", out, cwd=tmp_path
    )

    assert result.returncode == 1
    assert_one_error_line(
        result, "cannot prove decision 'nope' in ", "the run holds no decision with decision_id"
    )
    assert not out.exists()


def test_prove_never_replaces_a_file(unsigned_run: Path, tmp_path: Path) -> None:
    out = tmp_path / "p.json"
    out.write_bytes(b"mine")
    decision_id = decision_ids(unsigned_run)[0]

    result = ghost(
        "prove", "--mcap", unsigned_run, "--decision", decision_id, "--out", out, cwd=tmp_path
    )

    assert result.returncode == 1
    assert_one_error_line(result, f"will not replace {out}: it already exists")
    assert out.read_bytes() == b"mine"


def test_prove_into_a_missing_directory(unsigned_run: Path, tmp_path: Path) -> None:
    out = tmp_path / "no" / "p.json"
    decision_id = decision_ids(unsigned_run)[0]

    result = ghost(
        "prove", "--mcap", unsigned_run, "--decision", decision_id, "--out", out, cwd=tmp_path
    )

    assert result.returncode == 1
    assert_one_error_line(result, f"cannot write {out}: ")


def test_prove_from_a_missing_run(tmp_path: Path) -> None:
    result = ghost(
        "prove",
        "--mcap",
        tmp_path / "x.mcap",
        "--decision",
        "d",
        "--out",
        tmp_path / "p",
        cwd=tmp_path,
    )

    assert result.returncode == 1
    assert_one_error_line(result, "cannot read ")


def test_prove_refuses_a_run_whose_records_disagree_with_its_checkpoint(
    unsigned_run: Path, tmp_path: Path
) -> None:
    stored = StoredRun.load(unsigned_run)
    stored.edit(stored.index("/decisions", 1), verdict="deny")
    edited = stored.write(tmp_path / "edited.mcap")
    out = tmp_path / "p.json"

    result = ghost(
        "prove", "--mcap", edited, "--decision", decision_ids(edited)[1], "--out", out, cwd=tmp_path
    )

    assert result.returncode == 3
    assert result.stderr == b""
    *problems, summary = lines(result)
    assert "problem: the checkpoint note's root is not root_hash" in problems
    assert summary.startswith(f"{edited}: no valid proof of decision ")
    assert not out.exists()


def test_prove_needs_every_option(tmp_path: Path) -> None:
    result = ghost("prove", "--mcap", "x", "--decision", "d", cwd=tmp_path)

    assert result.returncode == 2
    assert b"--out" in result.stderr
