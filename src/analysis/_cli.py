"""The ``ghost`` command line: ``trace-decisions``, ``demo``, ``--version``.

Exit codes follow SPEC §6: 0 success; 1 an input that cannot be read or an
output that cannot be written (one ``ghost: error: ...`` line on stderr, never
a traceback); 2 a usage error (argparse's own message). A broken chain is a
finding, not a failure: ``trace-decisions`` reports it and exits 0.

The heavy modules (``mcap``, the audit reader) are imported inside the
handlers, so ``ghost --help`` stays fast.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final, cast

__all__ = ["EXIT_FAILURE", "EXIT_OK", "EXIT_USAGE", "main"]

EXIT_OK: Final = 0
"""The command did what was asked (a broken chain in a report included)."""
EXIT_FAILURE: Final = 1
"""An input could not be read or an output could not be written."""
EXIT_USAGE: Final = 2
"""The command line was malformed (argparse's own exit code)."""

_PROG: Final = "ghost"
_DISTRIBUTION: Final = "ghost-sdk"
_DEFAULT_DEMO_OUT: Final = Path("runs") / "demo.mcap"


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


def _make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=_PROG,
        description="ghost: gate AI-agent actions and audit every decision.",
    )
    parser.add_argument(
        "--version", action=_VersionAction, help="print the ghost-sdk version and exit"
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    trace = commands.add_parser(
        "trace-decisions",
        help="pair each decision of a run with its assessment and report the chain",
        description=(
            "Read a captured run and write its decision trace report as canonical JSON."
            " A broken chain is reported in the output, not signalled by the exit code."
        ),
    )
    trace.add_argument("--mcap", required=True, type=Path, metavar="PATH", help="the run to read")
    trace.add_argument(
        "--output",
        type=Path,
        metavar="PATH",
        help="write the report to this file instead of standard output",
    )
    trace.set_defaults(handler=_trace_decisions)

    demo = commands.add_parser(
        "demo",
        help="run the bundled example agent under the bundled policy and record it",
        description="Run the bundled example agent loop and write its audit log.",
    )
    demo.add_argument(
        "--out",
        type=Path,
        default=_DEFAULT_DEMO_OUT,
        metavar="PATH",
        help=f"where to write the run (default: {_DEFAULT_DEMO_OUT})",
    )
    demo.set_defaults(handler=_demo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``ghost`` command line.

    Args:
        argv: the arguments after the program name; ``sys.argv[1:]`` when None.

    Returns:
        The exit code: 0 success, 1 unreadable input or unwritable output.

    Raises:
        SystemExit: with code 2 on a usage error, or 0 after ``--help`` /
            ``--version`` (argparse's behaviour).
    """
    parser = _make_parser()
    args = parser.parse_args(argv)
    handler = cast("Callable[[argparse.Namespace], int]", args.handler)
    return handler(args)


def _fail(message: str) -> int:
    print(f"{_PROG}: error: {message}", file=sys.stderr)
    return EXIT_FAILURE


def _trace_decisions(args: argparse.Namespace) -> int:
    from analysis._decision_trace import build_decision_trace_report
    from analysis._trace_json import encode_decision_trace_report_to_bytes
    from audit import LogFormatError

    mcap_path: Path = args.mcap
    output_path: Path | None = args.output
    try:
        report = build_decision_trace_report(mcap_path)
    except LogFormatError as exc:  # missing, a directory, not MCAP, foreign MCAP, ...
        return _fail(f"cannot read {exc.path}: {_single_line(exc.problem)}")
    data = encode_decision_trace_report_to_bytes(report)

    if output_path is not None:
        try:
            output_path.write_bytes(data)
        except OSError as exc:
            return _fail(f"cannot write {output_path}: {_os_cause(exc)}")
        return EXIT_OK
    return _write_stdout(data)


def _write_stdout(data: bytes) -> int:
    try:
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
    except BrokenPipeError:
        # The reader went away (`ghost trace-decisions ... | head`): not worth a traceback.
        # Point stdout at devnull so the interpreter's final flush does not fail again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return EXIT_FAILURE
    return EXIT_OK


def _demo(args: argparse.Namespace) -> int:
    # Imported here: the demo pulls in the gate, the sink and the policy, which
    # no other command needs.
    from analysis._demo import run_demo

    out: Path = args.out
    return run_demo(out)


def _os_cause(exc: OSError) -> str:
    return _single_line(exc.strerror or str(exc)) or type(exc).__name__


def _single_line(text: str) -> str:
    # A message from the OS or a file name could hold a newline; keep the error on one line.
    return " ".join(text.split())
