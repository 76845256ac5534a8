"""`verify_run`: every integrity check of a captured run, in one streaming pass (SPEC §6, ADR 0013).

1. The reader streams the file once (`audit.iter_run`), holding at most one
   chunk; a file that is not a ghost audit log at all raises
   `audit.LogFormatError` (the reader alone decides what is ghost's, ADR
   0012: a ghost channel, a ghost record, a ghost Header; a file cut before
   any record is a crash right after the sink opened it, so truncated).
   Every problem the reader reports — a CRC that does not match or is zero
   (ghost always writes them), a damaged chunk, a foreign or malformed
   channel, bytes after the end — is an integrity problem
   (`IntegrityCheck.FILE` for the CRC fields ghost always writes,
   `IntegrityCheck.READER` for the rest).
2. Each channel the reader resolves is checked against ghost's layout: a
   schema named after a ghost record schema carries that schema's canonical
   JSON (`audit.SCHEMAS`, canonically encoded), byte for byte.
3. Each record is decoded once (`read_facts`: JSON, schema, canonical
   bytes, content address) and handed, in file order, to every check of
   `make_checks`; at the end each check reports what only the end can tell.
   Nothing but the current record and each check's bounded state is held
   (attachments are kept without their bytes).
4. The status follows from the facts (`RunStatus`): any problem is
   ``tampered``; otherwise a run that is unsealed or whose file has no
   footer is ``truncated``; otherwise ``intact``.

The verified prefix counts the records, from the first, that passed every
check made as they were read (their own form, ``seq``, the chain, the seal,
MCAP fields, the links to earlier records, the checkpoints). Problems only
the end of the run reveals — an assessment no decision claimed, the policy
attachment, a missing seal, an anchor — are about the run as a whole and do
not shorten it.

Reads no clock and no randomness: the same file gives the same result.
"""

from __future__ import annotations

import dataclasses
import os
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from analysis._run_facts import (
    APPROVALS_TOPIC,
    ASSESSMENTS_TOPIC,
    CHECKPOINTS_TOPIC,
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
    RunWriter,
    status_of,
)

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    from audit import CheckpointNote, LoggedAttachment, LoggedChannel, ReadProblem, RunItem

__all__ = ["KNOWN_TOPICS", "make_checks", "verify_items", "verify_run"]

KNOWN_TOPICS = frozenset(
    {RUN_TOPIC, CHECKPOINTS_TOPIC, ASSESSMENTS_TOPIC, DECISIONS_TOPIC, APPROVALS_TOPIC, SEAL_TOPIC}
)
"""The topics whose records this verifier knows how to check."""

_SCHEMA_ENCODING: Final = "jsonschema"
_CRC_KINDS: Final = frozenset({"crc_missing"})
"""Reader kinds about the CRC fields ghost always writes (`IntegrityCheck.FILE`)."""


def verify_run(
    path: str | os.PathLike[str],
    public_key: Ed25519PublicKey | None = None,
    anchors: Iterable[str | CheckpointNote] = (),
) -> RunVerification:
    """Check every record of a captured run and say whether it is intact, truncated or tampered.

    Args:
        path: the MCAP file a ghost audit sink wrote.
        public_key: the Ed25519 key the auditor expects the run's checkpoint
            notes to be signed with. Given, every note must carry a valid
            signature by it; without it, notes are checked against the key
            the run declares (consistency, not authorship).
        anchors: checkpoint notes the auditor holds from outside the file,
            as text (each exactly as emitted) or parsed
            (`audit.parse_checkpoint_note`); the file's tree at each one's
            size must have its root.

    Returns:
        The verification: `RunVerification.ok` is True only for an intact,
        sealed run in a complete file.

    Raises:
        audit.LogFormatError: the file is missing, unreadable, not MCAP, cut
            inside its magic, or not a ghost audit log (no ghost channel and
            no ghost record).
        audit.NoteError: an anchor is not a checkpoint note.
        TypeError: ``public_key`` is not an ``Ed25519PublicKey``, or an
            anchor is neither text nor a `audit.CheckpointNote`.
    """
    from audit import iter_run

    _check_public_key(public_key)
    notes = tuple(_anchor_note(anchor) for anchor in anchors)
    return verify_items(iter_run(Path(path)), public_key=public_key, anchors=notes)


