"""The values of a decision trace (ADR-0022 adapted): statuses, per-decision records, the report.

Everything here is a frozen value that checks itself on construction, so a
report decoded from JSON is exactly as trustworthy as one just built from a
log: the four chain counts add up, the per-verdict and per-policy counts agree
with the records, and each record's status agrees with its two hashes.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Final

from analysis._trace_stats import LatencyStats, stats_by_key
from runtime import RuntimeVerdict

__all__ = [
    "ANALYSIS_VERSION",
    "SHADOW_IDS_PER_PAIR",
    "ApprovalTraceRecord",
    "ChainStatus",
    "DecisionTraceRecord",
    "DecisionTraceReport",
    "FrozenCounts",
]

ANALYSIS_VERSION: Final = 5
"""Version of the trace algorithm and report layout; bumped on any change to either.

2: the report says whether the run is ``sealed``.
3: the report counts approvals by outcome and lists pending decisions never resolved.
4: each record names its action (agent, verb, resource), detectors, stage times and
   trace origin; the report lists its approvals and derives latency statistics (per
   verdict, per stage, approval waits) and counts per rule, agent, detector, origin.
5: each record carries its assessment's shadow verdict and rule (ADR 0031); the report
   counts the decisions a shadow would have decided differently, by (enforced, shadow)
   verdict pair and by shadow rule, with the first decision ids of each pair.
"""

SHADOW_IDS_PER_PAIR: Final = 20
"""How many decision ids the report lists per (enforced, shadow) verdict pair (the first)."""

APPROVAL_OUTCOMES: Final = ("approved", "rejected", "expired")
"""The outcomes of a ``ghost.approval/1`` record."""

_SHA256_HEX: Final = re.compile(r"[0-9a-f]{64}")


class ChainStatus(StrEnum):
    """How one decision's claimed assessment relates to what the log holds. Closed."""

    VERIFIED = "verified"
    """The decision names an assessment, and the assessment logged for it hashes to that name."""
    BROKEN = "broken"
    """An assessment is logged for the decision but hashes to something else: tampering or a bug."""
    ASSESSMENT_MISSING = "assessment_missing"
    """The decision names an assessment, but none is logged for its decision id."""
    NO_ASSESSMENT_CLAIMED = "no_assessment_claimed"
    """The decision names no assessment (``assessment_sha256`` is null): legitimate, explicit."""


class FrozenCounts(Mapping[str, int]):
    """An immutable, hashable mapping of names to counts, iterated in sorted key order.

    It compares equal to any mapping with the same items (a plain ``dict``
    included), so ``report.per_policy_id_counts == {"p": 3}`` reads naturally.

    Args:
        counts: a mapping, or ``(name, count)`` pairs; names are strings and
            counts non-negative integers (not booleans).

    Raises:
        ValueError: a name that is not a string, a count that is not a
            non-negative integer, or a name given twice as a pair.
    """

    __slots__ = ("_items", "_lookup")

    _items: tuple[tuple[str, int], ...]
    _lookup: dict[str, int]

    def __init__(self, counts: Mapping[str, int] | Iterable[tuple[str, int]] = ()) -> None:
        pairs = list(counts.items() if isinstance(counts, Mapping) else counts)
        lookup: dict[str, int] = {}
        for name, count in pairs:
            if not isinstance(name, str):
                raise ValueError(f"a count's name must be a string, not {type(name).__name__}")
            if type(count) is not int or count < 0:
                raise ValueError(f"the count for {name!r} must be a non-negative integer")
            if name in lookup:
                raise ValueError(f"the count for {name!r} is given twice")
            lookup[name] = count
        self._items = tuple(sorted(lookup.items()))
        # Rebuilt from the sorted items so that every view iterates in one order.
        self._lookup = dict(self._items)

    def __getitem__(self, key: str) -> int:
        return self._lookup[key]

    def __iter__(self) -> Iterator[str]:
        return (name for name, _ in self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __hash__(self) -> int:
        return hash(self._items)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, FrozenCounts):
            return self._items == other._items
        if isinstance(other, Mapping):
            return self._lookup == dict(other.items())
        return NotImplemented

    def __repr__(self) -> str:
        return f"FrozenCounts({self._lookup!r})"

    def total(self) -> int:
        """Return the sum of the counts."""
        return sum(self._lookup.values())


