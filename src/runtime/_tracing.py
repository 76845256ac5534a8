"""Where a decision sits in a distributed trace, and its OpenTelemetry span.

Precedence of the parent (SPEC §3): a valid supplied ``traceparent``; else the
current OpenTelemetry span; else none (a fresh trace). An invalid supplied
header is dropped and recorded as ``replaced_invalid``.

The tracer is resolved once, at gate construction. Without an explicit
provider it is OpenTelemetry's global proxy tracer, which starts delegating
as soon as the host configures an SDK, so a provider set after the gate was
built is honoured; with no SDK it returns non-recording spans at little cost.
When the span is recording its ids are the decision's ids; otherwise ghost
mints the span id itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

from opentelemetry import trace as otel_trace
from opentelemetry.trace import (
    NonRecordingSpan,
    Span,
    SpanContext,
    SpanKind,
    TraceFlags,
    TraceState,
)

from runtime._errors import TraceContextError
from runtime._traceparent import (
    TraceParent,
    make_span_id,
    make_trace_id,
    parse_traceparent,
    parse_tracestate,
)

__all__ = ["DecisionTrace", "TraceOrigin", "Tracing"]

TraceOrigin = Literal["supplied", "otel", "generated", "replaced_invalid"]

SPAN_NAME: Final = "ghost.gate.check"
_SAMPLED: Final = TraceFlags(TraceFlags.SAMPLED)


@dataclass(frozen=True, slots=True)
class DecisionTrace:
    """The trace identity of one decision, and its span (ended by the gate)."""

    trace_id: str
    span_id: str
    parent_span_id: str | None
    trace_flags: int
    tracestate: str | None
    origin: TraceOrigin
    rejected: str | None  # why a supplied header was dropped (never its text)
    span: Span

    @property
    def traceparent(self) -> str:
        """The version-00 traceparent to propagate downstream of this decision."""
        return f"00-{self.trace_id}-{self.span_id}-{self.trace_flags:02x}"


class Tracing:
    """Resolves each check's trace context and starts its span."""

    __slots__ = ("_tracer",)

    def __init__(self, tracer_provider: otel_trace.TracerProvider | None) -> None:
        if tracer_provider is None:
            self._tracer = otel_trace.get_tracer("ghost")
        else:
            self._tracer = tracer_provider.get_tracer("ghost")

    def begin(self, traceparent: str | None, tracestate: str | None) -> DecisionTrace:
        """Validate the supplied headers, pick the parent, and start the decision's span."""
        supplied: TraceParent | None = None
        rejected: str | None = None
        state: list[tuple[str, str]] | None = None
        if traceparent is not None:
            try:
                supplied = parse_traceparent(traceparent)
            except TraceContextError as exc:
                rejected = str(exc)
        # W3C: tracestate is only meaningful beside a valid traceparent.
        if supplied is not None and tracestate is not None:
            try:
                state = parse_tracestate(tracestate)
            except TraceContextError:
                state = None

        if supplied is not None:
            remote = SpanContext(
                int(supplied.trace_id, 16),
                int(supplied.span_id, 16),
                is_remote=True,
                trace_flags=TraceFlags(supplied.trace_flags),
                trace_state=TraceState(state or []),
            )
            parent_ctx: SpanContext | None = remote
            context = otel_trace.set_span_in_context(NonRecordingSpan(remote))
            span = self._tracer.start_span(SPAN_NAME, context=context, kind=SpanKind.INTERNAL)
            origin: TraceOrigin = "supplied"
        else:
            span = self._tracer.start_span(SPAN_NAME, kind=SpanKind.INTERNAL)
            current = otel_trace.get_current_span().get_span_context()
            parent_ctx = current if current.is_valid else None
            if parent_ctx is not None:
                state = list(parent_ctx.trace_state.items()) or None
            if rejected is not None:
                origin = "replaced_invalid"
            else:
                origin = "otel" if parent_ctx is not None else "generated"

        own = span.get_span_context()
        if span.is_recording() and own.is_valid:
            trace_id = f"{own.trace_id:032x}"
            span_id = f"{own.span_id:016x}"
            flags = int(own.trace_flags)
        elif parent_ctx is not None:
            trace_id = f"{parent_ctx.trace_id:032x}"
            span_id = make_span_id()
            flags = int(parent_ctx.trace_flags)
        else:
            trace_id = make_trace_id()
            span_id = make_span_id()
            flags = int(_SAMPLED)
        return DecisionTrace(
            trace_id=trace_id,
            span_id=span_id,
            parent_span_id=None if parent_ctx is None else f"{parent_ctx.span_id:016x}",
            trace_flags=flags,
            tracestate=",".join(f"{k}={v}" for k, v in state) if state else None,
            origin=origin,
            rejected=rejected,
            span=span,
        )
