"""Ed25519 keys for checkpoint notes: key ids, key names, note signers and verifiers, PEM files.

A run is signed (optionally) by one Ed25519 key, through `cryptography`:

* ``key_id`` — the SHA-256 hex of the raw 32-byte public key: what the
  ``/run`` record declares, and how an auditor names a key.
* key name — the name in each signature line of a checkpoint note; by
  default ``ghost/`` followed by the first 16 hex digits (64 bits) of
  ``key_id``: short enough to read, long enough that two keys of one
  organisation never share a name. C2SP ``signed-note`` requires a name to be
  non-empty, valid UTF-8, with no Unicode space and no ``+``.
* key hash — the 4 bytes that open every signature:
  SHA-256(key name ‖ ``0x0A`` ‖ ``0x01`` ‖ raw public key)[:4], ``0x01`` being
  C2SP's signature type for Ed25519. Together with the name it picks the
  key that signed; it is an identifier, not a security check: the signature is.
* verifier key (C2SP ``vkey``) — ``<name>+<hex key hash>+<base64(0x01 ‖ key)>``,
  the form transparency-log witnesses and Go's ``sumdb/note`` read.

Key files are PEM: the private key as unencrypted PKCS #8 (``PREFIX.key``,
mode 0600), the public key as SubjectPublicKeyInfo (``PREFIX.pub``). Writing
never replaces an existing file (``O_EXCL``).
"""

from __future__ import annotations

import base64
import hashlib
import os
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import dsa, ec, ed448, rsa
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from audit._errors import KeyFileError

__all__ = [
    "ED25519_SIGNATURE_TYPE",
    "KEY_NAME_PREFIX",
    "KeyPairFiles",
    "NoteSigner",
    "NoteVerifier",
    "check_key_name",
    "default_key_name",
    "generate_key_pair",
    "key_id",
    "load_private_key",
    "load_public_key",
    "note_key_hash",
    "raw_public_key",
    "strict_b64decode",
]

ED25519_SIGNATURE_TYPE: Final = 0x01
"""C2SP ``signed-note`` signature type identifier of Ed25519."""

KEY_NAME_PREFIX: Final = "ghost/"
_KEY_NAME_ID_DIGITS: Final = 16
_PUBLIC_KEY_SIZE: Final = 32
_SIGNATURE_SIZE: Final = 64
# A PEM key is a few hundred bytes; a file far larger is not a key, and is not read whole.
_MAX_KEY_FILE_BYTES: Final = 64 * 1024


def raw_public_key(key: Ed25519PublicKey) -> bytes:
    """Return the 32-byte RFC 8032 encoding of ``key``."""
    return key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def key_id(key: Ed25519PublicKey) -> str:
    """Return the key id of ``key``: the SHA-256 hex of its raw 32 bytes."""
    return hashlib.sha256(raw_public_key(key)).hexdigest()


def default_key_name(key: Ed25519PublicKey) -> str:
    """Return the default note key name of ``key``: ``ghost/`` + 16 hex digits of its id."""
    return KEY_NAME_PREFIX + key_id(key)[:_KEY_NAME_ID_DIGITS]


def check_key_name(name: str) -> None:
    """Check ``name`` against C2SP ``signed-note``'s rule for key names.

    Raises:
        ValueError: ``name`` is empty, not a string, holds a Unicode space, a
            ``+``, a control character, or a lone surrogate (not UTF-8).
    """
    if not isinstance(name, str) or not name:
        raise ValueError("a note key name must be a non-empty string")
    for char in name:
        if char == "+" or char.isspace() or unicodedata.category(char) in ("Cc", "Zs", "Cs"):
            raise ValueError(
                "a note key name must not contain spaces, '+', control characters or"
                f" surrogates (found U+{ord(char):04X})"
            )


def note_key_hash(name: str, public_key: bytes) -> bytes:
    """Return the 4-byte C2SP key hash of an Ed25519 key under ``name``.

    Args:
        name: the key name.
        public_key: the raw 32-byte public key.
    """
    digest = hashlib.sha256(
        name.encode() + b"\n" + bytes([ED25519_SIGNATURE_TYPE]) + public_key
    ).digest()
    return digest[:4]


