"""``ghost fleet verify``: the same verdict per run as `verify_run`, over a real process pool."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from analysis import verify_run
from analysis._cli import main
from analysis._fleet_verify import (
    FleetOutcome,
    FleetRun,
    expand_paths,
    fleet_exit_code,
    verify_fleet,
    verify_one,
)
from audit import LogFormatError
from tests.e2e.test_cli import ghost


def _expected(path: Path) -> tuple[str, int, str | None, int]:
    """What `verify_run` says of one file: outcome, exit code, run id, problem count."""
    try:
        result = verify_run(path)
    except LogFormatError:
        return "unreadable", 1, None, 0
    code = {"intact": 0, "tampered": 3, "truncated": 4}[result.status.value]
    return result.status.value, code, result.run_id, result.problem_count


def test_fleet_verify_gives_each_run_the_verdict_verify_run_gives(
    fleet: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    directory, kinds = fleet
    report = tmp_path / "fleet.json"

    result = ghost(
        "fleet", "verify", directory / "*.mcap", "--workers", "2", "--json", report, cwd=tmp_path
    )

    assert result.returncode == 3, result.stderr  # tampered outranks truncated and unreadable
    assert result.stderr == b""
    document = json.loads(report.read_text())
    assert document["workers"] == 2
    runs = {Path(run["path"]).name: run for run in document["runs"]}
    assert set(runs) == set(kinds)
    for name, run in runs.items():
        outcome, code, run_id, problems = _expected(directory / name)
        assert (run["outcome"], run["exit_code"], run["run_id"]) == (outcome, code, run_id), name
        assert run["problem_count"] == problems
        assert outcome == kinds[name]  # the fleet was built to have these
    assert document["counts"] == {"intact": 45, "truncated": 1, "tampered": 3, "unreadable": 1}
    lines = result.stdout.decode().splitlines()
    assert lines[-1] == "fleet: 50 runs: 45 intact, 1 truncated, 3 tampered, 1 unreadable"
    # Each failing run: its problems, then its summary line; intact runs are not listed.
    failing = [name for name, kind in kinds.items() if kind != "intact"]
    for name in failing:
        assert any(line.startswith(str(directory / name) + ": ") for line in lines), name
    assert not any("run-000.mcap" in line for line in lines)
    assert any(line.startswith(f"problem: {directory / 'run-045.mcap'}: ") for line in lines)


def test_the_pool_and_one_process_agree(fleet: tuple[Path, dict[str, str]]) -> None:
    directory, _ = fleet
    paths = expand_paths([str(directory)])

    pooled = verify_fleet(paths, workers=2)
    alone = verify_fleet(paths, workers=1)

    assert pooled.runs == alone.runs
    assert [run.path for run in pooled.runs] == paths  # the order given
    assert pooled.workers == 2


@pytest.mark.parametrize(
    ("names", "code"),
    [
        (["run-000.mcap", "run-001.mcap"], 0),
        (["run-000.mcap", "run-048.mcap"], 4),
        (["run-000.mcap", "run-049.mcap"], 1),
        (["run-048.mcap", "run-049.mcap"], 4),
    ],
)
def test_the_fleet_exit_code_follows_its_worst_run(
    fleet: tuple[Path, dict[str, str]], tmp_path: Path, names: list[str], code: int
) -> None:
    directory, _ = fleet

    paths = [str(directory / name) for name in names]

    assert main(["fleet", "verify", *paths, "--workers", "1"]) == code


def test_fleet_exit_code_ranks_tampered_then_truncated_then_unreadable() -> None:
    o = FleetOutcome
    assert fleet_exit_code([]) == 0
    assert fleet_exit_code([o.INTACT, o.INTACT]) == 0
    assert fleet_exit_code([o.INTACT, o.UNREADABLE]) == 1
    assert fleet_exit_code([o.UNREADABLE, o.TRUNCATED]) == 4
    assert fleet_exit_code([o.TRUNCATED, o.TAMPERED, o.UNREADABLE]) == 3
    assert fleet_exit_code([o.TAMPERED]) == 3


def test_a_pattern_that_matches_nothing_is_an_unreadable_run_not_a_silent_pass(
    tmp_path: Path,
) -> None:
    pattern = str(tmp_path / "nothing-*.mcap")

    assert expand_paths([pattern]) == [pattern]
    (run,) = verify_fleet(expand_paths([pattern]), workers=1).runs
    assert run.outcome is FleetOutcome.UNREADABLE
    assert run.exit_code == 1


def test_paths_are_listed_once_in_the_order_first_named(
    fleet: tuple[Path, dict[str, str]],
) -> None:
    directory, _ = fleet
    first, second = str(directory / "run-001.mcap"), str(directory / "run-000.mcap")

    paths = expand_paths([first, second, str(directory / "run-00[01].mcap"), first])

    assert paths == [first, second]


def test_verify_one_never_raises_and_keeps_few_problems(fleet: tuple[Path, dict[str, str]]) -> None:
    directory, _ = fleet

    run = verify_one(str(directory / "run-045.mcap"))
    missing = verify_one(str(directory / "absent.mcap"))

    assert isinstance(run, FleetRun)
    assert run.outcome is FleetOutcome.TAMPERED
    assert 0 < len(run.problems) <= 20 <= 20 + run.problem_count
    assert missing.outcome is FleetOutcome.UNREADABLE
    assert "absent.mcap" in missing.summary


@pytest.mark.parametrize(
    "argv",
    [["x.mcap", "--workers", "0"], ["x.mcap", "--address", "auto"], [], ["x", "--engine", "dask"]],
)
def test_bad_arguments_are_usage_errors(argv: list[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["fleet", "verify", *argv])
    assert exited.value.code == 2


def test_bad_engine_or_workers_are_refused_by_the_function() -> None:
    with pytest.raises(ValueError, match="engine"):
        verify_fleet([], engine="spark")
    with pytest.raises(ValueError, match="workers"):
        verify_fleet([], workers=0)


@pytest.mark.parametrize(
    "extra",
    [
        ["--address", "nohost"],
        ["--address", "ray://head"],
        ["--address", "127.0.0.1:0"],
        ["--address", "127.0.0.1:65536"],
        [
            "--address",
            "127.0.0.1:\uff16\uff13\uff17\uff19",
        ],  # fullwidth digits: str.isdigit says yes
        ["--address", "127.0.0.1:6379", "--connect-timeout-s", "nan"],
        ["--address", "127.0.0.1:6379", "--connect-timeout-s", "0"],
        ["--address", "127.0.0.1:6379", "--connect-timeout-s", "-1"],
    ],
)
def test_an_address_or_timeout_that_means_nothing_is_a_usage_error(extra: list[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["fleet", "verify", "x.mcap", "--engine", "ray", *extra])
    assert exited.value.code == 2


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port  # nothing listens there once the socket is closed


def test_a_ray_address_nothing_listens_at_fails_at_once_with_exit_1(tmp_path: Path) -> None:
    # ray.init alone would retry such an address for minutes; the probe refuses it first.
    port = _closed_port()
    result = ghost(
        "fleet", "verify", "x.mcap", "--engine", "ray", "--address", f"ray://127.0.0.1:{port}",
        cwd=tmp_path,
    )  # fmt: skip
    stderr = result.stderr.decode()
    assert result.returncode == 1, stderr
    assert f"no Ray cluster at ray://127.0.0.1:{port}" in stderr
    assert "Traceback" not in stderr


def test_a_ray_address_that_never_answers_gives_up_after_the_connect_timeout() -> None:
    # A listener whose accept queue is full drops new SYNs: connecting neither
    # succeeds nor is refused, exactly like a firewalled or vanished host.
    from analysis._fleet_verify import probe_address

    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(0)
        port = listener.getsockname()[1]
        fillers = []
        try:
            for _ in range(8):  # fill the queue (its size is the backlog plus a little)
                filler = socket.socket()
                filler.setblocking(False)  # noqa: FBT003 - the socket API
                filler.connect_ex(("127.0.0.1", port))
                fillers.append(filler)
            with pytest.raises(ConnectionError, match="no answer") as raised:
                probe_address(f"127.0.0.1:{port}", 0.5)
        finally:
            for filler in fillers:
                filler.close()
    assert "--connect-timeout-s" in str(raised.value)


def test_a_listening_address_passes_the_probe() -> None:
    from analysis._fleet_verify import probe_address

    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(4)
        probe_address(f"[127.0.0.1]:{listener.getsockname()[1]}", 5)
        probe_address("auto", 0.001)  # names no socket: left to Ray
