"""The gate: times, traces, derives and records one decision per action (SPEC §3).

Order inside `Gate.check`: read the monotonic clock; resolve the trace
context; derive the verdict (any exception → ``deny``, ADR 0002); read the
clock again (that difference is ``latency_ns``); end the span; then write the
assessment and the decision to the sink. A sink failure raises `AuditError`:
the caller gets no decision, so the action cannot run unaudited.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping
from typing import Any, Final

from opentelemetry.trace import TracerProvider

from runtime._action import Action, Decision
from runtime._canonical import value_sha256
from runtime._clock import Clock, SystemClock
from runtime._derivation import Outcome, derive, safe_reason
from runtime._errors import ActionDenied, ApprovalPending, AuditError
from runtime._ids import make_uuid7
from runtime._logging import get_event_log
from runtime._policy import Policy
from runtime._scrub import Scrubber
from runtime._sink import AuditSink, RunStart
from runtime._tracing import DecisionTrace, Tracing
from runtime._verdict import RuntimeVerdict
from runtime._version import SDK_VERSION

__all__ = ["Gate"]

ASSESSMENT_TOPIC: Final = "/assessments"
DECISION_TOPIC: Final = "/decisions"
_log = get_event_log("ghost.gate")


class Gate:
    """The policy-query gate an agent loop calls before each action.

    Args:
        policy: the policy every decision is derived from.
        sink: where the gate's records go (`audit.McapAuditSink`,
            `audit.MemoryAuditSink`, or any `AuditSink`). Required: an action
            that cannot be audited does not run.
        clock: monotonic and wall clocks (default: the system's).
        tracer_provider: the OpenTelemetry provider for the gate's spans
            (default: the global one, honoured even if configured later).
        fingerprint_key: HMAC key for the fingerprints of scrubbed secrets
            (default: 32 random bytes per gate, so fingerprints correlate
            within a run but not across runs).

    Raises:
        AuditError: the sink could not begin the run.
    """

    __slots__ = ("_clock", "_policy", "_scrubber", "_sink", "_tracing")

    def __init__(
        self,
        policy: Policy,
        *,
        sink: AuditSink,
        clock: Clock | None = None,
        tracer_provider: TracerProvider | None = None,
        fingerprint_key: bytes | None = None,
    ) -> None:
        self._policy = policy
        self._sink = sink
        self._clock: Clock = clock if clock is not None else SystemClock()
        self._tracing = Tracing(tracer_provider)
        settings = policy.scrub
        self._scrubber = Scrubber(
            detectors=settings.detectors,
            block=settings.block,
            fingerprint_key=fingerprint_key if fingerprint_key is not None else os.urandom(32),
            max_depth=settings.max_depth,
            max_bytes=settings.max_bytes,
        )
        run = RunStart(
            policy_id=policy.policy_id,
            policy_sha256=policy.policy_sha256,
            policy_source=policy.source,
            policy_source_name=policy.source_name,
            policy_source_media_type=policy.source_media_type,
            policy_source_sha256=policy.source_sha256,
            sdk_version=SDK_VERSION,
            stamp_ns=self._clock.time_ns(),
        )
        try:
            sink.open_run(run)
        except AuditError:
            raise
        except Exception as exc:
            raise AuditError(
                f"the audit sink could not begin the run ({type(exc).__name__})"
            ) from exc

    @property
    def policy(self) -> Policy:
        """The policy this gate enforces."""
        return self._policy

    def check(
        self, action: Action, *, traceparent: str | None = None, tracestate: str | None = None
    ) -> Decision:
        """Decide on ``action`` and record the decision before returning it.

        Never raises for a policy outcome: read ``decision.verdict``.

        Args:
            action: what the agent is about to do.
            traceparent: the incoming W3C ``traceparent`` header, if any.
            tracestate: the incoming W3C ``tracestate`` header, if any.

        Raises:
            TypeError: ``action`` is not an `Action` (misuse, not a policy outcome).
            AuditError: the decision could not be recorded; the action must not run.
        """
        if not isinstance(action, Action):
            raise TypeError(f"Gate.check takes an Action, not {type(action).__name__}")
        clock = self._clock
        start_ns = clock.monotonic_ns()
        stamp_ns = clock.time_ns()
        decision_id = make_uuid7(stamp_ns)
        trace = self._tracing.begin(traceparent, tracestate)
        errors: list[str] = []
        stage_ns = {"policy": 0, "narrow": 0, "scrub": 0}
        args_sha256: str | None = None
        executed_sha256: str | None = None
        try:
            outcome = derive(
                self._policy,
                self._scrubber,
                action.agent,
                action.verb,
                action.resource,
                action.args,
                clock.monotonic_ns,
                stage_ns,
            )
            if outcome.verdict is not RuntimeVerdict.DENY:
                # Part of deciding: what cannot be addressed cannot be approved or audited.
                args_sha256 = value_sha256(action.args)
                # Every change is a narrowing or a finding; without either the
                # arguments that run are the ones that came in.
                unchanged = not outcome.narrowings and not outcome.findings
                executed_sha256 = args_sha256 if unchanged else value_sha256(outcome.args)
        except Exception as exc:  # noqa: BLE001 - fail closed: any doubt becomes a recorded deny
            errors.append(type(exc).__name__)
            outcome = Outcome(RuntimeVerdict.DENY, safe_reason(exc), None, {}, (), (), (), stage_ns)
            executed_sha256 = None
        latency_ns = clock.monotonic_ns() - start_ns
        verdict_stamp_ns = clock.time_ns()
        self._end_span(trace, outcome, decision_id)
        if trace.rejected is not None:
            _log.warning("ghost.traceparent_rejected", decision_id=decision_id, why=trace.rejected)
        return self._record(
            action,
            decision_id,
            (stamp_ns, verdict_stamp_ns, latency_ns),
            trace,
            outcome,
            (args_sha256, executed_sha256),
            errors,
        )

    async def acheck(
        self, action: Action, *, traceparent: str | None = None, tracestate: str | None = None
    ) -> Decision:
        """The asyncio twin of `check`: runs it in a worker thread so the loop never blocks.

        The current context (and so the current OpenTelemetry span) is carried over.

        Raises:
            AuditError: the decision could not be recorded; the action must not run.
        """
        return await asyncio.to_thread(
            self.check, action, traceparent=traceparent, tracestate=tracestate
        )

    def enforce(
        self, action: Action, *, traceparent: str | None = None, tracestate: str | None = None
    ) -> Decision:
        """`check`, raising for the verdicts under which the action must not run now.

        Returns:
            the decision, when its verdict is ``allow``, ``narrow`` or ``scrub``.

        Raises:
            ActionDenied: the verdict is ``deny``.
            ApprovalPending: the verdict is ``pending``.
            AuditError: the decision could not be recorded.
        """
        decision = self.check(action, traceparent=traceparent, tracestate=tracestate)
        if decision.verdict is RuntimeVerdict.DENY:
            raise ActionDenied(decision)
        if decision.verdict is RuntimeVerdict.PENDING:
            raise ApprovalPending(decision)
        return decision

    @staticmethod
    def _end_span(trace: DecisionTrace, outcome: Outcome, decision_id: str) -> None:
        span = trace.span
        if span.is_recording():
            span.set_attribute("ghost.decision_id", decision_id)
            span.set_attribute("ghost.verdict", outcome.verdict.value)
            if outcome.matched_policy is not None:
                span.set_attribute("ghost.matched_policy", outcome.matched_policy)
            span.set_attribute("ghost.trace_origin", trace.origin)
        span.end()

    def _recorded_text(self, value: object) -> str:
        # The log keeps agent/verb/resource scrubbed: `mail:{to}` can carry an address.
        if not isinstance(value, str):
            return f"<not a string: {type(value).__name__}>"
        try:
            return self._scrubber.scrub_text(value)[0]
        except Exception as exc:  # noqa: BLE001 - oversized text: keep its size, not its content
            return f"<unrecordable text: {type(exc).__name__}, {len(value)} characters>"

    def _record(
        self,
        action: Action,
        decision_id: str,
        times_ns: tuple[int, int, int],
        trace: DecisionTrace,
        outcome: Outcome,
        hashes: tuple[str | None, str | None],
        errors: list[str],
    ) -> Decision:
        stamp_ns, verdict_stamp_ns, latency_ns = times_ns
        args_sha256, executed_sha256 = hashes
        policy = self._policy
        if args_sha256 is None:  # a deny: the arguments were not hashed while deciding
            try:
                args_sha256 = value_sha256(action.args)
            except Exception as exc:  # noqa: BLE001 - an unhashable payload is recorded as such
                if type(exc).__name__ not in errors:
                    errors.append(type(exc).__name__)
        executed: Mapping[str, Any] = outcome.args
        assessment = {
            "schema": "ghost.assessment/1",
            "stamp_ns": stamp_ns,
            "decision_id": decision_id,
            "agent": self._recorded_text(action.agent),
            "verb": self._recorded_text(action.verb),
            "resource": self._recorded_text(action.resource),
            "args_sha256": args_sha256,
            "policy_id": policy.policy_id,
            "policy_sha256": policy.policy_sha256,
            "matched_rules": [{"id": r.id, "effect": r.effect.value} for r in outcome.matched],
            "findings": [
                {"detector": f.detector, "path": f.path, "fingerprint": f.fingerprint}
                for f in outcome.findings
            ],
            "narrowings": [
                {"rule": rule, "kind": kind, "path": self._recorded_text(path)}
                for rule, kind, path in outcome.narrowings
            ],
            "errors": errors,
            "stage_ns": dict(outcome.stage_ns),
            "trace_id": trace.trace_id,
            "span_id": trace.span_id,
            "parent_span_id": trace.parent_span_id,
        }
        try:
            assessment_sha256 = self._sink.append(ASSESSMENT_TOPIC, assessment)
            record = {
                "schema": "ghost.decision/1",
                "stamp_ns": verdict_stamp_ns,
                "decision_id": decision_id,
                "verdict": outcome.verdict.value,
                "reason": outcome.reason,
                "matched_policy": outcome.matched_policy,
                "policy_id": policy.policy_id,
                "policy_sha256": policy.policy_sha256,
                "assessment_sha256": assessment_sha256,
                "trace_id": trace.trace_id,
                "span_id": trace.span_id,
                "trace_origin": trace.origin,
                "latency_ns": latency_ns,
                "executed_args_sha256": executed_sha256,
            }
            decision_sha256 = self._sink.append(DECISION_TOPIC, record)
        except Exception as exc:
            _log.error("ghost.audit_failed", decision_id=decision_id, error=type(exc).__name__)
            if isinstance(exc, AuditError):
                raise
            raise AuditError(
                f"decision {decision_id} could not be recorded ({type(exc).__name__});"
                " the action must not run"
            ) from exc
        return Decision(
            verdict=outcome.verdict,
            args=executed,
            decision_id=decision_id,
            reason=outcome.reason,
            matched_policy=outcome.matched_policy,
            policy_id=policy.policy_id,
            policy_sha256=policy.policy_sha256,
            trace_id=trace.trace_id,
            span_id=trace.span_id,
            traceparent=trace.traceparent,
            tracestate=trace.tracestate,
            trace_origin=trace.origin,
            latency_ns=latency_ns,
            stamp_ns=verdict_stamp_ns,
            assessment_sha256=assessment_sha256,
            decision_sha256=decision_sha256,
        )
