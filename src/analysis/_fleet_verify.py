"""`verify_fleet`: `verify_run` on many runs at once, on a process pool or a Ray cluster (ADR 0030).

Each run is verified by the same `verify_run`, in a worker, and comes back
as a `FleetRun`: its outcome (`FleetOutcome`), the exit code ``ghost verify``
would give that file alone, and its first problems. The engines only decide
where that call runs:

* ``local`` -- a `concurrent.futures.ProcessPoolExecutor` of ``workers``
  processes (default: the machine's CPU count, never more than the runs).
  Workers are forked when the caller runs a single thread (the CLI: no
  module is imported twice), else spawned, so a worker never inherits a
  lock another thread held. With one worker the runs are verified in this
  process: no pool to pay for.
* ``ray`` -- one Ray task per run (``ray.init(address=...)``; None lets Ray
  pick, as ``RAY_ADDRESS`` or a new local instance). Tasks are sent absolute
  paths, so the files must be where every node can read them (a shared
  file system); a node that cannot read one reports it unreadable.

The fleet's exit code (`fleet_exit_code`) is 0 only when every run is
intact and sealed; otherwise 3 if any is tampered, else 4 if any is
truncated, else 1 (some file is unreadable: ``ghost verify``'s code for a
file it cannot read).
"""

from __future__ import annotations

import glob
import os
import threading
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from enum import StrEnum
from multiprocessing import get_context
from pathlib import Path
from typing import Any, Final

__all__ = [
    "CONNECT_TIMEOUT_S",
    "ENGINES",
    "FleetOutcome",
    "FleetRun",
    "FleetVerification",
    "expand_paths",
    "fleet_exit_code",
    "probe_address",
    "verify_fleet",
    "verify_one",
]

ENGINES: Final = ("local", "ray")
CONNECT_TIMEOUT_S: Final = 10.0
"""The engines `verify_fleet` can run on."""

_LISTED: Final = 20
"""Problems kept per run (all are counted): enough to say what is wrong, bounded to ship."""
_EXIT_OK: Final = 0
_EXIT_UNREADABLE: Final = 1
_EXIT_TAMPERED: Final = 3
_EXIT_TRUNCATED: Final = 4


class FleetOutcome(StrEnum):
    """What verification made of one file. Closed."""

    INTACT = "intact"
    """Every check passed, sealed, complete (``ghost verify`` exits 0)."""
    TRUNCATED = "truncated"
    """A correctly linked prefix, unsealed or cut, as a crash leaves it (exit 4)."""
    TAMPERED = "tampered"
    """At least one integrity problem (exit 3)."""
    UNREADABLE = "unreadable"
    """Missing, not MCAP, not a ghost audit log, or no file matched (exit 1)."""


_EXIT_CODES: Final[Mapping[FleetOutcome, int]] = {
    FleetOutcome.INTACT: _EXIT_OK,
    FleetOutcome.TRUNCATED: _EXIT_TRUNCATED,
    FleetOutcome.TAMPERED: _EXIT_TAMPERED,
    FleetOutcome.UNREADABLE: _EXIT_UNREADABLE,
}


@dataclass(frozen=True, slots=True)
class FleetRun:
    """One run's verification, as a worker sends it back.

    Attributes:
        path: the file, as given (or the pattern that matched nothing).
        outcome: intact, truncated, tampered or unreadable.
        exit_code: what ``ghost verify`` exits with for this file alone.
        summary: `RunVerification.summary`, or why the file cannot be read.
        problems: the first problems, as ``ghost verify`` prints them.
        problem_count: every problem found (may exceed ``len(problems)``).
        run_id: the run's id when its ``/run`` record has a readable one.
        sealed: the run ends in a valid seal.
    """

    path: str
    outcome: FleetOutcome
    exit_code: int
    summary: str
    problems: tuple[str, ...] = ()
    problem_count: int = 0
    run_id: str | None = None
    sealed: bool = False

    def document(self) -> dict[str, Any]:
        """The run as a JSON object (``ghost fleet verify --json``)."""
        return {
            "path": self.path,
            "outcome": self.outcome.value,
            "exit_code": self.exit_code,
            "summary": self.summary,
            "problems": list(self.problems),
            "problem_count": self.problem_count,
            "run_id": self.run_id,
            "sealed": self.sealed,
        }


