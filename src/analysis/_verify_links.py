"""The checks of what records say about each other: decisions, assessments, approvals, the policy.

Two `RecordCheck`s (ADR 0013):

* `DecisionLinkCheck` — a gate logs one assessment, then the one decision
  that rests on it (``assessment_sha256`` = the assessment's content
  address, the same ``decision_id``, the same policy and span), and at most
  one approval per ``pending`` decision, naming it by content address. So:

  1. an assessment's ``decision_id`` is not already assessed or decided;
  2. a decision's ``decision_id`` is not already decided; its claim is the
     content address of the assessment logged for its id before it (or null,
     and then no assessment is logged for it); it agrees with that
     assessment on ``policy_id``, ``policy_sha256``, ``trace_id`` and
     ``span_id``;
  3. an approval resolves a decision logged before it, names it by its
     content address, finds it ``pending``, and is the only one for it --
     unless its ``decision_run_id`` names another run (the agent restarted
     while the decision waited, ADR 0016): then the decision must *not* be
     in this run, that run must not be this one, and it is still the only
     approval for its decision id here;
  4. at the end, every assessment has its decision — except in a run a
     crash cut short, where the last ones may have been in flight.

  Most tampering with these records breaks the hash chain first; these
  rules name the *decision* it touched, and they still hold when someone
  edits a record and re-chains the log after it.

* `PolicyAttachmentCheck` — the file's one attachment is the policy source
  the ``/run`` record names by ``policy_source_sha256``, logged at the run's
  ``stamp_ns``; a run with a shadow candidate (``/run`` ``shadow``, ADR 0031)
  has a second, the candidate's source, named by its
  ``shadow.policy_source_sha256`` and held to the same rules (one attachment
  serves both when the two sources are the same bytes).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Final, NamedTuple

from analysis._run_facts import (
    APPROVALS_TOPIC,
    ASSESSMENTS_TOPIC,
    DECISIONS_TOPIC,
    RUN_TOPIC,
    RecordFacts,
    RunEnd,
    record_label,
    shown,
)
from analysis._spilled_map import SpilledMap
from analysis._verify_model import IntegrityCheck, RunProblem
from runtime import RuntimeVerdict

if TYPE_CHECKING:
    from audit import LoggedAttachment

__all__ = ["DecisionLinkCheck", "PolicyAttachmentCheck"]

# The facts of one check that both halves of a decision record.
_SHARED_FIELDS: Final = ("policy_id", "policy_sha256", "trace_id", "span_id")
_VERDICTS: Final = frozenset(verdict.value for verdict in RuntimeVerdict)
_MAX_NAME: Final = 60
# What the link check keeps in memory before it spills (ADR 0026): entries per map, and
# the Bloom filter's bits (8 MiB for decisions, which every run has; 1 MiB for the rest).
_MEMORY_ENTRIES = 32_768
_FILTER_BITS = 2**26
_SMALL_FILTER_BITS = 2**23


class _Decided(NamedTuple):
    """What later records need of a decision: where it is, its address, its verdict."""

    position: int
    seq: int | None
    decision_id: str
    address: str
    verdict: object

    @property
    def label(self) -> str:
        return record_label(self.position, self.seq, DECISIONS_TOPIC, self.decision_id)


class _Assessed(NamedTuple):
    """What a decision needs of its assessment, held (or spilled) until the decision comes."""

    position: int
    seq: int | None
    decision_id: str
    record_sha256: str
    address: str
    shared: tuple[object, ...]  # the values of _SHARED_FIELDS

    @property
    def label(self) -> str:
        return record_label(self.position, self.seq, ASSESSMENTS_TOPIC, self.decision_id)

    def problem(self, check: IntegrityCheck, message: str) -> RunProblem:
        return RunProblem(
            check=check,
            message=message,
            position=self.position,
            seq=self.seq,
            topic=ASSESSMENTS_TOPIC,
            decision_id=self.decision_id,
            record_sha256=self.record_sha256,
        )


class DecisionLinkCheck:
    """Assessments, decisions and approvals pair up by id and content address.

    What it remembers across records is keyed by decision id or address, in
    `SpilledMap`s: a bounded number in memory, the rest on disk (ADR 0026).
    Call `finish` (or `close`) to drop the disk copy.
    """

    __slots__ = ("_approved", "_decided", "_final_open", "_open", "_open_by_address", "_run_id")

    def __init__(self) -> None:
        self._run_id: object = None  # this run's id, from its /run record
        # Assessments waiting for their decision: decision_id -> the assessment.
        entries, small = _MEMORY_ENTRIES, _SMALL_FILTER_BITS
        self._open: SpilledMap[_Assessed] = SpilledMap(memory_entries=entries, filter_bits=small)
        self._open_by_address: SpilledMap[str] = SpilledMap(
            memory_entries=entries, filter_bits=small
        )
        self._decided: SpilledMap[_Decided] = SpilledMap(
            memory_entries=entries, filter_bits=_FILTER_BITS
        )
        self._approved: SpilledMap[str] = SpilledMap(memory_entries=entries, filter_bits=small)
        self._final_open: int | None = None

    @property
    def open_assessments(self) -> int:
        """Assessments read so far that no decision has claimed (at `finish`, those left)."""
        return len(self._open) if self._final_open is None else self._final_open

    def close(self) -> None:
        """Drop what is held, on disk too (`finish` does this)."""
        for held in (self._open, self._open_by_address, self._decided, self._approved):
            held.close()

    def visit(self, facts: RecordFacts) -> Iterable[RunProblem]:
        if facts.position == 0 and facts.topic == RUN_TOPIC:
            self._run_id = facts.field("run_id")
        if facts.decision_id is None:
            return ()  # unreadable or malformed: the json or schema check names it
        if facts.topic == ASSESSMENTS_TOPIC:
            return self._assessment(facts, facts.decision_id)
        if facts.topic == DECISIONS_TOPIC:
            return self._decision(facts, facts.decision_id)
        if facts.topic == APPROVALS_TOPIC:
            return self._approval(facts, facts.decision_id)
        return ()

    def _assessment(self, facts: RecordFacts, decision_id: str) -> list[RunProblem]:
        decided = self._decided.get(decision_id)
        if decided is not None:
            return [
                facts.problem(
                    IntegrityCheck.LINKS,
                    f"an assessment for a decision already logged ({decided.label}): a gate"
                    " logs the assessment first",
                )
            ]
        first = self._open.get(decision_id)
        if first is not None:
            return [
                facts.problem(
                    IntegrityCheck.LINKS,
                    f"a second assessment for this decision (the first is {first.label}):"
                    " a gate logs one",
                )
            ]
        shared = tuple(facts.field(name) for name in _SHARED_FIELDS)
        self._open.add(
            decision_id,
            _Assessed(
                facts.position, facts.seq, decision_id, facts.logged.sha256, facts.address, shared
            ),
        )
        self._open_by_address.put(facts.address, decision_id)
        return []

    def _decision(self, facts: RecordFacts, decision_id: str) -> list[RunProblem]:
        earlier = self._decided.get(decision_id)
        if earlier is not None:
            return [
                facts.problem(
                    IntegrityCheck.LINKS,
                    f"a second decision with this decision_id (the first is {earlier.label})",
                )
            ]
        self._decided.add(
            decision_id,
            _Decided(facts.position, facts.seq, decision_id, facts.address, facts.field("verdict")),
        )
        assessment = self._open.pop(decision_id)
        if assessment is not None:
            self._open_by_address.pop(assessment.address)
        claim = facts.field("assessment_sha256")
        problems: list[RunProblem] = []
        if claim is None:
            if assessment is not None:
                problems.append(
                    facts.problem(
                        IntegrityCheck.LINKS,
                        "it claims no assessment (assessment_sha256 is null), but its"
                        f" assessment is logged ({assessment.label})",
                    )
                )
        elif assessment is None:
            other = self._open_by_address.get(claim) if isinstance(claim, str) else None
            why = (
                f"it claims the assessment of decision {other}: records were swapped or re-linked"
                if other is not None
                else "no assessment for this decision precedes it"
            )
            problems.append(
                facts.problem(
                    IntegrityCheck.LINKS, f"it claims assessment {shown(claim)}, but {why}"
                )
            )
        elif claim != assessment.address:
            problems.append(
                facts.problem(
                    IntegrityCheck.LINKS,
                    f"it claims assessment {shown(claim)}, but its assessment,"
                    f" {assessment.label}, has content address {assessment.address}",
                )
            )
        if assessment is not None:
            differing = [
                name
                for name, theirs in zip(_SHARED_FIELDS, assessment.shared, strict=True)
                if facts.field(name) != theirs
            ]
            if differing:
                problems.append(
                    facts.problem(
                        IntegrityCheck.LINKS,
                        f"its {', '.join(differing)} differ from its assessment's"
                        f" ({assessment.label}): both halves of one check record the same",
                    )
                )
        return problems

    def _approval(self, facts: RecordFacts, decision_id: str) -> list[RunProblem]:
        decided = self._decided.get(decision_id)
        other_run = facts.field("decision_run_id")
        if other_run is not None:
            return self._approval_of_another_run(facts, decision_id, other_run, decided)
        if decided is None:
            return [
                facts.problem(
                    IntegrityCheck.LINKS,
                    "it resolves a decision that is not logged before it",
                )
            ]
        problems: list[RunProblem] = []
        named = facts.field("decision_sha256")
        if named != decided.address:
            problems.append(
                facts.problem(
                    IntegrityCheck.LINKS,
                    f"it names its decision by content address {shown(named)}, but the"
                    f" decision, {decided.label}, has content address {decided.address}",
                )
            )
        if decided.verdict != RuntimeVerdict.PENDING.value:
            verdict = decided.verdict
            said = repr(verdict) if verdict in _VERDICTS else shown(verdict)
            problems.append(
                facts.problem(
                    IntegrityCheck.LINKS,
                    f"it resolves a decision ({decided.label}) whose verdict is {said},"
                    " not 'pending'",
                )
            )
        problems.extend(self._only_approval(facts, decision_id))
        return problems

    def _approval_of_another_run(
        self, facts: RecordFacts, decision_id: str, other_run: object, decided: _Decided | None
    ) -> list[RunProblem]:
        """An approval whose decision is in an earlier run's log: it cannot be in this one."""
        problems: list[RunProblem] = []
        if other_run == self._run_id:
            problems.append(
                facts.problem(
                    IntegrityCheck.LINKS,
                    "its decision_run_id names this run; an approval of a decision of this"
                    " run says null",
                )
            )
        if decided is not None:
            problems.append(
                facts.problem(
                    IntegrityCheck.LINKS,
                    f"it says its decision is in run {shown(other_run)}, but the decision is"
                    f" logged in this run ({decided.label})",
                )
            )
        problems.extend(self._only_approval(facts, decision_id))
        return problems

    def _only_approval(self, facts: RecordFacts, decision_id: str) -> list[RunProblem]:
        first = self._approved.get(decision_id)
        if first is not None:
            return [
                facts.problem(
                    IntegrityCheck.LINKS,
                    f"a second approval for this decision (the first is {first})",
                )
            ]
        self._approved.add(decision_id, facts.label)
        return []

    def finish(self, end: RunEnd) -> Iterable[RunProblem]:
        self._final_open = len(self._open)
        return self._unclaimed(closed=not (end.truncated and not end.sealed))

    def _unclaimed(self, *, closed: bool) -> Iterator[RunProblem]:
        # A generator, not a tuple: a crafted run may leave millions unclaimed.
        if closed:  # a crash can catch an assessment before its decision is written
            for assessment in self._open.values():
                yield assessment.problem(
                    IntegrityCheck.LINKS,
                    "no decision claims this assessment, yet the run was closed: its decision"
                    " was removed",
                )
        self.close()


