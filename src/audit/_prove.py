"""Building an inclusion proof from a run (``ghost prove``; the format: `audit._proof`, ADR 0015).

`build_inclusion_proof` streams the run once and keeps, per record, only its
32-byte leaf hash, plus the few records the proof needs:

1. the ``/run`` record (``seq`` 0: the run's id, and the key it declares);
2. the decision with the given ``decision_id`` — exactly one: a run that
   holds two is not one a proof may speak for;
3. its assessment: the record whose content address the decision's
   ``assessment_sha256`` names (none when that is null);
4. its approval, if the run holds one: the first ``/approvals`` record whose
   ``decision_sha256`` is the decision's content address;
5. the covering checkpoint: the **first** ``/checkpoints`` record whose
   ``tree_size`` covers all of them (``tree_size`` > the largest ``seq``).
   The first, because it is the smallest tree (the shortest paths), the
   earliest tree head an anchor may already hold, and the one a crashed run
   is most likely to have.

Leaves are the stored bytes in ``seq`` order, so the reader must meet
``seq`` 0, 1, 2, ... in file order; at the first record that breaks this (or
cannot be parsed) the prover stops reading, and only what came before it
can be proved. The prover does not judge the run (``ghost verify`` does);
the CLI checks every proof it builds with `check_proof` before writing it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from audit._checkpoint import CHECKPOINT_SCHEMA
from audit._errors import ProofError
from audit._merkle import inclusion_proof, leaf_hash, tree_root
from audit._problems import ReadLimits
from audit._proof import InclusionProof, ProvenRecord
from audit._reader import iter_run
from audit._run_log import LoggedRecord

__all__ = ["build_inclusion_proof"]

_RUN: Final = "ghost.run/1"
_ASSESSMENT: Final = "ghost.assessment/1"
_DECISION: Final = "ghost.decision/1"
_APPROVAL: Final = "ghost.approval/1"


@dataclass(frozen=True, slots=True)
class _Held:
    seq: int
    data: bytes
    sha256: str
    record: Mapping[str, Any]


def build_inclusion_proof(
    path: str | os.PathLike[str], decision_id: str, *, limits: ReadLimits | None = None
) -> InclusionProof:
    """Build the inclusion proof of decision ``decision_id`` in the run at ``path``.

    Args:
        path: the MCAP run.
        decision_id: the decision to prove.
        limits: the reader's bounds (default `audit.DEFAULT_LIMITS`).

    Returns:
        The proof (steps 1-5 of the module docstring); not yet checked.

    Raises:
        LogFormatError: the file cannot be read as a ghost audit log.
        ProofError: the decision is not in the run (or is there twice), its
            assessment is missing, or no checkpoint covers its records.
    """
    leaves: list[bytes] = []
    run: _Held | None = None
    decisions: list[_Held] = []
    assessments: list[_Held] = []
    approvals: list[_Held] = []
    checkpoints: list[tuple[int, str]] = []
    stop: str = ""
    for item in iter_run(path, limits=limits):
        if not isinstance(item, LoggedRecord):
            continue
        record = item.record
        seq = len(leaves)
        if record is None or record.get("seq") != seq:
            stop = (
                f" (reading stopped at the record in place of seq {seq}: the run is damaged"
                " there; `ghost verify` says how)"
            )
            break
        leaves.append(leaf_hash(item.data))
        held = _Held(seq=seq, data=item.data, sha256=item.sha256, record=record)
        schema = record.get("schema")
        if schema == _RUN and seq == 0:
            run = held
        elif record.get("decision_id") == decision_id:
            if schema == _DECISION:
                decisions.append(held)
            elif schema == _ASSESSMENT:
                assessments.append(held)
            elif schema == _APPROVAL:
                approvals.append(held)
        elif schema == CHECKPOINT_SCHEMA:
            tree_size, note = record.get("tree_size"), record.get("note")
            if type(tree_size) is int and type(note) is str:
                checkpoints.append((tree_size, note))
    if run is None:
        raise ProofError(f"the run has no /run record at seq 0{stop}")
    if len(decisions) != 1:
        count = "no decision" if not decisions else f"{len(decisions)} decisions"
        raise ProofError(f"the run holds {count} with decision_id {decision_id!r}{stop}")
    decision = decisions[0]
    proven = [run, decision]
    claimed = decision.record.get("assessment_sha256")
    if claimed is not None:
        matching = [a for a in assessments if a.sha256 == claimed]
        if not matching:
            raise ProofError(f"the decision's assessment is not in the run{stop}")
        proven.insert(1, matching[0])
    approval = next(
        (a for a in approvals if a.record.get("decision_sha256") == decision.sha256), None
    )
    if approval is not None:
        proven.append(approval)
    last = max(record.seq for record in proven)
    covering = [c for c in checkpoints if last < c[0] <= len(leaves)]
    if not covering:
        raise ProofError(
            f"no checkpoint covers the decision's records (the last is seq {last}) yet: the run"
            f" ends before the next checkpoint{stop}"
        )
    tree_size, note = covering[0]
    return InclusionProof(
        decision_id=decision_id,
        tree_size=tree_size,
        root_hash=tree_root(leaves[:tree_size]),
        checkpoint_note=note,
        records=tuple(
            ProvenRecord(
                role=_role(record),
                leaf_index=record.seq,
                data=record.data,
                audit_path=tuple(inclusion_proof(leaves, record.seq, tree_size)),
            )
            for record in proven
        ),
    )


def _role(held: _Held) -> str:
    return {
        _RUN: "run",
        _ASSESSMENT: "assessment",
        _DECISION: "decision",
        _APPROVAL: "approval",
    }[held.record["schema"]]
