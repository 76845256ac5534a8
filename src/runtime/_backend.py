"""The policy-backend protocol: what the gate needs from a policy, whatever its language (ADR 0028).

A backend answers one question per check — which of its rules match this
action — and describes itself for the record. It does not decide: the
derivation (`runtime._derivation.derive`) turns the matched rules into a
verdict the same way for every backend, so verdict precedence, narrowing,
scrubbing and approvals have one implementation. A backend's rules are
`Rule` objects (effect, narrowing, approval terms, scrub exemptions) built and
validated once, when the backend is loaded.

Two backends ship: `Policy` (the TOML/dict format of SPEC §4) and
`CedarPolicy` (Cedar policies through ``cedarpy``, ``ghost-sdk[cedar]``). The
gate takes either at construction and holds it; a check calls the one
backend's ``matching_rules`` directly, with no dispatch on its type.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

from runtime._policy_load import ScrubSettings
from runtime._rule import Rule
from runtime._verdict import Effect

__all__ = ["PolicyBackend"]


@runtime_checkable
class PolicyBackend(Protocol):
    """What a `Gate` needs from a policy: identity, the source for the run, and matching.

    Attributes (read-only):
        policy_id: the declared id, recorded with every decision.
        policy_sha256: content address of everything the verdicts depend on.
        default: the effect when no rule matches (``deny`` or ``allow``).
        rules: every rule, in file order.
        scrub: the scrubber settings.
        source: the bytes the policy was loaded from, attached to the run;
            ``source_name``, ``source_media_type`` and ``source_sha256``
            (SHA-256 hex of ``source``) describe them.
    """

    @property
    def policy_id(self) -> str: ...  # pragma: no cover - protocol

    @property
    def policy_sha256(self) -> str: ...  # pragma: no cover - protocol

    @property
    def default(self) -> Effect: ...  # pragma: no cover - protocol

    @property
    def rules(self) -> tuple[Rule, ...]: ...  # pragma: no cover - protocol

    @property
    def scrub(self) -> ScrubSettings: ...  # pragma: no cover - protocol

    @property
    def source(self) -> bytes: ...  # pragma: no cover - protocol

    @property
    def source_name(self) -> str: ...  # pragma: no cover - protocol

    @property
    def source_media_type(self) -> str: ...  # pragma: no cover - protocol

    @property
    def source_sha256(self) -> str: ...  # pragma: no cover - protocol

    def matching_rules(
        self, agent: str, verb: str, resource: str, args: Mapping[str, Any]
    ) -> tuple[Rule, ...]:
        """The rules that match an action, in file order.

        Args:
            agent, verb, resource: the action's names and resource, as the agent
                wrote them (the snapshot's strings); the backend canonicalises
                the resource itself (`canonical_resource`).
            args: the action's arguments (the snapshot's plain data).

        Raises:
            EvaluationError: the action cannot be evaluated (an ambiguous
                resource, a condition on a missing path, a value the backend
                cannot represent, an evaluation error); the gate denies it.
                Its message must be safe to record: policy data and type
                names only, never an argument value.
        """
        ...  # pragma: no cover - protocol


class SealedPolicy:
    """What `Policy` and `CedarPolicy` share: each field set once, at construction, then never.

    A policy is decided with for the life of a gate and hashed into every
    record, so nothing may rebind a field after ``__init__`` has set it.
    """

    __slots__ = ()

    policy_id: str
    policy_sha256: str
    rules: tuple[Rule, ...]

    def __setattr__(self, name: str, value: object) -> None:
        if hasattr(self, name):
            raise AttributeError(f"{type(self).__name__} is immutable: cannot set {name!r}")
        object.__setattr__(self, name, value)

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(policy_id={self.policy_id!r}, rules={len(self.rules)},"
            f" policy_sha256={self.policy_sha256[:12]}...)"
        )