def make_checks(
    public_key: Ed25519PublicKey | None, anchors: Sequence[CheckpointNote]
) -> tuple[RecordCheck, ...]:
    """Return a fresh set of the record checks, in the order their problems are listed.

    This list is the verifier's plug-in point: a new kind of record or proof
    is one more `RecordCheck` here (and its topic one more of `KNOWN_TOPICS`).
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


def verify_items(
    items: Iterable[RunItem],
    *,
    public_key: Ed25519PublicKey | None = None,
    anchors: Sequence[CheckpointNote] = (),
) -> RunVerification:
    """Verify a run as `audit.iter_run` streams it (see `verify_run`), consuming ``items`` once.

    Returns:
        The verification (see `verify_run`).

    Raises:
        audit.LogFormatError: as `verify_run`.
    """
    from audit import TOPICS, LoggedAttachment, LoggedChannel, LoggedRecord, ReadEnd

    problems = _Problems()
    checks = make_checks(public_key, anchors)
    links = next(check for check in checks if isinstance(check, DecisionLinkCheck))
    checkpoints = next(check for check in checks if isinstance(check, CheckpointCheck))
    counts: Counter[str] = Counter()
    attachments: list[LoggedAttachment] = []
    last: RecordFacts | None = None
    head: RecordFacts | None = None
    first: RecordFacts | None = None
    prefix_open = True
    verified_prefix = 0
    verified_head: str | None = None
    position = 0
    end: ReadEnd | None = None
    for item in items:
        if isinstance(item, LoggedRecord):
            facts, found = read_facts(position, item, TOPICS)
            for check in checks:
                found.extend(check.visit(facts))
            problems.records(found)
            if prefix_open and not found:
                verified_prefix = position + 1
                verified_head = facts.address
            prefix_open = prefix_open and not found
            counts[facts.topic] += 1
            first = facts if first is None else first
            head, last = last, facts
            position += 1
        elif isinstance(item, LoggedChannel):
            problems.file(_schema_problems(item))
        elif isinstance(item, LoggedAttachment):
            # Only its name, hash and times are checked: its bytes are not held.
            attachments.append(dataclasses.replace(item, data=b""))
        elif isinstance(item, ReadEnd):
            end = item
        else:
            problems.file((_reader_problem(item),))
    assert end is not None  # iter_run always ends with a ReadEnd

    sealed = seals_the_run(last, head)
    run_end = RunEnd(
        record_count=position,
        truncated=end.truncated,
        sealed=sealed,
        attachments=tuple(attachments),
    )
    for check in checks:
        problems.records(check.finish(run_end))

    run = first.record if first is not None and first.topic == RUN_TOPIC else None
    run_id = run.get("run_id") if run is not None else None
    signing = run.get("signing") if run is not None else None
    return RunVerification(
        path=end.path,
        source_sha256=end.source_sha256,
        status=status_of(problems=problems.count > 0, sealed=sealed, truncated=end.truncated),
        problems=problems.kept(),
        problem_count=problems.count,
        truncated=end.truncated,
        sealed=sealed,
        record_count=position,
        verified_prefix=verified_prefix,
        verified_head_sha256=verified_head,
        per_topic_counts=counts,
        run_id=run_id if is_uuid(run_id) else None,
        open_assessments=links.open_assessments,
        signed=signing is not None,
        checkpoint_count=checkpoints.checkpoint_count,
        signatures=checkpoints.signatures,
        anchors_checked=len(anchors),
        anchors_matched=checkpoints.anchors_matched,
        writer=_writer(run),
    )


def _writer(run: Mapping[str, Any] | None) -> RunWriter | None:
    """The daemon and agent a ``/run`` record names (ADR 0034), when it names both."""
    if run is None:
        return None
    writer, peer = run.get("writer"), run.get("peer")
    ids = ("pid", "uid", "gid")
    if not (isinstance(writer, Mapping) and isinstance(peer, Mapping)):
        return None
    found = [writer.get(key) for key in ids] + [peer.get(key) for key in ids]
    values = [value for value in found if type(value) is int]
    if len(values) != len(found):
        return None  # the schema check reports it
    pid, uid, gid, peer_pid, peer_uid, peer_gid = values
    follows = run.get("follows")
    if not isinstance(follows, Mapping):
        return RunWriter(pid, uid, gid, peer_pid, peer_uid, peer_gid)
    run_id, count, head = (follows.get(k) for k in ("run_id", "record_count", "head_sha256"))
    if not isinstance(run_id, str) or type(count) is not int or not isinstance(head, str):
        return RunWriter(pid, uid, gid, peer_pid, peer_uid, peer_gid)  # the schema check says so
    return RunWriter(pid, uid, gid, peer_pid, peer_uid, peer_gid, run_id, count, head)


def _schema_problems(channel: LoggedChannel) -> Iterator[RunProblem]:
    """A channel whose schema is named ``ghost.*`` carries exactly that schema's bytes.

    Exactly: the current bytes (`audit.schema_versions`), or the bytes the
    same schema had before it gained an optional field, which earlier runs carry.

    The reader resolves each channel once (its first definition), so each
    channel is named at most once, however often the summary repeats it.
    """
    from audit import SCHEMAS, schema_versions

    name, data = channel.schema_name, channel.schema_data
    if name is None or data is None or name not in SCHEMAS:
        return
    # The current bytes, or those of before an optional field was added (ADR 0031).
    accepted = schema_versions(name)
    expected = accepted[0]
    if channel.schema_encoding != _SCHEMA_ENCODING or data not in accepted:
        yield RunProblem(
            IntegrityCheck.FILE,
            f"schema {channel.schema_id} is named {name} but does not carry that ghost"
            f" schema ({len(data)} bytes of {channel.schema_encoding or 'no'} encoding,"
            f" expected {len(expected)} bytes of {_SCHEMA_ENCODING}): it was emptied or"
            " altered",
        )


class _Problems:
    """The problems found: all counted; the file's first, then by record; so many kept."""

    __slots__ = ("_file", "_records", "count")

    def __init__(self) -> None:
        self._file: list[RunProblem] = []
        self._records: list[RunProblem] = []
        self.count = 0

    def file(self, found: Iterable[RunProblem]) -> None:
        self._take(self._file, found)

    def records(self, found: Iterable[RunProblem]) -> None:
        self._take(self._records, found)

    def _take(self, into: list[RunProblem], found: Iterable[RunProblem]) -> None:
        for problem in found:
            self.count += 1
            if len(self._file) + len(self._records) < MAX_LISTED_PROBLEMS:
                into.append(problem)

    def kept(self) -> tuple[RunProblem, ...]:
        return (*self._file, *self._records)


def _reader_problem(problem: ReadProblem) -> RunProblem:
    check = IntegrityCheck.FILE if problem.kind in _CRC_KINDS else IntegrityCheck.READER
    return RunProblem(check, problem.message)


def _anchor_note(anchor: object) -> CheckpointNote:
    from audit import CheckpointNote, parse_checkpoint_note

    if isinstance(anchor, CheckpointNote):
        return anchor
    if not isinstance(anchor, str):
        raise TypeError(
            f"an anchor is a checkpoint note, as text or parsed, not {type(anchor).__name__}"
        )
    return parse_checkpoint_note(anchor)


def _check_public_key(public_key: object) -> None:
    if public_key is None:
        return
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    if not isinstance(public_key, Ed25519PublicKey):
        raise TypeError(
            "public_key must be an Ed25519PublicKey (from cryptography),"
            f" not {type(public_key).__name__}"
        )
