"""Fixtures for the analysis tests: real runs with every record type, written once per session."""

from __future__ import annotations

from pathlib import Path

import pytest

from audit import Durability
from tests.analysis.stored_run import GateRun, StoredRun, write_gate_run


@pytest.fixture(scope="session")
def gate_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[Durability, GateRun]:
    """One sealed run per durability mode, written through Gate and McapAuditSink."""
    directory = tmp_path_factory.mktemp("gate-runs")
    return {
        mode: write_gate_run(directory / f"{mode}.mcap", durability=mode)
        for mode in ("process", "fsync", "chunk")
    }


@pytest.fixture(scope="session")
def stored_runs(gate_runs: dict[Durability, GateRun]) -> dict[Durability, StoredRun]:
    """The contents of each run, to copy and edit."""
    return {mode: StoredRun.load(run.path) for mode, run in gate_runs.items()}


@pytest.fixture(params=["process", "chunk"])
def durability(request: pytest.FixtureRequest) -> Durability:
    mode: Durability = request.param
    return mode


@pytest.fixture
def stored(stored_runs: dict[Durability, StoredRun], durability: Durability) -> StoredRun:
    """A fresh, editable copy of the run of the durability under test."""
    return stored_runs[durability].copy()


@pytest.fixture
def gate_run(gate_runs: dict[Durability, GateRun], durability: Durability) -> GateRun:
    return gate_runs[durability]


@pytest.fixture
def out(tmp_path: Path) -> Path:
    """Where a test writes the file it verifies."""
    return tmp_path / "edited.mcap"


@pytest.fixture
def streamed_trace_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every report the test builds is also streamed, and must be the same bytes (ADR 0026)."""
    from tests.analysis.streamed import check_every_trace

    check_every_trace(monkeypatch)
