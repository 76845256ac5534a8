"""Results per module, and the ``docs/mutation.md`` page that keeps them with their reasons.

The page has three parts:

1. a preamble, written once and then left alone;
2. a generated section between ``<!-- mutation:generated:begin -->`` and
   ``<!-- mutation:generated:end -->``: the score table and, per module, one block with
   its surviving mutants (id, line, operator, diff) and the reasons that no longer match
   a survivor. A run rewrites the blocks of the modules it ran (a sampled run writes
   nothing) and keeps the others;
3. a hand-kept section after it, never rewritten: one entry per survivor, starting a
   line as ``- `<mutant id>`: <reason>`` (continuation lines indented). An entry whose
   mutant no longer exists, or is now killed, is flagged in the generated part.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from tools.mutation._config import Target
from tools.mutation._runner import Outcome, Status

__all__ = ["ModuleResult", "parse_reasons", "render_doc"]

BEGIN = "<!-- mutation:generated:begin -->"
END = "<!-- mutation:generated:end -->"
_BLOCK = re.compile(
    r"^### `[^`\n]+`\n<!-- module (?P<name>\S+) (?P<attrs>[^>]*) -->\n"
    r".*?^<!-- /module (?P=name) -->\n",
    re.MULTILINE | re.DOTALL,
)
_ATTR = re.compile(r"(\w+)=(\d+)")
_ENTRY = re.compile(r"^- `(?P<id>[^`\s]+)`[ \t]*(?::|--|\u2014)?[ \t]*(?P<reason>.*)$")

_PREAMBLE = """# Mutation testing

`make mutation` mutates the contract-critical modules listed in
`tools/mutation/modules.toml` and runs each module's tests against every mutant
(ADR 0014 says which operators, what is skipped and what counts as killed). Each
module must score at least 90 %, and every mutant that survives is explained in the
hand-kept section at the end: equivalent (no test can tell it from the original, and
why), or pinned by a test since (then delete the entry).

The section between the markers is written by `python -m tools.mutation`; do not
edit it by hand.

"""

_HAND_KEPT = """## Why these mutants survive (hand-kept)

One entry per surviving mutant. An entry starts a line with the mutant's id in
backticks and a colon, then the reason; continue it on lines indented by two
spaces. The tool reads the ids, keeps this section as written, and flags
entries whose mutant is gone or now killed. For example:

    - `runtime._glob:_glob_regex:0123abcd`: equivalent -- `index >= 0` and
      `index > 0` differ only at index 0, which the `**` branch above consumes.

