"""No false alarm over the MCAP conformance files: each is valid MCAP and "not a ghost audit log".

The 416 files (foxglove/mcap ``tests/conformance/data``, rebuilt and checked
by hash in ``tests/audit/test_conformance.py``) cover every layout the format
allows: chunked or not, indexed, padded, with repeated definitions,
attachments and metadata. ``ghost verify`` must never call one of them
tampered or truncated: none is ghost's, so each is exit 1 with one line.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from analysis import verify_run
from analysis._cli import EXIT_FAILURE, main
from audit import LogFormatError

GOLDEN = Path(__file__).parents[1] / "golden" / "mcap-conformance"
FILES = sorted(GOLDEN.rglob("*.mcap"))


def test_every_conformance_file_is_refused_as_not_a_ghost_log() -> None:
    assert len(FILES) == 416
    for path in FILES:
        with pytest.raises(LogFormatError, match="not a ghost audit log") as raised:
            verify_run(path)
        assert raised.value.path == path


def test_ghost_verify_exits_1_on_every_conformance_file(
    capsys: pytest.CaptureFixture[str],
) -> None:
    for path in FILES:
        assert main(["verify", "--mcap", str(path)]) == EXIT_FAILURE, path.name
        captured = capsys.readouterr()
        assert captured.out == "", path.name
        assert captured.err.startswith(f"ghost: error: cannot read {path}"), path.name
        assert captured.err.count("\n") == 1, path.name
        assert "not a ghost audit log" in captured.err, path.name
