"""The audit daemon's frames: what goes in comes out, and bad bytes are a `FrameError`."""

from __future__ import annotations

import socket
import struct
from collections.abc import Iterator, Mapping

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from audit._wire import FrameError, encode_frame, read_frame

_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    left, right = socket.socketpair()
    yield left, right
    left.close()
    right.close()


def _pair() -> tuple[socket.socket, socket.socket]:
    return socket.socketpair()


@settings(max_examples=60)
@given(st.dictionaries(st.text(max_size=8), _JSON, max_size=6))
def test_a_message_comes_back_as_it_was_sent(message: dict[str, object]) -> None:
    left, right = _pair()
    with left, right:
        left.sendall(encode_frame(message))
        assert read_frame(right) == message


@settings(max_examples=100)
@given(st.binary(max_size=64))
def test_any_body_is_an_object_or_a_frame_error(body: bytes) -> None:
    left, right = _pair()
    with left, right:
        left.sendall(struct.pack(">I", len(body)) + body)
        outcome: object
        try:
            outcome = read_frame(right)
        except FrameError as exc:
            outcome = exc.kind
        # A mapping (what parse_record gives), or refused as malformed: nothing else, no crash.
        assert outcome == "malformed" or isinstance(outcome, Mapping)


def test_an_oversized_frame_is_refused_from_its_header(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    left, right = pair
    left.sendall(struct.pack(">I", 2048))  # no body follows: it must not be waited for
    with pytest.raises(FrameError) as caught:
        read_frame(right, max_bytes=1024)
    assert caught.value.kind == "oversized"
    with pytest.raises(FrameError, match="oversized"):
        encode_frame({"x": "y" * 2048}, max_bytes=1024)


def test_a_frame_cut_by_the_peer_is_an_eof_error_and_a_clean_close_is_none(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    left, right = pair
    left.sendall(encode_frame({"a": 1})[:-2])
    left.shutdown(socket.SHUT_WR)
    with pytest.raises(FrameError) as caught:
        read_frame(right)
    assert caught.value.kind == "eof"
    assert read_frame(right) is None


@pytest.mark.parametrize("body", [b'{"a":1,"a":2}', b'{"a":NaN}', b"[1]", b"\xff"])
def test_ambiguous_or_non_object_json_is_malformed(
    pair: tuple[socket.socket, socket.socket], body: bytes
) -> None:
    left, right = pair
    left.sendall(struct.pack(">I", len(body)) + body)
    with pytest.raises(FrameError, match="malformed"):
        read_frame(right)


def test_values_without_json_form_are_refused_before_sending() -> None:
    with pytest.raises(FrameError, match="malformed"):
        encode_frame({"x": object()})
    with pytest.raises(FrameError, match="malformed"):
        encode_frame({"x": 2**64})
