"""Policies: parsed once into an immutable, pre-indexed object (SPEC §4).

Loading is strict: an unknown key, a duplicate rule id, a bad glob or regex,
a wrong type, an unknown effect or detector raises `PolicyError` naming the
file, the rule and the field. Nothing half-loaded is ever returned.
"""

from __future__ import annotations

import math
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from runtime._canonical import jcs_bytes, sha256_hex, value_sha256
from runtime._conditions import OPERATORS, Condition
from runtime._detectors import DETECTOR_NAMES
from runtime._errors import CanonicalEncodingError, PolicyError
from runtime._glob import GlobError, compile_globs
from runtime._narrowing import Narrowing
from runtime._verdict import Effect

__all__ = ["ApprovalSpec", "Policy", "Rule", "ScrubSettings"]

_TOP_KEYS: Final = frozenset({"policy_id", "description", "default", "rules", "scrub"})
_RULE_KEYS: Final = frozenset(
    {"id", "description", "agents", "verbs", "resources", "effect", "when", "narrow",
     "approval", "scrub_exempt"}
)  # fmt: skip
_NARROW_KEYS: Final = frozenset({"clamp", "keep", "set", "within"})
_APPROVAL_KEYS: Final = frozenset({"timeout_s", "approvers"})
_SCRUB_KEYS: Final = frozenset({"detectors", "action", "block", "max_depth", "max_bytes"})
_GLOB_CHARS: Final = frozenset("*?")
_DEFAULT_APPROVAL_TIMEOUT_S: Final = 600


@dataclass(frozen=True, slots=True)
class ApprovalSpec:
    """An ``approval`` rule's terms: how long a human has, and who may approve (None: anyone)."""

    timeout_s: float
    approvers: tuple[str, ...] | None


@dataclass(frozen=True, slots=True)
class ScrubSettings:
    """The policy's ``[scrub]`` table.

    Attributes:
        detectors: the detectors that run (all of them by default).
        block: detectors whose finding denies the action instead of being redacted.
        max_depth: deepest argument nesting scanned; deeper arguments are denied.
        max_bytes: most UTF-8 text scanned per call; more is denied.
    """

    detectors: tuple[str, ...] = tuple(sorted(DETECTOR_NAMES))
    block: tuple[str, ...] = ()
    max_depth: int = 32
    max_bytes: int = 1 << 20


