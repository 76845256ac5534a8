"""No raw secret, planted anywhere an agent can put one, reaches anything ghost writes.

For every detector's secrets (tests.strategies.scrubber_secrets) planted in an
argument value, a key, a nested key, a list, the agent, the verb, the
resource, a type name, or the traceparent header: the secret is in none of
`decision.args`, `decision.reason`, the MCAP file's bytes, its decompressed
messages, the SDK's log events, or the OpenTelemetry spans (SPEC §3-§5,
non-negotiable 7).
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from structlog.testing import capture_logs

from audit import McapAuditSink, read_run
from runtime import Action, Gate, Policy
from tests.runtime.conftest import POLICY
from tests.strategies import scrubber_secrets

Plant = Callable[[str], tuple[Action, str | None]]

PLANTS: dict[str, Plant] = {
    "value": lambda s: (Action("bot", "search", "tool:search", {"q": f"see {s} now"}), None),
    "key": lambda s: (Action("bot", "search", "tool:search", {f"k {s}": 1}), None),
    "nested key": lambda s: (Action("bot", "search", "tool:search", {"a": {s: {"b": 2}}}), None),
    "list": lambda s: (Action("bot", "search", "tool:search", {"items": ["x", [s]]}), None),
    "agent": lambda s: (Action(f"agent {s}", "search", "tool:search", {}), None),
    "verb": lambda s: (Action("bot", f"send {s}", "tool:search", {}), None),
    "resource": lambda s: (Action("bot", "send", f"mail:{s}", {"body": "hi"}), None),
    "kept key": lambda s: (Action("bot", "query", "db:customers", {s: 1, "table": "t"}), None),
    "type name": lambda s: (Action("bot", "search", "tool:search", {"v": type(s, (), {})()}), None),
    "header": lambda s: (Action("bot", "search", "tool:search", {}), f"00-{s}-01"),
    "blocked": lambda s: (
        Action("bot", "search", "tool:search", {"k": s, "pem": PEM}),
        None,
    ),
}

PEM = (
    "-----BEGIN PRIVATE KEY-----\n"
    "MIIBVQIBADANBgkqhkiG9w0BAQEFAASCAT8wggE7AgEAAkEA\n"
    "-----END PRIVATE KEY-----"
)


@settings(
    max_examples=80,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    scrubber_secrets(),
    st.sampled_from(sorted(PLANTS)),
    st.sampled_from(["process", "chunk"]),
)
def test_a_planted_secret_reaches_nothing_ghost_writes(
    planted: tuple[str, str, str], where: str, durability: str
) -> None:
    _, text, secret = planted
    action, traceparent = PLANTS[where](text)
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "run.mcap"
        with (
            capture_logs() as events,
            McapAuditSink(out, durability=durability) as sink,  # type: ignore[arg-type]
        ):
            gate = Gate(Policy.from_dict(POLICY), sink=sink, tracer_provider=provider)
            decision = gate.check(action, traceparent=traceparent)
        raw = out.read_bytes()
        messages = b"".join(record.data for record in read_run(out).records)
    needle = secret.encode()
    assert needle not in raw
    assert needle not in messages
    # JSON escapes in records: look for the escaped form too.
    assert json.dumps(secret)[1:-1].encode() not in messages
    assert secret not in json.dumps(dict(decision.args), default=repr)
    assert secret not in decision.reason
    assert secret not in repr(events)
    for span in exporter.get_finished_spans():
        exported: dict[str, Any] = {
            "name": span.name,
            "attributes": dict(span.attributes or {}),
            "events": [(e.name, dict(e.attributes or {})) for e in span.events],
        }
        assert secret not in json.dumps(exported, default=repr)


@settings(max_examples=20, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.sampled_from([4111111111111111, 378282246310005, 5555555555554444]),
    st.sampled_from(["value", "list", "nested"]),
)
def test_a_card_number_given_as_an_int_reaches_nothing_ghost_writes(card: int, where: str) -> None:
    # Numbers are scanned as their decimal text (SPEC §4): an int is no way around.
    args: dict[str, Any] = {
        "value": {"n": card},
        "list": {"items": [1, card]},
        "nested": {"a": {"b": [{"c": card}]}},
    }[where]
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "run.mcap"
        with capture_logs() as events, McapAuditSink(out) as sink:
            decision = Gate(Policy.from_dict(POLICY), sink=sink).check(
                Action("bot", "search", "tool:search", args)
            )
        messages = b"".join(record.data for record in read_run(out).records)
        raw = out.read_bytes()
    needle = str(card).encode()
    assert needle not in raw
    assert needle not in messages
    assert str(card) not in json.dumps(dict(decision.args))
    assert str(card) not in repr(events)
