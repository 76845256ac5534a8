"""Narrowings: keep, clamp, set and within, copy-on-write, failing closed on every doubt."""

from __future__ import annotations

import contextlib
import copy
import math
import posixpath
import re
import unicodedata
from typing import Any
from urllib.parse import unquote

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from runtime import EvaluationError, NarrowingError, NarrowingEscape
from runtime._frozen import freeze
from runtime._narrowing import Narrowing
from tests.runtime.scaling import assert_linear
from tests.strategies import path_texts

SECRET = "hunter2-do-not-log"


def path(dotted: str) -> tuple[str, ...]:
    return tuple(dotted.split("."))


def apply(
    narrowing: Narrowing, args: dict[str, Any]
) -> tuple[dict[str, Any], list[tuple[str, str]]]:
    before = copy.deepcopy(args)
    changes: list[tuple[str, str]] = []
    out = narrowing.apply("rule-n", args, changes)
    assert args == before  # never mutated
    return out, changes


def clamp(dotted: str, bound: float) -> Narrowing:
    return Narrowing(clamp=((path(dotted), bound),))


def forced(dotted: str, value: Any) -> Narrowing:
    return Narrowing(set=((path(dotted), freeze(value)),))


def within(dotted: str, prefix: str = "/data/public") -> Narrowing:
    return Narrowing(within=((path(dotted), prefix),))


# --- keep -----------------------------------------------------------------------------


def test_keep_drops_other_top_level_keys() -> None:
    out, changes = apply(Narrowing(keep=("a", "b")), {"a": 1, "c": 2, "b": 3, "d": 4})
    assert out == {"a": 1, "b": 3}
    assert changes == [("keep", "c"), ("keep", "d")]


def test_keep_with_nothing_to_drop_changes_nothing() -> None:
    args = {"a": 1}
    out, changes = apply(Narrowing(keep=("a", "b")), args)
    assert out is args
    assert changes == []


def test_keep_of_nothing_drops_everything() -> None:
    out, changes = apply(Narrowing(keep=()), {"a": 1})
    assert (out, changes) == ({}, [("keep", "a")])


# --- clamp ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "bound", "expected", "changed"),
    [
        (101, 100, 100, True),
        (100, 100, 100, False),
        (99, 100, 99, False),
        (100.5, 100, 100, True),
        (100.0, 100, 100.0, False),
        (-5, 100, -5, False),
        (10**30, 100, 100, True),
        (2.5, 2.25, 2.25, True),
        (2.25, 2.25, 2.25, False),
    ],
)
def test_clamp_lowers_numbers_above_the_bound(
    value: float, bound: float, expected: float, changed: bool
) -> None:
    out, changes = apply(clamp("limit", bound), {"limit": value, "other": 1})
    assert out == {"limit": expected, "other": 1}
    assert type(out["limit"]) is type(bound if changed else value)
    assert changes == ([("clamp", "limit")] if changed else [])


def test_clamp_reaches_a_dotted_path_and_copies_only_the_dicts_on_it() -> None:
    untouched = {"deep": [1, 2]}
    args = {"query": {"page": {"limit": 500}, "side": untouched}, "other": untouched}
    out, changes = apply(clamp("query.page.limit", 100), args)
    assert out == {"query": {"page": {"limit": 100}, "side": untouched}, "other": untouched}
    assert changes == [("clamp", "query.page.limit")]
    assert out["other"] is untouched  # copy on write: what did not change is shared
    assert out["query"] is not args["query"]


def test_clamp_of_an_absent_path_has_nothing_to_clamp() -> None:
    args = {"other": 1}
    out, changes = apply(clamp("limit", 100), args)
    assert (out, changes) == (args, [])
    out, changes = apply(clamp("query.limit", 100), {"query": {}})
    assert (out, changes) == ({"query": {}}, [])


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        (True, "needs a number, not a boolean"),
        (False, "needs a number, not a boolean"),
        ("500", "needs a number, not a string"),
        (None, "needs a number, not a null"),
        ([500], "needs a number, not a list"),
        (math.nan, "needs a finite number, not NaN or an infinity"),
        (math.inf, "needs a finite number, not NaN or an infinity"),
        (-math.inf, "needs a finite number, not NaN or an infinity"),
    ],
)
def test_clamp_refuses_what_is_not_a_finite_number(value: object, problem: str) -> None:
    with pytest.raises(NarrowingError) as info:
        apply(clamp("limit", 100), {"limit": value})
    error = info.value
    assert not isinstance(error, NarrowingEscape)
    assert isinstance(error, EvaluationError)
    assert (error.rule, error.path, error.kind, error.problem) == (
        "rule-n",
        "limit",
        "clamp",
        problem,
    )
    assert str(error) == f"rule 'rule-n': narrow.clamp 'limit': {problem}"
    with pytest.raises(NarrowingError) as nested:
        apply(clamp("q.limit", 100), {"q": {"limit": value}})
    assert (nested.value.path, nested.value.problem) == ("q.limit", problem)


