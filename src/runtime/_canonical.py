"""Canonical bytes and content addresses: the one encoder every layer uses (ADR 0003).

Two entry points share one walker:

* `canonical_bytes(record)` — the bytes of an audit record. A record holds only
  JSON's exact types: objects with string keys, arrays, strings, booleans,
  null and integers in the signed 64-bit range. A float (or anything else) in a
  record is a bug and raises `CanonicalEncodingError`.
* `jcs_bytes(value)` — the bytes of a user value (tool arguments, a policy),
  following RFC 8785 (JSON Canonicalization Scheme): floats in ECMAScript's
  shortest form, object keys sorted by UTF-16 code units. Values JSON cannot
  hold get a tagged form instead of an error, so that any argument payload
  has an address:

  ====================  =================================================
  Python value          canonical JSON
  ====================  =================================================
  ``tuple``             an array, like ``list``
  ``bytes``/bytearray   ``{"$ghost": "bytes", "base64": "<std base64>"}``
  NaN, ±Infinity        ``{"$ghost": "float", "value": "nan" | "inf" | "-inf"}``
  ``set``/frozenset     ``{"$ghost": "set", "items": [...]}`` items in canonical order
  dict, non-str keys    ``{"$ghost": "map", "items": [[k, v], ...]}`` in canonical key order
  dict with "$ghost"    the same ``map`` form, so user data cannot forge a tag
  any other object      ``{"$ghost": "object", "type": "<module>.<qualname>"}``
  ====================  =================================================

  An opaque object is addressed by its type alone: ghost never calls its
  ``__str__`` or ``__repr__`` (they may raise, or print a secret).

Both forms are compact (``,`` and ``:``), UTF-8 with non-ASCII kept, keys sorted,
and integers written exactly. Nesting deeper than `MAX_DEPTH` raises
`CanonicalEncodingError`, which is also how a cycle ends.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
from collections.abc import Mapping
from decimal import Decimal
from json.encoder import encode_basestring
from typing import Any, Final

import orjson

from runtime._errors import CanonicalEncodingError

__all__ = [
    "MAX_DEPTH",
    "StrictJSONError",
    "canonical_bytes",
    "content_address",
    "jcs_bytes",
    "loads_strict",
    "sha256_hex",
    "value_sha256",
]

MAX_DEPTH: Final = 256
"""Deepest nesting either encoder accepts."""

_INT64_MIN: Final = -(2**63)
_INT64_MAX: Final = 2**63 - 1
_TAG: Final = "$ghost"


def sha256_hex(data: bytes) -> str:
    """Return the lowercase hex SHA-256 of ``data``."""
    return hashlib.sha256(data).hexdigest()


def canonical_bytes(record: Mapping[str, Any]) -> bytes:
    """Return the canonical bytes of an audit record.

    Raises:
        CanonicalEncodingError: the record holds a float, a non-string key, an
            integer outside the signed 64-bit range, a lone surrogate, a value
            of any other type, or nests deeper than `MAX_DEPTH`.
    """
    if _is_plain(record, 0):
        return _plain_bytes(record)
    parts: list[str] = []
    _encode(record, parts, 0, strict=True)
    return _utf8("".join(parts))


def content_address(record: Mapping[str, Any]) -> str:
    """Return a record's content address: the SHA-256 hex of its canonical bytes."""
    return sha256_hex(canonical_bytes(record))


def jcs_bytes(value: object) -> bytes:
    """Return the RFC 8785 canonical bytes of a user value (tagged forms for the rest).

    Raises:
        CanonicalEncodingError: the value nests deeper than `MAX_DEPTH` (or is
            cyclic), or holds a string with a lone surrogate.
    """
    if _is_plain(value, 0):
        return _plain_bytes(value)
    parts: list[str] = []
    _encode(value, parts, 0, strict=False)
    return _utf8("".join(parts))


def value_sha256(value: object) -> str:
    """Return the SHA-256 hex of `jcs_bytes(value)`: the address of arguments or a policy."""
    return sha256_hex(jcs_bytes(value))


class StrictJSONError(ValueError):
    """JSON that `loads_strict` refuses: a duplicate key, ``NaN``/``Infinity``, or not UTF-8."""


