"""Trace context on decisions: supplied, OpenTelemetry, generated, replaced_invalid."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import textwrap
from typing import Any

import pytest
from opentelemetry import trace as otel_trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import Decision, Sampler, SamplingResult
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags, TraceState

from audit import MemoryAuditSink
from runtime import Action, Gate, Policy
from runtime._tracing import Tracing
from tests.runtime.conftest import POLICY

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT = "00f067aa0ba902b7"
HEADER = f"00-{TRACE_ID}-{PARENT}-01"
ACTION = Action("bot", "search", "tool:search", {"q": "x"})


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture
def provider(exporter: InMemorySpanExporter) -> TracerProvider:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider


def test_without_otel_or_header_a_fresh_trace_is_generated() -> None:
    gate = Gate(Policy.from_dict(POLICY), sink=MemoryAuditSink())
    first, second = gate.check(ACTION), gate.check(ACTION)
    assert first.trace_origin == "generated"
    assert first.trace_id != second.trace_id
    assert first.traceparent == f"00-{first.trace_id}-{first.span_id}-01"
    assert len(first.trace_id) == 32
    assert len(first.span_id) == 16


def test_a_supplied_traceparent_becomes_the_parent() -> None:
    sink = MemoryAuditSink()
    gate = Gate(Policy.from_dict(POLICY), sink=sink)
    decision = gate.check(ACTION, traceparent=HEADER, tracestate="vendor=abc")
    assert decision.trace_origin == "supplied"
    assert decision.trace_id == TRACE_ID
    assert decision.span_id != PARENT
    assert decision.tracestate == "vendor=abc"
    assert sink.records("/assessments")[0]["parent_span_id"] == PARENT


def test_an_invalid_tracestate_is_dropped_but_the_traceparent_kept() -> None:
    gate = Gate(Policy.from_dict(POLICY), sink=MemoryAuditSink())
    decision = gate.check(ACTION, traceparent=HEADER, tracestate="Bad Key=1")
    assert (decision.trace_origin, decision.tracestate) == ("supplied", None)


@pytest.mark.parametrize(
    "header",
    [
        HEADER.upper(),
        f"00-{'0' * 32}-{PARENT}-01",
        f"00-{TRACE_ID}-{'0' * 16}-01",
        f"ff-{TRACE_ID}-{PARENT}-01",
        f"{HEADER}-trailing",
        f"00-{TRACE_ID[:30]}-{PARENT}-01",
    ],
)
def test_an_invalid_traceparent_is_replaced_and_never_logged_raw(header: str) -> None:
    sink = MemoryAuditSink()
    gate = Gate(Policy.from_dict(POLICY), sink=sink)
    decision = gate.check(ACTION, traceparent=header, tracestate="vendor=abc")
    assert decision.trace_origin == "replaced_invalid"
    assert decision.trace_id != TRACE_ID  # a rejected header never donates its trace id
    assert decision.tracestate is None  # tracestate means nothing without its traceparent
    assert sink.records("/decisions")[0]["trace_origin"] == "replaced_invalid"
    logged = b"".join(entry.data for entry in sink.entries)
    assert header.encode() not in logged
    assert sink.records("/assessments")[0]["parent_span_id"] is None


def test_invalid_header_continues_the_current_otel_span(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    gate = Gate(Policy.from_dict(POLICY), sink=MemoryAuditSink(), tracer_provider=provider)
    with provider.get_tracer("host").start_as_current_span("agent-step") as host:
        decision = gate.check(ACTION, traceparent="garbage")
    assert decision.trace_origin == "replaced_invalid"
    assert decision.trace_id == f"{host.get_span_context().trace_id:032x}"


def test_the_current_otel_span_is_the_parent_and_each_check_is_a_span(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    sink = MemoryAuditSink()
    gate = Gate(Policy.from_dict(POLICY), sink=sink, tracer_provider=provider)
    with provider.get_tracer("host").start_as_current_span("agent-step") as host:
        decision = gate.check(ACTION)
    host_ctx = host.get_span_context()
    assert decision.trace_origin == "otel"
    assert decision.trace_id == f"{host_ctx.trace_id:032x}"
    spans = {span.name: span for span in exporter.get_finished_spans()}
    check = spans["ghost.gate.check"]
    ctx = check.get_span_context()
    assert ctx is not None
    assert (f"{ctx.trace_id:032x}", f"{ctx.span_id:016x}") == (
        decision.trace_id,
        decision.span_id,
    )
    assert check.parent is not None
    assert check.parent.span_id == host_ctx.span_id
    assert dict(check.attributes or {}) == {
        "ghost.decision_id": decision.decision_id,
        "ghost.verdict": "allow",
        "ghost.matched_policy": "search",
        "ghost.trace_origin": "otel",
        "ghost.policy_id": "test-policy",
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "search",
        "gen_ai.agent.name": "bot",
        "gen_ai.guardrail.verdict.type": "allow",
    }
    assert sink.records("/assessments")[0]["parent_span_id"] == f"{host_ctx.span_id:016x}"


def test_a_supplied_header_parents_the_otel_span(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    gate = Gate(Policy.from_dict(POLICY), sink=MemoryAuditSink(), tracer_provider=provider)
    decision = gate.check(ACTION, traceparent=HEADER)
    (span,) = exporter.get_finished_spans()
    assert span.parent is not None
    assert f"{span.parent.span_id:016x}" == PARENT
    assert decision.trace_id == TRACE_ID
    assert f"{span.context.span_id:016x}" == decision.span_id  # type: ignore[union-attr]


def test_span_attributes_never_hold_arguments_or_resources(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    gate = Gate(Policy.from_dict(POLICY), sink=MemoryAuditSink(), tracer_provider=provider)
    gate.check(Action("m", "send", "mail:jane@example.com", {"body": "AKIAIOSFODNN7EXAMPLE"}))
    (span,) = exporter.get_finished_spans()
    text = repr(dict(span.attributes or {}))
    assert "jane@example.com" not in text
    assert "AKIA" not in text


def test_a_provider_configured_after_the_gate_was_built_is_honoured() -> None:
    # The global provider can be set once per process, so this runs in its own.
    script = textwrap.dedent(
        """
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
        from audit import MemoryAuditSink
        from runtime import Action, Gate, Policy

        policy = Policy.from_dict({"policy_id": "p", "default": "allow"})
        gate = Gate(policy, sink=MemoryAuditSink())
        before = gate.check(Action("a", "v", "r"))
        exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        trace.set_tracer_provider(provider)
        after = gate.check(Action("a", "v", "r"))
        (span,) = exporter.get_finished_spans()
        assert span.name == "ghost.gate.check"
        assert span.instrumentation_scope.name == "ghost"
        assert f"{span.context.span_id:016x}" == after.span_id
        print("ok", before.trace_origin)
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok generated"


