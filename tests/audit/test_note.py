"""C2SP signed notes and tlog checkpoints, byte for byte.

The reference is Go's ``golang.org/x/mod/sumdb/note`` (commit
fe2ec04f7c3c3aa6fad97631aafcff6e49e2d1db, BSD-3-Clause): the ``GO_NOTE_*``
vectors are what its ``note.Sign`` wrote for ghost checkpoint texts, with
keys from the seeds of ``tests/audit/test_signing.py`` and roots that
``golang.org/x/mod/sumdb/tlog`` computed; the PeterNeumann note is the one
in its documentation; the example.com/foo note is C2SP's (c2sp.org/signed-note).
Every signature is also checked with `cryptography` alone.
"""

from __future__ import annotations

import base64
import dataclasses
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from hypothesis import given
from hypothesis import strategies as st

from audit import (
    Checkpoint,
    Note,
    NoteError,
    NoteSignature,
    NoteSigner,
    NoteVerifier,
    format_note,
    leaf_hash,
    make_checkpoint_note,
    parse_checkpoint,
    parse_checkpoint_note,
    parse_note,
    tree_root,
    verify_note,
)
from audit._note import MAX_NOTE_BYTES, MAX_NOTE_SIGNATURES
from runtime import AuditError

RUN_ID = "01234567-89ab-7def-8123-456789abcdef"
KEY0 = Ed25519PrivateKey.from_private_bytes(
    bytes.fromhex("3e6281614418bc30164aefd586b5929c90263468dd276b3b8bebc1671eb7c98d")
)
KEY1 = Ed25519PrivateKey.from_private_bytes(
    bytes.fromhex("5d9176a81a710063907b1b94b8542ec3e9c6d23c640408be5ca7c5f9d1a59ac4")
)
GO_LEAVES = [b""] + [f"ghost leaf {i}".encode() for i in range(1, 64)]
_ORIGIN = f"ghost.run/{RUN_ID}\n"
_SIGNER0 = "\n— ghost/40cec4106885ee49 "
GO_NOTES = {
    1: _ORIGIN + "1\nbjQLnP+zepicpUTmu3gKLHiQHT+zNzh2hRGjBhevoB0=\n" + _SIGNER0
    + "KXr+q4IlvGCEqZQnkMw1oTCL+dpNmcDFoLLkKmJxqI2M/8p+8X2j564zY8sK"
    + "+dgblpcKUtt2zSiiYAZhsd5//ZCnBAs=\n",
    2: _ORIGIN + "2\nHX1y/SAlR5hngnFg61Gqrhivv5WILHvMLGWihZ2+bpc=\n" + _SIGNER0
    + "KXr+q2k2twV5C8WRcqYkFHcz/CM3Ql9wqcqTNys8cvvlhYY/Z32aG0ZPjS63"
    + "FU37pULboxECJ6TydR3FshpWGzCznAo=\n",
    13: _ORIGIN + "13\npCBDk5i/d/2qI8FJlnyyBbRBJnaOiUQTf4IblUr2OLg=\n" + _SIGNER0
    + "KXr+q9rtHzYc6aq6p6DEJiCK7orLZ9auooUb1A0K01tm9ecg8q+x2V4jPKTy"
    + "53+tCgkt8Orl94mp56iSCBVbE71RzAQ=\n",
    64: _ORIGIN + "64\nex+wvYDiOw1aO1jzBJmVfhd2LzFPml12LojLX6aYPE8=\n" + _SIGNER0
    + "KXr+q+mLgGGOIN/CjS+NoiML7Pd914sAbxgHuKTnEKtBvMeopibTteFfO4mG"
    + "TnB7P9wQz2IZg72VcH0uhGPhzCw4igY=\n",
}  # fmt: skip
GO_NOTE_TWO_SIGNERS = (
    GO_NOTES[13]
    + "— ghost/103a73c8d7b21ac5 fcAtwpbGWC5NrU8tNu3ersgiyeQ+Naz6QRNLKIocLVobqQSytxHRxxaR6d+B"
    "raRjJ4KVP7mZV0Y/5qfr5+Bm0rb0yA0=\n"
)
GO_NOTE_INT64_MAX = (
    _ORIGIN + "9223372036854775807\nyXcow3zr9J0ScQTi8coOqPZUvHfp3Ft+Eh2ocPymCHU=\n" + _SIGNER0
    + "KXr+q5OcMt5Y/XX9/FFcwVSQVHL5cr8ClHlB8jNFHL2BlWeQtfSTLp4suEZQ2"
    + "MYkP6EnXsMwlsPNItS13BcxlvGJSgs=\n"
)  # fmt: skip
PETER_TEXT = (
    "If you think cryptography is the answer to your problem,\n"
    "then you don't know what your problem is.\n"
)
PETER_NOTE = (
    PETER_TEXT + "\n— PeterNeumann x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGU"
    "gYN1FFYC2pZSNXgKvqfqdngotpRZb6KE6RyyBwJnAM=\n"
)
PETER_SEED = base64.b64decode("AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxdXHKDFz")[1:]
C2SP_VKEY = "example.com/foo+530d903a+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k"
C2SP_NOTE = (
    "This is an example message.\n\n— example.com/foo Uw2QOkn8srV1yJGh2VYRlL1Tnagv1YEq6TfXppzi2O"
    "NncAlTgK7Ztg1ERYNZXsYjOBH3mFXmRKuwHjG1Yu72IneyaQM=\n"
)


