"""The decision span in OpenTelemetry's GenAI conventions (SPEC §7, ADR 0021).

Real SDK spans through the in-memory exporter: the GenAI attributes, the
guardrail verdict vocabulary, the instrumentation scope, the span link a
supplied traceparent adds, and that no argument value reaches an attribute
unless the host opted in -- and then only scrubbed.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from audit import MemoryAuditSink
from runtime import SDK_VERSION, Action, Gate, Policy, RuntimeVerdict
from runtime._tracing import span_attributes
from tests.runtime.conftest import POLICY

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
HEADER = f"00-{TRACE_ID}-00f067aa0ba902b7-01"
AWS_KEY = "AKIAIOSFODNN7EXAMPLE"
MARKER = "q3-revenue-forecast-7731"  # an ordinary argument value, no secret


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture
def provider(exporter: InMemorySpanExporter) -> TracerProvider:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider


def gate_span(exporter: InMemorySpanExporter) -> ReadableSpan:
    spans = [s for s in exporter.get_finished_spans() if s.name == "ghost.gate.check"]
    assert len(spans) == 1
    exporter.clear()
    return spans[0]


def attributes(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


@pytest.mark.parametrize(
    ("action", "verdict", "guardrail"),
    [
        (Action("bot", "search", "tool:search", {"q": MARKER}), "allow", "allow"),
        (Action("bot", "delete", "tool:delete", {"id": MARKER}), "deny", "deny"),
        (
            Action("bot", "query", "db:customers", {"table": MARKER, "limit": 5000}),
            "narrow",
            "modify",
        ),
        (Action("bot", "search", "tool:search", {"q": AWS_KEY}), "scrub", "modify"),
        (
            Action("bot", "refund", "payments:c-1", {"amount": 80, "memo": MARKER}),
            "pending",
            "escalate",
        ),
    ],
)
def test_each_verdict_is_given_in_the_guardrail_vocabulary(
    provider: TracerProvider,
    exporter: InMemorySpanExporter,
    action: Action,
    verdict: str,
    guardrail: str,
) -> None:
    gate = Gate(Policy.from_dict(POLICY), sink=MemoryAuditSink(), tracer_provider=provider)
    decision = gate.check(action)
    assert decision.verdict.value == verdict
    got = attributes(gate_span(exporter))
    assert got["gen_ai.guardrail.verdict.type"] == guardrail
    assert got["ghost.verdict"] == verdict
    assert got["gen_ai.operation.name"] == "execute_tool"
    assert got["gen_ai.tool.name"] == action.verb
    assert got["gen_ai.agent.name"] == "bot"
    assert got["ghost.policy_id"] == "test-policy"
    assert got["ghost.decision_id"] == decision.decision_id
    # No argument value, ordinary or secret, in any attribute by default.
    assert "gen_ai.tool.call.arguments" not in got
    flat = json.dumps(got)
    assert MARKER not in flat
    assert AWS_KEY not in flat


def test_the_instrumentation_scope_names_ghost_and_its_version(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    gate = Gate(Policy.from_dict(POLICY), sink=MemoryAuditSink(), tracer_provider=provider)
    gate.check(Action("bot", "search", "tool:search"))
    scope = gate_span(exporter).instrumentation_scope
    assert scope is not None
    assert (scope.name, scope.version) == ("ghost", SDK_VERSION)


def test_names_reach_the_span_escaped_and_scrubbed(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    # The agent controls its name and verb: a secret or a control character in
    # them is kept out of the span exactly as it is kept out of the log.
    sink = MemoryAuditSink()
    gate = Gate(Policy.from_dict(POLICY), sink=sink, tracer_provider=provider)
    gate.check(Action(f"bot-{AWS_KEY}", "search\x1b[2J", "tool:search"))
    got = attributes(gate_span(exporter))
    assert AWS_KEY not in json.dumps(got)
    assert "\x1b" not in got["gen_ai.tool.name"]
    assessment = sink.records("/assessments")[0]
    assert got["gen_ai.agent.name"] == assessment["agent"]
    assert got["gen_ai.tool.name"] == assessment["verb"]
    assert got["ghost.verdict"] == "deny"


def test_opted_in_arguments_are_scrubbed_by_every_detector(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    # A policy whose scrubber lists no detector still never puts a raw secret on a span.
    policy = Policy.from_dict(
        {
            "policy_id": "p",
            "rules": [{"id": "all", "effect": "allow"}],
            "scrub": {"detectors": []},
        }
    )
    gate = Gate(policy, sink=MemoryAuditSink(), tracer_provider=provider, span_arguments=True)
    decision = gate.check(Action("bot", "search", "tool:search", {"q": MARKER, "key": AWS_KEY}))
    assert decision.args["key"] == AWS_KEY  # the policy scrubs nothing
    text = attributes(gate_span(exporter))["gen_ai.tool.call.arguments"]
    assert MARKER in text
    assert AWS_KEY not in text
    assert text.startswith('{"key":')  # canonical JSON: sorted keys


def test_opted_in_arguments_are_what_runs_and_never_shown_for_deny(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    gate = Gate(
        Policy.from_dict(POLICY),
        sink=MemoryAuditSink(),
        tracer_provider=provider,
        span_arguments=True,
    )
    gate.check(Action("bot", "query", "db:customers", {"table": "t", "limit": 5000, "x": MARKER}))
    shown = json.loads(attributes(gate_span(exporter))["gen_ai.tool.call.arguments"])
    assert shown == {"table": "t", "limit": 100, "read_only": True}  # narrowed: x dropped
    gate.check(Action("bot", "delete", "tool:delete", {"id": MARKER}))
    assert "gen_ai.tool.call.arguments" not in attributes(gate_span(exporter))


def test_opted_in_arguments_that_cannot_be_encoded_name_only_the_failure(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    gate = Gate(
        Policy.from_dict(POLICY),
        sink=MemoryAuditSink(),
        tracer_provider=provider,
        span_arguments=True,
    )
    # Arguments the gate cannot hash deny, so no span shows them ...
    decision = gate.check(Action("bot", "search", "tool:search", {"q": "\ud800" + MARKER}))
    assert decision.verdict.value == "deny"
    assert "gen_ai.tool.call.arguments" not in attributes(gate_span(exporter))
    # ... and the encoder's failure, were it reached, names only its type.
    text = gate._arguments_text({"q": "\ud800" + MARKER})
    assert text == "<arguments not encodable: CanonicalEncodingError>"


@pytest.mark.parametrize("value", [1, "yes", None])
def test_span_arguments_must_be_a_bool(value: object) -> None:
    with pytest.raises(TypeError, match="span_arguments"):
        Gate(Policy.from_dict(POLICY), sink=MemoryAuditSink(), span_arguments=value)  # type: ignore[arg-type]


def test_a_supplied_traceparent_links_to_the_host_span_it_detaches_from(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    gate = Gate(Policy.from_dict(POLICY), sink=MemoryAuditSink(), tracer_provider=provider)
    with provider.get_tracer("host").start_as_current_span("agent-step") as host:
        decision = gate.check(Action("bot", "search", "tool:search"), traceparent=HEADER)
    span = gate_span(exporter)
    assert decision.trace_id == TRACE_ID  # the supplied header is the parent
    assert span.parent is not None
    assert span.parent.span_id == int("00f067aa0ba902b7", 16)
    host_ctx = host.get_span_context()
    assert [(link.context.trace_id, link.context.span_id) for link in span.links] == [
        (host_ctx.trace_id, host_ctx.span_id)
    ]
    assert dict(span.links[0].attributes or {}) == {"ghost.link.reason": "host_current_span"}


def test_no_link_without_a_host_span_or_when_the_header_names_the_host_span(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    gate = Gate(Policy.from_dict(POLICY), sink=MemoryAuditSink(), tracer_provider=provider)
    gate.check(Action("bot", "search", "tool:search"), traceparent=HEADER)
    assert list(gate_span(exporter).links) == []
    with provider.get_tracer("host").start_as_current_span("agent-step") as host:
        ctx = host.get_span_context()
        same = f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}-01"
        gate.check(Action("bot", "search", "tool:search"), traceparent=same)
        gate_span(exporter)  # the gate's span ended; the host's is still open
        gate.check(Action("bot", "search", "tool:search"))  # the host span is the parent
    assert list(gate_span(exporter).links) == []


def test_an_invalid_header_under_a_host_span_continues_it_without_a_link(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    gate = Gate(Policy.from_dict(POLICY), sink=MemoryAuditSink(), tracer_provider=provider)
    with provider.get_tracer("host").start_as_current_span("agent-step") as host:
        decision = gate.check(Action("bot", "search", "tool:search"), traceparent="00-bad")
    span = gate_span(exporter)
    assert decision.trace_origin == "replaced_invalid"
    assert span.parent is not None
    assert span.parent.span_id == host.get_span_context().span_id
    assert list(span.links) == []


def test_a_decision_no_rule_made_carries_no_rule_attribute() -> None:
    # Built directly: an SDK drops a None value itself, another span implementation may not.
    attributes = span_attributes(
        decision_id="d",
        verdict=RuntimeVerdict.DENY,
        matched_policy=None,
        origin="generated",
        policy_id="p",
        agent="a",
        tool="t",
    )
    assert "ghost.matched_policy" not in attributes
    assert None not in attributes.values()