@dataclass(frozen=True, slots=True)
class DecisionTraceRecord:
    """One ``/decisions`` record, paired with the assessment it claims to rest on.

    Attributes:
        timestamp_ns: the decision's ``stamp_ns`` (wall clock, ns since the epoch).
        decision_kind: the decision's verdict.
        decision_reason: the decision's human-readable reason.
        policy_id: the id of the policy that decided.
        claimed_assessment_sha256: the decision's ``assessment_sha256``, as written.
        recomputed_assessment_sha256: SHA-256 hex of the bytes of the assessment
            logged for this decision id, or None when none was claimed or found.
        chain_status: what the two hashes say together.
        analysis_version: `ANALYSIS_VERSION` of the analyzer that built the record.
        decision_id: the decision's id: the join key to its assessment.
        matched_policy: the rule that determined the verdict, or None.
        trace_id: the W3C trace id the decision was made under.
        latency_ns: gate entry to verdict, monotonic nanoseconds.
        agent, verb, resource: the action, as the assessment logged for this
            decision id records it (escaped and scrubbed by the gate); None when
            no assessment is logged for it, or its field is not text.
        detectors: the detectors whose findings that assessment lists, sorted, each once.
        stage_ns: that assessment's time per gate stage (``policy``, ``narrow``,
            ``scrub``), monotonic nanoseconds; empty without one.
        trace_origin: how the decision's trace context came about (the
            decision's ``trace_origin``); None when it does not say.
        shadow_verdict: what the shadow (a candidate policy, or the policy's
            shadow rules) would have decided, from that assessment's ``shadow``
            (ADR 0031); None without one.
        shadow_matched_policy: the rule that determined the shadow verdict, or None.
        shadow_policy_id: the shadow's policy id, or None without a shadow.
        shadow_error: the shadow could not be evaluated (its verdict is then ``deny``).

    Raises:
        ValueError: ``chain_status`` disagrees with the two hashes (a verified
            record whose hashes differ, a missing one with a recomputed hash, ...).
    """

    timestamp_ns: int
    decision_kind: RuntimeVerdict
    decision_reason: str
    policy_id: str
    claimed_assessment_sha256: str | None
    recomputed_assessment_sha256: str | None
    chain_status: ChainStatus
    analysis_version: int
    decision_id: str
    matched_policy: str | None
    trace_id: str
    latency_ns: int
    agent: str | None = None
    verb: str | None = None
    resource: str | None = None
    detectors: tuple[str, ...] = ()
    stage_ns: Mapping[str, int] = FrozenCounts()
    trace_origin: str | None = None
    shadow_verdict: RuntimeVerdict | None = None
    shadow_matched_policy: str | None = None
    shadow_policy_id: str | None = None
    shadow_error: bool = False

    @property
    def shadow_disagrees(self) -> bool:
        """A shadow was evaluated and would have decided otherwise."""
        shadow = self.shadow_verdict
        return shadow is not None and shadow is not self.decision_kind

    def __post_init__(self) -> None:
        # Coerce plain strings so a record built by hand equals one built from a log.
        object.__setattr__(self, "decision_kind", RuntimeVerdict(self.decision_kind))
        if self.shadow_verdict is not None:
            object.__setattr__(self, "shadow_verdict", RuntimeVerdict(self.shadow_verdict))
        elif self.shadow_matched_policy is not None or self.shadow_policy_id is not None:
            raise ValueError(
                f"decision {self.decision_id}: a shadow rule or policy without a shadow verdict"
            )
        object.__setattr__(self, "chain_status", ChainStatus(self.chain_status))
        if not isinstance(self.stage_ns, FrozenCounts):  # immutable: shared, not copied
            object.__setattr__(self, "stage_ns", FrozenCounts(self.stage_ns))
        detectors = tuple(self.detectors)
        if list(detectors) != sorted(set(detectors)):
            raise ValueError(
                f"decision {self.decision_id}: detectors must be sorted, each once, got"
                f" {list(detectors)!r}"
            )
        object.__setattr__(self, "detectors", detectors)
        claimed = self.claimed_assessment_sha256
        recomputed = self.recomputed_assessment_sha256
        if recomputed is not None and not _SHA256_HEX.fullmatch(recomputed):
            raise ValueError(
                f"decision {self.decision_id}: recomputed_assessment_sha256 must be"
                f" 64 lowercase hex digits, got {recomputed!r}"
            )
        status = self.chain_status
        consistent = {
            ChainStatus.VERIFIED: claimed is not None and claimed == recomputed,
            ChainStatus.BROKEN: (
                claimed is not None and recomputed is not None and claimed != recomputed
            ),
            ChainStatus.ASSESSMENT_MISSING: claimed is not None and recomputed is None,
            ChainStatus.NO_ASSESSMENT_CLAIMED: claimed is None and recomputed is None,
        }[status]
        if not consistent:
            raise ValueError(
                f"decision {self.decision_id}: chain_status {status.value!r} contradicts"
                f" claimed {claimed!r} and recomputed {recomputed!r}"
            )


