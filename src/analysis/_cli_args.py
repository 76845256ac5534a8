"""The argument every run-reading command shares: the run, as ``PATH`` or ``--mcap PATH``.

``ghost verify run.mcap`` and ``ghost verify --mcap run.mcap`` mean the same
(issue 8's CLI conventions; ``--mcap`` stays for the scripts that use it).
Naming the run twice, or not at all, is a usage error (exit 2), reported by the
command's own parser so that the usage line is that command's.
"""

from __future__ import annotations

import argparse
from pathlib import Path

__all__ = ["add_run_argument", "resolve_run_argument"]


def add_run_argument(parser: argparse.ArgumentParser, help_text: str) -> None:
    """Give ``parser`` the run argument: a positional ``PATH`` or ``--mcap PATH``."""
    parser.add_argument("path", nargs="?", type=Path, metavar="PATH", help=help_text)
    parser.add_argument(
        "--mcap", type=Path, metavar="PATH", help="the same, as an option (either one, once)"
    )
    parser.set_defaults(run_parser=parser)


def resolve_run_argument(args: argparse.Namespace) -> None:
    """Set ``args.mcap`` to the run, whichever way it was named; exit 2 if not exactly once."""
    parser = getattr(args, "run_parser", None)
    if parser is None:
        return
    if (args.path is None) == (args.mcap is None):
        parser.error("give the run once: PATH or --mcap PATH")
    if args.mcap is None:
        args.mcap = args.path