def loads_strict(data: bytes | str) -> object:
    """Parse JSON the way ghost reads its own artifacts back: strictly.

    Python's `json.loads` keeps the last of two equal keys and accepts
    ``NaN``; an audit record or report that two tools could read two ways is
    refused instead.

    Raises:
        StrictJSONError: ``data`` is not UTF-8, an object repeats a key, or it
            holds ``NaN``/``Infinity``.
        json.JSONDecodeError: ``data`` is not JSON at all.
        RecursionError: ``data`` nests deeper than the interpreter can parse.
    """
    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise StrictJSONError(f"not UTF-8 (invalid byte at offset {exc.start})") from None
    return json.loads(data, object_pairs_hook=_no_duplicate_keys, parse_constant=_no_constant)


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise StrictJSONError(f"the key {key[:40]!r} appears twice in one object")
        result[key] = value
    return result


def _no_constant(name: str) -> object:
    raise StrictJSONError(f"{name} is not a JSON number")


# The fast path. For a "plain" value orjson (sorted keys; compact, UTF-8, the
# same escapes as RFC 8785) writes exactly the canonical bytes, as does the
# stdlib's C encoder with sorted keys and compact separators: plain means only
# str, bool, None, int64 ints, lists/tuples, and dicts whose keys are strings
# below U+E000 (where code-point order is UTF-16 code-unit order) with no
# "$ghost" key. Floats are never plain: neither encoder writes ECMAScript's form.
# orjson refuses what it cannot write (a lone surrogate, nesting past its own
# limit); the stdlib encoder then writes it, or `_utf8` raises the typed error.
# Anything that is not plain takes the exact walker below. A hypothesis test
# holds all three to the same bytes (tests/runtime/test_canonical.py).
_dumps = json.JSONEncoder(
    ensure_ascii=False, check_circular=False, sort_keys=True, separators=(",", ":")
).encode
_orjson_dumps = orjson.dumps
_ORJSON_OPTIONS: Final = orjson.OPT_SORT_KEYS


def _plain_bytes(value: object) -> bytes:
    try:
        return _orjson_dumps(value, option=_ORJSON_OPTIONS)
    except orjson.JSONEncodeError:
        return _utf8(_dumps(value))


def _is_plain(value: object, depth: int) -> bool:
    if depth > MAX_DEPTH:
        return False
    kind = type(value)
    if kind is dict:
        assert isinstance(value, dict)
        if _TAG in value:
            return False
        for key, item in value.items():
            if type(key) is not str or not (key.isascii() or max(key) < "\ue000"):
                return False
            if not _is_plain_leaf(item) and not _is_plain(item, depth + 1):
                return False
        return True
    if kind is list or kind is tuple:
        assert isinstance(value, list | tuple)
        return all(_is_plain_leaf(item) or _is_plain(item, depth + 1) for item in value)
    return _is_plain_leaf(value) or (
        # Subclasses of str and int (StrEnum, IntEnum) encode as their values.
        isinstance(value, str) or (isinstance(value, int) and _INT64_MIN <= value <= _INT64_MAX)
    )


def _is_plain_leaf(value: object) -> bool:
    # Inlined exact-type checks: most of a record is strings and small ints.
    kind = type(value)
    if kind is str or value is None or kind is bool:
        return True
    return kind is int and _INT64_MIN <= value <= _INT64_MAX  # type: ignore[operator]


def _utf8(text: str) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise CanonicalEncodingError(
            f"a string holds a lone surrogate at index {exc.start} and is not valid Unicode"
        ) from None


def _key_order(key: str) -> bytes:
    # RFC 8785 §3.2.3: property names sort by their UTF-16 code units.
    return key.encode("utf-16-be", "surrogatepass")


