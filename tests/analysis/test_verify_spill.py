"""The link check gives the same verification whether its memory is in a dict or on disk.

`DecisionLinkCheck` keeps what it remembers in `SpilledMap`s (ADR 0026). With
the maps shrunk to one entry in memory and an 8-bit Bloom filter (so nearly
every lookup reaches SQLite, and the filter's false positives are common),
every tampered variant of a real run must verify exactly as with the
defaults: the same status, problems, counts and prefix.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import analysis._verify_links as links
from analysis import verify_run
from tests.analysis.stored_run import (
    Edit,
    StoredRun,
    delete,
    duplicate,
    move_to_end,
    write_gate_run,
)


def _swap_claims(run: StoredRun) -> None:
    first, second = run.index("/decisions", 0), run.index("/decisions", 1)
    a, b = run.messages[first].record, run.messages[second].record
    run.edit(first, assessment_sha256=b["assessment_sha256"])
    run.edit(second, assessment_sha256=a["assessment_sha256"])


def _null_claim(run: StoredRun) -> None:
    run.edit(run.index("/decisions", 3), assessment_sha256=None)


def _policy_changed(run: StoredRun) -> None:
    run.edit(run.index("/decisions", 1), policy_id="other")


def _approval_names_another(run: StoredRun) -> None:
    run.edit(
        run.index("/approvals"),
        decision_id=run.messages[run.index("/decisions", 0)].record["decision_id"],
    )


EDITS: dict[str, Edit] = {
    "intact": lambda run: None,
    "decision deleted": delete("/decisions", 2),
    "assessment deleted": delete("/assessments", 1),
    "pair duplicated": duplicate("/decisions", 1),
    "assessment duplicated": duplicate("/assessments", 0),
    "approval duplicated": duplicate("/approvals"),
    "decision moved to the end": move_to_end("/decisions", 0),
    "assessment moved to the end": move_to_end("/assessments", 4),
    "claims swapped": _swap_claims,
    "claim nulled": _null_claim,
    "policy changed": _policy_changed,
    "approval of an allow": _approval_names_another,
    "re-chained after a duplicate": lambda run: (duplicate("/decisions", 0)(run), run.rechain()),
}


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> StoredRun:
    path = tmp_path_factory.mktemp("spill") / "run.mcap"
    write_gate_run(path)
    return StoredRun.load(path)


@pytest.mark.parametrize("name", sorted(EDITS))
def test_spilled_links_verify_alike(
    base: StoredRun, name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = base.copy()
    EDITS[name](run)
    path = run.write(tmp_path / "edited.mcap")
    in_memory = verify_run(path)
    monkeypatch.setattr(links, "_MEMORY_ENTRIES", 1)
    monkeypatch.setattr(links, "_FILTER_BITS", 8)
    monkeypatch.setattr(links, "_SMALL_FILTER_BITS", 8)
    spilled = verify_run(path)
    assert spilled == in_memory
    if name != "intact":
        assert not spilled.ok
    if name not in {"intact", "decision moved to the end"}:
        assert any(problem.check.value == "links" for problem in spilled.problems)
