"""`SocketAuditSink`: a gate's records go to `ghost audit-daemon`, which owns the file and key.

The gate's side of ADR 0034. Each call is one request frame and one answer
(`audit._wire`): the daemon chains the record (``seq``, ``prev_sha256``),
writes it, and only then answers with the content addresses it computed,
which this sink returns to the gate as `McapAuditSink` would. The gate's
assessment and decision travel in one ``pair`` frame (one round trip).

Fail closed. The connection is made at construction; every call must be
answered within ``deadline_s``. A daemon that cannot be reached, does not
answer in time, closes the connection or answers out of protocol *breaks*
the connection: that call raises `AuditError` (the gate's action does not
run), because the sink can no longer know what the log holds. A record the
daemon refuses (it does not fit its topic) raises `AuditError` for that
call only, as `McapAuditSink` does.

Reconnect (ADR 0034, addendum). The next call after a break tries once,
within its own deadline, to connect again and open a *new* run whose
``/run`` ``follows`` the old one: its id, and the count and head address
of the records the old daemon acknowledged. The daemon writes that link
only once it has found it in the old run's file. If the daemon is not back,
or refuses, the call raises `AuditError` and the next call tries again;
until then nothing is recorded and nothing runs.
"""

from __future__ import annotations

import base64
import contextlib
import itertools
import os
import re
import socket
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any, Final

from audit._close_hooks import raise_if_a_hook_failed, run_close_hooks
from audit._wire import MAX_FRAME_BYTES, PROTOCOL, FrameError, encode_frame, read_frame
from runtime import AuditError, RunStart
from runtime._logging import get_event_log  # the SDK's one event-logging seam (SPEC §5)

__all__ = ["SocketAuditSink"]

_log = get_event_log("ghost.audit")

_SHA256_HEX: Final = re.compile(r"[0-9a-f]{64}")
_markers = itertools.count()


