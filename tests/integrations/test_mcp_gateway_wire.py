"""``ghost mcp-proxy`` against a hostile client speaking raw JSON-RPC on its stdin.

Every malformed ``tools/call`` becomes a recorded deny or a protocol error and
never reaches the server; the proxy's stdout carries nothing but JSON-RPC
messages; an approval that nobody gives expires and refuses the call; and the
run, sealed when the client hangs up, verifies.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import IO, Any

import pytest

from tests.integrations._mcp_support import (
    SECRET,
    decisions,
    proxy_command,
    received,
    verify,
    write_policy,
)

META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": {"name": "raw-client", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {},
}


def _call(request_id: int, name: object, arguments: object) -> bytes:
    params = {"_meta": META, "name": name, "arguments": arguments}
    return (
        json.dumps(
            {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}
        ).encode()
        + b"\n"
    )


def _answer(stdout: IO[bytes], request_id: object) -> dict[str, Any]:
    """Read the proxy's stdout up to the response to ``request_id``; every line must be JSON-RPC."""
    while True:
        line = stdout.readline()
        assert line, "the proxy closed its stdout"
        message = json.loads(line)
        assert message["jsonrpc"] == "2.0"
        if message.get("id") == request_id:
            return message


@pytest.fixture(scope="module")
def hostile_run(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[Path, dict[str, Any], int, bytes]:
    tmp_path = tmp_path_factory.mktemp("mcp-wire")
    log = tmp_path / "server.jsonl"
    command = proxy_command(write_policy(tmp_path, transfer_timeout_s=0.3), tmp_path / "run.mcap")
    proxy = subprocess.Popen(
        command,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "GHOST_TEST_MCP_LOG": str(log)},
    )
    assert proxy.stdin is not None
    assert proxy.stdout is not None
    send = proxy.stdin
    answers: dict[str, Any] = {}
    try:

        def ask(key: str, line: bytes, request_id: object) -> None:
            send.write(line)
            send.flush()
            answers[key] = _answer(proxy.stdout, request_id)  # type: ignore[arg-type]

        ask("list", _call(1, "read_file", [1, 2]), 1)
        ask("control", _call(2, "read\x1b[2J_file", {"path": "/a"}), 2)
        ask("string_args", _call(3, "read_file", "path=/etc/passwd"), 3)
        ask("name_number", _call(4, 7, {}), 4)
        nested: Any = {"path": "/a"}
        for _ in range(200):
            nested = {"x": nested}
        ask("deep", _call(5, "read_file", nested), 5)
        ask("huge", _call(6, "read_file", {"path": "/a", "pad": "x" * (2 << 20)}), 6)
        ask("secret_denied", _call(7, "delete_file", {"path": f"/keys/{SECRET}"}), 7)
        ask(
            "too_deep_to_parse",
            b'{"jsonrpc":"2.0","id":8,"x":' + b"[" * 100_000 + b"]" * 100_000 + b"}\n",
            None,
        )
        ask("not_json", b"tools/call please\n", None)
        batch = [json.loads(_call(9, "read_file", {"path": "/a"}))]
        ask("batch", json.dumps(batch).encode() + b"\n", None)
        # A tools/call notification cannot be answered, so it is dropped; the ping after it shows
        # the proxy went on (and that nothing from it reached the server, below).
        notification = json.loads(_call(0, "read_file", {"path": "/notified"}))
        del notification["id"]
        send.write(json.dumps(notification).encode() + b"\n")
        ask("expired", _call(10, "transfer", {"amount": 5, "to": "acct-1"}), 10)
        ask("allowed", _call(11, "read_file", {"path": "/ok", "max_bytes": 5}), 11)
        # Two names: Python keeps the last, a first-wins parser the first. The server must get
        # what the gate judged, so the proxy forwards what it parsed, never the bytes it got.
        duplicate = _call(12, "read_file", {"path": "/dup"}).replace(
            b'"name": "read_file"', b'"name": "delete_file", "name": "read_file"'
        )
        assert b'"name": "delete_file", "name": "read_file"' in duplicate
        ask("duplicate", duplicate, 12)
        send.close()
        code = proxy.wait(timeout=60)
        stderr = proxy.stderr.read()  # type: ignore[union-attr]
    finally:  # a failed step must not leave the proxy, or its pipes, behind
        if proxy.poll() is None:
            proxy.kill()
            proxy.wait(timeout=60)
        for pipe in (proxy.stdin, proxy.stdout, proxy.stderr):
            if pipe is not None:
                pipe.close()
    return tmp_path, answers, code, stderr


@pytest.mark.parametrize(
    "key", ["list", "control", "string_args", "name_number", "deep", "huge", "secret_denied"]
)
def test_a_malformed_call_is_a_recorded_deny(
    hostile_run: tuple[Path, dict[str, Any], int, bytes], key: str
) -> None:
    tmp_path, answers, _, _ = hostile_run
    result = answers[key]["result"]
    assert result["isError"] is True
    denied = {
        d["decision_id"]: d for d in decisions(tmp_path / "run.mcap") if d["verdict"] == "deny"
    }
    text = result["content"][0]["text"]
    (decision_id,) = [i for i in denied if i in text]
    assert denied[decision_id]["reason"] in text


@pytest.mark.parametrize("key", ["too_deep_to_parse", "not_json", "batch"])
def test_an_unparsable_message_is_a_protocol_error(
    hostile_run: tuple[Path, dict[str, Any], int, bytes], key: str
) -> None:
    _, answers, _, _ = hostile_run
    assert answers[key]["error"]["code"] in (-32700, -32600)


def test_only_permitted_calls_reach_the_server(
    hostile_run: tuple[Path, dict[str, Any], int, bytes],
) -> None:
    tmp_path, answers, _, _ = hostile_run
    assert [entry["args"] for entry in received(tmp_path / "server.jsonl")] == [
        {"path": "/ok", "max_bytes": 5},
        {"path": "/dup", "max_bytes": 4096},  # read_file, as judged: not delete_file
    ]
    assert answers["allowed"]["result"]["isError"] is False


def test_an_approval_nobody_gives_expires_and_refuses(
    hostile_run: tuple[Path, dict[str, Any], int, bytes],
) -> None:
    tmp_path, answers, _, _ = hostile_run
    result = answers["expired"]["result"]
    assert result["isError"] is True
    assert "expired" in result["content"][0]["text"]
    (pending,) = [d for d in decisions(tmp_path / "run.mcap") if d["verdict"] == "pending"]
    assert pending["decision_id"] in result["content"][0]["text"]


def test_the_hostile_run_is_recorded_escaped_sealed_and_secret_free(
    hostile_run: tuple[Path, dict[str, Any], int, bytes],
) -> None:
    tmp_path, _, code, stderr = hostile_run
    assert code == 0, stderr
    run = tmp_path / "run.mcap"
    outcome = verify(run)
    assert outcome.returncode == 0, outcome.stdout
    data = run.read_bytes()
    assert SECRET.encode() not in data
    assert SECRET.encode() not in stderr
    assert b"\x1b[2J" not in data  # the control character is recorded escaped
    verbs = [d["verb"] for d in decisions(run)]
    assert any(
        "read" in str(verb) and "_file" in str(verb) and verb != "read_file" for verb in verbs
    )
    assert {d["agent"] for d in decisions(run)} == {"raw-client"}
