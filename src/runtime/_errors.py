"""The ghost error tree: one root, shallow branches.

::

    GhostError
    ├── PolicyError(ValueError)          a policy that cannot be loaded as written
    ├── TraceContextError(ValueError)    a traceparent / tracestate header that must be dropped
    ├── CanonicalEncodingError(ValueError)  a value that has no canonical bytes
    ├── EvaluationError                  an action the gate cannot evaluate: it is denied
    │   ├── UnsupportedValue(TypeError)  an argument that is not plain data
    │   ├── AmbiguousResource(ValueError)  a resource no glob may judge (traversal, encodings)
    │   ├── ConditionError               a ``when`` path that is missing or runs through a non-dict
    │   │   └── ConditionTypeError(TypeError)  a value of the wrong type for its operator
    │   ├── NarrowingError               a narrowing that cannot be applied to the arguments
    │   │   └── NarrowingEscape          a ``within`` path that leaves its directory
    │   ├── ScrubLimitExceeded(ValueError)  arguments the scrubber cannot finish within its bounds
    │   ├── LimitError                   a limited rule's key or amount the action cannot supply
    │   └── CedarEvaluationError         Cedar could not evaluate the action (a Cedar policy)
    │       └── CedarValueError          a value of the action Cedar cannot hold exactly
    ├── ApprovalError                    misuse of the approval queue
    │   └── ApprovalStoreError           an approval store that cannot be used (file, lock)
    ├── CounterStoreError                a counter store that cannot be used (file, lock)
    ├── GuardError(TypeError)            `Gate.guard` misused, or gate args its function cannot take
    ├── ActionDenied                     `Gate.enforce` on a `deny` verdict
    ├── ApprovalPending                  `Gate.enforce` on a `pending` verdict
    └── AuditError                       a decision that could not be recorded
        └── audit.LogFormatError         a file that is not a readable ghost audit log

A verdict is a value, not an exception: `Gate.check` never raises for a policy
outcome. The two raising verdict errors exist only for the opt-in
`Gate.enforce`. Messages are built from structured fields so that callers can
read the fields instead of parsing text.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from runtime._action import Decision
    from runtime._approval import Approval

__all__ = [
    "ActionDenied",
    "AmbiguousResource",
    "ApprovalError",
    "ApprovalPending",
    "ApprovalStoreError",
    "AuditError",
    "CanonicalEncodingError",
    "CedarEvaluationError",
    "CedarValueError",
    "ConditionError",
    "ConditionTypeError",
    "CounterStoreError",
    "EvaluationError",
    "GhostError",
    "GuardError",
    "LimitError",
    "NarrowingError",
    "NarrowingEscape",
    "PolicyError",
    "ScrubLimitExceeded",
    "TraceContextError",
    "UnsupportedValue",
]


class GhostError(Exception):
    """Root of every error ghost raises on purpose."""


class PolicyError(GhostError, ValueError):
    """A policy is malformed; nothing of it is used.

    Attributes:
        source: the file (or ``"<dict>"``) the policy came from.
        rule: the id (or ``#index``) of the offending rule, or None for top-level fields.
        field: the offending field, dotted (``narrow.clamp``), or None.
        problem: what is wrong, in a sentence fragment a user can act on.
        rule_index: the rule's position in the policy's rules, when the loader
            knows it (`check_policy` places the problem in the source by it).
    """

    rule_index: int | None = None

    def __init__(
        self, problem: str, *, source: str, rule: str | None = None, field: str | None = None
    ) -> None:
        self.source = source
        self.rule = rule
        self.field = field
        self.problem = problem
        where = source
        if rule is not None:
            where += f", rule {rule!r}"
        if field is not None:
            where += f", field {field!r}"
        super().__init__(f"{where}: {problem}")


class TraceContextError(GhostError, ValueError):
    """A W3C trace-context header is invalid and must not be used.

    The message describes the defect but never repeats the header text: a
    header is attacker-controlled input and may carry anything.
    """


class CanonicalEncodingError(GhostError, ValueError):
    """A value cannot be put in canonical form (a float in a record, a lone surrogate, ...)."""


class EvaluationError(GhostError):
    """An action the gate cannot evaluate as written; the gate denies it (fail closed).

    Raised inside `Gate.check` by the stages that judge an action — the input
    snapshot, resource canonicalisation, ``when`` conditions, narrowing, the
    scrubber's bounds — and turned into a recorded ``deny``. Every subclass
    builds its message from policy data, bounds and type names that ghost has
    already made safe, never from argument values, so the gate may put the
    message in ``decision.reason``; any other exception is reported by its
    type alone.
    """


class UnsupportedValue(EvaluationError, TypeError):
    """An argument value is not plain data, so the gate cannot decide on it (SPEC §3).

    Plain data is what JSON and bytes can say: ``dict`` with ``str`` keys,
    ``list``, ``str``, ``bytes``, ``int``, finite ``float``, ``bool`` and
    ``None`` (subclasses are converted to their base type first). Anything
    else — a dataclass, an Enum, a set, a generator, a view, a non-``str``
    key, NaN — denies, unless the host converts it with ``Gate(to_data=...)``.

    Attributes:
        type_name: the offending value's type, as ``type(value).__name__``
            (an attacker can name a class; the gate scrubs what it records).
        path: where it was, JSONPath-like (``$.items[2]``).
        problem: what is wrong, when it is more than the type (``"NaN"``).
    """

    def __init__(self, type_name: str, path: str, problem: str | None = None) -> None:
        self.type_name = type_name
        self.path = path
        self.problem = problem
        if problem is None:
            problem = (
                f"a {type_name}, which is not plain data (dict with str keys, list, str,"
                " bytes, int, finite float, bool, None)"
            )
        super().__init__(f"argument {path} is {problem}")


class AmbiguousResource(EvaluationError, ValueError):
    """A resource that could name more than one thing, so no glob may judge it (SPEC §4).

    Raised by `canonical_resource` for a resource that climbs above its root,
    holds a backslash, a percent-encoded or compatibility (fullwidth) form of a
    separator or a dot, a dot segment in its query, or text that is not valid
    Unicode. The message never repeats the resource: it is attacker-controlled.

    Attributes:
        problem: what is wrong, a fixed phrase ("climbs above its root").
    """

    def __init__(self, problem: str) -> None:
        self.problem = problem
        super().__init__(f"the resource is ambiguous: it {problem}")


class ConditionError(EvaluationError):
    """A rule's ``when`` condition cannot be evaluated, so the action is denied (SPEC §4).

    A path that is missing (outside ``exists``) or that runs through something
    other than a dict is not "false": treating it so would let an agent sidestep
    a deny or approval rule by leaving an argument out or wrapping it in a list.

    Attributes:
        rule: the id of the rule whose condition failed.
        path: the condition's dotted path, as the policy wrote it.
        operator: the operator that could not be applied, or None when the
            path itself failed.
        problem: what is wrong ("is missing", "needs a number, not a string").
    """

    def __init__(self, rule: str, path: str, problem: str, operator: str | None = None) -> None:
        self.rule = rule
        self.path = path
        self.operator = operator
        self.problem = problem
        where = f"when {path!r}" if operator is None else f"when {path!r} {operator}"
        super().__init__(f"rule {rule!r}: {where}: {problem}")


class ConditionTypeError(ConditionError, TypeError):
    """A value whose type does not fit its operator (a string for ``gt``; bool is not a number)."""


class NarrowingError(EvaluationError):
    """A ``narrow`` rule cannot be applied to the arguments, so the action is denied.

    Attributes:
        rule: the id of the narrowing rule.
        path: the dotted argument path, as the policy wrote it.
        kind: the narrowing: ``"clamp"``, ``"set"`` or ``"within"`` (empty, with an
            empty ``path``, when the arguments themselves are not a dict).
        problem: what is wrong ("needs a number, not a boolean").
    """

    def __init__(self, rule: str, path: str, kind: str, problem: str) -> None:
        self.rule = rule
        self.path = path
        self.kind = kind
        self.problem = problem
        super().__init__(self._message())

    def _message(self) -> str:
        where = f"narrow.{self.kind}" if self.kind else "narrow"
        if self.path:
            where += f" {self.path!r}"
        return f"rule {self.rule!r}: {where}: {self.problem}"


class NarrowingEscape(NarrowingError):
    """An argument that a ``within`` narrowing cannot confine under its directory.

    Attributes:
        prefix: the directory the rule confines the argument to (policy data);
            the other attributes are those of `NarrowingError` (``kind`` is ``"within"``).
    """

    def __init__(self, rule: str, path: str, prefix: str, problem: str) -> None:
        self.prefix = prefix
        super().__init__(rule, path, "within", problem)

    def _message(self) -> str:
        return (
            f"argument {self.path!r} escapes {self.prefix!r}, the directory rule"
            f" {self.rule!r} confines it to: it {self.problem}"
        )


class ScrubLimitExceeded(EvaluationError, ValueError):
    """Arguments the scrubber cannot finish within its bounds; they must not be used.

    The scrubber never returns text it has not finished scanning or redacting:
    past a bound it raises this, and the gate denies (SPEC §4). The message
    names the bound and its limit, never any of the value's content.

    Attributes:
        bound: ``"max_depth"`` (nesting, or a cycle), ``"max_bytes"`` (the size
            budget: text, values, keys and candidates, ADR 0010) or
            ``"fixpoint"`` (redaction rounds that kept uncovering more).
        limit: the configured limit that was exceeded.
    """

    def __init__(self, bound: Literal["max_depth", "max_bytes", "fixpoint"], limit: int) -> None:
        self.bound = bound
        self.limit = limit
        if bound == "max_depth":
            what = f"nests deeper than the scrubber's max_depth of {limit} (or is cyclic)"
        elif bound == "max_bytes":
            what = (
                f"exceeds the scrubber's max_bytes of {limit}"
                " (UTF-8 bytes scanned plus a fixed cost per value, key and candidate)"
            )
        else:
            what = f"still uncovers secrets after the scrubber's {limit} redaction rounds"
        super().__init__(f"value {what}; it cannot be scrubbed and must not be used")


class CedarEvaluationError(EvaluationError):
    """Cedar could not evaluate the action: the gate denies it (fail closed).

    Cedar itself skips a policy whose evaluation errs; ghost denies instead, so
    that an erring ``forbid`` can never let an action through.

    Attributes:
        rule: the id of the policy that failed, when Cedar names one.
        problem: a fixed phrase (Cedar's own message is not kept: it can
            quote argument values).
    """

    def __init__(self, problem: str, rule: str | None = None) -> None:
        self.rule = rule
        self.problem = problem
        where = f"rule {rule!r}" if rule is not None else "the policy"
        super().__init__(f"Cedar could not evaluate {where}: {problem}")


class CedarValueError(CedarEvaluationError):
    """A value of the action that Cedar cannot hold exactly (a null, a float, a big int...).

    Attributes:
        path: where it was, JSONPath-like (``$.limits[0]``; keys that are not
            identifiers are shown as ``["?"]``).
        kind: what it is (``"null"``, ``"float"``, ``"int"``, a type name).
    """

    def __init__(self, path: str, kind: str, problem: str) -> None:
        self.path = path
        self.kind = kind
        super().__init__(f"{path} is a {kind} Cedar cannot represent ({problem})")


class LimitError(EvaluationError):
    """A limited rule cannot count the action, so the action is denied (ADR 0032).

    A key path that is missing or runs through a non-dict, a key part that is
    not a string, number or boolean, or an amount that is not an exact,
    finite, non-negative number within bounds (a bool, a string, NaN, 10**400,
    -5) denies: counting it as zero would let an agent spend past a budget.

    Attributes:
        rule: the id of the limited rule.
        path: the key part or amount path, as the policy wrote it.
        problem: what is wrong ("is missing", "is a boolean, not a number").
    """

    def __init__(self, rule: str, path: str, problem: str) -> None:
        self.rule = rule
        self.path = path
        self.problem = problem
        super().__init__(f"rule {rule!r}: limit {path!r}: {problem}")


class CounterStoreError(GhostError):
    """A counter store that cannot be used: its file, its lock, a damaged row (ADR 0032).

    Raised by `SqliteCounterStore`; inside `Gate.check` it denies the action
    (the budget cannot be read, so it cannot be shown not to be spent).

    Attributes:
        path: the store's file.
        problem: what is wrong, a sentence a user can act on.
    """

    def __init__(self, path: str, problem: str) -> None:
        self.path = path
        self.problem = problem
        super().__init__(f"counter store {path}: {problem}")


class ApprovalError(GhostError):
    """The approval queue was misused: unknown id, second resolution, approver not allowed."""


class GuardError(GhostError, TypeError):
    """A function `Gate.guard` cannot guard as declared, or cannot call with the gate's arguments.

    At decoration: a resource format string with a field that is positional,
    reads an attribute or an index, names no parameter (or ``*args`` /
    ``**kwargs``), or carries a conversion or format spec; a non-string verb
    or agent. At call time, after a permitting verdict: ``decision.args`` that
    do not fit the function's parameters (a narrowing added an argument it has
    no parameter for, or removed a required one); the function is not called,
    since running it without the narrowing would undo the decision.

    Attributes:
        function: the guarded function's qualified name.
        problem: what is wrong; never an argument's value.
    """

    def __init__(self, function: str, problem: str) -> None:
        self.function = function
        self.problem = problem
        super().__init__(f"cannot guard {function}: {problem}")


class ApprovalStoreError(ApprovalError):
    """An approval store cannot be used: it is missing, damaged, foreign, newer, or stays locked.

    A subclass of `ApprovalError`, so that code which treats every approval
    error as "do not run the action" stays closed; a separate class, so that a
    caller (the queue, ``ghost approvals``) can tell a store it cannot read
    from a resolution the store refused.

    Attributes:
        path: the store's file.
        problem: what is wrong, a sentence fragment a user can act on.
    """

    def __init__(self, path: str, problem: str) -> None:
        self.path = path
        self.problem = problem
        super().__init__(f"approval store {path}: {problem}")


class AuditError(GhostError):
    """An audit record could not be written; the action it concerns must not run."""


class ActionDenied(GhostError):
    """Raised by `Gate.enforce` when the verdict is ``deny``, and by a guard that waited in vain.

    Attributes:
        decision: the recorded decision.
        approval: for a ``pending`` decision a guard waited on, the approval that
            ended it ``rejected`` or ``expired``; otherwise None.
    """

    def __init__(self, decision: Decision, approval: Approval | None = None) -> None:
        self.decision = decision
        self.approval = approval
        if approval is None:
            why = decision.reason
        elif approval.outcome == "expired":
            why = "its approval expired before anyone resolved it"
        else:
            why = f"its approval was {approval.outcome} by {approval.approver}"
        super().__init__(f"action denied ({decision.decision_id}): {why}")


class ApprovalPending(GhostError):
    """Raised by `Gate.enforce` when the verdict is ``pending``.

    Attributes:
        decision: the recorded decision; resolve it through ``gate.approvals``.
    """

    def __init__(self, decision: Decision) -> None:
        self.decision = decision
        super().__init__(f"action held for approval ({decision.decision_id}): {decision.reason}")
