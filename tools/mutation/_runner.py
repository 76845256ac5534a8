"""Running mutants: one pytest process per mutant, in private copies of the repository.

The working tree is never written. Each worker owns a copy of the repository's files
(what ``git ls-files --cached --others --exclude-standard`` lists, so uncommitted work
is included and ``.venv``, caches and runs are not); a mutant is written over the module
in one copy, its cached bytecode deleted (a mutant can have the same size and mtime
second as the one before it, and would otherwise run as stale bytecode), the module's
tests run, and the original is put back.

Every run is ``python -m pytest -x -q -p no:cacheprovider --hypothesis-seed=0 <tests>``
from the copy's root, under a data-segment limit (``RLIMIT_DATA``, 1 GiB by default: a
mutant that allocates without end fails with a MemoryError instead of taking the
machine's memory), with ``PYTHONPATH`` set to the copy's import root only (the editable
install's ``.pth`` entry comes later on ``sys.path``, so the copy wins, in subprocesses
too), ``PYTHONHASHSEED=0``, and a fresh, empty Hypothesis database directory: a run
depends on the mutant alone, not on what an earlier mutant taught Hypothesis.

What counts as killed (ADR 0014): the same command passes on the unmutated copy (the
baseline, checked first), so any non-zero exit of a mutant's run is the mutant's doing --
a failing test, an error while collecting or importing (a mutant that breaks a module's
import breaks every user of it), a crash. A run that does not finish within the timeout
(the baseline's duration times a factor, plus a constant) is killed as well, and counted
apart as "timed out": an endless loop is a detected fault, but a machine too loaded to
finish in time would also land there, so the count is reported, not hidden.
"""

from __future__ import annotations

import contextlib
import enum
import importlib.util
import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from tools.mutation._config import Target
from tools.mutation._mutants import Mutant

__all__ = ["Baseline", "Outcome", "Status", "Workspace", "copy_tree"]

_NOT_COPIED = frozenset(
    {
        ".git",
        ".venv",
        "__pycache__",
        ".mypy_cache",
        ".pytest_cache",
        ".ruff_cache",
        ".hypothesis",
        "runs",
        "build",
        "dist",
        "node_modules",
    }
)
_OUTPUT_TAIL = 4000
# Runs pytest under a data-segment limit: a mutant that allocates without end (a loop
# that no longer advances, appending) gets a MemoryError and fails, instead of taking
# the machine's memory until its timeout. `python -c` leaves the arguments in argv[1:].
_LAUNCHER = (
    "import os, resource, sys\n"
    "limit = int(sys.argv[1])\n"
    "if limit:\n"
    "    hard = resource.getrlimit(resource.RLIMIT_DATA)[1]\n"
    "    if hard != resource.RLIM_INFINITY:\n"
    "        limit = min(limit, hard)\n"
    "    resource.setrlimit(resource.RLIMIT_DATA, (limit, hard))\n"
    "os.execv(sys.executable, [sys.executable, *sys.argv[2:]])\n"
)


class Status(enum.StrEnum):
    """What became of a mutant."""

    KILLED = "killed"
    TIMED_OUT = "timed out"
    SURVIVED = "survived"


@dataclass(frozen=True, slots=True)
class Outcome:
    """The result of running one mutant.

    Attributes:
        mutant: the mutant.
        status: killed, timed out or survived.
        exit_code: pytest's exit code (None when timed out).
        duration_s: how long the run took.
    """

    mutant: Mutant
    status: Status
    exit_code: int | None
    duration_s: float


@dataclass(frozen=True, slots=True)
class Baseline:
    """The unmutated run of a module's tests.

    Attributes:
        passed: whether the tests pass (no mutant is run otherwise).
        duration_s: how long they took.
        output: the end of pytest's output, for a failure message.
    """

    passed: bool
    duration_s: float
    output: str


def _listed_files(root: Path) -> list[Path] | None:
    try:
        listing = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],  # noqa: S607 - git from PATH, as every developer runs it
            cwd=root,
            capture_output=True,
            check=True,
            timeout=60,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    names = [n for n in listing.stdout.decode("utf-8", "surrogateescape").split("\0") if n]
    return [Path(n) for n in names]


def _walked_files(root: Path) -> list[Path]:
    out: list[Path] = []
    for directory, subdirs, files in os.walk(root):
        subdirs[:] = sorted(
            d for d in subdirs if d not in _NOT_COPIED and not d.endswith(".egg-info")
        )
        base = Path(directory).relative_to(root)
        out.extend(base / f for f in sorted(files) if not f.endswith(".pyc"))
    return out


def copy_tree(root: Path, destination: Path) -> int:
    """Copy the repository's files (as git sees them, or a filtered walk outside git).

    Args:
        root: the repository root.
        destination: an empty or absent directory.

    Returns:
        How many files were copied.
    """
    files = _listed_files(root)
    if files is None:
        files = _walked_files(root)
    copied = 0
    for relative in files:
        source = root / relative
        if not source.is_file():
            continue  # deleted in the working tree but still in git's index
        target = destination / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target)
        copied += 1
    return copied


def _drop_bytecode(module_file: Path) -> None:
    cache = module_file.parent / "__pycache__"
    if cache.is_dir():
        for compiled in cache.glob(f"{module_file.stem}.*.pyc"):
            compiled.unlink(missing_ok=True)


