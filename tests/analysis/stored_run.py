"""Real ghost runs, and a model of their MCAP contents that a test can edit and write back.

`write_gate_run` records a run through the real stack — `Gate`, `Policy`,
`McapAuditSink` — with every record type: allow, deny, pending, narrow and
scrub decisions with their assessments, alice's approval of the pending one
(through ``gate.approvals.resolve``), and the seal.

`StoredRun.load` reads such a file into plain, editable values (schemas,
channels, attachments, messages with their MCAP ``log_time`` and
``sequence``); `StoredRun.write` writes them back as the sink does — the
same channel ids, the attachment before the first message, chunked or not
as the run's durability says, and every CRC — so that what a test changed
is the only thing that differs. `rechain` recomputes ``seq``,
``prev_sha256``, every checkpoint and the seal after an edit, as a forger
without the signing key would.
"""

from __future__ import annotations

import base64
import copy
import json
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from mcap.records import Attachment, Channel, Message, Schema
from mcap.stream_reader import StreamReader
from mcap.writer import CompressionType, Writer

from audit import (
    Checkpoint,
    CompactRange,
    Durability,
    McapAuditSink,
    NoteSigner,
    checkpoint_origin,
    format_note,
    leaf_hash,
    parse_note,
)
from runtime import Action, Decision, Gate, Policy, PolicyBackend, canonical_bytes, sha256_hex
from runtime.testing import ManualClock
from tests.runtime.conftest import POLICY

__all__ = [
    "Edit",
    "GateRun",
    "StoredMessage",
    "StoredRun",
    "delete",
    "duplicate",
    "forged_note",
    "move_to_end",
    "write_gate_run",
]

SEQUENCE_MODULUS = 2**32


@dataclass(frozen=True)
class GateRun:
    """A run written through the gate, and the decisions it returned."""

    path: Path
    decisions: tuple[Decision, ...]


ACTIONS = (
    Action("bot", "search", "tool:search", {"q": "refund policy"}),  # allow
    Action("bot", "delete", "file:/data/x"),  # deny
    Action("bot", "refund", "payments:stripe", {"amount": 100}),  # pending
    Action("bot", "query", "db:customers", {"table": "customers", "limit": 500}),  # narrow
    Action("bot", "send", "mail:customer", {"body": "write to jane.doe@example.com"}),  # scrub
)


def write_gate_run(
    path: Path,
    *,
    durability: Durability = "process",
    close: bool = True,
    signing_key: Ed25519PrivateKey | None = None,
    shadow: PolicyBackend | None = None,
) -> GateRun:
    """Write a run with every record type through the real gate and sink.

    Records, in order: /run, its checkpoint, five assessment+decision pairs
    (allow, deny, pending, narrow, scrub), one approval of the pending
    decision, the final checkpoint, /seal. Signed with ``signing_key`` if given;
    with ``shadow``, a gate evaluating that candidate (ADR 0031), so the /run
    record and every assessment carry their optional ``shadow`` fields.
    """
    # A still clock: a machine that stalls for a second mid-run adds no time-based checkpoint.
    sink = McapAuditSink(path, durability=durability, signing_key=signing_key, clock=ManualClock())
    gate = Gate(
        Policy.from_dict(POLICY), sink=sink, clock=ManualClock(step_ns=1_000), shadow=shadow
    )
    decisions = tuple(gate.check(action) for action in ACTIONS)
    pending = decisions[2]
    assert pending.decision_sha256 is not None
    gate.approvals.resolve(pending.decision_id, approved=True, approver="alice")
    if close:
        sink.close()
    return GateRun(path=path, decisions=decisions)


