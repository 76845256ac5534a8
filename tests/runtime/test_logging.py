"""The SDK's own log events: never stdout, silent until configured, never breaking a check."""

from __future__ import annotations

import logging
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import structlog
from structlog.testing import capture_logs

from runtime._logging import EventLog, get_event_log

# An embedding program that makes ghost log every kind of event it has: a run
# opened and sealed, a rejected traceparent, and an audit failure.
EMBEDDER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from audit import McapAuditSink
    from runtime import Action, AuditError, Gate, Policy

    {setup}

    policy = Policy.from_dict({{"policy_id": "p", "default": "allow"}})
    with McapAuditSink(Path(sys.argv[1])) as sink:
        gate = Gate(policy, sink=sink)
        gate.check(Action("bot", "search", "tool:x", {{}}), traceparent="not-a-header")

    class Failing:
        def open_run(self, run):
            pass

        def append(self, topic, record):
            raise OSError("disk full")

    try:
        Gate(policy, sink=Failing()).check(Action("bot", "search", "tool:x", {{}}))
    except AuditError:
        pass
    """
)


@pytest.fixture(autouse=True)
def _structlog_unconfigured() -> Iterator[None]:
    # Another test (the in-process demo) may have configured structlog as an
    # application would; these tests start from an application that did not.
    structlog.reset_defaults()
    yield
    structlog.reset_defaults()


def run_embedder(tmp_path: Path, setup: str = "") -> subprocess.CompletedProcess[str]:
    script = tmp_path / "embed.py"
    script.write_text(EMBEDDER.format(setup=setup))
    return subprocess.run(
        [sys.executable, str(script), str(tmp_path / "run.mcap")],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )


def test_with_logging_unconfigured_nothing_is_written_anywhere(tmp_path: Path) -> None:
    result = run_embedder(tmp_path)
    assert result.stdout == ""
    assert result.stderr == ""  # not even the standard library's last-resort handler


def test_configured_logging_receives_the_events_on_stderr_not_stdout(tmp_path: Path) -> None:
    result = run_embedder(
        tmp_path,
        "import logging\nlogging.basicConfig(level=logging.INFO, format='%(name)s %(message)s')",
    )
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert "ghost.audit ghost.run_opened" in lines
    assert "ghost.gate ghost.traceparent_rejected" in lines
    assert "ghost.audit ghost.run_sealed" in lines
    assert "ghost.gate ghost.audit_failed" in lines


def test_configured_structlog_receives_the_events(tmp_path: Path) -> None:
    setup = (
        "import structlog\n"
        "structlog.configure(logger_factory=structlog.PrintLoggerFactory(sys.stderr))"
    )
    result = run_embedder(tmp_path, setup)
    assert result.stdout == ""
    assert "ghost.traceparent_rejected" in result.stderr
    assert "ghost.run_opened" in result.stderr


def test_events_carry_their_fields_to_a_standard_library_handler() -> None:
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    logger = logging.getLogger("ghost.test")
    handler = Keep()
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        get_event_log("ghost.test").warning("ghost.something", decision_id="d1")
        get_event_log("ghost.test").info("ghost.other", count=2)
    finally:
        logger.removeHandler(handler)
        logger.setLevel(logging.NOTSET)
    assert [r.getMessage() for r in records] == ["ghost.something", "ghost.other"]
    assert [r.levelno for r in records] == [logging.WARNING, logging.INFO]
    assert records[0].decision_id == "d1"  # type: ignore[attr-defined]
    assert records[1].count == 2  # type: ignore[attr-defined]


def test_a_disabled_level_is_not_rendered() -> None:
    rendered: list[Any] = []

    class Spy(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            rendered.append(record)

    logger = logging.getLogger("ghost.quiet")
    logger.setLevel(logging.ERROR)
    logger.addHandler(Spy())
    get_event_log("ghost.quiet").info("ghost.ignored")
    get_event_log("ghost.quiet").error("ghost.kept")
    assert [r.getMessage() for r in rendered] == ["ghost.kept"]


def test_structlog_configured_by_the_application_takes_over() -> None:
    with capture_logs() as events:
        get_event_log("ghost.gate").error("ghost.audit_failed", error="OSError")
    assert events == [{"event": "ghost.audit_failed", "error": "OSError", "log_level": "error"}]


def test_a_logging_failure_never_escapes() -> None:
    def explode(logger: object, name: str, event: dict[str, Any]) -> dict[str, Any]:
        raise RuntimeError("a broken processor")

    structlog.configure(processors=[explode])
    try:
        log = get_event_log("ghost.gate")
        log.info("ghost.x")
        log.warning("ghost.x")
        log.error("ghost.x")
    finally:
        structlog.reset_defaults()


@pytest.mark.parametrize("name", ["gate", "ghosted.gate", "other.ghost"])
def test_loggers_live_under_ghost(name: str) -> None:
    with pytest.raises(ValueError, match="under 'ghost'"):
        EventLog(name)


def test_event_log_names() -> None:
    assert get_event_log("ghost").name == "ghost"
    assert get_event_log("ghost.audit").name == "ghost.audit"
