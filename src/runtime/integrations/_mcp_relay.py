"""One MCP gateway session: the client on one side, the child server on the other.

Every message passes through as parsed (and re-encoded, see `_mcp_wire`),
except a ``tools/call`` request, which becomes a task of its own: the gate
decides (in a worker thread, `Gate.acheck`), a ``pending`` decision waits
for its approval without holding the loop (`asettle`), and only then is the
call forwarded with the decision's arguments or answered with the refusal.
So a call waiting for a human never holds up another request.

What is never forwarded: a ``tools/call`` the gate did not permit, one whose
decision could not be recorded (`AuditError`: an error response instead), a
``tools/call`` notification (there is no request to answer, so it cannot be
judged and answered), a batch (an array could smuggle a call past the
inspection of single messages), and a line that is not JSON.

The server's name comes from ``--server-name`` or, failing that, from the
child itself: ``serverInfo`` in the results of the client's ``initialize``
(older revisions) or ``server/discover`` (2026-07-28), or, when a call needs
the name and neither was seen, a ``server/discover`` of the gateway's own
(its answer is consumed, never forwarded). The first name learned stays for
the session.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Final

from runtime._action import Action, Decision
from runtime._errors import AuditError
from runtime._gate import Gate
from runtime._logging import get_event_log
from runtime._version import SDK_VERSION
from runtime.integrations._gated_call import ActionOverride, GatedCall, asettle
from runtime.integrations._mcp_call import (
    CLIENT_INFO_META_KEY,
    SERVER_INFO_META_KEY,
    McpToolCall,
    mcp_action,
    trace_headers,
)
from runtime.integrations._mcp_wire import (
    INTERNAL_ERROR,
    INVALID_REQUEST,
    PARSE_ERROR,
    MalformedMessage,
    encode,
    error_response,
    parse,
    read_line,
    tool_refusal,
)

__all__ = ["ClientWriter", "Relay", "RelaySettings"]

ClientWriter = Callable[[bytes], Awaitable[None]]
"""Writes one encoded message (a JSON line) to the client."""

PROTOCOL_VERSION_META_KEY: Final = "io.modelcontextprotocol/protocolVersion"
CLIENT_CAPABILITIES_META_KEY: Final = "io.modelcontextprotocol/clientCapabilities"
MODERN_PROTOCOL_VERSION: Final = "2026-07-28"
_PROXY_NAME: Final = "ghost-mcp-proxy"
_PROBE: Final = "ghost-mcp-proxy probe"
_log = get_event_log("ghost.mcp")


@dataclass(frozen=True, slots=True)
class RelaySettings:
    """What every session of one gateway shares (see `McpGateway`)."""

    gate: Gate
    agent: str | None
    server_name: str | None
    action_for: ActionOverride[McpToolCall] | None
    discover_timeout_s: float


def _id_key(request_id: object) -> str:
    # JSON ids are strings or numbers (1 and "1" differ; a hostile one may be anything).
    try:
        return json.dumps(request_id, sort_keys=True, default=repr)
    except (RecursionError, ValueError):
        # An id nested too deeply to encode matches nothing (no json.dumps text
        # starts with a NUL): its call is still judged, it just cannot be cancelled.
        return f"\x00unkeyable-{uuid.uuid4().hex}"


class Relay:
    """The state of one session between a client and a child server.

    Args:
        settings: the gateway's settings.
        to_child: writes one encoded message to the child's stdin.
        to_client: writes one encoded message to the client.
    """

    def __init__(
        self,
        settings: RelaySettings,
        to_child: Callable[[bytes], Awaitable[None]],
        to_client: ClientWriter,
    ) -> None:
        self._settings = settings
        self._to_child = to_child
        self._to_client = to_client
        self._server_name = settings.server_name
        self._initialize_client: str | None = None
        self._handshake = False  # the client began an initialize handshake (older revisions)
        # Response ids whose result may name the server, and the method each answers.
        self._watched: dict[str, str] = {}
        self._probe_key: str | None = None
        self._named = asyncio.Event()  # the server's name is known, or the probe was answered
        self._calls: dict[str, asyncio.Task[None]] = {}  # held tools/call requests, by id
        self._tasks: set[asyncio.Task[None]] = set()
        self._checks: set[asyncio.Future[Decision]] = set()
        self.audit_failures = 0

    # --- start and end --------------------------------------------------------------------

    async def _probe(self) -> None:
        """Ask the child its name with a ``server/discover`` of our own, once.

        Sent only when a call needs the name and the client has not begun an
        ``initialize`` handshake: a server that serves both eras picks one from
        the first request it sees, so a probe sent first would lock a legacy
        client out.
        """
        if self._probe_key is not None:
            return
        probe_id = f"{_PROXY_NAME}-discover-{uuid.uuid4().hex}"
        self._probe_key = _id_key(probe_id)
        self._watched[self._probe_key] = _PROBE
        # An initialize answered without a name (or refused) set the event: calls now
        # wait for this probe's answer instead.
        self._named.clear()
        meta = {
            PROTOCOL_VERSION_META_KEY: MODERN_PROTOCOL_VERSION,
            CLIENT_INFO_META_KEY: {"name": _PROXY_NAME, "version": SDK_VERSION},
            CLIENT_CAPABILITIES_META_KEY: {},
        }
        await self._to_child(
            encode(
                {
                    "jsonrpc": "2.0",
                    "id": probe_id,
                    "method": "server/discover",
                    "params": {"_meta": meta},
                }
            )
        )

    async def drain(self) -> None:
        """End the calls: held ones are cancelled; started checks finish, recorded."""
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        # A check already in its worker thread records its decision whatever happens
        # to the call: wait for it, so the sink is closed after, not during, a write.
        await asyncio.gather(*self._checks, return_exceptions=True)

    # --- client -> child ------------------------------------------------------------------

    async def pump_client(self, reader: asyncio.StreamReader, limit: int) -> None:
        """Relay the client's messages until its stream ends."""
        while True:
            try:
                line = await read_line(reader)
            except EOFError:
                return
            if line is None:
                await self._send_client(
                    error_response(
                        None, INVALID_REQUEST, f"the message is larger than {limit} bytes"
                    )
                )
                continue
            if not line.strip():
                continue
            try:
                message = parse(line)
            except MalformedMessage as exc:
                await self._send_client(error_response(None, PARSE_ERROR, str(exc)))
                continue
            await self._from_client(message)

    async def _from_client(self, message: Any) -> None:
        if not isinstance(message, dict):
            # A batch (or a bare value): refused whole, so no call inside it is forwarded unjudged.
            await self._send_client(
                error_response(
                    None, INVALID_REQUEST, "one JSON-RPC message object per line, not a batch"
                )
            )
            return
        method = message.get("method")
        has_id = "id" in message
        if method == "tools/call":
            if not has_id:
                _log.warning("ghost.mcp_call_notification_dropped")
                return
            self._start_call(message)
            return
        if has_id and method in ("initialize", "server/discover"):
            self._watch_request(message, method)
        elif method == "notifications/cancelled":
            self._cancel_held(message.get("params"))
        try:
            await self._send_child(message)
        except MalformedMessage as exc:  # parsed, but too deep to encode again: answered, not lost
            if has_id:
                await self._send_client(error_response(message["id"], INVALID_REQUEST, str(exc)))

    def _watch_request(self, message: dict[str, Any], method: str) -> None:
        if method == "initialize":
            self._handshake = True
            params = message.get("params")
            info = params.get("clientInfo") if isinstance(params, dict) else None
            name = info.get("name") if isinstance(info, dict) else None
            if isinstance(name, str):
                self._initialize_client = name
        if self._server_name is None:
            self._watched[_id_key(message["id"])] = method

    def _cancel_held(self, params: object) -> None:
        if isinstance(params, dict) and "requestId" in params:
            task = self._calls.pop(_id_key(params["requestId"]), None)
            if task is not None:
                task.cancel()  # not forwarded yet: the cancellation itself passes on, harmless

    # --- tools/call ---------------------------------------------------------------------

    def _start_call(self, message: dict[str, Any]) -> None:
        key = _id_key(message["id"])
        task = asyncio.create_task(self._call(message, key))
        self._calls[key] = task
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _call(self, message: dict[str, Any], key: str) -> None:
        request_id = message["id"]
        try:
            try:
                reply = await self._judge(message)
            finally:
                if self._calls.get(key) is asyncio.current_task():
                    del self._calls[key]
        except asyncio.CancelledError:
            raise
        except AuditError:
            self.audit_failures += 1
            _log.error("ghost.mcp_call_unrecorded")
            reply = error_response(
                request_id,
                INTERNAL_ERROR,
                "ghost could not record its decision on this tool call, so it was not forwarded",
            )
        except Exception as exc:  # noqa: BLE001 - fail closed: whatever breaks, nothing is forwarded
            _log.error("ghost.mcp_call_failed", error=type(exc).__name__)
            reply = error_response(
                request_id,
                INTERNAL_ERROR,
                f"ghost could not judge this tool call ({type(exc).__name__}),"
                " so it was not forwarded",
            )
        if "method" in reply:
            try:
                await self._send_child(reply)
            except MalformedMessage as exc:  # decided, but it cannot be encoded: not forwarded
                await self._send_client(error_response(request_id, INVALID_REQUEST, str(exc)))
        else:
            await self._send_client(reply)

    async def _judge(self, message: dict[str, Any]) -> dict[str, Any]:
        """The message to send on: the forwarded request, or the answer to the client."""
        settings = self._settings
        if self._server_name is None:
            if not self._handshake:
                await self._probe()
            with contextlib.suppress(TimeoutError):  # an initialize's answer, or the probe's
                await asyncio.wait_for(self._named.wait(), settings.discover_timeout_s)
        params = message.get("params")
        call = McpToolCall.from_params(
            params,
            agent=settings.agent,
            initialize_client=self._initialize_client,
            server_name=self._server_name,
        )
        traceparent, tracestate = trace_headers(call.meta)
        decision = await self._check(self._action(call), traceparent, tracestate)
        gated = await asettle(settings.gate, decision)
        if gated.args is None:
            return tool_refusal(message["id"], self._refusal(gated, call))
        if not isinstance(params, dict) or not isinstance(call.name, str):
            # Permitted by an override's action, but not a call the child could run as judged.
            return error_response(
                message["id"],
                INVALID_REQUEST,
                "a tools/call needs params with a string name; it was not forwarded"
                f" (decision {decision.decision_id})",
            )
        meta = dict(call.meta)
        meta["traceparent"] = decision.traceparent  # the server's work is the gate span's child
        if decision.tracestate is None:
            meta.pop("tracestate", None)
        else:
            meta["tracestate"] = decision.tracestate
        forwarded = dict(params)
        forwarded["arguments"] = gated.args
        forwarded["_meta"] = meta
        return {**message, "params": forwarded}

    def _action(self, call: McpToolCall) -> Action:
        override = self._settings.action_for
        if override is None:
            return mcp_action(call)
        try:
            action = override(call)
            if not isinstance(action, Action):
                raise TypeError(f"the action override returned a {type(action).__name__}")
        except Exception as exc:  # noqa: BLE001 - the override is the host's code: its failure denies
            _log.error("ghost.mcp_action_override_failed", error=type(exc).__name__)
            # A placeholder the gate denies whatever the policy says (a resource that
            # is not a string) and records, naming the failure in its verb.
            return Action(
                agent=call.agent,
                verb=f"action override raised {type(exc).__name__}",
                resource=None,  # type: ignore[arg-type]
                args={},
            )
        return action

    async def _check(
        self, action: Action, traceparent: str | None, tracestate: str | None
    ) -> Decision:
        check = asyncio.ensure_future(
            self._settings.gate.acheck(action, traceparent=traceparent, tracestate=tracestate)
        )
        self._checks.add(check)
        check.add_done_callback(self._checks.discard)
        return await asyncio.shield(check)

    def _refusal(self, gated: GatedCall, call: McpToolCall) -> str:
        text = gated.refusal or ""
        if call.server_name is None and self._settings.action_for is None:
            _log.warning("ghost.mcp_server_unnamed")
            text += (
                " The MCP server did not say its name, so its tools cannot be matched:"
                " name it with --server-name."
            )
        return text

    # --- child -> client ----------------------------------------------------------------

    async def pump_child(self, reader: asyncio.StreamReader) -> None:
        """Relay the child's messages until its stdout ends."""
        while True:
            try:
                line = await read_line(reader)
            except EOFError:
                return
            if line is None:
                _log.warning("ghost.mcp_server_message_too_long")
                continue
            try:
                message = parse(line)
            except MalformedMessage:
                message = None if not _is_json_object(line) else {}
            if not isinstance(message, dict):
                # A banner or a debug print on the server's stdout (which the stdio
                # transport forbids it) is not a message: the client never sees it.
                _log.warning("ghost.mcp_server_noise_dropped")
                continue
            # An object ghost's strict reader refuses (a NaN, a duplicate key) is still
            # the server's answer: relayed as it came, for the client to judge, never
            # read for the server's name.
            if message and self._watched and self._answers_watch(message):
                continue
            await self._to_client_raw(line if line.endswith(b"\n") else line + b"\n")

    def _answers_watch(self, message: dict[str, Any]) -> bool:
        """Learn the server's name from a watched response; True for our own probe's answer."""
        if "id" not in message or "method" in message:
            return False
        key = _id_key(message["id"])
        if key not in self._watched:
            return False
        method = self._watched.pop(key)
        if method == "initialize" and "result" not in message:
            self._handshake = False  # refused (a 2026-only server): calls may probe
        name = _server_name(message.get("result"))
        if name is not None and self._server_name is None:
            self._server_name = name
            self._watched.clear()
            self._named.set()
        ours = method == _PROBE
        if ours or not self._watched:
            self._named.set()  # answered, named or not: calls stop waiting
        return ours

    # --- writing ------------------------------------------------------------------------

    async def _send_child(self, message: dict[str, Any]) -> None:
        await self._to_child(encode(message))

    async def _send_client(self, message: dict[str, Any]) -> None:
        try:
            data = encode(message)
        except MalformedMessage as exc:  # an id too deep to echo: the answer goes without it
            data = encode(error_response(None, INVALID_REQUEST, str(exc)))
        await self._to_client_raw(data)

    async def _to_client_raw(self, data: bytes) -> None:
        try:
            await self._to_client(data)
        except OSError:  # the client went away; its end of the stream says so to the pump
            _log.info("ghost.mcp_client_unwritable")


def _server_name(result: object) -> str | None:
    """``serverInfo.name`` of an ``initialize`` result, or the ``_meta`` stamp (2026-07-28)."""
    if not isinstance(result, dict):
        return None
    info = result.get("serverInfo")
    if not isinstance(info, dict):
        meta = result.get("_meta")
        info = meta.get(SERVER_INFO_META_KEY) if isinstance(meta, dict) else None
    name = info.get("name") if isinstance(info, dict) else None
    return name if isinstance(name, str) else None


def _is_json_object(line: bytes) -> bool:
    """Whether ``line`` is a JSON object by Python's lenient reader (NaN, repeated keys)."""
    try:
        return isinstance(json.loads(line), dict)
    except (ValueError, RecursionError):
        return False
