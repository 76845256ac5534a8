"""Start ``ghost audit-daemon`` as another user.

``python -m tests.e2e.daemon_as UID:GID[:GROUP] ARGS...``

The test machine's interpreter may live under a directory other users cannot
read (``/root``), so a process cannot be *started* as them. This imports
everything the daemon needs while still root, drops to ``UID:GID`` (no
supplementary groups but ``GROUP``, the one its ``--group`` names: a process
may only give a file a group it is in), and only then runs ``ghost audit-daemon ARGS``: from
then on every file it opens, it opens as that user.
"""

from __future__ import annotations

import grp  # noqa: F401 -- imported before the drop: the daemon's --group lookup needs it
import logging  # noqa: F401
import os
import selectors  # noqa: F401
import sys

import mcap.writer  # noqa: F401
from cryptography.hazmat.primitives import serialization  # noqa: F401

import analysis._cli_audit_daemon  # noqa: F401
import audit  # noqa: F401
from analysis._cli import main

if __name__ == "__main__":
    uid, gid, *extra = (int(part) for part in sys.argv[1].split(":"))
    os.setgroups(extra)
    os.setgid(gid)
    os.setuid(uid)
    sys.exit(main(["audit-daemon", *sys.argv[2:]]))
