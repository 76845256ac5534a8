"""Cedar policies as a policy backend (issue 11, ADR 0028), through ``cedarpy``.

``CedarPolicy.from_file(path)`` / ``from_str(text)`` parse the Cedar text once.
Each Cedar statement becomes a ghost `Rule` whose effect its kind and its
annotations give:

* ``forbid`` → ``deny`` (it takes no ``ghost_*`` annotation but ``@ghost_limit``);
* ``permit`` → ``allow``, or what ``@ghost_effect("allow" | "narrow" |
  "approval")`` says;
* ``@ghost_narrow_clamp``, ``@ghost_narrow_keep``, ``@ghost_narrow_set``,
  ``@ghost_narrow_within`` hold the value the TOML format has under
  ``narrow.clamp`` … ``narrow.within``, written as TOML (``@ghost_narrow_clamp("{
  limit = 100 }")``, ``@ghost_narrow_keep("['table', 'limit']")``);
  ``@ghost_approval_timeout_s("600")`` and ``@ghost_approval_approvers("['alice']")``
  the ``approval`` table's two fields; ``@ghost_scrub_exempt("['to']")`` the
  rule's ``scrub_exempt``; ``@ghost_limit("{ key = 'agent', window_s = 60,
  max_count = 20 }")`` its ``limit`` (ADR 0032: on a ``forbid``, "deny over
  the limit"; on an ``approval`` permit, "ask over it"). They are validated by
  the TOML loader itself, so both formats accept exactly the same narrowings,
  approval terms and limits;
* ``@id("...")`` is the rule id recorded as ``matched_policy`` (default: Cedar's
  positional id, ``policy0``, ``policy1``, … — which moves when statements do);
* ``@ghost_shadow`` (or ``@ghost_shadow("true")``) marks a statement evaluated
  but not enforced, as ``shadow = true`` does a TOML rule (ADR 0031): its
  satisfaction — and an error in it — never changes the verdict, and the gate
  records what the policy would have decided with it enforced.

A ``ghost_*`` annotation not listed here, a template, a duplicate id or a
``deny`` written as ``@ghost_effect`` on a ``permit`` is a `PolicyError`.

Matching: the action becomes a Cedar request (`runtime._cedar_request`), which
is evaluated against a copy of the policy set in which every statement is a
``permit`` — so Cedar reports *every* satisfied statement, ``forbid`` ones
included, and the gate's derivation (`derive`) applies the verdict precedence
of SPEC §3 to them: any ``forbid`` → ``deny``, none satisfied → ``deny``
(Cedar's default), else the permits' effects, narrowings and approvals. That
is exactly Cedar's own decision, refined into ghost's five verdicts. Any
evaluation error — Cedar would skip the statement — denies instead
(`CedarEvaluationError`). The parsed set is built once and reused.
"""

from __future__ import annotations

import copy
import importlib
import json
import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from runtime._backend import SealedPolicy
from runtime._canonical import jcs_bytes, loads_strict, sha256_hex, value_sha256
from runtime._cedar_request import CedarMapping, convention_request, encode_request
from runtime._diagnosis import PartCheck, RuleDiagnosis
from runtime._errors import CanonicalEncodingError, CedarEvaluationError, PolicyError
from runtime._frozen import plain_copy
from runtime._policy_load import ScrubSettings, load_policy
from runtime._resource import canonical_resource
from runtime._rule import Rule
from runtime._shadow_rules import ShadowRulesView
from runtime._verdict import Effect

__all__ = ["CEDAR_BUNDLE_MEDIA_TYPE", "CEDAR_MEDIA_TYPE", "CedarPolicy"]

CEDAR_MEDIA_TYPE: Final = "application/cedar"
"""The media type of a Cedar policy attached to a run."""
CEDAR_BUNDLE_MEDIA_TYPE: Final = "application/vnd.ghost.cedar-bundle+json"
"""The media type of the attachment of a Cedar policy built with a schema, scrub settings
or a mapping: the JSON of everything its ``policy_sha256`` covers (`CedarPolicy.from_bundle`)."""

