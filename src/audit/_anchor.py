"""Anchors: every checkpoint note, emitted outside the log file (SPEC §5 "Anchoring").

A file alone cannot show that its tail was cut off: a log without its last
checkpoints and seal looks exactly like a crashed run. So each checkpoint
note also leaves the process, twice, as soon as its record has been handed
to the operating system:

* a structlog event ``ghost.checkpoint`` on the ``ghost.audit`` logger
  (`runtime._logging`), with fields ``run_id``, ``tree_size``, ``root_hash``
  (hex) and ``note`` — silent until the application configures logging;
* an OpenTelemetry span event ``ghost.checkpoint`` with the same attributes,
  on a short span ``ghost.audit.checkpoint`` of its own.

Why a span of its own rather than the current one: the note must reach the
trace backend whatever the application is doing. The current span may be
absent (at close), not recording, sampled out, or unrelated (a chunk-mode
checkpoint is emitted when its chunk is written, during some later call). The
anchor span is a root span — so no parent's sampling decision drops it — and
links to the current span when there is one, for correlation. It comes from
the sink's ``tracer_provider``, or OpenTelemetry's global one (resolved per
span through the global proxy, so configuring tracing after the sink was
built works).

An auditor saves a ``note`` value to a file, byte for byte (UTF-8, nothing
added): that is the ``NOTE_FILE`` of ``ghost verify --anchor``
(`audit.load_checkpoint_note` reads it). Emitting never raises: telemetry
must not break a decision, and the log file holds the record regardless.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Any, Final

from opentelemetry import context as otel_context
from opentelemetry import trace as otel_trace

from runtime import SDK_VERSION
from runtime._logging import get_event_log  # the SDK's one event-logging seam (SPEC §5)

__all__ = ["ANCHOR_EVENT", "ANCHOR_SPAN", "AnchorEmitter"]

ANCHOR_EVENT: Final = "ghost.checkpoint"
"""The name of the structlog event and of the span event."""

ANCHOR_SPAN: Final = "ghost.audit.checkpoint"
"""The name of the span that carries the span event."""

_log = get_event_log("ghost.audit")


class AnchorEmitter:
    """Emits checkpoint notes as a structlog event and an OpenTelemetry span event.

    Args:
        tracer_provider: where the anchor spans go; None for OpenTelemetry's global provider.
    """

    __slots__ = ("_tracer",)

    def __init__(self, tracer_provider: otel_trace.TracerProvider | None = None) -> None:
        if tracer_provider is None:
            # The proxy tracer follows a global provider set after this sink was built.
            self._tracer = otel_trace.get_tracer("ghost.audit", SDK_VERSION)
        else:
            self._tracer = tracer_provider.get_tracer("ghost.audit", SDK_VERSION)

    def emit(self, run_id: str, checkpoint: Mapping[str, Any]) -> None:
        """Emit one checkpoint record's note; never raises.

        Args:
            run_id: the run the checkpoint belongs to.
            checkpoint: the ``ghost.checkpoint/1`` record as written.
        """
        fields = {
            "run_id": run_id,
            "tree_size": checkpoint["tree_size"],
            "root_hash": checkpoint["root_hash"],
            "note": checkpoint["note"],
        }
        _log.info(ANCHOR_EVENT, **fields)
        with contextlib.suppress(Exception):
            current = otel_trace.get_current_span().get_span_context()
            links = [otel_trace.Link(current)] if current.is_valid else None
            span = self._tracer.start_span(
                ANCHOR_SPAN,
                context=otel_context.Context(),
                kind=otel_trace.SpanKind.INTERNAL,
                links=links,
            )
            try:
                span.add_event(ANCHOR_EVENT, attributes=fields)
            finally:
                span.end()
