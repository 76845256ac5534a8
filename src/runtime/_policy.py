"""Policies: parsed once into a deep-frozen, pre-indexed object (SPEC §4).

``Policy.from_toml(path)`` and ``Policy.from_dict(mapping)`` both start by
taking a private plain copy of the data (`runtime._frozen`), then validate it
field by field (`runtime._policy_load`) and build the rules, whose terms are
frozen: changing the mapping afterwards, or anything nested in it, changes
nothing, and ``policy_sha256`` is the content address of that copy. Rules are
indexed by literal verb once, so a check looks only at the rules that can
match its verb (`Policy.candidate_rules`). Rules marked ``shadow = true``
are left out of that index: the policy never matches them; its
`with_shadow_rules` view, indexed over every rule, does (ADR 0031).
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from runtime._backend import SealedPolicy
from runtime._canonical import jcs_bytes, sha256_hex, value_sha256
from runtime._diagnosis import RuleDiagnosis
from runtime._errors import CanonicalEncodingError, PolicyError
from runtime._frozen import plain_copy
from runtime._policy_load import ScrubSettings, load_policy
from runtime._resource import canonical_resource
from runtime._rule import ApprovalSpec, Rule
from runtime._rule_index import RuleIndex
from runtime._shadow_rules import ShadowRulesView
from runtime._verdict import Effect

__all__ = ["ApprovalSpec", "Policy", "Rule", "ScrubSettings"]


class Policy(SealedPolicy):
    """An immutable, validated policy. Build it with `from_toml` or `from_dict`.

    Attributes:
        policy_id: the declared id, recorded with every decision.
        default: the effect when no rule matches (``deny`` or ``allow``).
        rules: the rules, in file order.
        scrub: the scrubber settings.
        policy_sha256: content address of the policy (RFC 8785 form of its data).
        source: the bytes it was loaded from; ``source_name``, ``source_media_type``
            and ``source_sha256`` describe them.
    """

    __slots__ = (
        "_index",
        "_shadow_index",
        "default",
        "policy_id",
        "policy_sha256",
        "rules",
        "scrub",
        "source",
        "source_media_type",
        "source_name",
        "source_sha256",
    )

    def __init__(
        self,
        data: Mapping[str, Any],
        *,
        source: bytes,
        source_name: str,
        source_media_type: str,
        origin: str,
    ) -> None:
        """Validate a copy of ``data``; prefer `from_toml` / `from_dict`.

        Raises:
            PolicyError: the policy is malformed.
        """
        plain = _copy(data, origin)
        loaded = load_policy(plain, origin)
        self.policy_id: str = loaded.policy_id
        self.default: Effect = loaded.default
        self.rules: tuple[Rule, ...] = loaded.rules
        self.scrub: ScrubSettings = loaded.scrub
        try:
            self.policy_sha256 = value_sha256(plain)
        except CanonicalEncodingError as exc:
            raise PolicyError(str(exc), source=origin) from None
        self.source = bytes(source)
        self.source_name = source_name
        self.source_media_type = source_media_type
        self.source_sha256 = sha256_hex(self.source)
        # Indexed once, so that a check only asks the rules that can match it. Shadow
        # rules are not enforced: only the view of `with_shadow_rules` indexes them.
        enforced = tuple(rule for rule in self.rules if not rule.shadow)
        self._index = RuleIndex(enforced)
        self._shadow_index = None if enforced == self.rules else RuleIndex(self.rules)

    @classmethod
    def from_toml(cls, path: str | Path) -> Policy:
        """Load a policy from a TOML file.

        Raises:
            PolicyError: the file cannot be read, is not UTF-8 TOML, or the policy is malformed.
        """
        origin = str(path)
        try:
            source = Path(path).read_bytes()
        except OSError as exc:
            raise PolicyError(f"cannot read the file ({exc.strerror})", source=origin) from None
        try:
            data = tomllib.loads(source.decode("utf-8"))
        except UnicodeDecodeError:
            raise PolicyError("the file is not UTF-8 text", source=origin) from None
        except tomllib.TOMLDecodeError as exc:
            raise PolicyError(f"not valid TOML: {exc}", source=origin) from None
        return cls(
            data,
            source=source,
            source_name=Path(path).name,
            source_media_type="application/toml",
            origin=origin,
        )

    @classmethod
    def from_dict(cls, mapping: Mapping[str, Any], *, origin: str = "<dict>") -> Policy:
        """Build a policy from the same structure as the TOML file, as Python data.

        The mapping is copied first: changing it afterwards changes nothing.

        Raises:
            PolicyError: the policy is malformed.
        """
        plain = _copy(mapping, origin)
        try:
            source = jcs_bytes(plain)
        except CanonicalEncodingError as exc:
            raise PolicyError(str(exc), source=origin) from None
        return cls(
            plain,
            source=source,
            source_name="policy.json",
            source_media_type="application/json",
            origin=origin,
        )

    def candidate_rules(self, verb: str) -> tuple[Rule, ...]:
        """The rules that may match ``verb``, in file order (an index lookup, no matching)."""
        return self._index.for_verb(verb)

    def matching_rules(
        self, agent: str, verb: str, resource: str, args: Mapping[str, Any]
    ) -> tuple[Rule, ...]:
        """The rules that match an action, in file order: the whole of matching in one call.

        Canonicalises ``resource`` once, then asks each candidate rule: those the
        index (`runtime._rule_index`) finds by verb and resource prefix.

        Args:
            agent, verb, resource: the action's names and resource, as the agent wrote them.
            args: the action's arguments (the snapshot's plain data).

        Raises:
            AmbiguousResource: the resource cannot be canonicalised.
            UnsupportedValue, ConditionError, ConditionTypeError: as `Rule.matches`.
        """
        canonical = canonical_resource(resource)
        return tuple(
            rule
            for rule in self._index.candidates(verb, canonical)
            if rule.matches(agent, verb, canonical, args)
        )

    def with_shadow_rules(self) -> ShadowRulesView | None:
        """This policy with its ``shadow = true`` rules enforced, or None when it has none.

        The gate derives, from the view, what the policy would have decided with
        its shadow rules enforced, and records it beside the verdict (ADR 0031).
        """
        index = self._shadow_index
        if index is None:
            return None

        def matching(
            agent: str, verb: str, resource: str, args: Mapping[str, Any]
        ) -> tuple[Rule, ...]:
            canonical = canonical_resource(resource)
            return tuple(
                rule
                for rule in index.candidates(verb, canonical)
                if rule.matches(agent, verb, canonical, args)
            )

        return ShadowRulesView(self, matching)

    def diagnose_rules(
        self, agent: str, verb: str, resource: str, args: Mapping[str, Any]
    ) -> tuple[RuleDiagnosis, ...]:
        """Every rule's diagnosis against an action, in file order (`Rule.diagnose`).

        The side API of ``ghost policy explain``; a check never calls it.

        Raises:
            AmbiguousResource: the resource cannot be canonicalised (the gate denies).
        """
        canonical = canonical_resource(resource)
        return tuple(rule.diagnose(agent, verb, canonical, args) for rule in self.rules)


def _copy(data: object, origin: str) -> Any:
    if not isinstance(data, Mapping):
        raise PolicyError(f"a policy must be a mapping, not {type(data).__name__}", source=origin)
    return plain_copy(data, origin=origin)
