"""The page: generated blocks replaced per module, hand-kept reasons kept, stale ones flagged."""

from __future__ import annotations

from pathlib import Path

import pytest

from tools.mutation import (
    ConfigError,
    ModuleResult,
    Outcome,
    Status,
    Target,
    generate_mutants,
    load_config,
    parse_reasons,
    render_doc,
)

ROOT = Path(__file__).parents[2]
SOURCE = "def f(a, b):\n    if a > b:\n        return a\n    return b\n"
TARGET = Target("src/m.py", "m", ("tests/test_m.py",))
OTHER = Target("src/o.py", "o", ("tests/test_o.py",))


def _result(target: Target, survivors: set[str], *, sampled: bool = False) -> ModuleResult:
    mutants = generate_mutants(SOURCE, target.module).mutants
    outcomes = tuple(
        Outcome(m, Status.SURVIVED if m.description in survivors else Status.KILLED, 0, 0.1)
        for m in mutants
    )
    return ModuleResult(
        target=target,
        generated=len(mutants),
        all_ids=frozenset(m.id for m in mutants),
        outcomes=outcomes,
        sampled=sampled,
        unspliceable=0,
        baseline_s=1.0,
        timeout_s=33.0,
        duration_s=5.0,
    )


def _id(result: ModuleResult, description: str) -> str:
    return next(o.mutant.id for o in result.outcomes if o.mutant.description == description)


BOUNDARY = "`a > b` -> `a >= b`"
RETURN_A = "`a` -> `None`"


def test_reasons_are_read_with_their_continuation_lines_and_examples_are_not() -> None:
    hand_kept = (
        "Intro text.\n\n"
        "    - `m:f:00000000`: an indented example is not an entry\n\n"
        "- `m:f:11111111`: equivalent -- the first line\n"
        "  and the second.\n"
        "- `m:f:22222222` -- dash separator\n"
        "- `m:f:33333333`:\n"
        "not a continuation\n"
    )
    assert parse_reasons(hand_kept) == {
        "m:f:11111111": "equivalent -- the first line and the second.",
        "m:f:22222222": "dash separator",
        "m:f:33333333": "",
    }


def test_a_first_page_has_the_preamble_scores_survivors_and_an_empty_hand_kept_section() -> None:
    result = _result(TARGET, {BOUNDARY})
    page, warnings = render_doc(None, [result], [TARGET, OTHER])
    assert page.startswith("# Mutation testing\n")
    assert "| `m` | 6 | 5 | 0 | 1 | 83.3 % |" in page
    assert "| `o` | not run yet | | | | |" in page
    assert f"- `{_id(result, BOUNDARY)}` -- line 2, compare-boundary" in page
    assert "  +    if a >= b:" in page
    assert parse_reasons(page.split("<!-- mutation:generated:end -->")[1]) == {}
    assert warnings == [f"{_id(result, BOUNDARY)}: survived, no reason recorded"]


