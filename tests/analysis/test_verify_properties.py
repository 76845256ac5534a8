"""Properties of `verify_run` under arbitrary damage: never intact, never a crash."""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from analysis import RunStatus, verify_run
from audit import LogFormatError
from tests.analysis.stored_run import GateRun

# The runs are session fixtures; hypothesis draws only offsets and bytes.
_SETTINGS = settings(suppress_health_check=[HealthCheck.function_scoped_fixture], max_examples=150)


@_SETTINGS
@given(data=st.data())
def test_no_single_byte_change_passes_as_intact(
    gate_run: GateRun, tmp_path: Path, data: st.DataObject
) -> None:
    original = gate_run.path.read_bytes()
    offset = data.draw(st.integers(min_value=0, max_value=len(original) - 1), label="offset")
    value = data.draw(
        st.integers(min_value=0, max_value=255).filter(lambda b: b != original[offset])
    )
    damaged = bytearray(original)
    damaged[offset] = value
    path = tmp_path / "damaged.mcap"
    path.write_bytes(damaged)

    try:
        result = verify_run(path)
    except LogFormatError:
        return  # the magic, or every channel definition, was hit: not a ghost log any more
    assert result.status is not RunStatus.INTACT, offset
    assert result.status is RunStatus.TAMPERED or result.truncated, offset


@_SETTINGS
@given(data=st.data())
def test_a_tail_cut_anywhere_is_never_tampering(
    gate_run: GateRun, tmp_path: Path, data: st.DataObject
) -> None:
    original = gate_run.path.read_bytes()
    cut = data.draw(st.integers(min_value=0, max_value=len(original) - 1), label="cut")
    path = tmp_path / "cut.mcap"
    path.write_bytes(original[:cut])

    try:
        result = verify_run(path)
    except LogFormatError:
        return
    assert result.status is RunStatus.TRUNCATED, (cut, [str(p) for p in result.problems])
    assert result.verified_prefix == result.record_count
