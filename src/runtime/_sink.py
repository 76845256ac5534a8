"""The seam between deciding and recording: `AuditSink`, implemented by `audit`.

`runtime` defines the protocol so that it never imports `audit` (or `mcap`);
any object with these methods can receive a gate's records (ADR 0001).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

__all__ = ["AppendPair", "AuditSink", "RunStart", "ShadowPolicy"]

AppendPair = Callable[
    [str, Mapping[str, Any], str, Callable[[str], Mapping[str, Any]]], tuple[str, str]
]
"""A sink's optional ``append_pair(topic, record, then_topic, then)`` (see `AuditSink`)."""


@dataclass(frozen=True, slots=True)
class ShadowPolicy:
    """The candidate policy a gate evaluates in shadow (``Gate(shadow=...)``, ADR 0031).

    Attributes:
        policy_id: the candidate's declared id.
        policy_sha256: its content address.
        source: its source exactly as loaded, attached to the run beside the
            enforced policy's, so the run is self-contained.
        source_name, source_media_type: a file name and media type for it.
        source_sha256: SHA-256 hex of ``source``.
    """

    policy_id: str
    policy_sha256: str
    source: bytes
    source_name: str
    source_media_type: str
    source_sha256: str


@dataclass(frozen=True, slots=True)
class RunStart:
    """What a gate tells its sink once, before its first record.

    Attributes:
        policy_id: the policy's declared id.
        policy_sha256: the policy's content address (RFC 8785 form).
        policy_source: the policy exactly as loaded (TOML text, or the JCS
            bytes of a dict), stored beside the run so the run is self-contained.
        policy_source_name: a file name for that source (``policy.toml``).
        policy_source_media_type: its media type (``application/toml``).
        policy_source_sha256: SHA-256 hex of ``policy_source``.
        sdk_version: the ghost-sdk version that made the decisions.
        stamp_ns: wall-clock time the gate was built.
        shadow: the candidate evaluated in shadow, or None (no candidate; a
            policy's own shadow rules are in its source already).
    """

    policy_id: str
    policy_sha256: str
    policy_source: bytes
    policy_source_name: str
    policy_source_media_type: str
    policy_source_sha256: str
    sdk_version: str
    stamp_ns: int
    shadow: ShadowPolicy | None = None


@runtime_checkable
class AuditSink(Protocol):
    """Where a gate's records go. Implementations must be thread-safe.

    A sink chains what it receives: it gives each record the next ``seq`` and
    the ``prev_sha256`` of the record before, writes the record's canonical
    bytes, and returns its content address. Every method raises on failure
    (the gate turns any exception into `AuditError` and the action does not run).

    Optional: ``append_pair(topic, record, then_topic, then) -> (sha, sha)``
    appends ``record``, then ``then(record's address)``, with consecutive
    ``seq``, and returns both addresses. A gate uses it, when the sink has it,
    for each assessment and the decision that names it, so that a sink can
    write the two at once (one chunk, one write, one ``fsync``). Without it
    the gate calls `append` twice.
    """

    def open_run(self, run: RunStart) -> None:
        """Begin the run: called once by the gate's constructor, before any `append`."""
        ...

    def append(self, topic: str, record: Mapping[str, Any]) -> str:
        """Chain and write one record on ``topic``; return its content address.

        ``record`` carries ``schema``, ``stamp_ns`` and the schema's fields, but
        not ``seq`` or ``prev_sha256``: those are the sink's to assign.
        """
        ...
