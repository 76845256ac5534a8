"""One connection of `ghost audit-daemon`: one run, one MCAP file (ADR 0034).

A `DaemonRun` reads the gate's frames, checks each against the protocol
(`audit._wire`), and writes the records through a `McapAuditSink` — the same
recorder, chain, checkpoints and seal as an in-process run. It answers a
request only after its records have reached the operating system (or the
disk, with ``fsync``), naming the ``seq``, ``prev_sha256`` and content
address it assigned.

A frame that breaks the protocol (cut, oversized, malformed, out of order,
an unknown ``op``) ends the connection; the run is sealed with ``ended``
saying why. A record the sink refuses is answered with a non-fatal error and
the connection goes on, as `McapAuditSink.append` raising leaves that sink.
"""

from __future__ import annotations

import contextlib
import os
import socket
import struct
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from audit._chain import (
    CHECKPOINT_TOPIC,
    ChainedRecord,
    ProcessIdentity,
    RunLink,
    WriterIdentity,
    check_appendable,
)
from audit._compiled_schemas import schema_valid
from audit._daemon_link import confirm_link
from audit._mcap_sink import McapAuditSink
from audit._schemas import TOPICS
from audit._signing import strict_b64decode
from audit._validate import schema_problems
from audit._wire import PROTOCOL, FrameError, encode_frame, read_frame
from runtime import AuditError, RunStart, ShadowPolicy, make_uuid7
from runtime._logging import get_event_log

__all__ = ["DaemonRun", "ProtocolViolation", "RunSettings", "make_recording_sink", "peer_identity"]

_log = get_event_log("ghost.audit.daemon")

_PEERCRED: Final = struct.Struct("3i")
_RUN_STRINGS: Final = (
    "policy_id",
    "policy_sha256",
    "policy_source_name",
    "policy_source_media_type",
    "policy_source_sha256",
    "sdk_version",
)
_MAX_ERROR_CHARS: Final = 300


class ProtocolViolation(Exception):
    """A frame that is well-formed JSON but breaks the protocol (order, ``op``, fields)."""


@dataclass(frozen=True, slots=True)
class RunSettings:
    """How the daemon writes every run (`McapAuditSink`'s arguments).

    Attributes:
        out_dir: where run files are created.
        make_sink: builds the sink for one file path.
        max_frame_bytes: the largest frame body accepted.
        writer: the daemon process itself (recorded in every ``/run``).
    """

    out_dir: Path
    make_sink: Callable[[Path], McapAuditSink]
    max_frame_bytes: int
    writer: ProcessIdentity


class _RecordingSink(McapAuditSink):
    """A `McapAuditSink` that remembers what each call stored, to acknowledge it exactly."""

    def __init__(self, path: Path, **kwargs: Any) -> None:
        self.stored: list[ChainedRecord] = []
        super().__init__(path, **kwargs)

    def _store(self, linked: ChainedRecord) -> None:
        super()._store(linked)
        self.stored.append(linked)


def peer_identity(conn: socket.socket) -> ProcessIdentity:
    """The connected peer's pid, uid and gid, as the kernel reports them (``SO_PEERCRED``).

    Raises:
        OSError: the platform has no ``SO_PEERCRED`` (ghost's daemon is Linux-only).
    """
    option = getattr(socket, "SO_PEERCRED", None)
    if option is None:
        raise OSError("SO_PEERCRED is not available on this platform")
    pid, uid, gid = _PEERCRED.unpack(conn.getsockopt(socket.SOL_SOCKET, option, _PEERCRED.size))
    return ProcessIdentity(pid=pid, uid=uid, gid=gid)


