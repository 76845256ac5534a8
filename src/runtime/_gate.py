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
6a. with a shadow (``Gate(shadow=...)`` or shadow rules, ADR 0031), derive the
   shadow verdict from the same snapshot (`Shadow.evaluate`, which never
   raises): the enforced outcome is final by then, and ``latency_ns`` is the
   time to it;
7. write the assessment and the decision to the sink. A sink failure raises
   `AuditError`: the caller gets no decision, so the action cannot run unaudited;
8. for ``pending``, register the decision (by its content address) with the
   approval queue's store. If that fails the caller gets `AuditError` too: a
   held action nobody can approve must not look resolvable (ADR 0016).

A policy with limited rules (ADR 0032) reads and reserves its budgets in
step 4 (`runtime._budget`); after step 7 the reservation is settled: spent
if the recorded verdict runs, released if it denies or nothing was
recorded, held for ``pending`` until the approval is settled.

Before step 1, each check lets the approval queue record due expiries and
resolutions made elsewhere (`ApprovalQueue.sweep`).

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
from typing import Final, Literal

from opentelemetry.trace import TracerProvider

from runtime._action import Action, Decision
from runtime._approval import Approval, approval_terms
from runtime._approval_queue import ApprovalQueue
from runtime._approval_store import ApprovalStore, MemoryApprovalStore, PendingApproval
from runtime._backend import PolicyBackend
from runtime._budget import Budgets, LimitCheck, limit_records
from runtime._canonical import jcs_bytes, value_sha256
from runtime._clock import Clock, SystemClock
from runtime._counter_store import CounterStore, MemoryCounterStore
from runtime._derivation import Outcome, derive, safe_reason
from runtime._errors import ActionDenied, ApprovalPending, AuditError
from runtime._guard import F, ResourceFunction, guard
from runtime._ids import make_uuid7
from runtime._logging import get_event_log
from runtime._recorded import RecordedText, type_name
from runtime._scrub import Scrubber
from runtime._shadow_mode import Shadow, make_shadow
from runtime._sink import AppendPair, AuditSink, RunStart, ShadowPolicy
from runtime._snapshot import ActionSnapshot, Snapshotter, ToData
from runtime._tracing import DecisionTrace, Tracing, span_attributes
from runtime._verdict import RuntimeVerdict
from runtime._version import SDK_VERSION

__all__ = ["Gate"]

ASSESSMENT_TOPIC: Final = "/assessments"
DECISION_TOPIC: Final = "/decisions"
DEFAULT_MAX_NAME_CHARS: Final = 4096
DEFAULT_APPROVAL_POLL_S: Final = 0.2
_MAX_POLL_S: Final = 60.0
_INT64_MAX: Final = 2**63 - 1
ARGUMENTS_ATTRIBUTE: Final = "gen_ai.tool.call.arguments"
MAX_RECORDED_ARGS_BYTES: Final = 64 * 1024
"""Largest scrubbed-arguments text an assessment stores (``record_args="scrubbed"``)."""
RecordArgs = Literal["none", "scrubbed"]
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
    verdict_ns: int  # monotonic at the verdict: where an approval's wait_ns starts


@dataclass(frozen=True, slots=True)
class _Names:
    """The action's agent, verb and resource in the escaped, scrubbed form the log keeps."""

    agent: str
    verb: str
    resource: str


class _Off:
    """``record_args="none"``: the assessment has no ``args_scrubbed`` key at all."""


_OFF: Final = _Off()


@dataclass(frozen=True, slots=True)
class _Hashes:
    """The content addresses a decision rests on (None where there is nothing to address)."""

    args_sha256: str | None  # the snapshot of the arguments that came in
    executed_sha256: str | None  # the arguments that run (None for deny)
    # record_args="scrubbed": the stored text (None: not storable); absent when off
    args_scrubbed: str | _Off | None = _OFF