def _go_root(size: int) -> bytes:
    return tree_root([leaf_hash(leaf) for leaf in GO_LEAVES[:size]])


def _verify_with_cryptography_alone(note: str, public: Ed25519PublicKey) -> None:
    """Split the note by hand and check its first signature with `cryptography` only."""
    text, _, block = note.rpartition("\n\n")
    line = block.split("\n")[0]
    signature = base64.b64decode(line.split(" ")[2])[4:]
    public.verify(signature, (text + "\n").encode())  # raises InvalidSignature otherwise


@pytest.mark.parametrize("size", sorted(GO_NOTES))
def test_checkpoint_notes_match_go_byte_for_byte(size: int) -> None:
    note = make_checkpoint_note(RUN_ID, size, _go_root(size), NoteSigner(KEY0))
    assert note == GO_NOTES[size]
    _verify_with_cryptography_alone(note, KEY0.public_key())
    parsed = parse_checkpoint_note(note)
    assert parsed.checkpoint == Checkpoint(f"ghost.run/{RUN_ID}", size, _go_root(size))
    assert parsed.run_id == RUN_ID
    assert str(parsed.note) == note
    (signature,) = parsed.note.signatures
    assert signature.name == "ghost/40cec4106885ee49"
    assert signature.key_hash == NoteSigner(KEY0).key_hash
    assert parsed.verify([NoteVerifier.for_key(KEY0.public_key())]).verified == (signature,)


def test_the_largest_tree_size_matches_go() -> None:
    parsed = parse_checkpoint_note(GO_NOTE_INT64_MAX)
    assert parsed.checkpoint.tree_size == 2**63 - 1
    rebuilt = make_checkpoint_note(RUN_ID, 2**63 - 1, parsed.checkpoint.root_hash, NoteSigner(KEY0))
    assert rebuilt == GO_NOTE_INT64_MAX


def test_two_signers_in_order_as_go_writes_them() -> None:
    text = Checkpoint(f"ghost.run/{RUN_ID}", 13, _go_root(13)).text()
    note = format_note(text, [NoteSigner(KEY0), NoteSigner(KEY1)])
    assert note == GO_NOTE_TWO_SIGNERS
    parsed = parse_note(note)
    names = [s.name for s in parsed.signatures]
    assert names == ["ghost/40cec4106885ee49", "ghost/103a73c8d7b21ac5"]
    # A verifier that knows one key ignores the other signature (C2SP: unknown keys are ignored).
    result = verify_note(parsed, [NoteVerifier.for_key(KEY1.public_key())])
    assert [s.name for s in result.verified] == ["ghost/103a73c8d7b21ac5"]
    assert [s.name for s in result.unknown] == ["ghost/40cec4106885ee49"]
    both = verify_note(
        parsed, [NoteVerifier.for_key(KEY0.public_key()), NoteVerifier.for_key(KEY1.public_key())]
    )
    assert len(both.verified) == 2
    assert both.unknown == ()


def test_go_documentation_note() -> None:
    signer = NoteSigner(Ed25519PrivateKey.from_private_bytes(PETER_SEED), "PeterNeumann")
    assert format_note(PETER_TEXT, [signer]) == PETER_NOTE
    parsed = parse_note(PETER_NOTE)
    assert parsed.text == PETER_TEXT
    assert verify_note(parsed, [signer.verifier]).verified == parsed.signatures


