"""The gate: snapshots, traces, derives and records one decision per action (SPEC §3).

Order inside `Gate.check`, all of it inside the fail-closed boundary:

1. read the clocks (gate entry; a clock that fails is itself a reason to deny);
2. resolve the trace context and start the span (`Tracing.begin`; if the
   host's OpenTelemetry SDK raises, `Tracing.fallback` and deny);
3. take the action's snapshot (`Snapshotter.take`) -- from here on nothing
   reads the caller's objects again;
4. derive the verdict from the snapshot (`derive`), and hash the snapshot
   and the arguments that will run;
5. read the clock again: that difference is ``latency_ns``;
6. end the span (a failure there denies too);
7. write the assessment and the decision to the sink. A sink failure raises
   `AuditError`: the caller gets no decision, so the action cannot run unaudited.

Any exception in 1-6 becomes a recorded ``deny`` whose reason names the
error's type (and, for an `EvaluationError`, ghost's own message about it);
no exception message of anyone else's is ever recorded.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final

from opentelemetry.trace import TracerProvider

from runtime._action import Action, Decision
from runtime._canonical import value_sha256
from runtime._clock import Clock, SystemClock
from runtime._derivation import Outcome, derive, safe_reason
from runtime._errors import ActionDenied, ApprovalPending, AuditError
from runtime._guard import F, ResourceFunction, guard
from runtime._ids import make_uuid7
from runtime._logging import get_event_log
from runtime._policy import Policy
from runtime._recorded import RecordedText, type_name
from runtime._scrub import Scrubber
from runtime._sink import AuditSink, RunStart
from runtime._snapshot import ActionSnapshot, Snapshotter, ToData
from runtime._tracing import DecisionTrace, Tracing
from runtime._verdict import RuntimeVerdict
from runtime._version import SDK_VERSION

__all__ = ["Gate"]

ASSESSMENT_TOPIC: Final = "/assessments"
DECISION_TOPIC: Final = "/decisions"
DEFAULT_MAX_NAME_CHARS: Final = 4096
_log = get_event_log("ghost.gate")

# Read straight from Action's slots, so that a subclass's properties never run.
_ACTION_FIELDS: Final = tuple(
    Action.__dict__[name] for name in ("agent", "verb", "resource", "args")
)


@dataclass(frozen=True, slots=True)
class _Times:
    """The clock readings of one check."""

    stamp_ns: int  # wall clock at entry: the assessment's stamp
    verdict_stamp_ns: int  # wall clock at the verdict: the decision's stamp
    latency_ns: int  # monotonic, entry -> verdict


@dataclass(frozen=True, slots=True)
class _Hashes:
    """The content addresses a decision rests on (None where there is nothing to address)."""

    args_sha256: str | None  # the snapshot of the arguments that came in
    executed_sha256: str | None  # the arguments that run (None for deny)


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
        to_data: converts the host's own argument types (a pydantic model, a
            dataclass) to plain data; called once per value that is not plain
            data (SPEC §3). Without it such a value denies.
        max_name_chars: the longest agent, verb or resource accepted (4,096).

    Raises:
        AuditError: the sink could not begin the run.
        ValueError: ``max_name_chars`` is not a positive integer.
        TypeError: ``to_data`` is not callable.
    """

    __slots__ = (
        "_clock",
        "_policy",
        "_recorded",
        "_scrubber",
        "_sink",
        "_snapshotter",
        "_tracing",
    )

    def __init__(
        self,
        policy: Policy,
        *,
        sink: AuditSink,
        clock: Clock | None = None,
        tracer_provider: TracerProvider | None = None,
        fingerprint_key: bytes | None = None,
        to_data: ToData | None = None,
        max_name_chars: int = DEFAULT_MAX_NAME_CHARS,
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
        self._snapshotter = Snapshotter(
            max_name_chars=max_name_chars,
            max_depth=settings.max_depth,
            max_bytes=settings.max_bytes,
            to_data=to_data,
        )
        # What the log keeps of outside text is scrubbed by every detector, whatever
        # the policy lists (SPEC §4); `record_text` never raises.
        self._recorded = RecordedText(self._scrubber.record_text, max_chars=max_name_chars)
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

        Never raises for a policy outcome, nor for anything in the action or
        the headers: read ``decision.verdict``.

        Args:
            action: what the agent is about to do.
            traceparent: the incoming W3C ``traceparent`` header, if any.
            tracestate: the incoming W3C ``tracestate`` header, if any.

        Raises:
            TypeError: ``action`` is not an `Action` (misuse, not a policy outcome).
            AuditError: the decision could not be recorded; the action must not run.
        """
        if not isinstance(action, Action):
            raise TypeError(f"Gate.check takes an Action, not {type_name(action)}")
        errors: list[str] = []
        start_ns, stamp_ns = self._read_clock(errors)
        decision_id = make_uuid7(stamp_ns)
        stage_ns = {"policy": 0, "narrow": 0, "scrub": 0}
        fields: tuple[object, ...] = ()
        snapshot: ActionSnapshot | None = None
        args_sha256: str | None = None
        executed_sha256: str | None = None
        trace: DecisionTrace | None = None
        try:
            if errors:
                raise _ClockFailure
            try:
                trace = self._tracing.begin(traceparent, tracestate)
            except Exception as exc:
                raise _HostFailure("starting the decision's span") from exc
            fields = tuple(descriptor.__get__(action) for descriptor in _ACTION_FIELDS)
            snapshot = self._snapshotter.take(*fields)
            args_sha256 = value_sha256(snapshot.args)
            outcome = derive(
                self._policy, self._scrubber, snapshot, self._clock.monotonic_ns, stage_ns
            )
            if outcome.verdict is not RuntimeVerdict.DENY:
                # Part of deciding: what cannot be addressed cannot be approved or audited.
                same = outcome.args is snapshot.args
                executed_sha256 = args_sha256 if same else value_sha256(outcome.args)
        except Exception as exc:  # noqa: BLE001 - fail closed: any doubt becomes a recorded deny
            outcome = self._denied(exc, stage_ns, errors)
            executed_sha256 = None
        if trace is None:
            trace = self._tracing.fallback(traceparent)
        end_ns, verdict_stamp_ns = self._read_clock(errors)
        latency_ns = max(0, end_ns - start_ns)
        for stage, spent in stage_ns.items():
            if type(spent) is not int or spent < 0:  # a clock that went wrong mid-check
                stage_ns[stage] = 0
                if "ClockError" not in errors:
                    errors.append("ClockError")
        try:
            try:
                self._end_span(trace, outcome, decision_id)
            except Exception as exc:
                raise _HostFailure("ending the decision's span") from exc
        except _HostFailure as failure:  # the host's span processor failed: deny
            outcome = self._denied(failure, stage_ns, errors)
            executed_sha256 = None
        if trace.rejected is not None:
            _log.warning("ghost.traceparent_rejected", decision_id=decision_id, why=trace.rejected)
        return self._record(
            snapshot,
            fields,
            decision_id,
            _Times(stamp_ns, max(verdict_stamp_ns, stamp_ns), latency_ns),
            trace,
            outcome,
            _Hashes(args_sha256, executed_sha256),
            errors,
        )

    async def acheck(
        self, action: Action, *, traceparent: str | None = None, tracestate: str | None = None
    ) -> Decision:
        """The asyncio twin of `check`: runs it in a worker thread so the loop never blocks.

        The current context (and so the current OpenTelemetry span) is carried over.

        Raises:
            TypeError: ``action`` is not an `Action`.
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

    # -- inside a check -------------------------------------------------------------------

    def _read_clock(self, errors: list[str]) -> tuple[int, int]:
        """Read (monotonic, wall) from the gate's clock; on failure, the system's, and say so."""
        try:
            monotonic_ns = self._clock.monotonic_ns()
            wall_ns = self._clock.time_ns()
            if type(monotonic_ns) is int and type(wall_ns) is int and wall_ns >= 0:
                return monotonic_ns, wall_ns
            name = "ClockError"
        except Exception as exc:  # noqa: BLE001 - a broken clock denies; it never escapes
            name = self._recorded(type_name(exc))
        if name not in errors:
            errors.append(name)
        return time.monotonic_ns(), time.time_ns()

    def _denied(
        self, exc: BaseException, stage_ns: Mapping[str, int], errors: list[str]
    ) -> Outcome:
        """The outcome of a check that failed: ``deny``, naming the error (scrubbed)."""
        if isinstance(exc, _ClockFailure):
            reason = "denied: the gate's clock failed"
        else:
            if isinstance(exc, _HostFailure) and exc.__cause__ is not None:
                cause = exc.__cause__
                reason = f"denied: {exc.what} failed ({type_name(cause)})"
            else:
                cause = exc
                reason = safe_reason(exc, type_name(exc))
            name = self._recorded(type_name(cause))
            if name not in errors:
                errors.append(name)
        return Outcome(RuntimeVerdict.DENY, self._recorded(reason), None, {}, (), (), (), stage_ns)

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

    def _record(
        self,
        snapshot: ActionSnapshot | None,
        fields: tuple[object, ...],
        decision_id: str,
        times: _Times,
        trace: DecisionTrace,
        outcome: Outcome,
        hashes: _Hashes,
        errors: list[str],
    ) -> Decision:
        policy = self._policy
        recorded = self._recorded
        if snapshot is not None:
            names: tuple[object, ...] = (snapshot.agent, snapshot.verb, snapshot.resource)
        elif fields:
            names = fields[:3]
        else:  # the check failed before the action was read
            names = ("", "", "")
        assessment = {
            "schema": "ghost.assessment/1",
            "stamp_ns": times.stamp_ns,
            "decision_id": decision_id,
            "agent": recorded(names[0]),
            "verb": recorded(names[1]),
            "resource": recorded(names[2]),
            "args_sha256": hashes.args_sha256,
            "policy_id": policy.policy_id,
            "policy_sha256": policy.policy_sha256,
            "matched_rules": [{"id": r.id, "effect": r.effect.value} for r in outcome.matched],
            "findings": [
                {"detector": f.detector, "path": f.path, "fingerprint": f.fingerprint}
                for f in outcome.findings
            ],
            "narrowings": [
                {"rule": rule, "kind": kind, "path": recorded(path)}
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
                "stamp_ns": times.verdict_stamp_ns,
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
                "latency_ns": times.latency_ns,
                "executed_args_sha256": hashes.executed_sha256,
            }
            decision_sha256 = self._sink.append(DECISION_TOPIC, record)
        except Exception as exc:
            _log.error("ghost.audit_failed", decision_id=decision_id, error=type_name(exc))
            if isinstance(exc, AuditError):
                raise
            raise AuditError(
                f"decision {decision_id} could not be recorded ({type_name(exc)});"
                " the action must not run"
            ) from exc
        return Decision(
            verdict=outcome.verdict,
            args=outcome.args,
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
            latency_ns=times.latency_ns,
            stamp_ns=times.verdict_stamp_ns,
            assessment_sha256=assessment_sha256,
            decision_sha256=decision_sha256,
        )

    def guard(self, *, verb: str, resource: str | ResourceFunction, agent: str) -> Callable[[F], F]:
        """Decorate a sync or async tool function so that each call is gated (`runtime._guard`).

        ``@gate.guard(verb="send", resource="mail:{to}", agent="mailer")``: each
        call is checked (``acheck`` for a coroutine function) and, if permitted,
        runs with ``decision.args``; ``deny`` raises `ActionDenied`, ``pending``
        `ApprovalPending`. See `runtime._guard.guard` for the rules.

        Raises:
            GuardError: the resource or names cannot be used as declared.
        """
        return guard(self, verb=verb, resource=resource, agent=agent)


class _ClockFailure(Exception):
    """The gate's clock failed at entry (the failure itself is already in ``errors``)."""


class _HostFailure(Exception):
    """Code of the host's (its OpenTelemetry SDK's span processors) raised; the cause says what."""

    def __init__(self, what: str) -> None:
        self.what = what
        super().__init__(what)
