"""`schema_valid`: ghost's schemas compiled once into predicates, for the verifier's fast path.

`schema_problems` interprets a schema for every record and builds a JSON
path for every field it visits, so that it can say what is wrong; on a run
of millions of well-formed records that is most of the verifier's time.
`schema_valid` answers only the question whether anything is wrong, with
each schema compiled at import into nested closures (ADR 0026).

It is *sound*: when it says True, `schema_problems` finds nothing. It is
stricter where that is cheap: it accepts only the exact types the JSON
parser builds (`dict`, `list`, `str`, `int`, `bool`, None; a read-only
mapping at the top), where `schema_problems` accepts any mapping, sequence
or subclass. A False answer is never shown to anyone: the caller then asks
`schema_problems`, which gives the precise messages (or finds nothing).

A record it accepts is also *plain* (`runtime.canonical_bytes`' fast path):
ghost's schemas close every object over a fixed set of ASCII field names,
bound every integer to the signed 64-bit range and allow no float.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import Any, Final

from audit._schemas import SCHEMAS
from audit._validate import SUPPORTED_KEYWORDS, compiled_pattern

__all__ = ["schema_valid"]

_Predicate = Callable[[Any], bool]

_EXACT_TYPES: Final[Mapping[str, tuple[type, ...]]] = {
    "null": (type(None),),
    "boolean": (bool,),
    "integer": (int,),  # `type(v) is int`: a bool is never an integer
    "string": (str,),
    "array": (list,),
    "object": (dict, MappingProxyType),
}


def schema_valid(record: Mapping[str, Any]) -> bool:
    """Whether ``record`` certainly matches the ghost schema its ``schema`` field names.

    Args:
        record: a parsed record, as `audit.parse_record` returns it.

    Returns:
        True only when `schema_problems` would find nothing; False when it
        may find something (ask it).
    """
    name = record.get("schema")
    check = _COMPILED.get(name) if type(name) is str else None
    return check is not None and check(record)


def _compile(schema: Mapping[str, Any]) -> _Predicate:
    """One predicate that holds exactly when every keyword of ``schema`` holds (see `_check`)."""
    unknown = set(schema) - SUPPORTED_KEYWORDS
    if unknown:  # pragma: no cover - a test keeps the schemas within the subset
        raise ValueError(f"unsupported schema keywords: {sorted(unknown)}")
    if "anyOf" in schema:
        branches = tuple(_compile(branch) for branch in schema["anyOf"])
        # `_check` returns after anyOf: the other keywords beside it are not checked.
        return lambda value: any(branch(value) for branch in branches)
    fused = _fused(schema)
    if fused is not None:
        return fused
    parts: list[_Predicate] = []
    if "type" in schema:
        allowed = _allowed(schema["type"])
        parts.append(lambda value: type(value) in allowed)
    if "const" in schema:
        parts.append(_equal_to((schema["const"],)))
    if "enum" in schema:
        parts.append(_equal_to(tuple(schema["enum"])))
    if "pattern" in schema:
        search = compiled_pattern(schema["pattern"]).search
        parts.append(
            lambda value: (
                search(value) is not None if type(value) is str else not isinstance(value, str)
            )
        )
    if "minimum" in schema or "maximum" in schema:
        low = schema.get("minimum")
        high = schema.get("maximum")
        parts.append(lambda value: _within(value, low, high))
    if "properties" in schema or "required" in schema or schema.get("additionalProperties"):
        parts.append(_object_predicate(schema))
    if "items" in schema:
        item = _compile(schema["items"])
        parts.append(
            lambda value: (
                all(item(v) for v in value)
                if type(value) is list
                else not isinstance(value, list | tuple)
            )
        )
    return _all_of(parts)


def _allowed(names: str | Sequence[str]) -> frozenset[type]:
    names = (names,) if isinstance(names, str) else tuple(names)
    return frozenset(kind for name in names for kind in _EXACT_TYPES.get(name, ()))


def _fused(schema: Mapping[str, Any]) -> _Predicate | None:
    """One closure for the shapes ghost's schemas use most (the same rule as `_compile`'s parts)."""
    keys = set(schema) - {"title", "description", "$schema"}
    allowed: frozenset[type] = _allowed(schema["type"]) if "type" in schema else frozenset()
    if keys == {"type"} and allowed == _STR:
        return lambda value: type(value) is str
    if keys == {"type", "pattern"} and allowed in (_STR, _STR_OR_NULL):
        search = compiled_pattern(schema["pattern"]).search
        if allowed == _STR:
            return lambda value: type(value) is str and search(value) is not None
        return lambda value: value is None or (type(value) is str and search(value) is not None)
    if keys == {"type", "minimum", "maximum"} and allowed == _INT:
        low, high = schema["minimum"], schema["maximum"]
        return lambda value: type(value) is int and low <= value <= high
    if keys == {"enum"} and all(type(option) is str for option in schema["enum"]):
        options = frozenset(schema["enum"])
        return lambda value: type(value) is str and value in options
    if keys == {"const"} and type(schema["const"]) is str:
        const = schema["const"]
        return lambda value: type(value) is str and value == const
    if keys == {"type", "items"} and allowed == _LIST:
        item = _compile(schema["items"])

        def array(value: Any) -> bool:
            if type(value) is not list:
                return False
            for entry in value:  # noqa: SIM110 - a loop costs less than all() of a generator
                if not item(entry):
                    return False
            return True

        return array
    return None


def _all_of(parts: Sequence[_Predicate]) -> _Predicate:
    if not parts:
        return lambda value: True
    if len(parts) == 1:
        return parts[0]
    if len(parts) == 2:
        first, second = parts
        return lambda value: first(value) and second(value)
    chain = tuple(parts)
    return lambda value: all(part(value) for part in chain)


def _equal_to(options: tuple[object, ...]) -> _Predicate:
    # JSON equality (`_same`): true is not 1, and 1 is not true.
    typed = frozenset((type(option), option) for option in options)
    return lambda value: type(value) in _HASHABLE and (type(value), value) in typed


_HASHABLE: Final = frozenset({str, int, bool, type(None)})
_STR: Final[frozenset[type]] = frozenset({str})
_STR_OR_NULL: Final[frozenset[type]] = frozenset({str, type(None)})
_INT: Final[frozenset[type]] = frozenset({int})
_LIST: Final[frozenset[type]] = frozenset({list})
_MAPPINGS: Final = frozenset({dict, MappingProxyType})


def _within(value: object, low: int | None, high: int | None) -> bool:
    if type(value) is int:
        return (low is None or value >= low) and (high is None or value <= high)
    return not isinstance(value, int)  # a bool or an int subclass: ask schema_problems


def _object_predicate(schema: Mapping[str, Any]) -> _Predicate:
    properties = {key: _compile(sub) for key, sub in schema.get("properties", {}).items()}
    required = frozenset(schema.get("required", ()))
    closed = schema.get("additionalProperties", True) is False
    fields = tuple(properties.items())
    if closed and required == frozenset(properties):
        # ghost's objects: exactly these fields, each of its own form.
        def exact(value: Any) -> bool:
            if type(value) not in _MAPPINGS:
                return not isinstance(value, Mapping)  # the type keyword judges the rest
            if value.keys() != required:
                return False
            for key, check in fields:  # noqa: SIM110 - as above: this runs for every record
                if not check(value[key]):
                    return False
            return True

        return exact

    def general(value: Any) -> bool:  # pragma: no cover - ghost's schemas are all closed
        if type(value) not in _MAPPINGS:
            return not isinstance(value, Mapping)
        if not required <= value.keys():
            return False
        if closed and not value.keys() <= properties.keys():
            return False
        return all(key not in value or check(value[key]) for key, check in fields)

    return general


def _record_predicate(schema: Mapping[str, Any]) -> _Predicate:
    """A record schema as one generated function: each field's test inline, no call per field.

    The same rule as `_compile` (a closed object, every required field
    present, an opt-in field tested when present, each field of its own form);
    a field whose form is not one of `_inline`'s
    shapes is tested by its `_compile` closure. Generated once, at import,
    from the schema alone: no record's text ever reaches the generated code.
    """
    properties: Mapping[str, Any] = schema["properties"]
    required = frozenset(schema["required"])
    if (
        set(schema) - {"$schema", "title", "description"}
        != {"type", "properties", "required", "additionalProperties"}
        or _allowed(schema["type"]) != _MAPPINGS
        or schema["additionalProperties"] is not False
        or not required <= frozenset(properties)
    ):
        return _compile(schema)  # pragma: no cover - every ghost record schema has this shape
    names: dict[str, object] = {
        "_MAPPINGS": _MAPPINGS,
        "_KEYS": required,
        "_ALL": frozenset(properties),
    }
    # A record without its opt-in fields costs one comparison, as before they existed.
    keys_test = (
        "record.keys() != _KEYS"
        if required == frozenset(properties)
        else "record.keys() != _KEYS and not (_KEYS < record.keys() <= _ALL)"
    )
    lines = [
        "def check(record):",
        f"    if type(record) not in _MAPPINGS or {keys_test}:",
        "        return False",
    ]
    for number, (key, sub) in enumerate(properties.items()):
        if key in required:
            lines.append(f"    value = record[{key!r}]")
            lines.append(f"    if not ({_inline(sub, number, names)}):")
            lines.append("        return False")
        else:
            lines.append(f"    if {key!r} in record:")
            lines.append(f"        value = record[{key!r}]")
            lines.append(f"        if not ({_inline(sub, number, names)}):")
            lines.append("            return False")
    lines.append("    return True")
    exec("\n".join(lines), names)  # noqa: S102 - our own schemas' text, built above
    check: _Predicate = names["check"]  # type: ignore[assignment]
    return check


def _inline(schema: Mapping[str, Any], number: int, names: dict[str, object]) -> str:
    """A Python expression over ``value`` that holds exactly when ``schema`` does (`_fused`)."""
    keys = set(schema) - {"title", "description", "$schema"}
    allowed: frozenset[type] = _allowed(schema["type"]) if "type" in schema else frozenset()
    if keys == {"type"} and allowed == _STR:
        return "type(value) is str"
    if keys == {"type", "pattern"} and allowed in (_STR, _STR_OR_NULL):
        search = f"_search{number}"
        names[search] = compiled_pattern(schema["pattern"]).search
        test = f"type(value) is str and {search}(value) is not None"
        return test if allowed == _STR else f"value is None or ({test})"
    if keys == {"type", "minimum", "maximum"} and allowed == _INT:
        low, high = schema["minimum"], schema["maximum"]
        if type(low) is int and type(high) is int:
            return f"type(value) is int and {low} <= value <= {high}"
    if keys == {"enum"} and all(type(option) is str for option in schema["enum"]):
        options = f"_options{number}"
        names[options] = frozenset(schema["enum"])
        return f"type(value) is str and value in {options}"
    if keys == {"const"} and type(schema["const"]) is str:
        const = f"_const{number}"
        names[const] = schema["const"]
        return f"type(value) is str and value == {const}"
    closure = f"_check{number}"
    names[closure] = _compile(schema)
    return f"{closure}(value)"


_COMPILED: Final[Mapping[str, _Predicate]] = MappingProxyType(
    {name: _record_predicate(schema) for name, schema in SCHEMAS.items()}
)
