"""`analysis._output_file.replace_file` on its own: atomic replace, and its two exceptions.

The CLI tests (`tests/e2e/test_cli.py`) hold the atomic replace through
``ghost trace-decisions --output`` in a subprocess. This file pins what they
cannot reach as root: a directory where no file can be made (``mkstemp``
refused) still lets an existing, writable file be written in place, and a
new name there fails with the refusal; and the content is synced before
the rename.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import IO

import pytest

from analysis._output_file import replace_file


def _writes(data: bytes) -> Callable[[IO[bytes]], None]:
    def write(stream: IO[bytes]) -> None:
        stream.write(data)

    return write


def _refuse_temporary_files(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> tuple[int, str]:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(tempfile, "mkstemp", refuse)


def test_an_existing_file_in_a_closed_directory_is_written_in_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "report.json"
    target.write_bytes(b"old")
    inode = target.stat().st_ino
    _refuse_temporary_files(monkeypatch)
    replace_file(target, _writes(b"new report"))
    assert target.read_bytes() == b"new report"
    assert target.stat().st_ino == inode  # the same file, written through


def test_a_new_name_in_a_closed_directory_fails_with_the_refusal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _refuse_temporary_files(monkeypatch)
    with pytest.raises(PermissionError):
        replace_file(tmp_path / "report.json", _writes(b"x"))
    assert list(tmp_path.iterdir()) == []


def test_a_read_only_file_in_a_closed_directory_fails_with_the_refusal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "report.json"
    target.write_bytes(b"old")
    monkeypatch.setattr(os, "access", lambda path, mode: False)
    _refuse_temporary_files(monkeypatch)
    with pytest.raises(PermissionError):
        replace_file(target, _writes(b"x"))
    assert target.read_bytes() == b"old"


def test_the_content_is_synced_before_the_rename(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "report.json"
    target.write_bytes(b"old")
    events: list[str] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(descriptor: int) -> None:
        events.append("fsync")
        real_fsync(descriptor)

    def replace(source: str, destination: str) -> None:
        events.append("replace")
        real_replace(source, destination)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    replace_file(target, _writes(b"new"))
    assert events == ["fsync", "replace"]
    assert target.read_bytes() == b"new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.json"]