@pytest.mark.parametrize("kind", ["clamp", "set", "within"])
@pytest.mark.parametrize(
    ("args", "problem"),
    [
        ({"q": [{"limit": 5}]}, "runs through a list at 'q'"),
        ({"q": SECRET}, "runs through a string at 'q'"),
        ({"q": 7}, "runs through a number at 'q'"),
        ({"q": {"limit": {"x": [1]}}}, None),
    ],
)
def test_a_path_through_anything_but_a_dict_is_an_error(
    kind: str, args: dict[str, Any], problem: str | None
) -> None:
    narrowing = {
        "clamp": clamp("q.limit.x.y", 1),
        "set": forced("q.limit.x.y", 1),
        "within": within("q.limit.x.y"),
    }[kind]
    with pytest.raises(NarrowingError) as info:
        apply(narrowing, args)
    assert (info.value.kind, info.value.path) == (kind, "q.limit.x.y")
    if problem is not None:
        assert info.value.problem == problem
    assert SECRET not in str(info.value)


def test_arguments_that_are_not_a_dict_are_an_error() -> None:
    with pytest.raises(NarrowingError) as info:
        Narrowing(keep=("a",)).apply("rule-n", [1], [])  # type: ignore[arg-type]
    assert str(info.value) == "rule 'rule-n': narrow: the arguments are a list, not a dict"


# --- set --------------------------------------------------------------------------------


def test_set_forces_a_value() -> None:
    out, changes = apply(forced("read_only", value=True), {"read_only": False, "a": 1})
    assert out == {"read_only": True, "a": 1}
    assert changes == [("set", "read_only")]
    out, changes = apply(forced("read_only", value=True), {"a": 1})
    assert (out, changes) == ({"read_only": True, "a": 1}, [("set", "read_only")])


@pytest.mark.parametrize(
    ("current", "value", "changed"),
    [
        (True, True, False),
        (1, True, True),  # 1 == True in Python; not the value the policy sets
        (1.0, 1, True),
        (1, 1, False),
        ("x", "x", False),
        ([1, {"a": 2}], [1, {"a": 2}], False),
        ([1, {"a": 2}], [1, {"a": 2.0}], True),
        (None, False, True),
    ],
)
def test_set_is_a_change_only_when_the_value_differs_in_type_or_value(
    current: Any, value: Any, changed: bool
) -> None:
    args = {"v": current}
    out, changes = apply(forced("v", value), args)
    assert changes == ([("set", "v")] if changed else [])
    assert out is not args if changed else out is args


def test_set_creates_missing_dicts_on_a_dotted_path() -> None:
    out, changes = apply(forced("options.safety.read_only", value=True), {"options": {"x": 1}})
    assert out == {"options": {"x": 1, "safety": {"read_only": True}}}
    assert changes == [("set", "options.safety.read_only")]


def test_set_values_are_fresh_plain_copies_on_every_call() -> None:
    narrowing = forced("cfg", {"tags": ["a"], "limits": {"n": 1}})
    first, _ = apply(narrowing, {})
    assert type(first["cfg"]) is dict
    assert type(first["cfg"]["tags"]) is list
    first["cfg"]["tags"].append("mutated")
    first["cfg"]["limits"]["n"] = 99
    second, _ = apply(narrowing, {})
    assert second == {"cfg": {"tags": ["a"], "limits": {"n": 1}}}
    assert second["cfg"] is not first["cfg"]
    assert second["cfg"]["tags"] is not first["cfg"]["tags"]


