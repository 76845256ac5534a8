"""The ``ghost`` command line: ``verify``, ``trace-decisions``, ``summary`` (in
``analysis._cli_summary``), ``report`` (in ``analysis._cli_report``), ``demo``,
``keygen``, ``prove``, ``verify-proof``, ``approvals`` (in ``analysis._cli_approvals``),
``mcp-proxy`` (in ``analysis._cli_mcp_proxy``), ``export`` (in ``analysis._cli_export``),
``fleet verify|query|summary`` (in ``analysis._cli_fleet``), ``policy
check|explain|replay`` (in ``analysis._cli_policy``), ``audit-daemon`` (in
``analysis._cli_audit_daemon``), ``--version``.

Exit codes follow SPEC §6 (ADR 0013):

* 0 — success; for ``verify``: the run is intact and sealed.
* 1 — an input that cannot be read (a missing file, not MCAP, cut inside the
  magic, not a ghost audit log; for ``verify`` also a ``--public-key`` or
  ``--anchor`` file that cannot be read or is not an Ed25519 key or a
  checkpoint note; for ``prove`` a decision the run does not hold, or no
  checkpoint covering it; for ``verify-proof`` a file that is not a proof at
  all), or an output that cannot be written or already exists (``keygen`` and
  ``prove`` never replace a file; for ``demo``, an existing ``--out`` that is
  not a previous demo run). One ``ghost: error: ...`` line on stderr.
* 2 — a malformed command line (argparse's own message).
* 3 — ``verify``: an integrity failure (tampered or corrupted);
  ``verify-proof``: the proof is invalid (one line per problem); ``prove``: the
  run's records do not agree with its checkpoint, so no valid proof exists.
* 4 — ``verify``: truncated, a gapless, correctly linked prefix that is not
  sealed, as a crash leaves it.
* 5 — ``approvals approve|reject``: the resolution was refused (no such
  decision, already resolved, approver not allowed, expired); nothing stored.
  (``approvals``' 1 is a store that is missing, unreadable, locked or not a
  ghost approval store.)
* 6 — ``mcp-proxy``: the MCP server exited before the client disconnected
  (the run is sealed). ``mcp-proxy``'s 1 is a proxy that could not start, or a
  decision that could not be recorded; 130/143 a SIGINT/SIGTERM, the run sealed.

* 7 — ``policy check``: the policy has problems (one line each).
* 8 — ``policy replay`` under the run's own policy: a recorded decision the
  policy does not reproduce (ADR 0033).

``fleet verify`` exits 0 only when every run is intact and sealed, else 3 if
any is tampered, else 4 if any is truncated, else 1 (a file that cannot be
read); ``fleet query`` exits 2 for SQL DuckDB rejects (ADR 0030).

No command ends in a traceback: every error becomes one line on stderr,
and an error no handler expected still exits 1 with its type named. A
broken chain is a finding, not a failure: ``trace-decisions`` reports it
and exits 0; judging is ``verify``'s job. Everything the commands print
from a file (paths, problems) is made printable first, so a crafted file
name or record cannot write control characters to the terminal.

The heavy modules (``mcap``, the audit reader, ``cryptography``) are
imported inside the handlers, so ``ghost --help`` stays fast.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, cast

from analysis._cli_approvals import EXIT_REFUSED, add_approval_commands
from analysis._cli_args import add_run_argument, resolve_run_argument
from analysis._cli_audit_daemon import add_audit_daemon_command
from analysis._cli_export import add_export_command
from analysis._cli_fleet import add_fleet_command
from analysis._cli_mcp_proxy import EXIT_SERVER_EXITED, add_mcp_proxy_command
from analysis._cli_policy import EXIT_NOT_REPRODUCED, EXIT_POLICY_PROBLEMS, add_policy_command
from analysis._cli_report import add_report_command
from analysis._cli_summary import add_summary_command
from analysis._printable import printable

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    from audit import CheckpointNote

__all__ = [
    "EXIT_FAILURE",
    "EXIT_INTERRUPTED",
    "EXIT_NOT_REPRODUCED",
    "EXIT_OK",
    "EXIT_POLICY_PROBLEMS",
    "EXIT_REFUSED",
    "EXIT_SERVER_EXITED",
    "EXIT_TAMPERED",
    "EXIT_TRUNCATED",
    "EXIT_USAGE",
    "main",
]

EXIT_OK: Final = 0
"""The command did what was asked; ``verify``: the run is intact and sealed."""
EXIT_FAILURE: Final = 1
"""An input could not be read or an output could not be written."""
EXIT_USAGE: Final = 2
"""The command line was malformed (argparse's own exit code)."""
EXIT_TAMPERED: Final = 3
"""``verify``: an integrity failure (tampered or corrupted)."""
EXIT_TRUNCATED: Final = 4
"""``verify``: the run is a correctly linked prefix, unsealed, as a crash leaves it."""
EXIT_INTERRUPTED: Final = 130
"""Interrupted by the user (Ctrl-C), as shells report SIGINT."""

_PROG: Final = "ghost"
_DISTRIBUTION: Final = "ghost-sdk"
_DEFAULT_DEMO_OUT: Final = Path("runs") / "demo.mcap"
_STDOUT: Final = "-"
_MAX_KEY_BYTES: Final = 64 * 1024
_MAX_ERROR: Final = 300
_HELP_COLUMN: Final = 26  # past the longest command name, "trace-decisions", and its indent


class _InputError(Exception):
    """An input file of the command line cannot be used; the message says why."""


class _VersionAction(argparse.Action):
    """``--version``: looks the version up only when asked, to keep start-up cheap."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        from importlib.metadata import PackageNotFoundError, version

        try:
            text = version(_DISTRIBUTION)
        except PackageNotFoundError:  # running from a source tree that was never installed
            text = "unknown"
        # To stdout, as argparse's own "version" action does.
        print(f"{parser.prog} {text}")
        parser.exit(EXIT_OK)


class _CommandListFormatter(argparse.HelpFormatter):
    """``ghost --help``: every command and its help on one line.

    argparse measures a subcommand's name at its parent's indent but prints it
    two columns further in, so the longest name ("trace-decisions") would wrap.
    """

    def __init__(self, prog: str) -> None:
        super().__init__(prog, max_help_position=_HELP_COLUMN)

    def add_argument(self, action: argparse.Action) -> None:
        super().add_argument(action)
        if isinstance(action, argparse._SubParsersAction):
            indent = self._current_indent + self._indent_increment
            longest = max((len(name) for name in action.choices), default=0)
            self._action_max_length = max(self._action_max_length, indent + longest)


def _make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=_PROG,
        description="ghost: gate AI-agent actions and audit every decision.",
        formatter_class=_CommandListFormatter,
    )
    parser.add_argument(
        "--version", action=_VersionAction, help="print the ghost-sdk version and exit"
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    verify = commands.add_parser(
        "verify",
        help="is a run intact, truncated, or tampered? (every check)",
        description=(
            "Run every integrity check on a captured run and print one line per problem,"
            " then a summary. Exit 0: intact and sealed; 3: tampered or corrupted;"
            " 4: truncated (a correctly linked prefix, unsealed, as a crash leaves it);"
            " 1: the file (or a key or anchor file) cannot be read; 2: usage."
        ),
    )
    add_run_argument(verify, "the run's MCAP file")
    verify.add_argument(
        "--public-key",
        type=Path,
        metavar="PEM",
        help=(
            "the Ed25519 public key (PEM) every checkpoint note must be signed with; without"
            " it, notes are checked against the key the run declares (consistency, not"
            " authorship)"
        ),
    )
    verify.add_argument(
        "--anchor",
        type=Path,
        action="append",
        default=[],
        metavar="NOTE_FILE",
        help=(
            "a checkpoint note held outside the file (repeatable): the run's tree at its"
            " size must have its root, so a cut tail or a rewritten past exits 3"
        ),
    )
    verify.set_defaults(handler=_verify)

    trace = commands.add_parser(
        "trace-decisions",
        help="the canonical JSON report of a run's decisions",
        description=(
            "Read a captured run and write its decision trace report as canonical JSON."
            " A broken chain is reported in the output, not signalled by the exit code;"
            " a truncated or unsealed run is reported and warned about on stderr."
        ),
    )
    add_run_argument(trace, "the run's MCAP file")
    trace.add_argument(
        "--output",
        metavar="PATH",
        help="write the report to this file instead of standard output ('-': standard output)",
    )
    trace.set_defaults(handler=_trace_decisions)

    add_summary_command(commands)
    add_report_command(commands)

    demo = commands.add_parser(
        "demo",
        help="run the bundled example agent, record it, summarize it",
        description=(
            "Run the bundled example agent loop and write its audit log. An existing"
            " file at --out is replaced only if it is a previous ghost demo run."
        ),
    )
    demo.add_argument(
        "--out",
        type=Path,
        default=_DEFAULT_DEMO_OUT,
        metavar="PATH",
        help=f"where to write the run (default: {_DEFAULT_DEMO_OUT})",
    )
    demo.set_defaults(handler=_demo)

    keygen = commands.add_parser(
        "keygen",
        help="write an Ed25519 key pair for signing checkpoints",
        description=(
            "Generate an Ed25519 key pair: PREFIX.key (private, PKCS #8 PEM, mode 0600)"
            " and PREFIX.pub (public, PEM). Existing files are never replaced."
            " Exit 0: written; 1: a file exists or cannot be written; 2: usage."
        ),
    )
    keygen.add_argument(
        "--out", required=True, metavar="PREFIX", help="write PREFIX.key and PREFIX.pub"
    )
    keygen.set_defaults(handler=_keygen)

    prove = commands.add_parser(
        "prove",
        help="prove that one decision is in a run (a JSON file)",
        description=(
            "Find a decision in a run and write an inclusion proof (ADR 0015): its records'"
            " canonical bytes, their leaf indexes, the first checkpoint note covering them,"
            " and the RFC 6962 audit paths. The proof is checked before it is written."
            " Exit 0: written; 3: the run's records disagree with its checkpoint; 1: the run"
            " cannot be read, holds no such decision or no covering checkpoint, or the"
            " output exists or cannot be written; 2: usage."
        ),
    )
    add_run_argument(prove, "the run's MCAP file")
    prove.add_argument("--decision", required=True, metavar="ID", help="the decision_id to prove")
    prove.add_argument(
        "--out", required=True, type=Path, metavar="PROOF.json", help="where to write the proof"
    )
    prove.set_defaults(handler=_prove)

    verify_proof = commands.add_parser(
        "verify-proof",
        help="check an inclusion proof without the run",
        description=(
            "Check an inclusion proof written by `ghost prove`: record bytes, leaf hashes,"
            " audit paths, the checkpoint note and its signature, and the links between"
            " the records. Exit 0: valid; 3: invalid (one line per problem); 1: the file"
            " (or the key) cannot be read, or is not a proof; 2: usage."
        ),
    )
    verify_proof.add_argument("proof", type=Path, metavar="PROOF.json", help="the proof")
    verify_proof.add_argument(
        "--public-key",
        type=Path,
        metavar="PEM",
        help="the Ed25519 public key (PEM) the checkpoint must be signed with",
    )
    verify_proof.set_defaults(handler=_verify_proof)

    add_approval_commands(commands)
    add_mcp_proxy_command(commands)
    add_export_command(commands)
    add_fleet_command(commands)
    add_audit_daemon_command(commands)
    add_policy_command(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``ghost`` command line.

    Args:
        argv: the arguments after the program name; ``sys.argv[1:]`` when None.

    Returns:
        The exit code (see the module docstring).

    Raises:
        SystemExit: with code 2 on a usage error, or 0 after ``--help`` /
            ``--version`` (argparse's behaviour).
    """
    parser = _make_parser()
    args = parser.parse_args(argv)
    resolve_run_argument(args)
    handler = cast("Callable[[argparse.Namespace], int]", args.handler)
    try:
        return handler(args)
    except KeyboardInterrupt:
        print(f"{_PROG}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # The reader of our output went away (`ghost ... | head`): not worth a traceback.
        _silence_stdout()
        return EXIT_FAILURE
    except Exception as exc:  # noqa: BLE001 - the CLI's promise: never a traceback (SPEC §6)
        return _fail(f"internal error ({type(exc).__name__}: {exc}); please report it")


def _fail(message: str) -> int:
    print(f"{_PROG}: error: {_printable(message)}", file=sys.stderr)
    return EXIT_FAILURE


def _warn(message: str) -> None:
    print(f"{_PROG}: warning: {_printable(message)}", file=sys.stderr)


# --- verify ----------------------------------------------------------------------------------


def _verify(args: argparse.Namespace) -> int:
    from analysis._analyze import run_items
    from analysis._cli_progress import progress_bar
    from analysis._verify import verify_items
    from analysis._verify_model import RunStatus
    from audit import LogFormatError

    try:
        key = None if args.public_key is None else _load_public_key(args.public_key)
        anchors = tuple(_read_anchor(path) for path in args.anchor)
    except _InputError as exc:
        return _fail(str(exc))
    try:
        with progress_bar(args.mcap) as progress:
            items = run_items(args.mcap, progress=progress)
            result = verify_items(items, public_key=key, anchors=anchors)
    except LogFormatError as exc:  # missing, a directory, not MCAP, not a ghost log, ...
        return _fail(f"cannot read {exc.path}: {exc.problem}")
    lines = [f"problem: {problem}" for problem in result.problems]
    lines.append(f"{result.path}: {result.summary}")
    try:
        _write_stdout("".join(_printable(line) + "\n" for line in lines).encode("utf-8"))
    except BrokenPipeError:
        _silence_stdout()  # the verdict is the exit code, whether or not anyone read the lines
    return {
        RunStatus.INTACT: EXIT_OK,
        RunStatus.TAMPERED: EXIT_TAMPERED,
        RunStatus.TRUNCATED: EXIT_TRUNCATED,
    }[result.status]


def _load_public_key(path: Path) -> Ed25519PublicKey:
    from cryptography.exceptions import UnsupportedAlgorithm
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
    from cryptography.hazmat.primitives.serialization import load_pem_public_key

    data = _read_input(path, "public key", _MAX_KEY_BYTES)
    try:
        key = load_pem_public_key(data)
    except (ValueError, TypeError, UnsupportedAlgorithm):
        raise _InputError(
            f"cannot use public key {path}: it is not a PEM public key"
            " (give the public half of the pair, e.g. the file `ghost keygen` wrote)"
        ) from None
    if not isinstance(key, Ed25519PublicKey):
        raise _InputError(
            f"cannot use public key {path}: it is a {type(key).__name__.lstrip('_')},"
            " but ghost signs checkpoints with Ed25519"
        )
    return key


def _read_anchor(path: Path) -> CheckpointNote:
    from audit import NoteError, load_checkpoint_note

    try:
        return load_checkpoint_note(path)
    except NoteError as exc:
        raise _InputError(f"cannot use anchor {path}: {exc.problem}") from None


def _read_input(path: Path, what: str, limit: int) -> bytes:
    try:
        with path.open("rb") as stream:
            data = stream.read(limit + 1)
    except OSError as exc:
        raise _InputError(f"cannot read {what} {path}: {_os_cause(exc)}") from None
    if len(data) > limit:
        raise _InputError(
            f"cannot use {what} {path}: it is larger than {limit // 1024} KiB, far larger"
            f" than any {what} file"
        )
    return data


# --- trace-decisions -------------------------------------------------------------------------


def _trace_decisions(args: argparse.Namespace) -> int:
    import sqlite3

    from analysis._analyze import run_items
    from analysis._cli_progress import progress_bar
    from analysis._output_file import replace_file
    from analysis._trace_stream import stream_trace
    from audit import LogFormatError

    mcap_path: Path = args.mcap
    output: str | None = args.output
    # Streamed (ADR 0026): the report is written as it is read back from temporary files,
    # so memory stays bounded however long the run; the bytes are the in-memory encoder's.
    try:
        with progress_bar(mcap_path) as progress:
            trace = stream_trace(run_items(mcap_path, progress=progress))
    except LogFormatError as exc:  # missing, a directory, not MCAP, foreign MCAP, ...
        return _fail(f"cannot read {exc.path}: {exc.problem}")
    except (OSError, sqlite3.Error) as exc:  # the temporary files: a full disk, most likely
        cause = _os_cause(exc) if isinstance(exc, OSError) else str(exc)
        return _fail(f"cannot trace {mcap_path}: its temporary files failed: {cause}")
    with trace:
        if trace.truncated:
            _warn(
                f"{mcap_path} is truncated: the file ends before its MCAP footer, as a crash"
                " leaves it; the report covers the complete records before the cut"
            )
        if not trace.sealed:
            _warn(
                f"{mcap_path} is not sealed: the run was not closed cleanly, or its seal was"
                f" removed; `ghost verify --mcap {mcap_path}` tells which"
            )
        _note_limit_denials(trace.limit_denials)
        if output is None or output == _STDOUT:
            trace.write(sys.stdout.buffer)
            sys.stdout.flush()
            return EXIT_OK
        try:
            replace_file(output, trace.write)
        except OSError as exc:
            return _fail(f"cannot write {output}: {_os_cause(exc)}")
    return EXIT_OK


def _note_limit_denials(counts: Mapping[str, int]) -> None:
    """One stderr line counting the decisions denied over a budget or rate, by rule (ADR 0032)."""
    if counts:
        total = sum(counts.values())
        by_rule = ", ".join(f"{rule} {count}" for rule, count in counts.items())
        noun = "decision" if total == 1 else "decisions"
        print(
            f"{_PROG}: {_printable(f'{total} {noun} denied over a limit: {by_rule}')}",
            file=sys.stderr,
        )


# --- demo ------------------------------------------------------------------------------------


def _demo(args: argparse.Namespace) -> int:
    # Imported here: the demo pulls in the gate, the sink and the policy, which
    # no other command needs.
    from analysis._demo import run_demo
    from runtime import AuditError

    out: Path = args.out
    try:
        return run_demo(out)
    except FileExistsError as exc:
        return _fail(f"will not replace {exc.filename}: {exc.strerror}")
    except OSError as exc:
        where = exc.filename if exc.filename is not None else out
        return _fail(f"cannot write the demo run to {out} ({where}: {_os_cause(exc)})")
    except AuditError as exc:
        return _fail(f"cannot write the demo run: {exc}")


# --- keygen, prove, verify-proof --------------------------------------------------------------


def _keygen(args: argparse.Namespace) -> int:
    from audit import KeyFileError, generate_key_pair

    try:
        pair = generate_key_pair(args.out)
    except KeyFileError as exc:
        return _fail(f"cannot write {exc.path}: {exc.problem}")
    lines = (
        f"private key: {pair.private_key} (mode 0600: keep it secret; the sink signs with it)",
        f"public key: {pair.public_key} (give it to auditors: ghost verify --public-key)",
        f"key id: {pair.key_id}",
        f"key name: {pair.key_name}",
    )
    return _write_stdout("".join(_printable(line) + "\n" for line in lines).encode("utf-8"))


def _prove(args: argparse.Namespace) -> int:
    from audit import LogFormatError, ProofError, build_inclusion_proof, check_proof, parse_proof

    out: Path = args.out
    if out.exists() or out.is_symlink():
        return _fail(f"will not replace {out}: it already exists (choose another --out)")
    try:
        proof = build_inclusion_proof(args.mcap, args.decision)
    except LogFormatError as exc:
        return _fail(f"cannot read {exc.path}: {exc.problem}")
    except ProofError as exc:
        return _fail(f"cannot prove decision {args.decision!r} in {args.mcap}: {exc.problem}")
    data = proof.to_bytes()
    # Never hand out a proof that does not verify: check it as a third party would.
    result = check_proof(parse_proof(data))
    if not result.ok:
        lines = [f"problem: {problem}" for problem in result.problems]
        lines.append(
            f"{args.mcap}: no valid proof of decision {args.decision} exists: the run's records"
            " disagree with its checkpoint (`ghost verify` says how)"
        )
        _write_stdout("".join(_printable(line) + "\n" for line in lines).encode("utf-8"))
        return EXIT_TAMPERED
    try:
        with out.open("xb") as stream:
            stream.write(data)
    except FileExistsError:
        return _fail(f"will not replace {out}: it already exists (choose another --out)")
    except OSError as exc:
        return _fail(f"cannot write {out}: {_os_cause(exc)}")
    return _write_stdout(_printable(f"{out}: {result.summary}").encode("utf-8") + b"\n")


def _verify_proof(args: argparse.Namespace) -> int:
    from audit import ProofError, check_proof, load_proof

    try:
        key = None if args.public_key is None else _load_public_key(args.public_key)
    except _InputError as exc:
        return _fail(str(exc))
    try:
        document = load_proof(args.proof)
    except ProofError as exc:
        return _fail(f"cannot use {args.proof}: {exc.problem}")
    result = check_proof(document, key)
    lines = [f"problem: {problem}" for problem in result.problems]
    lines.append(f"{args.proof}: {result.summary}")
    try:
        _write_stdout("".join(_printable(line) + "\n" for line in lines).encode("utf-8"))
    except BrokenPipeError:
        _silence_stdout()
    return EXIT_OK if result.ok else EXIT_TAMPERED


# --- output ----------------------------------------------------------------------------------


def _write_stdout(data: bytes) -> int:
    sys.stdout.buffer.write(data)
    sys.stdout.flush()
    return EXIT_OK


def _silence_stdout() -> None:
    # Point stdout at devnull so the interpreter's final flush does not fail again.
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):  # no real stdout (an in-process caller): nothing to flush
        pass


def _os_cause(exc: OSError) -> str:
    return exc.strerror or str(exc) or type(exc).__name__


def _printable(text: str) -> str:
    """Return ``text`` on one line, every non-printable character escaped, at most so long."""
    return printable(text, limit=_MAX_ERROR * 20)
