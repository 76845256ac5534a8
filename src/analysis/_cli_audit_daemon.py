"""``ghost audit-daemon``: own the audit files and the signing key, out of the agents' reach.

::

    ghost audit-daemon --socket PATH --out DIR [--signing-key PEM]
                       [--durability process|fsync] [--group GROUP]

Gates connect with `audit.SocketAuditSink` (ADR 0034); each connection is
one run, written to ``DIR/<run_id>.mcap``. Once listening, the daemon prints
one line on stdout, ``ghost audit-daemon: listening on PATH``; its events
(runs opened and sealed, clients cut) go to stderr.

Exit codes: 0 — stopped by SIGTERM or SIGINT, every open run sealed; 1 —
cannot start (the key cannot be read, the directory or socket cannot be
made, another daemon listens there, an unknown group); 2 — usage.
"""

from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path
from typing import Final

__all__ = ["add_audit_daemon_command"]

_EXIT_OK: Final = 0
_EXIT_FAILURE: Final = 1
_PROG: Final = "ghost"


def add_audit_daemon_command(
    commands: argparse._SubParsersAction[argparse.ArgumentParser],
) -> None:
    """Add ``audit-daemon`` to the ``ghost`` parser's subcommands (handler in ``handler``)."""
    daemon = commands.add_parser(
        "audit-daemon",
        help="write and sign audit logs apart from the agents' process",
        description=(
            "Listen on a Unix socket for gates using audit.SocketAuditSink and write each"
            " connection's run to DIR/<run_id>.mcap: the daemon assigns seq and prev_sha256,"
            " signs the checkpoints and acknowledges a record only once it is written. Run it"
            " as another OS user than the agents so that they can neither read the key nor"
            " change the files. Prints 'ghost audit-daemon: listening on PATH' once ready."
            " Exit 0: stopped by SIGTERM/SIGINT, every open run sealed; 1: cannot start;"
            " 2: usage."
        ),
    )
    daemon.add_argument(
        "--socket", required=True, type=Path, metavar="PATH", help="the Unix socket to listen on"
    )
    daemon.add_argument(
        "--out", required=True, type=Path, metavar="DIR", help="where the runs are written"
    )
    daemon.add_argument(
        "--signing-key",
        type=Path,
        metavar="PEM",
        help="sign every checkpoint with this Ed25519 private key (ghost keygen)",
    )
    daemon.add_argument(
        "--durability",
        choices=("process", "fsync"),
        default="process",
        help="acknowledge once a record reached the OS (default) or the disk",
    )
    daemon.add_argument(
        "--group",
        metavar="GROUP",
        help="a group whose members may connect (socket 0660; the runs stay 0700)",
    )
    daemon.set_defaults(handler=_audit_daemon)


def _audit_daemon(args: argparse.Namespace) -> int:
    from audit import AuditDaemon, KeyFileError, load_private_key
    from runtime import AuditError

    _log_to_stderr()
    try:
        key = None if args.signing_key is None else load_private_key(args.signing_key)
        group = None if args.group is None else _group_id(args.group)
        daemon = AuditDaemon(
            args.socket, args.out, signing_key=key, durability=args.durability, group=group
        )
        daemon.start()
    except (KeyFileError, AuditError, LookupError) as exc:
        return _fail(str(exc))
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda _signum, _frame: daemon.stop())
    print(f"{_PROG} audit-daemon: listening on {args.socket}", flush=True)
    daemon.serve()
    return _EXIT_OK


def _group_id(name: str) -> int:
    import grp

    if name.isdigit():
        return int(name)
    try:
        return grp.getgrnam(name).gr_gid
    except KeyError:
        raise LookupError(f"no group named {name!r}") from None


def _log_to_stderr() -> None:
    """The daemon's events (runs opened, sealed, clients cut) to stderr, never stdout."""
    import logging

    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("ghost: %(levelname)s %(name)s: %(message)s"))
    handler.setLevel(logging.INFO)
    logger = logging.getLogger("ghost")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)


def _fail(message: str) -> int:
    from analysis._printable import printable

    print(f"{_PROG}: error: {printable(message, limit=2000)}", file=sys.stderr)
    return _EXIT_FAILURE