@dataclass(frozen=True, slots=True)
class ApprovalTraceRecord:
    """One readable ``/approvals`` record of the run.

    Attributes:
        decision_id: the decision it resolves.
        outcome: ``approved``, ``rejected`` or ``expired``.
        wait_ns: pending verdict to resolution, monotonic nanoseconds (as logged).
        decision_run_id: the earlier run that holds the decision, or None for this run.

    Raises:
        ValueError: an unknown outcome.
    """

    decision_id: str
    outcome: str
    wait_ns: int
    decision_run_id: str | None = None

    def __post_init__(self) -> None:
        if self.outcome not in APPROVAL_OUTCOMES:
            raise ValueError(
                f"approval of {self.decision_id}: outcome {self.outcome!r} is not one of"
                f" {', '.join(APPROVAL_OUTCOMES)}"
            )


def _no_stats() -> Mapping[str, LatencyStats]:
    return stats_by_key(())


@dataclass(frozen=True, slots=True)
class DecisionTraceReport:
    """Every decision of one run, each paired with its assessment, and the run's tallies.

    Build one with `build_decision_trace_report`; serialize it with
    `encode_decision_trace_report_to_bytes`. The report judges nothing: a
    ``broken`` chain is a fact it states, and `verify_decision_chain` is the check.

    Attributes:
        source_mcap_sha256: SHA-256 hex of the whole MCAP file read
            (``sha256sum run.mcap`` gives the same).
        total_decisions: number of readable ``/decisions`` records.
        verified_count, broken_count, assessment_missing_count, no_assessment_claimed_count:
            records per `ChainStatus`.
        per_decision_kind_counts: records per verdict (only verdicts that occur).
        per_policy_id_counts: records per ``policy_id``.
        timestamp_first_ns, timestamp_last_ns: earliest and latest decision
            ``stamp_ns`` (min and max: wall clocks can step back); None without decisions.
        timestamp_span_ns: last minus first; None without decisions.
        records: one `DecisionTraceRecord` per decision, in stream order.
        analysis_version: `ANALYSIS_VERSION` of the analyzer.
        duplicate_assessment_count: readable assessments that shared a decision
            id with an earlier one (the last one logged is the one joined).
        truncated: the reader found the run cut short (no footer, e.g. a crash);
            the records are the complete ones before the cut.
        sealed: the run's last record is a ``/seal`` that counts and names the
            records before it, as a cleanly closed run ends (the same rule as
            `verify_run`'s; whether the run is intact is ``ghost verify``'s call).
        problems: one sentence per decision, assessment or approval record that could not
            be read (not JSON, wrong schema, missing or mistyped fields; left
            out of the counts), per record traced although it breaks its schema
            in a field the trace does not use, and per problem the reader
            reported (damaged chunks, foreign channels, ...).
        per_approval_outcome_counts: readable ``/approvals`` records per outcome
            (only outcomes that occur), approvals of decisions of an earlier run included.
        unresolved_pending_decision_ids: the ``pending`` decisions of this run
            that no approval in this run resolves, in stream order (still
            waiting when the run ended -- possibly resolved in a later run).
        approvals: the run's readable ``/approvals`` records, in stream order;
            ``per_approval_outcome_counts`` counts them.

    Derived from ``records`` and ``approvals`` (not arguments; a decoded report
    must carry exactly these values):

    Attributes:
        latency_ns_stats: `LatencyStats` of every decision's ``latency_ns``
            (None without decisions).
        latency_ns_by_verdict: the same per verdict (only verdicts that occur).
        stage_ns_by_stage: `LatencyStats` per gate stage, over the decisions
            whose assessment times that stage.
        approval_wait_ns_stats: `LatencyStats` of the approvals' ``wait_ns``
            (None without approvals); ``approval_wait_ns_by_outcome`` per outcome.
        per_matched_policy_counts: decisions per matched rule (decisions no
            rule decided are not counted).
        per_agent_counts: decisions per agent (of those whose assessment is logged).
        per_detector_counts: decisions in which each detector found something.
        per_trace_origin_counts: decisions per trace origin.
        shadow_decision_count: decisions whose assessment carries a shadow verdict.
        shadow_disagreement_counts: the decisions a shadow would have decided
            otherwise, per ``"<enforced> -> <shadow>"`` verdict pair (ADR 0031).
        shadow_disagreements_by_rule: the same per shadow rule that determined
            the shadow verdict (decisions no rule decided are not counted).
        shadow_disagreement_ids: per verdict pair, the ids of its first
            `SHADOW_IDS_PER_PAIR` decisions, in stream order.

    Raises:
        ValueError: the counts do not add up to ``total_decisions`` and
            ``len(records)``, disagree with the records, or the timestamps do
            not match the records.
    """

    source_mcap_sha256: str
    total_decisions: int
    verified_count: int
    broken_count: int
    assessment_missing_count: int
    no_assessment_claimed_count: int
    per_decision_kind_counts: Mapping[str, int]
    per_policy_id_counts: Mapping[str, int]
    timestamp_first_ns: int | None
    timestamp_last_ns: int | None
    timestamp_span_ns: int | None
    records: tuple[DecisionTraceRecord, ...]
    analysis_version: int
    duplicate_assessment_count: int
    truncated: bool
    sealed: bool
    problems: tuple[str, ...]
    per_approval_outcome_counts: Mapping[str, int] = FrozenCounts()
    unresolved_pending_decision_ids: tuple[str, ...] = ()
    approvals: tuple[ApprovalTraceRecord, ...] = ()
    latency_ns_stats: LatencyStats | None = field(init=False, default=None)
    latency_ns_by_verdict: Mapping[str, LatencyStats] = field(init=False, default_factory=_no_stats)
    stage_ns_by_stage: Mapping[str, LatencyStats] = field(init=False, default_factory=_no_stats)
    approval_wait_ns_stats: LatencyStats | None = field(init=False, default=None)
    approval_wait_ns_by_outcome: Mapping[str, LatencyStats] = field(
        init=False, default_factory=_no_stats
    )
    per_matched_policy_counts: Mapping[str, int] = field(init=False, default_factory=FrozenCounts)
    per_agent_counts: Mapping[str, int] = field(init=False, default_factory=FrozenCounts)
    per_detector_counts: Mapping[str, int] = field(init=False, default_factory=FrozenCounts)
    per_trace_origin_counts: Mapping[str, int] = field(init=False, default_factory=FrozenCounts)
    shadow_decision_count: int = field(init=False, default=0)
    shadow_disagreement_counts: Mapping[str, int] = field(init=False, default_factory=FrozenCounts)
    shadow_disagreements_by_rule: Mapping[str, int] = field(
        init=False, default_factory=FrozenCounts
    )
    shadow_disagreement_ids: tuple[tuple[str, tuple[str, ...]], ...] = field(init=False, default=())

    @classmethod
    def from_records(
        cls,
        records: Iterable[DecisionTraceRecord],
        *,
        source_mcap_sha256: str,
        duplicate_assessment_count: int = 0,
        truncated: bool = False,
        sealed: bool = False,
        approvals: Iterable[ApprovalTraceRecord] = (),
        problems: Iterable[str] = (),
    ) -> DecisionTraceReport:
        """Build a report whose counts and timestamps are derived from ``records``.

        ``approvals`` are the run's approval records; those of decisions of
        this run (``decision_run_id`` None) resolve them.

        Raises:
            ValueError: as the constructor (a record of another analysis version,
                a malformed ``source_mcap_sha256``).
        """
        records = tuple(records)
        approvals = tuple(approvals)
        resolved = frozenset(a.decision_id for a in approvals if a.decision_run_id is None)
        # dict.fromkeys: each id once (a tampered log can repeat one), in stream order.
        unresolved = tuple(
            dict.fromkeys(
                record.decision_id
                for record in records
                if record.decision_kind is RuntimeVerdict.PENDING
                and record.decision_id not in resolved
            )
        )
        statuses = Counter(record.chain_status for record in records)
        stamps = [record.timestamp_ns for record in records]
        first = min(stamps) if stamps else None
        last = max(stamps) if stamps else None
        return cls(
            source_mcap_sha256=source_mcap_sha256,
            total_decisions=len(records),
            verified_count=statuses[ChainStatus.VERIFIED],
            broken_count=statuses[ChainStatus.BROKEN],
            assessment_missing_count=statuses[ChainStatus.ASSESSMENT_MISSING],
            no_assessment_claimed_count=statuses[ChainStatus.NO_ASSESSMENT_CLAIMED],
            per_decision_kind_counts=Counter(record.decision_kind.value for record in records),
            per_policy_id_counts=Counter(record.policy_id for record in records),
            timestamp_first_ns=first,
            timestamp_last_ns=last,
            timestamp_span_ns=None if first is None or last is None else last - first,
            records=records,
            analysis_version=ANALYSIS_VERSION,
            duplicate_assessment_count=duplicate_assessment_count,
            truncated=truncated,
            sealed=sealed,
            per_approval_outcome_counts=Counter(a.outcome for a in approvals),
            unresolved_pending_decision_ids=unresolved,
            approvals=approvals,
            problems=tuple(problems),
        )

    def __post_init__(self) -> None:
        # Freeze what a caller may have passed as a dict or list, so the value is immutable.
        object.__setattr__(self, "records", tuple(self.records))
        object.__setattr__(self, "problems", tuple(self.problems))
        object.__setattr__(
            self, "unresolved_pending_decision_ids", tuple(self.unresolved_pending_decision_ids)
        )
        outcomes = FrozenCounts(self.per_approval_outcome_counts)
        object.__setattr__(self, "per_approval_outcome_counts", outcomes)
        kinds = FrozenCounts(self.per_decision_kind_counts)
        policies = FrozenCounts(self.per_policy_id_counts)
        object.__setattr__(self, "per_decision_kind_counts", kinds)
        object.__setattr__(self, "per_policy_id_counts", policies)

        if not _SHA256_HEX.fullmatch(self.source_mcap_sha256):
            raise ValueError(
                "source_mcap_sha256 must be 64 lowercase hex digits,"
                f" got {self.source_mcap_sha256!r}"
            )
        if self.duplicate_assessment_count < 0:
            raise ValueError("duplicate_assessment_count must not be negative")
        object.__setattr__(self, "approvals", tuple(self.approvals))
        self._check_counts(kinds, policies)
        self._check_timestamps()
        self._check_approvals(outcomes)
        self._derive()

    def _derive(self) -> None:
        records, approvals = self.records, self.approvals
        disagreeing = [r for r in records if r.shadow_disagrees]
        derived: dict[str, object] = {
            "latency_ns_stats": LatencyStats.of(r.latency_ns for r in records),
            "latency_ns_by_verdict": stats_by_key(
                (r.decision_kind.value, r.latency_ns) for r in records
            ),
            "stage_ns_by_stage": stats_by_key(pair for r in records for pair in r.stage_ns.items()),
            "approval_wait_ns_stats": LatencyStats.of(a.wait_ns for a in approvals),
            "approval_wait_ns_by_outcome": stats_by_key((a.outcome, a.wait_ns) for a in approvals),
            "per_matched_policy_counts": _tally(r.matched_policy for r in records),
            "per_agent_counts": _tally(r.agent for r in records),
            "per_detector_counts": _tally(d for r in records for d in r.detectors),
            "per_trace_origin_counts": _tally(r.trace_origin for r in records),
            "shadow_decision_count": sum(r.shadow_verdict is not None for r in records),
            "shadow_disagreement_counts": _tally(map(shadow_pair, disagreeing)),
            "shadow_disagreements_by_rule": _tally(r.shadow_matched_policy for r in disagreeing),
            "shadow_disagreement_ids": _first_ids(disagreeing),
        }
        for name, value in derived.items():
            object.__setattr__(self, name, value)

    def _check_approvals(self, outcomes: FrozenCounts) -> None:
        for approval in self.approvals:
            if type(approval) is not ApprovalTraceRecord:
                raise ValueError("approvals must be ApprovalTraceRecord values")
        if outcomes != Counter(approval.outcome for approval in self.approvals):
            raise ValueError(
                f"per_approval_outcome_counts {dict(outcomes)!r} disagree with the approvals"
            )
        resolved = {a.decision_id for a in self.approvals if a.decision_run_id is None}
        unknown = sorted(set(outcomes) - set(APPROVAL_OUTCOMES))
        if unknown:
            raise ValueError(
                f"per_approval_outcome_counts has {unknown[0]!r}, not one of"
                f" {', '.join(APPROVAL_OUTCOMES)}"
            )
        pending = [
            record.decision_id
            for record in self.records
            if record.decision_kind is RuntimeVerdict.PENDING
        ]
        unresolved = self.unresolved_pending_decision_ids
        # Exactly the pending decisions no approval of this run resolves: each once, in
        # stream order.
        expected = tuple(dict.fromkeys(p for p in pending if p not in resolved))
        if unresolved != expected:
            raise ValueError(
                "unresolved_pending_decision_ids must be the pending decisions of the report"
                " that no approval of this run resolves, each once, in stream order"
            )

    def _check_counts(self, kinds: FrozenCounts, policies: FrozenCounts) -> None:
        status_sum = (
            self.verified_count
            + self.broken_count
            + self.assessment_missing_count
            + self.no_assessment_claimed_count
        )
        if not status_sum == self.total_decisions == len(self.records):
            raise ValueError(
                f"counts invariant violated: verified {self.verified_count} + broken"
                f" {self.broken_count} + assessment_missing {self.assessment_missing_count}"
                f" + no_assessment_claimed {self.no_assessment_claimed_count} = {status_sum},"
                f" total_decisions = {self.total_decisions}, records = {len(self.records)}"
            )
        tallied = Counter(record.chain_status for record in self.records)
        for status, count in (
            (ChainStatus.VERIFIED, self.verified_count),
            (ChainStatus.BROKEN, self.broken_count),
            (ChainStatus.ASSESSMENT_MISSING, self.assessment_missing_count),
            (ChainStatus.NO_ASSESSMENT_CLAIMED, self.no_assessment_claimed_count),
        ):
            if tallied[status] != count:
                raise ValueError(
                    f"{status.value}_count is {count} but {tallied[status]} records"
                    f" have chain_status {status.value!r}"
                )
        for name, counts, attribute in (
            ("per_decision_kind_counts", kinds, "decision_kind"),
            ("per_policy_id_counts", policies, "policy_id"),
        ):
            if counts.total() != self.total_decisions:
                raise ValueError(
                    f"{name} sum to {counts.total()}, not total_decisions {self.total_decisions}"
                )
            expected = Counter(str(getattr(record, attribute)) for record in self.records)
            if counts != expected:
                raise ValueError(f"{name} {dict(counts)!r} disagree with the records")
        for record in self.records:
            if record.analysis_version != self.analysis_version:
                raise ValueError(
                    f"decision {record.decision_id} has analysis_version"
                    f" {record.analysis_version}, the report {self.analysis_version}"
                )

    def _check_timestamps(self) -> None:
        stamps = [record.timestamp_ns for record in self.records]
        expected: tuple[int | None, int | None, int | None] = (None, None, None)
        if stamps:
            expected = (min(stamps), max(stamps), max(stamps) - min(stamps))
        actual = (self.timestamp_first_ns, self.timestamp_last_ns, self.timestamp_span_ns)
        if actual != expected:
            raise ValueError(
                f"timestamps first/last/span {actual} do not match the records {expected}"
            )


def _tally(names: Iterable[str | None]) -> FrozenCounts:
    return FrozenCounts(Counter(name for name in names if name is not None))


def shadow_pair(record: DecisionTraceRecord) -> str:
    """``"<enforced> -> <shadow>"``: how a record's two verdicts are counted (``allow -> deny``)."""
    shadow = record.shadow_verdict
    return f"{record.decision_kind.value} -> {'none' if shadow is None else shadow.value}"


def _first_ids(records: Iterable[DecisionTraceRecord]) -> tuple[tuple[str, tuple[str, ...]], ...]:
    ids: dict[str, list[str]] = {}
    for record in records:
        listed = ids.setdefault(shadow_pair(record), [])
        if len(listed) < SHADOW_IDS_PER_PAIR:
            listed.append(record.decision_id)
    return tuple((pair, tuple(listed)) for pair, listed in sorted(ids.items()))
