"""What the MCP gateway tests share: the policy, the proxy's command line, reading the run."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from audit import read_run

SERVER = Path(__file__).with_name("mcp_server.py")
SERVER_NAME = "ghost-test-server"
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
TRACEPARENT = f"00-{TRACE_ID}-00f067aa0ba902b7-01"
# AWS's documented example key id: the scrubber's detector finds it; it is no credential.
SECRET = "AKIAIOSFODNN7EXAMPLE"


def policy_text(*, transfer_timeout_s: float) -> str:
    """The tests' policy: each verdict reachable by one tool of the test server."""
    return f"""
policy_id = "mcp-gateway-tests"
default = "deny"

[[rules]]
id = "never-delete"
verbs = ["delete_file"]
resources = ["mcp:*"]
effect = "deny"

[[rules]]
id = "read-small"
verbs = ["read_file"]
resources = ["mcp:{SERVER_NAME}"]
effect = "narrow"
narrow.clamp = {{ max_bytes = 1000 }}

[[rules]]
id = "mail"
verbs = ["send_mail"]
resources = ["mcp:{SERVER_NAME}"]
effect = "allow"
scrub_exempt = ["to"]

[[rules]]
id = "transfers-need-approval"
verbs = ["transfer"]
resources = ["mcp:{SERVER_NAME}"]
effect = "approval"
approval = {{ timeout_s = {transfer_timeout_s}, approvers = ["alice"] }}

[scrub]
detectors = ["*"]
action = "redact"
"""


def write_policy(directory: Path, *, transfer_timeout_s: float = 120) -> Path:
    path = directory / "policy.toml"
    path.write_text(policy_text(transfer_timeout_s=transfer_timeout_s), encoding="utf-8")
    return path


def proxy_command(
    policy: Path, audit: Path, *extra: str, server: list[str] | None = None
) -> list[str]:
    """``ghost mcp-proxy`` in a fresh interpreter, in front of the test server."""
    return [
        sys.executable,
        "-m",
        "analysis",
        "mcp-proxy",
        "--policy",
        str(policy),
        "--audit",
        str(audit),
        *extra,
        "--",
        *(server if server is not None else [sys.executable, str(SERVER)]),
    ]


def received(log: Path) -> list[dict[str, Any]]:
    """What the server's tools were called with, in order."""
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]


def decisions(run: Path) -> list[dict[str, Any]]:
    """Each decision of the run, in order, with its assessment's agent, verb and resource."""
    records = [r for r in read_run(run).records if r.record]
    assessed = {r.record["decision_id"]: r.record for r in records if r.topic == "/assessments"}
    return [
        {**assessed[r.record["decision_id"]], **r.record}
        for r in records
        if r.topic == "/decisions"
    ]


def verify(run: Path) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "analysis", "verify", str(run)],
        capture_output=True,
        timeout=120,
        check=False,
    )
