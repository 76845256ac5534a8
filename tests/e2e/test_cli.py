"""The ``ghost`` command line, run as a real subprocess: exit codes, streams, files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from mcap.writer import Writer

from analysis import (
    ChainStatus,
    build_decision_trace_report,
    decode_decision_trace_report_from_json,
    encode_decision_trace_report_to_bytes,
)
from runtime import canonical_bytes
from tests.audit.mcap_tools import rewrite_mcap
from tests.records import write_run

GHOST_SCRIPT = Path(sys.executable).parent / "ghost"


def ghost(*args: str | Path, cwd: Path, script: bool = False) -> subprocess.CompletedProcess[bytes]:
    """Run the CLI in a fresh interpreter, as a user would."""
    command: list[str | Path] = [GHOST_SCRIPT] if script else [sys.executable, "-m", "analysis"]
    return subprocess.run([*command, *args], cwd=cwd, capture_output=True, timeout=120, check=False)


def assert_one_error_line(result: subprocess.CompletedProcess[bytes], *needles: str) -> None:
    stderr = result.stderr.decode()
    assert "Traceback" not in stderr
    assert stderr.startswith("ghost: error: ")
    assert stderr.count("\n") == 1, stderr
    for needle in needles:
        assert needle in stderr, (needle, stderr)
    assert result.stdout == b""


@pytest.fixture
def run_file(tmp_path: Path) -> Path:
    path = tmp_path / "run.mcap"
    write_run(path, decisions=3)
    return path


# --- success --------------------------------------------------------------------------------


def test_trace_decisions_prints_the_canonical_report(run_file: Path, tmp_path: Path) -> None:
    result = ghost("trace-decisions", "--mcap", run_file, cwd=tmp_path)

    assert result.returncode == 0, result.stderr
    assert result.stderr == b""
    report = decode_decision_trace_report_from_json(result.stdout)
    assert report.verified_count == report.total_decisions == 3
    assert result.stdout == encode_decision_trace_report_to_bytes(
        build_decision_trace_report(run_file)
    )
    assert "café".encode() in result.stdout


def test_the_console_script_runs_the_same_command(run_file: Path, tmp_path: Path) -> None:
    assert GHOST_SCRIPT.exists(), f"the console script is not installed at {GHOST_SCRIPT}"

    result = ghost("trace-decisions", "--mcap", run_file, cwd=tmp_path, script=True)

    assert result.returncode == 0, result.stderr
    assert result.stdout == ghost("trace-decisions", "--mcap", run_file, cwd=tmp_path).stdout


def test_output_writes_the_bytes_stdout_would_show(run_file: Path, tmp_path: Path) -> None:
    output = tmp_path / "report.json"

    written = ghost("trace-decisions", "--mcap", run_file, "--output", output, cwd=tmp_path)
    printed = ghost("trace-decisions", "--mcap", run_file, cwd=tmp_path)

    assert written.returncode == 0, written.stderr
    assert written.stdout == written.stderr == b""
    assert output.read_bytes() == printed.stdout


def test_relative_paths_are_relative_to_the_working_directory(tmp_path: Path) -> None:
    write_run(tmp_path / "rel.mcap", decisions=1)

    result = ghost("trace-decisions", "--mcap", "rel.mcap", "--output", "out.json", cwd=tmp_path)

    assert result.returncode == 0, result.stderr
    assert decode_decision_trace_report_from_json((tmp_path / "out.json").read_bytes())


def test_a_broken_chain_is_reported_not_an_error(run_file: Path, tmp_path: Path) -> None:
    def alter(topic: str, data: bytes) -> bytes:
        if topic != "/assessments":
            return data
        return canonical_bytes({**json.loads(data), "agent": "attacker"})

    tampered = tmp_path / "tampered.mcap"
    rewrite_mcap(run_file, tampered, alter)

    result = ghost("trace-decisions", "--mcap", tampered, cwd=tmp_path)

    assert result.returncode == 0, result.stderr
    report = decode_decision_trace_report_from_json(result.stdout)
    assert report.broken_count == 3
    assert {record.chain_status for record in report.records} == {ChainStatus.BROKEN}


def test_a_truncated_run_is_reported_and_warned_about(run_file: Path, tmp_path: Path) -> None:
    data = run_file.read_bytes()
    cut = tmp_path / "cut.mcap"
    cut.write_bytes(data[: data.index(b'"schema":"ghost.seal/1"')])

    result = ghost("trace-decisions", "--mcap", cut, cwd=tmp_path)

    assert result.returncode == 0, result.stderr
    report = decode_decision_trace_report_from_json(result.stdout)
    assert (report.truncated, report.sealed) == (True, False)
    assert result.stderr.decode().splitlines() == [
        (
            f"ghost: warning: {cut} is truncated: the file ends before its MCAP footer, as a crash"
            " leaves it; the report covers the complete records before the cut"
        ),
        (
            f"ghost: warning: {cut} is not sealed: the run was not closed cleanly, or its seal was"
            f" removed; `ghost verify --mcap {cut}` tells which"
        ),
    ]


def test_an_unsealed_complete_run_is_warned_about(run_file: Path, tmp_path: Path) -> None:
    unsealed = tmp_path / "unsealed.mcap"
    rewrite_mcap(run_file, unsealed, lambda topic, data: None if topic == "/seal" else data)

    result = ghost("trace-decisions", "--mcap", unsealed, "--output", "-", cwd=tmp_path)

    assert result.returncode == 0, result.stderr
    report = decode_decision_trace_report_from_json(result.stdout)
    assert (report.truncated, report.sealed) == (False, False)
    stderr = result.stderr.decode()
    assert stderr.count("\n") == 1
    assert stderr.startswith(f"ghost: warning: {unsealed} is not sealed")


def test_output_dash_means_standard_output(run_file: Path, tmp_path: Path) -> None:
    result = ghost("trace-decisions", "--mcap", run_file, "--output", "-", cwd=tmp_path)

    assert result.returncode == 0, result.stderr
    assert result.stdout == ghost("trace-decisions", "--mcap", run_file, cwd=tmp_path).stdout
    assert not (tmp_path / "-").exists()


def test_a_file_named_dash_is_still_reachable(run_file: Path, tmp_path: Path) -> None:
    result = ghost("trace-decisions", "--mcap", run_file, "--output", "./-", cwd=tmp_path)

    assert result.returncode == 0, result.stderr
    assert result.stdout == b""
    assert decode_decision_trace_report_from_json((tmp_path / "-").read_bytes())


def test_version_and_help(tmp_path: Path) -> None:
    version = ghost("--version", cwd=tmp_path)
    assert version.returncode == 0
    assert version.stdout.decode().startswith("ghost ")

    for args in (["--help"], ["trace-decisions", "--help"]):
        result = ghost(*args, cwd=tmp_path)
        assert result.returncode == 0
        assert b"usage: ghost" in result.stdout


# --- exit 1: unreadable input, unwritable output ---------------------------------------------


def test_a_missing_file_exits_1(tmp_path: Path) -> None:
    missing = tmp_path / "nope.mcap"

    result = ghost("trace-decisions", "--mcap", missing, cwd=tmp_path)

    assert result.returncode == 1
    assert_one_error_line(result, str(missing), "no such file")


def test_a_text_file_exits_1(tmp_path: Path) -> None:
    text = tmp_path / "notes.txt"
    text.write_text("this is not an MCAP file\n")

    result = ghost("trace-decisions", "--mcap", text, cwd=tmp_path)

    assert result.returncode == 1
    assert_one_error_line(result, str(text), "not an MCAP file")


def test_a_directory_exits_1(tmp_path: Path) -> None:
    result = ghost("trace-decisions", "--mcap", tmp_path, cwd=tmp_path)

    assert result.returncode == 1
    assert_one_error_line(result, str(tmp_path), "directory")


def test_an_mcap_file_from_another_program_exits_1(tmp_path: Path) -> None:
    foreign = tmp_path / "camera.mcap"
    with foreign.open("wb") as stream:
        writer = Writer(stream)
        writer.start(profile="", library="someone else")
        schema = writer.register_schema("Image", "jsonschema", b'{"type": "object"}')
        channel = writer.register_channel("/camera", "json", schema)
        writer.add_message(channel, log_time=1, data=b'{"pixels": []}', publish_time=1)
        writer.finish()

    result = ghost("trace-decisions", "--mcap", foreign, cwd=tmp_path)

    assert result.returncode == 1
    assert_one_error_line(result, str(foreign), "not a ghost audit log")


@pytest.mark.parametrize("where", ["missing_dir", "directory"])
def test_an_unwritable_output_exits_1(run_file: Path, tmp_path: Path, where: str) -> None:
    output = (
        tmp_path / "no" / "such" / "dir" / "report.json" if where == "missing_dir" else tmp_path
    )

    result = ghost("trace-decisions", "--mcap", run_file, "--output", output, cwd=tmp_path)

    assert result.returncode == 1
    assert_one_error_line(result, f"cannot write {output}")


# --- ghost demo: where it writes ------------------------------------------------------------


def demo(out: Path | str, cwd: Path) -> subprocess.CompletedProcess[bytes]:
    return ghost("demo", "--out", out, cwd=cwd)


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux /proc")
def test_demo_into_an_unwritable_place_exits_1(tmp_path: Path) -> None:
    result = demo("/proc/x.mcap", tmp_path)

    assert result.returncode == 1
    assert_one_error_line(result, "cannot write the demo run to /proc/x.mcap")


def test_demo_never_replaces_a_file_that_is_not_its_own(tmp_path: Path) -> None:
    precious = tmp_path / "audit.mcap"
    write_run(precious, decisions=2)
    before = precious.read_bytes()

    result = demo(precious, tmp_path)

    assert result.returncode == 1
    assert_one_error_line(result, f"will not replace {precious}", "not a previous ghost demo run")
    assert precious.read_bytes() == before
    assert not precious.with_suffix(".trace.json").exists()


def test_demo_never_replaces_a_report_path_that_is_not_a_report(tmp_path: Path) -> None:
    notes = tmp_path / "run.trace.json"
    notes.write_text("my notes\n")

    result = demo(tmp_path / "run.mcap", tmp_path)

    assert result.returncode == 1
    assert_one_error_line(result, f"will not replace {notes}", "not a ghost decision trace report")
    assert notes.read_text() == "my notes\n"
    assert not (tmp_path / "run.mcap").exists()


def test_demo_refuses_a_directory(tmp_path: Path) -> None:
    (tmp_path / "runs.mcap").mkdir()

    result = demo(tmp_path / "runs.mcap", tmp_path)

    assert result.returncode == 1
    assert_one_error_line(result, "will not replace")


def test_demo_replaces_its_own_previous_run(tmp_path: Path) -> None:
    out = tmp_path / "deep" / "er" / "demo.mcap"
    first = demo(out, tmp_path)
    assert first.returncode == 0, first.stderr
    first_bytes = out.read_bytes()

    second = demo(out, tmp_path)

    assert second.returncode == 0, second.stderr
    assert b"Traceback" not in second.stderr
    assert f"(replaced the previous demo run at {out})".encode() in second.stdout
    assert out.read_bytes() != first_bytes  # a new run: new ids, new stamps
    report = decode_decision_trace_report_from_json(out.with_suffix(".trace.json").read_bytes())
    assert report == build_decision_trace_report(out)
    # Nothing is left of the staging directory.
    assert sorted(path.name for path in out.parent.iterdir()) == ["demo.mcap", "demo.trace.json"]
    assert ghost("verify", "--mcap", out, cwd=tmp_path).returncode == 0


# --- exit 2: usage ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        [],
        ["trace-decisions"],
        ["trace-decisions", "--mcap"],
        ["frobnicate"],
        ["trace-decisions", "--mcap", "x.mcap", "--colour", "blue"],
    ],
    ids=["no-args", "missing-mcap", "mcap-without-value", "unknown-command", "unknown-option"],
)
def test_usage_errors_exit_2(tmp_path: Path, args: list[str]) -> None:
    result = ghost(*args, cwd=tmp_path)

    assert result.returncode == 2
    stderr = result.stderr.decode()
    assert "usage: ghost" in stderr
    assert "Traceback" not in stderr
    assert result.stdout == b""


# --- --output is replaced whole, or not at all (the streamed report, ADR 0026) ---------------


def _ghost_limited(
    *args: str | Path, cwd: Path, file_bytes: int
) -> subprocess.CompletedProcess[bytes]:
    """The CLI with files it writes capped at ``file_bytes`` (RLIMIT_FSIZE: EFBIG past it)."""
    import resource

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (file_bytes, file_bytes))

    # preexec_fn: the child only sets a limit before it execs.
    return subprocess.run(
        [sys.executable, "-m", "analysis", *args],
        cwd=cwd,
        capture_output=True,
        timeout=120,
        check=False,
        preexec_fn=cap,
    )


@pytest.mark.skipif(sys.platform == "win32", reason="needs POSIX resource limits")
def test_an_output_that_fails_halfway_leaves_the_old_file_whole(
    run_file: Path, tmp_path: Path
) -> None:
    output = tmp_path / "out" / "report.json"
    output.parent.mkdir()
    output.write_bytes(b"the previous report\n")

    # The report is several kilobytes; the file system takes one.
    result = _ghost_limited(
        "trace-decisions", "--mcap", run_file, "--output", output, cwd=tmp_path, file_bytes=1024
    )

    assert result.returncode == 1
    assert_one_error_line(result, f"cannot write {output}: File too large")
    assert output.read_bytes() == b"the previous report\n"
    assert sorted(path.name for path in output.parent.iterdir()) == ["report.json"]


def test_an_output_is_replaced_whole_keeping_its_mode(run_file: Path, tmp_path: Path) -> None:
    output = tmp_path / "report.json"
    output.write_bytes(b"x" * 100_000)  # longer than the report: nothing of it may remain
    output.chmod(0o640)
    link = tmp_path / "latest.json"
    link.symlink_to(output.name)

    result = ghost("trace-decisions", "--mcap", run_file, "--output", link, cwd=tmp_path)

    assert result.returncode == 0, result.stderr
    assert link.is_symlink()  # written through the link, as before
    assert output.read_bytes() == ghost("trace-decisions", "--mcap", run_file, cwd=tmp_path).stdout
    assert output.stat().st_mode & 0o777 == 0o640
    assert sorted(path.name for path in tmp_path.iterdir()) == [
        "latest.json",
        "report.json",
        "run.mcap",
    ]


def test_an_output_to_a_device_is_written_in_place(run_file: Path, tmp_path: Path) -> None:
    result = ghost("trace-decisions", "--mcap", run_file, "--output", os.devnull, cwd=tmp_path)

    assert result.returncode == 0, result.stderr
    assert result.stdout == b""
