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

Only the ``sampled`` bit of the trace flags is propagated: W3C Trace Context
defines no other bit for version 00, and an unknown bit (a supplied ``ff``)
is zeroed rather than forwarded. Headers are read as exact ``str`` values
(``str`` subclasses are converted without running their methods); anything
else is rejected like a malformed header. `Tracing.begin` may raise when the
host's OpenTelemetry SDK does (a span processor that raises in ``on_start``):
the gate then uses `Tracing.fallback`, which touches no OpenTelemetry SDK code
and cannot raise, and denies.

``tracestate`` (ADR 0018): a supplied one is read only beside a valid
traceparent, parsed with the Level 2 grammar and dropped whole if any member
is invalid; what is propagated (``decision.tracestate``, from the supplied
header or the current span's) is bounded to 512 characters by removing whole
entries as W3C asks. The span's parent gets the members whose keys
OpenTelemetry's API accepts (its Level 1 grammar).

GenAI semantic conventions (SPEC §7, ADR 0021): the span carries
``gen_ai.operation.name`` (``execute_tool``: the gate judges a tool call),
``gen_ai.tool.name`` (the verb), ``gen_ai.agent.name``, the verdict in the
draft guardrail vocabulary (``gen_ai.guardrail.verdict.type``) and
``ghost.policy_id`` beside the ``ghost.*`` attributes; the names are the
escaped, scrubbed text the log keeps. The instrumentation scope is
``ghost`` at the SDK's version. A valid supplied traceparent parents the
span elsewhere than the host's current span; the span then links to that
span, so neither trace loses the other.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, Literal

from opentelemetry import trace as otel_trace
from opentelemetry.trace import (
    Link,
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
    bound_tracestate,
    is_level1_key,
    join_tracestate,
    make_span_id,
    make_trace_id,
    parse_traceparent,
    parse_tracestate,
)
from runtime._verdict import RuntimeVerdict
from runtime._version import SDK_VERSION

__all__ = ["GUARDRAIL_VERDICT", "DecisionTrace", "TraceOrigin", "Tracing", "span_attributes"]

TraceOrigin = Literal["supplied", "otel", "generated", "replaced_invalid"]

SPAN_NAME: Final = "ghost.gate.check"
_SAMPLED: Final = TraceFlags(TraceFlags.SAMPLED)
_PROPAGATED_FLAGS: Final = 0x01  # the only flag W3C Trace Context defines for version 00
SCOPE_NAME: Final = "ghost"
# The draft GenAI guardrail vocabulary (SPEC §7): what the verdict does to the call.
GUARDRAIL_VERDICT: Final[Mapping[RuntimeVerdict, str]] = {
    RuntimeVerdict.ALLOW: "allow",
    RuntimeVerdict.DENY: "deny",
    RuntimeVerdict.NARROW: "modify",
    RuntimeVerdict.SCRUB: "modify",
    RuntimeVerdict.PENDING: "escalate",
}
_LINK_ATTRIBUTES: Final = {"ghost.link.reason": "host_current_span"}


def _header(value: object, name: str) -> str | None:
    """The header as an exact ``str``; None if absent. Raises TraceContextError if not text."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise TraceContextError(f"{name} must be a string")
    return str.__str__(value)


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
            self._tracer = otel_trace.get_tracer(SCOPE_NAME, SDK_VERSION)
        else:
            self._tracer = tracer_provider.get_tracer(SCOPE_NAME, SDK_VERSION)

    def begin(self, traceparent: str | None, tracestate: str | None) -> DecisionTrace:
        """Validate the supplied headers, pick the parent, and start the decision's span."""
        supplied, rejected = _parse_parent(traceparent)
        state: list[tuple[str, str]] | None = None
        # W3C: tracestate is only meaningful beside a valid traceparent.
        if supplied is not None and tracestate is not None:
            try:
                header = _header(tracestate, "tracestate")
                state = bound_tracestate(parse_tracestate(header)) if header is not None else None
            except TraceContextError:
                state = None

        if supplied is not None:
            remote = SpanContext(
                int(supplied.trace_id, 16),
                int(supplied.span_id, 16),
                is_remote=True,
                trace_flags=TraceFlags(supplied.trace_flags & _PROPAGATED_FLAGS),
                trace_state=_otel_trace_state(state),
            )
            parent_ctx: SpanContext | None = remote
            context = otel_trace.set_span_in_context(NonRecordingSpan(remote))
            host = otel_trace.get_current_span().get_span_context()
            detached = host.is_valid and (host.trace_id, host.span_id) != (
                remote.trace_id,
                remote.span_id,
            )
            links = [Link(host, _LINK_ATTRIBUTES)] if detached else None
            span = self._tracer.start_span(
                SPAN_NAME, context=context, kind=SpanKind.INTERNAL, links=links
            )
            origin: TraceOrigin = "supplied"
        else:
            span = self._tracer.start_span(SPAN_NAME, kind=SpanKind.INTERNAL)
            current = otel_trace.get_current_span().get_span_context()
            parent_ctx = current if current.is_valid else None
            if parent_ctx is not None:
                state = bound_tracestate(list(parent_ctx.trace_state.items())) or None
            if rejected is not None:
                origin = "replaced_invalid"
            else:
                origin = "otel" if parent_ctx is not None else "generated"

        own = span.get_span_context()
        if span.is_recording() and own.is_valid:
            trace_id = f"{own.trace_id:032x}"
            span_id = f"{own.span_id:016x}"
            flags = int(own.trace_flags) & _PROPAGATED_FLAGS
        elif parent_ctx is not None:
            trace_id = f"{parent_ctx.trace_id:032x}"
            span_id = make_span_id()
            flags = int(parent_ctx.trace_flags) & _PROPAGATED_FLAGS
        else:
            trace_id = make_trace_id()
            span_id = make_span_id()
            flags = int(_SAMPLED)
        return DecisionTrace(
            trace_id=trace_id,
            span_id=span_id,
            parent_span_id=None if parent_ctx is None else f"{parent_ctx.span_id:016x}",
            trace_flags=flags,
            tracestate=join_tracestate(state) if state else None,
            origin=origin,
            rejected=rejected,
            span=span,
        )

    @staticmethod
    def fallback(traceparent: object) -> DecisionTrace:
        """The trace of a check whose span could not be started: ghost's own ids, no span.

        A valid supplied header still names the trace; nothing of the
        OpenTelemetry SDK runs, so this cannot raise.
        """
        supplied, rejected = _parse_parent(traceparent)
        if supplied is not None:
            trace_id, parent, flags = supplied.trace_id, supplied.span_id, supplied.trace_flags
            origin: TraceOrigin = "supplied"
        else:
            trace_id, parent, flags = make_trace_id(), None, int(_SAMPLED)
            origin = "replaced_invalid" if rejected is not None else "generated"
        return DecisionTrace(
            trace_id=trace_id,
            span_id=make_span_id(),
            parent_span_id=parent,
            trace_flags=flags & _PROPAGATED_FLAGS,
            tracestate=None,
            origin=origin,
            rejected=rejected,
            span=otel_trace.INVALID_SPAN,
        )


def span_attributes(
    *,
    decision_id: str,
    verdict: RuntimeVerdict,
    matched_policy: str | None,
    origin: TraceOrigin,
    policy_id: str,
    agent: str,
    tool: str,
) -> dict[str, str]:
    """The decision span's attributes: ghost's own and the GenAI conventions' (SPEC §7).

    ``agent`` and ``tool`` must already be in the form the log keeps (escaped,
    scrubbed by every detector): they come from the agent, which may put
    anything in them.
    """
    attributes = {
        "ghost.decision_id": decision_id,
        "ghost.verdict": verdict.value,
        "ghost.trace_origin": origin,
        "ghost.policy_id": policy_id,
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": tool,
        "gen_ai.agent.name": agent,
        "gen_ai.guardrail.verdict.type": GUARDRAIL_VERDICT[verdict],
    }
    if matched_policy is not None:
        attributes["ghost.matched_policy"] = matched_policy
    return attributes


def _otel_trace_state(state: list[tuple[str, str]] | None) -> TraceState:
    """The members OpenTelemetry's `TraceState` can hold: those with Level 1 keys.

    OpenTelemetry's API still enforces the Level 1 key grammar, and logs the
    text of any member it refuses; filtering first keeps header text out of
    the host's logs. ``decision.tracestate`` keeps every Level 2 member.
    """
    return TraceState([(key, value) for key, value in state or () if is_level1_key(key)])


def _parse_parent(traceparent: object) -> tuple[TraceParent | None, str | None]:
    """Parse a supplied traceparent: ``(parsed, None)``, ``(None, why rejected)`` or neither."""
    try:
        header = _header(traceparent, "traceparent")
        return (parse_traceparent(header) if header is not None else None), None
    except TraceContextError as exc:
        return None, str(exc)
