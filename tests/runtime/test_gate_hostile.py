"""The gate under attack: every input path either decides on plain data or denies, recorded.

The agent controls every argument and often the agent name, the verb and the
resource (an MCP client picks its own name); the host's OpenTelemetry SDK and
clock can fail too. Whatever happens, `Gate.check` returns a recorded decision
(SPEC §3 "Fail closed") and nothing raw reaches the log.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace import Span as SdkSpan
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from structlog.testing import capture_logs

from audit import MemoryAuditSink
from runtime import Action, Gate, Policy, RuntimeVerdict, value_sha256
from runtime.testing import ManualClock
from tests.runtime.conftest import POLICY
from tests.strategies import LyingStr, argument_dicts, disguised, plain_form

AWS_KEY = "AKIAIOSFODNN7EXAMPLE"
POLICY_OBJ = Policy.from_dict(POLICY)
HEADER = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def make_gate(sink: MemoryAuditSink | None = None, **options: Any) -> Gate:
    options.setdefault("clock", ManualClock(step_ns=1_000))
    return Gate(POLICY_OBJ, sink=sink or MemoryAuditSink(), fingerprint_key=b"k" * 32, **options)


def only(sink: MemoryAuditSink, topic: str) -> dict[str, Any]:
    (record,) = sink.records(topic)
    return dict(record)


def containers(value: object) -> Iterator[int]:
    if isinstance(value, dict):
        yield id(value)
        for item in dict.values(value):
            yield from containers(item)
    elif isinstance(value, list | tuple):
        if isinstance(value, list):
            yield id(value)
        for item in tuple(value) if isinstance(value, tuple) else list.copy(value):
            yield from containers(item)


actions = st.tuples(
    st.sampled_from(["bot", "analyst", "ops/cleaner"]),
    st.sampled_from(["search", "query", "refund", "delete", "read", "send"]),
    st.sampled_from(["tool:search", "db:customers", "payments:x", "file:/data/public/a"]),
)


def decision_view(sink: MemoryAuditSink, decision: Any) -> tuple[Any, ...]:
    assessment, record = only(sink, "/assessments"), only(sink, "/decisions")
    return (
        decision.verdict,
        decision.reason,
        decision.matched_policy,
        json.dumps(plain_form(dict(decision.args)), sort_keys=True, default=repr),
        assessment["args_sha256"],
        assessment["findings"],
        assessment["narrowings"],
        assessment["matched_rules"],
        record["executed_args_sha256"],
    )


@settings(max_examples=120, suppress_health_check=[HealthCheck.too_slow])
@given(
    actions,
    argument_dicts().flatmap(lambda args: st.tuples(st.just(args), disguised(args))),
    st.sampled_from([None, "AKIAIOSFODNN7EXAMPLE", 4111111111111111, "jane@example.com"]),
)
def test_a_disguised_action_is_decided_exactly_as_the_plain_one(
    names: tuple[str, str, str], pair: tuple[dict[str, Any], Any], planted: object
) -> None:
    plain, hostile = pair
    if planted is not None:
        plain = {**plain, "planted": planted}
        hostile = {**dict(dict.items(hostile)), "planted": planted}
    plain_sink, hostile_sink = MemoryAuditSink(), MemoryAuditSink()
    expected = make_gate(plain_sink).check(Action(*names, plain))
    hostile_names = tuple(LyingStr(name) for name in names)
    got = make_gate(hostile_sink).check(Action(*hostile_names, hostile))  # type: ignore[arg-type]
    assert decision_view(hostile_sink, got) == decision_view(plain_sink, expected)
    # What runs shares no mutable container with what came in.
    assert not set(containers(got.args)) & set(containers(hostile))


def test_mutating_the_arguments_after_check_changes_nothing_that_was_decided() -> None:
    sink = MemoryAuditSink()
    args: dict[str, Any] = {"q": "weather", "filters": {"lang": ["en"]}}
    decision = make_gate(sink).check(Action("bot", "search", "tool:search", args))
    args["filters"]["lang"].append(f"key {AWS_KEY}")
    args["q"] = "changed"
    assert decision.args == {"q": "weather", "filters": {"lang": ["en"]}}
    assert only(sink, "/assessments")["args_sha256"] == value_sha256(
        {"q": "weather", "filters": {"lang": ["en"]}}
    )


def test_an_action_subclass_cannot_answer_differently_on_each_read() -> None:
    class Sneaky(Action):
        __slots__ = ()

        def __getattribute__(self, name: str) -> Any:
            return "delete-everything" if name in ("verb", "agent", "resource") else {"x": 1}

    sink = MemoryAuditSink()
    decision = make_gate(sink).check(Sneaky("bot", "search", "tool:search", {"q": "x"}))
    assert decision.verdict is RuntimeVerdict.ALLOW
    assert only(sink, "/assessments")["verb"] == "search"


# --- names that could make a record unwritable ---------------------------------------


@pytest.mark.parametrize("bad", ["\x00", chr(0xD800), chr(0xDFFF), "\x1b[2J", "\u202e", "\x85"])
@pytest.mark.parametrize("field", ["agent", "verb", "resource"])
def test_control_characters_and_lone_surrogates_deny_and_are_recorded_escaped(
    field: str, bad: str
) -> None:
    sink = MemoryAuditSink()  # validates every record against its schema
    names = {"agent": "bot", "verb": "search", "resource": "tool:search"}
    names[field] = f"x{bad}y"
    decision = make_gate(sink).check(Action(**names, args={}))
    assert decision.verdict is RuntimeVerdict.DENY
    assert "InvalidAction" in decision.reason
    recorded = only(sink, "/assessments")[field]
    assert recorded == f"x\\u{ord(bad[0]):04x}{bad[1:]}y"
    assert len(sink.records("/decisions")) == 1
    for entry in sink.entries:
        entry.data.decode("utf-8")  # every record is valid UTF-8


def test_an_overlong_resource_is_denied_and_recorded_by_its_length_only() -> None:
    sink = MemoryAuditSink()
    resource = "file:/" + "a" * 5000 + AWS_KEY
    decision = make_gate(sink).check(Action("bot", "read", resource, {}))
    assert decision.verdict is RuntimeVerdict.DENY
    assert "at most 4096" in decision.reason
    recorded = only(sink, "/assessments")["resource"]
    assert recorded == f"<{len(resource)} characters, not recorded: longer than 4096>"


def test_the_name_bound_is_configurable() -> None:
    gate = make_gate(max_name_chars=8)
    assert gate.check(Action("bot", "search", "tool:abc", {})).verdict is RuntimeVerdict.ALLOW
    assert gate.check(Action("bot", "search", "tool:abcd", {})).verdict is RuntimeVerdict.DENY


def test_secrets_in_names_are_recorded_scrubbed_whatever_the_policy_detects() -> None:
    sink = MemoryAuditSink()
    policy = Policy.from_dict({**POLICY, "scrub": {"detectors": ["email"]}})
    gate = Gate(policy, sink=sink, fingerprint_key=b"k" * 32)
    gate.check(Action(f"bot-{AWS_KEY}", "search", f"tool:{AWS_KEY}/4111111111111111", {}))
    assessment = only(sink, "/assessments")
    assert AWS_KEY not in json.dumps(assessment)
    assert "4111111111111111" not in json.dumps(assessment)
    assert "[REDACTED:aws_access_key_id]" in assessment["resource"]


# --- values whose names or messages could carry a secret ------------------------------


def test_a_type_named_like_a_secret_is_scrubbed_from_the_reason() -> None:
    sink = MemoryAuditSink()
    secret_type = type(AWS_KEY, (), {})
    decision = make_gate(sink).check(Action("bot", "search", "tool:search", {"v": secret_type()}))
    assert decision.verdict is RuntimeVerdict.DENY
    assert AWS_KEY not in decision.reason
    assert "[REDACTED:aws_access_key_id]" in decision.reason
    assert AWS_KEY.encode() not in b"".join(entry.data for entry in sink.entries)


def test_a_key_holding_a_secret_is_scrubbed_from_the_reason() -> None:
    sink = MemoryAuditSink()
    decision = make_gate(sink).check(Action("bot", "search", "t", {f"x {AWS_KEY}": {1, 2}}))
    assert decision.verdict is RuntimeVerdict.DENY
    assert "is a set" in decision.reason
    assert AWS_KEY not in decision.reason
    assert AWS_KEY.encode() not in b"".join(entry.data for entry in sink.entries)


def test_to_data_failures_deny_by_type_never_by_message() -> None:
    def to_data(value: object) -> object:
        raise LookupError(f"cannot convert {AWS_KEY}")

    sink = MemoryAuditSink()
    decision = make_gate(sink, to_data=to_data).check(
        Action("bot", "search", "tool:search", {"v": object()})
    )
    assert decision.verdict is RuntimeVerdict.DENY
    assert decision.reason == "denied: evaluation failed with LookupError"
    assert only(sink, "/assessments")["errors"] == ["LookupError"]
    assert AWS_KEY.encode() not in b"".join(entry.data for entry in sink.entries)


def test_to_data_lets_a_host_type_be_decided_on() -> None:
    class Query:
        def __init__(self, text: str) -> None:
            self.text = text

    gate = make_gate(to_data=lambda v: {"text": v.text} if isinstance(v, Query) else v)
    decision = gate.check(Action("bot", "search", "tool:search", {"q": Query(f"a {AWS_KEY}")}))
    assert decision.verdict is RuntimeVerdict.SCRUB
    assert decision.args == {"q": {"text": "a [REDACTED:aws_access_key_id]"}}


# --- trace context: anything the header is, the check is recorded --------------------


class ExplodingHeader(str):
    """A header whose every method raises: the gate must read its value, not call it."""

    __slots__ = ()

    def strip(self, *args: object) -> str:  # type: ignore[override]
        raise RuntimeError("strip")

    def __len__(self) -> int:
        raise RuntimeError("len")

    def __getitem__(self, index: object) -> str:  # type: ignore[override]
        raise RuntimeError("getitem")


def test_a_header_subclass_is_read_as_its_value() -> None:
    decision = make_gate().check(
        Action("bot", "search", "tool:search", {}), traceparent=ExplodingHeader(HEADER)
    )
    assert decision.trace_origin == "supplied"
    assert decision.trace_id == HEADER[3:35]


@pytest.mark.parametrize("header", [42, b"00-...", object(), ["00-"], "x" * 100_000])
def test_a_header_that_is_not_text_or_is_huge_is_replaced(header: object) -> None:
    sink = MemoryAuditSink()
    decision = make_gate(sink).check(
        Action("bot", "search", "tool:search", {}),
        traceparent=header,  # type: ignore[arg-type]
        tracestate=header,  # type: ignore[arg-type]
    )
    assert decision.trace_origin == "replaced_invalid"
    assert decision.verdict is RuntimeVerdict.ALLOW
    assert len(sink.records("/decisions")) == 1


def test_a_valid_header_with_a_hostile_tracestate_keeps_the_parent() -> None:
    decision = make_gate().check(
        Action("bot", "search", "tool:search", {}),
        traceparent=HEADER,
        tracestate=ExplodingHeader("a=1"),
    )
    assert decision.trace_origin == "supplied"
    assert decision.tracestate == "a=1"


def test_reserved_trace_flags_are_not_propagated() -> None:
    decision = make_gate().check(
        Action("bot", "search", "tool:search", {}), traceparent=HEADER[:-2] + "ff"
    )
    assert decision.traceparent.endswith("-01")


class FailingProcessor(SpanProcessor):
    def __init__(self, *, on_start: bool = False, on_end: bool = False) -> None:
        self.fail_start = on_start
        self.fail_end = on_end

    def on_start(self, span: SdkSpan, parent_context: Context | None = None) -> None:
        if self.fail_start:
            raise RuntimeError(f"processor {AWS_KEY}")

    def on_end(self, span: ReadableSpan) -> None:
        if self.fail_end:
            raise KeyError(f"processor {AWS_KEY}")


@pytest.mark.parametrize(
    ("processor", "why", "error"),
    [
        (FailingProcessor(on_start=True), "starting the decision's span failed", "RuntimeError"),
        (FailingProcessor(on_end=True), "ending the decision's span failed", "KeyError"),
    ],
)
def test_a_span_processor_that_raises_denies_and_is_recorded(
    processor: SpanProcessor, why: str, error: str
) -> None:
    provider = TracerProvider()
    provider.add_span_processor(processor)
    sink = MemoryAuditSink()
    decision = make_gate(sink, tracer_provider=provider).check(
        Action("bot", "search", "tool:search", {"q": "x"}), traceparent=HEADER
    )
    assert decision.verdict is RuntimeVerdict.DENY
    assert decision.reason == f"denied: {why} ({error})"
    assert decision.args == {}
    assert decision.trace_id == HEADER[3:35]  # the trace is still the caller's
    assessment = only(sink, "/assessments")
    assert assessment["errors"] == [error]
    assert only(sink, "/decisions")["executed_args_sha256"] is None
    assert AWS_KEY.encode() not in b"".join(entry.data for entry in sink.entries)


def test_span_attributes_of_a_hostile_check_hold_no_secret() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    gate = make_gate(tracer_provider=provider)
    gate.check(Action(f"bot {AWS_KEY}", "search", f"tool:{AWS_KEY}", {"k": AWS_KEY}))
    gate.check(Action("bot", "search", "tool:search", {"v": type(AWS_KEY, (), {})()}))
    for span in exporter.get_finished_spans():
        assert AWS_KEY not in json.dumps(dict(span.attributes or {}))
        assert AWS_KEY not in span.name


# --- the clock ----------------------------------------------------------------------


class BrokenClock:
    """A clock that goes wrong after ``good`` monotonic reads: it raises, or returns a float."""

    def __init__(self, failing: str, *, good: int) -> None:
        self.failing = failing
        self.good = good

    def monotonic_ns(self) -> Any:
        self.good -= 1
        if self.good >= 0:
            return 1_000
        if self.failing == "raises":
            raise OSError("clock")
        return 1.5

    def time_ns(self) -> int:
        return 1_767_225_600_000_000_000


@pytest.mark.parametrize(
    ("failing", "good", "reason", "errors"),
    [
        ("raises", 0, "denied: the gate's clock failed", ["OSError"]),
        ("floats", 0, "denied: the gate's clock failed", ["ClockError"]),
        # Failing mid-check, inside the stage timer: a deny naming the error.
        ("raises", 2, "denied: evaluation failed with OSError", ["OSError"]),
        ("floats", 2, None, ["ClockError"]),
    ],
)
def test_a_failing_clock_denies_or_is_recorded_and_never_escapes(
    failing: str, good: int, reason: str | None, errors: list[str]
) -> None:
    sink = MemoryAuditSink()  # validates: a float stage time would be refused
    gate = Gate(POLICY_OBJ, sink=sink, clock=ManualClock(), fingerprint_key=b"k" * 32)
    object.__setattr__(gate, "_clock", BrokenClock(failing, good=good))
    decision = gate.check(Action("bot", "search", "tool:search", {}))
    assessment = only(sink, "/assessments")
    assert assessment["errors"] == errors
    assert all(type(spent) is int for spent in assessment["stage_ns"].values())
    if reason is not None:
        assert decision.verdict is RuntimeVerdict.DENY
        assert decision.reason == reason
    assert type(decision.latency_ns) is int
    assert decision.latency_ns >= 0


# --- logging ------------------------------------------------------------------------


def test_log_events_of_hostile_checks_hold_no_header_text_or_secret() -> None:
    # A sink on a clock that never moves: no checkpoint falls due (and is anchored as a log
    # event) during the check because the machine was slow.
    with capture_logs() as opening:
        gate = make_gate(MemoryAuditSink(clock=ManualClock()))
    # Opening the run anchors the checkpoint after /run; nothing else.
    assert [event["event"] for event in opening] == ["ghost.checkpoint"]
    with capture_logs() as events:
        gate.check(
            Action("bot", "search", "tool:search", {"k": AWS_KEY}),
            traceparent=f"00-{AWS_KEY}-zz-01",
        )
    assert [event["event"] for event in events] == ["ghost.traceparent_rejected"]
    assert AWS_KEY not in repr(events)


# --- names and resources the policy must not under-match (issue 5, classes 1 and 2) -------

_PUBLIC_ONLY = Policy.from_dict(
    {
        "policy_id": "public-only",
        "default": "deny",
        "rules": [
            {"id": "public-reads", "effect": "allow", "resources": ["file:/data/public/**"]},
        ],
    }
)


@pytest.mark.parametrize("agent", ["ops/cleaner", "a/b/c", "/", "x\\y"])
@pytest.mark.parametrize("verb", ["fs/read", "db.drop/all", "*"])
def test_a_default_everything_deny_matches_names_with_slashes(agent: str, verb: str) -> None:
    policy = Policy.from_dict(
        {
            "policy_id": "slashes",
            "default": "allow",
            "rules": [
                {"id": "stop-all", "effect": "deny"},
                {"id": "then-allow", "effect": "allow", "agents": [agent], "verbs": [verb]},
            ],
        }
    )
    decision = Gate(policy, sink=MemoryAuditSink(), clock=ManualClock()).check(
        Action(agent=agent, verb=verb, resource="x:/y", args={})
    )
    assert decision.verdict is RuntimeVerdict.DENY
    assert decision.matched_policy == "stop-all"


@pytest.mark.parametrize(
    "resource",
    [
        "file:/data/public/../../etc/shadow",
        "file:/data/public/../secret",
        "file:/data/public//../secret",
        "file:/data/public/./../secret",
        "file:/data/public/%2e%2e/secret",
        "file:/data/public/%2E%2E/secret",
        "file:/data/public/..%2fsecret",
        "file:/data/public/..\\secret",
        "file:/data/public\\..\\secret",
        "file:/data/public/..;/secret",
    ],
)
def test_traversal_never_reaches_an_allow_under_a_resource_glob(resource: str) -> None:
    sink = MemoryAuditSink()
    decision = Gate(_PUBLIC_ONLY, sink=sink, clock=ManualClock()).check(
        Action(agent="a", verb="read", resource=resource, args={})
    )
    assert decision.verdict is RuntimeVerdict.DENY
    assert only(sink, "/decisions")["verdict"] == "deny"


def test_a_canonical_resource_inside_the_root_is_allowed() -> None:
    gate = Gate(_PUBLIC_ONLY, sink=MemoryAuditSink(), clock=ManualClock())
    for resource in ("file:/data/public/a/./b", "file:/data/public//a", "file:/data/public/a/../b"):
        assert gate.check(Action("a", "read", resource, {})).verdict is RuntimeVerdict.ALLOW
