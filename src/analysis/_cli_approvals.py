"""``ghost approvals``: an operator's view of a SQLite approval store, and its resolutions.

::

    ghost approvals list --store PATH
    ghost approvals approve ID --store PATH --approver NAME
    ghost approvals reject ID --store PATH --approver NAME
    ghost approvals prune --store PATH --older-than DAYS

``list`` prints one line per pending approval, oldest first (nothing when
none waits): the decision id, the agent, verb and resource, the reason, who
may resolve it and the time left. ``approve`` and ``reject`` judge the
resolution as the agent's queue does (`runtime.check_resolution`, with this
machine's wall clock), then store it with the store's compare-and-set; the
waiting agent sees it at its next poll. ``prune`` forgets the decisions
settled for good (resolved, logged, deadline more than DAYS days past) and
prints how many; what still waits, and what no log holds yet, is kept.

Exit codes (SPEC §6; ADR 0017):

* 0 — listed, resolved, or pruned.
* 1 — the store cannot be used: missing, not a ghost approval store (a
  foreign or damaged file, or a newer schema), unreadable, or locked by
  another process for longer than the busy timeout. Never created, never
  modified.
* 2 — a malformed command line.
* 5 — the resolution was refused: no such decision, already resolved (the
  line names the outcome that won), the approver is not allowed, or the
  decision has expired. Nothing was stored.

Every string an approval holds may have come from an agent, so each is shown
as a double-quoted literal whose quotes, backslashes and non-printable
characters (controls, bidirectional overrides, line separators) are escaped:
a crafted resource cannot rewrite the operator's terminal or pose as another
field. ``--approver`` names who resolves; it is a claim, not a login: the
right to resolve is the right to write the store's file (mode 0600).
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path
from typing import Final, Literal

from runtime import (
    ApprovalError,
    ApprovalStoreError,
    PendingApproval,
    Resolution,
    SqliteApprovalStore,
    check_resolution,
)

__all__ = ["EXIT_REFUSED", "add_approval_commands"]

EXIT_REFUSED: Final = 5
"""``ghost approvals approve|reject``: the resolution was refused; nothing was stored."""
# The codes every ghost command shares (analysis._cli's EXIT_OK and EXIT_FAILURE).
_EXIT_OK: Final = 0
_EXIT_FAILURE: Final = 1
_PROG: Final = "ghost"
_BARE_ID: Final = re.compile(r"[0-9A-Za-z._:-]+")
_SECOND_NS: Final = 1_000_000_000
_DAY_NS: Final = 86_400 * _SECOND_NS
_MAX_DAYS: Final = 100_000  # some 270 years: past it, a count of days is a typo


def add_approval_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``approvals list|approve|reject`` to the ``ghost`` parser's subcommands.

    Args:
        commands: the ``ghost`` parser's subparsers; each command's handler is
            set as the ``handler`` default, as the other commands do.
    """
    approvals = commands.add_parser(
        "approvals",
        help="list, approve or reject the pending approvals of a store",
        description=(
            "Act on a SQLite approval store while an agent waits. Exit 0: done; 1: the store"
            " is missing, unreadable, locked or not a ghost approval store; 2: usage;"
            f" {EXIT_REFUSED}: the resolution was refused (no such decision, already"
            " resolved, approver not allowed, expired)."
        ),
    )
    actions = approvals.add_subparsers(dest="action", metavar="ACTION", required=True)

    listing = actions.add_parser(
        "list",
        help="one line per pending approval: id, action, reason, approvers, time left",
        description=(
            "Print one line per pending approval, oldest first (nothing when none waits)."
            " Text from the agent is quoted and escaped. Exit 0: listed; 1: the store cannot"
            " be used; 2: usage."
        ),
    )
    _store_argument(listing)
    listing.set_defaults(handler=_list)

    for action, outcome in (("approve", "approved"), ("reject", "rejected")):
        resolve = actions.add_parser(
            action,
            help=f"{action} a pending decision (it must not have expired)",
            description=(
                f"{action.capitalize()} the pending decision ID as NAME, if every rule that"
                " lists approvers allows NAME and the decision has not expired by this"
                " machine's clock; the waiting agent sees it at its next poll. Exit 0:"
                f" {outcome}; {EXIT_REFUSED}: refused (no such decision, already resolved,"
                " approver not allowed, expired); 1: the store cannot be used; 2: usage."
            ),
        )
        resolve.add_argument("decision_id", metavar="ID", help="the decision id `list` shows")
        _store_argument(resolve)
        resolve.add_argument(
            "--approver",
            required=True,
            metavar="NAME",
            help="who resolves it (a name the policy's approver lists allow)",
        )
        resolve.set_defaults(handler=_resolve, outcome=outcome)

    prune = actions.add_parser(
        "prune",
        help="forget the decisions settled for good more than DAYS days ago",
        description=(
            "Forget every decision whose resolution is logged and whose deadline passed more"
            " than DAYS days ago (0: any whose deadline has passed); print how many. Pending"
            " decisions, and resolutions no log holds yet, are kept. Exit 0: pruned; 1: the"
            " store cannot be used; 2: usage."
        ),
    )
    _store_argument(prune)
    prune.add_argument(
        "--older-than",
        required=True,
        type=_days,
        metavar="DAYS",
        help=f"days since the deadline passed (a number from 0 to {_MAX_DAYS})",
    )
    prune.set_defaults(handler=_prune)