# --- within -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "confined"),
    [
        ("/data/public/q3.txt", "/data/public/q3.txt"),
        ("/data/public", "/data/public"),
        ("/data/public/", "/data/public"),
        ("/data/public/./q3/report.txt", "/data/public/q3/report.txt"),
        ("/data/public//q3//x", "/data/public/q3/x"),
        ("/data/public/a/../b", "/data/public/b"),
        ("/data/secret/../public/x", "/data/public/x"),
        ("q3/summary.csv", "/data/public/q3/summary.csv"),
        ("./x", "/data/public/x"),
        ("a/../b", "/data/public/b"),
        ("", "/data/public"),
        ("x%41", "/data/public/xA"),
        (".hidden", "/data/public/.hidden"),
        ("a\tb\nc", "/data/public/a\tb\nc"),  # POSIX allows control characters but NUL
    ],
)
def test_within_confines_under_the_prefix(value: str, confined: str) -> None:
    out, changes = apply(within("path"), {"path": value})
    assert out == {"path": confined}
    assert changes == ([("within", "path")] if confined != value else [])


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("/data/public/../secret", "resolves to a path outside it"),
        ("/data/public/../../etc/passwd", "resolves to a path outside it"),
        ("../../etc/passwd", "resolves to a path outside it"),
        ("..", "resolves to a path outside it"),
        ("/etc/passwd", "resolves to a path outside it"),
        ("/data/publicity", "resolves to a path outside it"),
        ("/data", "resolves to a path outside it"),
        ("/", "resolves to a path outside it"),
        ("../../../../../../x", "climbs above its root"),
        ("/data/public/x\x00.txt", "holds a NUL byte"),
        ("\x00", "holds a NUL byte"),
        ("//data/public/x", "starts with '//'"),
        ("///data/public/x", "starts with '//'"),
        ("~/.ssh/id_rsa", "starts with '~'"),
        ("~root/x", "starts with '~'"),
        ("%7e/x", "starts with '~'"),
        ("%7E/x", "starts with '~'"),
        ("/data/public\\..\\..\\etc", "holds a backslash"),
        ("..\\secret", "holds a backslash"),
        ("/data/public/%2e%2e/secret", "percent-encoded '.', '/' or '\\'"),
        ("/data/public/..%2fsecret", "percent-encoded '.', '/' or '\\'"),
        ("/data/public/%5c", "percent-encoded '.', '/' or '\\'"),
        ("/data/public/%252e%252e/x", "more than once"),
        ("/data/public/%c0%ae%c0%ae/x", "not UTF-8"),
        ("/data/public/%00", "percent-encoded control character"),
        ("/data/public/\uff0e\uff0e/x", "compatibility form"),
        ("/data/public/..;/x", "dots and spaces"),
        ("/data/public/...", "dots and spaces"),
        ("/data/public/\ud800", "lone surrogate"),
        ("a?b/../c", "after a '?' or '#'"),
    ],
)
def test_within_denies_every_escape(value: str, problem: str) -> None:
    with pytest.raises(NarrowingEscape) as info:
        apply(within("path"), {"path": value})
    error = info.value
    assert isinstance(error, NarrowingError)
    assert (error.rule, error.path, error.kind, error.prefix) == (
        "rule-n",
        "path",
        "within",
        "/data/public",
    )
    assert problem in error.problem
    assert str(error) == (
        "argument 'path' escapes '/data/public', the directory rule 'rule-n' confines it to:"
        f" it {error.problem}"
    )
    assert "etc" not in str(error)


def test_within_of_an_absent_path_has_nothing_to_confine() -> None:
    args = {"other": "/etc/passwd"}
    out, changes = apply(within("path"), args)
    assert (out, changes) == (args, [])
    out, changes = apply(within("file.path"), {"file": {}})
    assert (out, changes) == ({"file": {}}, [])


def test_within_confines_a_dotted_path() -> None:
    out, changes = apply(within("file.path"), {"file": {"path": "q3/x", "mode": "r"}})
    assert out == {"file": {"path": "/data/public/q3/x", "mode": "r"}}
    assert changes == [("within", "file.path")]
    with pytest.raises(NarrowingEscape, match=r"argument 'file\.path' escapes"):
        apply(within("file.path"), {"file": {"path": "../x"}})


@pytest.mark.parametrize(("value", "kind"), [(5, "number"), (b"/data/public/x", "bytes value"),
                                             (["/etc"], "list"), (None, "null")])  # fmt: skip
def test_within_refuses_what_is_not_a_string(value: object, kind: str) -> None:
    with pytest.raises(NarrowingError) as info:
        apply(within("path"), {"path": value})
    assert not isinstance(info.value, NarrowingEscape)
    assert (info.value.kind, info.value.path) == ("within", "path")
    assert info.value.problem == f"needs a string path, not a {kind}"


def test_within_the_root_directory_admits_every_absolute_path() -> None:
    out, _ = apply(within("p", "/"), {"p": "/etc/../x//y"})
    assert out == {"p": "/x/y"}
    out, _ = apply(within("p", "/"), {"p": "rel"})
    assert out == {"p": "/rel"}
    with pytest.raises(NarrowingEscape, match="climbs above its root"):
        apply(within("p", "/"), {"p": "/.."})


# Readers a tool might be: each resolves the confined text its way.
READERS = {
    "posix": lambda p: posixpath.normpath(p),
    "decode once": lambda p: posixpath.normpath(unquote(p)),
    "decode twice": lambda p: posixpath.normpath(unquote(unquote(p))),
    "backslash": lambda p: posixpath.normpath(p.replace("\\", "/")),
    "nfkc": lambda p: posixpath.normpath(unicodedata.normalize("NFKC", p)),
}