def test_c2sp_example_note() -> None:
    parsed = parse_note(C2SP_NOTE)
    assert parsed.text == "This is an example message.\n"
    assert len(verify_note(parsed, [NoteVerifier.from_vkey(C2SP_VKEY)]).verified) == 1
    with pytest.raises(NoteError, match="three lines"):
        parse_checkpoint(parsed.text)


def test_an_unsigned_note_is_the_text_alone() -> None:
    note = make_checkpoint_note(RUN_ID, 13, _go_root(13), None)
    assert note == Checkpoint(f"ghost.run/{RUN_ID}", 13, _go_root(13)).text()
    assert note == GO_NOTES[13].split("\n\n")[0] + "\n"
    parsed = parse_checkpoint_note(note)
    assert parsed.note == Note(text=note, signatures=())
    assert str(parsed.note) == note
    with pytest.raises(NoteError, match="no signature by a known key"):
        parsed.verify([NoteVerifier.for_key(KEY0.public_key())])


def test_verification_rejects_a_bad_signature_by_a_known_key() -> None:
    parsed = parse_note(GO_NOTES[13])
    (good,) = parsed.signatures
    bad = bytes([good.signature[0] ^ 1]) + good.signature[1:]
    forged = NoteSignature(good.name, good.key_hash, bad)
    verifier = NoteVerifier.for_key(KEY0.public_key())
    with pytest.raises(NoteError, match="does not verify"):
        verify_note(Note(parsed.text, (forged,)), [verifier])
    # Even beside a valid one: C2SP's SHOULD, taken as MUST.
    with pytest.raises(NoteError, match="does not verify"):
        verify_note(Note(parsed.text, (good, forged)), [verifier])
    with pytest.raises(NoteError, match="does not verify"):
        verify_note(Note(parsed.text.replace("13", "14"), (good,)), [verifier])


def test_verification_rejects_a_note_only_unknown_keys_signed() -> None:
    parsed = parse_note(GO_NOTES[13])
    other = NoteVerifier.for_key(KEY1.public_key())
    with pytest.raises(NoteError, match=r"no signature by a known key \(known: ghost/103a"):
        verify_note(parsed, [other])
    with pytest.raises(NoteError, match=r"known: none"):
        verify_note(parsed, [])
    # Every known key is named, sorted, so the auditor sees which keys were tried.
    third = NoteVerifier.for_key(KEY1.public_key(), "ghost/aaa")
    with pytest.raises(NoteError, match=r"\(known: ghost/103a73c8d7b21ac5, ghost/aaa\)$"):
        verify_note(parsed, [third, other])
    # Same name, other key (so another key hash): unknown, not a failure.
    renamed = NoteVerifier.for_key(KEY1.public_key(), "ghost/40cec4106885ee49")
    with pytest.raises(NoteError, match="no signature by a known key"):
        verify_note(parsed, [renamed])


def test_two_different_known_keys_under_one_name_and_hash_are_refused() -> None:
    real = NoteVerifier.for_key(KEY0.public_key())
    impostor = NoteVerifier(name=real.name, public_key=b"\x01" * 32, key_hash=real.key_hash)
    with pytest.raises(NoteError, match="two different known keys"):
        verify_note(parse_note(GO_NOTES[1]), [real, impostor])
    # The same key twice is not ambiguous.
    assert len(verify_note(parse_note(GO_NOTES[1]), [real, real]).verified) == 1


def _sig_line(name: str = "ghost/x", raw: bytes = b"\x00" * 68) -> str:
    return f"— {name} {base64.b64encode(raw).decode()}\n"


TEXT = GO_NOTES[1].split("\n\n")[0] + "\n"
SIG = GO_NOTES[1].split("\n\n")[1]