@dataclass(frozen=True, slots=True)
class NoteVerifier:
    """One known Ed25519 key under one name: checks note signatures made with it.

    Build it with `NoteVerifier.for_key` or `NoteVerifier.from_vkey`.

    Attributes:
        name: the key name signatures must carry.
        public_key: the raw 32-byte public key.
        key_hash: the 4-byte key hash signatures must open with.
    """

    name: str
    public_key: bytes
    key_hash: bytes

    @classmethod
    def for_key(cls, key: Ed25519PublicKey, name: str | None = None) -> NoteVerifier:
        """Return the verifier of ``key`` under ``name`` (default: `default_key_name`).

        Raises:
            ValueError: ``name`` is not a valid key name.
        """
        name = default_key_name(key) if name is None else name
        check_key_name(name)
        raw = raw_public_key(key)
        return cls(name=name, public_key=raw, key_hash=note_key_hash(name, raw))

    @classmethod
    def from_vkey(cls, vkey: str) -> NoteVerifier:
        """Parse a C2SP verifier key, ``<name>+<hex key hash>+<base64(0x01 ‖ key)>``.

        Raises:
            ValueError: it is malformed, not Ed25519, or its key hash does not
                match its name and key.
        """
        # The base64 key material may itself hold '+': split off name and hash only.
        parts = vkey.split("+", 2) if isinstance(vkey, str) else []
        if len(parts) != 3:
            raise ValueError("a verifier key has three '+'-separated parts: name, hash, key")
        name, hash_hex, key_b64 = parts
        check_key_name(name)
        if len(hash_hex) != 8 or any(c not in "0123456789abcdef" for c in hash_hex):
            raise ValueError("a verifier key's hash is 8 lowercase hex digits")
        material = strict_b64decode(key_b64)
        if material is None:
            raise ValueError("a verifier key's key material is not standard base64")
        if len(material) != 1 + _PUBLIC_KEY_SIZE or material[0] != ED25519_SIGNATURE_TYPE:
            raise ValueError("a verifier key must hold an Ed25519 key (type 0x01 and 32 bytes)")
        raw = material[1:]
        expected = note_key_hash(name, raw)
        if bytes.fromhex(hash_hex) != expected:
            raise ValueError("a verifier key's hash does not match its name and key")
        return cls(name=name, public_key=raw, key_hash=expected)

    @property
    def vkey(self) -> str:
        """This verifier as a C2SP verifier key string."""
        material = base64.b64encode(bytes([ED25519_SIGNATURE_TYPE]) + self.public_key).decode()
        return f"{self.name}+{self.key_hash.hex()}+{material}"

    def verify(self, text: bytes, signature: bytes) -> bool:
        """Return whether ``signature`` (64 bytes) is this key's Ed25519 signature of ``text``."""
        if len(signature) != _SIGNATURE_SIZE:
            return False
        try:
            Ed25519PublicKey.from_public_bytes(self.public_key).verify(signature, text)
        except (InvalidSignature, ValueError):
            return False
        return True


class NoteSigner:
    """Signs checkpoint notes with one Ed25519 private key under one key name.

    Args:
        key: the private key.
        name: the key name for signature lines (default: `default_key_name`).

    Raises:
        TypeError: ``key`` is not an `Ed25519PrivateKey`.
        ValueError: ``name`` is not a valid key name.
    """

    __slots__ = ("_key", "_verifier")

    def __init__(self, key: Ed25519PrivateKey, name: str | None = None) -> None:
        if not isinstance(key, Ed25519PrivateKey):
            raise TypeError(
                f"a signing key must be a cryptography Ed25519PrivateKey, not {type(key).__name__}"
            )
        self._key = key
        self._verifier = NoteVerifier.for_key(key.public_key(), name)

    @property
    def name(self) -> str:
        """The key name written in signature lines."""
        return self._verifier.name

    @property
    def key_hash(self) -> bytes:
        """The 4-byte key hash that opens each signature."""
        return self._verifier.key_hash

    @property
    def verifier(self) -> NoteVerifier:
        """The matching verifier (public half)."""
        return self._verifier

    @property
    def key_id(self) -> str:
        """The SHA-256 hex of the raw public key."""
        return hashlib.sha256(self._verifier.public_key).hexdigest()

    def sign(self, text: bytes) -> bytes:
        """Return the 64-byte Ed25519 signature of ``text``."""
        return self._key.sign(text)


def strict_b64decode(text: str) -> bytes | None:
    """Decode standard base64 (RFC 4648 §4) in its one canonical spelling, else return None."""
    try:
        raw = base64.b64decode(text.encode("ascii"), validate=True)
    except (ValueError, UnicodeEncodeError):
        return None
    # b64decode accepts stray bits after the last byte; a canonical form has none.
    return raw if base64.b64encode(raw).decode() == text else None


@dataclass(frozen=True, slots=True)
class KeyPairFiles:
    """What `generate_key_pair` wrote.

    Attributes:
        private_key: ``PREFIX.key``, PKCS #8 PEM, mode 0600.
        public_key: ``PREFIX.pub``, SubjectPublicKeyInfo PEM.
        key_id: the SHA-256 hex of the raw public key.
        key_name: its default note key name.
    """

    private_key: Path
    public_key: Path
    key_id: str
    key_name: str


