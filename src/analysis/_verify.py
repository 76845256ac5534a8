"""`verify_run`: every integrity check of a captured run, in one pass (SPEC §6, ADR 0013).

1. The reader reads the file (`audit.read_run`); a file that is not a ghost
   audit log at all raises `audit.LogFormatError`. Every problem the reader
   reports — a CRC mismatch, a damaged chunk, a foreign or malformed
   channel, bytes after the end — is an integrity problem.
2. The structure pass checks what the reader does not yet: zero CRCs and
   the ghost schema bytes (`analysis._mcap_structure`, a seam).
3. Each record is decoded once (`read_facts`: JSON, schema, canonical
   bytes, content address) and handed, in file order, to every check of
   `make_checks`; at the end each check reports what only the end can tell.
4. The status follows from the facts (`RunStatus`): any problem is
   ``tampered``; otherwise a run that is unsealed or whose file has no
   footer is ``truncated``; otherwise ``intact``.

The verified prefix counts the records, from the first, that passed every
check made as they were read (their own form, ``seq``, the chain, the seal,
MCAP fields, the links to earlier records). Problems only the end of the
run reveals — an assessment no decision claimed, the policy attachment, a
missing seal — are about the run as a whole and do not shorten it.

Reads no clock and no randomness: the same file gives the same result.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from analysis._run_facts import (
    APPROVALS_TOPIC,
    ASSESSMENTS_TOPIC,
    DECISIONS_TOPIC,
    RUN_TOPIC,
    SEAL_TOPIC,
    RecordCheck,
    RecordFacts,
    RunEnd,
    is_uuid,
    read_facts,
    seals_the_run,
)
from analysis._verify_chain import (
    ChainCheck,
    KnownTopicsCheck,
    McapFieldsCheck,
    RunRecordCheck,
    SealCheck,
    SeqCheck,
)
from analysis._verify_checkpoints import CheckpointCheck
from analysis._verify_links import DecisionLinkCheck, PolicyAttachmentCheck
from analysis._verify_model import (
    MAX_LISTED_PROBLEMS,
    IntegrityCheck,
    RunProblem,
    RunVerification,
    status_of,
)

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    from analysis._mcap_structure import McapStructure
    from audit import RunLog

__all__ = ["KNOWN_TOPICS", "make_checks", "verify_run", "verify_run_log"]

KNOWN_TOPICS = frozenset(
    {RUN_TOPIC, ASSESSMENTS_TOPIC, DECISIONS_TOPIC, APPROVALS_TOPIC, SEAL_TOPIC}
)
"""The topics whose records this verifier knows how to check."""


def verify_run(
    path: str | os.PathLike[str],
    public_key: Ed25519PublicKey | None = None,
    anchors: Iterable[str] = (),
) -> RunVerification:
    """Check every record of a captured run and say whether it is intact, truncated or tampered.

    Args:
        path: the MCAP file a ghost audit sink wrote.
        public_key: the Ed25519 key the auditor expects the run's checkpoints
            to be signed with. This version cannot check checkpoints yet, so
            a key given is reported as a problem rather than passed unchecked.
        anchors: checkpoint notes the auditor holds from outside the file,
            as text; likewise reported as not checked.

    Returns:
        The verification: `RunVerification.ok` is True only for an intact,
        sealed run in a complete file.

    Raises:
        audit.LogFormatError: the file is missing, unreadable, not MCAP, cut
            inside its magic, or not a ghost audit log (no ghost channel and
            no ghost record).
        TypeError: ``public_key`` is not an ``Ed25519PublicKey``, or an
            anchor is not a string.
    """
    from analysis._mcap_structure import scan_structure
    from audit import SCHEMAS, TOPICS, LogFormatError, read_run

    _check_public_key(public_key)
    notes = tuple(anchors)
    for note in notes:
        if not isinstance(note, str):
            raise TypeError(f"an anchor is a checkpoint note as text, not {type(note).__name__}")
    run = read_run(Path(path))
    structure = scan_structure(run.path, complete=not run.truncated, topics=TOPICS, schemas=SCHEMAS)
    if not run.records and not structure.ghost_channels:
        raise LogFormatError(
            run.path, "it is not a ghost audit log: it holds no ghost channel and no ghost record"
        )
    return verify_run_log(run, structure, public_key=public_key, anchors=notes)


def make_checks(
    public_key: Ed25519PublicKey | None, anchors: Sequence[str]
) -> tuple[RecordCheck, ...]:
    """Return a fresh set of the record checks, in the order their problems are listed.

    This list is the verifier's plug-in point: a new kind of record or proof
    is one more `RecordCheck` here. The checkpoint work of SPEC §5 (Merkle
    roots, note signatures, anchors) goes into `CheckpointCheck`, and
    ``/checkpoints`` joins `KNOWN_TOPICS` when it does.
    """
    return (
        KnownTopicsCheck(KNOWN_TOPICS),
        RunRecordCheck(),
        SeqCheck(),
        ChainCheck(),
        SealCheck(),
        McapFieldsCheck(),
        DecisionLinkCheck(),
        PolicyAttachmentCheck(),
        CheckpointCheck(public_key, anchors),
    )


def verify_run_log(
    run: RunLog,
    structure: McapStructure,
    *,
    public_key: Ed25519PublicKey | None = None,
    anchors: Sequence[str] = (),
) -> RunVerification:
    """Verify a run already read with `audit.read_run` and scanned with `scan_structure`.

    Returns:
        The verification (see `verify_run`).
    """
    from audit import TOPICS

    problems = _Problems()
    # Seam: the reader reports sentences today; when it reports problems by
    # kind (and naming records), map each kind to its check and record here.
    problems.extend(RunProblem(IntegrityCheck.READER, text) for text in run.problems)
    problems.extend(structure.problems)

    checks = make_checks(public_key, anchors)
    links = next(check for check in checks if isinstance(check, DecisionLinkCheck))
    counts: Counter[str] = Counter()
    last: RecordFacts | None = None
    head: RecordFacts | None = None
    prefix_open = True
    verified_prefix = 0
    verified_head: str | None = None
    for position, logged in enumerate(run.records):
        facts, found = read_facts(position, logged, TOPICS)
        for check in checks:
            found.extend(check.visit(facts))
        problems.extend(found)
        if prefix_open and not found:
            verified_prefix = position + 1
            verified_head = facts.address
        prefix_open = prefix_open and not found
        counts[facts.topic] += 1
        head, last = last, facts

    sealed = seals_the_run(last, head)
    end = RunEnd(
        record_count=len(run.records),
        truncated=run.truncated,
        sealed=sealed,
        attachments=run.attachments,
    )
    for check in checks:
        problems.extend(check.finish(end))

    first = run.records[0].record if run.records and run.records[0].topic == RUN_TOPIC else None
    run_id = first.get("run_id") if first is not None else None
    signing = first.get("signing") if first is not None else None
    return RunVerification(
        path=run.path,
        source_sha256=run.source_sha256,
        status=status_of(problems=problems.count > 0, sealed=sealed, truncated=run.truncated),
        problems=tuple(problems.kept),
        problem_count=problems.count,
        truncated=run.truncated,
        sealed=sealed,
        record_count=len(run.records),
        verified_prefix=verified_prefix,
        verified_head_sha256=verified_head,
        per_topic_counts=counts,
        run_id=run_id if is_uuid(run_id) else None,
        open_assessments=links.open_assessments,
        signed=signing is not None,
    )


class _Problems:
    """The problems found: all counted, the first `MAX_LISTED_PROBLEMS` kept."""

    __slots__ = ("count", "kept")

    def __init__(self) -> None:
        self.kept: list[RunProblem] = []
        self.count = 0

    def extend(self, found: Iterable[RunProblem]) -> None:
        for problem in found:
            self.count += 1
            if len(self.kept) < MAX_LISTED_PROBLEMS:
                self.kept.append(problem)


def _check_public_key(public_key: object) -> None:
    if public_key is None:
        return
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    if not isinstance(public_key, Ed25519PublicKey):
        raise TypeError(
            "public_key must be an Ed25519PublicKey (from cryptography),"
            f" not {type(public_key).__name__}"
        )
