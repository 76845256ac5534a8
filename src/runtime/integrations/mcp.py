"""The MCP gateway behind ``ghost mcp-proxy``: every ``tools/call`` through the gate (SPEC §7).

Install with ``pip install 'ghost-sdk[mcp]'``. The gateway runs an MCP server
as a child over stdio and speaks for it to the client, unchanged (tools,
resources, prompts, notifications, the server's own requests pass through,
whatever the protocol revision), except that each ``tools/call`` is judged
first::

    gateway = McpGateway(gate, agent="researcher")
    result = await gateway.serve_stdio(["python", "my_server.py"])

* ``deny`` (and a rejected or expired approval): the client gets a tool
  result with ``isError: true`` whose text carries ``decision.reason`` and
  the decision id; the server never sees the call;
* ``narrow`` / ``scrub``: the call is forwarded with ``decision.args``;
* ``pending``: the call waits (other requests do not) until a human resolves
  it through the gate's approval store (``ghost approvals``) or the rule's
  timeout expires it, then is forwarded or refused;
* the decision could not be recorded (`AuditError`): a JSON-RPC error, and
  the call is not forwarded.

The request's ``_meta`` ``traceparent`` and ``tracestate`` are the gate's
trace context; the forwarded call carries the gate span's ``traceparent``,
so the server's work is a child of the decision. The gateway writes nothing
to the client's stream but protocol messages (`serve_stdio` points the
process's own stdout at stderr for its duration).

This module is the transport; the relay is `runtime.integrations._mcp_relay`,
the action convention `runtime.integrations._mcp_call` (ADR 0022).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import queue
import sys
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Final

from runtime._errors import GhostError
from runtime._gate import Gate
from runtime._logging import get_event_log
from runtime.integrations._gated_call import ActionOverride
from runtime.integrations._mcp_call import (
    CLIENT_INFO_META_KEY,
    DEFAULT_AGENT,
    MCP_RESOURCE_PREFIX,
    McpToolCall,
    mcp_action,
)
from runtime.integrations._mcp_relay import ClientWriter, Relay, RelaySettings

__all__ = [
    "CLIENT_INFO_META_KEY",
    "DEFAULT_AGENT",
    "MCP_RESOURCE_PREFIX",
    "ClientWriter",
    "GatewayEnd",
    "GatewayResult",
    "McpGateway",
    "McpServerStartError",
    "McpToolCall",
    "mcp_action",
]

DEFAULT_MAX_MESSAGE_BYTES: Final = 16 * 1024 * 1024
_SERVER_MAX_MESSAGE_BYTES: Final = 256 * 1024 * 1024
# The MCP stdio shutdown: close the server's stdin, wait, SIGTERM, wait, SIGKILL.
_EXIT_GRACE_S: Final = 2.0
_TERM_GRACE_S: Final = 2.0
_DRAIN_S: Final = 2.0
_READ_CHUNK: Final = 64 * 1024
_log = get_event_log("ghost.mcp")


class McpServerStartError(GhostError):
    """The MCP server's command could not be started.

    Attributes:
        command: the program that was to be run.
        problem: why it could not be (the OS's words).
    """

    def __init__(self, command: str, problem: str) -> None:
        self.command = command
        self.problem = problem
        super().__init__(f"cannot start the MCP server {command!r}: {problem}")


class GatewayEnd(StrEnum):
    """Why a gateway session ended."""

    CLIENT_CLOSED = "client_closed"
    """The client closed its stream (the normal end)."""
    SERVER_EXITED = "server_exited"
    """The server's stdout ended (it exited, or closed it) before the client left."""


@dataclass(frozen=True, slots=True)
class GatewayResult:
    """How a gateway session ended.

    Attributes:
        end: which side ended it.
        server_returncode: the server's exit status (negative: killed by that signal).
        audit_failures: tools/call requests refused because their decision
            could not be recorded (`AuditError`); 0 in a healthy run.
    """

    end: GatewayEnd
    server_returncode: int | None
    audit_failures: int


class McpGateway:
    """Gate every ``tools/call`` between an MCP client and a server run as a child.

    Args:
        gate: the gate that judges each call (its sink records them).
        agent: the agent every call is made as (``--agent``); default: the
            client's name as the protocol carries it, else ``mcp-client``.
        server_name: the name in ``mcp:<server name>`` (``--server-name``);
            default: the name the server gives itself.
        action_for: an override from each call to the `Action` judged, for
            resources finer than the server (a path, an account); whatever it
            raises denies the call, recorded.
        discover_timeout_s: how long a call waits for the server to say its
            name (an unnamed server's calls are denied, recorded).
        max_message_bytes: the longest client message accepted; a longer one
            is refused with a JSON-RPC error, unread.

    Raises:
        ValueError: a timeout or size that is not positive.
    """

    __slots__ = ("_max_message_bytes", "_settings")

    def __init__(
        self,
        gate: Gate,
        *,
        agent: str | None = None,
        server_name: str | None = None,
        action_for: ActionOverride[McpToolCall] | None = None,
        discover_timeout_s: float = 10.0,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
    ) -> None:
        if not (discover_timeout_s > 0 and math.isfinite(discover_timeout_s)):
            raise ValueError(f"discover_timeout_s must be positive, not {discover_timeout_s!r}")
        if type(max_message_bytes) is not int or max_message_bytes < 1:
            raise ValueError(f"max_message_bytes must be positive, not {max_message_bytes!r}")
        self._settings = RelaySettings(gate, agent, server_name, action_for, discover_timeout_s)
        self._max_message_bytes = max_message_bytes

    async def serve(
        self,
        command: Sequence[str],
        client_in: asyncio.StreamReader,
        client_out: ClientWriter,
        *,
        env: Mapping[str, str] | None = None,
    ) -> GatewayResult:
        """Run the server ``command`` and relay between it and one client until either ends.

        When the client's stream ends, the server's stdin is closed and it is
        given time to exit (then terminated, then killed); when the server's
        stdout ends first, the session ends too. Either way, calls still held
        are abandoned (never forwarded) and every decision already being made
        is recorded before this returns. Cancelling it (SIGTERM) does the same.

        Args:
            command: the server's program and arguments.
            client_in: the client's messages (its stream limit should be at
                least ``max_message_bytes``).
            client_out: writes one message to the client.
            env: the server's environment (default: this process's).

        Returns:
            How the session ended.

        Raises:
            McpServerStartError: the command could not be started.
        """
        if not command:
            raise McpServerStartError("", "no command was given")
        try:
            child = await asyncio.create_subprocess_exec(
                *command,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                env=None if env is None else dict(env),
                limit=_SERVER_MAX_MESSAGE_BYTES,
            )
        except (OSError, ValueError) as exc:
            problem = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            raise McpServerStartError(command[0], problem or type(exc).__name__) from None
        assert child.stdin is not None  # PIPE was asked for
        assert child.stdout is not None
        stdin, stdout = child.stdin, child.stdout
        lock = asyncio.Lock()

        async def to_child(data: bytes) -> None:
            async with lock:
                try:
                    stdin.write(data)
                    await stdin.drain()
                except (OSError, RuntimeError):  # the server is gone: its stdout's end says so
                    _log.info("ghost.mcp_server_unwritable")

        relay = Relay(self._settings, to_child, client_out)
        client_task = asyncio.create_task(relay.pump_client(client_in, self._max_message_bytes))
        server_task = asyncio.create_task(relay.pump_child(stdout))
        end = GatewayEnd.SERVER_EXITED
        _log.info("ghost.mcp_session_started")
        try:
            done, _ = await asyncio.wait(
                (client_task, server_task), return_when=asyncio.FIRST_COMPLETED
            )
            if client_task in done and server_task not in done:
                end = GatewayEnd.CLIENT_CLOSED
        finally:
            client_task.cancel()
            await relay.drain()
            await _stop(child, stdin)
            with contextlib.suppress(
                TimeoutError
            ):  # what the server said last still reaches the client
                await asyncio.wait_for(asyncio.shield(server_task), _DRAIN_S)
            server_task.cancel()
            await asyncio.gather(client_task, server_task, return_exceptions=True)
            _log.info("ghost.mcp_session_ended", returncode=child.returncode)
        return GatewayResult(end, child.returncode, relay.audit_failures)

    async def serve_stdio(
        self, command: Sequence[str], *, env: Mapping[str, str] | None = None
    ) -> GatewayResult:
        """`serve` with this process's stdin and stdout as the client's stream.

        For its duration, file descriptor 1 points at stderr and 0 at
        ``/dev/null``: nothing else in the process (a library's print) can
        write into the protocol stream or read from it.

        Raises:
            McpServerStartError: the command could not be started.
        """
        with _private_stdio() as (in_fd, out_fd):
            loop = asyncio.get_running_loop()
            reader = asyncio.StreamReader(limit=self._max_message_bytes)
            threading.Thread(
                target=_feed, args=(in_fd, reader, loop), name="ghost-mcp-stdin", daemon=True
            ).start()
            writer = _ClientWriter(out_fd)
            try:
                return await self.serve(command, reader, writer.write, env=env)
            finally:
                writer.stop()


async def _stop(child: asyncio.subprocess.Process, stdin: asyncio.StreamWriter) -> None:
    with contextlib.suppress(OSError, RuntimeError):
        stdin.close()
    for grace_s, then in ((_EXIT_GRACE_S, child.terminate), (_TERM_GRACE_S, child.kill)):
        try:
            await asyncio.wait_for(child.wait(), grace_s)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                then()
        else:
            return
    await child.wait()


def _flush_stdout() -> None:
    # What the process printed sits in sys.stdout's buffer until flushed, and goes to
    # whatever descriptor 1 is *then*: flushed only after the session, it would land
    # in the protocol stream. So flush on each switch of descriptor 1.
    with contextlib.suppress(Exception):
        if sys.stdout is not None:
            sys.stdout.flush()


@contextlib.contextmanager
def _private_stdio() -> Iterator[tuple[int, int]]:
    _flush_stdout()
    in_fd, out_fd = os.dup(0), os.dup(1)
    saved_in, saved_out = os.dup(0), os.dup(1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    try:
        os.dup2(devnull, 0)
        os.dup2(2, 1)
        yield in_fd, out_fd
    finally:
        _flush_stdout()  # the session's prints to stderr, where descriptor 1 points now
        os.dup2(saved_in, 0)
        os.dup2(saved_out, 1)
        for fd in (devnull, saved_in, saved_out, out_fd):
            os.close(fd)
        # in_fd stays open: the reader thread may still be blocked on it, and closing a
        # descriptor under a blocked read could hand the number to another file.


def _feed(fd: int, reader: asyncio.StreamReader, loop: asyncio.AbstractEventLoop) -> None:
    """The stdin thread: the client's bytes into ``reader``, on the loop, until EOF."""
    try:
        while chunk := os.read(fd, _READ_CHUNK):
            loop.call_soon_threadsafe(reader.feed_data, chunk)
    except OSError:
        pass
    with contextlib.suppress(RuntimeError):  # the loop is closed: nobody reads any more
        loop.call_soon_threadsafe(reader.feed_eof)


class _ClientWriter:
    """Writes to the client from a daemon thread of its own, in order; awaiting is cancellable.

    A client that stops reading fills the pipe and blocks the write for good. In
    the loop's default executor that thread would be joined when `asyncio.run`
    ends -- after a SIGTERM the proxy would never exit, nor seal its run. This
    thread is never joined: a cancelled session stops waiting for it, and the
    process exits around it.
    """

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._queue: queue.SimpleQueue[
            tuple[bytes, asyncio.Future[None], asyncio.AbstractEventLoop] | None
        ] = queue.SimpleQueue()
        threading.Thread(target=self._run, name="ghost-mcp-stdout", daemon=True).start()

    async def write(self, data: bytes) -> None:
        """Hand ``data`` to the thread and wait until it is written (or the wait is cancelled)."""
        loop = asyncio.get_running_loop()
        done: asyncio.Future[None] = loop.create_future()
        self._queue.put((data, done, loop))
        await done

    def stop(self) -> None:
        """Let the thread end once what it holds is written (it is never waited for)."""
        self._queue.put(None)

    def _run(self) -> None:
        while (item := self._queue.get()) is not None:
            data, done, loop = item
            error: OSError | None = None
            try:
                _write_all(self._fd, data)
            except OSError as exc:
                error = exc
            with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits
                loop.call_soon_threadsafe(_settle_write, done, error)


def _settle_write(done: asyncio.Future[None], error: OSError | None) -> None:
    if done.cancelled():
        return
    if error is None:
        done.set_result(None)
    else:
        done.set_exception(error)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