class SocketAuditSink:
    """An `AuditSink` whose records are written by `ghost audit-daemon` over a Unix socket.

    Thread-safe: one request is in flight at a time. Use it as a context
    manager, or call `close` to have the daemon seal the run.

    Args:
        path: the daemon's socket (``ghost audit-daemon --socket PATH``).
        deadline_s: how long one call may wait for the daemon's answer,
            connecting included (default 5 s). Past it, `AuditError`.

    Raises:
        ValueError: ``deadline_s`` is not a positive, finite number.
        AuditError: the daemon cannot be reached (no socket, refused, no
            permission).
    """

    def __init__(self, path: str | os.PathLike[str], *, deadline_s: float = 5.0) -> None:
        if not isinstance(deadline_s, int | float) or not 0 < deadline_s < float("inf"):
            raise ValueError(f"deadline_s must be a positive number of seconds, got {deadline_s!r}")
        self._path = Path(path)
        self._deadline_ns = int(deadline_s * 1e9)
        self._lock = threading.Lock()
        self._next_n = 0
        self._failure: str | None = None
        self._closed = False
        self._close_hooks: list[Callable[[], None]] = []
        self._run_id: str | None = None
        self._run_file: str | None = None
        self._next_seq = 0
        self._head_sha256: str | None = None
        self._open_message: dict[str, Any] | None = None  # re-sent on a reconnect
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self._sock.settimeout(deadline_s)
            self._sock.connect(os.fspath(self._path))
        except OSError as exc:
            self._sock.close()
            raise AuditError(f"cannot reach the audit daemon at {self._path}: {_why(exc)}") from exc

    @property
    def path(self) -> Path:
        """The daemon's socket."""
        return self._path

    @property
    def deadline_s(self) -> float:
        """How long one call may wait for the daemon."""
        return self._deadline_ns / 1e9

    @property
    def closed(self) -> bool:
        """Whether `close` has been called."""
        return self._closed

    @property
    def run_id(self) -> str | None:
        """The run's id, as the daemon minted it in ``/run``; None before `open_run`."""
        with self._lock:
            return self._run_id

    @property
    def run_file(self) -> str | None:
        """The name of the run's file in the daemon's output directory; None before `open_run`."""
        with self._lock:
            return self._run_file

    @property
    def record_count(self) -> int:
        """Records the daemon has acknowledged (the ``seq`` after the last one)."""
        with self._lock:
            return self._next_seq

    @property
    def head_sha256(self) -> str | None:
        """The content address of the last record the daemon acknowledged."""
        with self._lock:
            return self._head_sha256

    def on_close(self, hook: Callable[[], None]) -> None:
        """Have `close` call ``hook`` first, before the run is sealed (as `McapAuditSink`)."""
        with self._lock:
            self._close_hooks.append(hook)

    def open_run(self, run: RunStart) -> None:
        """Ask the daemon to begin the run: it writes the policy, ``/run`` and a checkpoint.

        Raises:
            AuditError: the sink is closed, broken or already has a run, or the
                daemon refused or did not answer in time.
        """
        message = {
            "op": "open",
            "protocol": PROTOCOL,
            "run": {
                "policy_id": run.policy_id,
                "policy_sha256": run.policy_sha256,
                "policy_source": base64.b64encode(run.policy_source).decode("ascii"),
                "policy_source_name": run.policy_source_name,
                "policy_source_media_type": run.policy_source_media_type,
                "policy_source_sha256": run.policy_source_sha256,
                "sdk_version": run.sdk_version,
                "stamp_ns": run.stamp_ns,
            },
        }
        if run.shadow is not None:  # the candidate is attached beside the policy (ADR 0031)
            shadow = run.shadow
            message["run"]["shadow"] = {  # type: ignore[index]
                "policy_id": shadow.policy_id,
                "policy_sha256": shadow.policy_sha256,
                "source": base64.b64encode(shadow.source).decode("ascii"),
                "source_name": shadow.source_name,
                "source_media_type": shadow.source_media_type,
                "source_sha256": shadow.source_sha256,
            }
        with self._lock:
            if self._next_n:
                raise AuditError(
                    f"open_run was already called on {self._path}: a sink records one run"
                )
            answer = self._request(message, "open_run", expected=1)
            run_id, run_file = answer.get("run_id"), answer.get("file")
            if not isinstance(run_id, str) or not isinstance(run_file, str):
                raise self._broke("open_run", "the daemon's answer names no run")
            self._run_id, self._run_file = run_id, run_file
            self._open_message = message

    def append(self, topic: str, record: Mapping[str, Any]) -> str:
        """Send ``record`` to the daemon; return its content address once it is written.

        Raises:
            AuditError: no run is open, the sink is closed or broken, the daemon
                refused the record, or did not answer within the deadline.
        """
        with self._lock:
            self._check_open("append")
            answer = self._request({"op": "append", "topic": topic, "record": record}, "append")
            return str(answer["records"][0]["sha256"])

    def append_pair(
        self,
        topic: str,
        record: Mapping[str, Any],
        then_topic: str,
        then: Callable[[str], Mapping[str, Any]],
    ) -> tuple[str, str]:
        """Send ``record`` and ``then(its address)`` in one request: one round trip.

        ``then`` is called with a marker; the field that holds it is sent as
        ``link``, and the daemon fills in the first record's address there.
        A ``then`` that does not put the marker in exactly one top-level field
        gets two `append` calls instead.

        Returns:
            The two content addresses, as the daemon computed them.

        Raises:
            AuditError: as `append`.
        """
        marker = f"ghost-audit-link-{next(_markers)}"
        second = then(marker)
        links = [key for key, value in second.items() if value is marker]
        if len(links) != 1:
            first_sha256 = self.append(topic, record)
            return first_sha256, self.append(then_topic, then(first_sha256))
        (link,) = links
        message = {
            "op": "pair",
            "topic": topic,
            "record": record,
            "then_topic": then_topic,
            "then": {key: value for key, value in second.items() if key != link},
            "link": link,
        }
        with self._lock:
            self._check_open("append")
            answer = self._request(message, "append", expected=2)
            first, then_record = answer["records"]
            return str(first["sha256"]), str(then_record["sha256"])

    def close(self) -> None:
        """Run the close hooks, have the daemon seal the run, and disconnect.

        A second call does nothing. A broken sink just disconnects (its failure
        was raised when it happened); the daemon seals such a run itself.

        Raises:
            AuditError: the daemon did not confirm the seal; or a close hook
                raised (the run is sealed all the same, then this says so).
        """
        with self._lock:
            if self._closed:
                return
            hooks, self._close_hooks = self._close_hooks, []
        failure = run_close_hooks(hooks)
        with self._lock:
            if self._closed:
                return
            self._closed = True
            try:
                if self._failure is None and self._run_id is not None:
                    self._request({"op": "close"}, "close", expected=1)
            finally:
                with contextlib.suppress(OSError):
                    self._sock.close()
        raise_if_a_hook_failed(failure)

    def __enter__(self) -> SocketAuditSink:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def _check_open(self, operation: str) -> None:
        if self._run_id is None and self._failure is None:
            raise AuditError(f"{operation} on {self._path} before open_run: no run is open")

    def _request(
        self, message: dict[str, Any], operation: str, *, expected: int = 1
    ) -> Mapping[str, Any]:
        """Send one request and return the daemon's answer; the caller holds the lock."""
        if self._closed and operation != "close":
            raise AuditError(f"{operation} on {self._path} after close")
        deadline_ns = time.monotonic_ns() + self._deadline_ns
        if self._failure is not None:
            if self._open_message is None or self._closed:
                raise AuditError(
                    f"{operation} refused: the connection to the audit daemon at {self._path}"
                    f" failed earlier ({self._failure}); nothing more can be recorded on it"
                )
            self._reconnect(operation, deadline_ns)
        return self._exchange(message, operation, expected=expected, deadline_ns=deadline_ns)

    def _reconnect(self, operation: str, deadline_ns: int) -> None:
        """Connect again and open a run that follows the old one's acknowledged head.

        On any failure the sink stays broken, still naming the old run, so the
        next call tries again with the same link.
        """
        assert self._open_message is not None
        assert self._run_id is not None
        assert self._head_sha256 is not None
        old = (self._run_id, self._run_file, self._next_seq, self._head_sha256)
        follows = {"run_id": old[0], "record_count": old[2], "head_sha256": old[3]}
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.settimeout(max(deadline_ns - time.monotonic_ns(), 1) / 1e9)
            sock.connect(os.fspath(self._path))
        except OSError as exc:
            sock.close()
            raise AuditError(
                f"{operation} refused: the audit daemon at {self._path} failed earlier"
                f" ({self._failure}) and cannot be reached again ({_why(exc)});"
                " the action must not run"
            ) from exc
        self._sock, self._next_n, self._failure = sock, 0, None
        self._next_seq, self._head_sha256 = 0, None  # the new run's acks start again at 0
        try:
            answer = self._exchange(
                {**self._open_message, "follows": follows},
                f"{operation} (reconnecting)",
                expected=1,
                deadline_ns=deadline_ns,
            )
            run_id, run_file = answer.get("run_id"), answer.get("file")
            if not isinstance(run_id, str) or not isinstance(run_file, str):
                raise self._broke(operation, "the daemon's answer names no run")
        except AuditError:
            if self._failure is None:  # every refusal of an open is fatal; be sure of it
                self._broke(operation, "the daemon refused the reconnect")
            self._run_id, self._run_file, self._next_seq, self._head_sha256 = old
            raise
        self._run_id, self._run_file = run_id, run_file
        _log.info(
            "ghost.audit_daemon_reconnected",
            socket=str(self._path),
            run_id=run_id,
            follows=old[0],
            record_count=old[2],
        )

    def _exchange(
        self, message: dict[str, Any], operation: str, *, expected: int, deadline_ns: int
    ) -> Mapping[str, Any]:
        """Send ``message`` on the live connection and check the daemon's answer."""
        n = self._next_n
        try:
            frame = encode_frame({**message, "n": n}, max_bytes=MAX_FRAME_BYTES)
        except FrameError as exc:
            # Nothing was sent: the record is refused, the connection is still in step.
            raise AuditError(f"{operation}: the record cannot be sent ({exc.detail})") from None
        try:
            self._sock.settimeout(max(deadline_ns - time.monotonic_ns(), 1) / 1e9)
            self._sock.sendall(frame)
            answer = read_frame(self._sock, deadline_ns=deadline_ns)
        except TimeoutError as exc:
            raise self._broke(operation, f"no answer within {self.deadline_s:g} s") from exc
        except FrameError as exc:
            raise self._broke(operation, f"a broken answer ({exc.kind})") from exc
        except OSError as exc:
            raise self._broke(operation, _why(exc)) from exc
        if answer is None:
            raise self._broke(operation, "the daemon closed the connection")
        self._next_n = n + 1
        if answer.get("n") != n:
            raise self._broke(operation, "an answer out of order")
        if answer.get("ok") is not True:
            error = answer.get("error")
            why = error if isinstance(error, str) else "no reason given"
            if answer.get("fatal") is not False:
                raise self._broke(operation, f"the daemon refused: {why}")
            raise AuditError(f"{operation}: the audit daemon refused the record: {why}")
        records = answer.get("records")
        if not isinstance(records, list) or len(records) != expected:
            raise self._broke(operation, "an answer without the records' addresses")
        last = self._next_seq - 1
        for entry in records:
            seq = entry.get("seq") if isinstance(entry, Mapping) else None
            sha = entry.get("sha256") if isinstance(entry, Mapping) else None
            if type(seq) is not int or seq <= last or not _is_sha256(sha):
                raise self._broke(operation, "an acknowledgement that does not extend the run")
            last = seq
        # The head after the request: a checkpoint (or the seal) may follow the records.
        next_seq, head = answer.get("next_seq"), answer.get("head_sha256")
        if type(next_seq) is not int or next_seq <= last or not _is_sha256(head):
            raise self._broke(operation, "an acknowledgement without the run's head")
        self._next_seq, self._head_sha256 = next_seq, str(head)
        return answer

    def _broke(self, operation: str, why: str) -> AuditError:
        self._failure = why
        with contextlib.suppress(OSError):
            self._sock.close()
        _log.error("ghost.audit_daemon_failed", socket=str(self._path), operation=operation)
        return AuditError(
            f"{operation}: the audit daemon at {self._path} failed ({why}); the action must not run"
        )


def _is_sha256(value: object) -> bool:
    return isinstance(value, str) and _SHA256_HEX.fullmatch(value) is not None


def _why(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return f"{type(exc).__name__}: {exc.strerror}"
    return type(exc).__name__ if not str(exc) else f"{type(exc).__name__}: {exc}"
