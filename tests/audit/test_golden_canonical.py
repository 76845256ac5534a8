"""A run written before the orjson fast path still verifies, byte for byte (issue 10).

``tests/golden/canonical`` was written by the encoder as it stood before
canonical bytes of plain values moved to orjson: a real MCAP run whose records
hold non-ASCII keys on both sides of U+E000, floats ECMAScript writes its own
way, integers past 64 bits, bytes, tuples, sets, deep nesting and a forged
``$ghost`` key in the arguments, plus the arguments themselves. Every record
must re-encode to exactly its stored bytes, and every argument payload to
its recorded address: an optimisation of the encoder may not change a byte.
"""

from __future__ import annotations

import ast
from pathlib import Path

from mcap.reader import make_reader

from analysis import verify_run
from runtime import canonical_bytes, loads_strict, value_sha256

GOLDEN = Path(__file__).parents[1] / "golden" / "canonical"


def test_every_record_reencodes_to_its_stored_bytes() -> None:
    count = 0
    with (GOLDEN / "run.mcap").open("rb") as stream:
        for _, _, message in make_reader(stream).iter_messages():
            record = loads_strict(message.data)
            assert isinstance(record, dict)
            assert canonical_bytes(record) == message.data
            count += 1
    assert count == 23


def test_every_argument_payload_keeps_its_address() -> None:
    lines = (GOLDEN / "args.txt").read_text().splitlines()
    addresses = (GOLDEN / "args_sha256.txt").read_text().split()
    assert len(lines) == len(addresses) == 8
    recorded = []
    with (GOLDEN / "run.mcap").open("rb") as stream:
        for _, channel, message in make_reader(stream).iter_messages(topics=["/assessments"]):
            assert channel.topic == "/assessments"
            record = loads_strict(message.data)
            assert isinstance(record, dict)
            recorded.append(record["args_sha256"])
    for line, address in zip(lines, addresses, strict=True):
        assert value_sha256(ast.literal_eval(line)) == address
    # What the gate took a snapshot of was addressed in the log by the same encoder
    # (a set is not plain data: that check denied before hashing, and logs None).
    *hashed, last = [address for address in recorded if address is not None]
    assert hashed == [address for index, address in enumerate(addresses) if index != 4]
    assert last == value_sha256({"id": 1})  # the run's closing delete


def test_the_golden_run_verifies_intact() -> None:
    verification = verify_run(GOLDEN / "run.mcap")
    assert verification.status == "intact", verification
