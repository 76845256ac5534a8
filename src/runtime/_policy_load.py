"""Loading a policy: validate every field of a plain copy, or raise (SPEC §4).

Loading is strict and all-or-nothing: an unknown key, a duplicate rule id, a
bad glob or RE2 pattern, a wrong type, an unknown effect or detector, a
path-like field that could never address an argument (``"to..cc"``), a
``[scrub] max_depth`` above 256 — any of them raises `PolicyError` naming the
file, the rule and the field, and nothing of the policy is used. Validation
happens here, once, so that no action is ever denied later for a mistake the
policy made.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final, TypeVar

from runtime._conditions import OPERATORS, Condition
from runtime._detectors import DETECTOR_NAMES
from runtime._errors import PolicyError
from runtime._frozen import freeze
from runtime._glob import GlobError, GlobSet
from runtime._limit import MAX_AMOUNT, MAX_WINDOW_S, NAMES, LimitSpec, micros_of
from runtime._narrowing import Narrowing
from runtime._paths import check_prefix
from runtime._re2 import Regex, RegexError
from runtime._rule import ApprovalSpec, Rule
from runtime._verdict import Effect

__all__ = [
    "MAX_SCRUB_DEPTH",
    "LoadedPolicy",
    "ScrubSettings",
    "collect_policy_problems",
    "load_policy",
]

_T = TypeVar("_T")

MAX_SCRUB_DEPTH: Final = 256
"""Largest ``[scrub] max_depth`` a policy may set (the canonical encoder's bound)."""

_TOP_KEYS: Final = frozenset({"policy_id", "description", "default", "rules", "scrub"})
_RULE_KEYS: Final = frozenset(
    {"id", "description", "agents", "verbs", "resources", "effect", "when", "narrow",
     "approval", "scrub_exempt", "limit", "shadow"}
)  # fmt: skip
_NARROW_KEYS: Final = frozenset({"clamp", "keep", "set", "within"})
_APPROVAL_KEYS: Final = frozenset({"timeout_s", "approvers"})
_LIMIT_KEYS: Final = frozenset({"key", "window_s", "max_count", "max_sum", "sum_max"})
_SCRUB_KEYS: Final = frozenset({"detectors", "action", "block", "max_depth", "max_bytes"})
_ORDERING_OPERATORS: Final = frozenset({"gt", "ge", "lt", "le"})
_DEFAULT_APPROVAL_TIMEOUT_S: Final = 600


@dataclass(frozen=True, slots=True)
class ScrubSettings:
    """The policy's ``[scrub]`` table.

    Attributes:
        detectors: the detectors that run (all of them by default).
        block: detectors whose finding denies the action instead of being redacted.
        max_depth: deepest argument nesting scanned (at most 256); deeper arguments are denied.
        max_bytes: most UTF-8 text scanned per call; more is denied.
    """

    detectors: tuple[str, ...] = tuple(sorted(DETECTOR_NAMES))
    block: tuple[str, ...] = ()
    max_depth: int = 32
    max_bytes: int = 1 << 20


@dataclass(frozen=True, slots=True)
class LoadedPolicy:
    """A validated policy's parts, built from a private plain copy of its data."""

    policy_id: str
    default: Effect
    rules: tuple[Rule, ...]
    scrub: ScrubSettings


def load_policy(data: Mapping[str, Any], origin: str) -> LoadedPolicy:
    """Validate plain policy data (`runtime._frozen.plain_copy`) and build its parts.

    Args:
        data: the plain copy; nothing built keeps a reference into it.
        origin: the file (or ``"<dict>"``), for errors.

    Raises:
        PolicyError: the policy is malformed.
    """
    return _Parser(origin).policy(data)


def collect_policy_problems(data: Mapping[str, Any], origin: str) -> tuple[PolicyError, ...]:
    """Validate plain policy data like `load_policy`, but gather every problem instead of the first.

    The same checks run in the same order; where `load_policy` raises, this
    records the error and goes on with the next independent part (the next
    field, condition, narrowing entry or rule). It builds nothing usable: a
    policy is loaded only by `load_policy`, all or nothing. Each error's
    ``rule_index`` attribute is the rule's position in ``rules`` (None for
    top-level fields), so that a checker can place it in the source.

    Args:
        data: the plain copy (`runtime._frozen.plain_copy`).
        origin: the file (or ``"<dict>"``), for errors.

    Returns:
        every problem found, in the order `load_policy` would meet them; empty
        when the policy loads.
    """
    parser = _Parser(origin, collect=True)
    parser.attempt(parser.policy, data)
    assert parser.problems is not None
    return tuple(parser.problems)


class _Abandoned(Exception):
    """A part of the policy failed in collecting mode: its problems are recorded, skip the rest."""


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


class _Parser:
    """Validates policy data field by field; every error names where it is."""

    def __init__(self, origin: str, *, collect: bool = False) -> None:
        self.origin = origin
        # Collecting mode (`collect_policy_problems`): errors are gathered here.
        self.problems: list[PolicyError] | None = [] if collect else None
        self.rule_index: int | None = None

    def fail(self, problem: str, rule: str | None = None, field: str | None = None) -> PolicyError:
        error = PolicyError(problem, source=self.origin, rule=rule, field=field)
        error.rule_index = self.rule_index
        return error

    def attempt(self, check: Callable[..., _T], *args: Any) -> _T | None:
        """Run one independent check: raise its error, or in collecting mode record it.

        Returns what the check returns, or None when it failed in collecting mode.
        """
        if self.problems is None:
            return check(*args)
        try:
            return check(*args)
        except _Abandoned:
            return None
        except PolicyError as error:
            if error.rule_index is None:
                error.rule_index = self.rule_index
            self.problems.append(error)
            return None

    def settle(self, before: int) -> None:
        """Collecting mode: abandon the enclosing part if it recorded problems since ``before``."""
        if self.problems is not None and len(self.problems) > before:
            raise _Abandoned

    def mark(self) -> int:
        return 0 if self.problems is None else len(self.problems)

    def policy(self, data: Mapping[str, Any]) -> LoadedPolicy:
        start = self.mark()
        if not isinstance(data, Mapping):
            raise self.fail(f"must be a table, not {type(data).__name__}")
        self.attempt(self.keys, data, _TOP_KEYS, None, None)
        policy_id = data.get("policy_id")
        if not isinstance(policy_id, str) or not policy_id:
            self.attempt(self.raise_, self.fail(
                "policy_id is required and must be a non-empty string", field="policy_id"
            ))  # fmt: skip
        self.attempt(self.optional_text, data, "description", None)
        default = data.get("default", "deny")
        if default not in ("deny", "allow"):
            self.attempt(self.raise_, self.fail(
                f"must be 'deny' or 'allow', not {default!r}", field="default"
            ))  # fmt: skip
        raw_rules = data.get("rules", [])
        if not isinstance(raw_rules, list):
            self.attempt(self.raise_, self.fail(
                "must be an array of tables ([[rules]])", field="rules"
            ))  # fmt: skip
            raw_rules = []
        rules: list[Rule] = []
        seen: set[str] = set()
        for index, raw in enumerate(raw_rules):
            self.rule_index = index
            rule = self.attempt(self.rule, raw, index)
            if rule is not None:
                if rule.id in seen:
                    self.attempt(
                        self.raise_, self.fail("duplicate rule id", rule=rule.id, field="id")
                    )
                seen.add(rule.id)
                rules.append(rule)
            elif isinstance(raw, Mapping) and isinstance(raw.get("id"), str):
                seen.add(raw["id"])
        self.rule_index = None
        scrub = self.attempt(self.scrub, data.get("scrub", {}))
        self.settle(start)
        assert isinstance(policy_id, str)
        assert scrub is not None
        return LoadedPolicy(
            policy_id=policy_id,
            default=Effect(default),
            rules=tuple(rules),
            scrub=scrub,
        )

    @staticmethod
    def raise_(error: PolicyError) -> None:
        raise error

    def keys(
        self, table: object, allowed: frozenset[str], rule: str | None, prefix: str | None
    ) -> None:
        if not isinstance(table, Mapping):
            raise self.fail(f"must be a table, not {type(table).__name__}", rule=rule, field=prefix)
        for key in table:
            if key not in allowed:
                name = key if prefix is None else f"{prefix}.{key}"
                hint = ", ".join(sorted(allowed))
                self.attempt(self.raise_, self.fail(
                    f"unknown key (allowed here: {hint})", rule=rule, field=str(name)
                ))  # fmt: skip

    def optional_text(self, table: Mapping[str, Any], key: str, rule: str | None) -> str:
        value = table.get(key, "")
        if not isinstance(value, str):
            raise self.fail("must be a string", rule=rule, field=key)
        return value

    def strings(
        self, table: Mapping[str, Any], key: str, rule: str, default: tuple[str, ...]
    ) -> tuple[str, ...]:
        if key not in table:
            return default
        value = table[key]
        if (
            not isinstance(value, list)
            or not value
            or not all(isinstance(v, str) and v for v in value)
        ):
            raise self.fail("must be a non-empty array of non-empty strings", rule=rule, field=key)
        return tuple(value)

    def rule(self, raw: object, index: int) -> Rule:
        where = f"#{index}"
        if not isinstance(raw, Mapping):
            raise self.fail("a rule must be a table", rule=where)
        rule_id = raw.get("id")
        if not isinstance(rule_id, str) or not rule_id:
            raise self.fail("id is required and must be a non-empty string", rule=where, field="id")
        start = self.mark()
        self.attempt(self.keys, raw, _RULE_KEYS, rule_id, None)
        effect_text = raw.get("effect")
        effect: Effect | None = None
        if effect_text not in tuple(Effect):
            allowed = ", ".join(e.value for e in Effect)
            self.attempt(self.raise_, self.fail(
                f"must be one of {allowed}, not {effect_text!r}", rule=rule_id, field="effect"
            ))  # fmt: skip
        else:
            effect = Effect(effect_text)
        if effect is not None:
            self.attempt(self.effect_terms, raw, effect, rule_id)
        globs: dict[str, tuple[str, ...]] = {}
        for key, default in (("agents", ("*",)), ("verbs", ("*",)), ("resources", ("**",))):
            patterns = self.attempt(self.strings, raw, key, rule_id, default)
            if patterns is not None:
                globs[key] = patterns
        for key, patterns in globs.items():
            self.attempt(self.globs, patterns, key, rule_id)
        exempt = self.attempt(self.strings, raw, "scrub_exempt", rule_id, ())
        for dotted in exempt or ():
            self.attempt(self.path, dotted, rule_id, "scrub_exempt")
        when = self.attempt(self.when, raw.get("when", {}), rule_id)
        narrow = self.attempt(self.narrow, raw["narrow"], rule_id) if "narrow" in raw else None
        approval = (
            self.attempt(self.approval, raw.get("approval", {}), rule_id)
            if effect is Effect.APPROVAL
            else None
        )
        limit = (
            self.attempt(self.limit, raw["limit"], rule_id, effect)
            if "limit" in raw and effect is not None
            else None
        )
        shadow = self.attempt(self.flag, raw, "shadow", rule_id)
        description = self.attempt(self.optional_text, raw, "description", rule_id)
        self.settle(start)
        assert effect is not None
        assert exempt is not None
        assert when is not None
        assert description is not None
        assert shadow is not None
        return Rule(
            id=rule_id,
            effect=effect,
            agents=globs["agents"],
            verbs=globs["verbs"],
            resources=globs["resources"],
            when=when,
            narrow=narrow,
            approval=approval,
            scrub_exempt=exempt,
            description=description,
            limit=limit,
            shadow=shadow,
        )

    def effect_terms(self, raw: Mapping[str, Any], effect: Effect, rule_id: str) -> None:
        if "narrow" in raw and effect is not Effect.NARROW:
            raise self.fail(
                "only a rule with effect = 'narrow' may narrow", rule=rule_id, field="narrow"
            )
        if effect is Effect.NARROW and "narrow" not in raw:
            raise self.fail("a narrow rule needs a narrow table", rule=rule_id, field="narrow")
        if "approval" in raw and effect is not Effect.APPROVAL:
            raise self.fail(
                "only a rule with effect = 'approval' takes approval terms",
                rule=rule_id,
                field="approval",
            )

    def flag(self, raw: Mapping[str, Any], key: str, rule_id: str) -> bool:
        value = raw.get(key, False)
        if type(value) is not bool:
            raise self.fail("must be true or false", rule=rule_id, field=key)
        return value

    def globs(self, patterns: tuple[str, ...], key: str, rule_id: str) -> None:
        try:
            GlobSet(patterns, resources=key == "resources", field=key)
        except GlobError as exc:
            raise self.fail(str(exc), rule=rule_id, field=key) from None

    def path(self, key: object, rule: str, field: str) -> tuple[str, ...]:
        if not isinstance(key, str) or not key or "" in key.split("."):
            raise self.fail(
                f"{key!r} is not a dotted argument path (non-empty keys joined by '.')",
                rule=rule,
                field=field,
            )
        return tuple(key.split("."))

    def json_value(self, value: object, rule: str, field: str) -> None:
        if isinstance(value, float) and not math.isfinite(value):
            raise self.fail("NaN and infinities are not allowed", rule=rule, field=field)
        if isinstance(value, list):
            for item in value:
                self.json_value(item, rule, field)
        elif isinstance(value, Mapping):
            for item in value.values():
                self.json_value(item, rule, field)
        elif not isinstance(value, str | int | float | bool):
            raise self.fail(
                f"a {type(value).__name__} value is not allowed (JSON values only)",
                rule=rule,
                field=field,
            )

    def when(self, raw: object, rule: str) -> tuple[Condition, ...]:
        if not isinstance(raw, Mapping):
            raise self.fail("must be a table of conditions", rule=rule, field="when")
        start = self.mark()
        conditions = [self.attempt(self.condition, key, ops, rule) for key, ops in raw.items()]
        self.settle(start)
        return tuple(condition for condition in conditions if condition is not None)

    def condition(self, key: str, ops: object, rule: str) -> Condition:
        field_name = f"when.{key}"
        path = self.path(key, rule, "when")
        if not isinstance(ops, Mapping) or not ops:
            raise self.fail(
                "expected a table of operators, such as { gt = 50 }",
                rule=rule,
                field=field_name,
            )
        start = self.mark()
        for op, operand in ops.items():
            self.attempt(self.operand, op, operand, rule, f"{field_name}.{op}")
        self.settle(start)
        if ops.get("exists") is False and len(ops) > 1:
            raise self.fail(
                "exists = false stands alone: with other operators it could never hold",
                rule=rule,
                field=field_name,
            )
        frozen = tuple((op, freeze(operand)) for op, operand in ops.items())
        return Condition(rule, path, frozen)

    def operand(self, op: object, operand: object, rule: str, field: str) -> None:
        if op not in OPERATORS:
            hint = ""
            if isinstance(operand, Mapping):
                hint = '; to address a nested argument, quote the dotted path: "a.b" = { ... }'
            raise self.fail(
                f"unknown operator (use one of {', '.join(sorted(OPERATORS))}){hint}",
                rule=rule,
                field=field,
            )
        self.json_value(operand, rule, field)
        if op in _ORDERING_OPERATORS and not _is_number(operand):
            raise self.fail("needs a number", rule=rule, field=field)
        if op == "in" and (not isinstance(operand, list) or not operand):
            raise self.fail("needs a non-empty array", rule=rule, field=field)
        if op in ("prefix", "match") and not isinstance(operand, str):
            raise self.fail("needs a string", rule=rule, field=field)
        if op == "exists" and not isinstance(operand, bool):
            raise self.fail("needs true or false", rule=rule, field=field)
        if op == "match":
            assert isinstance(operand, str)
            try:
                Regex(operand)
            except RegexError as exc:
                raise self.fail(
                    f"bad regex (RE2 syntax): {exc.detail}", rule=rule, field=field
                ) from None

    def narrow(self, raw: object, rule: str) -> Narrowing:
        start = self.mark()
        self.keys(raw, _NARROW_KEYS, rule, "narrow")
        assert isinstance(raw, Mapping)
        if not raw:
            raise self.fail(
                "needs at least one of clamp, keep, set, within", rule=rule, field="narrow"
            )
        keep = self.attempt(self.keep, raw, rule) if "keep" in raw else None
        clamp: list[tuple[tuple[str, ...], int | float]] = []
        forced: list[tuple[tuple[str, ...], Any]] = []
        within: list[tuple[tuple[str, ...], str]] = []
        for key, bound in (self.attempt(self.table, raw, "clamp", rule) or {}).items():
            entry = self.attempt(self.clamp_entry, key, bound, rule)
            if entry is not None:
                clamp.append(entry)
        for key, value in (self.attempt(self.table, raw, "set", rule) or {}).items():
            forced_entry = self.attempt(self.set_entry, key, value, rule)
            if forced_entry is not None:
                forced.append(forced_entry)
        for key, prefix in (self.attempt(self.table, raw, "within", rule) or {}).items():
            within_entry = self.attempt(self.within_entry, key, prefix, rule)
            if within_entry is not None:
                within.append(within_entry)
        self.settle(start)
        return Narrowing(keep=keep, clamp=tuple(clamp), set=tuple(forced), within=tuple(within))

    def keep(self, raw: Mapping[str, Any], rule: str) -> tuple[str, ...]:
        keep = self.strings(raw, "keep", rule, ())
        for key in keep:
            if "." in key:
                raise self.fail(
                    f"{key!r}: keep names top-level arguments, not dotted paths",
                    rule=rule,
                    field="narrow.keep",
                )
        return keep

    def clamp_entry(
        self, key: str, bound: object, rule: str
    ) -> tuple[tuple[str, ...], int | float]:
        if not _is_number(bound) or (type(bound) is float and not math.isfinite(bound)):
            raise self.fail(
                "a clamp bound must be a finite number", rule=rule, field=f"narrow.clamp.{key}"
            )
        assert isinstance(bound, int | float)
        return (self.path(key, rule, "narrow.clamp"), bound)

    def set_entry(self, key: str, value: object, rule: str) -> tuple[tuple[str, ...], Any]:
        self.json_value(value, rule, f"narrow.set.{key}")
        return (self.path(key, rule, "narrow.set"), freeze(value))

    def within_entry(self, key: str, prefix: object, rule: str) -> tuple[tuple[str, ...], str]:
        problem = check_prefix(prefix) if isinstance(prefix, str) else "must be a string"
        if problem is not None:
            raise self.fail(f"a within prefix {problem}", rule=rule, field=f"narrow.within.{key}")
        assert isinstance(prefix, str)
        return (self.path(key, rule, "narrow.within"), prefix)

    def table(self, raw: Mapping[str, Any], key: str, rule: str) -> Mapping[str, Any]:
        value = raw.get(key, {})
        if not isinstance(value, Mapping):
            raise self.fail("must be a table", rule=rule, field=f"narrow.{key}")
        return value

    def approval(self, raw: object, rule: str) -> ApprovalSpec:
        start = self.mark()
        self.keys(raw, _APPROVAL_KEYS, rule, "approval")
        assert isinstance(raw, Mapping)
        timeout = raw.get("timeout_s", _DEFAULT_APPROVAL_TIMEOUT_S)
        if not _is_number(timeout) or not 0 < timeout < math.inf:
            self.attempt(self.raise_, self.fail(
                "must be a positive number of seconds", rule=rule, field="approval.timeout_s"
            ))  # fmt: skip
        approvers = None
        if "approvers" in raw:
            approvers = self.attempt(self.strings, raw, "approvers", rule, ())
        self.settle(start)
        return ApprovalSpec(timeout_s=float(timeout), approvers=approvers)

    def limit(self, raw: object, rule: str, effect: Effect) -> LimitSpec:
        if effect not in (Effect.DENY, Effect.APPROVAL):
            # A limited rule matches only over its limit: on an allow rule that would
            # allow only what is over budget, the opposite of what its author meant.
            raise self.fail(
                "a limit belongs on a deny or approval rule (it matches when the limit is"
                " exceeded); allow under the limit with a separate allow rule",
                rule=rule,
                field="limit",
            )
        self.keys(raw, _LIMIT_KEYS, rule, "limit")
        assert isinstance(raw, Mapping)
        key = raw.get("key")
        parts = [key] if isinstance(key, str) else key
        if not isinstance(parts, list) or not parts:
            raise self.fail(
                "needs a key part or an array of them (agent, verb, resource, args.<path>)",
                rule=rule,
                field="limit.key",
            )
        for part in parts:
            self.limit_path(part, rule, "limit.key", names=True)
        if len(set(parts)) != len(parts):
            raise self.fail("names a key part twice", rule=rule, field="limit.key")
        window = raw.get("window_s")
        if type(window) is not int or not 0 < window <= MAX_WINDOW_S:
            raise self.fail(
                f"must be a whole number of seconds in 1..{MAX_WINDOW_S}",
                rule=rule,
                field="limit.window_s",
            )
        count, path, total = raw.get("max_count"), raw.get("max_sum"), raw.get("sum_max")
        if (count is None) == (path is None):
            raise self.fail(
                "needs exactly one of max_count, or max_sum with sum_max", rule=rule, field="limit"
            )
        if count is not None:
            if total is not None:
                raise self.fail("sum_max goes with max_sum", rule=rule, field="limit.sum_max")
            if type(count) is not int or not 0 <= count <= MAX_AMOUNT:
                raise self.fail(
                    f"must be an integer in 0..{MAX_AMOUNT}", rule=rule, field="limit.max_count"
                )
            return LimitSpec(key=tuple(parts), window_s=window, max_count=count)
        self.limit_path(path, rule, "limit.max_sum", names=False)
        try:
            micros = micros_of(total)
        except ValueError as exc:
            raise self.fail(
                f"must be a number in 0..{MAX_AMOUNT} with at most six decimal places ({exc})",
                rule=rule,
                field="limit.sum_max",
            ) from None
        return LimitSpec(key=tuple(parts), window_s=window, max_sum=path, sum_max_micros=micros)

    def limit_path(self, part: object, rule: str, field: str, *, names: bool) -> None:
        if names and part in NAMES:
            return
        if isinstance(part, str) and part.startswith("args."):
            self.path(part[len("args.") :], rule, field)
            return
        allowed = "agent, verb, resource or args.<path>" if names else "an args.<path>"
        raise self.fail(f"{part!r} is not {allowed}", rule=rule, field=field)

    def scrub(self, raw: object) -> ScrubSettings:
        self.keys(raw, _SCRUB_KEYS, None, "scrub")
        assert isinstance(raw, Mapping)
        detectors = raw.get("detectors", "*")
        if detectors in ("*", ["*"]):
            names = tuple(sorted(DETECTOR_NAMES))
        elif isinstance(detectors, list) and all(isinstance(d, str) for d in detectors):
            names = tuple(detectors)
        else:
            raise self.fail('must be "*" or an array of detector names', field="scrub.detectors")
        action = raw.get("action", "redact")
        if action not in ("redact", "block"):
            raise self.fail(f"must be 'redact' or 'block', not {action!r}", field="scrub.action")
        block = raw.get("block", [])
        if not isinstance(block, list) or not all(isinstance(d, str) for d in block):
            raise self.fail("must be an array of detector names", field="scrub.block")
        for where, listed in (("scrub.detectors", names), ("scrub.block", block)):
            unknown = sorted(set(listed) - DETECTOR_NAMES)
            if unknown:
                known = ", ".join(sorted(DETECTOR_NAMES))
                raise self.fail(f"unknown detector {unknown[0]!r} (known: {known})", field=where)
        blocked = names if action == "block" else tuple(block)
        limits = {}
        for key, default in (("max_depth", 32), ("max_bytes", 1 << 20)):
            value = raw.get(key, default)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise self.fail("must be a positive integer", field=f"scrub.{key}")
            limits[key] = value
        if limits["max_depth"] > MAX_SCRUB_DEPTH:
            raise self.fail(f"must be at most {MAX_SCRUB_DEPTH}", field="scrub.max_depth")
        return ScrubSettings(
            detectors=names,
            block=tuple(sorted(set(blocked))),
            max_depth=limits["max_depth"],
            max_bytes=limits["max_bytes"],
        )
