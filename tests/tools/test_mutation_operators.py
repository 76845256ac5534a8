"""The mutant generator: each operator makes the mutant it names, skips hold, ids are stable."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import pytest

from tools.mutation import Mutant, generate_mutants

ROOT = Path(__file__).parents[2]


def _mutants(source: str, *, mutate_logging: bool = False) -> list[Mutant]:
    generated = generate_mutants(textwrap.dedent(source), "fixture", mutate_logging=mutate_logging)
    assert generated.unspliceable == 0
    return list(generated.mutants)


def _added_lines(mutant: Mutant) -> list[str]:
    return [line[1:].strip() for line in mutant.diff.splitlines() if line.startswith("+")]


def _in_function(line: str) -> str:
    return f"def f(a, b, n, s, x, items):\n    {line}\n    return x\n"


@pytest.mark.parametrize(
    ("line", "operator", "expected"),
    [
        ("x = a + b", "arith", "x = a - b"),
        ("x = a - b", "arith", "x = a + b"),
        ("x = a * b", "arith", "x = a / b"),
        ("x = a / b", "arith", "x = a * b"),
        ("x = a // b", "arith", "x = a * b"),
        ("x = a % b", "arith", "x = a // b"),
        ("x += n", "arith", "x -= n"),
        ("x = a < b", "compare-boundary", "x = a <= b"),
        ("x = a < b", "compare-negate", "x = a >= b"),
        ("x = a <= b", "compare-boundary", "x = a < b"),
        ("x = a <= b", "compare-negate", "x = a > b"),
        ("x = a > b", "compare-boundary", "x = a >= b"),
        ("x = a > b", "compare-negate", "x = a <= b"),
        ("x = a >= b", "compare-boundary", "x = a > b"),
        ("x = a >= b", "compare-negate", "x = a < b"),
        ("x = a == b", "compare-negate", "x = a != b"),
        ("x = a != b", "compare-negate", "x = a == b"),
        ("x = a is None", "compare-negate", "x = a is not None"),
        ("x = a is not None", "compare-negate", "x = a is None"),
        ("x = a in items", "compare-negate", "x = a not in items"),
        ("x = a not in items", "compare-negate", "x = a in items"),
        ("x = a < b < n", "compare-negate", "x = a < b >= n"),
        ("x = a and b", "bool-swap", "x = a or b"),
        ("x = a or b", "bool-swap", "x = a and b"),
        ("x = not a", "not-removed", "x = a"),
        ("x = 64", "number", "x = 65"),
        ("x = 64", "number", "x = 63"),
        ("x = 64", "number", "x = 0"),
        ("x = 0", "number", "x = -1"),
        ("x = 0.5", "number", "x = 1.5"),
        ("x = True", "bool-constant", "x = False"),
        ("x = 'abc'", "string", "x = ''"),
        ("x = ''", "string", "x = 'x'"),
        ("x = b'ab'", "string", "x = b''"),
        ("x = f'{a}!'", "string", "x = ''"),
        ("x = s[1:n]", "slice", "x = s[:n]"),
        ("x = s[1:n]", "slice", "x = s[1:]"),
        ("x = s[1:n]", "slice", "x = s[1:n + 1]"),
        ("x = s[1:n]", "slice", "x = s[1:n - 1]"),
        ("x = a if b else n", "branch-forced", "x = a if True else n"),
        ("x = a if b else n", "branch-forced", "x = a if False else n"),
        ("x = [i for i in items if i]", "branch-forced", "x = [i for i in items if True]"),
        ("g(a)", "statement-removed", "pass"),
        ("raise ValueError(a)", "statement-removed", "pass"),
    ],
)
def test_each_operator_makes_the_mutant_it_names(line: str, operator: str, expected: str) -> None:
    mutants = [m for m in _mutants(_in_function(line)) if m.operator == operator]
    assert expected in [added for m in mutants for added in _added_lines(m)]


def test_return_becomes_return_none_and_bare_returns_are_left_alone() -> None:
    source = "def f(a):\n    if a:\n        return\n    return a\n"
    returns = [m for m in _mutants(source) if m.operator == "return-none"]
    assert [_added_lines(m) for m in returns] == [["return None"]]
    assert returns[0].line == 4


def test_if_tests_are_forced_both_ways_and_elif_too() -> None:
    source = "def f(a, b):\n    if a:\n        g()\n    elif b:\n        h()\n"
    forced = {tuple(_added_lines(m)) for m in _mutants(source) if m.operator == "branch-forced"}
    assert forced == {("if True:",), ("if False:",), ("elif True:",), ("elif False:",)}


def test_loops_lose_continue_and_break() -> None:
    source = textwrap.dedent(
        """\
        def f(items):
            for i in items:
                g(i)
                if i:
                    h()
                    continue
                break
        """
    )
    removed = [m for m in _mutants(source) if m.operator == "statement-removed"]
    assert sorted(m.description for m in removed) == [
        "removed `break`",
        "removed `continue`",
        "removed `g(i)`",
        "removed `h()`",
    ]


def test_the_only_statement_of_an_if_is_removed_by_forcing_the_if_not_twice() -> None:
    source = "def f(a):\n    if a:\n        raise ValueError('no')\n    return 1\n"
    mutants = _mutants(source)
    assert not [m for m in mutants if m.operator == "statement-removed"]
    assert ["if False:"] in [_added_lines(m) for m in mutants]


def test_a_lone_raise_is_removed_when_the_if_has_an_else() -> None:
    source = "def f(a):\n    if a:\n        raise ValueError('no')\n    else:\n        g()\n"
    removed = [m.description for m in _mutants(source) if m.operator == "statement-removed"]
    assert removed == ["removed `raise ValueError('no')`", "removed `g()`"]


def test_while_tests_are_not_forced_but_their_comparisons_are_mutated() -> None:
    source = "def f(i, n):\n    while i < n:\n        i += 1\n    return i\n"
    operators = {m.operator for m in _mutants(source)}
    assert "branch-forced" not in operators
    assert {"compare-boundary", "compare-negate", "arith", "number"} <= operators


SKIPPED = '''
    """Module docstring."""
    from __future__ import annotations

    from dataclasses import dataclass
    from typing import TYPE_CHECKING, Final, Literal, TypeAlias, TypeVar, cast

    if TYPE_CHECKING:
        from collections.abc import Sequence

    __all__ = ["Thing", "f"]

    Mode: TypeAlias = Literal["a", "b"] | None
    Origin = Literal["supplied", "generated"]
    T = TypeVar("T", bound="int")
    LIMIT: Final[int] = 3
    """Documents LIMIT; not a value."""


    @dataclass(frozen=True, slots=True)
    class Thing:
        """A thing."""

        __slots__ = ()
        name: Literal["x"] = "x"


    def f(v: int | None = None, *, mode: Literal["a", "b"] = "a") -> Sequence[str]:
        """Docstring with 'quotes' and numbers 1 2 3."""
        assert isinstance(v, int), "narrowing for mypy"
        _log.info("ghost.thing_done", count=1)
        value = cast("list[str]", v)
        return value


    if __name__ == "__main__":
        f(1)
'''


def test_skipped_constructs_make_no_mutants() -> None:
    mutants = _mutants(SKIPPED)
    # What remains: LIMIT's number, the dataclass's `frozen`, the field default, the
    # keyword default "a" and `return value` -- and nothing from the skipped parts.
    assert sorted(m.description for m in mutants) == sorted(
        [
            "`3` -> `4`",
            "`3` -> `2`",
            "`3` -> `0`",
            "`True` -> `False`",
            "`'x'` -> `''`",
            "`'a'` -> `''`",
            "`value` -> `None`",
        ]
    )
    frozen = next(m for m in mutants if m.operator == "bool-constant")
    assert _added_lines(frozen) == ["@dataclass(frozen=False, slots=True)"]


def test_logging_calls_are_mutated_when_a_module_opts_in() -> None:
    plain = {m.description for m in _mutants(SKIPPED)}
    opted = {m.description for m in _mutants(SKIPPED, mutate_logging=True)}
    assert opted - plain == {
        "removed `_log.info('ghost.thing_done', count=1)`",
        "`'ghost.thing_done'` -> `''`",
        "`1` -> `2`",
        "`1` -> `0`",
    }


def test_a_splice_keeps_comments_layout_and_non_ascii_text() -> None:
    source = 'def f(a, b):\n    label = "é—" if a < b else "z"  # why: keep me\n    return label\n'
    mutant = next(m for m in _mutants(source) if m.operator == "compare-boundary")
    assert mutant.source == source.replace("a < b", "a <= b")
    assert [line[0] for line in mutant.diff.splitlines() if line[0] in "+-"] == ["-", "+"]


def test_a_replacement_is_parenthesised_when_precedence_demands() -> None:
    source = "def f(a, b, c):\n    return c and not (a or b)\n"
    mutant = next(m for m in _mutants(source) if m.operator == "not-removed")
    returned = ast.parse(mutant.source).body[0].body[0].value  # type: ignore[attr-defined]
    assert ast.dump(returned) == ast.dump(ast.parse("c and (a or b)", mode="eval").body)


def test_ids_do_not_change_when_other_code_changes() -> None:
    base = "def f(a, b):\n    return a < b\n\n\ndef g(x):\n    return x + 1\n"
    edited = "import os\n\n\ndef h():\n    return os.sep\n\n\n" + base.replace("x + 1", "x * 2")
    before = {m.id: m.description for m in _mutants(base)}
    after = {m.id: m.description for m in _mutants(edited)}
    f_ids = {i for i in before if i.startswith("fixture:f:")}
    assert f_ids
    assert {i: before[i] for i in f_ids} == {i: after[i] for i in f_ids}
    assert not {i for i in before if i.startswith("fixture:g:")} & set(after)


def test_identical_code_twice_in_a_function_gets_two_ids() -> None:
    mutants = _mutants("def f(a):\n    g(a < 1)\n    g(a < 1)\n")
    boundary = [m for m in mutants if m.operator == "compare-boundary"]
    assert len(boundary) == 2
    assert len({m.id for m in boundary}) == 2
    assert [m.line for m in boundary] == [2, 3]


@pytest.mark.parametrize(
    "path", ["src/runtime/_glob.py", "src/runtime/_conditions.py", "src/audit/_chain.py"]
)
def test_every_mutant_of_a_real_module_is_a_distinct_valid_program(path: str) -> None:
    source = (ROOT / path).read_text(encoding="utf-8")
    generated = generate_mutants(source, "m")
    original = ast.dump(ast.parse(source))
    assert generated.unspliceable == 0
    assert len(generated.mutants) > 50
    assert len({m.id for m in generated.mutants}) == len(generated.mutants)
    assert len({m.source for m in generated.mutants}) == len(generated.mutants)
    for mutant in generated.mutants:
        assert ast.dump(ast.parse(mutant.source)) != original
        removed = [line for line in mutant.diff.splitlines() if line.startswith("-")]
        assert removed, mutant.id
        assert source.splitlines()[mutant.line - 1].strip() == removed[0][1:].strip()
