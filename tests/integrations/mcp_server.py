"""The MCP server the gateway tests put behind ``ghost mcp-proxy`` (run as a script).

Each tool answers with the arguments it received and appends them, with the
request's ``_meta`` trace context, to the JSON-lines file named by
``GHOST_TEST_MCP_LOG``: what the server actually got, not what the proxy says
it forwarded.
"""

from __future__ import annotations

import json
import os
from typing import Any

from mcp.server.mcpserver import Context, MCPServer

app = MCPServer("ghost-test-server")


def _received(tool: str, ctx: Context, args: dict[str, Any]) -> dict[str, Any]:
    meta = ctx.request_context.meta or {}
    entry = {"tool": tool, "args": args, "traceparent": meta.get("traceparent")}
    with open(os.environ["GHOST_TEST_MCP_LOG"], "a", encoding="utf-8") as log:
        log.write(json.dumps(entry) + "\n")
    return {"tool": tool, "received": args}


@app.tool()
def read_file(path: str, ctx: Context, max_bytes: int = 4096) -> dict[str, Any]:
    """Pretend to read a file."""
    return _received("read_file", ctx, {"path": path, "max_bytes": max_bytes})


@app.tool()
def send_mail(to: str, body: str, ctx: Context) -> dict[str, Any]:
    """Pretend to send a mail."""
    return _received("send_mail", ctx, {"to": to, "body": body})


@app.tool()
def transfer(amount: int, to: str, ctx: Context) -> dict[str, Any]:
    """Pretend to transfer money."""
    return _received("transfer", ctx, {"amount": amount, "to": to})


@app.tool()
def delete_file(path: str, ctx: Context) -> dict[str, Any]:
    """Pretend to delete a file (the tests' policy denies it)."""
    return _received("delete_file", ctx, {"path": path})


@app.resource("notes://readme")
def readme() -> str:
    """A resource, to check that resources pass through."""
    return "resources pass through"


if __name__ == "__main__":
    app.run()
