"""The audit package's import surface."""

from __future__ import annotations

import subprocess
import sys

import audit


def test_all_is_sorted_and_complete() -> None:
    assert audit.__all__ == sorted(audit.__all__, key=lambda name: (not name.isupper(), name))
    public = {name for name in vars(audit) if not name.startswith("_")}
    public -= {"annotations"}  # from __future__
    assert set(audit.__all__) == public
    for name in audit.__all__:
        assert getattr(audit, name) is not None


def test_log_format_error_is_an_audit_error() -> None:
    from runtime import AuditError, GhostError

    assert issubclass(audit.LogFormatError, AuditError)
    assert issubclass(audit.LogFormatError, GhostError)


def test_importing_runtime_does_not_import_audit_or_mcap() -> None:
    code = "import runtime, sys; print('audit' in sys.modules, 'mcap' in sys.modules)"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.split() == ["False", "False"]
