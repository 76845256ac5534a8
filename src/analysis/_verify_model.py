"""The values of run verification: which check found what, and the verdict on a run (ADR 0013).

A verification ends in one of three statuses, and the status decides the
exit code of ``ghost verify``:

1. **tampered** — at least one problem: a record that does not parse, breaks
   its schema or is not in canonical bytes, a ``seq`` gap or repeat, a broken
   ``prev_sha256`` link, a wrong or missing seal on a complete file, anything
   after the seal, MCAP fields that disagree with the record, a policy
   attachment that does not match ``/run``, a decision that does not rest on
   its assessment, a zeroed CRC, a damaged or altered file (exit 3).
2. **truncated** — no problem, but the run is not finished: the file ends
   before its MCAP footer, as a crash leaves it, so the records read are a
   gapless, correctly linked prefix from ``seq`` 0 (exit 4). A file cut after
   its seal is truncated too: sealed, but not intact.
3. **intact** — no problem, sealed, and the file is complete (exit 0).

Every value here checks itself on construction, so a status can never
contradict the facts it stands on.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Final

from analysis._trace_model import FrozenCounts

__all__ = [
    "MAX_LISTED_PROBLEMS",
    "IntegrityCheck",
    "RunProblem",
    "RunStatus",
    "RunVerification",
    "RunWriter",
    "SignatureCheck",
    "status_of",
]

_SHA256_HEX: Final = re.compile(r"[0-9a-f]{64}")

MAX_LISTED_PROBLEMS: Final = 1000
"""At most this many problems are kept in `RunVerification.problems` (all are counted)."""


class IntegrityCheck(StrEnum):
    """Which check found a problem. Closed; each value names one rule of ADR 0013."""

    READER = "reader"
    """The audit reader found the file damaged (a CRC mismatch, an unparsable record, ...)."""
    FILE = "file"
    """The MCAP structure ghost always writes: non-zero CRCs, the ghost channel schemas."""
    JSON = "json"
    """A message is a strict JSON object."""
    SCHEMA = "schema"
    """A record matches the ghost schema of its topic."""
    CANONICAL = "canonical"
    """A record is stored in its canonical bytes (ADR 0003)."""
    TOPIC = "topic"
    """A record is on a topic this verifier knows how to check."""
    SEQ = "seq"
    """``seq`` starts at 0 and goes up by one per record, in file order."""
    CHAIN = "chain"
    """``prev_sha256`` is the content address of the record before it."""
    RUN = "run"
    """The ``/run`` record is the first record, and the only one."""
    SEAL = "seal"
    """The ``/seal`` record counts and names the records before it, and is last."""
    MCAP = "mcap"
    """MCAP ``log_time`` is the record's ``stamp_ns``, ``sequence`` its ``seq`` mod 2^32."""
    ATTACHMENT = "attachment"
    """The policy attachment is the source ``/run`` names by ``policy_source_sha256``."""
    LINKS = "links"
    """Assessments, decisions and approvals refer to each other by id and content address."""
    CHECKPOINT = "checkpoint"
    """Checkpoints: their place, Merkle roots, heads, notes and note signatures."""
    ANCHOR = "anchor"
    """Tree heads the auditor holds from outside the file match the file's tree."""


class SignatureCheck(StrEnum):
    """Against which key the checkpoint notes' signatures were checked. Closed."""

    GIVEN_KEY = "given_key"
    """The auditor's key (``--public-key``): a valid signature shows who wrote the log."""
    DECLARED_KEY = "declared_key"
    """The key the run declares in ``/run``: consistency, not authorship."""
    UNSIGNED = "unsigned"
    """No key given, and the run declares none: nothing was signed."""


class RunStatus(StrEnum):
    """The verdict on a run. Closed."""

    INTACT = "intact"
    """Every check passed, the run is sealed and the file complete (exit 0)."""
    TRUNCATED = "truncated"
    """No problem, but the run ends early, as a crash leaves it (exit 4)."""
    TAMPERED = "tampered"
    """At least one integrity problem: tampered or corrupted (exit 3)."""


@dataclass(frozen=True, slots=True)
class RunProblem:
    """One thing wrong with a run, naming the record it is about.

    Attributes:
        check: the check that found it.
        message: what is wrong, as a sentence (no record content beyond
            hashes, numbers and names the verifier has validated).
        position: the record's index in file order (0-based), or None when
            the problem is about the file or the run as a whole.
        seq: the record's ``seq`` as stored, when it has a readable one.
        topic: the record's topic.
        decision_id: the decision the record belongs to, when it names one.
        record_sha256: SHA-256 hex of the record's stored bytes.
    """

    check: IntegrityCheck
    message: str
    position: int | None = None
    seq: int | None = None
    topic: str | None = None
    decision_id: str | None = None
    record_sha256: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "check", IntegrityCheck(self.check))
        if self.position is None and (self.seq is not None or self.topic is not None):
            raise ValueError("a problem that names a seq or a topic must name the record position")

    @property
    def where(self) -> str:
        """The record (or ``file``) this problem is about, as a short phrase."""
        if self.position is None:
            return "file"
        if self.seq is None:
            place = f"record #{self.position} (no readable seq)"
        else:
            place = f"seq {self.seq}"
        parts = [place, self.topic or "?"]
        if self.decision_id is not None:
            parts.append(f"decision {self.decision_id}")
        return " ".join(parts)

    def __str__(self) -> str:
        return f"{self.where}: {self.check.value}: {self.message}"