@dataclass(frozen=True, slots=True)
class FleetVerification:
    """Every run's verification, in the order the paths were given.

    Attributes:
        runs: one `FleetRun` per file.
        engine: the engine that ran them (``local`` or ``ray``).
        workers: the local pool's size (None for ``ray``).
    """

    runs: tuple[FleetRun, ...]
    engine: str
    workers: int | None

    @property
    def counts(self) -> dict[str, int]:
        """Runs per outcome, every outcome listed."""
        found = Counter(run.outcome for run in self.runs)
        return {outcome.value: found[outcome] for outcome in FleetOutcome}

    @property
    def exit_code(self) -> int:
        """The fleet's exit code (`fleet_exit_code`)."""
        return fleet_exit_code(run.outcome for run in self.runs)

    @property
    def summary(self) -> str:
        """One line: how many runs, and how many of each outcome."""
        counts = self.counts
        total = len(self.runs)
        parts = ", ".join(f"{counts[outcome.value]} {outcome.value}" for outcome in FleetOutcome)
        return f"fleet: {total} run{'' if total == 1 else 's'}: {parts}"

    def document(self) -> dict[str, Any]:
        """The fleet's verification as a JSON object (``ghost fleet verify --json``)."""
        return {
            "schema": "ghost.fleet_verification/1",
            "engine": self.engine,
            "workers": self.workers,
            "counts": self.counts,
            "exit_code": self.exit_code,
            "runs": [run.document() for run in self.runs],
        }


def fleet_exit_code(outcomes: Iterable[FleetOutcome]) -> int:
    """0 if every run is intact; else 3 if any is tampered, 4 if any truncated, else 1."""
    found = set(outcomes)
    if FleetOutcome.TAMPERED in found:
        return _EXIT_TAMPERED
    if FleetOutcome.TRUNCATED in found:
        return _EXIT_TRUNCATED
    if FleetOutcome.UNREADABLE in found:
        return _EXIT_UNREADABLE
    return _EXIT_OK


def expand_paths(arguments: Sequence[str]) -> list[str]:
    """The files the arguments name: each an existing path, a glob, or a directory.

    A directory stands for every ``*.mcap`` file under it; a glob (``*``,
    ``?``, ``[``, ``**``) for the files it matches, sorted; an argument that
    is neither an existing path nor matches anything is kept as it is, so
    that its run is reported unreadable rather than silently skipped. Each
    file is listed once, in the order first named.
    """
    seen: dict[str, None] = {}
    for argument in arguments:
        path = Path(argument)
        if path.is_dir():
            matches = sorted(str(found) for found in path.rglob("*.mcap") if found.is_file())
        elif path.exists() or not glob.has_magic(argument):
            matches = [argument]
        else:
            matches = sorted(glob.glob(argument, recursive=True)) or [argument]
        for match in matches:
            seen.setdefault(match, None)
    return list(seen)


def verify_one(path: str) -> FleetRun:
    """Verify one file as ``ghost verify`` does, never raising: what a worker runs.

    Args:
        path: the file.

    Returns:
        Its `FleetRun`; a file `verify_run` cannot read is `FleetOutcome.UNREADABLE`.
    """
    from analysis._verify import verify_run
    from analysis._verify_model import RunStatus
    from audit import LogFormatError

    try:
        result = verify_run(path)
    except LogFormatError as exc:
        return FleetRun(
            path=path,
            outcome=FleetOutcome.UNREADABLE,
            exit_code=_EXIT_UNREADABLE,
            summary=f"cannot read {exc.path}: {exc.problem}",
        )
    except Exception as exc:  # noqa: BLE001 - one bad file must not sink the fleet
        return FleetRun(
            path=path,
            outcome=FleetOutcome.UNREADABLE,
            exit_code=_EXIT_UNREADABLE,
            summary=f"internal error ({type(exc).__name__}: {exc}); please report it",
        )
    outcome = {
        RunStatus.INTACT: FleetOutcome.INTACT,
        RunStatus.TRUNCATED: FleetOutcome.TRUNCATED,
        RunStatus.TAMPERED: FleetOutcome.TAMPERED,
    }[result.status]
    return FleetRun(
        path=path,
        outcome=outcome,
        exit_code=_EXIT_CODES[outcome],
        summary=result.summary,
        problems=tuple(str(problem) for problem in result.problems[:_LISTED]),
        problem_count=result.problem_count,
        run_id=result.run_id,
        sealed=result.sealed,
    )


