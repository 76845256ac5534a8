"""An action as a Cedar request: the mapping convention and the strict value encoding (ADR 0028).

The convention (`convention_request`), for an action ``(agent, verb,
resource, args)``:

* principal ``Agent::"<agent>"``, an entity with the attribute ``name`` (the
  agent's name, so ``principal.name like "ops/*"`` can test a family);
* action ``Action::"<verb>"``;
* resource ``Resource::"<canonical resource>"`` — the same canonical form TOML
  globs match (`canonical_resource`), so ``..`` and encodings are resolved (or
  denied) before Cedar sees the text — an entity with the attributes ``kind``
  (the text before the first ``:``; empty without one) and ``path`` (the rest):
  ``file:/data/q3.txt`` is kind ``"file"``, path ``"/data/q3.txt"``;
* context: the snapshot of the arguments.

A host may replace the convention with its own ``mapping`` callable returning
a `CedarRequest`; the encoding below applies to what it returns too.

Entity uids always travel as ``{"type": ..., "id": ...}`` JSON objects, never
as Cedar text, so no name — quotes, ``::``, newlines — can change which
entity is meant. Values are encoded strictly, and anything Cedar cannot hold
exactly is refused with `CedarValueError`, which the gate records as a deny:
an argument is never silently dropped, since a policy that tests ``context has
x`` would then see a different action than the one that runs.

* ``str`` and ``bool`` are themselves; ``int`` is a Cedar ``Long`` within the
  signed 64-bit range, outside it is refused;
* a finite ``float`` is a Cedar ``decimal`` when it has at most four digits
  after the point and is within ``decimal``'s range (``2.5`` →
  ``decimal("2.5")``, compared with ``.greaterThan(...)``); any other float is
  refused, and so are NaN and infinities;
* ``list`` is a Cedar set (order and duplicates are lost, as in any Cedar set);
* ``dict`` is a record; a key starting with ``__`` is refused, because Cedar's
  JSON reads ``{"__entity": ...}`` and ``{"__extn": ...}`` as an entity
  reference or an extension value — an argument could otherwise forge
  ``principal``;
* ``None``, ``bytes`` and every other type are refused (Cedar has no null);
* nesting deeper than `MAX_CEDAR_DEPTH` is refused (Cedar's parser has its own,
  lower bound on JSON depth).
"""

from __future__ import annotations

import decimal
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import orjson

from runtime._errors import CedarEvaluationError, CedarValueError
from runtime._recorded import type_name

__all__ = [
    "MAX_CEDAR_DEPTH",
    "CedarEntity",
    "CedarMapping",
    "CedarRequest",
    "EncodedRequest",
    "convention_request",
    "encode_request",
]

MAX_CEDAR_DEPTH: Final = 32
"""Deepest argument nesting given to Cedar (a record in a set in a record ... counts each level)."""

_LONG_MIN: Final = -(2**63)
_LONG_MAX: Final = 2**63 - 1
# Cedar's decimal: a 64-bit integer count of ten-thousandths.
_DECIMAL_LIMIT: Final = decimal.Decimal(_LONG_MAX) / 10_000
_IDENTIFIER: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")

Uid = tuple[str, str]
"""An entity uid: (entity type, entity id), such as ``("Agent", "researcher")``."""


@dataclass(frozen=True, slots=True)
class CedarEntity:
    """One entity a request brings along: its uid, attributes and parents.

    Attributes:
        uid: (type, id).
        attrs: attribute values, encoded like the context.
        parents: the uids of its parents (for ``in``).
    """

    uid: Uid
    attrs: Mapping[str, Any] = field(default_factory=dict)
    parents: tuple[Uid, ...] = ()


@dataclass(frozen=True, slots=True)
class CedarRequest:
    """What a mapping makes of an action: the Cedar request and its entities.

    Attributes:
        principal, action, resource: entity uids, (type, id).
        context: the request's context record.
        entities: the entities the policies may read attributes of.
    """

    principal: Uid
    action: Uid
    resource: Uid
    context: Mapping[str, Any]
    entities: tuple[CedarEntity, ...] = ()


CedarMapping = Callable[[str, str, str, Mapping[str, Any]], CedarRequest]
"""``mapping(agent, verb, canonical_resource, args) -> CedarRequest``: replaces the convention."""


@dataclass(frozen=True, slots=True)
class EncodedRequest:
    """A request ready for ``cedarpy.is_authorized``: the request dict and the entities JSON."""

    request: dict[str, Any]
    entities: str