_EFFECTS: Final = frozenset({"allow", "narrow", "approval"})
# annotation -> (rule key, sub-key or None): where its TOML value goes in the rule table.
_VALUE_ANNOTATIONS: Final = {
    "ghost_narrow_clamp": ("narrow", "clamp"),
    "ghost_narrow_keep": ("narrow", "keep"),
    "ghost_narrow_set": ("narrow", "set"),
    "ghost_narrow_within": ("narrow", "within"),
    "ghost_approval_timeout_s": ("approval", "timeout_s"),
    "ghost_approval_approvers": ("approval", "approvers"),
    "ghost_scrub_exempt": ("scrub_exempt", None),
    "ghost_limit": ("limit", None),
    "ghost_shadow": ("shadow", None),
}
_ANNOTATIONS: Final = frozenset({"ghost_effect", *_VALUE_ANNOTATIONS})
_POSITIONAL: Final = re.compile(r"policy([0-9]+)")
# Cedar's message starts with the positional id of the statement that failed.
_FAILED: Final = re.compile(r"error while evaluating policy `(policy[0-9]+)`")


def _cedarpy(origin: str) -> Any:
    """Import cedarpy on first use, so that ``import runtime`` never does."""
    try:
        return importlib.import_module("cedarpy")
    except ImportError:
        raise PolicyError(
            "Cedar policies need cedarpy: install ghost-sdk[cedar]", source=origin
        ) from None