@dataclass(frozen=True, slots=True)
class RunWriter:
    """Who wrote a daemon-written run: the ``/run`` record's ``writer`` and ``peer`` (ADR 0034).

    Attributes:
        pid: the daemon's process id.
        uid: the daemon's user id.
        gid: the daemon's group id.
        peer_pid: the agent process at the other end of the socket, as the
            kernel named it (``SO_PEERCRED``).
        peer_uid: that process's user id.
        peer_gid: that process's group id.
        follows_run_id: for a run the gate opened after reconnecting to the
            daemon (``/run`` ``follows``, ADR 0034 addendum), the run it
            continues; else None.
        follows_record_count: how many of that run's records were acknowledged.
        follows_head_sha256: the content address of the last of them.
    """

    pid: int
    uid: int
    gid: int
    peer_pid: int
    peer_uid: int
    peer_gid: int
    follows_run_id: str | None = None
    follows_record_count: int | None = None
    follows_head_sha256: str | None = None

    @property
    def summary(self) -> str:
        """One phrase for a human: the writer, the agent it wrote for, the run it follows."""
        written = (
            f"written by ghost audit-daemon (pid {self.pid}, uid {self.uid}) for the agent"
            f" process pid {self.peer_pid}, uid {self.peer_uid}, gid {self.peer_gid} (SO_PEERCRED)"
        )
        if self.follows_run_id is None or self.follows_record_count is None:
            return written
        return (
            f"{written}; follows run {self.follows_run_id} at record"
            f" {self.follows_record_count - 1}, head {self.follows_head_sha256}"
        )


