"""Inclusion proofs: one decision, shown to be in a run, checked without the run (ADR 0015).

A proof (format ``ghost.inclusion-proof/1``) is a small JSON object::

    {"format": "ghost.inclusion-proof/1",
     "decision_id": "<the decision proved>",
     "tree_size": <leaves the checkpoint covers>,
     "root_hash": "<their RFC 6962 root, hex>",
     "checkpoint_note": "<the checkpoint's C2SP note, as the log holds it>",
     "records": [{"role": "run" | "assessment" | "decision" | "approval",
                  "leaf_index": <the record's seq>,
                  "record": "<the record's canonical JSON, as the log holds it>",
                  "audit_path": ["<hex>", ...]}, ...]}

`check_proof` holds it valid only when every rule holds (each pinned by a test):

1. The object has exactly these fields, each of its JSON type, ``format``
   this one; ``records``
   holds one ``run`` and one ``decision`` record, at most one ``assessment``
   and one ``approval``, nothing else, in that order (``seq`` order): a proof
   ghost accepts is one ghost could have written, field for field.
2. Every record's text, as UTF-8, is the canonical bytes of a record
   (SPEC §5) of its role's schema; its ``leaf_index`` is its ``seq``; its
   audit path (at most 64 lowercase-hex hashes) leads from SHA-256(``0x00`` ‖
   those bytes) to ``root_hash`` in a tree of ``tree_size`` leaves (RFC 6962);
   the ``run`` record is ``seq`` 0.
3. The note is a ghost checkpoint note of exactly that size and root, whose
   origin is ``ghost.run/`` + the ``run`` record's ``run_id``.
4. The decision's ``decision_id`` is the one claimed; the assessment is
   present exactly when the decision's ``assessment_sha256`` is not null, and
   then is that content address and holds the same ``decision_id``; an
   approval holds the same ``decision_id`` and, as ``decision_sha256``, the
   decision's content address.
5. Signatures, against the key the ``run`` record declares (``signing``):
   an unsigned run has an unsigned note; a signed run's note carries exactly
   one signature, by that key under that name, and it verifies. Given the
   auditor's own ``public_key``, the declared key must be that key — so the
   run must be signed. Without one, a valid proof shows consistency (the
   records are in the tree the run's own key signed), not authorship, and the
   result says so.

Reading (`parse_proof`) refuses, as not a proof at all, a file over 1 MiB,
text that is not UTF-8 strict JSON (a duplicate key, ``NaN``, nesting too deep,
an integer too long to parse), a value that is not an object, and an object
without this format's ``format`` field. Checking never raises on such a
value: any other deviation is a problem, one sentence each.

Pure: values in, a `ProofVerification` out; no I/O but `load_proof`'s one read.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, NamedTuple

from audit._checkpoint import checkpoint_origin, parse_checkpoint_note
from audit._errors import NoteError, ProofError
from audit._merkle import leaf_hash, verify_inclusion
from audit._note import verify_note
from audit._parse import parse_record
from audit._signing import NoteVerifier, note_key_hash, raw_public_key, strict_b64decode
from audit._validate import schema_problems
from runtime import (
    CanonicalEncodingError,
    StrictJSONError,
    canonical_bytes,
    loads_strict,
    sha256_hex,
)

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

__all__ = [
    "MAX_AUDIT_PATH",
    "MAX_PROOF_BYTES",
    "PROOF_FORMAT",
    "PROOF_ROLES",
    "InclusionProof",
    "ProofVerification",
    "ProvenRecord",
    "check_proof",
    "load_proof",
    "parse_proof",
]

PROOF_FORMAT: Final = "ghost.inclusion-proof/1"
"""The ``format`` field of this version of the proof document."""

MAX_PROOF_BYTES: Final = 1024 * 1024
"""The largest proof file read (a proof of four records is a few KiB)."""

MAX_AUDIT_PATH: Final = 64
"""The longest audit path accepted: one hash per level of a tree of up to 2**64 leaves."""

PROOF_ROLES: Final[Mapping[str, str]] = {
    "run": "ghost.run/1",
    "assessment": "ghost.assessment/1",
    "decision": "ghost.decision/1",
    "approval": "ghost.approval/1",
}
"""Role of a proven record -> the schema its record must have, in the order ghost writes them."""

_FIELDS: Final = frozenset(
    {"format", "decision_id", "tree_size", "root_hash", "checkpoint_note", "records"}
)
_RECORD_FIELDS: Final = frozenset({"role", "leaf_index", "record", "audit_path"})
_REQUIRED_ROLES: Final = ("run", "decision")
_INT64_MAX: Final = 2**63 - 1
_HEX: Final = frozenset("0123456789abcdef")
_HASH_HEX: Final = 64
# What `.get` returns for a field that is not there: JSON's null is a value, and a wrong one.
_MISSING: Final = object()


@dataclass(frozen=True, slots=True)
class ProvenRecord:
    """One record of a proof: its role, its place in the tree, its bytes, its audit path.

    Attributes:
        role: ``run``, ``assessment``, ``decision`` or ``approval``.
        leaf_index: its leaf in the run's tree: its ``seq``.
        data: its canonical bytes, exactly as the log holds them.
        audit_path: the RFC 6962 audit path from its leaf to the root, from the leaf up.
    """

    role: str
    leaf_index: int
    data: bytes
    audit_path: tuple[bytes, ...]

    def to_json(self) -> dict[str, Any]:
        """Return this record as the proof document holds it."""
        return {
            "role": self.role,
            "leaf_index": self.leaf_index,
            "record": self.data.decode("utf-8"),
            "audit_path": [node.hex() for node in self.audit_path],
        }


@dataclass(frozen=True, slots=True)
class InclusionProof:
    """An inclusion proof as the prover builds it (see the module docstring for the fields).

    Attributes:
        decision_id: the decision proved.
        tree_size: the leaves the checkpoint covers.
        root_hash: their RFC 6962 root (32 bytes).
        checkpoint_note: the checkpoint's note, as the log holds it.
        records: the proven records, in ``seq`` order.
    """

    decision_id: str
    tree_size: int
    root_hash: bytes
    checkpoint_note: str
    records: tuple[ProvenRecord, ...]

    def to_json(self) -> dict[str, Any]:
        """Return the proof document as a JSON object."""
        return {
            "format": PROOF_FORMAT,
            "decision_id": self.decision_id,
            "tree_size": self.tree_size,
            "root_hash": self.root_hash.hex(),
            "checkpoint_note": self.checkpoint_note,
            "records": [record.to_json() for record in self.records],
        }

    def to_bytes(self) -> bytes:
        """Return the proof file's bytes: the document, keys sorted, indented, a final newline."""
        text = json.dumps(self.to_json(), ensure_ascii=False, indent=2, sort_keys=True)
        return (text + "\n").encode("utf-8")


