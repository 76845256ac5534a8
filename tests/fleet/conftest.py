"""Shared fixtures of the fleet tests: one fleet of 50 real runs, and its export, per session."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fleet.fleet_runs import write_fleet


@pytest.fixture(scope="session")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """A directory of 50 runs (45 intact, 3 tampered, 1 truncated, 1 not MCAP) and their kinds."""
    directory = tmp_path_factory.mktemp("fleet")
    return directory, write_fleet(directory)
