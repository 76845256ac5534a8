"""Which rules can match an action: an index by verb and by resource prefix (issue 10, P6).

A check asks only the rules that can match it, in file order. Two cheap facts
rule the rest out before any glob or condition runs:

* the **verb**: a rule whose verbs are all literals cannot match another verb;
* the **resource prefix**: every resource glob starts with a literal run (up to
  its first ``*`` or ``?``), less the ``/`` before a ``**`` segment there,
  because ``**`` also matches no segment at all (``file:/data/**`` matches
  ``file:/data``).
  A canonical resource that does not start with one of a rule's prefixes
  cannot match that rule. A rule with an empty prefix (``**``, ``*x``) is a
  candidate for every resource: '' is the prefix of everything.

Candidates are bit sets (Python ints, bit *i* for rule *i*): the verb's set and
the union of the resource's prefix buckets are intersected in one ``&``, and
the surviving bits are read lowest first, which is file order. A lookup costs
one dict probe per distinct prefix length in the policy, not one test per rule.
The candidates are a superset of the matches, never fewer: a test holds the
index to a scan of every rule over random policies and resources.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence
from typing import Final

from runtime._rule import Rule

__all__ = ["RuleIndex", "resource_prefix"]

_WILDCARDS: Final = ("*", "?")
_MAX_CACHED: Final = 4096


def resource_prefix(glob: str) -> str:
    """The literal text every resource this glob matches starts with ('' for any).

    ``glob`` is a valid resource glob (`runtime._glob`): a ``**`` is a whole
    segment, so the text before it is empty or ends with ``/``.
    """
    found = [at for at in map(glob.find, _WILDCARDS) if at >= 0]
    if not found:
        return glob  # a literal matches only itself
    cut = min(found)
    if glob.startswith("**", cut):
        # A `**` segment may match no segment at all, taking its `/` with it.
        return glob[: max(0, cut - 1)]
    return glob[:cut]


class RuleIndex:
    """The rules of a policy, indexed by literal verb and by resource prefix."""

    __slots__ = (
        "_buckets",
        "_by_verb",
        "_chosen",
        "_lengths",
        "_rules",
        "_verb_rules",
        "_wild_verb",
        "_wild_verb_rules",
    )

    def __init__(self, rules: Sequence[Rule]) -> None:
        self._rules = tuple(rules)
        wild_verb = 0
        by_verb: dict[str, int] = {}
        # Prefix -> rules; a rule for any resource is under '', the prefix of everything.
        buckets: dict[str, int] = {}
        for index, rule in enumerate(self._rules):
            bit = 1 << index
            verbs = rule.verb_literals
            if verbs is None:
                wild_verb |= bit
            else:
                for verb in verbs:
                    by_verb[verb] = by_verb.get(verb, 0) | bit
            for prefix in {resource_prefix(glob) for glob in rule.resources}:
                buckets[prefix] = buckets.get(prefix, 0) | bit
        self._wild_verb = wild_verb
        self._by_verb = {verb: bits | wild_verb for verb, bits in by_verb.items()}
        self._buckets = buckets
        self._lengths = tuple(sorted({len(prefix) for prefix in buckets}))
        self._verb_rules = {verb: self._rules_of(bits) for verb, bits in self._by_verb.items()}
        self._wild_verb_rules = self._rules_of(wild_verb)
        # Candidate tuples by bit set, built once each: the sets a policy can yield are
        # few (a verb's set and the buckets along one resource's prefixes), but bounded
        # here all the same, since verbs and resources come from the agent.
        self._chosen: dict[int, tuple[Rule, ...]] = {}

    def for_verb(self, verb: str) -> tuple[Rule, ...]:
        """The rules that may match ``verb``, in file order."""
        return self._verb_rules.get(verb, self._wild_verb_rules)

    def candidates(self, verb: str, resource: str) -> tuple[Rule, ...]:
        """The rules that may match ``verb`` on the canonical ``resource``, in file order."""
        reach = 0
        buckets = self._buckets
        lengths = self._lengths
        for length in lengths[: bisect_right(lengths, len(resource))]:
            bucket = buckets.get(resource[:length])
            if bucket is not None:
                reach |= bucket
        bits = self._by_verb.get(verb, self._wild_verb) & reach
        chosen = self._chosen.get(bits)
        if chosen is None:
            if len(self._chosen) >= _MAX_CACHED:
                self._chosen.clear()
            chosen = self._chosen[bits] = self._rules_of(bits)
        return chosen

    def _rules_of(self, bits: int) -> tuple[Rule, ...]:
        rules = self._rules
        chosen: list[Rule] = []
        while bits:
            low = bits & -bits
            chosen.append(rules[low.bit_length() - 1])
            bits ^= low
        return tuple(chosen)