@dataclass(frozen=True, slots=True)
class ProofVerification:
    """What `check_proof` found.

    Attributes:
        problems: why the proof is invalid, one sentence each; empty when valid.
        decision_id: the decision the proof claims (None if it claims none readably).
        verdict: the proven decision's verdict, or None if it could not be read.
        leaf_index: the decision's leaf (its ``seq``), or None likewise.
        tree_size: the checkpoint's size, or None if it could not be read.
        run_id: the run's id, from its ``run`` record, or None likewise.
        signature: what the signature shows (authorship, consistency only, or
            nothing: unsigned), one sentence; empty when it was not checked.
    """

    problems: tuple[str, ...]
    decision_id: str | None
    verdict: str | None
    leaf_index: int | None
    tree_size: int | None
    run_id: str | None
    signature: str

    @property
    def ok(self) -> bool:
        """Whether the proof is valid: no problem found."""
        return not self.problems

    @property
    def summary(self) -> str:
        """One line: valid and what it shows, or invalid and how many problems."""
        if self.problems:
            count = len(self.problems)
            return f"invalid: {count} problem{'s' if count > 1 else ''}; the proof shows nothing"
        return (
            f"valid: decision {self.decision_id} (verdict {self.verdict}) is record seq"
            f" {self.leaf_index} of run {self.run_id}, under a checkpoint of {self.tree_size}"
            f" records; {self.signature}"
        )