"""


@dataclass(frozen=True, slots=True)
class ModuleResult:
    """The mutation run of one module.

    Attributes:
        target: the module and its tests.
        generated: how many mutants the module has.
        all_ids: all their ids (to tell a stale reason from one for an unrun mutant).
        outcomes: the mutants run (all of them, or a sample) and what became of them.
        sampled: whether ``outcomes`` is a sample.
        unspliceable: mutants dropped because no splice gave the intended tree.
        baseline_s: the unmutated run's duration.
        timeout_s: the limit per mutant.
        duration_s: the whole module's wall time.
    """

    target: Target
    generated: int
    all_ids: frozenset[str]
    outcomes: tuple[Outcome, ...]
    sampled: bool
    unspliceable: int
    baseline_s: float
    timeout_s: float
    duration_s: float

    def count(self, status: Status) -> int:
        """How many mutants ended with ``status``."""
        return sum(1 for o in self.outcomes if o.status is status)

    @property
    def score(self) -> float:
        """Killed (timeouts included) as a percentage of the mutants run; 100 with none."""
        if not self.outcomes:
            return 100.0
        caught = self.count(Status.KILLED) + self.count(Status.TIMED_OUT)
        return 100.0 * caught / len(self.outcomes)

    @property
    def survivors(self) -> list[Outcome]:
        """The surviving mutants, in source order."""
        return [o for o in self.outcomes if o.status is Status.SURVIVED]


def parse_reasons(hand_kept: str) -> dict[str, str]:
    """The reasons in the hand-kept section, by mutant id (empty reasons included as "")."""
    reasons: dict[str, str] = {}
    current: str | None = None
    for line in hand_kept.splitlines():
        match = _ENTRY.match(line)
        if match:
            current = match["id"]
            reasons[current] = match["reason"].strip()
        elif current is not None and line.startswith((" ", "\t")) and line.strip():
            reasons[current] = f"{reasons[current]} {line.strip()}".strip()
        else:
            current = None
    return reasons


def _split(existing: str | None) -> tuple[str, str, str]:
    if existing is None or BEGIN not in existing or END not in existing:
        return _PREAMBLE, "", _HAND_KEPT if existing is None else existing
    before, rest = existing.split(BEGIN, 1)
    generated, after = rest.split(END, 1)
    return before, generated, after.lstrip("\n")


def _score(killed: int, timed_out: int, total: int) -> str:
    return "100.0 %" if total == 0 else f"{100.0 * (killed + timed_out) / total:.1f} %"


def _block(result: ModuleResult, reasons: Mapping[str, str]) -> str:
    name = result.target.module
    killed, timed_out = result.count(Status.KILLED), result.count(Status.TIMED_OUT)
    survivors = result.survivors
    total = len(result.outcomes)
    lines = [
        f"### `{name}`",
        (
            f"<!-- module {name} mutants={total} killed={killed} timed_out={timed_out} "
            f"survived={len(survivors)} -->"
        ),
        "",
        f"`{result.target.path}`, tests: {', '.join(f'`{t}`' for t in result.target.tests)}.",
        (
            f"Score {_score(killed, timed_out, total)}: {total} mutants, {killed} killed, "
            f"{timed_out} timed out, {len(survivors)} survived."
        ),
        "",
    ]
    for outcome in survivors:
        mutant = outcome.mutant
        reason = reasons.get(mutant.id)
        note = "reason below" if reason else "**no reason recorded**"
        lines.append(
            f"- `{mutant.id}` -- line {mutant.line}, {mutant.operator}, "
            f"{mutant.description} -- {note}"
        )
        lines.append("")
        lines.append("  ```diff")
        lines.extend(f"  {diff_line}" for diff_line in mutant.diff.splitlines())
        lines.append("  ```")
        lines.append("")
    surviving = {o.mutant.id for o in survivors}
    stale = [
        (mutant_id, "no such mutant any more: re-check the code, then update or delete it")
        if mutant_id not in result.all_ids
        else (mutant_id, "this mutant is killed now: delete the entry")
        for mutant_id in sorted(reasons)
        if mutant_id.startswith(name + ":") and mutant_id not in surviving
    ]
    if stale:
        lines.append("Hand-kept entries that match no surviving mutant:")
        lines.append("")
        lines.extend(f"- `{mutant_id}` -- {why}" for mutant_id, why in stale)
        lines.append("")
    lines.append(f"<!-- /module {name} -->")
    return "\n".join(lines) + "\n"


def render_doc(
    existing: str | None, results: Iterable[ModuleResult], configured: Sequence[Target]
) -> tuple[str, list[str]]:
    """The new page: fresh blocks for ``results``, the other modules' blocks kept.

    Args:
        existing: the current page, or None when there is none.
        results: the modules just run in full (sampled results must not be passed).
        configured: every configured module, in order (for the table, and to drop
            the blocks of modules no longer configured).

    Returns:
        The page, and the warnings to print (unexplained survivors, stale entries).
    """
    preamble, generated, hand_kept = _split(existing)
    reasons = parse_reasons(hand_kept)
    blocks: dict[str, str] = {m["name"]: m[0] for m in _BLOCK.finditer(generated)}
    counts: dict[str, dict[str, int]] = {
        m["name"]: {k: int(v) for k, v in _ATTR.findall(m["attrs"])}
        for m in _BLOCK.finditer(generated)
    }
    warnings: list[str] = []
    for result in results:
        if result.sampled:
            raise ValueError("a sampled run is not written to the page")
        name = result.target.module
        blocks[name] = _block(result, reasons)
        counts[name] = {
            "mutants": len(result.outcomes),
            "killed": result.count(Status.KILLED),
            "timed_out": result.count(Status.TIMED_OUT),
            "survived": len(result.survivors),
        }
        surviving = {o.mutant.id for o in result.survivors}
        warnings.extend(
            f"{o.mutant.id}: survived, no reason recorded"
            for o in result.survivors
            if not reasons.get(o.mutant.id)
        )
        warnings.extend(
            f"{mutant_id}: hand-kept reason matches no surviving mutant"
            for mutant_id in sorted(reasons)
            if mutant_id.startswith(name + ":") and mutant_id not in surviving
        )
    names = [t.module for t in configured]
    table = [
        "## Scores",
        "",
        "| module | mutants | killed | timed out | survived | score |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name in names:
        c = counts.get(name)
        if c is None:
            table.append(f"| `{name}` | not run yet | | | | |")
            continue
        score = _score(c.get("killed", 0), c.get("timed_out", 0), c.get("mutants", 0))
        table.append(
            f"| `{name}` | {c.get('mutants', 0)} | {c.get('killed', 0)} | "
            f"{c.get('timed_out', 0)} | {c.get('survived', 0)} | {score} |"
        )
    parts = ["\n".join(table) + "\n", "## Survivors\n"]
    parts.extend(blocks[name] for name in names if name in blocks)
    unconfigured = sorted(
        mutant_id for mutant_id in reasons if mutant_id.split(":", 1)[0] not in names
    )
    if unconfigured:
        parts.append(
            "Hand-kept entries for modules that are not configured:\n\n"
            + "".join(f"- `{mutant_id}`\n" for mutant_id in unconfigured)
        )
        warnings.extend(f"{i}: hand-kept reason for an unconfigured module" for i in unconfigured)
    body = "\n".join(parts)
    page = f"{preamble.rstrip()}\n\n{BEGIN}\n{body}\n{END}\n\n{hand_kept.rstrip()}\n"
    return page, warnings
