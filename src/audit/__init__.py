"""ghost audit: the record format and the MCAP audit log.

A gate hands each record to an `AuditSink`; the sinks here chain the records
(``seq``, ``prev_sha256``) and store their canonical bytes: `McapAuditSink`
in an MCAP file, `MemoryAuditSink` in memory for tests. `read_run` reads a
log back, whatever state it is in, for the analyzer.
"""

from __future__ import annotations

from audit._chain import Durability
from audit._errors import LogFormatError
from audit._mcap_sink import McapAuditSink
from audit._memory_sink import AuditEntry, MemoryAuditSink
from audit._reader import read_run
from audit._run_log import LoggedAttachment, LoggedRecord, RunLog
from audit._schemas import SCHEMAS, TOPICS
from audit._validate import schema_problems

__all__ = [
    "SCHEMAS",
    "TOPICS",
    "AuditEntry",
    "Durability",
    "LogFormatError",
    "LoggedAttachment",
    "LoggedRecord",
    "McapAuditSink",
    "MemoryAuditSink",
    "RunLog",
    "read_run",
    "schema_problems",
]