@dataclass(frozen=True, slots=True)
class Rule:
    """One policy rule, with its globs compiled."""

    id: str
    effect: Effect
    agents: tuple[str, ...] = ("*",)
    verbs: tuple[str, ...] = ("*",)
    resources: tuple[str, ...] = ("**",)
    when: tuple[Condition, ...] = ()
    narrow: Narrowing | None = None
    approval: ApprovalSpec | None = None
    scrub_exempt: tuple[str, ...] = ()
    description: str = ""
    _agents: re.Pattern[str] = field(init=False, repr=False, compare=False)
    _verbs: re.Pattern[str] = field(init=False, repr=False, compare=False)
    _resources: re.Pattern[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_agents", compile_globs(self.agents))
        object.__setattr__(self, "_verbs", compile_globs(self.verbs))
        object.__setattr__(self, "_resources", compile_globs(self.resources))

    def matches(self, agent: str, verb: str, resource: str, args: Mapping[str, Any]) -> bool:
        """Whether this rule applies to the action.

        Raises:
            ConditionTypeError: a ``when`` condition met an argument of the wrong type.
        """
        return (
            self._verbs.match(verb) is not None
            and self._agents.match(agent) is not None
            and self._resources.match(resource) is not None
            and all(condition.holds(args) for condition in self.when)
        )


class Policy:
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
        "_by_verb",
        "_wildcard_verb_rules",
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
        """Validate ``data``; prefer `from_toml` / `from_dict`.

        Raises:
            PolicyError: the policy is malformed.
        """
        parsed = _Parser(origin).policy(data)
        self.policy_id: str = parsed["policy_id"]
        self.default: Effect = parsed["default"]
        self.rules: tuple[Rule, ...] = parsed["rules"]
        self.scrub: ScrubSettings = parsed["scrub"]
        try:
            self.policy_sha256 = value_sha256(data)
        except CanonicalEncodingError as exc:
            raise PolicyError(str(exc), source=origin) from None
        self.source = source
        self.source_name = source_name
        self.source_media_type = source_media_type
        self.source_sha256 = sha256_hex(source)
        # Pre-index by literal verb so that a check only looks at rules that can match.
        wildcard: set[int] = set()
        literal: dict[str, set[int]] = {}
        for index, rule in enumerate(self.rules):
            if any(set(verb) & _GLOB_CHARS for verb in rule.verbs):
                wildcard.add(index)
            else:
                for verb in rule.verbs:
                    literal.setdefault(verb, set()).add(index)
        self._wildcard_verb_rules = tuple(self.rules[i] for i in sorted(wildcard))
        self._by_verb = {
            verb: tuple(self.rules[i] for i in sorted(indices | wildcard))
            for verb, indices in literal.items()
        }

    def __setattr__(self, name: str, value: object) -> None:
        if hasattr(self, name):
            raise AttributeError(f"Policy is immutable: cannot set {name!r}")
        object.__setattr__(self, name, value)

    def __repr__(self) -> str:
        return (
            f"Policy(policy_id={self.policy_id!r}, rules={len(self.rules)},"
            f" policy_sha256={self.policy_sha256[:12]}...)"
        )

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

        Raises:
            PolicyError: the policy is malformed.
        """
        if not isinstance(mapping, Mapping):
            raise PolicyError(
                f"a policy must be a mapping, not {type(mapping).__name__}", source=origin
            )
        try:
            source = jcs_bytes(mapping)
        except CanonicalEncodingError as exc:
            raise PolicyError(str(exc), source=origin) from None
        return cls(
            mapping,
            source=source,
            source_name="policy.json",
            source_media_type="application/json",
            origin=origin,
        )

    def candidate_rules(self, verb: str) -> tuple[Rule, ...]:
        """The rules that may match ``verb``, in file order (an index lookup, no matching)."""
        return self._by_verb.get(verb, self._wildcard_verb_rules)


class _Parser:
    """Validates policy data field by field; every error names where it is."""

    def __init__(self, origin: str) -> None:
        self.origin = origin

    def fail(self, problem: str, rule: str | None = None, field: str | None = None) -> PolicyError:
        return PolicyError(problem, source=self.origin, rule=rule, field=field)

    def policy(self, data: Mapping[str, Any]) -> dict[str, Any]:
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
        return {
            "policy_id": policy_id,
            "default": Effect(default),
            "rules": tuple(rules),
            "scrub": self.scrub(data.get("scrub", {})),
        }

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
                compile_globs(patterns)
            except GlobError as exc:
                raise self.fail(str(exc), rule=rule_id, field=key) from None
        exempt = self.strings(raw, "scrub_exempt", rule_id, ())
        return Rule(
            id=rule_id,
            effect=effect,
            agents=globs["agents"],
            verbs=globs["verbs"],
            resources=globs["resources"],
            when=self.when(raw.get("when", {}), rule_id),
            narrow=self.narrow(raw["narrow"], rule_id) if "narrow" in raw else None,
            approval=self.approval(raw.get("approval", {}), rule_id)
            if effect is Effect.APPROVAL
            else None,
            scrub_exempt=exempt,
            description=self.optional_text(raw, "description", rule_id),
        )

    def path(self, key: object, rule: str, field: str) -> tuple[str, ...]:
        if not isinstance(key, str) or not key or "" in key.split("."):
            raise self.fail(f"{key!r} is not a dotted argument path", rule=rule, field=field)
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
            conditions.append(Condition(path, tuple(ops.items())))
        return tuple(conditions)

    def operand(self, op: object, operand: object, rule: str, field: str) -> None:
        if op not in OPERATORS:
            raise self.fail(
                f"unknown operator (use one of {', '.join(sorted(OPERATORS))})",
                rule=rule,
                field=field,
            )
        self.json_value(operand, rule, field)
        number = isinstance(operand, int | float) and not isinstance(operand, bool)
        if op in ("gt", "ge", "lt", "le") and not number:
            raise self.fail("needs a number", rule=rule, field=field)
        if op == "in" and not isinstance(operand, list):
            raise self.fail("needs an array", rule=rule, field=field)
        if op in ("prefix", "match") and not isinstance(operand, str):
            raise self.fail("needs a string", rule=rule, field=field)
        if op == "exists" and not isinstance(operand, bool):
            raise self.fail("needs true or false", rule=rule, field=field)
        if op == "match":
            assert isinstance(operand, str)
            try:
                re.compile(operand)
            except re.error as exc:
                raise self.fail(f"bad regex: {exc}", rule=rule, field=field) from None

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
        clamp, forced, within = [], [], []
        for key, bound in self.table(raw, "clamp", rule).items():
            if (
                not isinstance(bound, int | float)
                or isinstance(bound, bool)
                or not math.isfinite(bound)
            ):
                raise self.fail(
                    "a clamp bound must be a finite number", rule=rule, field=f"narrow.clamp.{key}"
                )
            clamp.append((self.path(key, rule, "narrow.clamp"), bound))
        for key, value in self.table(raw, "set", rule).items():
            self.json_value(value, rule, f"narrow.set.{key}")
            forced.append((self.path(key, rule, "narrow.set"), value))
        for key, prefix in self.table(raw, "within", rule).items():
            if not isinstance(prefix, str) or not prefix.startswith("/"):
                raise self.fail(
                    "a within prefix must be an absolute path",
                    rule=rule,
                    field=f"narrow.within.{key}",
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
        if (
            not isinstance(timeout, int | float)
            or isinstance(timeout, bool)
            or not 0 < timeout < math.inf
        ):
            raise self.fail(
                "must be a positive number of seconds", rule=rule, field="approval.timeout_s"
            )
        approvers = None
        if "approvers" in raw:
            approvers = self.strings(raw, "approvers", rule, ())
        return ApprovalSpec(timeout_s=float(timeout), approvers=approvers)

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
        return ScrubSettings(
            detectors=names,
            block=tuple(sorted(set(blocked))),
            max_depth=limits["max_depth"],
            max_bytes=limits["max_bytes"],
        )