def generate_key_pair(prefix: str | os.PathLike[str]) -> KeyPairFiles:
    """Generate an Ed25519 key pair into ``PREFIX.key`` and ``PREFIX.pub`` (``ghost keygen``).

    Neither file may exist: the private key is created with ``O_EXCL`` and
    mode 0600 (no moment at which another user could read it), then the
    public key, also with ``O_EXCL``.

    Raises:
        KeyFileError: either file already exists, or cannot be written (the
            message names the file and the reason; a private key written before
            the public one failed is removed again).
    """
    base = os.fspath(prefix)
    private_path, public_path = Path(base + ".key"), Path(base + ".pub")
    for path in (private_path, public_path):
        if path.exists() or path.is_symlink():
            raise KeyFileError(path, "it already exists; a key file is never replaced")
    key = Ed25519PrivateKey.generate()
    private_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    public_pem = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    _write_new(private_path, private_pem, 0o600)
    try:
        _write_new(public_path, public_pem, 0o644)
    except KeyFileError:
        private_path.unlink(missing_ok=True)
        raise
    public = key.public_key()
    return KeyPairFiles(
        private_key=private_path,
        public_key=public_path,
        key_id=key_id(public),
        key_name=default_key_name(public),
    )


def _write_new(path: Path, data: bytes, mode: int) -> None:
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    except FileExistsError:
        raise KeyFileError(path, "it already exists; a key file is never replaced") from None
    except OSError as exc:
        raise KeyFileError(path, f"it cannot be created ({exc.strerror or exc})") from None
    try:
        with os.fdopen(fd, "wb") as stream:
            stream.write(data)
        # The umask may have narrowed the mode; a private key must be 0600 exactly, no wider.
        os.chmod(path, mode)
    except OSError as exc:
        path.unlink(missing_ok=True)
        raise KeyFileError(path, f"it cannot be written ({exc.strerror or exc})") from None


def _read_key_file(path: Path) -> bytes:
    try:
        with path.open("rb") as stream:
            data = stream.read(_MAX_KEY_FILE_BYTES + 1)
    except FileNotFoundError:
        raise KeyFileError(path, "there is no such file") from None
    except IsADirectoryError:
        raise KeyFileError(path, "it is a directory, not a key file") from None
    except PermissionError:
        raise KeyFileError(path, "permission denied: the file cannot be read") from None
    except OSError as exc:
        raise KeyFileError(path, f"the file cannot be read ({exc.strerror or exc})") from None
    if len(data) > _MAX_KEY_FILE_BYTES:
        raise KeyFileError(path, f"it is larger than {_MAX_KEY_FILE_BYTES} bytes: not a PEM key")
    return data


def load_public_key(path: str | os.PathLike[str]) -> Ed25519PublicKey:
    """Load an Ed25519 public key from a PEM file (as ``ghost keygen`` writes ``PREFIX.pub``).

    Raises:
        KeyFileError: the file is missing or unreadable, is not a PEM public
            key, or holds a key that is not Ed25519 (a private key file is
            named as such, so the user can pass the ``.pub`` instead).
    """
    source = Path(os.fspath(path))
    data = _read_key_file(source)
    if b"PRIVATE KEY-----" in data:
        raise KeyFileError(
            source, "it holds a private key; pass the public key (PREFIX.pub) instead"
        )
    try:
        key = serialization.load_pem_public_key(data)
    except (ValueError, TypeError, UnsupportedAlgorithm):
        raise KeyFileError(source, "it is not a PEM public key") from None
    if not isinstance(key, Ed25519PublicKey):
        raise KeyFileError(source, f"it holds {_key_kind(key)} key, not an Ed25519 key")
    return key


def load_private_key(path: str | os.PathLike[str]) -> Ed25519PrivateKey:
    """Load an unencrypted Ed25519 private key from a PEM file (``PREFIX.key``).

    Raises:
        KeyFileError: the file is missing or unreadable, is not an unencrypted
            PEM private key, or holds a key that is not Ed25519.
    """
    source = Path(os.fspath(path))
    data = _read_key_file(source)
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except TypeError:
        raise KeyFileError(source, "it is encrypted; ghost reads unencrypted keys only") from None
    except (ValueError, UnsupportedAlgorithm):
        raise KeyFileError(source, "it is not a PEM private key") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise KeyFileError(source, f"it holds {_key_kind(key)} key, not an Ed25519 key")
    return key


def _key_kind(key: object) -> str:
    # Name the algorithm, never the key material; with its article.
    kinds = (
        ((rsa.RSAPublicKey, rsa.RSAPrivateKey), "an RSA"),
        ((ec.EllipticCurvePublicKey, ec.EllipticCurvePrivateKey), "an elliptic-curve (ECDSA)"),
        ((dsa.DSAPublicKey, dsa.DSAPrivateKey), "a DSA"),
        ((ed448.Ed448PublicKey, ed448.Ed448PrivateKey), "an Ed448"),
    )
    for types, kind in kinds:
        if isinstance(key, types):
            return kind
    return "a non-Ed25519"