def verify_fleet(
    paths: Sequence[str],
    *,
    engine: str = "local",
    workers: int | None = None,
    address: str | None = None,
    connect_timeout_s: float = CONNECT_TIMEOUT_S,
) -> FleetVerification:
    """Verify every file, in parallel, and return each run's result in the order given.

    Args:
        paths: the files (already expanded: see `expand_paths`).
        engine: ``local`` (a process pool) or ``ray`` (a Ray cluster).
        workers: ``local``: the pool's size (default: the CPU count; 1: this
            process, no pool).
        address: ``ray``: the cluster to connect to (``ray.init(address=...)``;
            e.g. ``ray://head:10001`` or ``auto``); None lets Ray decide.
        connect_timeout_s: ``ray``: how long a ``HOST:PORT`` address may take
            to accept a TCP connection before the cluster counts as unreachable.

    Raises:
        ValueError: an unknown engine, ``workers`` below 1, or an address
            that is not ``auto``, ``HOST:PORT`` or ``ray://HOST:PORT``.
        ConnectionError: nothing accepts a connection at ``address`` within
            ``connect_timeout_s``.
        analysis._fleet_deps.MissingExtraError: ``ray`` is not installed.
    """
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {', '.join(ENGINES)}, not {engine!r}")
    if engine == "ray":
        if address is not None:
            probe_address(address, connect_timeout_s)
        return FleetVerification(runs=_on_ray(paths, address), engine=engine, workers=None)
    count = (os.cpu_count() or 1) if workers is None else workers
    if count < 1:
        raise ValueError(f"workers must be at least 1, not {count}")
    size = min(count, len(paths))
    if size <= 1:
        runs = tuple(verify_one(path) for path in paths)
    else:
        # A few runs per message, so a thousand small runs do not cost a thousand round trips.
        chunk = max(1, len(paths) // (size * 8))
        start = "fork" if threading.active_count() == 1 and os.name == "posix" else "spawn"
        with ProcessPoolExecutor(max_workers=size, mp_context=get_context(start)) as pool:
            runs = tuple(pool.map(verify_one, paths, chunksize=chunk))
    return FleetVerification(runs=runs, engine=engine, workers=count)


def probe_address(address: str, timeout_s: float) -> None:
    """Fail fast when nothing listens at a Ray ``HOST:PORT`` address.

    ``ray.init`` retries an address that does not answer for a minute or two
    before it gives up, so a mistyped host or port would look like a hang. One
    TCP connection, bounded by ``timeout_s``, tells "no cluster there" apart
    first. ``auto`` and ``local`` name no socket and are left to Ray; so is a
    server that accepts but is no Ray cluster (Ray's own retries bound that).

    Raises:
        ValueError: the address is not ``auto``, ``local``, ``HOST:PORT`` or
            ``ray://HOST:PORT``.
        ConnectionError: no connection within ``timeout_s``.
    """
    import socket

    if address in ("auto", "local"):
        return
    target = address.removeprefix("ray://")
    host, colon, port_text = target.rpartition(":")
    host = host.removeprefix("[").removesuffix("]")  # [::1]:6379
    if not colon or not host or not port_text.isascii() or not port_text.isdigit():
        raise ValueError(f"a Ray address is auto, HOST:PORT or ray://HOST:PORT, not {address!r}")
    port = int(port_text)
    if not 0 < port < 65536:
        raise ValueError(f"the port of Ray address {address!r} is not between 1 and 65535")
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            pass
    except OSError as exc:
        why = "no answer" if isinstance(exc, TimeoutError) else (exc.strerror or str(exc))
        raise ConnectionError(
            f"no Ray cluster at {address}: {why} (waited up to {timeout_s:g} s;"
            " check the host and port, or raise --connect-timeout-s)"
        ) from exc


def _on_ray(paths: Sequence[str], address: str | None) -> tuple[FleetRun, ...]:
    import logging

    from analysis._fleet_deps import load_extra

    ray = load_extra("ray", "ray")
    # Absolute paths: a task runs in another process, maybe on another node.
    absolute = [os.path.abspath(path) for path in paths]
    ray.init(address=address, logging_level=logging.WARNING, log_to_driver=False)
    try:
        task = ray.remote(num_cpus=1, max_retries=1)(verify_one)
        results = ray.get([task.remote(path) for path in absolute])
    finally:
        ray.shutdown()
    # Report each run under the name it was given, not the absolute one the task saw.
    return tuple(
        FleetRun(
            path=given,
            outcome=FleetOutcome(run.outcome),
            exit_code=run.exit_code,
            summary=run.summary,
            problems=tuple(run.problems),
            problem_count=run.problem_count,
            run_id=run.run_id,
            sealed=run.sealed,
        )
        for given, run in zip(paths, results, strict=True)
    )
