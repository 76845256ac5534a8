"""`iter_run` and `read_run`: a ghost audit log read back, whatever state the file is in.

The reader is what the verifier and the analyzer stand on, so it never dies
with a traceback on bad input, and it cannot be made to explode: it streams
the file once (`McapScanner`), holds at most one chunk and a bounded amount
of state (`ReadLimits`), and hashes exactly the bytes it parses. It sorts
what can go wrong into three kinds:

* **Not a ghost audit log** — missing, a directory, unreadable, empty, not
  MCAP, cut inside the leading magic, the magic followed by garbage, or an
  MCAP file from another program: `LogFormatError`. A file is ghost's if it
  shows it, by either of: a ghost channel (a ghost topic with its ghost schema
  name, ``jsonschema`` and ``json``); or a message that is a ghost record (a
  JSON object whose ``schema`` is a ghost schema). A Header naming
  ``ghost-sdk`` is no evidence — anyone can write it — so the magic alone, or
  a header alone (a sink killed before its first chunk was complete), is not
  a ghost audit log either (SPEC §6): it holds nothing to verify. A file
  holding ghost's channels but no ``/run`` record is returned (the verifier
  calls it tampered), not refused.
* **Cut short** — the file ends before its footer, as a crash (or a cut at
  any byte) leaves it: every record complete before the cut is yielded and
  `ReadEnd.truncated` is True. A cut is not a problem by itself.
* **Damaged** — a CRC that does not match (or, ghost always writing them, is
  zero; or a finished file without DataEnd), a record that does not parse, a
  chunk that is too large, inflates beyond its size or does not decompress,
  a definition changed in its repeat, a message on an unknown channel or a
  foreign topic: each is a `ReadProblem`, and reading goes on past it
  wherever the damaged record's length allows.

Items are yielded in file order, except that a message whose channel is
defined only later in the file (a damaged data section whose summary repeats
the channel) is yielded when its channel is defined; `LoggedRecord.position`
gives its place. Whether a record is well-formed for its schema, and whether
the chain holds, is for the verifier to judge: the reader reports what is stored.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from types import MappingProxyType
from typing import Final

from audit._errors import LogFormatError
from audit._mcap_records import (
    AttachmentRecord,
    ChannelRecord,
    HeaderRecord,
    MessageRecord,
    SchemaRecord,
)
from audit._mcap_scan import Found, McapScanner, ScanEnd, ZeroCrc
from audit._parse import parse_record
from audit._problems import DEFAULT_LIMITS, ProblemKind, ReadLimits, ReadProblem
from audit._run_log import (
    LoggedAttachment,
    LoggedChannel,
    LoggedRecord,
    ReadEnd,
    RunItem,
    RunLog,
)
from audit._schemas import MESSAGE_ENCODING, SCHEMA_ENCODING, SCHEMAS, TOPICS
from audit._source import open_source
from runtime import sha256_hex

__all__ = ["iter_run", "read_run"]

_GHOST_RECORD_MARK: Final = b'"schema":"ghost.'  # in a ghost record's canonical bytes
# What a streaming read holds, each within ReadLimits.max_held_bytes.
_WAITING: Final = "messages on channels not yet defined"
_UNPROVEN: Final = "records before the file shows it is ghost's"
# Problems that say nothing about whether the bytes are MCAP at all.
_NOT_DAMAGE: Final = frozenset(
    {
        ProblemKind.CRC_MISSING,
        ProblemKind.UNKNOWN_CHANNEL,
        ProblemKind.FOREIGN_TOPIC,
        ProblemKind.MEMORY_LIMIT,
        ProblemKind.TOO_MANY_PROBLEMS,
    }
)
# Definitions cost their bytes plus a little for the objects around them.
_DEFINITION_OVERHEAD: Final = 256


def iter_run(
    path: str | os.PathLike[str], *, limits: ReadLimits | None = None
) -> Iterator[RunItem]:
    """Stream a ghost audit log: channels, records, attachments and problems, then a `ReadEnd`.

    The file is read once, as it was when opened, holding at most one chunk
    and what ``limits`` allow; nothing is retained between items.

    Args:
        path: the MCAP file.
        limits: the bounds to keep (default `DEFAULT_LIMITS`).

    Yields:
        `LoggedChannel`, `LoggedRecord`, `LoggedAttachment` and `ReadProblem`
        items in file order (see the module docstring for the one exception),
        and last one `ReadEnd`.

    Raises:
        LogFormatError: when iterated: on the first item, if the file is
            missing, a directory or not a regular file, unreadable, empty, not
            MCAP, or cut inside its magic; at the end (having yielded nothing),
            if the file is not a ghost audit log.
    """
    yield from _RunStream(Path(os.fspath(path)), limits or DEFAULT_LIMITS).items()


def read_run(path: str | os.PathLike[str], *, limits: ReadLimits | None = None) -> RunLog:
    """Read a ghost audit log into memory, recovering all it can from a damaged or cut file.

    Args:
        path: the MCAP file.
        limits: the bounds to keep (default `DEFAULT_LIMITS`); beyond
            ``max_retained_bytes`` of message and attachment bytes, later ones
            are not kept, and a `ProblemKind.MEMORY_LIMIT` problem says from where.

    Returns:
        The run's records (in file order), attachments, channels, problems,
        and how reading ended.

    Raises:
        LogFormatError: as `iter_run`.
    """
    bounds = limits or DEFAULT_LIMITS
    records: list[LoggedRecord] = []
    attachments: list[LoggedAttachment] = []
    channels: list[LoggedChannel] = []
    problems: list[ReadProblem] = []
    end: ReadEnd | None = None
    retained = 0
    full = False
    for item in iter_run(path, limits=bounds):
        if isinstance(item, LoggedRecord | LoggedAttachment):
            if not full and retained + len(item.data) <= bounds.max_retained_bytes:
                retained += len(item.data)
                if isinstance(item, LoggedRecord):
                    records.append(item)
                else:
                    attachments.append(item)
            elif not full:
                full = True
                problems.append(
                    ReadProblem(
                        ProblemKind.MEMORY_LIMIT,
                        item.offset,
                        f"the records from byte {item.offset} on were not kept: they exceed the"
                        f" {bounds.max_retained_bytes}-byte bound on what read_run holds"
                        " (iter_run streams them)",
                    )
                )
        elif isinstance(item, LoggedChannel):
            channels.append(item)
        elif isinstance(item, ReadProblem):
            problems.append(item)
        else:
            end = item
    assert end is not None  # iter_run always ends with a ReadEnd
    records.sort(key=lambda record: record.position)
    return RunLog(
        path=end.path,
        source_sha256=end.source_sha256,
        records=tuple(records),
        attachments=tuple(attachments),
        truncated=end.truncated,
        problems=tuple(problem.message for problem in problems),
        read_problems=tuple(problems),
        channels=tuple(channels),
        end=end,
    )


class _RunStream:
    """One streaming read: scanner events in, ghost items out, state within `ReadLimits`."""

    def __init__(self, path: Path, limits: ReadLimits) -> None:
        self._path = path
        self._limits = limits
        self._scanner: McapScanner | None = None
        # Whether the file has shown it is ghost's; until then, items are held back.
        self._ghost = False
        self._held: list[RunItem] = []
        self._ready: list[RunItem] = []
        self._held_bytes: Counter[str] = Counter()  # by what is held: each has its own bound
        self._memory_reported: set[str] = set()
        self._problem_count = 0
        self._header: HeaderRecord | None = None
        self._schemas: dict[int, SchemaRecord] = {}
        self._channels: dict[int, tuple[ChannelRecord, int]] = {}
        self._resolved: dict[int, LoggedChannel] = {}
        self._waiting: dict[int, list[int]] = {}  # schema id -> channels waiting for it
        self._pending: dict[int, list[Found]] = {}  # channel id -> messages waiting for it
        self._unknown: Counter[int] = Counter()
        self._foreign: Counter[str] = Counter()

    def items(self) -> Iterator[RunItem]:
        with open_source(self._path) as source:
            source.read_magic()
            self._scanner = McapScanner(source, self._limits)
            for event in self._scanner.events():
                if isinstance(event, ScanEnd):
                    end = self._finish(event)
                    yield from self._flush()
                    yield end
                    return
                self._take(event)
                yield from self._flush()

    # -- scanner events ------------------------------------------------------------------

    def _take(self, event: Found | ZeroCrc | ReadProblem) -> None:
        if isinstance(event, ReadProblem):
            self._problem(event)
        elif isinstance(event, ZeroCrc):
            self._problem(
                ReadProblem(
                    ProblemKind.CRC_MISSING,
                    event.offset,
                    f"{event.what} is zero, but ghost always writes it: the file was altered"
                    " after it was written",
                )
            )
        else:
            record = event.record
            if isinstance(record, MessageRecord):
                self._message(event, record)
            elif isinstance(record, ChannelRecord):
                self._define_channel(event, record)
            elif isinstance(record, SchemaRecord):
                self._define_schema(event, record)
            elif isinstance(record, AttachmentRecord):
                self._ready.append(
                    LoggedAttachment(
                        name=record.name,
                        media_type=record.media_type,
                        log_time_ns=record.log_time,
                        data=record.data,
                        sha256=sha256_hex(record.data),
                        create_time_ns=record.create_time,
                        offset=event.offset,
                    )
                )
            elif self._header is None:
                self._header = record

    def _define_schema(self, event: Found, schema: SchemaRecord) -> None:
        known = self._schemas.get(schema.id)
        if known is not None:
            if known != schema:
                self._conflict("schema", schema.id, event.offset)
            return
        if schema.id == 0:
            self._problem(
                ReadProblem(
                    ProblemKind.RECORD_UNPARSABLE,
                    event.offset,
                    f"the schema record at byte {event.offset} has id 0, which MCAP reserves"
                    " for 'no schema'; it was skipped",
                )
            )
            return
        size = len(schema.data) + len(schema.name) + len(schema.encoding)
        if not self._hold(size + _DEFINITION_OVERHEAD, "definitions", event.offset):
            return
        self._schemas[schema.id] = schema
        for channel_id in self._waiting.pop(schema.id, ()):
            self._resolve(channel_id)

    def _define_channel(self, event: Found, channel: ChannelRecord) -> None:
        known = self._channels.get(channel.id)
        if known is not None:
            if known[0] != channel:
                self._conflict("channel", channel.id, event.offset)
            return
        size = len(channel.topic) + len(channel.message_encoding)
        size += sum(len(key) + len(value) for key, value in channel.metadata)
        if not self._hold(size + _DEFINITION_OVERHEAD, "definitions", event.offset):
            return
        self._channels[channel.id] = (channel, event.offset)
        if channel.schema_id == 0 or channel.schema_id in self._schemas:
            self._resolve(channel.id)
        else:
            self._waiting.setdefault(channel.schema_id, []).append(channel.id)

    def _resolve(self, channel_id: int) -> None:
        """Give a channel its schema (or, at the end, none): yield it, then its waiting messages."""
        channel, offset = self._channels[channel_id]
        schema = self._schemas.get(channel.schema_id)
        is_ghost = (
            channel.topic in TOPICS
            and channel.message_encoding == MESSAGE_ENCODING
            and schema is not None
            and schema.name == TOPICS[channel.topic]
            and schema.encoding == SCHEMA_ENCODING
        )
        logged = LoggedChannel(
            channel_id=channel.id,
            topic=channel.topic,
            message_encoding=channel.message_encoding,
            metadata=MappingProxyType(dict(channel.metadata)),
            schema_id=channel.schema_id,
            schema_name=None if schema is None else schema.name,
            schema_encoding=None if schema is None else schema.encoding,
            schema_data=None if schema is None else schema.data,
            is_ghost=is_ghost,
            offset=offset,
        )
        self._resolved[channel_id] = logged
        self._ready.append(logged)
        if is_ghost:
            self._ghost = True
        elif channel.topic in TOPICS:
            self._problem(
                ReadProblem(
                    ProblemKind.CHANNEL_NOT_GHOST,
                    offset,
                    f"channel {channel.id} on {channel.topic} does not carry the"
                    f" {TOPICS[channel.topic]} JSON schema with JSON messages",
                )
            )
        for waiting in self._pending.pop(channel_id, ()):
            self._held_bytes[_WAITING] -= len(_message_of(waiting).data)
            self._deliver(waiting, logged)

    def _message(self, event: Found, message: MessageRecord) -> None:
        channel = self._resolved.get(message.channel_id)
        if channel is not None:
            self._deliver(event, channel)
        elif self._hold(len(message.data), _WAITING, event.offset):
            self._pending.setdefault(message.channel_id, []).append(event)

    def _deliver(self, event: Found, channel: LoggedChannel) -> None:
        message = _message_of(event)
        if channel.topic in TOPICS:
            record, problem = parse_record(message.data)
            self._ready.append(
                LoggedRecord(
                    topic=channel.topic,
                    log_time_ns=message.log_time,
                    sequence=message.sequence,
                    data=message.data,
                    sha256=sha256_hex(message.data),
                    record=record,
                    problem=problem,
                    publish_time_ns=message.publish_time,
                    channel_id=message.channel_id,
                    offset=event.offset,
                    offset_in_chunk=event.offset_in_chunk,
                )
            )
            return
        self._foreign[channel.topic] += 1
        if not self._ghost and _GHOST_RECORD_MARK in message.data:
            record, _ = parse_record(message.data)
            self._ghost = record is not None and record.get("schema") in SCHEMAS

    # -- bounds, problems, output --------------------------------------------------------

    def _hold(self, size: int, what: str, offset: int) -> bool:
        """Hold ``size`` more bytes of ``what``; False (and one problem per ``what``) if over."""
        if self._held_bytes[what] + size <= self._limits.max_held_bytes:
            self._held_bytes[what] += size
            return True
        if what not in self._memory_reported:
            self._memory_reported.add(what)
            self._problem(
                ReadProblem(
                    ProblemKind.MEMORY_LIMIT,
                    offset,
                    f"{what} from byte {offset} on were dropped: they exceed the"
                    f" {self._limits.max_held_bytes}-byte bound on what reading holds",
                )
            )
        return False

    def _conflict(self, kind: str, definition_id: int, offset: int) -> None:
        # The summary repeats definitions; a repeat that differs was changed.
        self._problem(
            ReadProblem(
                ProblemKind.DEFINITION_CONFLICT,
                offset,
                f"{kind} {definition_id} is defined twice, differently (again at byte {offset});"
                " the first definition is used",
            )
        )

    def _problem(self, problem: ReadProblem) -> None:
        if self._problem_count >= self._limits.max_problems:
            return
        self._problem_count += 1
        self._ready.append(problem)
        if self._problem_count == self._limits.max_problems:
            self._ready.append(
                ReadProblem(
                    ProblemKind.TOO_MANY_PROBLEMS,
                    problem.offset,
                    "too many problems: reading stopped there",
                )
            )
            if self._scanner is not None:
                self._scanner.stop()

    def _flush(self) -> Iterator[RunItem]:
        if self._ghost:
            if self._held:
                yield from self._held
                self._held.clear()
            yield from self._ready
            self._ready.clear()
            return
        # Not yet known to be ghost's: hold the items, within the bound.
        for item in self._ready:
            if not isinstance(item, LoggedRecord | LoggedAttachment) or self._hold(
                len(item.data), _UNPROVEN, item.offset
            ):
                self._held.append(item)
        self._ready.clear()

    # -- the end -------------------------------------------------------------------------

    def _finish(self, scan: ScanEnd) -> ReadEnd:
        # Channels whose schema never came are resolved without it, then what still waits.
        for channel_ids in list(self._waiting.values()):
            for channel_id in channel_ids:
                self._resolve(channel_id)
        self._waiting.clear()
        for channel_id, waiting in self._pending.items():
            self._unknown[channel_id] += len(waiting)
        self._pending.clear()
        for channel_id, count in sorted(self._unknown.items()):
            self._problem(
                ReadProblem(
                    ProblemKind.UNKNOWN_CHANNEL,
                    None,
                    f"{count} message(s) on channel {channel_id}, which is never defined,"
                    " were left out",
                )
            )
        for topic, count in sorted(self._foreign.items()):
            self._problem(
                ReadProblem(
                    ProblemKind.FOREIGN_TOPIC,
                    None,
                    f"{count} message(s) on {topic}, which is not a ghost topic, were left out",
                )
            )
        if not self._ghost:
            raise LogFormatError(self._path, self._not_ghost())
        return ReadEnd(
            path=self._path,
            source_sha256=scan.source_sha256,
            size_bytes=scan.size_bytes,
            truncated=scan.truncated,
            footer=scan.footer,
            data_end=scan.data_end,
            data_section_crc=scan.data_section_crc,
            summary_crc=scan.summary_crc,
            has_summary=scan.has_summary,
            chunk_count=scan.chunk_count,
            chunk_index_count=scan.chunk_index_count,
            message_index_count=scan.message_index_count,
            statistics_count=scan.statistics_count,
            library=None if self._header is None else self._header.library,
            stopped=scan.stopped,
        )

    def _not_ghost(self) -> str:
        damage = [
            item
            for item in self._held + self._ready
            if isinstance(item, ReadProblem) and item.kind not in _NOT_DAMAGE
        ]
        if not self._channels and damage:
            return (
                f"it begins with the MCAP magic, but what follows is not MCAP: {damage[0].message}"
            )
        topics = sorted({channel.topic for channel, _ in self._channels.values()})
        library = "unknown" if self._header is None else repr(self._header.library)
        return (
            "it is an MCAP file, but not a ghost audit log: none of its channels is a ghost"
            " topic with a ghost schema, and none of its messages is a ghost record (its"
            f" topics: {', '.join(topics) if topics else 'none'}; written by: {library})"
        )


def _message_of(event: Found) -> MessageRecord:
    record = event.record
    assert isinstance(record, MessageRecord)
    return record