class Workspace:
    """Private copies of a repository and the machinery to run mutants in them.

    Use as a context manager; the copies are deleted on exit and any test run still
    going is stopped.

    Args:
        root: the repository root.
        src: the import root inside it (``src``).
        copies: how many copies, i.e. how many mutants run at once.
        python: the interpreter that runs pytest.
        memory_limit_mb: the data-segment limit of every run (0: none).
        hypothesis_seed: passed as ``--hypothesis-seed`` (None: not passed; nor is it
            when Hypothesis is not installed or pytest's plugin autoloading is off).
    """

    def __init__(
        self,
        root: Path,
        src: str,
        copies: int,
        *,
        python: str = sys.executable,
        memory_limit_mb: int = 1024,
        hypothesis_seed: int | None = 0,
    ) -> None:
        if copies < 1:
            raise ValueError("a workspace needs at least one copy")
        self._root = root
        self._src = src
        self._copies = copies
        self._python = python
        self._seed = hypothesis_seed
        self._memory_limit = memory_limit_mb * 1024 * 1024
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        self._trees: list[Path] = []
        self._live: set[subprocess.Popen[bytes]] = set()
        self._lock = threading.Lock()

    def __enter__(self) -> Workspace:
        self._tmp = tempfile.TemporaryDirectory(prefix="ghost-mutation-")
        base = Path(self._tmp.name)
        for index in range(self._copies):
            tree = base / f"copy{index}"
            copy_tree(self._root, tree)
            self._trees.append(tree)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._stop_live()
        if self._tmp is not None:
            self._tmp.cleanup()
        self._trees = []

    def _command(self, target: Target) -> list[str]:
        command = [self._python, "-c", _LAUNCHER, str(self._memory_limit)]
        command += ["-m", "pytest", "-x", "-q", "-p", "no:cacheprovider"]
        # The option exists only where Hypothesis's pytest plugin is loaded.
        plugin = importlib.util.find_spec("hypothesis") is not None and not os.environ.get(
            "PYTEST_DISABLE_PLUGIN_AUTOLOAD"
        )
        if self._seed is not None and plugin:
            command.append(f"--hypothesis-seed={self._seed}")
        return [*command, *target.tests]

    def _run(
        self, tree: Path, target: Target, timeout_s: float | None
    ) -> tuple[int | None, str, float]:
        env = {
            k: v
            for k, v in os.environ.items()
            if k not in {"PYTHONPATH", "PYTHONPYCACHEPREFIX", "PYTEST_ADDOPTS"}
        }
        hypothesis_dir = Path(tempfile.mkdtemp(prefix="hypothesis-", dir=tree.parent))
        env.update(
            PYTHONPATH=str(tree / self._src),
            PYTHONHASHSEED="0",
            HYPOTHESIS_STORAGE_DIRECTORY=str(hypothesis_dir),
        )
        started = time.perf_counter()
        process = subprocess.Popen(  # noqa: S603 - our interpreter running pytest, no shell
            self._command(target),
            cwd=tree,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group, so a timeout stops its children too
        )
        with self._lock:
            self._live.add(process)
        try:
            output, _ = process.communicate(timeout=timeout_s)
            code: int | None = process.returncode
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            output, _ = process.communicate()
            code = None
        finally:
            with self._lock:
                self._live.discard(process)
            shutil.rmtree(hypothesis_dir, ignore_errors=True)
        elapsed = time.perf_counter() - started
        text = output.decode("utf-8", "replace")[-_OUTPUT_TAIL:]
        return code, text, elapsed

    def baseline(self, target: Target) -> Baseline:
        """Run ``target``'s tests on the unmutated copy.

        Returns:
            Whether they passed, and how long they took.
        """
        code, output, elapsed = self._run(self._trees[0], target, None)
        return Baseline(passed=code == 0, duration_s=elapsed, output=output)

    @contextlib.contextmanager
    def _mutated(self, tree: Path, target: Target, source: str) -> Iterator[None]:
        module_file = tree / target.path
        original = module_file.read_bytes()
        module_file.write_text(source, encoding="utf-8")
        _drop_bytecode(module_file)
        try:
            yield
        finally:
            module_file.write_bytes(original)
            _drop_bytecode(module_file)

    def run(
        self,
        target: Target,
        mutants: Sequence[Mutant],
        timeout_s: float,
        *,
        on_result: Callable[[Outcome], None] | None = None,
    ) -> list[Outcome]:
        """Run every mutant of ``target``, as many at once as there are copies.

        Args:
            target: the module and its tests.
            mutants: its mutants.
            timeout_s: the limit for one run; a run over it is killed as "timed out".
            on_result: called (from a worker thread) with each outcome as it arrives.

        Returns:
            The outcomes, in the order of ``mutants``.
        """
        free: queue.Queue[Path] = queue.Queue()
        for tree in self._trees:
            free.put(tree)

        def one(mutant: Mutant) -> Outcome:
            tree = free.get()
            try:
                with self._mutated(tree, target, mutant.source):
                    code, _, elapsed = self._run(tree, target, timeout_s)
            finally:
                free.put(tree)
            if code is None:
                status = Status.TIMED_OUT
            elif code == 0:
                status = Status.SURVIVED
            else:
                status = Status.KILLED
            outcome = Outcome(mutant, status, code, elapsed)
            if on_result is not None:
                on_result(outcome)
            return outcome

        pool = ThreadPoolExecutor(max_workers=len(self._trees))
        try:
            futures = [pool.submit(one, mutant) for mutant in mutants]
            return [future.result() for future in futures]
        except BaseException:
            # Interrupted (Ctrl-C) or a worker failed: start nothing new, stop what runs.
            pool.shutdown(wait=False, cancel_futures=True)
            self._stop_live()
            raise
        finally:
            pool.shutdown(wait=True)

    def _stop_live(self) -> None:
        with self._lock:
            live = list(self._live)
        for process in live:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
