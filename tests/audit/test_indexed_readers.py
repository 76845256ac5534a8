"""Indexed readers list every message of a sealed run, in every durability mode.

An indexed (seeking) reader trusts the summary: it finds messages through
the chunk indexes and the message indexes after each chunk, and never sees a
message outside a chunk. Two independent ones read real files here: the
Python ``mcap`` library's seeking reader, and the TypeScript ``@mcap/core``
``McapIndexedReader`` (what Foxglove uses), installed with npm into a
temporary directory once per session. That test is skipped, with the
reason, only where ``npm``/``node`` are missing or the install fails (no
registry access); set ``GHOST_REQUIRE_NPM=1`` to make those a failure.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from mcap.reader import make_reader
from mcap.stream_reader import StreamReader

from audit import Durability, McapAuditSink, read_run
from tests.records import append_decisions, make_run_start

DURABILITIES: list[Durability] = ["process", "fsync", "chunk"]
NPM_PACKAGES = ["@mcap/core@2", "fzstd@0.1"]

_NODE_SCRIPT = r"""
const fs = require("node:fs/promises");
const crypto = require("node:crypto");
const { McapIndexedReader } = require("@mcap/core");
const { decompress } = require("fzstd");

async function main() {
  const handle = await fs.open(process.argv[2], "r");
  const size = (await handle.stat()).size;
  const readable = {
    size: async () => BigInt(size),
    read: async (offset, length) => {
      const buffer = new Uint8Array(Number(length));
      await handle.read(buffer, 0, Number(length), Number(offset));
      return buffer;
    },
  };
  const reader = await McapIndexedReader.Initialize({
    readable,
    decompressHandlers: { zstd: (data, size) => decompress(data, new Uint8Array(Number(size))) },
  });
  const messages = [];
  for await (const message of reader.readMessages({ validateCrcs: true })) {
    messages.push({
      topic: reader.channelsById.get(message.channelId).topic,
      sequence: message.sequence,
      log_time: message.logTime.toString(),
      sha256: crypto.createHash("sha256").update(message.data).digest("hex"),
    });
  }
  const chunks = reader.chunkIndexes.map((index) => ({
    compression: index.compression,
    message_indexes: index.messageIndexOffsets.size,
  }));
  const statistics = reader.statistics ? Number(reader.statistics.messageCount) : null;
  console.log(JSON.stringify({ messages, chunks, statistics }));
  await handle.close();
}
main().catch((error) => { console.error(error); process.exit(1); });
"""


def _write(
    path: Path, durability: Durability, *, signed: bool = False, decisions: int = 20
) -> None:
    key = Ed25519PrivateKey.generate() if signed else None
    with McapAuditSink(
        path, durability=durability, signing_key=key, checkpoint_every_records=7
    ) as sink:
        sink.open_run(make_run_start())
        append_decisions(sink, decisions)


def _ours(path: Path) -> list[dict[str, Any]]:
    log = read_run(path)
    assert not log.truncated
    assert log.problems == ()
    return [
        {
            "topic": r.topic,
            "sequence": r.sequence,
            "log_time": str(r.log_time_ns),
            "sha256": r.sha256,
        }
        for r in log.records
    ]


def _by_sequence(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    # Indexed readers yield in log-time order; the sink stamps its own records by its clock.
    return sorted(messages, key=lambda message: message["sequence"])


@pytest.mark.parametrize("signed", [False, True])
@pytest.mark.parametrize("durability", DURABILITIES)
def test_the_python_seeking_reader_lists_every_message(
    tmp_path: Path, durability: Durability, signed: bool
) -> None:
    path = tmp_path / "run.mcap"
    _write(path, durability, signed=signed)
    ours = _ours(path)
    assert {m["topic"] for m in ours} == {
        "/run", "/assessments", "/decisions", "/approvals", "/checkpoints", "/seal"
    }  # fmt: skip
    with path.open("rb") as stream:
        reader = make_reader(stream, validate_crcs=True)
        summary = reader.get_summary()
        assert summary is not None
        assert summary.statistics is not None
        assert summary.statistics.message_count == len(ours)
        assert summary.chunk_indexes, "no chunk index: an indexed reader would see nothing"
        for index in summary.chunk_indexes:
            assert index.message_index_offsets, "a chunk without message indexes"
            assert index.compression == ("zstd" if durability == "chunk" else "")
        theirs = [
            {
                "topic": channel.topic,
                "sequence": message.sequence,
                "log_time": str(message.log_time),
                "sha256": hashlib.sha256(message.data).hexdigest(),
            }
            for _, channel, message in reader.iter_messages(log_time_order=True)
        ]
    assert _by_sequence(theirs) == ours
    counts = Counter(m["topic"] for m in ours)
    assert counts["/decisions"] == 20


@pytest.mark.parametrize("durability", DURABILITIES)
def test_streaming_still_reads_every_message(tmp_path: Path, durability: Durability) -> None:
    path = tmp_path / "run.mcap"
    _write(path, durability)
    with path.open("rb") as stream:
        streamed = [
            hashlib.sha256(record.data).hexdigest()
            for record in StreamReader(stream).records
            if type(record).__name__ == "Message"
        ]
    assert streamed == [m["sha256"] for m in _ours(path)]


@pytest.fixture(scope="session")
def mcap_core(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory with @mcap/core (and a zstd decoder) installed, and a reader script."""
    required = os.environ.get("GHOST_REQUIRE_NPM") == "1"
    npm, node = shutil.which("npm"), shutil.which("node")
    if npm is None or node is None:
        if required:
            pytest.fail("GHOST_REQUIRE_NPM=1, but npm or node is not on PATH")
        pytest.skip("npm or node is not on PATH: the @mcap/core indexed reader cannot be installed")
    directory = tmp_path_factory.mktemp("mcap-core")
    (directory / "package.json").write_text('{"name": "ghost-indexed-reader", "private": true}\n')
    result = subprocess.run(
        [npm, "install", "--no-audit", "--no-fund", "--loglevel=error", *NPM_PACKAGES],
        cwd=directory,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    if result.returncode != 0:
        reason = f"npm install {' '.join(NPM_PACKAGES)} failed: {result.stderr.strip()[-400:]}"
        if required:
            pytest.fail(reason)
        pytest.skip(reason)
    (directory / "read.cjs").write_text(_NODE_SCRIPT)
    return directory


def _read_with_mcap_core(directory: Path, path: Path) -> dict[str, Any]:
    result = subprocess.run(
        ["node", str(directory / "read.cjs"), str(path)],  # noqa: S607 - found by the fixture
        cwd=directory,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    output: dict[str, Any] = json.loads(result.stdout)
    return output


@pytest.mark.parametrize("signed", [False, True])
@pytest.mark.parametrize("durability", DURABILITIES)
def test_the_typescript_indexed_reader_lists_every_message(
    mcap_core: Path, tmp_path: Path, durability: Durability, signed: bool
) -> None:
    path = tmp_path / "run.mcap"
    _write(path, durability, signed=signed)
    ours = _ours(path)
    theirs = _read_with_mcap_core(mcap_core, path)
    assert theirs["statistics"] == len(ours)
    assert len(theirs["messages"]) == len(ours)
    assert _by_sequence(theirs["messages"]) == ours
    assert all(chunk["message_indexes"] > 0 for chunk in theirs["chunks"])
    assert {chunk["compression"] for chunk in theirs["chunks"]} == (
        {"zstd"} if durability == "chunk" else {""}
    )


def test_the_typescript_reader_finds_no_messages_outside_chunks(
    mcap_core: Path, tmp_path: Path
) -> None:
    # The failure this design fixes, kept as a control: an unchunked file reads as empty.
    from mcap.writer import Writer

    path = tmp_path / "unchunked.mcap"
    with path.open("wb") as stream:
        writer = Writer(stream, use_chunking=False)
        writer.start()
        schema = writer.register_schema("s", "jsonschema", b"{}")
        channel = writer.register_channel("/t", "json", schema)
        for index in range(3):
            writer.add_message(channel, log_time=index, data=b"{}", publish_time=index)
        writer.finish()
    assert _read_with_mcap_core(mcap_core, path)["messages"] == []
