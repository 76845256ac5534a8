"""Dependencies point one way (ADR 0001): runtime imports neither audit nor mcap."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest


def test_importing_runtime_pulls_in_neither_audit_nor_mcap() -> None:
    script = (
        "import sys, runtime, runtime.testing\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('audit', 'analysis', 'mcap'))\n"
        "print(','.join(bad))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True
    )
    assert result.stdout.strip() == ""


def test_importing_audit_does_not_pull_in_analysis() -> None:
    script = "import sys, audit\nprint(any(m.startswith('analysis') for m in sys.modules))\n"
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True
    )
    assert result.stdout.strip() == "False"


def test_importing_the_integrations_core_pulls_in_no_framework() -> None:
    # Each adapter is an optional extra, imported only when used (SPEC §7).
    script = (
        "import sys, runtime.integrations\n"
        "frameworks = ('mcp', 'mcp_types', 'agents', 'openai', 'langchain_core', 'langgraph',"
        " 'pydantic', 'audit', 'analysis')\n"
        "print(','.join(sorted(m for m in sys.modules if m.split('.')[0] in frameworks)))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True
    )
    assert result.stdout.strip() == ""


@pytest.mark.parametrize("package", ["runtime", "runtime.integrations", "audit", "analysis"])
def test_all_is_sorted_complete_and_importable(package: str) -> None:
    module = importlib.import_module(package)
    exported = list(module.__all__)
    # isort order, as ruff's RUF022 keeps it: CONSTANTS, then Classes, then functions.
    assert exported == sorted(exported, key=lambda n: (not n.isupper(), not n[0].isupper(), n))
    for name in exported:
        assert hasattr(module, name), name
    public = {
        name
        for name, value in vars(module).items()
        if not name.startswith("_") and getattr(value, "__module__", "").startswith(package)
    }
    assert public <= set(exported), public - set(exported)