def parse_proof(data: bytes) -> Mapping[str, Any]:
    """Parse a proof file's bytes into its document, refusing what is not a proof at all.

    Returns:
        The JSON object; its fields are not checked here but by `check_proof`.

    Raises:
        ProofError: the bytes are over `MAX_PROOF_BYTES`, not UTF-8 strict JSON,
            not an object, or not of format `PROOF_FORMAT`.
    """
    if len(data) > MAX_PROOF_BYTES:
        raise ProofError(
            f"the file is larger than {MAX_PROOF_BYTES} bytes, far larger than a proof"
        )
    try:
        value = loads_strict(data)
    except StrictJSONError as exc:
        raise ProofError(f"the file is not strict JSON: {exc}") from None
    except json.JSONDecodeError as exc:
        raise ProofError(f"the file is not JSON ({exc.msg} at offset {exc.pos})") from None
    except (ValueError, RecursionError) as exc:  # an integer too long, nesting too deep
        raise ProofError(f"the file cannot be parsed as JSON ({type(exc).__name__})") from None
    if not isinstance(value, dict):
        raise ProofError("the file is JSON, but not an object")
    if value.get("format") != PROOF_FORMAT:
        raise ProofError(f"the object has no field format = {PROOF_FORMAT!r}")
    return value


def load_proof(path: str | os.PathLike[str]) -> Mapping[str, Any]:
    """Read and parse a proof file (``ghost verify-proof PROOF.json``); see `parse_proof`.

    Raises:
        ProofError: the file cannot be read, or is not a proof (``.path`` names it).
    """
    source = Path(os.fspath(path))
    try:
        with source.open("rb") as stream:
            data = stream.read(MAX_PROOF_BYTES + 1)
    except OSError as exc:
        raise ProofError(f"it cannot be read ({exc.strerror or exc})", path=source) from None
    try:
        return parse_proof(data)
    except ProofError as exc:
        raise ProofError(exc.problem, path=source) from None


class _Entry(NamedTuple):
    """A record of the document whose bytes, schema and audit path were read."""

    role: str
    leaf_index: int
    data: bytes
    record: Mapping[str, Any]
    audit_path: tuple[bytes, ...]


def check_proof(
    document: Mapping[str, Any], public_key: Ed25519PublicKey | None = None
) -> ProofVerification:
    """Check an inclusion proof document against rules 1-5 of the module docstring.

    Args:
        document: the parsed proof (`parse_proof`, `load_proof`, or `InclusionProof.to_json`).
        public_key: the Ed25519 key the auditor holds; None to check the
            signature against the key the proof's ``run`` record declares.

    Returns:
        The problems found (none when valid) and what the proof shows.
    """
    problems: list[str] = []
    if not isinstance(document, Mapping):
        problems.append("the proof is not a JSON object")
        document = {}
    _exact_fields(document, _FIELDS, "the proof", problems)
    if "format" in document and document["format"] != PROOF_FORMAT:
        problems.append(f"the proof's format is not {PROOF_FORMAT!r}")
    decision_id = _typed(document, "decision_id", str, "the proof", problems)
    tree_size = _size(document.get("tree_size", _MISSING), "tree_size", 1, problems)
    root = _hash(document.get("root_hash", _MISSING), "root_hash", problems)
    entries = _entries(document.get("records", _MISSING), problems)
    if tree_size is not None and root is not None:
        problems.extend(
            f"the {entry.role} record's audit path does not lead from leaf"
            f" {entry.leaf_index} to root_hash in a tree of {tree_size} leaves"
            for entry in entries.values()
            if not verify_inclusion(
                leaf_hash(entry.data), entry.leaf_index, tree_size, entry.audit_path, root
            )
        )
    run, decision = entries.get("run"), entries.get("decision")
    if run is not None and run.leaf_index != 0:
        problems.append(f"the run record is leaf {run.leaf_index}; a run's /run record is seq 0")
    run_id = None if run is None else run.record["run_id"]
    _check_note(document.get("checkpoint_note", _MISSING), tree_size, root, run_id, problems)
    if decision is not None:
        _check_links(decision, entries, decision_id, problems)
    signature = "" if run is None else _check_signature(document, run, public_key, problems)
    return ProofVerification(
        problems=tuple(problems),
        decision_id=decision_id,
        verdict=None if decision is None else decision.record["verdict"],
        leaf_index=None if decision is None else decision.leaf_index,
        tree_size=tree_size,
        run_id=run_id,
        signature=signature,
    )