def _encode(value: object, out: list[str], depth: int, *, strict: bool) -> None:
    if depth > MAX_DEPTH:
        raise CanonicalEncodingError(f"value nests deeper than {MAX_DEPTH} levels (or is cyclic)")
    # bool before int: bool is a subclass of int.
    if value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, str):
        out.append(encode_basestring(value))
    elif isinstance(value, int):
        if strict and not _INT64_MIN <= value <= _INT64_MAX:
            raise CanonicalEncodingError(f"integer {value} is outside the signed 64-bit range")
        out.append(int.__repr__(value))
    elif isinstance(value, Mapping):
        _encode_mapping(value, out, depth, strict=strict)
    elif isinstance(value, list | tuple):
        out.append("[")
        for index, item in enumerate(value):
            if index:
                out.append(",")
            _encode(item, out, depth + 1, strict=strict)
        out.append("]")
    elif strict:
        raise CanonicalEncodingError(
            f"a record cannot hold a value of type {type(value).__name__}"
            " (records hold only str, int, bool, None, lists and string-keyed objects)"
        )
    elif isinstance(value, float):
        if math.isfinite(value):
            out.append(_ecmascript_number(value))
        else:
            text = "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
            _encode_tag("float", "value", text, out)
    elif isinstance(value, bytes | bytearray | memoryview):
        text = base64.b64encode(bytes(value)).decode("ascii")
        _encode_tag("bytes", "base64", text, out)
    elif isinstance(value, set | frozenset):
        items = sorted(jcs_bytes(item) for item in value)
        _encode_raw_tag("set", "[" + ",".join(i.decode() for i in items) + "]", out)
    else:
        cls = type(value)
        _encode_tag("object", "type", f"{cls.__module__}.{cls.__qualname__}", out)


def _encode_mapping(value: Mapping[Any, Any], out: list[str], depth: int, *, strict: bool) -> None:
    keys = list(value.keys())
    if all(isinstance(k, str) for k in keys) and (strict or _TAG not in value):
        out.append("{")
        for index, key in enumerate(sorted(keys, key=_key_order)):
            if index:
                out.append(",")
            out.append(encode_basestring(key))
            out.append(":")
            _encode(value[key], out, depth + 1, strict=strict)
        out.append("}")
        return
    if strict:
        bad = next(k for k in keys if not isinstance(k, str))
        raise CanonicalEncodingError(f"a record key must be a string, not {type(bad).__name__}")
    pairs = sorted((jcs_bytes(key), _encode_to_str(item, depth + 2)) for key, item in value.items())
    body = ",".join(f"[{k.decode()},{v}]" for k, v in pairs)
    _encode_raw_tag("map", f"[{body}]", out)


def _encode_to_str(value: object, depth: int) -> str:
    parts: list[str] = []
    _encode(value, parts, depth, strict=False)
    return "".join(parts)


def _encode_tag(tag: str, field: str, text: str, out: list[str]) -> None:
    # "$ghost" sorts before every field name used here ("$" < "a"), so this is key order.
    out.append(f'{{"{_TAG}":"{tag}",{encode_basestring(field)}:{encode_basestring(text)}}}')


def _encode_raw_tag(tag: str, items_json: str, out: list[str]) -> None:
    out.append(f'{{"{_TAG}":"{tag}","items":{items_json}}}')


def _ecmascript_number(value: float) -> str:
    """Format a finite float as ECMAScript's Number.prototype.toString does (RFC 8785 §3.2.2.3)."""
    if value == 0:
        return "0"  # -0 too
    sign = "-" if value < 0 else ""
    # repr() is the shortest string that round-trips, the same digits ECMAScript picks.
    _, digit_tuple, exponent = Decimal(repr(abs(value))).as_tuple()
    assert isinstance(exponent, int)  # finite, so never "n"/"N"/"F"
    raw = "".join(map(str, digit_tuple))
    digits = raw.rstrip("0")
    k = len(digits)
    # value = 0.d1d2...dk * 10^n, the form ECMAScript's algorithm is stated in.
    n = exponent + (len(raw) - k) + k
    if k <= n <= 21:
        text = digits + "0" * (n - k)
    elif 0 < n <= 21:
        text = digits[:n] + "." + digits[n:]
    elif -6 < n <= 0:
        text = "0." + "0" * (-n) + digits
    else:
        mantissa = digits[0] + ("." + digits[1:] if k > 1 else "")
        e = n - 1
        text = f"{mantissa}e{'+' if e > 0 else '-'}{abs(e)}"
    return sign + text
