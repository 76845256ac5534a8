"""`verify_run` throughput against its floor: stream, decode and hash every record.

The floor is the least any verifier of a ghost run must do: read the MCAP
file as a stream with the `mcap` library, JSON-decode every message and
SHA-256 its bytes. `analysis.verify_run` does that and every check of SPEC
§6 besides — canonical bytes, schemas, the chain, Merkle roots of every
checkpoint, signatures, CRCs — in one streaming pass. Both are timed in the
same interleaved rounds on the same sealed run written by the real gate;
the ratio says what the checks cost beyond reading.
"""

from __future__ import annotations

import functools
import hashlib
import json
import tempfile
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from mcap.reader import make_reader

from analysis import verify_run
from analysis._demo import demo_policy_path
from audit import Durability, McapAuditSink
from bench._harness import Row, Section, interleaved
from runtime import Action, Gate, Policy

__all__ = ["floor", "run"]

_ACTIONS = [
    Action("support", "query", "db:customers", {"table": "customers", "limit": 500, "where": "x"}),
    Action("researcher", "search", "tool:web_search", {"query": "refund policy best practice"}),
    Action("support", "send", "mail:c", {"to": "a@example.com", "body": "your refund is sent"}),
    Action("support", "refund", "payments:stripe", {"amount": 20, "currency": "EUR"}),
]


def _write(
    path: Path, durability: Durability, decisions: int, key: Ed25519PrivateKey | None
) -> int:
    policy = Policy.from_toml(demo_policy_path())
    with McapAuditSink(path, durability=durability, signing_key=key) as sink:
        gate = Gate(policy, sink=sink)
        for index in range(decisions):
            gate.check(_ACTIONS[index % len(_ACTIONS)])
    return floor(path)


def floor(path: Path) -> int:
    """Stream ``path`` with the `mcap` library, JSON-decode and SHA-256 every message.

    Returns:
        The number of messages read.
    """
    count = 0
    with path.open("rb") as stream:
        for _schema, _channel, message in make_reader(stream).iter_messages(log_time_order=False):
            json.loads(message.data)
            hashlib.sha256(message.data).digest()
            count += 1
    return count


def run(*, quick: bool = False) -> list[Section]:
    """The verify-throughput section of BENCHMARKS.md."""
    decisions = 500 if quick else 5_000
    rounds = 3 if quick else 7
    rows: list[Row] = []
    notes: list[str] = []
    key = Ed25519PrivateKey.generate()
    with tempfile.TemporaryDirectory() as tmp:
        for durability in ("process", "chunk"):
            for signed in (False, True):
                path = Path(tmp) / f"{durability}-{signed}.mcap"
                records = _write(path, durability, decisions, key if signed else None)
                public = key.public_key() if signed else None
                result = verify_run(path, public_key=public)
                if not result.ok:
                    raise RuntimeError(f"the bench run does not verify: {result.status.value}")
                times = interleaved(
                    {
                        "floor": functools.partial(floor, path),
                        "verify": functools.partial(verify_run, path, public_key=public),
                    },
                    rounds=rounds,
                    calls=1,
                )
                label = f"{durability}{', signed' if signed else ''}"
                per_record_us = times["verify"] / records * 1e6
                ratio = times["verify"] / times["floor"]
                rows.append(
                    Row(
                        f"verify_run, {label} ({records:,} records)",
                        per_record_us,
                        "µs/record",
                        ratio,
                    )
                )
                notes.append(
                    f"{label}: floor {times['floor'] / records * 1e6:.1f} µs/record,"
                    f" verify_run {records / times['verify'] / 1e3:.1f} k records/s,"
                    f" file {path.stat().st_size / 1e6:.2f} MB."
                )
    return [
        Section(
            "verify_run throughput against its floor",
            (
                "µs per record of `analysis.verify_run` on a sealed run written by the real"
                " gate; ratio: to the floor (the `mcap` stream reader, `json.loads` and"
                " SHA-256 of every message) timed in the same interleaved rounds."
            ),
            tuple(rows),
            notes=tuple(notes),
        )
    ]
