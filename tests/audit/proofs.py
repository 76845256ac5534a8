"""Helpers for inclusion-proof tests: an independent RFC 6962, real runs, and a forger.

`mth` and `audit_path` follow RFC 6962 §2.1 literally (recursive MTH and
PATH), sharing no code with `audit._merkle`, so a test can recompute every
root and path a proof holds. `stored_records` reads a run with the ``mcap``
library alone. `forge` builds a proof that is valid as far as the tree goes
from arbitrary records, as a forger holding the signing key could: it lets a
test reach the link and signature checks with records no honest run holds.
"""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from mcap.stream_reader import StreamReader

from audit import PROOF_FORMAT, NoteSigner, make_checkpoint_note
from runtime import canonical_bytes, sha256_hex

RUN_ID = "019b76da-a800-757d-b7da-f716e732c89b"


def mth(data: list[bytes]) -> bytes:
    """RFC 6962 §2.1 MTH over the entries ``data`` (record bytes, not leaf hashes)."""
    n = len(data)
    if n == 0:
        return hashlib.sha256(b"").digest()
    if n == 1:
        return hashlib.sha256(b"\x00" + data[0]).digest()
    k = 1
    while k * 2 < n:
        k *= 2
    return hashlib.sha256(b"\x01" + mth(data[:k]) + mth(data[k:])).digest()


def audit_path(m: int, data: list[bytes]) -> list[bytes]:
    """RFC 6962 §2.1.1 PATH(m, D[n]), from the leaf up."""
    n = len(data)
    if n == 1:
        return []
    k = 1
    while k * 2 < n:
        k *= 2
    if m < k:
        return [*audit_path(m, data[:k]), mth(data[k:])]
    return [*audit_path(m - k, data[k:]), mth(data[:k])]


def stored_records(path: Path) -> list[tuple[str, bytes]]:
    """Every message of a run as (topic, bytes), in ``seq`` order, read by ``mcap`` alone."""
    channels: dict[int, str] = {}
    messages: list[tuple[int, str, bytes]] = []
    with path.open("rb") as stream:
        for record in StreamReader(stream, skip_magic=False).records:
            name = type(record).__name__
            if name == "Channel":
                channels[record.id] = record.topic  # type: ignore[attr-defined]
            elif name == "Message":
                data = record.data  # type: ignore[attr-defined]
                topic = channels[record.channel_id]  # type: ignore[attr-defined]
                messages.append((json.loads(data)["seq"], topic, data))
    messages.sort()
    assert [seq for seq, _, _ in messages] == list(range(len(messages)))
    return [(topic, data) for _, topic, data in messages]


def run_record(signing_key: Ed25519PrivateKey | None = None, **changes: Any) -> dict[str, Any]:
    """A ``ghost.run/1`` record without ``seq``/``prev_sha256``."""
    signing = None
    if signing_key is not None:
        signer = NoteSigner(signing_key)
        signing = {
            "key_id": signer.key_id,
            "key_name": signer.name,
            "public_key": base64.b64encode(signer.verifier.public_key).decode(),
        }
    record: dict[str, Any] = {
        "schema": "ghost.run/1",
        "stamp_ns": 1,
        "run_id": RUN_ID,
        "sdk_version": "0.1.0",
        "host": "h",
        "pid": 1,
        "policy_id": "p",
        "policy_sha256": "a" * 64,
        "policy_source_sha256": "b" * 64,
        "durability": "process",
        "signing": signing,
    }
    record.update(changes)
    return record


def chain(records: list[dict[str, Any]]) -> list[bytes]:
    """Give ``records`` ``seq`` and ``prev_sha256`` as a sink does; return their bytes."""
    out: list[bytes] = []
    for seq, record in enumerate(records):
        prev = None if seq == 0 else sha256_hex(out[-1])
        out.append(canonical_bytes({**record, "seq": seq, "prev_sha256": prev}))
    return out


def forge(
    data: list[bytes],
    roles: dict[str, int],
    *,
    decision_id: str,
    note_key: Ed25519PrivateKey | None = None,
    run_id: str = RUN_ID,
    tree_size: int | None = None,
) -> dict[str, Any]:
    """A proof document over the tree of ``data``, proving the records ``roles`` names.

    Args:
        data: every record's bytes, in ``seq`` order.
        roles: role -> the index in ``data`` of the record proved in that role.
        decision_id: the decision the proof claims.
        note_key: sign the note with this key (None: unsigned).
        run_id: the run id of the note's origin.
        tree_size: the tree the proof is for (default: every record in ``data``).
    """
    size = len(data) if tree_size is None else tree_size
    root = mth(data[:size])
    signer = None if note_key is None else NoteSigner(note_key)
    return {
        "format": PROOF_FORMAT,
        "decision_id": decision_id,
        "tree_size": size,
        "root_hash": root.hex(),
        "checkpoint_note": make_checkpoint_note(run_id, size, root, signer),
        "records": [
            {
                "role": role,
                "leaf_index": index,
                "record": data[index].decode(),
                "audit_path": [node.hex() for node in audit_path(index, data[:size])],
            }
            for role, index in roles.items()
        ],
    }
