"""ghost audit: the record format, the MCAP audit log, and what makes it provable.

A gate hands each record to an `AuditSink`; the sinks here chain the records
(``seq``, ``prev_sha256``), build the run's RFC 6962 Merkle tree as they go,
write ``/checkpoints`` records whose C2SP notes commit to it (signed with an
Ed25519 key when given one, and emitted as anchors outside the file), and
store canonical bytes: `McapAuditSink` in an MCAP file, `MemoryAuditSink` in
memory for tests; `SocketAuditSink` hands them to an `AuditDaemon` (``ghost
audit-daemon``) in another process, which owns the file and the key.
`iter_run` streams a log back, whatever state it is in, within fixed memory
bounds (`ReadLimits`), for the verifier, and `read_run` collects it into a
`RunLog` for the analyzer; the Merkle, note and key functions here are what
the verifier and the prover check a log with.
`build_inclusion_proof` proves one decision is in a run, and `check_proof`
checks such a proof without the run.
"""

# ruff: noqa: E402 -- the package's imports run after the shadowing check, on purpose

from __future__ import annotations

from audit import _shadow

# Before the first import of runtime: a foreign `runtime` must fail here, by name (ADR 0029).
_shadow.require_ghost_package("runtime")

from audit._chain import Durability
from audit._checkpoint import (
    CheckpointNote,
    checkpoint_origin,
    load_checkpoint_note,
    make_checkpoint_note,
    parse_checkpoint_note,
)
from audit._compiled_schemas import schema_valid
from audit._daemon import AuditDaemon
from audit._errors import KeyFileError, LogFormatError, NoteError, ProofError
from audit._mcap_sink import McapAuditSink
from audit._memory_sink import AuditEntry, MemoryAuditSink
from audit._merkle import (
    EMPTY_ROOT,
    CompactRange,
    consistency_proof,
    inclusion_proof,
    leaf_hash,
    node_hash,
    tree_root,
    verify_consistency,
    verify_inclusion,
)
from audit._note import (
    Checkpoint,
    Note,
    NoteSignature,
    NoteVerification,
    format_note,
    parse_checkpoint,
    parse_note,
    verify_note,
)
from audit._problems import DEFAULT_LIMITS, CrcStatus, ProblemKind, ReadLimits, ReadProblem
from audit._proof import (
    MAX_AUDIT_PATH,
    MAX_PROOF_BYTES,
    PROOF_FORMAT,
    PROOF_ROLES,
    InclusionProof,
    ProofVerification,
    ProvenRecord,
    check_proof,
    load_proof,
    parse_proof,
)
from audit._prove import build_inclusion_proof
from audit._reader import iter_run, read_run
from audit._run_log import (
    LoggedAttachment,
    LoggedChannel,
    LoggedRecord,
    ReadEnd,
    RunItem,
    RunLog,
)
from audit._schemas import SCHEMAS, SEAL_ENDINGS, TOPICS, schema_versions
from audit._signing import (
    KeyPairFiles,
    NoteSigner,
    NoteVerifier,
    default_key_name,
    generate_key_pair,
    key_id,
    load_private_key,
    load_public_key,
)
from audit._socket_sink import SocketAuditSink
from audit._validate import schema_problems
from runtime import _version

__version__ = _version.SDK_VERSION
"""The installed ghost-sdk version; one source, the distribution's metadata (runtime._version)."""

__all__ = [
    "DEFAULT_LIMITS",
    "EMPTY_ROOT",
    "MAX_AUDIT_PATH",
    "MAX_PROOF_BYTES",
    "PROOF_FORMAT",
    "PROOF_ROLES",
    "SCHEMAS",
    "SEAL_ENDINGS",
    "TOPICS",
    "AuditDaemon",
    "AuditEntry",
    "Checkpoint",
    "CheckpointNote",
    "CompactRange",
    "CrcStatus",
    "Durability",
    "InclusionProof",
    "KeyFileError",
    "KeyPairFiles",
    "LogFormatError",
    "LoggedAttachment",
    "LoggedChannel",
    "LoggedRecord",
    "McapAuditSink",
    "MemoryAuditSink",
    "Note",
    "NoteError",
    "NoteSignature",
    "NoteSigner",
    "NoteVerification",
    "NoteVerifier",
    "ProblemKind",
    "ProofError",
    "ProofVerification",
    "ProvenRecord",
    "ReadEnd",
    "ReadLimits",
    "ReadProblem",
    "RunItem",
    "RunLog",
    "SocketAuditSink",
    "build_inclusion_proof",
    "check_proof",
    "checkpoint_origin",
    "consistency_proof",
    "default_key_name",
    "format_note",
    "generate_key_pair",
    "inclusion_proof",
    "iter_run",
    "key_id",
    "leaf_hash",
    "load_checkpoint_note",
    "load_private_key",
    "load_proof",
    "load_public_key",
    "make_checkpoint_note",
    "node_hash",
    "parse_checkpoint",
    "parse_checkpoint_note",
    "parse_note",
    "parse_proof",
    "read_run",
    "schema_problems",
    "schema_valid",
    "schema_versions",
    "tree_root",
    "verify_consistency",
    "verify_inclusion",
    "verify_note",
]