@pytest.mark.parametrize(
    ("note", "message"),
    [
        ("", "empty"),
        (TEXT[:-1], "ends with a newline"),
        (TEXT + "\n" + SIG[:-1], "ends with a newline"),
        (TEXT.replace("\n1\n", "\n1\r\n"), "control characters"),
        (TEXT.replace("ghost", "gh\tost"), "control characters"),
        (TEXT + "\x00\n", "control characters"),
        (TEXT.replace("ghost", "gh\ud800ost"), "UTF-8"),
        (TEXT + "\n", "at least one signature line"),
        (TEXT + "\n" + SIG.replace("—", "-", 1), "em dash"),
        (TEXT + "\n" + SIG.replace("—", "\u2013", 1), "em dash"),  # an en dash
        (TEXT + "\n" + SIG.replace("— ", "—", 1), "em dash"),
        (TEXT + "\n" + SIG.replace("— ghost/", "—  ghost/", 1), "key name"),
        (TEXT + "\n" + _sig_line(name="a+b"), "key name"),
        (TEXT + "\n" + SIG.replace(" KXr", "KXr"), "key name"),
        (TEXT + "\n" + SIG.replace(" KXr", "  KXr"), "canonical standard base64"),
        (TEXT + "\n" + SIG.replace("=\n", "\n"), "canonical standard base64"),
        (TEXT + "\n" + SIG.replace("KXr+", "KXr-"), "canonical standard base64"),
        (TEXT + "\n" + SIG.replace("BAs=", "BAt="), "canonical standard base64"),
        (TEXT + "\n" + SIG + "\n", "at least one signature line"),
        (TEXT + "\n" + SIG + "trailing\n", "em dash"),
        (TEXT + "\n" + _sig_line(raw=b"\x00" * 4), "4-byte key hash and a signature"),
        (TEXT + "\n" + _sig_line(raw=b""), "canonical standard base64"),
        (TEXT + "\n" + _sig_line() * (MAX_NOTE_SIGNATURES + 1), "more than 100"),
        ("x" * MAX_NOTE_BYTES + "\n", "at most"),
        ("é" * (MAX_NOTE_BYTES // 2) + "\n", "at most"),  # under the limit in characters only
        # Too long is refused before it is encoded (so before its lone surrogate is found).
        ("\ud800" + "x" * MAX_NOTE_BYTES + "\n", "at most"),
    ],
)
def test_parse_note_refuses(note: str, message: str) -> None:
    with pytest.raises(NoteError, match=message) as raised:
        parse_note(note)
    assert isinstance(raised.value, AuditError)
    assert raised.value.path is None


def test_parse_note_refuses_what_is_not_text() -> None:
    with pytest.raises(NoteError, match="not bytes"):
        parse_note(GO_NOTES[1].encode())  # type: ignore[arg-type]


def test_parse_note_limits_are_inclusive() -> None:
    many = TEXT + "\n" + _sig_line() * MAX_NOTE_SIGNATURES
    assert len(parse_note(many).signatures) == MAX_NOTE_SIGNATURES
    largest = "x" * (MAX_NOTE_BYTES - 1) + "\n"
    assert parse_note(largest).text == largest


def test_signatures_of_other_types_parse_and_count_as_unknown() -> None:
    # A witness cosignature (C2SP tlog-cosignature: 8-byte timestamp + 64-byte signature).
    note = GO_NOTES[1] + _sig_line(name="witness.example/w1", raw=b"\x07" * 76)
    parsed = parse_note(note)
    assert parsed.signatures[1].signature == b"\x07" * 72
    assert str(parsed) == note
    result = verify_note(parsed, [NoteVerifier.for_key(KEY0.public_key())])
    assert [s.name for s in result.unknown] == ["witness.example/w1"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (TEXT[:-1], "ends with a newline"),
        (TEXT.rsplit("\n", 2)[0] + "\n", "three lines"),
        (TEXT + "extension\n", "not 4"),
        ("\n" + TEXT.split("\n", 1)[1], "origin"),
        (TEXT.replace("ghost.run/", "ghost run/"), "origin"),
        (TEXT.replace("ghost.run/", "ghost+run/"), "origin"),
        (TEXT.replace("\n1\n", "\n01\n"), "leading zeros"),
        (TEXT.replace("\n1\n", "\n\n"), "decimal"),
        (TEXT.replace("\n1\n", "\n-1\n"), "decimal"),
        (TEXT.replace("\n1\n", "\n+1\n"), "decimal"),
        (TEXT.replace("\n1\n", "\n1.0\n"), "decimal"),
        (TEXT.replace("\n1\n", "\n 1\n"), "decimal"),
        (TEXT.replace("\n1\n", "\n\u0661\n"), "decimal"),  # ARABIC-INDIC DIGIT ONE
        (TEXT.replace("\n1\n", "\n9223372036854775808\n"), "64-bit"),
        (TEXT.replace("bjQLnP", "bjQL!P"), "32 bytes"),
        (TEXT.replace("oB0=", "oB1="), "canonical"),
        (TEXT.replace("oB0=", "oB0"), "canonical"),
        (TEXT.replace("oB0=", "oB0AAA=="), "32 bytes"),
        (TEXT.replace("bjQLnP+zepicpUTmu3gKLHiQHT+zNzh2hRGjBhevoB0=", "AAAA"), "32 bytes"),
        (TEXT.replace("bjQLnP+zepicpUTmu3gKLHiQHT+zNzh2hRGjBhevoB0=", ""), "32 bytes"),
    ],
)
def test_parse_checkpoint_refuses(text: str, message: str) -> None:
    with pytest.raises(NoteError, match=message):
        parse_checkpoint(text)


def test_parse_checkpoint_accepts_size_zero_and_the_int64_maximum() -> None:
    assert parse_checkpoint(TEXT.replace("\n1\n", "\n0\n")).tree_size == 0
    # A size that uses every digit at once is still just a decimal number.
    assert parse_checkpoint(TEXT.replace("\n1\n", "\n1234567890\n")).tree_size == 1234567890
    assert parse_checkpoint(TEXT.replace("\n1\n", f"\n{2**63 - 1}\n")).tree_size == 2**63 - 1


def test_parse_checkpoint_refuses_what_is_not_text() -> None:
    with pytest.raises(NoteError, match="newline"):
        parse_checkpoint(TEXT.encode())  # type: ignore[arg-type]


def test_format_note_refuses_bad_texts() -> None:
    for text, message in (
        ("", "empty"),
        ("no newline", "ends with a newline"),
        ("a\n\nb\n", "must not contain a blank line"),
        ("\nb\n", "must not contain a blank line"),
        ("a\tb\n", "control characters"),
    ):
        with pytest.raises(NoteError, match=message):
            format_note(text, [NoteSigner(KEY0)])
    assert format_note("plain\n") == "plain\n"


def test_make_checkpoint_note_refuses_what_would_not_parse() -> None:
    with pytest.raises(NoteError, match="origin"):
        make_checkpoint_note("has space", 1, _go_root(1), None)
    with pytest.raises(NoteError, match="32 bytes"):
        make_checkpoint_note(RUN_ID, 1, b"short", None)


@given(
    st.integers(min_value=0, max_value=2**63 - 1),
    st.binary(min_size=32, max_size=32),
    st.booleans(),
)
def test_every_checkpoint_note_round_trips(size: int, root: bytes, signed: bool) -> None:
    note = make_checkpoint_note(RUN_ID, size, root, NoteSigner(KEY0) if signed else None)
    parsed = parse_checkpoint_note(note)
    assert parsed.checkpoint.tree_size == size
    assert parsed.checkpoint.root_hash == root
    assert str(parsed.note) == note
    if signed:
        _verify_with_cryptography_alone(note, KEY0.public_key())
        assert len(parsed.verify([NoteVerifier.for_key(KEY0.public_key())]).verified) == 1


@given(st.text(max_size=400))
def test_parse_note_never_raises_anything_but_note_error(text: str) -> None:
    try:
        parsed = parse_note(text)
    except NoteError:
        return
    assert str(parsed) == text


@given(st.data())
def test_any_single_character_edit_of_a_signed_note_is_caught(data: st.DataObject) -> None:
    note = GO_NOTES[13]
    position = data.draw(st.integers(0, len(note) - 1))
    replacement = data.draw(st.characters(codec="utf-8").filter(lambda c: c != note[position]))
    edited = note[:position] + replacement + note[position + 1 :]
    verifier = NoteVerifier.for_key(KEY0.public_key())
    outcome: Any
    try:
        outcome = parse_checkpoint_note(edited).verify([verifier])
    except NoteError:
        return
    raise AssertionError(f"an edit at {position} was accepted: {outcome}")


def test_the_documented_limits() -> None:
    assert MAX_NOTE_BYTES == 64 * 1024
    assert MAX_NOTE_SIGNATURES == 100


def test_a_note_whose_text_is_a_single_newline() -> None:
    # The blank line may come first: the signatures are what follows the last one.
    parsed = parse_note("\n\n" + SIG)
    assert parsed.text == "\n"
    assert len(parsed.signatures) == 1


def test_note_values_are_frozen() -> None:
    parsed = parse_checkpoint_note(GO_NOTES[1])
    result = parsed.verify([NoteVerifier.for_key(KEY0.public_key())])
    for value in (parsed, parsed.note, parsed.checkpoint, parsed.note.signatures[0], result):
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(value, dataclasses.fields(value)[0].name, None)
