"""`confirm_link`: the daemon checks a reconnecting gate's claim against the old run's file.

A gate that lost its daemon opens a new run whose ``/run`` names the old
run's head as the old daemon acknowledged it (`audit._chain.RunLink`; ADR
0034, addendum). The claim comes from the agent, so the daemon writes it only
once it has found it true in its own output directory: the old run's file
exists, its ``/run`` is that run and was written for the same user, and its
record ``record_count - 1`` has exactly that content address. Anything else
is refused, never written as an unconfirmed link.

The file is read once, streamed, by the same bounded reader ``ghost verify``
uses; a file cut by a crash still yields every record written before the cut.
Whether the old chain holds is ``ghost verify``'s question, not this one's.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Final

from audit._chain import RUN_TOPIC, ProcessIdentity, RunLink
from audit._errors import LogFormatError
from audit._reader import iter_run
from audit._run_log import LoggedRecord

__all__ = ["confirm_link"]

_UUID: Final = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def confirm_link(out_dir: Path, link: RunLink, peer: ProcessIdentity) -> str | None:
    """Return None if ``link`` names a head of a run in ``out_dir`` written for ``peer``'s user.

    Returns:
        None when the claim holds; else why it does not, in words.
    """
    if _UUID.fullmatch(link.run_id) is None:  # it names a file: no path of the agent's choosing
        return "the run it follows is not a run id"
    if link.record_count < 1:
        return "the run it follows has no acknowledged record"
    path = out_dir / f"{link.run_id}.mcap"
    head_seq = link.record_count - 1
    owner_checked = False
    try:
        for item in iter_run(path):
            if not isinstance(item, LoggedRecord) or item.record is None:
                continue
            record = item.record
            if item.topic == RUN_TOPIC and record.get("seq") == 0:
                peer_of_old = record.get("peer")
                if record.get("run_id") != link.run_id or not isinstance(peer_of_old, Mapping):
                    return f"{path.name} is not a daemon-written run {link.run_id}"
                if peer_of_old.get("uid") != peer.uid:
                    return f"run {link.run_id} was written for another user"
                owner_checked = True
            if record.get("seq") == head_seq:
                if not owner_checked:
                    return f"run {link.run_id} has no /run record before its head"
                if item.sha256 != link.head_sha256:
                    return f"record {head_seq} of run {link.run_id} has another address"
                return None
    except (LogFormatError, OSError):
        return f"run {link.run_id} has no readable file in the daemon's output directory"
    return f"run {link.run_id} has no record {head_seq}"
