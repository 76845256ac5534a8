"""Suite-wide test settings.

Hypothesis profiles: ``default`` (what ``make test`` runs: a bounded number of
examples, no per-example deadline, because shared CI machines are noisy and a
wall-clock limit would make the suite flaky) and ``thorough`` (ten times the
examples, for a long local run: ``HYPOTHESIS_PROFILE=thorough make test``).
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
import structlog
from hypothesis import settings

settings.register_profile("default", deadline=None, print_blob=True)
settings.register_profile("thorough", deadline=None, print_blob=True, max_examples=1000)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


@pytest.fixture(autouse=True)
def _structlog_defaults() -> Iterator[None]:
    # structlog.testing.capture_logs restores the configuration by calling
    # structlog.configure(), which leaves structlog "configured" with its stdout
    # defaults: every later ghost event would print. Each test starts unconfigured.
    yield
    structlog.reset_defaults()
