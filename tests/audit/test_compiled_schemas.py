"""`schema_valid` says exactly what `schema_problems` says, on every record the reader can build.

The fast path of the verifier (ADR 0026) trusts `schema_valid`'s True, so it
must be sound: True only when `schema_problems` finds nothing. On values a
JSON parser builds it is also complete (False only when something is
wrong), or the fast path would not pay. Both are checked here on real
records of every schema, edited at every depth with values chosen around
every boundary the schemas draw.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from hypothesis import given
from hypothesis import strategies as st

from audit import SCHEMAS, schema_problems, schema_valid
from tests.analysis.stored_run import StoredRun, write_gate_run

_HEX64 = "0" * 64
_UUID = "01234567-89ab-cdef-0123-456789abcdef"
_EDGES: list[object] = [
    None, True, False, 0, 1, -1, 2**63 - 1, 2**63, -(2**63), 0.0, 1.0, "", "x",
    _HEX64, _HEX64 + "\n", _HEX64.upper(), _HEX64[:-1], "0" * 32, "0" * 16, _UUID,
    _UUID.upper(), "allow", "pending", "deny", "approved", "chunk", "clamp", "approval",
    "ghost.decision/1", "ghost.run/1", [], [{}], ["x"], [1], {}, {"id": "r", "effect": "allow"},
    {"policy": 1, "narrow": 2, "scrub": 3},
]  # fmt: skip
_json = st.recursive(
    st.sampled_from(_EDGES) | st.integers() | st.text(max_size=6),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=6,
)


@pytest.fixture(scope="module")
def real_records(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    """One run's records of every schema, signed and unsigned."""
    records: list[dict[str, Any]] = []
    for key in (None, Ed25519PrivateKey.generate()):
        path = tmp_path_factory.mktemp("records") / "run.mcap"
        write_gate_run(path, signing_key=key)
        records += [message.record for message in StoredRun.load(path).messages]
    assert {record["schema"] for record in records} == set(SCHEMAS)
    return records


def _same_answer(record: Mapping[str, Any]) -> None:
    problems = schema_problems(record)
    valid = schema_valid(record)
    assert valid == (not problems), problems


def test_every_real_record_is_valid(real_records: list[dict[str, Any]]) -> None:
    for record in real_records:
        assert schema_valid(MappingProxyType(record))
        assert schema_valid(record)
        assert schema_problems(record) == ()


def _paths(value: object, prefix: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
    found = [prefix]
    if isinstance(value, dict):
        for key, item in value.items():
            found += _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += _paths(item, (*prefix, index))
    return found


@given(data=st.data())
def test_edited_records_get_the_same_answer(
    real_records: list[dict[str, Any]], data: st.DataObject
) -> None:
    record = copy.deepcopy(data.draw(st.sampled_from(real_records)))
    for _ in range(data.draw(st.integers(min_value=1, max_value=3))):
        path = data.draw(st.sampled_from(_paths(record)))
        how = data.draw(st.sampled_from(["replace", "delete", "add"]))
        if not path:
            continue
        *parents, last = path
        holder: Any = record
        for step in parents:
            holder = holder[step]
        if how == "replace":
            holder[last] = data.draw(_json)
        elif how == "delete":
            del holder[last]
        elif isinstance(holder, dict):
            holder[data.draw(st.text(max_size=8))] = data.draw(_json)
        else:
            holder.append(data.draw(_json))
    _same_answer(record)
    _same_answer(MappingProxyType(record))


@pytest.mark.parametrize("field", ["seq", "stamp_ns"])
@pytest.mark.parametrize("value", [-1, 0, 2**63 - 1, 2**63, True, False, 1.0, "1", None])
def test_integer_bounds(real_records: list[dict[str, Any]], field: str, value: object) -> None:
    for record in real_records:
        _same_answer({**record, field: value})


def test_what_a_json_parser_never_builds_is_left_to_schema_problems(
    real_records: list[dict[str, Any]],
) -> None:
    """A tuple, a str subclass or a foreign mapping: False, so the precise checker decides."""

    class Text(str):
        pass

    decision = next(r for r in real_records if r["schema"] == "ghost.decision/1")
    assessment = next(r for r in real_records if r["schema"] == "ghost.assessment/1")
    assert not schema_valid({**decision, "reason": Text("r")})
    assert schema_problems({**decision, "reason": Text("r")}) == ()
    assert not schema_valid({**assessment, "errors": ()})
    _same_answer({**assessment, "stage_ns": MappingProxyType(assessment["stage_ns"])})
    assert not schema_valid({"schema": 1})
    assert not schema_valid({})
    assert not schema_valid({**decision, "schema": "ghost.other/1"})
