"""What an agent asks to do (`Action`) and what the gate decided (`Decision`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from runtime._tracing import TraceOrigin
from runtime._verdict import RuntimeVerdict

__all__ = ["Action", "Decision"]


@dataclass(frozen=True, slots=True)
class Action:
    """One action an agent is about to take.

    Attributes:
        agent: who acts (``"researcher"``).
        verb: what it does (``"read"``, ``"refund"``, a tool's name).
        resource: what it acts on (``"file:/data/q3.txt"``, ``"tool:search"``).
        args: the arguments it would run with. Never mutated by the gate.
    """

    agent: str
    verb: str
    resource: str
    args: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Decision:
    """The gate's verdict on one action, as recorded in the audit log.

    Attributes:
        verdict: the runtime verdict.
        args: the arguments to execute with: narrowed and/or scrubbed; ``{}``
            for ``deny``; for ``pending``, what will run if approved.
        decision_id: a UUIDv7, unique per decision.
        reason: a sentence for humans (never holds argument values).
        matched_policy: the id of the rule that determined the verdict, or None
            (policy default, a blocking detector, an error).
        policy_id: the policy's id.
        policy_sha256: the policy's content address.
        trace_id: W3C trace id (32 lowercase hex digits).
        span_id: this decision's span id (16 lowercase hex digits).
        traceparent: the header to propagate downstream of this decision.
        tracestate: the validated tracestate to propagate, or None.
        trace_origin: where the trace came from.
        latency_ns: monotonic nanoseconds from gate entry to verdict (the audit
            write is not included).
        stamp_ns: wall-clock time of the verdict.
        assessment_sha256: content address of the assessment record it rests on.
        decision_sha256: content address of the decision record itself.
    """

    verdict: RuntimeVerdict
    args: Mapping[str, Any]
    decision_id: str
    reason: str
    matched_policy: str | None
    policy_id: str
    policy_sha256: str
    trace_id: str
    span_id: str
    traceparent: str
    tracestate: str | None
    trace_origin: TraceOrigin
    latency_ns: int
    stamp_ns: int
    assessment_sha256: str | None
    decision_sha256: str

    @property
    def permitted(self) -> bool:
        """Whether the action may run now (``allow``, ``narrow`` or ``scrub``)."""
        return self.verdict in (RuntimeVerdict.ALLOW, RuntimeVerdict.NARROW, RuntimeVerdict.SCRUB)
