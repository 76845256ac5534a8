"""``ghost verify`` as a user runs it: a real subprocess, real files, every exit code.

0 intact and sealed; 3 tampered or corrupted; 4 truncated; 1 unreadable
input (the run, a key or an anchor file); 2 usage. One line per problem,
then a summary line, on stdout; errors are one line on stderr; never a
traceback.
"""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from mcap.writer import Writer

from analysis import RunStatus, verify_run
from analysis._cli import main
from audit import McapAuditSink, load_public_key
from tests.analysis.stored_run import StoredRun, write_gate_run
from tests.e2e.test_cli import GHOST_SCRIPT, assert_one_error_line, ghost
from tests.records import append_decisions, make_run_start


@pytest.fixture(scope="module")
def sealed_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_gate_run(tmp_path_factory.mktemp("verify-cli") / "run.mcap").path


@pytest.fixture
def tampered_run(sealed_run: Path, tmp_path: Path) -> tuple[Path, str]:
    stored = StoredRun.load(sealed_run)
    position = stored.index("/decisions", 1)
    stored.edit(position, verdict="allow")
    decision_id = stored.messages[position].record["decision_id"]
    return stored.write(tmp_path / "tampered.mcap"), decision_id


def lines(result: subprocess.CompletedProcess[bytes]) -> list[str]:
    return result.stdout.decode().splitlines()


# --- 0, 3, 4 -----------------------------------------------------------------------------------


def test_an_intact_run_exits_0_with_one_summary_line(sealed_run: Path, tmp_path: Path) -> None:
    result = ghost("verify", "--mcap", sealed_run, cwd=tmp_path)

    assert result.returncode == 0, result.stderr
    assert result.stderr == b""
    assert lines(result) == [f"{sealed_run}: {verify_run(sealed_run).summary}"]
    assert lines(result)[0].startswith(f"{sealed_run}: intact: 15 records")


def test_the_console_script_verifies(sealed_run: Path, tmp_path: Path) -> None:
    result = ghost("verify", "--mcap", sealed_run, cwd=tmp_path, script=True)

    assert result.returncode == 0, result.stderr
    assert GHOST_SCRIPT.exists()


def test_a_tampered_run_exits_3_naming_the_record(
    tampered_run: tuple[Path, str], tmp_path: Path
) -> None:
    path, decision_id = tampered_run

    result = ghost("verify", "--mcap", path, cwd=tmp_path, script=True)

    assert result.returncode == 3, result.stderr
    assert result.stderr == b""
    *problems, summary = lines(result)
    assert problems == [f"problem: {problem}" for problem in verify_run(path).problems]
    assert len(problems) == 2  # the next link, and the final checkpoint's root
    assert problems[0].startswith("problem: seq 6 /assessments decision ")
    assert f"seq 5 (/decisions, decision {decision_id})" in problems[0]
    assert problems[1].startswith("problem: seq 13 /checkpoints: checkpoint: its root_hash is")
    assert summary.startswith(f"{path}: tampered: 2 integrity problems in 15 records")


def test_a_cut_run_exits_4_saying_how_far_it_verifies(sealed_run: Path, tmp_path: Path) -> None:
    data = sealed_run.read_bytes()
    cut = tmp_path / "cut.mcap"
    cut.write_bytes(data[: data.index(b'"schema":"ghost.seal/1"')])

    result = ghost("verify", "--mcap", cut, cwd=tmp_path)

    assert result.returncode == 4, result.stderr
    assert result.stderr == b""
    assert lines(result) == [
        (
            f"{cut}: truncated: 14 records, seq 0-13 verify as a linked chain; not sealed: the run"
            " ends early, as a crash leaves it; without an anchor, a crash and a deliberate cut"
            " look the same"
        )
    ]


def test_a_crashed_writer_leaves_a_run_that_exits_4(tmp_path: Path) -> None:
    path = tmp_path / "crashed.mcap"
    sink = McapAuditSink(path)
    sink.open_run(make_run_start())
    append_decisions(sink, 2)  # never closed: as a SIGKILL leaves it

    result = ghost("verify", "--mcap", path, cwd=tmp_path)

    assert result.returncode == 4, result.stdout
    sink.close()


# --- 1: what cannot be read ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        (None, "no such file"),
        (b"", "empty"),
        (b"\x89MC", "cut inside the MCAP magic"),
        (b"hello, world\n", "not an MCAP file"),
        (b"\x89MCAP0\r\n" + b"\x02" * 40, "what follows is not MCAP"),
    ],
    ids=["missing", "empty", "cut-magic", "text", "magic-then-garbage"],
)
def test_an_unreadable_run_exits_1(tmp_path: Path, content: bytes | None, needle: str) -> None:
    path = tmp_path / "input.mcap"
    if content is not None:
        path.write_bytes(content)

    result = ghost("verify", "--mcap", path, cwd=tmp_path)

    assert result.returncode == 1
    assert_one_error_line(result, f"cannot read {path}", needle)