class CedarPolicy(SealedPolicy):
    """A Cedar policy set as a ghost policy backend. Build it with `from_file` or `from_str`.

    Attributes:
        policy_id: the id recorded with every decision.
        default: always ``deny`` (Cedar's default).
        rules: one `Rule` per Cedar statement, in file order (their globs are
            the defaults: Cedar does the matching).
        scrub: the scrubber settings (the TOML ``[scrub]`` table, passed as ``scrub=``).
        policy_sha256: content address of the Cedar text, the schema, the
            policy id, the scrub settings and the mapping's name.
        source: what the run attaches: the Cedar text's bytes, or, for a policy
            built with a schema, scrub settings or a mapping, the bundle
            (RFC 8785 JSON) of everything ``policy_sha256`` covers;
            ``source_name``, ``source_media_type`` (``application/cedar``, or
            `CEDAR_BUNDLE_MEDIA_TYPE`) and ``source_sha256`` describe them.
    """

    __slots__ = (
        "_authorize",
        "_by_position",
        "_evaluation",
        "_mapping",
        "_schema",
        "_shadowed",
        "_statements",
        "default",
        "policy_id",
        "policy_sha256",
        "rules",
        "schema_text",
        "scrub",
        "source",
        "source_media_type",
        "source_name",
        "source_sha256",
    )

    def __init__(
        self,
        text: str,
        *,
        policy_id: str,
        schema: str | None = None,
        mapping: CedarMapping | None = None,
        scrub: Mapping[str, Any] | None = None,
        source_name: str = "policy.cedar",
        origin: str = "<str>",
    ) -> None:
        """Parse and validate ``text``; prefer `from_file` / `from_str`.

        Raises:
            PolicyError: cedarpy is missing, or the policy, schema or annotations are malformed.
        """
        if type(text) is not str:
            raise PolicyError("Cedar policy text must be a str", source=origin)
        if mapping is not None and not callable(mapping):
            raise PolicyError("mapping must be callable", source=origin, field="mapping")
        cedarpy = _cedarpy(origin)
        statements = _statements(cedarpy, text, origin)
        if scrub is not None and not isinstance(scrub, Mapping):
            raise PolicyError("scrub must be a mapping (the [scrub] table)", source=origin)
        scrub_table = plain_copy(dict(scrub) if scrub is not None else {}, origin=origin)
        loaded = _load(statements, policy_id, scrub_table, origin)
        self.policy_id: str = loaded.policy_id
        self.default: Effect = Effect.DENY
        self.rules: tuple[Rule, ...] = loaded.rules
        self.scrub: ScrubSettings = loaded.scrub
        self.schema_text = schema
        self._schema = _schema(cedarpy, text, schema, statements, origin)
        # Every statement a permit: Cedar then reports every satisfied one (module docstring).
        permits = {key: {**copy.deepcopy(body), "effect": "permit"} for key, body in statements}
        evaluation = {"staticPolicies": permits, "templates": {}, "templateLinks": []}
        self._evaluation = cedarpy.PolicySet.from_json_str(json.dumps(evaluation))
        self._statements = tuple((key, copy.deepcopy(body)) for key, body in statements)
        # Cedar's positional id -> (file position, rule): reasons come back unordered.
        self._by_position: dict[str, tuple[int, Rule]] = {
            key: (index, rule)
            for index, ((key, _), rule) in enumerate(zip(statements, self.rules, strict=True))
        }
        self._shadowed = any(rule.shadow for rule in self.rules)
        self._mapping: CedarMapping = convention_request if mapping is None else mapping
        self._authorize = cedarpy.is_authorized
        described = {
            "format": "cedar",
            "policy_id": self.policy_id,
            "cedar": text,
            "schema": schema,
            "scrub": scrub_table,
            "mapping": None if mapping is None else _qualified_name(mapping),
        }
        try:
            self.policy_sha256: str = value_sha256(described)
            # The run attaches what the verdicts depend on: the Cedar text alone when
            # that is all, else the bundle of everything `policy_sha256` covers, so a
            # run with a schema or scrub settings is self-contained too (a mapping is
            # code: the bundle names it, `from_bundle` needs it handed back).
            bundled = schema is not None or bool(scrub_table) or mapping is not None
            self.source = jcs_bytes(described) if bundled else text.encode("utf-8")
        except CanonicalEncodingError as exc:
            raise PolicyError(str(exc), source=origin) from None
        self.source_name = f"{source_name}.json" if bundled else source_name
        self.source_media_type = CEDAR_BUNDLE_MEDIA_TYPE if bundled else CEDAR_MEDIA_TYPE
        self.source_sha256 = sha256_hex(self.source)

    @classmethod
    def from_file(
        cls,
        path: str | Path,
        *,
        schema: str | Path | None = None,
        mapping: CedarMapping | None = None,
        policy_id: str | None = None,
        scrub: Mapping[str, Any] | None = None,
    ) -> CedarPolicy:
        """Load a Cedar policy file.

        Args:
            path: the ``.cedar`` file.
            schema: a Cedar schema (Cedar or JSON schema text, or a `Path` to
                read); policies are validated against it on load and requests
                on every check.
            mapping: replaces the request convention (`runtime._cedar_request`).
            policy_id: recorded with every decision (default: the file's stem).
            scrub: the scrubber settings, as the TOML ``[scrub]`` table.

        Raises:
            PolicyError: the file cannot be read, is not UTF-8, or the policy is malformed.
        """
        origin = str(path)
        text = _read(Path(path), origin)
        schema_text = _read(schema, str(schema)) if isinstance(schema, Path) else schema
        return cls(
            text,
            policy_id=Path(path).stem if policy_id is None else policy_id,
            schema=schema_text,
            mapping=mapping,
            scrub=scrub,
            source_name=Path(path).name,
            origin=origin,
        )

    @classmethod
    def from_str(
        cls,
        text: str,
        *,
        policy_id: str = "cedar",
        schema: str | None = None,
        mapping: CedarMapping | None = None,
        scrub: Mapping[str, Any] | None = None,
    ) -> CedarPolicy:
        """Build a Cedar policy from its text (arguments as in `from_file`).

        Raises:
            PolicyError: the policy is malformed.
        """
        return cls(text, policy_id=policy_id, schema=schema, mapping=mapping, scrub=scrub)

    @classmethod
    def from_bundle(cls, data: bytes, *, mapping: CedarMapping | None = None) -> CedarPolicy:
        """Rebuild a Cedar policy from the bundle a run attaches (`CEDAR_BUNDLE_MEDIA_TYPE`).

        Args:
            data: the attachment's bytes (JSON: the Cedar text, schema, policy
                id, scrub settings and the mapping's name).
            mapping: the mapping the bundle names, when it names one.

        Raises:
            PolicyError: the bundle is malformed, names a mapping and none was
                given (or another one was), or its policy does not load.
        """
        origin = "<cedar bundle>"
        try:
            bundle = loads_strict(data)
        except ValueError as exc:
            raise PolicyError(f"not a Cedar bundle: {exc}", source=origin) from None
        fields = {"format", "policy_id", "cedar", "schema", "scrub", "mapping"}
        if not isinstance(bundle, dict) or set(bundle) != fields or bundle["format"] != "cedar":
            raise PolicyError("not a Cedar bundle (its fields are not ghost's)", source=origin)
        if not isinstance(bundle["cedar"], str) or not isinstance(bundle["policy_id"], str):
            raise PolicyError("a Cedar bundle's cedar and policy_id are text", source=origin)
        if bundle["schema"] is not None and not isinstance(bundle["schema"], str):
            raise PolicyError("a Cedar bundle's schema is text or null", source=origin)
        if not isinstance(bundle["scrub"], dict):
            raise PolicyError("a Cedar bundle's scrub is a table", source=origin)
        named = bundle["mapping"]
        given = None if mapping is None else _qualified_name(mapping)
        if named != given:
            raise PolicyError(
                f"the bundle was built with mapping {named!r}, not {given!r}: pass that mapping",
                source=origin,
                field="mapping",
            )
        return cls(
            bundle["cedar"],
            policy_id=bundle["policy_id"],
            schema=bundle["schema"],
            mapping=mapping,
            scrub=bundle["scrub"],
            origin=origin,
        )

    def matching_rules(
        self, agent: str, verb: str, resource: str, args: Mapping[str, Any]
    ) -> tuple[Rule, ...]:
        """The rules whose Cedar statements the action satisfies, in file order.

        Statements marked ``@ghost_shadow`` are left out, and so is an error in
        one of them: they are not enforced (`with_shadow_rules` counts them).

        Raises:
            AmbiguousResource: the resource cannot be canonicalised.
            CedarValueError: the action holds a value Cedar cannot represent.
            CedarEvaluationError: Cedar reported an error (for any enforced
                statement), or no decision; or a custom mapping returned
                something else than a `CedarRequest`.
        """
        return self._match(agent, verb, resource, args, with_shadow=False)

    def with_shadow_rules(self) -> ShadowRulesView | None:
        """This policy with its ``@ghost_shadow`` statements enforced, or None without any.

        The gate derives, from the view, what the policy would have decided with
        them enforced, and records it beside the verdict (ADR 0031).
        """
        if not self._shadowed:
            return None

        def matching(
            agent: str, verb: str, resource: str, args: Mapping[str, Any]
        ) -> tuple[Rule, ...]:
            return self._match(agent, verb, resource, args, with_shadow=True)

        return ShadowRulesView(self, matching)

    def _match(
        self, agent: str, verb: str, resource: str, args: Mapping[str, Any], *, with_shadow: bool
    ) -> tuple[Rule, ...]:
        canonical = canonical_resource(resource)
        encoded = encode_request(self._mapping(agent, verb, canonical, args))
        answer = self._authorize(encoded.request, self._evaluation, encoded.entities, self._schema)
        diagnostics = answer.diagnostics
        by_position = self._by_position
        for message in diagnostics.errors:
            failed = _FAILED.match(message)
            entry = by_position.get(failed.group(1)) if failed is not None else None
            if entry is None:
                raise CedarEvaluationError("the request was refused")
            if with_shadow or not entry[1].shadow:
                raise CedarEvaluationError("its evaluation failed", entry[1].id)
        if answer.decision.value == "NoDecision":
            raise CedarEvaluationError("no decision was returned")
        # A KeyError (a statement Cedar names that was not loaded) denies too.
        ordered = sorted(by_position[key] for key in diagnostics.reasons)
        return tuple(rule for _, rule in ordered if with_shadow or not rule.shadow)

    def diagnose_rules(
        self, agent: str, verb: str, resource: str, args: Mapping[str, Any]
    ) -> tuple[RuleDiagnosis, ...]:
        """Every statement's diagnosis against an action, in file order (`runtime._diagnosis`).

        The side API of ``ghost policy explain``; a check never calls it. Each
        statement is asked once per scope part (``principal``, ``action``,
        ``resource``, the others lifted) and once for its conditions with its
        scope lifted, so a near miss says which part failed; Cedar's own
        diagnostics say which statement was satisfied and which raised.

        Raises:
            AmbiguousResource: the resource cannot be canonicalised.
            CedarValueError, CedarEvaluationError: as `matching_rules`.
        """
        cedarpy = _cedarpy(self.source_name)
        canonical = canonical_resource(resource)
        encoded = encode_request(self._mapping(agent, verb, canonical, args))
        everything = {"op": "All"}
        out = []
        for (_, body), rule in zip(self._statements, self.rules, strict=True):
            checks = []
            error = None
            for part in ("principal", "action", "resource"):
                variant = {**body, "effect": "permit", "conditions": [],
                           **{other: everything for other in ("principal", "action", "resource")
                              if other != part}}  # fmt: skip
                holds, _ = self._ask(cedarpy, variant, encoded)
                default = body.get(part) == everything
                detail = f"the request's {part} is {'within' if holds else 'outside'} the scope"
                checks.append(PartCheck(part, holds, detail, default))
            if body.get("conditions"):
                lifted = {**body, "effect": "permit", "principal": everything,
                          "action": everything, "resource": everything}  # fmt: skip
                holds, problem = self._ask(cedarpy, lifted, encoded)
                if problem is not None:
                    checks.append(PartCheck("conditions", None, f"cannot be evaluated: {problem}"))
                    if all(check.holds for check in checks[:3]):
                        error = problem
                else:
                    detail = "the when/unless conditions " + ("hold" if holds else "do not hold")
                    checks.append(PartCheck("conditions", holds, detail))
            matched = error is None and all(check.holds for check in checks)
            out.append(RuleDiagnosis(rule.id, rule.effect, matched, tuple(checks), error))
        return tuple(out)

    def _ask(self, cedarpy: Any, body: Mapping[str, Any], encoded: Any) -> tuple[bool, str | None]:
        """Whether one statement (as a permit) is satisfied, and Cedar's error if it raised."""
        policies = {"staticPolicies": {"policy0": body}, "templates": {}, "templateLinks": []}
        answer = self._authorize(
            encoded.request,
            cedarpy.PolicySet.from_json_str(json.dumps(policies)),
            encoded.entities,
            self._schema,
        )
        errors = answer.diagnostics.errors
        if errors:
            return False, _FAILED.sub("", errors[0]).lstrip(": ") or "evaluation failed"
        return answer.decision.value == "Allow", None


