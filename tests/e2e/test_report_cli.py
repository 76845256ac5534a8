"""``ghost report`` in a real subprocess: the demo run, a truncated run, a tampered run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.test_cli import assert_one_error_line, ghost
from tests.records import write_run, write_tampered_run

pytest.importorskip("plotly", reason="the report extra (plotly) is not installed")


def _report(run: Path, out: Path | str, *options: str) -> subprocess.CompletedProcess[bytes]:
    return ghost("report", run, "--html", out, *options, cwd=run.parent)


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("demo") / "demo.mcap"
    result = ghost("demo", "--out", out, cwd=out.parent)
    assert result.returncode == 0, result.stderr
    return out


def test_the_demo_run_gets_a_page_that_says_it_is_intact(demo_run: Path, tmp_path: Path) -> None:
    out = tmp_path / "report.html"

    result = _report(demo_run, out)

    assert result.returncode == 0, result.stderr
    assert result.stdout == b""
    assert result.stderr.decode() == (
        f"ghost: wrote the report of {demo_run} to {out}: 31 decision(s); the run is INTACT\n"
    )
    page = out.read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>")
    assert "Integrity: <strong>INTACT</strong>" in page
    assert "<script src" not in page  # everything is inlined
    assert "https://" not in page.split("<script")[0]  # no external style, font or image


def test_the_page_goes_to_standard_output_with_a_dash(demo_run: Path, tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    to_file = _report(demo_run, out)
    to_stdout = ghost("report", "--mcap", demo_run, "--html", "-", cwd=tmp_path)

    assert to_file.returncode == to_stdout.returncode == 0
    assert to_stdout.stdout == out.read_bytes()
    assert b"to standard output: 31 decision(s); the run is INTACT" in to_stdout.stderr


def test_a_truncated_run_gets_a_page_that_says_so(tmp_path: Path) -> None:
    live, cut = tmp_path / "live.mcap", tmp_path / "cut.mcap"
    sink = write_run(live, decisions=3, close=False)
    cut.write_bytes(live.read_bytes())  # what a crash leaves: no seal, no footer
    sink.close()

    result = _report(cut, tmp_path / "cut.html")

    assert result.returncode == 0, result.stderr
    assert result.stderr.endswith(b": 3 decision(s); the run is TRUNCATED\n")
    page = (tmp_path / "cut.html").read_text(encoding="utf-8")
    assert "Integrity: <strong>TRUNCATED</strong>" in page
    assert "not sealed" in page


def test_a_tampered_run_gets_a_page_that_says_so_and_lists_problems(tmp_path: Path) -> None:
    edited = write_tampered_run(tmp_path)

    result = _report(edited, tmp_path / "edited.html")

    assert result.returncode == 0, result.stderr
    assert b"; the run is TAMPERED, " in result.stderr
    page = (tmp_path / "edited.html").read_text(encoding="utf-8")
    assert "Integrity: <strong>TAMPERED</strong>" in page
    assert "The first " in page
    assert "<li><code>seq " in page  # the first problem names its record


def test_a_missing_run_is_one_error_line_and_exit_1(tmp_path: Path) -> None:
    result = _report(tmp_path / "nope.mcap", tmp_path / "out.html")
    assert result.returncode == 1
    assert_one_error_line(result, "cannot read")
    assert not (tmp_path / "out.html").exists()


def test_an_output_that_cannot_be_written_is_exit_1(demo_run: Path, tmp_path: Path) -> None:
    result = _report(demo_run, tmp_path / "no" / "such" / "dir.html")
    assert result.returncode == 1
    assert_one_error_line(result, "cannot write", "No such file or directory")


def test_the_report_never_replaces_the_run(demo_run: Path, tmp_path: Path) -> None:
    copy = tmp_path / "run.mcap"
    copy.write_bytes(demo_run.read_bytes())
    alias = tmp_path / "alias.mcap"
    alias.symlink_to(copy)
    for out in (copy, alias):
        result = _report(copy, out)
        assert result.returncode == 1
        assert_one_error_line(result, "will not write the report over the run itself")
    assert copy.read_bytes() == demo_run.read_bytes()


@pytest.mark.parametrize(
    "arguments", [["report"], ["report", "run.mcap"], ["report", "--html", "x.html"]]
)
def test_the_run_and_the_output_are_required(tmp_path: Path, arguments: list[str]) -> None:
    result = ghost(*arguments, cwd=tmp_path)
    assert result.returncode == 2
    assert b"usage: ghost report" in result.stderr
    assert b"Traceback" not in result.stderr


def test_without_plotly_the_message_says_what_to_install(tmp_path: Path) -> None:
    # A fresh interpreter in which plotly cannot be imported, as without the extra.
    code = (
        "import sys; sys.modules['plotly'] = None\n"
        "from analysis._cli import main\n"
        "sys.exit(main(sys.argv[1:]))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code, "report", "missing.mcap", "--html", "out.html"],
        cwd=tmp_path,
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 1
    # Said before the run is read: the run does not even exist.
    assert_one_error_line(result, "plotly", "pip install 'ghost-sdk[report]'")
    assert not (tmp_path / "out.html").exists()