def test_the_gate_names_its_tracer_ghost(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    gate = Gate(Policy.from_dict(POLICY), sink=MemoryAuditSink(), tracer_provider=provider)
    gate.check(ACTION)
    (span,) = exporter.get_finished_spans()
    assert span.instrumentation_scope is not None
    assert span.instrumentation_scope.name == "ghost"


def test_a_supplied_parent_is_remote_and_its_tracestate_reaches_the_span(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    gate = Gate(Policy.from_dict(POLICY), sink=MemoryAuditSink(), tracer_provider=provider)
    decision = gate.check(ACTION, traceparent=HEADER, tracestate="vendor=abc,other=x")
    (span,) = exporter.get_finished_spans()
    assert span.parent is not None
    assert span.parent.is_remote
    assert span.context is not None
    assert list(span.context.trace_state.items()) == [("vendor", "abc"), ("other", "x")]
    assert decision.tracestate == "vendor=abc,other=x"


def test_the_current_spans_tracestate_is_propagated() -> None:
    host = SpanContext(
        int(TRACE_ID, 16),
        int(PARENT, 16),
        is_remote=False,
        trace_flags=TraceFlags(TraceFlags.SAMPLED),
        trace_state=TraceState([("a", "1"), ("b", "2")]),
    )
    gate = Gate(Policy.from_dict(POLICY), sink=MemoryAuditSink())
    with otel_trace.use_span(NonRecordingSpan(host)):
        decision = gate.check(ACTION)
    assert decision.trace_origin == "otel"
    assert decision.trace_id == TRACE_ID
    assert decision.tracestate == "a=1,b=2"


def test_a_current_span_without_tracestate_propagates_none() -> None:
    host = SpanContext(int(TRACE_ID, 16), int(PARENT, 16), is_remote=False)
    gate = Gate(Policy.from_dict(POLICY), sink=MemoryAuditSink())
    with otel_trace.use_span(NonRecordingSpan(host)):
        decision = gate.check(ACTION)
    assert decision.tracestate is None


def test_a_decision_trace_cannot_be_changed() -> None:
    trace = Tracing(None).begin(HEADER, None)
    with pytest.raises(dataclasses.FrozenInstanceError):
        trace.trace_id = "0" * 32  # type: ignore[misc]


class _RecordOnly(Sampler):
    """Records every span without sampling it: a recording span with flags 00."""

    def should_sample(self, *args: Any, **kwargs: Any) -> SamplingResult:
        return SamplingResult(Decision.RECORD_ONLY)

    def get_description(self) -> str:
        return "record-only"


UNSAMPLED = f"00-{TRACE_ID}-{PARENT}-00"


def test_an_unsampled_supplied_parent_stays_unsampled_without_an_sdk() -> None:
    decision = Gate(Policy.from_dict(POLICY), sink=MemoryAuditSink()).check(
        ACTION, traceparent=UNSAMPLED
    )
    assert decision.traceparent.endswith("-00")


def test_an_unsampled_recording_span_stays_unsampled(exporter: InMemorySpanExporter) -> None:
    provider = TracerProvider(sampler=_RecordOnly())
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    gate = Gate(Policy.from_dict(POLICY), sink=MemoryAuditSink(), tracer_provider=provider)
    decision = gate.check(ACTION)
    assert decision.traceparent.endswith("-00")


def test_a_tracestate_that_is_not_text_is_dropped_and_the_check_goes_on() -> None:
    decision = Gate(Policy.from_dict(POLICY), sink=MemoryAuditSink()).check(
        ACTION,
        traceparent=HEADER,
        tracestate=5,  # type: ignore[arg-type]
    )
    assert decision.verdict.value == "allow"
    assert (decision.trace_origin, decision.tracestate) == ("supplied", None)


def test_a_traceparent_that_is_not_text_is_rejected_with_a_reason() -> None:
    trace = Tracing(None).begin(5, None)  # type: ignore[arg-type]
    assert trace.origin == "replaced_invalid"
    assert trace.rejected == "traceparent must be a string"


def test_the_fallback_keeps_a_valid_supplied_parent() -> None:
    trace = Tracing.fallback(f"00-{TRACE_ID}-{PARENT}-ff")
    assert (trace.origin, trace.trace_id, trace.parent_span_id) == ("supplied", TRACE_ID, PARENT)
    assert trace.trace_flags == 1  # unknown flag bits zeroed
    assert trace.rejected is None
    assert trace.span_id != PARENT
    assert len(trace.span_id) == 16
    assert trace.tracestate is None
    assert not trace.span.get_span_context().is_valid


def test_the_fallback_keeps_an_unsampled_parent_unsampled() -> None:
    assert Tracing.fallback(UNSAMPLED).trace_flags == 0


def test_the_fallback_replaces_an_invalid_parent() -> None:
    trace = Tracing.fallback("garbage")
    assert trace.origin == "replaced_invalid"
    assert trace.rejected is not None
    assert trace.parent_span_id is None
    assert trace.trace_id != TRACE_ID
    assert len(trace.trace_id) == 32
    assert trace.trace_flags == 1


def test_the_fallback_without_a_parent_generates_a_trace() -> None:
    first, second = Tracing.fallback(None), Tracing.fallback(None)
    assert (first.origin, first.rejected, first.parent_span_id) == ("generated", None, None)
    assert first.trace_id != second.trace_id
    assert first.traceparent == f"00-{first.trace_id}-{first.span_id}-01"


# -- more branches and boundaries pinned for mutation testing (ADR 0014) ---------------


def test_tracestate_is_ignored_without_a_traceparent() -> None:
    gate = Gate(Policy.from_dict(POLICY), sink=MemoryAuditSink())
    decision = gate.check(ACTION, tracestate="vendor=abc")
    assert (decision.trace_origin, decision.tracestate) == ("generated", None)


def test_a_tracestate_of_only_empty_members_is_recorded_as_none() -> None:
    gate = Gate(Policy.from_dict(POLICY), sink=MemoryAuditSink())
    decision = gate.check(ACTION, traceparent=HEADER, tracestate=" , ,")
    assert (decision.trace_origin, decision.tracestate) == ("supplied", None)


def _remote_parent(flags: int, state: list[tuple[str, str]]) -> otel_trace.Span:
    return otel_trace.NonRecordingSpan(
        otel_trace.SpanContext(
            int(TRACE_ID, 16),
            int(PARENT, 16),
            is_remote=True,
            trace_flags=otel_trace.TraceFlags(flags),
            trace_state=otel_trace.TraceState(state),
        )
    )


def test_the_current_span_donates_its_tracestate_without_an_sdk() -> None:
    # No provider: the gate's span does not record, so the ids come from the parent.
    gate = Gate(Policy.from_dict(POLICY), sink=MemoryAuditSink())
    with otel_trace.use_span(_remote_parent(1, [("vendor", "abc"), ("b", "2")])):
        decision = gate.check(ACTION)
    assert decision.trace_origin == "otel"
    assert decision.trace_id == TRACE_ID
    assert decision.span_id != PARENT
    assert decision.tracestate == "vendor=abc,b=2"
    assert decision.traceparent == f"00-{TRACE_ID}-{decision.span_id}-01"
    with otel_trace.use_span(_remote_parent(0, [])):
        unsampled = gate.check(ACTION)
    assert unsampled.tracestate is None
    assert unsampled.traceparent.endswith("-00")


def test_unknown_flag_bits_of_the_current_span_are_not_forwarded() -> None:
    gate = Gate(Policy.from_dict(POLICY), sink=MemoryAuditSink())
    with otel_trace.use_span(_remote_parent(0xFF, [])):
        decision = gate.check(ACTION)
    assert decision.traceparent.endswith("-01")


@pytest.mark.parametrize(("flags", "sent"), [("ff", "01"), ("fe", "00"), ("01", "01")])
def test_supplied_flags_keep_only_the_sampled_bit(
    flags: str, sent: str, provider: TracerProvider
) -> None:
    header = f"00-{TRACE_ID}-{PARENT}-{flags}"
    for tracer_provider in (None, provider):
        gate = Gate(
            Policy.from_dict(POLICY), sink=MemoryAuditSink(), tracer_provider=tracer_provider
        )
        decision = gate.check(ACTION, traceparent=header)
        assert decision.trace_id == TRACE_ID
        assert decision.traceparent == f"00-{TRACE_ID}-{decision.span_id}-{sent}"


def test_a_header_that_is_not_text_is_rejected_and_a_str_subclass_is_read_plainly() -> None:
    from runtime._tracing import Tracing

    tracing = Tracing(None)
    not_text = tracing.begin(b"00-x", None)  # type: ignore[arg-type]
    assert (not_text.origin, not_text.rejected) == (
        "replaced_invalid",
        "traceparent must be a string",
    )

    class Sly(str):
        def strip(self, chars: str | None = None) -> str:
            raise RuntimeError("never called")

        def __str__(self) -> str:
            raise RuntimeError("never called")

    sly = tracing.begin(Sly(HEADER), Sly("vendor=abc"))
    assert (sly.origin, sly.trace_id, sly.tracestate) == ("supplied", TRACE_ID, "vendor=abc")
    dropped = tracing.begin(HEADER, b"vendor=abc")  # type: ignore[arg-type]
    assert (dropped.origin, dropped.tracestate) == ("supplied", None)


# -- tracestate end to end: Level 2 grammar, the 512-character bound (ADR 0018) --------


def _gate_with(provider: TracerProvider) -> Gate:
    return Gate(Policy.from_dict(POLICY), sink=MemoryAuditSink(), tracer_provider=provider)


def test_level_2_keys_reach_the_decision_and_otel_gets_what_it_can_hold(
    provider: TracerProvider, exporter: InMemorySpanExporter, caplog: pytest.LogCaptureFixture
) -> None:
    header = "1abc=one,rojo=00f067aa0ba902b7,foo@=two,t@" + "v" * 15 + "=three,fw529a3039@dt=x"
    with caplog.at_level("DEBUG"):
        decision = _gate_with(provider).check(ACTION, traceparent=HEADER, tracestate=header)
    assert decision.trace_origin == "supplied"
    assert decision.tracestate == header  # every Level 2 member propagates
    (span,) = exporter.get_finished_spans()
    assert span.parent is not None
    assert span.context is not None
    # OpenTelemetry's TraceState holds Level 1 keys only; the others never reach it,
    # so it never logs (header text in the host's logs) a member it refuses.
    assert list(span.context.trace_state.items()) == [
        ("rojo", "00f067aa0ba902b7"),
        ("fw529a3039@dt", "x"),
    ]
    assert not [r for r in caplog.records if r.name.startswith("opentelemetry")]


def test_one_invalid_member_drops_the_whole_tracestate_end_to_end(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    decision = _gate_with(provider).check(
        ACTION, traceparent=HEADER, tracestate="rojo=1,@bad=2,congo=3"
    )
    assert (decision.trace_origin, decision.tracestate) == ("supplied", None)
    (span,) = exporter.get_finished_spans()
    assert span.context is not None
    assert len(span.context.trace_state) == 0
    assert decision.trace_id == TRACE_ID  # the traceparent itself is kept


def test_a_supplied_tracestate_over_512_characters_is_truncated_by_whole_entries(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    members = [(f"k{i:02}", "v" * 100) for i in range(4)]  # 104 each: 419 with commas
    long = ("long", "x" * 200)  # 205: over 128, so it goes first
    tail = ("z", "y" * 60)  # 62
    header = ",".join(f"{k}={v}" for k, v in [members[0], long, *members[1:], tail])
    assert len(header) == 419 + 205 + 62 + 2
    decision = _gate_with(provider).check(ACTION, traceparent=HEADER, tracestate=header)
    expected = [*members, tail]
    assert decision.tracestate == ",".join(f"{k}={v}" for k, v in expected)
    assert decision.tracestate is not None
    assert len(decision.tracestate) <= 512
    (span,) = exporter.get_finished_spans()
    assert span.context is not None
    assert list(span.context.trace_state.items()) == expected


def test_the_current_spans_tracestate_is_bounded_too() -> None:
    state = [(f"k{i:02}", "v" * 100) for i in range(10)]  # 1049 characters joined
    host = SpanContext(
        int(TRACE_ID, 16),
        int(PARENT, 16),
        is_remote=False,
        trace_flags=TraceFlags(TraceFlags.SAMPLED),
        trace_state=TraceState(state),
    )
    gate = Gate(Policy.from_dict(POLICY), sink=MemoryAuditSink())
    with otel_trace.use_span(NonRecordingSpan(host)):
        decision = gate.check(ACTION)
    assert decision.trace_origin == "otel"
    assert decision.tracestate == ",".join(f"{k}={v}" for k, v in state[:4])


def test_a_tracestate_of_exactly_512_characters_is_propagated_unchanged() -> None:
    header = "a=" + "x" * 254 + ",b=" + "y" * 253
    assert len(header) == 512
    gate = Gate(Policy.from_dict(POLICY), sink=MemoryAuditSink())
    assert gate.check(ACTION, traceparent=HEADER, tracestate=header).tracestate == header
    longer = header + "y"  # b's value is now 254 characters: 513 in all
    decision = gate.check(ACTION, traceparent=HEADER, tracestate=longer)
    assert decision.tracestate == "a=" + "x" * 254  # b (right-most, over 128) goes