def _read(path: Path, origin: str) -> str:
    try:
        return path.read_bytes().decode("utf-8")
    except OSError as exc:
        raise PolicyError(f"cannot read the file ({exc.strerror})", source=origin) from None
    except UnicodeDecodeError:
        raise PolicyError("the file is not UTF-8 text", source=origin) from None


def _qualified_name(function: object) -> str:
    module = getattr(function, "__module__", None)
    name = getattr(function, "__qualname__", None) or type(function).__qualname__
    return f"{module}.{name}" if isinstance(module, str) else str(name)


def _statements(cedarpy: Any, text: str, origin: str) -> list[tuple[str, dict[str, Any]]]:
    """The static policies of ``text`` as (positional id, JSON body), in file order."""
    try:
        est = json.loads(cedarpy.policies_to_json_str(text))
    except ValueError as exc:
        raise PolicyError(f"not valid Cedar: {exc}", source=origin) from None
    if est.get("templates") or est.get("templateLinks"):
        raise PolicyError("Cedar templates are not supported", source=origin)
    positioned = []
    for key, body in est.get("staticPolicies", {}).items():
        found = _POSITIONAL.fullmatch(key)
        if found is None:  # pragma: no cover - cedarpy numbers parsed statements
            raise PolicyError(f"unexpected Cedar policy id {key!r}", source=origin)
        positioned.append((int(found.group(1)), key, body))
    return [(key, body) for _, key, body in sorted(positioned)]


