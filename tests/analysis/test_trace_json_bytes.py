"""The report's bytes: orjson's indented output is exactly the standard encoder's."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from analysis._trace_json import _indented_bytes, list_item_bytes


def _reference(document: Any) -> bytes:
    text = json.dumps(document, sort_keys=True, indent=2, ensure_ascii=False, allow_nan=False)
    return (text + "\n").encode("utf-8")


_TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=12)  # no lone surrogates
_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(2**63), max_value=2**64 - 1) | _TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_TEXT, inner, max_size=4),
    max_leaves=25,
)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(_TEXT, _VALUES, max_size=6))
def test_the_bytes_are_the_standard_encoders(document: dict[str, Any]) -> None:
    assert _indented_bytes(document) == _reference(document)


def test_an_integer_orjson_refuses_falls_back_to_the_same_bytes() -> None:
    document = {"big": 2**70, "small": [1, {"é": "\u2028\x7f\x00"}], "empty": {}, "none": []}
    assert _indented_bytes(document) == _reference(document)


@settings(max_examples=200, deadline=None)
@given(st.lists(_VALUES, min_size=1, max_size=4))
def test_list_items_are_the_lines_of_a_top_level_list(items: list[Any]) -> None:
    # The streamed report writes each item of a top-level list on its own (ADR 0026).
    streamed = b'{\n  "k": [\n' + b",\n".join(map(list_item_bytes, items)) + b"\n  ]\n}\n"
    assert streamed == _reference({"k": items})