def _exact_fields(
    value: Mapping[str, Any], fields: frozenset[str], what: str, problems: list[str]
) -> None:
    missing = sorted(fields - value.keys())
    extra = sorted(str(key)[:40] for key in value.keys() - fields)
    if missing:
        problems.append(f"{what} lacks the field(s) {', '.join(missing)}")
    if extra:
        problems.append(f"{what} has unknown field(s) {', '.join(extra)}")


def _typed(
    value: Mapping[str, Any], field: str, kind: type[str], what: str, problems: list[str]
) -> str | None:
    item = value.get(field)
    if type(item) is kind:
        return item
    if field in value:
        problems.append(f"{what}'s {field} is not a {kind.__name__}")
    return None


def _size(value: object, what: str, minimum: int, problems: list[str]) -> int | None:
    # Exact types: JSON's true is not 1, and a Python caller's int subclass is not trusted.
    if type(value) is int and minimum <= value <= _INT64_MAX:
        return value
    if value is not _MISSING:
        problems.append(f"{what} is not an integer from {minimum} to 2**63 - 1")
    return None


def _hash(value: object, what: str, problems: list[str]) -> bytes | None:
    if type(value) is str and len(value) == _HASH_HEX and set(value) <= _HEX:
        return bytes.fromhex(value)
    if value is not _MISSING:
        problems.append(f"{what} is not a SHA-256 hash in lowercase hex")
    return None


def _entries(value: object, problems: list[str]) -> dict[str, _Entry]:
    if type(value) is not list:
        if value is not _MISSING:
            problems.append("records is not an array")
        return {}
    entries: dict[str, _Entry] = {}
    for number, item in enumerate(value[: len(PROOF_ROLES) + 1]):
        entry = _entry(item, f"records[{number}]", problems)
        if entry is None:
            continue
        if entry.role in entries:
            problems.append(f"records[{number}] is a second {entry.role} record")
        else:
            entries[entry.role] = entry
    if len(value) > len(PROOF_ROLES):
        problems.append(f"records holds more than {len(PROOF_ROLES)} records")
    problems.extend(
        f"records holds no {role} record" for role in _REQUIRED_ROLES if role not in entries
    )
    if list(entries) != [role for role in PROOF_ROLES if role in entries]:
        problems.append(f"records are not in the order {', '.join(PROOF_ROLES)}")
    return entries


def _entry(item: object, where: str, problems: list[str]) -> _Entry | None:
    if not isinstance(item, dict):
        problems.append(f"{where} is not an object")
        return None
    _exact_fields(item, _RECORD_FIELDS, where, problems)
    role = item.get("role")
    if type(role) is not str or role not in PROOF_ROLES:
        problems.append(f"{where}'s role is not one of {', '.join(PROOF_ROLES)}")
        return None
    schema = PROOF_ROLES[role]
    where = f"the {role} record ({where})"
    index = _size(item.get("leaf_index", _MISSING), f"{where}'s leaf_index", 0, problems)
    path = _audit_path(item.get("audit_path", _MISSING), where, problems)
    text = _typed(item, "record", str, where, problems)
    if index is None or path is None or text is None:
        return None
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError:
        problems.append(f"{where} is not valid UTF-8 text (it holds a lone surrogate)")
        return None
    record, problem = parse_record(data)
    if record is None:
        problems.append(f"{where}: {problem}")
        return None
    try:
        canonical = canonical_bytes(record) == data
    except CanonicalEncodingError:
        canonical = False
    if not canonical:
        problems.append(f"{where} is not in canonical form (SPEC §5): it is not the log's bytes")
        return None
    if record.get("schema") != schema:
        problems.append(f"{where} is not a {schema} record")
        return None
    found = schema_problems(record)
    if found:
        problems.append(f"{where} breaks its schema: {'; '.join(found[:3])}")
        return None
    if record["seq"] != index:
        problems.append(f"{where} has seq {record['seq']}, but leaf_index {index}")
        return None
    return _Entry(role=role, leaf_index=index, data=data, record=record, audit_path=path)


def _audit_path(value: object, where: str, problems: list[str]) -> tuple[bytes, ...] | None:
    if type(value) is not list or len(value) > MAX_AUDIT_PATH:
        if value is not _MISSING:
            problems.append(
                f"{where}'s audit_path is not an array of at most {MAX_AUDIT_PATH} hashes"
            )
        return None
    nodes: list[bytes] = []
    for number, node in enumerate(value):
        parsed = _hash(node, f"{where}'s audit_path[{number}]", problems)
        if parsed is None:
            return None
        nodes.append(parsed)
    return tuple(nodes)


