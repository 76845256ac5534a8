"""The decision trace report's tallies, counted one record at a time (the streamed report).

`DecisionTraceReport` derives its counts and statistics from its records and
approvals, all held (`analysis._trace_model`). The streamed report
(`analysis._trace_stream`) holds neither, so it counts as records come, into
three tallies split by what their values depend on:

1. `DecisionTallies`: what depends on each decision alone -- counts per
   verdict, policy id, rule and trace origin, first and last stamps, latency
   statistics, limit denials. Neither the assessment it is paired with nor
   the order the records come in changes them.
2. `PairingTallies`: what depends on the assessment a decision is paired
   with -- chain statuses, agents, detectors, stage times, shadow verdicts --
   and the shadow disagreement ids, which depend on order too. When the
   pairing or the order turns out different at the end, the streamed report
   counts these again, from the settled records.
3. `ApprovalTallies`: outcomes, wait statistics, and which decisions an
   approval of this run resolves.

`ReportHead` gathers what they give under the report's own field names:
every field of a report but its four lists, as the JSON encoder reads them.

What they hold: a count per distinct value (verdict, policy id, rule, agent,
detector, trace origin, stage, shadow verdict pair and rule, approval
outcome), so a crafted run with a million distinct agents holds a million
counts; at most `SHADOW_IDS_PER_PAIR` ids per verdict pair; the values of
the statistics in `SpilledRanks` and the resolved ids in a `SpilledMap`,
both bounded in memory and spilled to disk beyond.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from analysis._spilled_map import SpilledMap
from analysis._spilled_ranks import SpilledRanks
from analysis._trace_model import (
    SHADOW_IDS_PER_PAIR,
    ApprovalTraceRecord,
    ChainStatus,
    DecisionTraceRecord,
    shadow_pair,
)
from analysis._trace_stats import LatencyStats, StatsByKey, limit_denied_rule

__all__ = ["ApprovalTallies", "DecisionTallies", "PairingTallies", "ReportHead"]

_RESOLVED: Final = True  # the value of a map used as a set


@dataclass(frozen=True, slots=True)
class ReportHead:
    """Every field of a `DecisionTraceReport` but its four lists, as the JSON encoder reads them.

    The lists (``records``, ``approvals``, ``problems``,
    ``unresolved_pending_decision_ids``) are written by the streamed report
    itself; see `DecisionTraceReport` for what each field means.
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
    analysis_version: int
    duplicate_assessment_count: int
    truncated: bool
    sealed: bool
    per_approval_outcome_counts: Mapping[str, int]
    latency_ns_stats: LatencyStats | None
    latency_ns_by_verdict: Mapping[str, LatencyStats]
    stage_ns_by_stage: Mapping[str, LatencyStats]
    approval_wait_ns_stats: LatencyStats | None
    approval_wait_ns_by_outcome: Mapping[str, LatencyStats]
    per_matched_policy_counts: Mapping[str, int]
    per_agent_counts: Mapping[str, int]
    per_detector_counts: Mapping[str, int]
    per_trace_origin_counts: Mapping[str, int]
    shadow_decision_count: int
    shadow_disagreement_counts: Mapping[str, int]
    shadow_disagreements_by_rule: Mapping[str, int]
    shadow_disagreement_ids: tuple[tuple[str, tuple[str, ...]], ...]


class DecisionTallies:
    """What the report derives from each decision alone, whatever it is paired with.

    Args:
        memory_values: latencies held in memory before they spill (`SpilledRanks`).
    """

    __slots__ = (
        "first_ns",
        "kinds",
        "last_ns",
        "latencies",
        "limit_denials",
        "matched",
        "origins",
        "policies",
        "total",
    )

    def __init__(self, *, memory_values: int) -> None:
        self.total = 0
        self.kinds: Counter[str] = Counter()
        self.policies: Counter[str] = Counter()
        self.matched: Counter[str] = Counter()
        self.origins: Counter[str] = Counter()
        self.limit_denials: Counter[str] = Counter()
        self.first_ns: int | None = None
        self.last_ns: int | None = None
        self.latencies: SpilledRanks[str] = SpilledRanks(memory_values=memory_values)  # by verdict

    def add(self, record: DecisionTraceRecord) -> None:
        """Count one decision."""
        self.total += 1
        kind = record.decision_kind.value
        self.kinds[kind] += 1
        self.policies[record.policy_id] += 1
        if record.matched_policy is not None:
            self.matched[record.matched_policy] += 1
        if record.trace_origin is not None:
            self.origins[record.trace_origin] += 1
        rule = limit_denied_rule(record)
        if rule is not None:
            self.limit_denials[rule] += 1
        stamp = record.timestamp_ns
        if self.first_ns is None or stamp < self.first_ns:
            self.first_ns = stamp
        if self.last_ns is None or stamp > self.last_ns:
            self.last_ns = stamp
        self.latencies.add(kind, record.latency_ns)

    def latency_stats(self) -> tuple[LatencyStats | None, StatsByKey]:
        """The statistics of every latency, and per verdict."""
        return _stats(self.latencies)

    def close(self) -> None:
        """Drop the spilled latencies."""
        self.latencies.close()