class Gate:
    """The policy-query gate an agent loop calls before each action.

    Args:
        policy: the policy every decision is derived from: a `Policy` (TOML) or
            any other `PolicyBackend` (`CedarPolicy`). Chosen here, once: each
            check asks that backend for its matching rules, and derives the
            verdict from them the same way for every backend (ADR 0028).
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
        approvals: where pending decisions wait for a human (default: a fresh
            `MemoryApprovalStore`; a `SqliteApprovalStore` survives restarts and
            lets another process resolve). Reached as `approvals`.
        approval_poll_s: how often waiters (and the gate) look at the store for
            resolutions made by another process (default 0.2 s).
        span_arguments: opt in to the arguments on the decision's span
            (``gen_ai.tool.call.arguments``): the arguments that run, as
            canonical JSON scrubbed by every detector and bounded like the
            log's text; never for ``deny``. Off by default: no argument value
            reaches a span attribute (SPEC §7).
        counters: where the budgets of limited rules are counted (default: a
            fresh `MemoryCounterStore`; a `SqliteCounterStore` survives restarts
            and is shared by the processes of a host). Reached as `counters`.
        shadow: a candidate `PolicyBackend` evaluated beside ``policy`` on every
            action and never enforced (ADR 0031): its verdict, determining rule
            and hash go into the assessment's ``shadow`` object, and its source
            is attached to the run. Without it, a policy's own ``shadow = true``
            rules are what is shadowed; with it, they are not recorded.
        record_args: ``"none"`` (the default): an assessment holds the
            arguments' hash only. ``"scrubbed"``: it also holds them, as the
            RFC 8785 JSON text of the arguments that came in scrubbed by every
            detector, exemptions ignored (``args_scrubbed``; null when that
            text would exceed `MAX_RECORDED_ARGS_BYTES`, or cannot be made or
            scrubbed), so that ``ghost policy replay`` can re-evaluate the
            action's conditions. Never raw values (SPEC §5; ADR 0033).

    If the sink offers ``on_close(callback)`` (both of ``audit``'s sinks do), the
    gate registers its approval queue there, so that expiries due by then are
    recorded before the run is sealed.

    Raises:
        AuditError: the sink could not begin the run, or a resolution the store
            held unrecorded (from an earlier run) could not be recorded.
        ValueError: ``max_name_chars`` is not a positive integer, or
            ``approval_poll_s`` is not a positive finite number of seconds.
        TypeError: ``policy`` or ``shadow`` is not a `PolicyBackend`, ``to_data`` is not
            callable, ``approvals`` is not an `ApprovalStore`, ``counters`` is not a
            `CounterStore`, or ``span_arguments`` is not a bool.
        ValueError: ``record_args`` is neither ``"none"`` nor ``"scrubbed"``.
    """

    __slots__ = (
        "_append_pair",
        "_approvals",
        "_args_scrubber",
        "_budgets",
        "_clock",
        "_limited",
        "_policy",
        "_recorded",
        "_scrubber",
        "_shadow",
        "_sink",
        "_snapshotter",
        "_span_arguments",
        "_tracing",
    )

    def __init__(
        self,
        policy: PolicyBackend,
        *,
        sink: AuditSink,
        clock: Clock | None = None,
        tracer_provider: TracerProvider | None = None,
        fingerprint_key: bytes | None = None,
        to_data: ToData | None = None,
        max_name_chars: int = DEFAULT_MAX_NAME_CHARS,
        approvals: ApprovalStore | None = None,
        approval_poll_s: float = DEFAULT_APPROVAL_POLL_S,
        span_arguments: bool = False,
        counters: CounterStore | None = None,
        shadow: PolicyBackend | None = None,
        record_args: RecordArgs = "none",
    ) -> None:
        if (
            type(approval_poll_s) not in (int, float)
            or not 0 < approval_poll_s <= _MAX_POLL_S  # NaN fails this too
        ):
            raise ValueError(
                f"approval_poll_s must be a number of seconds in (0, {_MAX_POLL_S}],"
                f" not {approval_poll_s!r}"
            )
        if not isinstance(policy, PolicyBackend):
            raise TypeError(f"policy must be a PolicyBackend, not {type_name(policy)}")
        store: ApprovalStore = MemoryApprovalStore() if approvals is None else approvals
        if not isinstance(store, ApprovalStore):
            raise TypeError(f"approvals must be an ApprovalStore, not {type_name(store)}")
        if type(span_arguments) is not bool:
            raise TypeError(
                f"span_arguments must be True or False, not {type_name(span_arguments)}"
            )
        counter_store: CounterStore = MemoryCounterStore() if counters is None else counters
        if not isinstance(counter_store, CounterStore):
            raise TypeError(f"counters must be a CounterStore, not {type_name(counter_store)}")
        choice: object = record_args  # the annotation is a promise the caller may break
        if type(choice) is not str or choice not in ("none", "scrubbed"):
            raise ValueError(f"record_args must be 'none' or 'scrubbed', not {record_args!r}")
        self._span_arguments = span_arguments
        self._policy = policy
        self._sink = sink
        pair = getattr(sink, "append_pair", None)
        self._append_pair: AppendPair | None = pair if callable(pair) else None
        self._clock: Clock = clock if clock is not None else SystemClock()
        self._tracing = Tracing(tracer_provider)
        settings = policy.scrub
        key = fingerprint_key if fingerprint_key is not None else os.urandom(32)
        self._scrubber = Scrubber(
            detectors=settings.detectors,
            block=settings.block,
            fingerprint_key=key,
            max_depth=settings.max_depth,
            max_bytes=settings.max_bytes,
        )
        self._snapshotter = Snapshotter(
            max_name_chars=max_name_chars,
            max_depth=settings.max_depth,
            max_bytes=settings.max_bytes,
            to_data=to_data,
        )
        # The stored copy of the arguments (opt-in) is scrubbed by every detector,
        # exemptions ignored: a scrub_exempt field reaches the tool, not the log.
        self._args_scrubber: Scrubber | None = (
            Scrubber(
                fingerprint_key=os.urandom(32),
                max_depth=settings.max_depth,
                max_bytes=settings.max_bytes,
            )
            if record_args == "scrubbed"
            else None
        )
        # What the log keeps of outside text is scrubbed by every detector, whatever
        # the policy lists (SPEC §4); `record_text` never raises.
        self._recorded = RecordedText(self._scrubber.record_text, max_chars=max_name_chars)
        self._budgets = Budgets(
            policy.policy_id, counter_store, self._clock, self._scrubber.fingerprint
        )
        self._limited = any(rule.limit is not None for rule in policy.rules)
        self._shadow: Shadow | None = make_shadow(
            policy,
            shadow,
            scrubber=self._scrubber,
            fingerprint_key=key,
            recorded=self._recorded,
            now_ns=self._clock.monotonic_ns,
            budgets=lambda namespace: Budgets(
                namespace, counter_store, self._clock, self._scrubber.fingerprint
            ),
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
            shadow=None
            if shadow is None
            else ShadowPolicy(
                policy_id=shadow.policy_id,
                policy_sha256=shadow.policy_sha256,
                source=shadow.source,
                source_name=shadow.source_name,
                source_media_type=shadow.source_media_type,
                source_sha256=shadow.source_sha256,
            ),
        )
        try:
            sink.open_run(run)
        except AuditError:
            raise
        except Exception as exc:
            raise AuditError(
                f"the audit sink could not begin the run ({type(exc).__name__})"
            ) from exc
        run_id = getattr(sink, "run_id", None)
        self._approvals = ApprovalQueue(
            store=store,
            sink=sink,
            clock=self._clock,
            policy_sha256=policy.policy_sha256,
            snapshotter=self._snapshotter,
            recorded=self._recorded,
            run_id=run_id if isinstance(run_id, str) else None,
            poll_s=float(approval_poll_s),
            # A pending decision's budget is spent when approved, released otherwise.
            on_settled=self._settle_budget if self._limited or counters is not None else None,
        )
        on_close = getattr(sink, "on_close", None)
        if callable(on_close):
            on_close(self._approvals.close_hook)

    @property
    def policy(self) -> PolicyBackend:
        """The policy this gate enforces."""
        return self._policy

    @property
    def counters(self) -> CounterStore:
        """Where this gate counts the budgets of limited rules (ADR 0032)."""
        return self._budgets.store

    @property
    def shadow(self) -> PolicyBackend | None:
        """What this gate evaluates in shadow: the candidate, the policy with its shadow
        rules enforced, or None (ADR 0031)."""
        return None if self._shadow is None else self._shadow.backend

    @property
    def approvals(self) -> ApprovalQueue:
        """The approval queue: resolve, wait for and execute ``pending`` decisions (SPEC §3)."""
        return self._approvals

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
            AuditError: the decision could not be recorded, or (for ``pending``)
                could not be registered for approval; the action must not run.
                Also raised when an approval due to be recorded first cannot be.
        """
        if not isinstance(action, Action):
            raise TypeError(f"Gate.check takes an Action, not {type_name(action)}")
        self._approvals.sweep()
        errors: list[str] = []
        start_ns, stamp_ns = self._read_clock(errors)
        decision_id = make_uuid7(stamp_ns)
        stage_ns = {"policy": 0, "narrow": 0, "scrub": 0}
        fields: tuple[object, ...] = ()
        snapshot: ActionSnapshot | None = None
        args_sha256: str | None = None
        executed_sha256: str | None = None
        trace: DecisionTrace | None = None
        limit_check = self._budgets.bind(decision_id) if self._limited else None
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
                self._policy,
                self._scrubber,
                snapshot,
                self._clock.monotonic_ns,
                stage_ns,
                limit_check,
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
        names = self._names(snapshot, fields)
        try:
            try:
                self._end_span(trace, outcome, decision_id, names)
            except Exception as exc:
                raise _HostFailure("ending the decision's span") from exc
        except _HostFailure as failure:  # the host's span processor failed: deny
            outcome = self._denied(failure, stage_ns, errors)
            executed_sha256 = None
        if trace.rejected is not None:
            _log.warning("ghost.traceparent_rejected", decision_id=decision_id, why=trace.rejected)
        stored: str | _Off | None = _OFF
        if self._args_scrubber is not None:
            stored = self._stored_args(self._args_scrubber, snapshot)
        shadow = (
            None
            if self._shadow is None
            else self._shadow.evaluate(snapshot, args_sha256, decision_id)
        )
        try:
            decision = self._record(
                names,
                decision_id,
                _Times(stamp_ns, max(verdict_stamp_ns, stamp_ns), latency_ns, end_ns),
                trace,
                outcome,
                _Hashes(args_sha256, executed_sha256, stored),
                errors,
                limit_check,
                shadow,
            )
        except BaseException:
            if limit_check is not None:  # nothing runs: release what was reserved
                limit_check.finish(None)
            raise
        if limit_check is not None:
            limit_check.finish(decision.verdict)
        return decision

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

    def _end_span(
        self, trace: DecisionTrace, outcome: Outcome, decision_id: str, names: _Names
    ) -> None:
        span = trace.span
        if span.is_recording():
            attributes = span_attributes(
                decision_id=decision_id,
                verdict=outcome.verdict,
                matched_policy=outcome.matched_policy,
                origin=trace.origin,
                policy_id=self._policy.policy_id,
                agent=names.agent,
                tool=names.verb,
            )
            if self._span_arguments and outcome.verdict is not RuntimeVerdict.DENY:
                attributes[ARGUMENTS_ATTRIBUTE] = self._arguments_text(outcome.args)
            span.set_attributes(attributes)
        span.end()

    def _arguments_text(self, args: Mapping[str, object]) -> str:
        """The opted-in arguments attribute: canonical JSON, scrubbed by every detector."""
        try:
            text = jcs_bytes(args).decode("utf-8")
        except Exception as exc:  # noqa: BLE001 - an attribute must not fail the check
            return f"<arguments not encodable: {type_name(exc)}>"
        return self._recorded(text)

    def _stored_args(self, scrubber: Scrubber, snapshot: ActionSnapshot | None) -> str | None:
        """The opted-in copy of the arguments: scrubbed JCS text, or None (never raises)."""
        if snapshot is None:
            return None
        try:
            data = jcs_bytes(scrubber.scrub(snapshot.args).value)
            if len(data) > MAX_RECORDED_ARGS_BYTES:
                return None
            text = data.decode("utf-8")
            # The JSON text once more, as a whole: nothing a detector finds is ever stored.
            if scrubber.record_text(text) != text:
                return None
        except Exception:  # noqa: BLE001 - a copy that cannot be made is not stored
            return None
        return text

    def _names(self, snapshot: ActionSnapshot | None, fields: tuple[object, ...]) -> _Names:
        """The action's names as the log keeps them: escaped, scrubbed (never raises)."""
        if snapshot is not None:
            raw: tuple[object, ...] = (snapshot.agent, snapshot.verb, snapshot.resource)
        elif fields:
            raw = fields[:3]
        else:  # the check failed before the action was read
            raw = ("", "", "")
        recorded = self._recorded
        return _Names(recorded(raw[0]), recorded(raw[1]), recorded(raw[2]))

    def _record(
        self,
        names: _Names,
        decision_id: str,
        times: _Times,
        trace: DecisionTrace,
        outcome: Outcome,
        hashes: _Hashes,
        errors: list[str],
        limit_check: LimitCheck | None = None,
        shadow: dict[str, object] | None = None,
    ) -> Decision:
        policy = self._policy
        recorded = self._recorded
        assessment = {
            "schema": "ghost.assessment/1",
            "stamp_ns": times.stamp_ns,
            "decision_id": decision_id,
            "agent": names.agent,
            "verb": names.verb,
            "resource": names.resource,
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
            **limit_records(limit_check),  # only for a check that asked a counter
        }
        if shadow is not None:  # only a shadowed gate's records have the key (ADR 0031)
            assessment["shadow"] = shadow
        if not isinstance(hashes.args_scrubbed, _Off):
            assessment["args_scrubbed"] = hashes.args_scrubbed

        def decision_record(assessment_sha256: str) -> dict[str, object]:
            return {
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

        try:
            if self._append_pair is not None:  # one write for both (ADR 0025)
                assessment_sha256, decision_sha256 = self._append_pair(
                    ASSESSMENT_TOPIC, assessment, DECISION_TOPIC, decision_record
                )
            else:
                assessment_sha256 = self._sink.append(ASSESSMENT_TOPIC, assessment)
                decision_sha256 = self._sink.append(
                    DECISION_TOPIC, decision_record(assessment_sha256)
                )
        except Exception as exc:
            _log.error("ghost.audit_failed", decision_id=decision_id, error=type_name(exc))
            if isinstance(exc, AuditError):
                raise
            raise AuditError(
                f"decision {decision_id} could not be recorded ({type_name(exc)});"
                " the action must not run"
            ) from exc
        if outcome.verdict is RuntimeVerdict.PENDING:
            self._hold(outcome, names, decision_id, decision_sha256, times, hashes)
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

    def _hold(
        self,
        outcome: Outcome,
        names: _Names,
        decision_id: str,
        decision_sha256: str,
        times: _Times,
        hashes: _Hashes,
    ) -> None:
        """Register a pending decision with the approval queue, or fail closed with AuditError.

        The log already holds the decision as ``pending``; if it cannot be
        registered no one can ever approve it, the caller gets no decision,
        and the report lists it as a pending decision never resolved.
        """
        try:
            terms = approval_terms(outcome.matched)
            if outcome.held is None or hashes.executed_sha256 is None:
                raise _HeldWithoutTerms
            pending = PendingApproval(
                decision_id=decision_id,
                decision_sha256=decision_sha256,
                run_id=self._approvals.run_id,
                agent=names.agent,
                verb=names.verb,
                resource=names.resource,
                reason=outcome.reason,
                matched_policy=outcome.matched_policy,
                held_verdict=outcome.held,
                executed_args_sha256=hashes.executed_sha256,
                policy_sha256=self._policy.policy_sha256,
                approvers=terms.approvers,
                created_ns=times.verdict_stamp_ns,
                expires_ns=min(_INT64_MAX, times.verdict_stamp_ns + terms.timeout_ns),
            )
            self._approvals.register(pending, times.verdict_ns)
        except Exception as exc:
            _log.error(
                "ghost.approval_registration_failed", decision_id=decision_id, error=type_name(exc)
            )
            raise AuditError(
                f"decision {decision_id} is pending but could not be registered for approval"
                f" ({type_name(exc)}); no one can approve it, and the action must not run"
            ) from exc

    def _settle_budget(self, approval: Approval) -> None:
        """A settled approval: its decision's reservation is spent if approved, else released."""
        self._budgets.settle(approval.decision_id, consumed=approval.outcome == "approved")

    def guard(
        self, *, verb: str, resource: str | ResourceFunction, agent: str, wait: bool = False
    ) -> Callable[[F], F]:
        """Decorate a sync or async tool function so that each call is gated (`runtime._guard`).

        ``@gate.guard(verb="send", resource="mail:{to}", agent="mailer")``: each
        call is checked (``acheck`` for a coroutine function) and, if permitted,
        runs with ``decision.args``; ``deny`` raises `ActionDenied`, ``pending``
        `ApprovalPending` -- or, with ``wait=True``, waits for the approval and
        runs once approved. See `runtime._guard.guard` for the rules.

        Raises:
            GuardError: the resource or names cannot be used as declared.
        """
        return guard(self, verb=verb, resource=resource, agent=agent, wait=wait)


class _HeldWithoutTerms(Exception):
    """A pending outcome without the verdict it holds or its arguments' hash (a bug)."""


class _ClockFailure(Exception):
    """The gate's clock failed at entry (the failure itself is already in ``errors``)."""


class _HostFailure(Exception):
    """Code of the host's (its OpenTelemetry SDK's span processors) raised; the cause says what."""

    def __init__(self, what: str) -> None:
        self.what = what
        super().__init__(what)
