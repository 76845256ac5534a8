"""``ghost fleet verify --engine ray`` on a real local Ray cluster: a head and one worker node.

The test starts the cluster as separate processes (``ray start --head`` and
``ray start --address=...``, each ``--block`` in a session of its own, one CPU
and a small object store each), points ``ghost fleet verify`` at it, and
stops both by their process groups at the end -- never ``ray stop``, which
would stop every Ray process on the machine. It skips, saying why, when
``ray`` is not installed or the cluster does not come up.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.test_cli import ghost
from tests.fleet.test_fleet_verify import _expected

pytest.importorskip("ray", reason="the ray extra (ghost-sdk[ray]) is not installed")
if os.environ.get("GHOST_SKIP_RAY_CLUSTER"):
    pytest.skip("GHOST_SKIP_RAY_CLUSTER is set: no local Ray cluster", allow_module_level=True)

RAY = Path(sys.executable).parent / "ray"
STARTED = b"Ray runtime started."
START_TIMEOUT_S = 120
OBJECT_STORE_BYTES = 80 * 1000 * 1000  # Ray's floor is 75 MiB-ish; the runs need almost none


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _start(args: list[str], log: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}
    with log.open("wb") as out:
        return subprocess.Popen(
            [str(RAY), "start", "--block", "--disable-usage-stats", *args],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,  # its own process group: stopped by that id alone
        )


def _wait_started(process: subprocess.Popen[bytes], log: Path) -> str | None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if STARTED in log.read_bytes():
            return None
        if process.poll() is not None:
            return f"ray start exited with {process.returncode}: {log.read_text()[-500:]}"
        time.sleep(0.5)
    return f"ray start did not report a running node within {START_TIMEOUT_S} s"


def _stop(process: subprocess.Popen[bytes]) -> None:
    # A test cluster need not shut down gracefully: a few seconds, then SIGKILL.
    for sig, wait in ((signal.SIGTERM, 3), (signal.SIGKILL, 10)):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        try:
            process.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            continue
        # The group may outlive its leader for a moment; the next signal (if any) reaps it.
        try:
            os.killpg(process.pid, 0)
        except ProcessLookupError:
            return


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A head node and one worker node, each a separate process; yields the head's address."""
    logs = tmp_path_factory.mktemp("ray-logs")
    temp = Path("/tmp") / f"ghost-ray-{os.getpid()}"  # Ray's socket paths must stay short
    port = _free_port()
    address = f"127.0.0.1:{port}"
    common = ["--num-cpus=1", f"--object-store-memory={OBJECT_STORE_BYTES}"]
    head = _start(
        ["--head", f"--port={port}", "--include-dashboard=false", f"--temp-dir={temp}", *common],
        logs / "head.log",
    )
    # Started together: the worker's `ray start` waits for the head's GCS to answer.
    worker = _start([f"--address={address}", *common], logs / "worker.log")
    try:
        problem = _wait_started(head, logs / "head.log") or _wait_started(
            worker, logs / "worker.log"
        )
        if problem is not None:
            pytest.skip(f"cannot start a local Ray cluster on this machine: {problem}")
        yield address
    finally:
        _stop(worker)
        _stop(head)
        shutil.rmtree(temp, ignore_errors=True)


def test_fleet_verify_on_ray_gives_each_run_the_verdict_verify_run_gives(
    cluster: str, fleet: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    directory, kinds = fleet
    report = tmp_path / "fleet.json"

    result = ghost(
        "fleet",
        "verify",
        directory,
        "--engine",
        "ray",
        "--address",
        cluster,
        "--json",
        report,
        cwd=tmp_path,
    )

    assert result.returncode == 3, result.stderr
    document = json.loads(report.read_text())
    assert document["engine"] == "ray"
    runs = {Path(run["path"]).name: run for run in document["runs"]}
    assert set(runs) == set(kinds)
    for name, run in runs.items():
        outcome, code, run_id, problems = _expected(directory / name)
        assert (run["outcome"], run["exit_code"], run["run_id"]) == (outcome, code, run_id), name
        assert run["problem_count"] == problems
    assert document["counts"] == {"intact": 45, "truncated": 1, "tampered": 3, "unreadable": 1}