class PairingTallies:
    """What the report derives from the assessment each decision is paired with, in stream order.

    Args:
        memory_values: stage times held in memory before they spill (`SpilledRanks`).
    """

    __slots__ = (
        "agents",
        "detectors",
        "disagreement_ids",
        "disagreements",
        "disagreements_by_rule",
        "shadowed",
        "stages",
        "statuses",
    )

    def __init__(self, *, memory_values: int) -> None:
        self.statuses: Counter[ChainStatus] = Counter()
        self.agents: Counter[str] = Counter()
        self.detectors: Counter[str] = Counter()
        self.stages: SpilledRanks[str] = SpilledRanks(memory_values=memory_values)
        self.shadowed = 0
        self.disagreements: Counter[str] = Counter()
        self.disagreements_by_rule: Counter[str] = Counter()
        self.disagreement_ids: dict[str, list[str]] = {}

    def add(self, record: DecisionTraceRecord) -> None:
        """Count one decision, as paired; the records must come in stream order."""
        self.statuses[record.chain_status] += 1
        if record.agent is not None:
            self.agents[record.agent] += 1
        for detector in record.detectors:
            self.detectors[detector] += 1
        for stage, spent in record.stage_ns.items():
            self.stages.add(stage, spent)
        if record.shadow_verdict is None:
            return
        self.shadowed += 1
        if not record.shadow_disagrees:
            return
        pair = shadow_pair(record)
        self.disagreements[pair] += 1
        if record.shadow_matched_policy is not None:
            self.disagreements_by_rule[record.shadow_matched_policy] += 1
        listed = self.disagreement_ids.setdefault(pair, [])
        if len(listed) < SHADOW_IDS_PER_PAIR:
            listed.append(record.decision_id)

    def stage_stats(self) -> StatsByKey:
        """The statistics of the stage times, per stage."""
        stages = self.stages
        return StatsByKey({stage: _known(stages.stats(stage)) for stage in stages.groups()})

    def ids_by_pair(self) -> tuple[tuple[str, tuple[str, ...]], ...]:
        """The first ids of each disagreeing verdict pair, pairs sorted."""
        return tuple((pair, tuple(ids)) for pair, ids in sorted(self.disagreement_ids.items()))

    def close(self) -> None:
        """Drop the spilled stage times."""
        self.stages.close()


class ApprovalTallies:
    """What the report derives from the run's approvals, and the decisions they resolve.

    Args:
        memory_values: wait times held in memory before they spill (`SpilledRanks`).
        memory_entries, filter_bits: the resolved ids' `SpilledMap`.
    """

    __slots__ = ("outcomes", "resolved", "waits")

    def __init__(self, *, memory_values: int, memory_entries: int, filter_bits: int) -> None:
        self.outcomes: Counter[str] = Counter()
        self.waits: SpilledRanks[str] = SpilledRanks(memory_values=memory_values)  # by outcome
        # The decision ids of this run that an approval resolves.
        self.resolved: SpilledMap[bool] = SpilledMap(
            memory_entries=memory_entries, filter_bits=filter_bits
        )

    def add(self, approval: ApprovalTraceRecord) -> None:
        """Count one approval."""
        self.outcomes[approval.outcome] += 1
        self.waits.add(approval.outcome, approval.wait_ns)
        if approval.decision_run_id is None:
            self.resolved.put(approval.decision_id, _RESOLVED)

    def resolves(self, decision_id: str) -> bool:
        """Whether an approval of this run resolves the decision ``decision_id``."""
        return self.resolved.get(decision_id) is not None

    def wait_stats(self) -> tuple[LatencyStats | None, StatsByKey]:
        """The statistics of every wait, and per outcome."""
        return _stats(self.waits)

    def close(self) -> None:
        """Drop the spilled waits and ids."""
        self.waits.close()
        self.resolved.close()


def _stats(ranks: SpilledRanks[str]) -> tuple[LatencyStats | None, StatsByKey]:
    by_key = {key: _known(ranks.stats(key)) for key in ranks.groups()}
    return ranks.stats_of_all(), StatsByKey(by_key)


def _known(stats: LatencyStats | None) -> LatencyStats:
    assert stats is not None  # a group exists once it holds a value
    return stats
