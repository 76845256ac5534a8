"""`problem_in_a_forked_child`: what a call raises when made in a child after ``fork``."""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Callable

from runtime import GhostError


def problem_in_a_forked_child(call: Callable[[], object]) -> str | None:
    """Fork, make ``call`` in the child, and return the ``problem`` of the ghost error it raised.

    Returns None when the call raised no `GhostError` (it returned, or raised
    something else: the child then only exits). POSIX only.
    """
    read, write = os.pipe()
    with warnings.catch_warnings():
        # Python 3.12+ warns about fork while other threads run; the child only calls us.
        warnings.simplefilter("ignore", DeprecationWarning)
        child = os.fork()
    if child == 0:  # pragma: no cover - runs in the child
        try:
            call()
        except GhostError as exc:
            os.write(write, json.dumps(getattr(exc, "problem", str(exc))).encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as stream:
        reported = stream.read()
    os.waitpid(child, 0)
    return json.loads(reported) if reported else None