class DaemonRun:
    """Serve one connection: open its run, append its records, seal it when it ends.

    Args:
        conn: the accepted connection (blocking).
        peer: the peer's credentials (`peer_identity`).
        settings: the daemon's settings.
        stopping: tells whether the daemon is shutting down (an end of input
            is then the daemon's doing, not the agent's).
    """

    def __init__(
        self,
        conn: socket.socket,
        peer: ProcessIdentity,
        settings: RunSettings,
        stopping: Callable[[], bool],
    ) -> None:
        self._conn = conn
        self._peer = peer
        self._settings = settings
        self._stopping = stopping
        self._sink: _RecordingSink | None = None
        self._expected_n = 0

    def stop_reading(self) -> None:
        """Stop taking requests (daemon shutdown): the request in hand is still answered."""
        with contextlib.suppress(OSError):
            self._conn.shutdown(socket.SHUT_RD)

    def serve(self) -> None:
        """Run the connection to its end; the run is sealed whatever happens (never raises)."""
        ended: str | None = "disconnected"
        try:
            ended = self._loop()
        except FrameError as exc:
            ended = "disconnected" if exc.kind == "eof" else "protocol_error"
            self._cut(f"a {exc.kind} frame", fatal_answer=exc.kind != "eof")
        except ProtocolViolation as exc:
            ended = "protocol_error"
            self._cut(str(exc), fatal_answer=True)
        except OSError as exc:
            ended = "disconnected"
            _log.warning(
                "ghost.audit_daemon_connection_failed", pid=self._peer.pid, error=type(exc).__name__
            )
        except Exception as exc:  # noqa: BLE001 -- a daemon bug must not take the other runs down
            ended = "protocol_error"
            _log.error("ghost.audit_daemon_bug", pid=self._peer.pid, error=type(exc).__name__)
        finally:
            if ended is not None and self._stopping():
                ended = "daemon_stopped" if ended == "disconnected" else ended
            self._end(ended)
            with contextlib.suppress(OSError):
                self._conn.close()

    def _loop(self) -> str | None:
        """Serve requests; return the seal's ``ended`` (None: the gate closed the run)."""
        limit = self._settings.max_frame_bytes
        while True:
            frame = read_frame(self._conn, max_bytes=limit)
            if frame is None:
                return "disconnected"
            n = frame.get("n")
            if type(n) is not int or n != self._expected_n:
                raise ProtocolViolation(f"a request out of order (n={self._expected_n} was due)")
            self._expected_n += 1
            op = frame.get("op")
            if n == 0:
                if op != "open":
                    raise ProtocolViolation("the first request must be open")
                self._open(frame)
                continue
            if op == "append":
                self._append(n, frame)
            elif op == "pair":
                self._pair(n, frame)
            elif op == "close":
                self._close(n)
                return None
            else:
                raise ProtocolViolation("an unknown op")

    def _open(self, frame: Mapping[str, Any]) -> None:
        if frame.get("protocol") != PROTOCOL:
            raise ProtocolViolation(f"open names another protocol than {PROTOCOL}")
        run = _run_start(frame.get("run"))
        settings = self._settings
        follows = _run_link(frame.get("follows"))
        if follows is not None:
            # The agent's claim: written only once the old run's file bears it out.
            refused = confirm_link(settings.out_dir, follows, self._peer)
            if refused is not None:
                why = f"the follows link is refused: {refused}"
                self._answer(0, ok=False, error=why, fatal=True)
                raise ProtocolViolation("a follows link the daemon cannot confirm")
        opening = settings.out_dir / f".{make_uuid7(run.stamp_ns)}.opening.mcap"
        try:
            sink = settings.make_sink(opening)
        except AuditError as exc:
            self._answer(0, ok=False, error=str(exc), fatal=True)
            raise ProtocolViolation("the run's file cannot be created") from exc
        assert isinstance(sink, _RecordingSink)
        self._sink = sink
        sink._declare_writer(
            WriterIdentity(writer=settings.writer, peer=self._peer, follows=follows)
        )
        try:
            sink.open_run(run)
        except AuditError as exc:
            self._answer(0, ok=False, error=str(exc), fatal=True)
            raise ProtocolViolation("the run cannot be opened") from exc
        run_id = sink.run_id
        final = settings.out_dir / f"{run_id}.mcap"
        # Named for its run once /run is written; a crash before leaves the opening name.
        os.rename(opening, final)
        _log.info(
            "ghost.audit_daemon_run_opened",
            run_id=run_id,
            file=final.name,
            pid=self._peer.pid,
            uid=self._peer.uid,
            gid=self._peer.gid,
        )
        self._acknowledge(0, sink, run_id=run_id, file=final.name)

    def _append(self, n: int, frame: Mapping[str, Any]) -> None:
        sink = self._open_sink()
        topic, record = frame.get("topic"), frame.get("record")
        if not isinstance(topic, str) or not isinstance(record, Mapping):
            raise ProtocolViolation("append needs a topic and a record")
        try:
            _check_schema(topic, record)
            sink.append(topic, record)
        except AuditError as exc:
            self._refused(n, sink, exc)
            return
        self._acknowledge(n, sink)

    def _pair(self, n: int, frame: Mapping[str, Any]) -> None:
        sink = self._open_sink()
        topic, record = frame.get("topic"), frame.get("record")
        then_topic, then, link = frame.get("then_topic"), frame.get("then"), frame.get("link")
        if (
            not isinstance(topic, str)
            or not isinstance(record, Mapping)
            or not isinstance(then_topic, str)
            or not isinstance(then, Mapping)
            or not isinstance(link, str)
            or link in then
        ):
            raise ProtocolViolation("pair needs two topics, two records and a link field")

        def linked(address: str) -> Mapping[str, Any]:
            return {**then, link: address}

        try:
            _check_schema(topic, record)
            _check_schema(then_topic, {**then, link: _PLACEHOLDER_SHA256})
            sink.append_pair(topic, record, then_topic, linked)
        except AuditError as exc:
            self._refused(n, sink, exc)
            return
        self._acknowledge(n, sink)

    def _close(self, n: int) -> None:
        sink = self._open_sink()
        self._sink = None
        try:
            sink.close()
        except AuditError as exc:
            self._answer(n, ok=False, error=str(exc), fatal=True)
            return
        self._acknowledge(n, sink)
        _log.info("ghost.audit_daemon_run_sealed", run_id=sink.run_id, ended=None)

    def _open_sink(self) -> _RecordingSink:
        if self._sink is None:
            raise ProtocolViolation("no run is open")
        return self._sink

    def _refused(self, n: int, sink: _RecordingSink, exc: AuditError) -> None:
        # Part of the request may be written (a pair whose second record was refused):
        # the gate does not act on it, but the run goes on from where the file is.
        sink.stored.clear()
        fatal = sink._failure is not None
        self._answer(n, ok=False, error=str(exc), fatal=fatal)
        if fatal:
            raise ProtocolViolation("the run's file can no longer be written")

    def _acknowledge(self, n: int, sink: _RecordingSink, **extra: str | None) -> None:
        stored, sink.stored = sink.stored, []
        records = [
            {"seq": r.seq, "prev_sha256": r.record["prev_sha256"], "sha256": r.sha256}
            for r in stored
            if r.topic != CHECKPOINT_TOPIC
        ]
        self._answer(
            n,
            ok=True,
            records=records,
            next_seq=sink.record_count,
            head_sha256=sink.head_sha256,
            **extra,
        )

    def _answer(self, n: int, **fields: Any) -> None:
        if "error" in fields:
            fields["error"] = str(fields["error"])[:_MAX_ERROR_CHARS]
        self._conn.sendall(encode_frame({"n": n, **fields}))

    def _cut(self, why: str, *, fatal_answer: bool) -> None:
        _log.warning(
            "ghost.audit_daemon_client_cut", pid=self._peer.pid, uid=self._peer.uid, why=why
        )
        if fatal_answer:
            with contextlib.suppress(OSError, FrameError):
                self._answer(self._expected_n, ok=False, error=why, fatal=True)

    def _end(self, ended: str | None) -> None:
        sink, self._sink = self._sink, None
        if sink is None:
            return
        try:
            sink._close_ended(ended) if ended is not None else sink.close()
        except AuditError as exc:
            _log.error(
                "ghost.audit_daemon_seal_failed", run_id=sink.run_id, error=type(exc).__name__
            )
            return
        _log.info("ghost.audit_daemon_run_sealed", run_id=sink.run_id, ended=ended)


