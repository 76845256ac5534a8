"""Close hooks, as both sinks run them: each once, all of them, the run sealed whatever they do.

A hook (the approval queue's: record the expiries that fell due) runs before the
seal, outside the sink's lock so that it may append. A hook that raises does not
stop the others or the seal; `close` then raises `AuditError` naming its type.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from runtime import AuditError

__all__ = ["raise_if_a_hook_failed", "run_close_hooks"]


def run_close_hooks(hooks: Sequence[Callable[[], None]]) -> Exception | None:
    """Run every hook in order; return the first exception one raised, or None."""
    failure: Exception | None = None
    for hook in hooks:
        try:
            hook()
        except Exception as exc:  # noqa: BLE001 - the run is still sealed; close reports it
            failure = failure or exc
    return failure


def raise_if_a_hook_failed(failure: Exception | None) -> None:
    """After the seal: raise `AuditError` for a hook that failed."""
    if failure is not None:
        raise AuditError(
            f"a close hook failed ({type(failure).__name__}); the run was sealed without"
            " what it would have recorded"
        ) from failure