class PolicyAttachmentCheck:
    """The attachments are the policy sources ``/run`` names, logged at the run's stamp."""

    __slots__ = ("_run",)

    def __init__(self) -> None:
        self._run: RecordFacts | None = None

    def visit(self, facts: RecordFacts) -> Iterable[RunProblem]:
        if facts.position == 0 and facts.topic == RUN_TOPIC:
            self._run = facts
        return ()

    def finish(self, end: RunEnd) -> Iterable[RunProblem]:
        run = self._run
        if run is None or run.record is None:
            return ()  # the run or json check names a missing or unreadable /run
        named = run.field("policy_source_sha256")
        sources = [("policy", "policy_source_sha256", named)]
        shadow = run.field("shadow")
        if isinstance(shadow, dict):  # a shadow candidate's source (ADR 0031)
            sources.append(
                ("shadow policy", "shadow.policy_source_sha256", shadow.get("policy_source_sha256"))
            )
        problems: list[RunProblem] = []
        stamp = run.integer("stamp_ns")
        known = {sha256 for _, _, sha256 in sources}
        for what, field, sha256 in sources:
            if what != "policy" and sha256 == named:
                continue  # the same bytes as the policy's: one attachment serves both
            held = [a for a in end.attachments if a.sha256 == sha256]
            if not held:
                others = [a for a in end.attachments if a.sha256 != sha256]
                stored = "; ".join(_describe(a) for a in others) or "none"
                problems.append(
                    run.problem(
                        IntegrityCheck.ATTACHMENT,
                        f"no attachment holds the {what} source it names ({field}"
                        f" {shown(sha256)}): the {what} attachment was altered or removed"
                        f" (attachments: {stored})",
                    )
                )
            elif len(held) > 1:
                problems.append(
                    run.problem(
                        IntegrityCheck.ATTACHMENT,
                        f"its {what} source is attached {len(held)} times; a sink attaches it once",
                    )
                )
            problems.extend(
                run.problem(
                    IntegrityCheck.ATTACHMENT,
                    f"its {what} attachment has MCAP log_time {a.log_time_ns}, but the run's"
                    f" stamp_ns is {shown(stamp)}",
                )
                for a in held
                if a.log_time_ns != stamp
            )
        if any(a.sha256 == named for a in end.attachments):
            problems.extend(
                RunProblem(
                    IntegrityCheck.ATTACHMENT,
                    f"an attachment that is not the run's policy source ({_describe(a)}):"
                    " a ghost sink attaches only the policy",
                )
                for a in end.attachments
                if a.sha256 not in known
            )
        return problems


def _describe(attachment: LoggedAttachment) -> str:
    name = attachment.name
    clipped = name if len(name) <= _MAX_NAME else name[: _MAX_NAME - 1] + "…"
    # repr() escapes newlines and control characters: a name cannot break the line.
    return f"{clipped!r}, sha256 {attachment.sha256}"