def _check_note(
    note: object,
    tree_size: int | None,
    root: bytes | None,
    run_id: str | None,
    problems: list[str],
) -> None:
    if type(note) is not str:
        if note is not _MISSING:
            problems.append("checkpoint_note is not a string")
        return
    try:
        checkpoint = parse_checkpoint_note(note).checkpoint
    except NoteError as exc:
        problems.append(f"checkpoint_note is not a checkpoint note: {exc.problem}")
        return
    if checkpoint.tree_size != tree_size:
        problems.append(f"the checkpoint note is for {checkpoint.tree_size} leaves, not tree_size")
    if checkpoint.root_hash != root:
        problems.append("the checkpoint note's root is not root_hash")
    if run_id is not None and checkpoint.origin != checkpoint_origin(run_id):
        problems.append("the checkpoint note's origin is not the run's (ghost.run/<run_id>)")


def _check_links(
    decision: _Entry,
    entries: Mapping[str, _Entry],
    decision_id: str | None,
    problems: list[str],
) -> None:
    record = decision.record
    if record["decision_id"] != decision_id:
        problems.append("the decision record's decision_id is not the proof's decision_id")
    assessment, approval = entries.get("assessment"), entries.get("approval")
    claimed = record["assessment_sha256"]
    if assessment is None:
        if claimed is not None:
            problems.append("the decision names an assessment, and the proof holds none")
    elif sha256_hex(assessment.data) != claimed:
        problems.append(
            "the assessment record is not the one the decision's assessment_sha256 names"
        )
    elif assessment.record["decision_id"] != record["decision_id"]:
        problems.append("the assessment record is for another decision_id")
    if approval is not None:
        if approval.record["decision_id"] != record["decision_id"]:
            problems.append("the approval record is for another decision_id")
        if approval.record["decision_sha256"] != sha256_hex(decision.data):
            problems.append("the approval record's decision_sha256 is not the decision's address")


def _check_signature(
    document: Mapping[str, Any],
    run: _Entry,
    public_key: Ed25519PublicKey | None,
    problems: list[str],
) -> str:
    try:
        # A value that is not a string is a `NoteError` too.
        note = parse_checkpoint_note(document.get("checkpoint_note", "")).note
    except NoteError:
        note = None  # already a problem of `_check_note`
    signatures = () if note is None else note.signatures
    signing = run.record["signing"]
    if signing is None:
        if signatures:
            problems.append("the checkpoint note is signed, but the run declares no signing key")
        if public_key is not None:
            problems.append(
                "a public key was given, but the run is unsigned: nothing shows who wrote it"
            )
        return (
            "the checkpoint is unsigned: this shows the records are consistent with the note,"
            " not who wrote them (compare the note with an anchor you hold)"
        )
    declared = strict_b64decode(signing["public_key"])
    if declared is None:  # the schema's pattern lets stray low bits through
        problems.append("the run's signing public_key is not canonical base64")
        return "the checkpoint signature was not checked: the run's declared key is unreadable"
    if sha256_hex(declared) != signing["key_id"]:
        problems.append("the run's signing key_id is not the SHA-256 of its public_key")
    raw = declared if public_key is None else raw_public_key(public_key)
    if raw != declared:
        problems.append(
            f"the run declares the signing key {signing['key_id']}, not the public key given"
            f" ({sha256_hex(raw)})"
        )
    if note is not None:
        if len(signatures) != 1:
            problems.append(
                f"the checkpoint note carries {len(signatures)} signatures, not the run key's one"
            )
        name = signing["key_name"]
        verifier = NoteVerifier(name=name, public_key=raw, key_hash=note_key_hash(name, raw))
        try:
            verify_note(note, (verifier,))
        except NoteError as exc:
            problems.append(f"the checkpoint signature does not verify: {exc.problem}")
    if public_key is not None:
        return f"signed by the public key given (key id {sha256_hex(raw)}): authorship shown"
    return (
        f"signed by the key the run itself declares (key id {signing['key_id']}), which shows"
        " consistency, not authorship: give --public-key to check who signed"
    )
