"""A policy with its shadow rules enforced: what it *would* decide (ADR 0031).

A rule marked ``shadow = true`` (TOML) or ``@ghost_shadow`` (Cedar) is part of
the policy -- its source, its ``policy_sha256`` -- but the policy's own
``matching_rules`` never returns it, so it cannot change a verdict. The
backend offers, besides, ``with_shadow_rules()``: a `ShadowRulesView` whose
``matching_rules`` returns the matched rules *with* the shadow ones, in file
order. The gate derives a second verdict from that view and records it under
the assessment's ``shadow`` key.

The view is built once, when the gate is built; it shares everything but
matching with the policy it comes from (same id, hash, default, scrub
settings and source). It is what "the policy, had its shadow rules been
enforced" means, and nothing else.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from runtime._backend import PolicyBackend
from runtime._policy_load import ScrubSettings
from runtime._rule import Rule
from runtime._verdict import Effect

__all__ = ["ShadowRulesView", "shadow_rules_view"]

Matcher = Callable[[str, str, str, Mapping[str, Any]], tuple[Rule, ...]]


class ShadowRulesView:
    """A `PolicyBackend`: ``base`` with its shadow rules enforced (see the module docstring).

    Args:
        base: the policy whose shadow rules these are.
        matching: matches an action against every rule of ``base``, shadow ones included.
    """

    __slots__ = ("_base", "_matching")

    def __init__(self, base: PolicyBackend, matching: Matcher) -> None:
        self._base = base
        self._matching = matching

    @property
    def policy_id(self) -> str:
        return self._base.policy_id

    @property
    def policy_sha256(self) -> str:
        return self._base.policy_sha256

    @property
    def default(self) -> Effect:
        return self._base.default

    @property
    def rules(self) -> tuple[Rule, ...]:
        return self._base.rules

    @property
    def scrub(self) -> ScrubSettings:
        return self._base.scrub

    @property
    def source(self) -> bytes:
        return self._base.source

    @property
    def source_name(self) -> str:
        return self._base.source_name

    @property
    def source_media_type(self) -> str:
        return self._base.source_media_type

    @property
    def source_sha256(self) -> str:
        return self._base.source_sha256

    def matching_rules(
        self, agent: str, verb: str, resource: str, args: Mapping[str, Any]
    ) -> tuple[Rule, ...]:
        """The matched rules of ``base``, shadow rules included, in file order.

        Raises:
            EvaluationError: as the base policy's ``matching_rules``, for any rule.
        """
        return self._matching(agent, verb, resource, args)

    def __repr__(self) -> str:
        return f"ShadowRulesView({self._base!r})"


def shadow_rules_view(policy: PolicyBackend) -> PolicyBackend | None:
    """``policy.with_shadow_rules()`` when the backend offers it, else None (no shadow rules).

    ``with_shadow_rules`` is optional for a `PolicyBackend`: one without it has
    no shadow rules. It returns None when the policy has none.
    """
    offer = getattr(policy, "with_shadow_rules", None)
    if not callable(offer):
        return None
    view = offer()
    if view is not None and not isinstance(view, PolicyBackend):
        raise TypeError("with_shadow_rules() must return a PolicyBackend or None")
    return view
