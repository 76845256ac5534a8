"""Drive ``ghost mcp-proxy`` with the MCP SDK's own client, offline: every verdict once.

    python examples/mcp_gateway/client.py [OUT.mcap]

Starts ``ghost mcp-proxy`` (policy.toml, a fresh approval store) in front of
server.py, lists the tools, then calls: read_file (narrowed: max_bytes
clamped), send_mail with an AWS key in the body (scrubbed), delete_file
(denied), and transfer (pending: approved here as alice through the approval
store, as `ghost approvals approve` would, then run). Prints what came back,
then `ghost verify` on the run.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from mcp import Client, StdioServerParameters

from runtime import Resolution, SqliteApprovalStore

HERE = Path(__file__).resolve().parent
TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def _text(result: object) -> str:
    content = getattr(result, "content", [])
    return " ".join(getattr(block, "text", "") for block in content)


async def _approve_when_waiting(store_path: Path) -> None:
    """Play the human: approve the first pending decision as alice."""
    while True:
        with SqliteApprovalStore(store_path, create=False) as store:
            waiting = store.pending()
            if waiting:
                store.resolve(
                    Resolution(waiting[0].decision_id, "approved", "alice", time.time_ns())
                )
                print(f"  (alice approved decision {waiting[0].decision_id})")
                return
        await asyncio.sleep(0.05)


async def main(out: Path, store_path: Path) -> None:
    proxy = StdioServerParameters(
        command=sys.executable,
        args=[
            "-m",
            "analysis",
            "mcp-proxy",
            "--policy",
            str(HERE / "policy.toml"),
            "--audit",
            str(out),
            "--approvals-store",
            str(store_path),
            "--agent",
            "example-agent",
            "--",
            sys.executable,
            str(HERE / "server.py"),
        ],
    )
    async with Client(proxy) as client:
        tools = await client.list_tools()
        print("tools:", ", ".join(tool.name for tool in tools.tools))
        calls = [
            ("read_file", {"path": "/data/report.txt", "max_bytes": 1_000_000}),
            ("send_mail", {"to": "ops@example.com", "body": "key AKIAIOSFODNN7EXAMPLE"}),
            ("delete_file", {"path": "/data/report.txt"}),
        ]
        for name, arguments in calls:
            result = await client.call_tool(name, arguments, meta={"traceparent": TRACEPARENT})
            print(f"{name}: isError={result.is_error} {_text(result)}")
        approver = asyncio.create_task(_approve_when_waiting(store_path))
        result = await client.call_tool("transfer", {"amount": 250, "to": "acct-42"})
        await approver
        print(f"transfer: isError={result.is_error} {_text(result)}")
    subprocess.run([sys.executable, "-m", "analysis", "verify", str(out)], check=False)  # noqa: S603 - our own CLI


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as scratch:
        run = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(scratch) / "mcp-gateway.mcap"
        asyncio.run(main(run, Path(scratch) / "approvals.sqlite"))