def convention_request(
    agent: str, verb: str, resource: str, args: Mapping[str, Any]
) -> CedarRequest:
    """The documented convention (module docstring): an action as a Cedar request.

    Args:
        agent, verb: the action's names.
        resource: the action's resource in canonical form.
        args: the arguments, the request's context.
    """
    kind, colon, path = resource.partition(":")
    if not colon:
        kind, path = "", resource
    principal = ("Agent", agent)
    target = ("Resource", resource)
    return CedarRequest(
        principal=principal,
        action=("Action", verb),
        resource=target,
        context=args,
        entities=(
            CedarEntity(principal, {"name": agent}),
            CedarEntity(target, {"kind": kind, "path": path}),
        ),
    )


def encode_request(request: object) -> EncodedRequest:
    """Check and encode a `CedarRequest` for cedarpy (see the module docstring for the rules).

    Raises:
        CedarValueError: a value Cedar cannot hold exactly.
        CedarEvaluationError: ``request`` is not a `CedarRequest`, or a uid is not
            a pair of strings.
    """
    if type(request) is not CedarRequest:
        raise CedarEvaluationError(
            f"the mapping returned a {type_name(request)}, not a CedarRequest"
        )
    context = _record(request.context, "$", 0)
    entities = []
    for entity in request.entities:
        if type(entity) is not CedarEntity:
            raise CedarEvaluationError(f"an entity is a {type_name(entity)}, not a CedarEntity")
        entities.append(
            {
                "uid": _uid(entity.uid),
                "attrs": _record(entity.attrs, "entity", 0),
                "parents": [_uid(parent) for parent in entity.parents],
            }
        )
    return EncodedRequest(
        request={
            "principal": _uid(request.principal),
            "action": _uid(request.action),
            "resource": _uid(request.resource),
            # Text, not a dict: cedarpy would json.dumps a dict with NaN allowed.
            "context": orjson.dumps(context).decode("utf-8"),
        },
        entities=orjson.dumps(entities).decode("utf-8"),
    )


def _uid(uid: object) -> dict[str, str]:
    if (
        type(uid) is not tuple
        or len(uid) != 2
        or type(uid[0]) is not str
        or type(uid[1]) is not str
    ):
        raise CedarEvaluationError("an entity uid must be a (type, id) pair of strings")
    return {"type": uid[0], "id": uid[1]}


def _record(value: object, path: str, depth: int) -> dict[str, Any]:
    if type(value) is not dict and not isinstance(value, Mapping):
        raise CedarValueError(path, type_name(value), "a record must be a mapping")
    encoded = _value(value, path, depth)
    assert type(encoded) is dict
    return encoded


def _value(value: object, path: str, depth: int) -> Any:
    if depth > MAX_CEDAR_DEPTH:
        raise CedarValueError(path, "value", f"nested deeper than {MAX_CEDAR_DEPTH} levels")
    kind = type(value)
    if kind is str or kind is bool:
        return value
    if kind is int:
        assert isinstance(value, int)
        if not _LONG_MIN <= value <= _LONG_MAX:
            raise CedarValueError(path, "int", "outside the signed 64-bit range of a Long")
        return value
    if kind is float:
        assert isinstance(value, float)
        return {"__extn": {"fn": "decimal", "arg": _decimal_text(value, path)}}
    if kind is list or kind is tuple:
        assert isinstance(value, list | tuple)
        return [_value(item, f"{path}[{index}]", depth + 1) for index, item in enumerate(value)]
    if kind is dict or isinstance(value, Mapping):
        assert isinstance(value, Mapping)
        out: dict[str, Any] = {}
        for key, item in value.items():
            if type(key) is not str:
                raise CedarValueError(path, "key", f"a {type_name(key)} key is not a string")
            where = f"{path}.{key}" if _IDENTIFIER.fullmatch(key) else f'{path}["?"]'
            if key.startswith("__"):
                raise CedarValueError(
                    where, "key", "keys starting with '__' are Cedar's JSON escapes"
                )
            out[key] = _value(item, where, depth + 1)
        return out
    if value is None:
        raise CedarValueError(path, "null", "Cedar has no null")
    raise CedarValueError(path, type_name(value), "only str, bool, int, float, list, dict")


def _decimal_text(value: float, path: str) -> str:
    """``value`` as the text of a Cedar ``decimal``, if it is one exactly; else refuse."""
    if not math.isfinite(value):
        raise CedarValueError(path, "float", "NaN and infinities")
    exact = decimal.Decimal(repr(value))  # the shortest text that reads back as this float
    exponent = exact.as_tuple().exponent
    assert isinstance(exponent, int)
    if exponent < -4 or abs(exact) > _DECIMAL_LIMIT:
        raise CedarValueError(
            path, "float", "a decimal has at most 4 digits after the point, within +-9.2e14"
        )
    # repr always writes a point below 1e16, and larger floats are out of range above.
    return format(exact, "f")
