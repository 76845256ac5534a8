"""ghost audit: the record format and the MCAP audit log.

A gate hands each record to an `AuditSink`; the sinks here chain the records
(``seq``, ``prev_sha256``) and store their canonical bytes: `McapAuditSink`
in an MCAP file, `MemoryAuditSink` in memory for tests. `iter_run` streams a
log back, whatever state it is in, within fixed memory bounds (`ReadLimits`),
for the verifier; `read_run` collects it into a `RunLog` for the analyzer.
"""

from __future__ import annotations

from audit._chain import Durability
from audit._errors import LogFormatError
from audit._mcap_sink import McapAuditSink
from audit._memory_sink import AuditEntry, MemoryAuditSink
from audit._problems import DEFAULT_LIMITS, CrcStatus, ProblemKind, ReadLimits, ReadProblem
from audit._reader import iter_run, read_run
from audit._run_log import (
    LoggedAttachment,
    LoggedChannel,
    LoggedRecord,
    ReadEnd,
    RunItem,
    RunLog,
)
from audit._schemas import SCHEMAS, TOPICS
from audit._validate import schema_problems

__all__ = [
    "DEFAULT_LIMITS",
    "SCHEMAS",
    "TOPICS",
    "AuditEntry",
    "CrcStatus",
    "Durability",
    "LogFormatError",
    "LoggedAttachment",
    "LoggedChannel",
    "LoggedRecord",
    "McapAuditSink",
    "MemoryAuditSink",
    "ProblemKind",
    "ReadEnd",
    "ReadLimits",
    "ReadProblem",
    "RunItem",
    "RunLog",
    "iter_run",
    "read_run",
    "schema_problems",
]