def test_an_mcap_file_from_another_program_exits_1(tmp_path: Path) -> None:
    foreign = tmp_path / "camera.mcap"
    with foreign.open("wb") as stream:
        writer = Writer(stream)
        writer.start(profile="", library="someone else")
        schema = writer.register_schema("Image", "jsonschema", b'{"type": "object"}')
        channel = writer.register_channel("/camera", "json", schema)
        writer.add_message(channel, log_time=1, data=b'{"pixels": []}', publish_time=1)
        writer.finish()

    result = ghost("verify", "--mcap", foreign, cwd=tmp_path)

    assert result.returncode == 1
    assert_one_error_line(result, "not a ghost audit log", "/camera")


def test_a_directory_exits_1(tmp_path: Path) -> None:
    result = ghost("verify", "--mcap", tmp_path, cwd=tmp_path)

    assert result.returncode == 1
    assert_one_error_line(result, "directory")


# --- --public-key and --anchor ------------------------------------------------------------------


def write_pem(path: Path, key: object) -> Path:
    public = key.public_key()  # type: ignore[attr-defined]
    path.write_bytes(
        public.public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    return path


def test_a_public_key_on_an_unsigned_run_exits_3(sealed_run: Path, tmp_path: Path) -> None:
    pem = write_pem(tmp_path / "ghost.pub.pem", Ed25519PrivateKey.generate())

    result = ghost("verify", "--mcap", sealed_run, "--public-key", pem, cwd=tmp_path)

    assert result.returncode == 3, result.stderr
    assert lines(result)[0].startswith("problem: seq 0 /run: checkpoint: a public key was given")


@pytest.fixture(scope="module")
def signed_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """A signed run, its key's public half, and the public half of another key."""
    directory = tmp_path_factory.mktemp("signed")
    key = Ed25519PrivateKey.generate()
    path = write_gate_run(directory / "signed.mcap", signing_key=key).path
    other = write_pem(directory / "other.pub.pem", Ed25519PrivateKey.generate())
    return path, write_pem(directory / "ghost.pub.pem", key), other


def test_a_signed_run_with_its_key_exits_0_saying_who_signed(
    signed_run: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    path, pem, _ = signed_run

    result = ghost("verify", "--mcap", path, "--public-key", pem, cwd=tmp_path)

    assert result.returncode == 0, result.stdout
    assert lines(result) == [f"{path}: {verify_run(path, public_key=load_public_key(pem)).summary}"]
    assert "2 checkpoint notes signed by the key given" in lines(result)[0]


def test_a_signed_run_without_a_key_says_it_proves_consistency_not_authorship(
    signed_run: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    path, _, _ = signed_run

    result = ghost("verify", "--mcap", path, cwd=tmp_path)

    assert result.returncode == 0, result.stdout
    assert "proves consistency, not authorship" in lines(result)[0]


def test_a_signed_run_checked_with_another_key_exits_3(
    signed_run: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    path, _, other = signed_run

    result = ghost("verify", "--mcap", path, "--public-key", other, cwd=tmp_path)

    assert result.returncode == 3, result.stdout
    *problems, _ = lines(result)
    assert problems[0].startswith("problem: seq 0 /run: checkpoint: the run declares signing key")
    assert [line.split(": checkpoint: ")[0] for line in problems[1:]] == [
        "problem: seq 1 /checkpoints",
        "problem: seq 13 /checkpoints",
    ]
    assert all("does not verify against the public key given" in line for line in problems[1:])


def test_anchors_from_the_run_itself_exit_0(
    signed_run: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    path, pem, _ = signed_run
    notes = []
    for number, checkpoint in enumerate(StoredRun.load(path).records_on("/checkpoints")):
        note = tmp_path / f"anchor{number}.note"
        note.write_text(checkpoint["note"], encoding="utf-8")
        notes += ["--anchor", str(note)]

    result = ghost("verify", "--mcap", path, "--public-key", pem, *notes, cwd=tmp_path)

    assert result.returncode == 0, result.stdout
    assert "2 anchors held outside the file match its tree" in lines(result)[0]


def test_an_anchor_of_another_run_exits_3(sealed_run: Path, tmp_path: Path) -> None:
    other = write_gate_run(tmp_path / "other.mcap").path
    note = tmp_path / "other.note"
    note.write_text(StoredRun.load(other).records_on("/checkpoints")[-1]["note"], encoding="utf-8")

    result = ghost("verify", "--mcap", sealed_run, "--anchor", note, cwd=tmp_path)

    assert result.returncode == 3, result.stdout
    assert lines(result)[0].startswith("problem: file: anchor: anchor 1 of 1: it is not a")


@pytest.mark.parametrize(
    ("make", "needle"),
    [
        (None, "cannot read public key"),
        (lambda p: p.write_bytes(b"not a key"), "it is not a PEM public key"),
        (
            lambda p: write_pem(p, ec.generate_private_key(ec.SECP256R1())),
            "but ghost signs checkpoints with Ed25519",
        ),
        (
            lambda p: p.write_bytes(
                Ed25519PrivateKey.generate().private_bytes(
                    serialization.Encoding.PEM,
                    serialization.PrivateFormat.PKCS8,
                    serialization.NoEncryption(),
                )
            ),
            "it is not a PEM public key",
        ),
        (lambda p: p.write_bytes(b"-" * (65 * 1024)), "larger than 64 KiB"),
    ],
    ids=["missing", "garbage", "not-ed25519", "private-key", "huge"],
)
def test_an_unusable_public_key_exits_1(
    sealed_run: Path, tmp_path: Path, make: object, needle: str
) -> None:
    pem = tmp_path / "key.pem"
    if make is not None:
        make(pem)  # type: ignore[operator]

    result = ghost("verify", "--mcap", sealed_run, "--public-key", pem, cwd=tmp_path)

    assert result.returncode == 1
    assert_one_error_line(result, str(pem), needle)


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        (None, "there is no such file"),
        (b"\xff\xfe", "it is not UTF-8 text"),
        (b"  \n", "a checkpoint text is exactly three lines"),
        (b"x" * (65 * 1024), "larger than 65536 bytes"),
        (b"ghost.run/x\n1\nAAAA\n", "the root hash must be the canonical standard base64"),
    ],
    ids=["missing", "binary", "empty", "huge", "not-a-checkpoint"],
)
def test_an_unusable_anchor_exits_1(
    sealed_run: Path, tmp_path: Path, content: bytes | None, needle: str
) -> None:
    note = tmp_path / "note.txt"
    if content is not None:
        note.write_bytes(content)

    result = ghost("verify", "--mcap", sealed_run, "--anchor", note, cwd=tmp_path)

    assert result.returncode == 1
    assert_one_error_line(result, str(note), needle)


# --- 2: usage -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ["verify"],
        ["verify", "--mcap"],
        ["verify", "--mcap", "x.mcap", "--anchor"],
        ["verify", "--mcap", "x.mcap", "--public-key"],
        ["verify", "--mcap", "x.mcap", "--strict"],
    ],
    ids=["no-mcap", "mcap-without-value", "anchor-without-value", "key-without-value", "unknown"],
)
def test_usage_errors_exit_2(tmp_path: Path, args: list[str]) -> None:
    result = ghost(*args, cwd=tmp_path)

    assert result.returncode == 2
    assert b"usage: ghost" in result.stderr
    assert b"Traceback" not in result.stderr
    assert result.stdout == b""


def test_help_lists_the_exit_codes(tmp_path: Path) -> None:
    result = ghost("verify", "--help", cwd=tmp_path)

    assert result.returncode == 0
    text = " ".join(result.stdout.decode().split())
    for code in ("Exit 0: intact and sealed", "3: tampered", "4: truncated", "1: the file", "2:"):
        assert code in text


# --- what a crafted file can and cannot do to the output ----------------------------------------


def test_a_crafted_file_name_cannot_break_the_lines(sealed_run: Path, tmp_path: Path) -> None:
    crafted = tmp_path / "run\n\x1b[2Jfake: intact.mcap"
    crafted.write_bytes(sealed_run.read_bytes())

    result = ghost("verify", "--mcap", crafted, cwd=tmp_path)

    assert result.returncode == 0
    assert len(lines(result)) == 1
    assert "\x1b" not in result.stdout.decode()
    assert "run\\n\\x1b[2Jfake: intact.mcap: intact:" in lines(result)[0]


def test_the_verdict_survives_a_reader_that_goes_away(tmp_path: Path) -> None:
    path = tmp_path / "run.mcap"
    with McapAuditSink(path) as sink:
        sink.open_run(make_run_start())
        append_decisions(sink, 300)
    stored = StoredRun.load(path)
    for message in stored.messages[1:-1]:
        message.data = json.dumps(message.record, indent=1).encode()
    tampered = stored.write(tmp_path / "noisy.mcap")  # ~600 problem lines: more than a pipe holds

    bash = shutil.which("bash")
    if bash is None:
        pytest.skip("needs bash for a pipeline")
    command = f"{sys.executable} -m analysis verify --mcap {tampered} | head -n 1 >/dev/null"
    result = subprocess.run(
        [bash, "-c", command + "; echo ${PIPESTATUS[0]}"],
        capture_output=True,
        timeout=120,
        check=False,
        cwd=tmp_path,
    )

    assert result.stdout.decode().strip() == "3"
    assert b"Traceback" not in result.stderr
    assert b"BrokenPipe" not in result.stderr


# --- in process: what no subprocess can provoke --------------------------------------------------


class _ClosedPipe(io.TextIOWrapper):
    """A stdout whose reader has gone: every write raises BrokenPipeError."""

    def __init__(self) -> None:
        super().__init__(io.BytesIO())

    @property
    def buffer(self) -> io.BufferedWriter:  # type: ignore[override]
        raise BrokenPipeError

    def fileno(self) -> int:
        raise io.UnsupportedOperation("no file descriptor")


def test_in_process_a_broken_pipe_still_returns_the_verdict(
    sealed_run: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "stdout", _ClosedPipe())

    assert main(["verify", "--mcap", str(sealed_run)]) == 0


def test_in_process_an_unexpected_error_is_one_line_exit_1(
    sealed_run: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def explode(*args: object, **kwargs: object) -> None:
        raise RuntimeError("boom\nsecond line")

    monkeypatch.setattr("analysis._verify.verify_items", explode)

    assert main(["verify", "--mcap", str(sealed_run)]) == 1
    captured = capsys.readouterr()
    assert captured.err == (
        "ghost: error: internal error (RuntimeError: boom\\nsecond line); please report it\n"
    )
    assert captured.out == ""


def test_in_process_an_interrupt_exits_130(
    sealed_run: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def interrupt(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr("analysis._verify.verify_items", interrupt)

    assert main(["verify", "--mcap", str(sealed_run)]) == 130
    assert capsys.readouterr().err == "ghost: interrupted\n"


def test_in_process_the_exit_code_follows_the_status(
    sealed_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = sealed_run.read_bytes()
    cut = tmp_path / "cut.mcap"
    cut.write_bytes(data[: len(data) - 100])
    codes = {RunStatus.INTACT: sealed_run, RunStatus.TRUNCATED: cut}

    assert {status: main(["verify", "--mcap", str(path)]) for status, path in codes.items()} == {
        RunStatus.INTACT: 0,
        RunStatus.TRUNCATED: 4,
    }
    capsys.readouterr()


def test_the_exit_codes_are_the_specs() -> None:
    from analysis import _cli

    assert (
        _cli.EXIT_OK,
        _cli.EXIT_FAILURE,
        _cli.EXIT_USAGE,
        _cli.EXIT_TAMPERED,
        _cli.EXIT_TRUNCATED,
        _cli.EXIT_INTERRUPTED,
    ) == (0, 1, 2, 3, 4, 130)


@pytest.mark.parametrize(("size", "needle"), [(64 * 1024, "not a PEM"), (64 * 1024 + 1, "larger")])
def test_in_process_a_key_file_of_up_to_64_kib_is_read(
    sealed_run: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    size: int,
    needle: str,
) -> None:
    pem = tmp_path / "key.pem"
    pem.write_bytes(b"k" * size)

    assert main(["verify", "--mcap", str(sealed_run), "--public-key", str(pem)]) == 1
    assert needle in capsys.readouterr().err


def test_in_process_trace_decisions_to_a_file_exits_0(
    sealed_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    output = tmp_path / "report.json"

    assert main(["trace-decisions", "--mcap", str(sealed_run), "--output", str(output)]) == 0
    assert capsys.readouterr() == ("", "")
    assert output.stat().st_size > 0


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (
            "audit",
            "ghost: error: cannot write the demo run: cannot write a record on /decisions: full\n",
        ),
        (
            "os",
            (
                "ghost: error: cannot write the demo run to out.mcap (out.mcap: No space left on"
                " device)\n"
            ),
        ),
        (
            "os-file",
            "ghost: error: cannot write the demo run to out.mcap (runs/x: Permission denied)\n",
        ),
    ],
)
def test_in_process_a_demo_that_cannot_write_is_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], error: str, expected: str
) -> None:
    import errno

    from runtime import AuditError

    def fail(out: Path) -> int:
        if error == "audit":
            raise AuditError("cannot write a record on /decisions: full")
        if error == "os":
            raise OSError(errno.ENOSPC, "No space left on device")
        raise PermissionError(errno.EACCES, "Permission denied", "runs/x")

    monkeypatch.setattr("analysis._demo.run_demo", fail)

    assert main(["demo", "--out", "out.mcap"]) == 1
    assert capsys.readouterr() == ("", expected)


def test_printed_text_is_clipped_and_escaped() -> None:
    from analysis._cli import _printable

    assert _printable("plain text") == "plain text"
    assert _printable("a\nb\x1b[0m\u2028") == "a\\nb\\x1b[0m\\u2028"
    clipped = _printable("x" * 7000)
    assert clipped == "x" * 6000 + "…"
