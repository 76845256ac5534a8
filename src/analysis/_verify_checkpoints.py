"""Checkpoints, signatures and anchors: the checks a single file cannot make alone (ADR 0013).

The hash chain shows that a log is self-consistent. It cannot show who wrote
it (anyone can edit a record and re-chain every record after it), nor that
no tail was cut (a cut looks exactly like a crash). SPEC §5 closes both
gaps with ``/checkpoints`` records — RFC 6962 Merkle roots over the records
in C2SP signed-note form, optionally signed with Ed25519 — and with anchors,
checkpoint notes the auditor holds from outside the file.

**Plug-in point.** `CheckpointCheck` is where that verification goes, as one
more `RecordCheck` in `analysis._verify.make_checks`:

* ``visit`` of a ``/checkpoints`` record: recompute the Merkle root of the
  records ``seq`` 0 … ``tree_size`` - 1 from a compact range fed by every
  earlier ``visit`` (leaf = SHA-256(0x00 ‖ canonical bytes), so O(log n)
  per record and no second pass), compare ``root_hash`` and ``head_sha256``,
  parse the note, and check its signature against ``public_key`` — or,
  without one, against the key ``/run`` declares, and then say the result
  proves consistency, not authorship;
* ``finish``: every anchor's tree size and root must match the tree of the
  file at that size (a larger size than the file holds is a cut tail), and
  the last checkpoint must cover every record before the seal.

Until then this check refuses to let a key or an anchor pass unchecked: the
auditor asked for a proof this version cannot give, so each becomes a
problem, and a run with ``/checkpoints`` records is not reported as verified
(`KnownTopicsCheck` names each such record).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Final

from analysis._run_facts import RecordFacts, RunEnd
from analysis._verify_model import IntegrityCheck, RunProblem

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

__all__ = ["CHECKPOINTS_TOPIC", "CheckpointCheck"]

CHECKPOINTS_TOPIC: Final = "/checkpoints"


class CheckpointCheck:
    """Checkpoint roots, note signatures and anchors (see the module docstring).

    Args:
        public_key: the key the auditor holds, or None.
        anchors: checkpoint notes the auditor holds, as text.
    """

    __slots__ = ("_anchors", "_checkpoints", "_public_key")

    def __init__(self, public_key: Ed25519PublicKey | None, anchors: Sequence[str]) -> None:
        self._public_key = public_key
        self._anchors = tuple(anchors)
        self._checkpoints = 0

    def visit(self, facts: RecordFacts) -> Iterable[RunProblem]:
        if facts.topic == CHECKPOINTS_TOPIC:
            self._checkpoints += 1
        return ()

    def finish(self, end: RunEnd) -> Iterable[RunProblem]:
        if self._checkpoints:
            why = (
                f"the run holds {self._checkpoints} checkpoint record(s), but this version"
                " of the verifier does not check checkpoints"
            )
        else:
            why = "the run holds no checkpoint record to check it against"
        problems: list[RunProblem] = []
        if self._public_key is not None:
            problems.append(
                RunProblem(
                    IntegrityCheck.CHECKPOINT,
                    f"a public key was given, but no signature was checked: {why}; the log's"
                    " authorship is not shown",
                )
            )
        problems.extend(
            RunProblem(
                IntegrityCheck.ANCHOR,
                f"anchor {number} of {len(self._anchors)} was not checked: {why}; a cut tail"
                " or a rewritten past is not ruled out",
            )
            for number in range(1, len(self._anchors) + 1)
        )
        return problems