def _load(
    statements: list[tuple[str, dict[str, Any]]],
    policy_id: str,
    scrub: Any,
    origin: str,
) -> Any:
    """Build the rules through the TOML loader, so both formats validate the same way."""
    rules = [_rule_table(key, body, origin) for key, body in statements]
    data = {"policy_id": policy_id, "default": "deny", "rules": rules, "scrub": scrub}
    try:
        return load_policy(plain_copy(data, origin=origin), origin)
    except PolicyError as exc:
        field = exc.field
        if field is not None:
            for annotation, (key, sub) in _VALUE_ANNOTATIONS.items():
                # The loader names a field "approval.timeout_s", "narrow.clamp.n" or "keep".
                if (
                    field == key or field.startswith(f"{key}.")
                    if sub is None
                    else field == sub or field.startswith(f"{key}.{sub}")
                ):
                    field = f"@{annotation} ({field})"
                    break
            else:
                if field in ("narrow", "approval"):
                    field = f"@ghost_effect ({field})"
        field = annotation_field(exc.field)
        raise PolicyError(exc.problem, source=origin, rule=exc.rule, field=field) from None


def annotation_field(field: str | None) -> str | None:
    """The loader's name of a field (``narrow.clamp.n``) as the Cedar annotation that wrote it."""
    if field is None:
        return None
    for annotation, (key, sub) in _VALUE_ANNOTATIONS.items():
        # The loader names a field "approval.timeout_s", "narrow.clamp.n" or "keep".
        if field == key if sub is None else field == sub or field.startswith(f"{key}.{sub}"):
            return f"@{annotation} ({field})"
    if field in ("narrow", "approval"):
        return f"@ghost_effect ({field})"
    return field


