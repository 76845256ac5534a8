"""The runner and the command line, on a tiny project: real pytest runs, real mutants."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from tools.mutation import Status, Target, Workspace, generate_mutants, main

CLAMP = """\
def clamp(value, bound):
    if value > bound:
        return bound
    return value
"""
COUNT = """\
def count_up(n):
    i = 0
    while i < n:
        i += 1
    return i
"""
PAIR = """\
def add(a, b):
    return a + b


def untested(x):
    return x + 1
"""
TESTS = {
    "test_clamp.py": (
        "from clamp import clamp\n\n\n"
        "def test_clamp():\n    assert clamp(7, 5) == 5\n    assert clamp(3, 5) == 3\n"
    ),
    "test_count.py": (
        "from count import count_up\n\n\ndef test_count():\n    assert count_up(3) == 3\n"
    ),
    "test_pair.py": "from pair import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n",
}
CONFIG = """\
src = "src"

[modules]
"src/clamp.py" = ["tests/test_clamp.py"]
"""


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    # The tiny project needs no plugin; not loading Hypothesis's saves a second per run.
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    root = tmp_path / "project"
    _write(
        root,
        {
            "src/clamp.py": CLAMP,
            "src/count.py": COUNT,
            "src/pair.py": PAIR,
            "mutation.toml": CONFIG,
            **{f"tests/{name}": text for name, text in TESTS.items()},
        },
    )
    return root


def _snapshot(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


def test_a_run_classifies_killed_and_surviving_mutants_and_keeps_the_page(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = _snapshot(project)
    docs = project / "docs" / "mutation.md"
    results = project / "results.json"
    code = main(
        [
            "--root", str(project), "--config", str(project / "mutation.toml"),
            "--docs", str(docs), "--json", str(results), "--jobs", "2", "--fail-under", "90",
        ]
    )  # fmt: skip
    out = capsys.readouterr().out
    assert code == 1, out  # one survivor in six: 83.3 % < 90 %
    (module,) = json.loads(results.read_text())["modules"]
    status = {m["description"]: m["status"] for m in module["mutants"]}
    # `>=` is equivalent: clamp(5, 5) is 5 either way, so no test can kill it.
    assert status.pop("`value > bound` -> `value >= bound`") == "survived"
    assert set(status.values()) == {"killed"}
    assert len(status) == 5
    assert (module["killed"], module["survived"], module["score"]) == (5, 1, 83.33)
    assert "FAIL clamp: 83.3 % < 90 %" in out
    page = docs.read_text()
    survivor = next(m for m in module["mutants"] if m["status"] == "survived")
    assert f"`{survivor['id']}` -- line 2, compare-boundary" in page
    assert "**no reason recorded**" in page
    assert "+    if value >= bound:" in page
    # The working tree is untouched: no mutant, no bytecode, no cache left behind.
    after = _snapshot(project)
    assert {
        k: v for k, v in after.items() if k not in {"docs/mutation.md", "results.json"}
    } == before


def test_a_recorded_reason_is_kept_and_satisfies_require_reasons(project: Path) -> None:
    docs = project / "docs" / "mutation.md"
    args = ["--root", str(project), "--config", str(project / "mutation.toml"), "--docs", str(docs)]
    survivor_id = next(
        m.id
        for m in generate_mutants(CLAMP, "clamp").mutants
        if m.description == "`value > bound` -> `value >= bound`"
    )
    # Record a reason for the survivor, and one for a mutant that does not exist.
    docs.parent.mkdir()
    docs.write_text(
        "# page\n\n<!-- mutation:generated:begin -->\n<!-- mutation:generated:end -->\n\n"
        f"## Reasons\n\n- `{survivor_id}`: equivalent -- at value == bound both\n"
        "  branches return the same number.\n- `clamp:clamp:deadbeef`: an old reason.\n"
    )
    assert main([*args, "--require-reasons", "--fail-under", "80"]) == 0
    page = docs.read_text()
    assert "reason below" in page
    assert "- `clamp:clamp:deadbeef` -- no such mutant any more" in page
    assert page.endswith(
        f"- `{survivor_id}`: equivalent -- at value == bound both\n"
        "  branches return the same number.\n- `clamp:clamp:deadbeef`: an old reason.\n"
    )


def test_a_sample_runs_only_some_mutants_and_writes_no_page(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    docs = project / "docs" / "mutation.md"
    args = ["--root", str(project), "--config", str(project / "mutation.toml"), "--docs", str(docs)]
    assert main([*args, "--sample", "2", "--seed", "3"]) in {0, 1}
    assert "2 mutants (sample of 6)" in capsys.readouterr().out
    assert not docs.exists()


def test_list_and_configuration_errors(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["--root", str(project), "--config", str(project / "mutation.toml")]
    assert main([*args, "--list"]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert len(listed) == 6
    assert all(line.startswith("clamp:clamp:") for line in listed)
    assert main([*args, "--module", "nothing"]) == 2
    assert "no configured module matches 'nothing'" in capsys.readouterr().err
    assert main([*args, "--mutant", "clamp:clamp:00000000"]) == 2
    assert "no such mutant in the modules selected: clamp:clamp:00000000" in capsys.readouterr().err
    one = listed[0].split("\t")[0]
    assert main([*args, "--mutant", one, "--docs", str(project / "page.md")]) == 0
    assert "clamp: 1 mutants (sample of 6), 1 killed" in capsys.readouterr().out
    assert not (project / "page.md").exists()


def test_a_module_whose_tests_fail_unmutated_is_not_scored(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (project / "tests" / "test_clamp.py").write_text("def test_broken():\n    assert False\n")
    code = main(["--root", str(project), "--config", str(project / "mutation.toml"), "--no-docs"])
    assert code == 2
    assert "its tests fail without any mutant" in capsys.readouterr().out


def test_an_endless_loop_times_out_and_counts_as_killed(project: Path) -> None:
    target = Target("src/count.py", "count", ("tests/test_count.py",))
    endless = [
        m
        for m in generate_mutants(COUNT, "count").mutants
        if m.description == "`i += 1` -> `i -= 1`"
    ]
    assert len(endless) == 1
    with Workspace(project, "src", 1) as workspace:
        assert workspace.baseline(target).passed
        (outcome,) = workspace.run(target, endless, timeout_s=2.0)
    assert outcome.status is Status.TIMED_OUT
    assert outcome.exit_code is None


def test_same_size_mutants_in_a_row_never_run_stale_bytecode(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Both mutants have the original's size, and run one after the other in one copy,
    # mostly within the same second: bytecode validated by size and mtime (seconds) would
    # run the previous mutant's code. Every switch between the two is a chance to catch it.
    monkeypatch.delenv("PYTHONDONTWRITEBYTECODE", raising=False)
    target = Target("src/pair.py", "pair", ("tests/test_pair.py",))
    by_description = {m.description: m for m in generate_mutants(PAIR, "pair").mutants}
    untested, tested = by_description["`x + 1` -> `x - 1`"], by_description["`a + b` -> `a - b`"]
    with Workspace(project, "src", 1) as workspace:
        assert workspace.baseline(target).passed
        outcomes = workspace.run(target, [untested, tested] * 3, timeout_s=60.0)
    assert [o.status for o in outcomes] == [Status.SURVIVED, Status.KILLED] * 3


def test_a_run_that_allocates_without_end_fails_at_the_memory_limit(project: Path) -> None:
    (project / "tests" / "test_hungry.py").write_text(
        "def test_hungry():\n    assert bytearray(1 << 30)\n"
    )
    target = Target("src/pair.py", "pair", ("tests/test_hungry.py",))
    with Workspace(project, "src", 1, memory_limit_mb=256) as workspace:
        limited = workspace.baseline(target)
    with Workspace(project, "src", 1, memory_limit_mb=0) as workspace:
        unlimited = workspace.baseline(target)
    assert not limited.passed
    assert "MemoryError" in limited.output
    assert unlimited.passed
