"""``ghost mcp-proxy``: an MCP server behind the gate, every ``tools/call`` judged and recorded.

::

    ghost mcp-proxy --policy P --audit OUT.mcap [--agent NAME] [--server-name NAME]
                    [--approvals-store PATH] -- <server command ...>

The client runs this command in place of the server's; the server runs as
its child over stdio (`runtime.integrations.mcp.McpGateway`, ADR 0022). The
proxy's stdout carries protocol messages only; its own errors (one
``ghost: error: ...`` line), ghost's warning events (names only, never a
value) and the server's stderr go to stderr.

Exit codes (SPEC §6):

* 0 — the client disconnected; the run is sealed.
* 1 — the proxy could not start: the policy cannot be read or is malformed,
  the audit file exists or cannot be written, the approval store cannot be
  used, the server command cannot be started; or a decision could not be
  recorded during the run (those calls were refused, never forwarded); or
  the run could not be sealed at the end.
* 2 — a malformed command line (no server command after ``--``).
* 6 — the server exited before the client disconnected; the run is sealed.
* 130 / 143 — stopped by SIGINT / SIGTERM; the run is sealed.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from runtime.integrations.mcp import McpGateway

__all__ = ["EXIT_SERVER_EXITED", "add_mcp_proxy_command"]

EXIT_SERVER_EXITED: Final = 6
"""``mcp-proxy``: the server exited before the client disconnected (the run is sealed)."""
_EXIT_OK: Final = 0
_EXIT_FAILURE: Final = 1
_EXIT_SIGNAL_BASE: Final = 128
_PROG: Final = "ghost"


def add_mcp_proxy_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``mcp-proxy`` to the ``ghost`` parser's subcommands (handler in ``handler``)."""
    proxy = commands.add_parser(
        "mcp-proxy",
        help="run an MCP server, every tools/call gated and recorded",
        description=(
            "Run the MCP server command after -- as a child over stdio and speak for it on"
            " this process's stdin/stdout, unchanged except that every tools/call is judged"
            " by the policy first (deny: an isError tool result with the reason and decision"
            " id; narrow/scrub: forwarded with the effective arguments; approval: held until"
            " resolved with `ghost approvals` or expired) and recorded in the audit file."
            " Exit 0: the client disconnected; 1: cannot start (policy, audit file, approval"
            f" store, server command) or a decision could not be recorded; 2: usage;"
            f" {EXIT_SERVER_EXITED}: the server exited first; 130/143: SIGINT/SIGTERM."
            " The run is sealed in every case but 1 at start."
        ),
    )
    proxy.add_argument(
        "--policy", required=True, type=Path, metavar="P", help="the policy file (TOML)"
    )
    proxy.add_argument(
        "--audit",
        required=True,
        type=Path,
        metavar="OUT.mcap",
        help="the audit log to write (never replaced)",
    )
    proxy.add_argument(
        "--agent",
        metavar="NAME",
        help="the agent every call is made as (default: the client's name, else mcp-client)",
    )
    proxy.add_argument(
        "--server-name",
        metavar="NAME",
        help="the NAME in the resource mcp:NAME (default: the name the server gives itself)",
    )
    proxy.add_argument(
        "--approvals-store",
        type=Path,
        metavar="PATH",
        help=(
            "a SQLite approval store (created if absent) where held calls wait, resolvable"
            " with `ghost approvals`; without it they can only expire"
        ),
    )
    proxy.add_argument(
        "server", nargs=argparse.REMAINDER, metavar="-- COMMAND", help="the MCP server to run"
    )
    proxy.set_defaults(handler=_mcp_proxy, mcp_proxy_parser=proxy)


def _mcp_proxy(args: argparse.Namespace) -> int:
    command: list[str] = list(args.server)
    if command[:1] == ["--"]:
        command = command[1:]
    if not command:
        args.mcp_proxy_parser.error("give the MCP server's command after --")
    from audit import McapAuditSink
    from runtime import (
        ApprovalStoreError,
        AuditError,
        Gate,
        Policy,
        PolicyError,
        SqliteApprovalStore,
    )
    from runtime.integrations.mcp import McpGateway, McpServerStartError

    _log_to_stderr()
    try:
        policy = Policy.from_toml(args.policy)
    except PolicyError as exc:
        return _fail(f"cannot use policy {args.policy}: {exc}")
    store = None
    if args.approvals_store is not None:
        try:
            store = SqliteApprovalStore(args.approvals_store)
        except ApprovalStoreError as exc:
            return _fail(str(exc))
    try:
        sink = McapAuditSink(args.audit)
    except AuditError as exc:
        if store is not None:
            store.close()
        return _fail(str(exc))
    unsealed: AuditError | None = None
    try:
        gate = Gate(policy, sink=sink, approvals=store)
        gateway = McpGateway(gate, agent=args.agent, server_name=args.server_name)
        try:
            code = asyncio.run(_serve(gateway, command))
        except McpServerStartError as exc:
            code = _fail(str(exc))
    except AuditError as exc:
        code = _fail(f"cannot write the audit log: {exc}")
    finally:
        try:
            sink.close()  # seals the run, after the expiries due are recorded
        except AuditError as exc:  # the exit status must not promise a sealed run
            unsealed = exc
        if store is not None:
            store.close()
    if unsealed is not None:
        return _fail(f"cannot seal the audit log: {unsealed}")
    return code


async def _serve(gateway: McpGateway, command: list[str]) -> int:
    from runtime.integrations.mcp import GatewayEnd

    loop = asyncio.get_running_loop()
    task = asyncio.ensure_future(gateway.serve_stdio(command))
    stopped: list[int] = []

    def stop(signum: int) -> None:
        stopped.append(signum)
        task.cancel()

    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop, signum)
    try:
        result = await task
    except asyncio.CancelledError:
        if not stopped:
            raise
        return _EXIT_SIGNAL_BASE + stopped[0]
    finally:
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(signum)
    if result.audit_failures:
        return _fail(
            f"{result.audit_failures} tool call(s) were refused because their decision"
            " could not be recorded"
        )
    if result.end is GatewayEnd.SERVER_EXITED:
        print(
            f"{_PROG}: the MCP server exited (status {result.server_returncode})"
            " before the client disconnected",
            file=sys.stderr,
        )
        return EXIT_SERVER_EXITED
    return _EXIT_OK


def _log_to_stderr() -> None:
    """ghost's own warnings (an unrecorded call, a dropped message) to stderr, never stdout."""
    import logging

    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("ghost: %(levelname)s %(name)s: %(message)s"))
    handler.setLevel(logging.WARNING)
    logging.getLogger("ghost").addHandler(handler)


def _fail(message: str) -> int:
    from analysis._printable import printable

    print(f"{_PROG}: error: {printable(message, limit=2000)}", file=sys.stderr)
    return _EXIT_FAILURE