def _rule_table(key: str, body: Mapping[str, Any], origin: str) -> dict[str, Any]:
    """One Cedar statement as the rule table the TOML format would have."""
    annotations: Mapping[str, str] = body.get("annotations", {})
    rule_id = annotations.get("id", key)
    if not rule_id:
        raise PolicyError("@id must not be empty", source=origin, rule=key, field="@id")
    for name in annotations:
        if name.lower().startswith("ghost") and name not in _ANNOTATIONS:
            known = ", ".join(f"@{known}" for known in sorted(_ANNOTATIONS))
            raise PolicyError(
                f"unknown annotation (known: {known})", source=origin, rule=rule_id,
                field=f"@{name}",
            )  # fmt: skip
    ghost = {name: value for name, value in annotations.items() if name in _ANNOTATIONS}
    table: dict[str, Any] = {"id": rule_id}
    if body.get("effect") == "forbid":
        if "ghost_effect" in ghost:
            raise PolicyError(
                "a forbid statement denies; @ghost_effect belongs on a permit",
                source=origin,
                rule=rule_id,
                field="@ghost_effect",
            )
        effect = "deny"  # the loader refuses narrowings and approval terms on it
    else:
        effect = ghost.pop("ghost_effect", "allow")
        if effect not in _EFFECTS:
            hint = " (write forbid to deny)" if effect == "deny" else ""
            raise PolicyError(
                f"must be allow, narrow or approval, not {effect!r}{hint}",
                source=origin,
                rule=rule_id,
                field="@ghost_effect",
            )
    table["effect"] = effect
    for name, text in ghost.items():
        key_name, sub = _VALUE_ANNOTATIONS[name]
        # A bare ``@ghost_shadow`` (no value: null in Cedar's JSON) means true.
        shadow_flag = name == "ghost_shadow" and text is None
        value = True if shadow_flag else _toml_value(text, rule_id, name, origin)
        if sub is None:
            table[key_name] = value
        else:
            table.setdefault(key_name, {})[sub] = value
    return table


def _toml_value(text: str, rule: str, name: str, origin: str) -> Any:
    """An annotation's value read as one TOML value (``{ limit = 100 }``, ``['to']``, ``600``)."""
    try:
        document = tomllib.loads(f"value = {text}")
    except tomllib.TOMLDecodeError as exc:
        raise PolicyError(
            f"not a TOML value: {exc}", source=origin, rule=rule, field=f"@{name}"
        ) from None
    if set(document) != {"value"}:
        raise PolicyError("must hold exactly one TOML value", source=origin, rule=rule,
                          field=f"@{name}")  # fmt: skip
    return document["value"]


def _schema(
    cedarpy: Any,
    text: str,
    schema: str | None,
    statements: list[tuple[str, dict[str, Any]]],
    origin: str,
) -> Any:
    """Parse the schema (Cedar or JSON text) and validate the policies against it."""
    if schema is None:
        return None
    if type(schema) is not str:
        raise PolicyError("a schema must be text (or a Path)", source=origin, field="schema")
    try:
        parsed = (
            cedarpy.Schema.from_json_str(schema)
            if schema.lstrip().startswith("{")
            else cedarpy.Schema.from_str(schema)
        )
        result = cedarpy.validate_policies(text, parsed)
    except ValueError as exc:
        raise PolicyError(f"not a valid Cedar schema: {exc}", source=origin,
                          field="schema") from None  # fmt: skip
    if not result.validation_passed:
        ids = dict(statements)
        first = result.errors[0]
        body = ids.get(first.policy_id, {})
        rule = body.get("annotations", {}).get("id", first.policy_id or None)
        raise PolicyError(
            f"does not validate against the schema: {first.error}",
            source=origin,
            rule=rule,
            field="schema",
        )
    return parsed
