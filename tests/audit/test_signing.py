"""Ed25519 keys for checkpoint notes: ids, names, key hashes, verifier keys, PEM files.

Vectors from Go's ``golang.org/x/mod/sumdb/note`` (BSD-3-Clause): the
PeterNeumann signer/verifier keys of its documentation, the key names and
verifier keys its ``GenerateKey`` derives from two fixed seeds, and the
example verifier key of C2SP's signed-note specification (c2sp.org).
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import os
import stat
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import dsa, ec, ed448, rsa, x25519
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

import audit._signing as signing
from audit import (
    KeyFileError,
    NoteSigner,
    NoteVerifier,
    default_key_name,
    generate_key_pair,
    key_id,
    load_private_key,
    load_public_key,
)
from audit._signing import check_key_name, note_key_hash, raw_public_key, strict_b64decode
from runtime import AuditError

# golang.org/x/mod/sumdb/note documentation.
PETER_SKEY = "PRIVATE+KEY+PeterNeumann+c74f20a3+AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxdXHKDFz"
PETER_VKEY = "PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW"
# Go's note.GenerateKey fed these seeds, under ghost's default key names.
GO_KEYS = [
    (
        "3e6281614418bc30164aefd586b5929c90263468dd276b3b8bebc1671eb7c98d",
        "ghost/40cec4106885ee49",
        "ghost/40cec4106885ee49+297afeab+AWVi+qETbMjNB/emDFU24/dcW7f6wvdYR/wVifq+jNSn",
    ),
    (
        "5d9176a81a710063907b1b94b8542ec3e9c6d23c640408be5ca7c5f9d1a59ac4",
        "ghost/103a73c8d7b21ac5",
        "ghost/103a73c8d7b21ac5+7dc02dc2+AWwnD2b5mfTVo5wEmVzeJsamBgli6bZwFTNFOTl/bGUy",
    ),
]
C2SP_VKEY = "example.com/foo+530d903a+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k"


def _peter() -> Ed25519PrivateKey:
    seed = base64.b64decode(PETER_SKEY.split("+", 4)[4])[1:]
    return Ed25519PrivateKey.from_private_bytes(seed)


@pytest.mark.parametrize(("seed", "name", "vkey"), GO_KEYS)
def test_default_names_and_verifier_keys_match_go(seed: str, name: str, vkey: str) -> None:
    key = Ed25519PrivateKey.from_private_bytes(bytes.fromhex(seed))
    public = key.public_key()
    assert key_id(public) == hashlib.sha256(raw_public_key(public)).hexdigest()
    assert default_key_name(public) == name == "ghost/" + key_id(public)[:16]
    signer = NoteSigner(key)
    assert signer.name == name
    assert signer.key_id == key_id(public)
    assert signer.verifier.vkey == vkey
    assert NoteVerifier.from_vkey(vkey) == signer.verifier == NoteVerifier.for_key(public)


def test_key_hash_is_c2sp_ed25519() -> None:
    key = _peter().public_key()
    raw = raw_public_key(key)
    assert len(raw) == 32
    expected = hashlib.sha256(b"PeterNeumann\n\x01" + raw).digest()[:4]
    assert note_key_hash("PeterNeumann", raw) == expected == bytes.fromhex("c74f20a3")
    signer = NoteSigner(_peter(), "PeterNeumann")
    assert signer.key_hash == expected
    assert signer.verifier.vkey == PETER_VKEY


def test_a_key_under_another_name_has_another_hash() -> None:
    key = _peter().public_key()
    assert NoteVerifier.for_key(key, "a").key_hash != NoteVerifier.for_key(key, "b").key_hash


def test_c2sp_example_verifier_key_parses() -> None:
    verifier = NoteVerifier.from_vkey(C2SP_VKEY)
    assert verifier.name == "example.com/foo"
    assert verifier.key_hash.hex() == "530d903a"
    assert verifier.vkey == C2SP_VKEY


def test_every_mangling_of_a_verifier_key_is_refused() -> None:
    # As Go's TestNewVerifier: every proper substring, and every byte bumped by one.
    for start in range(len(PETER_VKEY) + 1):
        for end in range(start + 1, len(PETER_VKEY) + 1):
            if (start, end) != (0, len(PETER_VKEY)):
                with pytest.raises(ValueError, match=r"verifier key|key name"):
                    NoteVerifier.from_vkey(PETER_VKEY[start:end])
    for position, char in enumerate(PETER_VKEY):
        bumped = PETER_VKEY[:position] + chr(ord(char) + 1) + PETER_VKEY[position + 1 :]
        with pytest.raises(ValueError, match=r"verifier key|key name"):
            NoteVerifier.from_vkey(bumped)


@pytest.mark.parametrize(
    ("vkey", "message"),
    [
        ("PeterNeumann+c74f20a3", "three"),
        ("PeterNeumann+c74f20a3+ARpc+x", "base64"),
        (42, "three"),
        ("PeterNeumann+C74F20A3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW", "lowercase hex"),
        ("PeterNeumann+c74f20a+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW", "8 lowercase hex"),
        ("PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10T", "base64"),
        ("Peter Neumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW", "spaces"),
        # Right hashes for the wrong material: too long a key, an unknown algorithm.
        ("PeterNeumann+cc469956+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TWBADKEY==", "base64"),
        ("PeterNeumann+5bdbe860+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TWAA==", "Ed25519"),
        ("PeterNeumann+173116ae+ZRpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW", "Ed25519"),
        ("PeterNeumann+c74f20a4+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW", "does not match"),
    ],
)
def test_bad_verifier_keys_say_why(vkey: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        NoteVerifier.from_vkey(vkey)


@pytest.mark.parametrize("name", ["ghost/abc", "example.com/foo", "café/ü", "a"])
def test_valid_key_names(name: str) -> None:
    check_key_name(name)


@pytest.mark.parametrize(
    "name", ["", "a b", "a+b", "a\u2003b", "a\u00a0b", "a\x00", "a\nb", "a\tb", "\ud800", "a\x1f"]
)
def test_invalid_key_names(name: str) -> None:
    with pytest.raises(ValueError, match="key name"):
        check_key_name(name)
    with pytest.raises(ValueError, match="key name"):
        NoteSigner(_peter(), name)


def test_a_key_name_must_be_a_string() -> None:
    with pytest.raises(ValueError, match="non-empty string"):
        check_key_name(42)  # type: ignore[arg-type]


def test_signatures_verify_with_cryptography_alone() -> None:
    signer = NoteSigner(_peter())
    signature = signer.sign(b"text\n")
    assert len(signature) == 64
    _peter().public_key().verify(signature, b"text\n")  # raises if it were not valid
    assert signer.verifier.verify(b"text\n", signature)
    assert signer.verifier.verify(b"text!\n", signature) is False
    assert signer.verifier.verify(b"text\n", bytes([signature[0] ^ 1]) + signature[1:]) is False
    assert signer.verifier.verify(b"text\n", signature[:63]) is False
    assert signer.verifier.verify(b"text\n", signature + b"\x00") is False


def test_a_signer_needs_an_ed25519_private_key() -> None:
    with pytest.raises(TypeError, match="Ed25519PrivateKey"):
        NoteSigner(_peter().public_key())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="Ed25519PrivateKey"):
        NoteSigner(ec.generate_private_key(ec.SECP256R1()))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("AAEC", b"\x00\x01\x02"),
        ("AAE=", b"\x00\x01"),
        ("", b""),
        ("AAF=", None),  # stray bits after the last byte
        ("AAE", None),  # missing padding
        ("AA E=", None),
        ("AAE=\n", None),
        ("AA-_", None),  # URL-safe alphabet
        ("AAé=", None),
    ],
)
def test_strict_base64(text: str, expected: bytes | None) -> None:
    assert strict_b64decode(text) == expected


def test_generate_key_pair_writes_pem_files_and_never_replaces_them(tmp_path: Path) -> None:
    prefix = tmp_path / "keys" / "auditor"
    prefix.parent.mkdir()
    files = generate_key_pair(prefix)
    assert files.private_key == Path(f"{prefix}.key")
    assert files.public_key == Path(f"{prefix}.pub")
    assert stat.S_IMODE(files.private_key.stat().st_mode) == 0o600
    assert files.private_key.read_bytes().startswith(b"-----BEGIN PRIVATE KEY-----")
    assert files.public_key.read_bytes().startswith(b"-----BEGIN PUBLIC KEY-----")
    private, public = load_private_key(files.private_key), load_public_key(files.public_key)
    assert raw_public_key(private.public_key()) == raw_public_key(public)
    assert files.key_id == key_id(public)
    assert files.key_name == default_key_name(public)
    before = (files.private_key.read_bytes(), files.public_key.read_bytes())
    with pytest.raises(KeyFileError, match="already exists"):
        generate_key_pair(prefix)
    assert (files.private_key.read_bytes(), files.public_key.read_bytes()) == before


@pytest.mark.parametrize("existing", [".key", ".pub"])
def test_generate_key_pair_refuses_when_either_file_exists(tmp_path: Path, existing: str) -> None:
    (tmp_path / f"k{existing}").write_bytes(b"mine")
    with pytest.raises(KeyFileError, match="already exists") as raised:
        generate_key_pair(tmp_path / "k")
    assert raised.value.path == tmp_path / f"k{existing}"
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"k{existing}"]


def test_generate_key_pair_refuses_a_dangling_symlink(tmp_path: Path) -> None:
    (tmp_path / "k.key").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(KeyFileError, match="already exists"):
        generate_key_pair(tmp_path / "k")
    assert not (tmp_path / "elsewhere").exists()


def test_generate_key_pair_loses_the_race_cleanly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Another process creates PREFIX.pub between the check and the write: O_EXCL says so.
    real_open = os.open

    def racing_open(path: str | os.PathLike[str], flags: int, mode: int = 0o777) -> int:
        if str(path).endswith(".pub"):
            Path(path).write_bytes(b"theirs")
        return real_open(path, flags, mode)

    monkeypatch.setattr(signing.os, "open", racing_open)
    with pytest.raises(KeyFileError, match="already exists"):
        generate_key_pair(tmp_path / "k")
    assert not (tmp_path / "k.key").exists()  # the private half is not left behind
    assert (tmp_path / "k.pub").read_bytes() == b"theirs"


def test_generate_key_pair_in_a_missing_directory(tmp_path: Path) -> None:
    with pytest.raises(KeyFileError, match="cannot be created") as raised:
        generate_key_pair(tmp_path / "missing" / "k")
    assert isinstance(raised.value, AuditError)


def test_a_private_key_is_0600_whatever_the_umask(tmp_path: Path) -> None:
    old = os.umask(0)
    try:
        files = generate_key_pair(tmp_path / "k")
    finally:
        os.umask(old)
    assert stat.S_IMODE(files.private_key.stat().st_mode) == 0o600
    assert stat.S_IMODE(files.public_key.stat().st_mode) == 0o644


def test_a_failed_write_removes_the_partial_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def failing_chmod(path: object, mode: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(signing.os, "chmod", failing_chmod)
    with pytest.raises(KeyFileError, match="No space left"):
        generate_key_pair(tmp_path / "k")
    assert list(tmp_path.iterdir()) == []


def _pem_public(key: object) -> bytes:
    return key.public_bytes(  # type: ignore[attr-defined, no-any-return]
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )


def _pem_private(key: object, password: bytes | None = None) -> bytes:
    encryption = (
        serialization.BestAvailableEncryption(password)
        if password
        else serialization.NoEncryption()
    )
    return key.private_bytes(  # type: ignore[attr-defined, no-any-return]
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption
    )


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", "not a PEM public key"),
        (b"-----BEGIN PUBLIC KEY-----\nnope\n-----END PUBLIC KEY-----\n", "not a PEM public key"),
        (_pem_private(_peter()), "holds a private key"),
        (_pem_public(ec.generate_private_key(ec.SECP256R1()).public_key()), "an elliptic-curve"),
        (_pem_public(rsa.generate_private_key(65537, 2048).public_key()), "an RSA key"),
        (b"x" * (64 * 1024 + 1), "larger than"),
    ],
)
def test_load_public_key_says_what_is_wrong(tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / "key.pub"
    path.write_bytes(content)
    with pytest.raises(KeyFileError, match=message) as raised:
        load_public_key(path)
    assert raised.value.path == path
    assert str(path) in str(raised.value)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"garbage", "not a PEM private key"),
        (_pem_public(_peter().public_key()), "not a PEM private key"),
        (_pem_private(_peter(), b"secret"), "encrypted"),
        (_pem_private(ec.generate_private_key(ec.SECP256R1())), "an elliptic-curve"),
    ],
)
def test_load_private_key_says_what_is_wrong(tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / "key.key"
    path.write_bytes(content)
    with pytest.raises(KeyFileError, match=message):
        load_private_key(path)


def test_every_other_algorithm_is_named_never_shown(tmp_path: Path) -> None:
    # The message names the algorithm so the user knows what they passed; every kind
    # ghost can name is named, and anything else is "non-Ed25519".
    keys = [
        (dsa.generate_private_key(2048), "a DSA key"),
        (ed448.Ed448PrivateKey.generate(), "an Ed448 key"),
        (rsa.generate_private_key(65537, 2048), "an RSA key"),
        (x25519.X25519PrivateKey.generate(), "a non-Ed25519 key"),
    ]
    for key, named in keys:
        public, private = tmp_path / "key.pub", tmp_path / "key.key"
        public.write_bytes(_pem_public(key.public_key()))
        private.write_bytes(_pem_private(key))
        with pytest.raises(KeyFileError, match=f"it holds {named}, not an Ed25519 key$"):
            load_public_key(public)
        with pytest.raises(KeyFileError, match=f"it holds {named}, not an Ed25519 key$"):
            load_private_key(private)
        public.unlink()
        private.unlink()


@pytest.mark.parametrize("loader", [load_public_key, load_private_key])
def test_missing_and_directory_key_files(tmp_path: Path, loader: object) -> None:
    with pytest.raises(KeyFileError, match="no such file"):
        loader(tmp_path / "absent.pem")  # type: ignore[operator]
    with pytest.raises(KeyFileError, match="directory"):
        loader(tmp_path)  # type: ignore[operator]
    # The reason itself, not the path (pytest's tmp_path names this test's "directory").
    with pytest.raises(KeyFileError, match=r"it is a directory, not a key file$"):
        loader(tmp_path)  # type: ignore[operator]


@pytest.mark.parametrize("loader", [load_public_key, load_private_key])
def test_a_key_file_of_exactly_the_limit_is_read(tmp_path: Path, loader: object) -> None:
    # 64 KiB is read and judged as PEM; one byte more is refused unread ("larger than").
    path = tmp_path / "key.pem"
    path.write_bytes(b"x" * (64 * 1024))
    with pytest.raises(KeyFileError, match=r"it is not a PEM (public|private) key$"):
        loader(path)  # type: ignore[operator]
    path.write_bytes(b"x" * (64 * 1024 + 1))
    with pytest.raises(KeyFileError, match="larger than 65536 bytes"):
        loader(path)  # type: ignore[operator]


def test_a_verifier_is_frozen() -> None:
    # A verifier whose key could be swapped after construction would verify a forger.
    verifier = NoteVerifier.for_key(_peter().public_key())
    with pytest.raises(dataclasses.FrozenInstanceError):
        verifier.public_key = bytes(32)  # type: ignore[misc]


def test_unreadable_key_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "key.pub"
    path.write_bytes(_pem_public(_peter().public_key()))

    def denied(*args: object, **kwargs: object) -> None:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(Path, "open", denied)
    with pytest.raises(KeyFileError, match="permission denied"):
        load_public_key(path)

    def broken(*args: object, **kwargs: object) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(Path, "open", broken)
    with pytest.raises(KeyFileError, match="Input/output error"):
        load_public_key(path)


def test_key_file_error_is_an_audit_error() -> None:
    error = KeyFileError(Path("k.pub"), "it is odd")
    assert isinstance(error, AuditError)
    assert str(error) == "k.pub: not a usable Ed25519 key file: it is odd"
    assert error.problem == "it is odd"