@dataclass
class StoredMessage:
    """One message as stored: its topic, MCAP fields and bytes."""

    topic: str
    log_time: int
    publish_time: int
    sequence: int
    data: bytes

    @property
    def record(self) -> dict[str, Any]:
        """The record, parsed (a fresh copy each time)."""
        value: dict[str, Any] = json.loads(self.data)
        return value

    def with_record(self, record: dict[str, Any]) -> StoredMessage:
        """This message carrying ``record`` in canonical bytes, MCAP fields unchanged."""
        return replace(self, data=canonical_bytes(record))


@dataclass
class StoredRun:
    """The contents of a ghost MCAP file, as editable values."""

    schemas: list[Schema]
    channels: list[Channel]
    attachments: list[Attachment]
    messages: list[StoredMessage]
    chunked: bool
    topic_channels: dict[str, int] = field(default_factory=dict)

    @classmethod
    def load(cls, path: Path) -> StoredRun:
        """Read a complete ghost MCAP file."""
        schemas: dict[int, Schema] = {}
        channels: dict[int, Channel] = {}
        attachments: list[Attachment] = []
        messages: list[StoredMessage] = []
        with path.open("rb") as stream:
            for record in StreamReader(stream).records:
                if isinstance(record, Schema):
                    schemas.setdefault(record.id, record)
                elif isinstance(record, Channel):
                    channels.setdefault(record.id, record)
                elif isinstance(record, Attachment):
                    attachments.append(record)
                elif isinstance(record, Message):
                    messages.append(
                        StoredMessage(
                            topic=channels[record.channel_id].topic,
                            log_time=record.log_time,
                            publish_time=record.publish_time,
                            sequence=record.sequence,
                            data=record.data,
                        )
                    )
        run = cls(
            schemas=[schemas[key] for key in sorted(schemas)],
            channels=[channels[key] for key in sorted(channels)],
            attachments=attachments,
            messages=messages,
            chunked=json.loads(messages[0].data)["durability"] == "chunk",
        )
        run.topic_channels = {channel.topic: channel.id for channel in run.channels}
        return run

    def copy(self) -> StoredRun:
        """A deep copy to edit."""
        return copy.deepcopy(self)

    def write(self, path: Path) -> Path:
        """Write the contents as a ghost sink would: same ids, attachment first, every CRC."""
        with path.open("wb") as stream:
            writer = Writer(
                stream,
                compression=CompressionType.ZSTD if self.chunked else CompressionType.NONE,
                use_chunking=self.chunked,
                enable_data_crcs=True,
            )
            writer.start(profile="", library="ghost-tests StoredRun")
            ids: dict[int, int] = {}
            for schema in self.schemas:
                ids[schema.id] = writer.register_schema(schema.name, schema.encoding, schema.data)
            channel_ids: dict[int, int] = {}
            for channel in self.channels:
                channel_ids[channel.id] = writer.register_channel(
                    channel.topic,
                    channel.message_encoding,
                    ids.get(channel.schema_id, 0),
                    dict(channel.metadata),
                )
            for attachment in self.attachments:
                writer.add_attachment(
                    create_time=attachment.create_time,
                    log_time=attachment.log_time,
                    name=attachment.name,
                    media_type=attachment.media_type,
                    data=attachment.data,
                )
            for message in self.messages:
                writer.add_message(
                    channel_id=channel_ids[self.topic_channels[message.topic]],
                    log_time=message.log_time,
                    data=message.data,
                    publish_time=message.publish_time,
                    sequence=message.sequence,
                )
            writer.finish()
        return path

    def index(self, topic: str, nth: int = 0) -> int:
        """The position of the ``nth`` message on ``topic``."""
        return [i for i, m in enumerate(self.messages) if m.topic == topic][nth]

    def records_on(self, topic: str) -> list[dict[str, Any]]:
        """The records on ``topic``, parsed, in file order."""
        return [message.record for message in self.messages if message.topic == topic]

    def edit(self, position: int, **changes: Any) -> None:
        """Change fields of the record at ``position``; store it canonically, MCAP fields kept."""
        message = self.messages[position]
        self.messages[position] = message.with_record({**message.record, **changes})

    def rechain(self, *, relink: bool = True, signer: NoteSigner | None = None) -> None:
        """Recompute seq, prev_sha256, checkpoints, the seal and the MCAP fields, as a forger would.

        Every checkpoint gets the tree size, root and head of the records
        before it, and a note stating them. The forger has no signing key: a
        note keeps the signature lines it had (valid only if its text did not
        change), unless ``signer`` is given, a key of the forger's own, which
        then signs every note and is declared in ``/run`` in place of the
        run's key.

        Args:
            relink: also point every decision's ``assessment_sha256`` and every
                approval's ``decision_sha256`` at the new addresses (a thorough
                forger); without it only the chain itself is recomputed.
            signer: re-sign with this key (and declare it), rather than keep
                the old signature lines.
        """
        previous: str | None = None
        assessments: dict[str, str] = {}
        decisions: dict[str, str] = {}
        tree = CompactRange()
        run_id = ""
        for position, message in enumerate(self.messages):
            record = message.record
            record["seq"] = position
            record["prev_sha256"] = previous
            if message.topic == "/run":
                run_id = record.get("run_id", "")
                if signer is not None:
                    record["signing"] = {
                        "key_id": signer.key_id,
                        "key_name": signer.name,
                        "public_key": base64.b64encode(signer.verifier.public_key).decode(),
                    }
            if message.topic == "/seal":
                record["record_count"] = position
                record["head_sha256"] = previous
            if message.topic == "/checkpoints":
                root = tree.root()
                record["tree_size"] = position
                record["root_hash"] = root.hex()
                record["head_sha256"] = previous
                record["note"] = forged_note(record["note"], run_id, position, root, signer)
            decision_id = record.get("decision_id")
            if relink and message.topic == "/decisions" and record["assessment_sha256"]:
                record["assessment_sha256"] = assessments.get(
                    decision_id, record["assessment_sha256"]
                )
            if relink and message.topic == "/approvals":
                record["decision_sha256"] = decisions.get(decision_id, record["decision_sha256"])
            self.messages[position] = replace(
                message.with_record(record),
                log_time=record["stamp_ns"],
                publish_time=record["stamp_ns"],
                sequence=position % SEQUENCE_MODULUS,
            )
            data = self.messages[position].data
            tree.append(leaf_hash(data))
            previous = sha256_hex(data)
            if message.topic == "/assessments":
                assessments[decision_id] = previous
            elif message.topic == "/decisions":
                decisions[decision_id] = previous


