"""The SDK's own log events: structlog on top of the standard library, silent until asked.

ghost is a library embedded in someone else's process — often an MCP stdio
server, whose stdout *is* its protocol stream. So its own events (``ghost.*``:
a run opened or sealed, a rejected traceparent, an audit failure, a checkpoint
anchor) obey three rules (SPEC §5 "Logging"):

1. **Never stdout.** structlog's out-of-the-box configuration prints to
   stdout; ghost does not use it. Until the application configures structlog,
   events go to the standard library logger of the same name (``ghost.gate``,
   ``ghost.audit``), rendered with `structlog.stdlib.render_to_log_kwargs` so
   a handler sees the event as the message and the fields as ``extra``.
2. **Silent until configured.** The ``ghost`` logger carries a
   `logging.NullHandler`, so that the standard library's last-resort handler
   does not print ghost's warnings to stderr either. An application that
   configures logging (``logging.basicConfig()``, a handler on ``ghost``) or
   structlog (``structlog.configure(...)``) receives them; the choice is made
   at each event, so configuring after the gate was built works.
3. **Logging never breaks a decision.** A processor or handler that raises is
   the application's bug, not a reason for a check to escape its fail-closed
   boundary: the error is swallowed here (the audit log, not this one, is the
   record of what happened).

Event names are ``ghost.<what_happened>``; fields never carry argument values,
resources or secrets.
"""

from __future__ import annotations

import contextlib
import logging
from typing import Any, Final

import structlog

__all__ = ["EventLog", "get_event_log"]

ROOT_LOGGER: Final = "ghost"

logging.getLogger(ROOT_LOGGER).addHandler(logging.NullHandler())


class EventLog:
    """A ``ghost.*`` event logger that picks its destination when an event is logged.

    Args:
        name: the logger name (``ghost.gate``); must be ``ghost`` or under it.
    """

    __slots__ = ("_name", "_stdlib")

    def __init__(self, name: str) -> None:
        if name != ROOT_LOGGER and not name.startswith(ROOT_LOGGER + "."):
            raise ValueError(f"ghost's loggers live under {ROOT_LOGGER!r}, not {name!r}")
        self._name = name
        # Level filtering first, so a disabled level costs one isEnabledFor call.
        self._stdlib: Any = structlog.wrap_logger(
            logging.getLogger(name),
            processors=[
                structlog.stdlib.filter_by_level,
                structlog.stdlib.add_logger_name,
                structlog.stdlib.add_log_level,
                structlog.stdlib.render_to_log_kwargs,
            ],
            wrapper_class=structlog.stdlib.BoundLogger,
        )

    @property
    def name(self) -> str:
        """The logger name."""
        return self._name

    def _target(self) -> Any:
        if structlog.is_configured():
            return structlog.get_logger(self._name)
        return self._stdlib

    def info(self, event: str, **fields: Any) -> None:
        """Log ``event`` at INFO with ``fields``; never raises."""
        with contextlib.suppress(Exception):
            self._target().info(event, **fields)

    def warning(self, event: str, **fields: Any) -> None:
        """Log ``event`` at WARNING with ``fields``; never raises."""
        with contextlib.suppress(Exception):
            self._target().warning(event, **fields)

    def error(self, event: str, **fields: Any) -> None:
        """Log ``event`` at ERROR with ``fields``; never raises."""
        with contextlib.suppress(Exception):
            self._target().error(event, **fields)


def get_event_log(name: str) -> EventLog:
    """Return the `EventLog` for ``name`` (``ghost.gate``, ``ghost.audit``, ...)."""
    return EventLog(name)