_PLACEHOLDER_SHA256: Final = "0" * 64


def _check_schema(topic: str, record: Mapping[str, Any]) -> None:
    """Refuse a record that does not match its ghost schema, before anything is written.

    The daemon owns the file: a record that broke its schema would make the run
    read as tampered, so it is refused (that call fails, the run goes on), as a
    record the sink's own checks refuse. ``seq`` and ``prev_sha256`` are the
    daemon's to assign: placeholders stand in for them here.

    Raises:
        AuditError: the record does not match the schema its topic carries.
    """
    check_appendable(topic, record)  # the sink's own checks first, with their messages
    name = TOPICS[topic]
    candidate = {**record, "seq": 1, "prev_sha256": _PLACEHOLDER_SHA256}
    if schema_valid(candidate):
        return
    problems = schema_problems(candidate)
    if not problems:  # pragma: no cover - the two validators agree (a test holds them so)
        return
    raise AuditError(f"the {topic} record does not match {name}: {'; '.join(problems[:3])}")


def make_recording_sink(path: Path, **kwargs: Any) -> McapAuditSink:
    """A sink for the daemon: a `McapAuditSink` that reports what each call stored."""
    return _RecordingSink(path, **kwargs)


def _run_start(run: object) -> RunStart:
    if not isinstance(run, Mapping):
        raise ProtocolViolation("open needs a run")
    source = _texts_and_source(run, "run", _RUN_STRINGS, "policy_source")
    stamp = run.get("stamp_ns")
    if type(stamp) is not int or not 0 <= stamp < 2**63:
        raise ProtocolViolation("open: run.stamp_ns must be a non-negative 64-bit integer")
    return RunStart(
        policy_id=run["policy_id"],
        policy_sha256=run["policy_sha256"],
        policy_source=source,
        policy_source_name=run["policy_source_name"],
        policy_source_media_type=run["policy_source_media_type"],
        policy_source_sha256=run["policy_source_sha256"],
        sdk_version=run["sdk_version"],
        stamp_ns=stamp,
        shadow=_shadow_policy(run.get("shadow")),
    )