def _store_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--store", required=True, type=Path, metavar="PATH", help="the SQLite approval store"
    )


def _days(text: str) -> float:
    try:
        days = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of days: {text!r}") from None
    if not 0 <= days <= _MAX_DAYS:  # NaN fails both comparisons
        raise argparse.ArgumentTypeError(f"days must be from 0 to {_MAX_DAYS}, not {text!r}")
    return days


# --- handlers ----------------------------------------------------------------------------------


def _list(args: argparse.Namespace) -> int:
    try:
        with SqliteApprovalStore(args.store, create=False) as store:
            waiting = store.pending()
    except ApprovalStoreError as exc:
        return _fail(str(exc), _EXIT_FAILURE)
    now_ns = time.time_ns()
    lines = "".join(_line(pending, now_ns) + "\n" for pending in waiting)
    sys.stdout.buffer.write(lines.encode("utf-8"))
    sys.stdout.flush()
    return _EXIT_OK


def _resolve(args: argparse.Namespace) -> int:
    try:
        with SqliteApprovalStore(args.store, create=False) as store:
            return _judge_and_store(store, args.decision_id, args.outcome, args.approver)
    except ApprovalStoreError as exc:
        return _fail(str(exc), _EXIT_FAILURE)


def _prune(args: argparse.Namespace) -> int:
    before_ns = time.time_ns() - round(args.older_than * _DAY_NS)
    try:
        with SqliteApprovalStore(args.store, create=False) as store:
            forgotten = store.prune(before_ns)
    except ApprovalStoreError as exc:
        return _fail(str(exc), _EXIT_FAILURE)
    noun = "decision" if forgotten == 1 else "decisions"
    print(
        f"pruned {forgotten} {noun}: resolved, logged, and past their deadline by more than"
        f" {args.older_than:g} days"
    )
    return _EXIT_OK


def _judge_and_store(
    store: SqliteApprovalStore,
    decision_id: str,
    outcome: Literal["approved", "rejected"],
    approver: str,
) -> int:
    refused = f"cannot {'approve' if outcome == 'approved' else 'reject'} {_id(decision_id)}"
    try:
        pending, existing = store.get(decision_id)
        if existing is not None:
            by = "" if existing.approver is None else f" by {_quoted(existing.approver)}"
            return _fail(
                f"{refused}: it is already resolved ({existing.outcome}{by})", EXIT_REFUSED
            )
        resolution = Resolution(decision_id, outcome, approver, time.time_ns())
        check_resolution(pending, resolution)
        store.resolve(resolution)  # the compare-and-set: another resolver may have won since
    except ApprovalStoreError:
        raise
    except ApprovalError as exc:
        return _fail(f"{refused}: {exc}", EXIT_REFUSED)
    final = pending.held_verdict.value if outcome == "approved" else "deny"
    line = (
        f"{outcome} {_id(decision_id)} by {_quoted(approver)}: agent={_quoted(pending.agent)}"
        f" verb={_quoted(pending.verb)} resource={_quoted(pending.resource)}"
        f" final_verdict={final}\n"
    )
    sys.stdout.buffer.write(line.encode("utf-8"))
    sys.stdout.flush()
    return _EXIT_OK


def _fail(message: str, code: int) -> int:
    print(f"{_PROG}: error: {_escaped(message)}", file=sys.stderr)
    return code


# --- showing what an agent wrote -----------------------------------------------------------------


def _line(pending: PendingApproval, now_ns: int) -> str:
    if pending.approvers is None:
        approvers = "anyone"
    elif not pending.approvers:
        approvers = "none"
    else:
        approvers = ",".join(_quoted(name) for name in pending.approvers)
    return (
        f"{_id(pending.decision_id)}"
        f"  agent={_quoted(pending.agent)}"
        f"  verb={_quoted(pending.verb)}"
        f"  resource={_quoted(pending.resource)}"
        f"  reason={_quoted(pending.reason)}"
        f"  approvers={approvers}"
        f"  left={_time_left(pending.expires_ns - now_ns)}"
    )


def _time_left(left_ns: int) -> str:
    """``expired`` at or past the deadline (as `check_resolution` judges), else rounded up."""
    if left_ns <= 0:
        return "expired"
    seconds = -(-left_ns // _SECOND_NS)
    minutes, second = divmod(seconds, 60)
    hours, minute = divmod(minutes, 60)
    days, hour = divmod(hours, 24)
    if days:
        return f"{days}d{hour:02d}h"
    if hours:
        return f"{hours}h{minute:02d}m"
    if minutes:
        return f"{minutes}m{second:02d}s"
    return f"{second}s"


def _id(decision_id: str) -> str:
    """A decision id as typed on the command line; quoted when it is not a plain token."""
    return decision_id if _BARE_ID.fullmatch(decision_id) else _quoted(decision_id)


def _quoted(text: str) -> str:
    return '"' + _escaped(text.replace("\\", "\\\\").replace('"', '\\"')) + '"'


def _escaped(text: str) -> str:
    """``text`` with every non-printable character as a ``\\x``, ``\\u`` or ``\\U`` escape."""
    if text.isprintable():
        return text
    return "".join(char if char.isprintable() else _escape(char) for char in text)


def _escape(char: str) -> str:
    code = ord(char)
    if code < 0x100:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"
