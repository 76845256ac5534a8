"""ghost analysis: offline reading and verification of captured runs.

`build_decision_trace_report` pairs every decision of a run with the
assessment it claims to rest on and re-derives each claim from the bytes in
the file (ADR-0022); `verify_decision_chain` turns that into a yes/no with one
message per inconsistency; the ``encode``/``decode``/``generate`` functions
give the report's canonical JSON. `verify_run` is the audit: every
integrity check of a run (schemas, canonical bytes, ``seq``, the hash chain,
the seal, MCAP fields, the policy attachment, decision links, CRCs, Merkle
checkpoints, note signatures, anchors), ending
in a `RunStatus` of intact, truncated or tampered (ADR 0013). `analyze_run`
gives both from one streaming pass over the file. `export_run` writes a
run as Parquet tables (``analysis._export_schema`` declares them) and `verify_fleet` runs
`verify_run` over many files on a process pool or a Ray cluster (ADR 0030;
``pyarrow``, ``duckdb`` and ``ray`` are optional extras, imported only when
used). The ``ghost`` command line lives in ``analysis._cli``.
"""

# ruff: noqa: E402 -- the package's imports run after the shadowing check, on purpose

from __future__ import annotations

from analysis import _shadow

# Before the first import of audit or runtime (the `ghost` command included): a foreign
# module of either name must fail here, by name (ADR 0029).
_shadow.require_ghost_package("runtime")
_shadow.require_ghost_package("audit")

from analysis._analyze import RunAnalysis, analyze_run
from analysis._decision_trace import build_decision_trace_report, verify_decision_chain
from analysis._export import DuplicateRunError, ExportError, ExportResult, export_run
from analysis._fleet_deps import MissingExtraError
from analysis._fleet_sql import FleetQueryError
from analysis._fleet_verify import FleetOutcome, FleetRun, FleetVerification, verify_fleet
from analysis._trace_json import (
    decode_decision_trace_report_from_json,
    encode_decision_trace_report_to_bytes,
    generate_decision_trace_report,
)
from analysis._trace_model import (
    ANALYSIS_VERSION,
    ApprovalTraceRecord,
    ChainStatus,
    DecisionTraceRecord,
    DecisionTraceReport,
    FrozenCounts,
)
from analysis._trace_stats import LatencyStats, StatsByKey
from analysis._verify import verify_run
from analysis._verify_model import (
    IntegrityCheck,
    RunProblem,
    RunStatus,
    RunVerification,
    RunWriter,
    SignatureCheck,
)
from runtime import _version

__version__ = _version.SDK_VERSION
"""The installed ghost-sdk version; one source, the distribution's metadata (runtime._version)."""

from analysis._replay import (
    ReplayedDecision,
    ReplayError,
    ReplayReport,
    ReplayStatus,
    replay_run,
)

__all__ = [
    "ANALYSIS_VERSION",
    "ApprovalTraceRecord",
    "ChainStatus",
    "DecisionTraceRecord",
    "DecisionTraceReport",
    "DuplicateRunError",
    "ExportError",
    "ExportResult",
    "FleetOutcome",
    "FleetQueryError",
    "FleetRun",
    "FleetVerification",
    "FrozenCounts",
    "IntegrityCheck",
    "LatencyStats",
    "MissingExtraError",
    "ReplayError",
    "ReplayReport",
    "ReplayStatus",
    "ReplayedDecision",
    "RunAnalysis",
    "RunProblem",
    "RunStatus",
    "RunVerification",
    "RunWriter",
    "SignatureCheck",
    "StatsByKey",
    "analyze_run",
    "build_decision_trace_report",
    "decode_decision_trace_report_from_json",
    "encode_decision_trace_report_to_bytes",
    "export_run",
    "generate_decision_trace_report",
    "replay_run",
    "verify_decision_chain",
    "verify_fleet",
    "verify_run",
]