def test_a_run_keeps_hand_kept_text_and_other_modules_and_flags_stale_reasons() -> None:
    first = _result(TARGET, {BOUNDARY, RETURN_A})
    other = _result(OTHER, {BOUNDARY})
    page, _ = render_doc(None, [first, other], [TARGET, OTHER])
    boundary, returned = _id(first, BOUNDARY), _id(first, RETURN_A)
    hand_kept = (
        "## Why (hand-kept)\n\nFree text the tool must not touch.\n\n"
        f"- `{boundary}`: equivalent -- at a == b both branches return the same value.\n"
        f"- `{returned}`: a test will pin this.\n"
        "- `m:f:deadbeef`: the code this was about is gone.\n"
        "- `gone:f:12345678`: a module no longer configured.\n"
    )
    page = (
        page.split("<!-- mutation:generated:end -->")[0]
        + "<!-- mutation:generated:end -->\n\n"
        + hand_kept
    )
    # Now only the boundary mutant survives in `m`; `o` is not run this time.
    again, warnings = render_doc(page, [_result(TARGET, {BOUNDARY})], [TARGET, OTHER])
    assert again.endswith(hand_kept)
    assert (
        f"- `{boundary}` -- line 2, compare-boundary, `a > b` -> `a >= b` -- reason below" in again
    )
    assert f"- `{returned}` -- this mutant is killed now: delete the entry" in again
    assert "- `m:f:deadbeef` -- no such mutant any more" in again
    assert "Hand-kept entries for modules that are not configured:\n\n- `gone:f:12345678`" in again
    assert "| `o` | 6 | 5 | 0 | 1 | 83.3 % |" in again  # kept from the first page
    assert f"`{_id(other, BOUNDARY)}` -- line 2" in again
    assert sorted(warnings) == sorted(
        [
            f"{returned}: hand-kept reason matches no surviving mutant",
            "m:f:deadbeef: hand-kept reason matches no surviving mutant",
            "gone:f:12345678: hand-kept reason for an unconfigured module",
        ]
    )
    # Rendering the same results again changes nothing; a module dropped from the
    # configuration loses its block.
    assert render_doc(again, [_result(TARGET, {BOUNDARY})], [TARGET, OTHER])[0] == again
    dropped, _ = render_doc(again, [_result(TARGET, {BOUNDARY})], [TARGET])
    assert "| `o` |" not in dropped
    assert f"`{_id(other, BOUNDARY)}`" not in dropped


def test_a_sampled_run_is_never_written() -> None:
    with pytest.raises(ValueError, match="sampled"):
        render_doc(None, [_result(TARGET, set(), sampled=True)], [TARGET])


def test_the_repository_configuration_names_existing_modules_and_tests() -> None:
    config = load_config(ROOT / "tools" / "mutation" / "modules.toml", ROOT)
    assert config.src == "src"
    modules = [t.module for t in config.targets]
    assert len(modules) == len(set(modules))
    assert {"runtime._conditions", "audit._chain"} <= set(modules)
    for target in config.targets:
        assert target.path == f"src/{target.module.replace('.', '/')}.py"
        assert target.tests


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[modules]\n", "needs a [modules] table"),
        ('[modules]\n"src/m.py" = []\n', "non-empty list"),
        (
            '[modules]\n"src/m.py" = ["tests/missing.py"]\n',
            "no such file or directory: tests/missing.py",
        ),
        ('[modules]\n"lib/m.py" = ["tests/t.py"]\n', "not under the import root"),
        (
            '[modules]\n"src/m.py" = { tests = ["tests/t.py"], log = true }\n',
            "unknown keys ['log']",
        ),
        (
            '[modules]\n"src/m.py" = { tests = ["tests/t.py"], mutate_logging = 1 }\n',
            "true or false",
        ),
        ('tests = 1\n[modules]\n"src/m.py" = ["tests/t.py"]\n', "unknown keys ['tests']"),
        ("[modules\n", "cannot read"),
    ],
)
def test_configuration_errors_name_the_problem(tmp_path: Path, text: str, message: str) -> None:
    for name in ("src/m.py", "lib/m.py", "tests/t.py"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("")
    (tmp_path / "c.toml").write_text(text)
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("]", r"\]")):
        load_config(tmp_path / "c.toml", tmp_path)


def test_a_configuration_entry_can_opt_in_to_logging_mutants(tmp_path: Path) -> None:
    for name in ("src/pkg/__init__.py", "src/pkg/anchor.py", "tests/t.py"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("")
    (tmp_path / "c.toml").write_text(
        '[modules]\n"src/pkg/anchor.py" = { tests = ["tests/t.py"], mutate_logging = true }\n'
        '"src/pkg/__init__.py" = ["tests/t.py"]\n'
    )
    config = load_config(tmp_path / "c.toml", tmp_path)
    assert config.targets == (
        Target("src/pkg/anchor.py", "pkg.anchor", ("tests/t.py",), mutate_logging=True),
        Target("src/pkg/__init__.py", "pkg", ("tests/t.py",)),
    )
