"""``ghost mcp-proxy``'s command line: its errors, exit codes, and a sealed run however it ends."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from tests.e2e.test_cli import assert_one_error_line
from tests.integrations._mcp_support import SERVER, decisions, proxy_command, verify, write_policy

DISCOVER = (
    json.dumps(
        {
            "jsonrpc": "2.0",
            "id": "d",
            "method": "server/discover",
            "params": {
                "_meta": {
                    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                    "io.modelcontextprotocol/clientCapabilities": {},
                }
            },
        }
    ).encode()
    + b"\n"
)


def _run(
    command: list[str], stdin: bytes = b"", tmp_path: Path | None = None
) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "GHOST_TEST_MCP_LOG": str((tmp_path or Path(os.devnull)) / "server.jsonl")}
    return subprocess.run(
        command, input=stdin, capture_output=True, timeout=120, check=False, env=env
    )


def test_a_malformed_policy_exits_1_with_one_line(tmp_path: Path) -> None:
    policy = tmp_path / "policy.toml"
    policy.write_text('default = "maybe"\n', encoding="utf-8")
    result = _run(proxy_command(policy, tmp_path / "run.mcap"))
    assert result.returncode == 1
    assert_one_error_line(result, "cannot use policy")
    assert not (tmp_path / "run.mcap").exists()


def test_no_server_command_is_a_usage_error(tmp_path: Path) -> None:
    command = proxy_command(write_policy(tmp_path), tmp_path / "run.mcap", server=[])
    result = _run(command)
    assert result.returncode == 2
    assert b"give the MCP server's command after --" in result.stderr


def test_an_existing_audit_file_is_never_replaced(tmp_path: Path) -> None:
    run = tmp_path / "run.mcap"
    run.write_bytes(b"precious")
    result = _run(proxy_command(write_policy(tmp_path), run))
    assert result.returncode == 1
    assert_one_error_line(result, "refusing to replace")
    assert run.read_bytes() == b"precious"


def test_a_server_that_cannot_start_exits_1(tmp_path: Path) -> None:
    missing = str(tmp_path / "no-such-server")
    result = _run(proxy_command(write_policy(tmp_path), tmp_path / "run.mcap", server=[missing]))
    assert result.returncode == 1
    assert_one_error_line(result, "cannot start the MCP server", "no-such-server")
    assert verify(tmp_path / "run.mcap").returncode == 0  # begun, then sealed empty


def test_a_server_that_exits_first_exits_6_with_the_run_sealed(tmp_path: Path) -> None:
    command = proxy_command(
        write_policy(tmp_path), tmp_path / "run.mcap", server=[sys.executable, "-c", "pass"]
    )
    with (tmp_path / "out").open("w+b") as out, (tmp_path / "err").open("w+b") as err:
        proxy = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=out, stderr=err)
        proxy.wait(timeout=120)  # the client's stdin stays open: the server ends the session
        assert proxy.stdin is not None
        proxy.stdin.close()
    stdout, stderr = (tmp_path / "out").read_bytes(), (tmp_path / "err").read_bytes()
    assert proxy.returncode == 6, stderr
    assert b"the MCP server exited (status 0)" in stderr
    assert stdout == b""
    assert verify(tmp_path / "run.mcap").returncode == 0


def test_the_client_hanging_up_exits_0_and_only_protocol_reaches_stdout(tmp_path: Path) -> None:
    env = {**os.environ, "GHOST_TEST_MCP_LOG": str(tmp_path / "server.jsonl")}
    proxy = subprocess.Popen(
        proxy_command(write_policy(tmp_path), tmp_path / "run.mcap"),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    assert proxy.stdin is not None
    assert proxy.stdout is not None
    proxy.stdin.write(DISCOVER)
    proxy.stdin.flush()
    answer = json.loads(proxy.stdout.readline())
    rest, stderr = proxy.communicate(timeout=120)  # closes stdin: the client hangs up
    assert proxy.returncode == 0, stderr
    assert rest == b""  # nothing but the one answer, and not the proxy's own probe's
    assert answer["id"] == "d"
    server_info = answer["result"]["_meta"]["io.modelcontextprotocol/serverInfo"]
    assert server_info["name"] == "ghost-test-server"
    assert verify(tmp_path / "run.mcap").returncode == 0


def test_sigterm_seals_the_run_and_exits_143(tmp_path: Path) -> None:
    run = tmp_path / "run.mcap"
    command = proxy_command(write_policy(tmp_path), run, "--server-name", "ghost-test-server")
    env = {**os.environ, "GHOST_TEST_MCP_LOG": str(tmp_path / "server.jsonl")}
    proxy = subprocess.Popen(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
    )
    assert proxy.stdin is not None
    assert proxy.stdout is not None
    call = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "delete_file", "arguments": {"path": "/x"}},
    }
    proxy.stdin.write(json.dumps(call).encode() + b"\n")
    proxy.stdin.flush()
    assert json.loads(proxy.stdout.readline())["result"]["isError"] is True  # serving, recorded
    proxy.send_signal(signal.SIGTERM)
    _, stderr = proxy.communicate(timeout=120)
    assert proxy.returncode == 128 + signal.SIGTERM, stderr
    assert verify(run).returncode == 0
    (decision,) = decisions(run)
    assert decision["resource"] == "mcp:ghost-test-server"  # --server-name, no discovery needed
    assert decision["agent"] == "mcp-client"  # no clientInfo anywhere: the default


def test_agent_flag_names_every_call(tmp_path: Path) -> None:
    run = tmp_path / "run.mcap"
    call = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {
            "name": "delete_file",
            "arguments": {"path": "/x"},
            "_meta": {"io.modelcontextprotocol/clientInfo": {"name": "claimed"}},
        },
    }
    env = {**os.environ, "GHOST_TEST_MCP_LOG": str(tmp_path / "server.jsonl")}
    proxy = subprocess.Popen(
        proxy_command(write_policy(tmp_path), run, "--agent", "ops-bot"),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    assert proxy.stdin is not None
    assert proxy.stdout is not None
    proxy.stdin.write(json.dumps(call).encode() + b"\n")
    proxy.stdin.flush()
    assert json.loads(proxy.stdout.readline())["result"]["isError"] is True
    _, stderr = proxy.communicate(timeout=120)
    assert proxy.returncode == 0, stderr
    (decision,) = decisions(run)
    assert decision["agent"] == "ops-bot"
    assert SERVER.exists()