@given(st.one_of(path_texts(), path_texts(start="/data/public/"), st.text(max_size=30)))
@example("../../etc/passwd")
@example("/data/public/%2e%2e/%2e%2e/etc")
@example("//etc/passwd")
@example("/data/public/\x00/../../etc")
def test_within_never_yields_a_path_outside_its_prefix(value: str) -> None:
    try:
        out, _ = apply(within("path"), {"path": value})
    except NarrowingEscape:
        return
    confined = out["path"]
    assert confined == posixpath.normpath(confined)  # canonical: nothing left to resolve
    for name, read in READERS.items():
        resolved = read(confined)
        assert resolved == "/data/public" or resolved.startswith("/data/public/"), name


# --- order, construction ------------------------------------------------------------


def test_a_rule_applies_keep_clamp_set_within_in_that_order() -> None:
    narrowing = Narrowing(
        keep=("limit", "path"),
        clamp=((("limit",), 10),),
        set=((("read_only",), True),),
        within=((("path",), "/data/public"),),
    )
    out, changes = apply(narrowing, {"limit": 50, "path": "x", "drop": 1})
    assert out == {"limit": 10, "path": "/data/public/x", "read_only": True}
    assert changes == [
        ("keep", "drop"),
        ("clamp", "limit"),
        ("set", "read_only"),
        ("within", "path"),
    ]


def test_nothing_to_narrow_returns_the_same_arguments() -> None:
    args = {"limit": 5, "path": "/data/public/x", "read_only": True}
    narrowing = Narrowing(
        keep=("limit", "path", "read_only"),
        clamp=((("limit",), 10),),
        set=((("read_only",), True),),
        within=((("path",), "/data/public"),),
    )
    out, changes = apply(narrowing, args)
    assert out is args
    assert changes == []


@pytest.mark.parametrize("bound", [True, math.nan, math.inf, "5"])
def test_a_bad_clamp_bound_is_refused_on_construction(bound: object) -> None:
    with pytest.raises(ValueError, match=r"^a clamp bound must be a finite number$"):
        Narrowing(clamp=((("n",), bound),))  # type: ignore[arg-type]


def test_a_narrowing_is_frozen() -> None:
    import dataclasses

    with pytest.raises(dataclasses.FrozenInstanceError):
        Narrowing().keep = ("a",)  # type: ignore[misc]


@pytest.mark.parametrize(
    ("prefix", "message"),
    [
        ("data", "must be an absolute path, starting with a single '/'"),
        ("//data", "must be an absolute path, starting with a single '/'"),
        ("/data/", "must be in canonical form: write '/data'"),
        ("/data/../x", "must be in canonical form: write '/x'"),
        ("/data/./x", "must be in canonical form: write '/data/x'"),
        ("/data\\x", "cannot be used: it holds a backslash"),
        ("/data/%2e", "cannot be used: it holds a percent-encoded '.', '/' or '\\'"),
        ("/data/\x00", "cannot be used: it holds a control character"),
        ("/..", "cannot be used: it climbs above its root"),
        (5, "must be a string"),
    ],
)
def test_a_bad_within_prefix_is_refused_on_construction(prefix: object, message: str) -> None:
    with pytest.raises(ValueError, match=f"^{re.escape('a within prefix ' + message)}$"):
        Narrowing(within=((("p",), prefix),))  # type: ignore[arg-type]


# --- class 7: linear time -------------------------------------------------------------


@pytest.mark.parametrize(
    "make",
    [
        lambda n: "a/" * n,
        lambda n: "a/../" * n,
        lambda n: "../" * n,
        lambda n: "/" * n,
        lambda n: "%41" * n,
        lambda n: "\u00e9/" * n,
    ],
)
def test_within_is_linear(make: Any) -> None:
    narrowing = within("p")

    def run(value: str) -> None:
        with contextlib.suppress(NarrowingEscape):
            narrowing.apply("r", {"p": value}, [])

    # Most of the cost is str.split making n segment objects, which grows faster than n once
    # they outgrow the caches (x16 was seen on a loaded 2-core machine); a walk that rescans
    # the path per segment would cost x100 here.
    assert_linear(run, make, 2_000, bound=30.0)


@pytest.mark.parametrize("value", [10**400, 2**1024])
def test_an_int_too_large_for_a_float_is_clamped(value: int) -> None:
    out, changes = apply(clamp("limit", 10), {"limit": value})
    assert out == {"limit": 10}
    assert changes == [("clamp", "limit")]
    out, changes = apply(clamp("limit", 10), {"limit": -value})
    assert out == {"limit": -value}
    assert changes == []


def test_a_huge_int_bound_is_a_finite_bound() -> None:
    out, _ = apply(Narrowing(clamp=((path("n"), 10**400),)), {"n": 10**401})
    assert out == {"n": 10**400}