def forged_note(
    old: str, run_id: str, tree_size: int, root: bytes, signer: NoteSigner | None
) -> str:
    """The note a forger writes for a recomputed tree head: the old signature lines kept."""
    text = Checkpoint(checkpoint_origin(run_id), tree_size, root).text()
    if signer is not None:
        return format_note(text, (signer,))
    signatures = parse_note(old).signatures
    if not signatures:
        return text
    return text + "\n" + "".join(signature.line for signature in signatures)


Edit = Callable[[StoredRun], None]
"""An edit of a stored run in place, as a tamperer or a damaged file makes it."""


def delete(topic: str, nth: int = 0) -> Edit:
    """Remove the ``nth`` message on ``topic``."""

    def edit(run: StoredRun) -> None:
        run.messages.pop(run.index(topic, nth))

    return edit


def duplicate(topic: str, nth: int = 0) -> Edit:
    """Repeat the ``nth`` message on ``topic`` right after itself."""

    def edit(run: StoredRun) -> None:
        at = run.index(topic, nth)
        run.messages.insert(at + 1, run.messages[at])

    return edit


def move_to_end(topic: str, nth: int = 0) -> Edit:
    """Move the ``nth`` message on ``topic`` to just before the run's last two (its seal)."""

    def edit(run: StoredRun) -> None:
        message = run.messages.pop(run.index(topic, nth))
        run.messages.insert(len(run.messages) - 2, message)

    return edit