@dataclass(frozen=True, slots=True)
class RunVerification:
    """Everything `verify_run` established about one run.

    Attributes:
        path: the file verified.
        source_sha256: SHA-256 hex of the whole file, as read.
        status: the verdict (see `RunStatus`).
        problems: the problems found, file-level ones first, then by record
            position; at most `MAX_LISTED_PROBLEMS` are kept.
        problem_count: how many problems were found (may exceed ``len(problems)``).
        truncated: the file ends before its MCAP footer, as a crash leaves it.
        sealed: the last record is a ``/seal`` that counts the records before
            it and names the last of them by content address.
        record_count: records read on ghost topics.
        verified_prefix: how many records, from the first, verify as a
            gapless, correctly linked chain from ``seq`` 0 with no problem
            of their own.
        verified_head_sha256: content address of the last record of that
            prefix (the head an anchor for that size must name), or None.
        per_topic_counts: records read per topic.
        run_id: the ``run_id`` of the ``/run`` record, when it is readable.
        open_assessments: assessments with no decision yet; in a truncated
            run those the crash caught in flight, otherwise a problem each.
        signed: the ``/run`` record declares a signing key.
        checkpoint_count: the ``/checkpoints`` records read.
        signatures: against which key the notes' signatures were checked.
        anchors_checked: the anchors given.
        anchors_matched: those that match the file's tree.
        writer: for a run ``ghost audit-daemon`` wrote, the daemon and the agent
            process (from ``/run``); None for a run written in-process.

    Raises:
        ValueError: the status contradicts the facts (problems, seal,
            truncation), or a count or address is malformed.
    """

    path: Path
    source_sha256: str
    status: RunStatus
    problems: tuple[RunProblem, ...]
    problem_count: int
    truncated: bool
    sealed: bool
    record_count: int
    verified_prefix: int
    verified_head_sha256: str | None
    per_topic_counts: Mapping[str, int]
    run_id: str | None
    open_assessments: int
    signed: bool
    checkpoint_count: int = 0
    signatures: SignatureCheck = SignatureCheck.UNSIGNED
    anchors_checked: int = 0
    anchors_matched: int = 0
    writer: RunWriter | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "status", RunStatus(self.status))
        object.__setattr__(self, "signatures", SignatureCheck(self.signatures))
        if not 0 <= self.anchors_matched <= self.anchors_checked:
            raise ValueError(
                f"anchors_matched {self.anchors_matched} is outside 0..{self.anchors_checked}"
            )
        if self.status is not RunStatus.TAMPERED and self.anchors_matched != self.anchors_checked:
            raise ValueError("a run that is not tampered matches every anchor given")
        object.__setattr__(self, "problems", tuple(self.problems))
        counts = FrozenCounts(self.per_topic_counts)
        object.__setattr__(self, "per_topic_counts", counts)
        if not _SHA256_HEX.fullmatch(self.source_sha256):
            raise ValueError("source_sha256 must be 64 lowercase hex digits")
        if self.problem_count < len(self.problems) or (self.problem_count > 0) != bool(
            self.problems
        ):
            raise ValueError(
                f"problem_count {self.problem_count} disagrees with {len(self.problems)} problems"
            )
        if not 0 <= self.verified_prefix <= self.record_count:
            raise ValueError(
                f"verified_prefix {self.verified_prefix} is outside 0..{self.record_count}"
            )
        if counts.total() != self.record_count:
            raise ValueError("per_topic_counts do not add up to record_count")
        if (self.verified_head_sha256 is None) != (self.verified_prefix == 0):
            raise ValueError("verified_head_sha256 is set exactly when verified_prefix > 0")
        expected = status_of(
            problems=self.problem_count > 0, sealed=self.sealed, truncated=self.truncated
        )
        if self.status is not expected:
            raise ValueError(
                f"status {self.status.value!r} contradicts the facts (problems:"
                f" {self.problem_count}, sealed: {self.sealed}, truncated: {self.truncated});"
                f" they make it {expected.value!r}"
            )

    @property
    def ok(self) -> bool:
        """Whether the run is intact: no problem, sealed, the file complete."""
        return self.status is RunStatus.INTACT

    @property
    def summary(self) -> str:
        """One line for a human: the verdict, how far the chain verifies, what it proves."""
        records = f"{self.record_count} record{'' if self.record_count == 1 else 's'}"
        prefix = _prefix_phrase(self.verified_prefix)
        if self.status is RunStatus.TAMPERED:
            unlisted = self.problem_count - len(self.problems)
            more = f" ({unlisted} not listed)" if unlisted else ""
            sealed = "sealed" if self.sealed else "not sealed"
            return (
                f"tampered: {self.problem_count} integrity"
                f" problem{'' if self.problem_count == 1 else 's'}{more} in {records};"
                f" {prefix}; {sealed}"
            )
        if self.status is RunStatus.TRUNCATED:
            if self.sealed:
                cut = "sealed, but the file is cut after the seal (it has no MCAP footer)"
            else:
                cut = "not sealed: the run ends early, as a crash leaves it"
            signed = ""
            if self.signatures is SignatureCheck.GIVEN_KEY and self.checkpoint_count:
                count = self.checkpoint_count
                signed = (
                    f"; the {count} checkpoint note{'' if count == 1 else 's'} it holds"
                    f" {'is' if count == 1 else 'are'} signed by the key given"
                )
            return f"truncated: {records}, {prefix}; {cut}; {self._anchoring()}{signed}{self._by()}"
        anchored = f"; {self._anchoring()}" if self.anchors_checked else ""
        return f"intact: {records}, {prefix}, sealed; {self._authorship()}{anchored}{self._by()}"

    def _by(self) -> str:
        return "" if self.writer is None else f"; {self.writer.summary}"

    def _authorship(self) -> str:
        count = self.checkpoint_count
        checkpoints = f"{count} checkpoint note{'' if count == 1 else 's'}"
        if self.signatures is SignatureCheck.GIVEN_KEY:
            return (
                f"{checkpoints} signed by the key given: no one without that key rewrote,"
                " cut or re-sealed it"
            )
        if self.signatures is SignatureCheck.DECLARED_KEY:
            verify = "verifies" if count == 1 else "verify"
            return (
                f"{checkpoints} {verify} against the key the run itself declares, which proves"
                " consistency, not authorship (a forger can re-sign with a key of their own):"
                " give --public-key to prove who wrote it"
            )
        return _UNSIGNED

    def _anchoring(self) -> str:
        if not self.anchors_checked:
            return _UNANCHORED_CUT
        return (
            f"{self.anchors_matched} anchor{'' if self.anchors_matched == 1 else 's'} held"
            " outside the file match its tree, so nothing they cover was cut or rewritten"
        )


# What the summary owns up to when nothing outside the file vouches for it.
_UNSIGNED: Final = (
    "unsigned: this shows the log is self-consistent, not who wrote it: an edit followed by"
    " a recomputed chain and checkpoints would pass"
)
_UNANCHORED_CUT: Final = "without an anchor, a crash and a deliberate cut look the same"


def _prefix_phrase(prefix: int) -> str:
    if prefix == 0:
        return "no record verifies from seq 0"
    if prefix == 1:
        return "seq 0 verifies"
    return f"seq 0-{prefix - 1} verify as a linked chain"


def status_of(*, problems: bool, sealed: bool, truncated: bool) -> RunStatus:
    """Return the status those facts make (the rule of the module docstring)."""
    if problems:
        return RunStatus.TAMPERED
    if truncated or not sealed:
        return RunStatus.TRUNCATED
    return RunStatus.INTACT
