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
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

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

__all__ = ["MAX_SCRUB_DEPTH", "LoadedPolicy", "ScrubSettings", "load_policy"]

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


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


class _Parser:
    """Validates policy data field by field; every error names where it is."""

    def __init__(self, origin: str) -> None:
        self.origin = origin

    def fail(self, problem: str, rule: str | None = None, field: str | None = None) -> PolicyError:
        return PolicyError(problem, source=self.origin, rule=rule, field=field)

    def policy(self, data: Mapping[str, Any]) -> LoadedPolicy:
        self.keys(data, _TOP_KEYS, None, None)
        policy_id = data.get("policy_id")
        if not isinstance(policy_id, str) or not policy_id:
            raise self.fail(
                "policy_id is required and must be a non-empty string", field="policy_id"
            )
        self.optional_text(data, "description", None)
        default = data.get("default", "deny")
        if default not in ("deny", "allow"):
            raise self.fail(f"must be 'deny' or 'allow', not {default!r}", field="default")
        raw_rules = data.get("rules", [])
        if not isinstance(raw_rules, list):
            raise self.fail("must be an array of tables ([[rules]])", field="rules")
        rules: list[Rule] = []
        seen: set[str] = set()
        for index, raw in enumerate(raw_rules):
            rule = self.rule(raw, index)
            if rule.id in seen:
                raise self.fail("duplicate rule id", rule=rule.id, field="id")
            seen.add(rule.id)
            rules.append(rule)
        return LoadedPolicy(
            policy_id=policy_id,
            default=Effect(default),
            rules=tuple(rules),
            scrub=self.scrub(data.get("scrub", {})),
        )

    def keys(
        self, table: object, allowed: frozenset[str], rule: str | None, prefix: str | None
    ) -> None:
        if not isinstance(table, Mapping):
            raise self.fail(f"must be a table, not {type(table).__name__}", rule=rule, field=prefix)
        for key in table:
            if key not in allowed:
                name = key if prefix is None else f"{prefix}.{key}"
                hint = ", ".join(sorted(allowed))
                raise self.fail(f"unknown key (allowed here: {hint})", rule=rule, field=str(name))

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
        self.keys(raw, _RULE_KEYS, rule_id, None)
        effect_text = raw.get("effect")
        if effect_text not in tuple(Effect):
            allowed = ", ".join(e.value for e in Effect)
            raise self.fail(
                f"must be one of {allowed}, not {effect_text!r}", rule=rule_id, field="effect"
            )
        effect = Effect(effect_text)
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
        globs = {key: self.strings(raw, key, rule_id, default) for key, default in
                 (("agents", ("*",)), ("verbs", ("*",)), ("resources", ("**",)))}  # fmt: skip
        for key, patterns in globs.items():
            try:
                GlobSet(patterns, resources=key == "resources", field=key)
            except GlobError as exc:
                raise self.fail(str(exc), rule=rule_id, field=key) from None
        exempt = self.strings(raw, "scrub_exempt", rule_id, ())
        for dotted in exempt:
            self.path(dotted, rule_id, "scrub_exempt")
        when = self.when(raw.get("when", {}), rule_id)
        narrow = self.narrow(raw["narrow"], rule_id) if "narrow" in raw else None
        approval = (
            self.approval(raw.get("approval", {}), rule_id) if effect is Effect.APPROVAL else None
        )
        limit = self.limit(raw["limit"], rule_id, effect) if "limit" in raw else None
        shadow = raw.get("shadow", False)
        if type(shadow) is not bool:
            raise self.fail("must be true or false", rule=rule_id, field="shadow")
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
            description=self.optional_text(raw, "description", rule_id),
            limit=limit,
            shadow=shadow,
        )

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
        conditions = []
        for key, ops in raw.items():
            field_name = f"when.{key}"
            path = self.path(key, rule, "when")
            if not isinstance(ops, Mapping) or not ops:
                raise self.fail(
                    "expected a table of operators, such as { gt = 50 }",
                    rule=rule,
                    field=field_name,
                )
            for op, operand in ops.items():
                self.operand(op, operand, rule, f"{field_name}.{op}")
            if ops.get("exists") is False and len(ops) > 1:
                raise self.fail(
                    "exists = false stands alone: with other operators it could never hold",
                    rule=rule,
                    field=field_name,
                )
            frozen = tuple((op, freeze(operand)) for op, operand in ops.items())
            conditions.append(Condition(rule, path, frozen))
        return tuple(conditions)

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
        self.keys(raw, _NARROW_KEYS, rule, "narrow")
        assert isinstance(raw, Mapping)
        if not raw:
            raise self.fail(
                "needs at least one of clamp, keep, set, within", rule=rule, field="narrow"
            )
        keep = None
        if "keep" in raw:
            keep = self.strings(raw, "keep", rule, ())
            for key in keep:
                if "." in key:
                    raise self.fail(
                        f"{key!r}: keep names top-level arguments, not dotted paths",
                        rule=rule,
                        field="narrow.keep",
                    )
        clamp, forced, within = [], [], []
        for key, bound in self.table(raw, "clamp", rule).items():
            if not _is_number(bound) or (type(bound) is float and not math.isfinite(bound)):
                raise self.fail(
                    "a clamp bound must be a finite number", rule=rule, field=f"narrow.clamp.{key}"
                )
            clamp.append((self.path(key, rule, "narrow.clamp"), bound))
        for key, value in self.table(raw, "set", rule).items():
            self.json_value(value, rule, f"narrow.set.{key}")
            forced.append((self.path(key, rule, "narrow.set"), freeze(value)))
        for key, prefix in self.table(raw, "within", rule).items():
            problem = check_prefix(prefix) if isinstance(prefix, str) else "must be a string"
            if problem is not None:
                raise self.fail(
                    f"a within prefix {problem}", rule=rule, field=f"narrow.within.{key}"
                )
            within.append((self.path(key, rule, "narrow.within"), prefix))
        return Narrowing(keep=keep, clamp=tuple(clamp), set=tuple(forced), within=tuple(within))

    def table(self, raw: Mapping[str, Any], key: str, rule: str) -> Mapping[str, Any]:
        value = raw.get(key, {})
        if not isinstance(value, Mapping):
            raise self.fail("must be a table", rule=rule, field=f"narrow.{key}")
        return value

    def approval(self, raw: object, rule: str) -> ApprovalSpec:
        self.keys(raw, _APPROVAL_KEYS, rule, "approval")
        assert isinstance(raw, Mapping)
        timeout = raw.get("timeout_s", _DEFAULT_APPROVAL_TIMEOUT_S)
        if not _is_number(timeout) or not 0 < timeout < math.inf:
            raise self.fail(
                "must be a positive number of seconds", rule=rule, field="approval.timeout_s"
            )
        approvers = None
        if "approvers" in raw:
            approvers = self.strings(raw, "approvers", rule, ())
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