def _run_link(follows: object) -> RunLink | None:
    """The old run a reconnecting gate's ``open`` says it follows, or None for a first run."""
    if follows is None:
        return None
    if not isinstance(follows, Mapping):
        raise ProtocolViolation("open: follows must be an object")
    run_id, count, head = (follows.get(k) for k in ("run_id", "record_count", "head_sha256"))
    if not isinstance(run_id, str) or not isinstance(head, str) or type(count) is not int:
        raise ProtocolViolation("open: follows needs run_id, record_count and head_sha256")
    return RunLink(run_id=run_id, record_count=count, head_sha256=head)


_SHADOW_STRINGS: Final = (
    "policy_id",
    "policy_sha256",
    "source_name",
    "source_media_type",
    "source_sha256",
)


def _texts_and_source(
    table: Mapping[str, Any], where: str, texts: tuple[str, ...], source_key: str
) -> bytes:
    """Check that ``table``'s ``texts`` are strings; return its base64 ``source_key``, decoded.

    Raises:
        ProtocolViolation: a text is not a string, or the source is not standard base64.
    """
    for key in texts:
        if not isinstance(table.get(key), str):
            raise ProtocolViolation(f"open: {where}.{key} must be a string")
    encoded = table.get(source_key)
    source = strict_b64decode(encoded) if isinstance(encoded, str) else None
    if source is None:
        raise ProtocolViolation(f"open: {where}.{source_key} must be standard base64")
    return source


def _shadow_policy(shadow: object) -> ShadowPolicy | None:
    """The gate's shadow candidate from an ``open`` frame (ADR 0031), or None without one."""
    if shadow is None:
        return None
    if not isinstance(shadow, Mapping):
        raise ProtocolViolation("open: run.shadow must be an object")
    source = _texts_and_source(shadow, "run.shadow", _SHADOW_STRINGS, "source")
    return ShadowPolicy(
        policy_id=shadow["policy_id"],
        policy_sha256=shadow["policy_sha256"],
        source=source,
        source_name=shadow["source_name"],
        source_media_type=shadow["source_media_type"],
        source_sha256=shadow["source_sha256"],
    )
