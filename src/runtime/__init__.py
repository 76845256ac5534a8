"""ghost runtime: the policy gate an agent loop calls before each action.

Build a `Policy` once, a `Gate` around it and an audit sink, then ask the gate
before every action::

    gate = Gate(Policy.from_toml("policy.toml"), sink=audit.McapAuditSink("run.mcap"))
    decision = gate.check(Action(agent="researcher", verb="read", resource="file:/data/q3.txt"))
    if decision.permitted:
        run_tool(**decision.args)

A ``pending`` decision waits in ``gate.approvals`` (ADR 0016) until a human
resolves it (here, from another thread or through a shared store) or it expires::

    approval = gate.approvals.wait(decision.decision_id, timeout_s=30)
    if approval.approved:
        run_tool(**gate.approvals.execute(approval, decision.args))

This package imports neither `audit` nor `mcap` (ADR 0001).
"""

from runtime._action import Action, Decision
from runtime._approval import Approval
from runtime._approval_queue import ApprovalQueue
from runtime._approval_sqlite import SqliteApprovalStore
from runtime._approval_store import (
    ApprovalStore,
    MemoryApprovalStore,
    PendingApproval,
    Resolution,
    ResolutionRecord,
    check_resolution,
)
from runtime._backend import PolicyBackend
from runtime._canonical import (
    StrictJSONError,
    canonical_bytes,
    content_address,
    jcs_bytes,
    loads_strict,
    sha256_hex,
    value_sha256,
)
from runtime._cedar import CEDAR_BUNDLE_MEDIA_TYPE, CEDAR_MEDIA_TYPE, CedarPolicy
from runtime._cedar_request import CedarEntity, CedarMapping, CedarRequest, convention_request
from runtime._clock import Clock, SystemClock
from runtime._counter_sqlite import SqliteCounterStore
from runtime._counter_store import CounterStore, MemoryCounterStore, Usage
from runtime._diagnosis import PartCheck, RuleDiagnosis
from runtime._errors import (
    ActionDenied,
    AmbiguousResource,
    ApprovalError,
    ApprovalPending,
    ApprovalStoreError,
    AuditError,
    CanonicalEncodingError,
    CedarEvaluationError,
    CedarValueError,
    ConditionError,
    ConditionTypeError,
    CounterStoreError,
    EvaluationError,
    GhostError,
    GuardError,
    LimitError,
    NarrowingError,
    NarrowingEscape,
    PolicyError,
    TraceContextError,
    UnsupportedValue,
)
from runtime._evaluate import Evaluation, Evaluator
from runtime._explain import Explanation, explain_action
from runtime._gate import Gate
from runtime._ids import make_uuid7
from runtime._limit import LimitSpec
from runtime._policy import ApprovalSpec, Policy, Rule, ScrubSettings
from runtime._policy_check import PolicyCheck, PolicyProblem, check_policy
from runtime._resource import canonical_resource
from runtime._scrub import Finding, Scrubber, ScrubLimitExceeded, ScrubResult
from runtime._shadow_rules import ShadowRulesView
from runtime._sink import AuditSink, RunStart, ShadowPolicy
from runtime._traceparent import TraceParent, parse_traceparent, parse_tracestate
from runtime._verdict import Effect, RuntimeVerdict
from runtime._version import SDK_VERSION

__version__ = SDK_VERSION
"""The installed ghost-sdk version (one source: the distribution's metadata)."""


__all__ = [
    "CEDAR_BUNDLE_MEDIA_TYPE",
    "CEDAR_MEDIA_TYPE",
    "SDK_VERSION",
    "Action",
    "ActionDenied",
    "AmbiguousResource",
    "Approval",
    "ApprovalError",
    "ApprovalPending",
    "ApprovalQueue",
    "ApprovalSpec",
    "ApprovalStore",
    "ApprovalStoreError",
    "AuditError",
    "AuditSink",
    "CanonicalEncodingError",
    "CedarEntity",
    "CedarEvaluationError",
    "CedarMapping",
    "CedarPolicy",
    "CedarRequest",
    "CedarValueError",
    "Clock",
    "ConditionError",
    "ConditionTypeError",
    "CounterStore",
    "CounterStoreError",
    "Decision",
    "Effect",
    "Evaluation",
    "EvaluationError",
    "Evaluator",
    "Explanation",
    "Finding",
    "Gate",
    "GhostError",
    "GuardError",
    "LimitError",
    "LimitSpec",
    "MemoryApprovalStore",
    "MemoryCounterStore",
    "NarrowingError",
    "NarrowingEscape",
    "PartCheck",
    "PendingApproval",
    "Policy",
    "PolicyBackend",
    "PolicyCheck",
    "PolicyError",
    "PolicyProblem",
    "Resolution",
    "ResolutionRecord",
    "Rule",
    "RuleDiagnosis",
    "RunStart",
    "RuntimeVerdict",
    "ScrubLimitExceeded",
    "ScrubResult",
    "ScrubSettings",
    "Scrubber",
    "ShadowPolicy",
    "ShadowRulesView",
    "SqliteApprovalStore",
    "SqliteCounterStore",
    "StrictJSONError",
    "SystemClock",
    "TraceContextError",
    "TraceParent",
    "UnsupportedValue",
    "Usage",
    "canonical_bytes",
    "canonical_resource",
    "check_policy",
    "check_resolution",
    "content_address",
    "convention_request",
    "explain_action",
    "jcs_bytes",
    "loads_strict",
    "make_uuid7",
    "parse_traceparent",
    "parse_tracestate",
    "sha256_hex",
    "value_sha256",
]
