"""A tiny MCP server for the gateway example: three tools that do nothing real.

Each tool answers with exactly the arguments it received, so what the
gateway forwarded (narrowed, scrubbed) is what the client sees. Run by
``ghost mcp-proxy`` as its child over stdio; no network, no files touched.
"""

from __future__ import annotations

from typing import Any

from mcp.server.mcpserver import MCPServer

app = MCPServer("ghost-example")


@app.tool()
def read_file(path: str, max_bytes: int = 4096) -> dict[str, Any]:
    """Read a file (pretend): returns the arguments received."""
    return {"tool": "read_file", "received": {"path": path, "max_bytes": max_bytes}}


@app.tool()
def send_mail(to: str, body: str) -> dict[str, Any]:
    """Send a mail (pretend): returns the arguments received."""
    return {"tool": "send_mail", "received": {"to": to, "body": body}}


@app.tool()
def transfer(amount: int, to: str) -> dict[str, Any]:
    """Transfer money (pretend): returns the arguments received."""
    return {"tool": "transfer", "received": {"amount": amount, "to": to}}


@app.tool()
def delete_file(path: str) -> dict[str, Any]:
    """Delete a file (pretend): the policy never lets this run."""
    return {"tool": "delete_file", "received": {"path": path}}


@app.resource("notes://readme")
def readme() -> str:
    """A resource, to show that resources pass through the gateway unchanged."""
    return "resources pass through ghost mcp-proxy unchanged"


if __name__ == "__main__":
    app.run()
