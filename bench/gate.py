"""Gate benchmarks: the audited decision against its floor, and hostile input against ordinary.

* The audited decision: ``Gate.check`` with the bundled demo policy on small
  arguments, with each sink, as a ratio to the least any auditing layer must do
  per call -- canonical encoding and SHA-256 of the arguments
  (``runtime.value_sha256``).
* Hostile input (issue 5): a full check of a crafted argument of about 1 MB --
  dense near-misses of every detector, just under the default ``max_bytes`` --
  must cost under 100× a check of an ordinary 1 KB argument.
"""

from __future__ import annotations

import functools
import random
import tempfile
from collections.abc import Callable
from pathlib import Path

from analysis._demo import demo_policy_path
from audit import Durability, McapAuditSink, MemoryAuditSink
from bench._harness import Row, Section, interleaved
from runtime import Action, Gate, Policy, value_sha256

__all__ = ["crafted_text", "ordinary_text", "run"]

ACTIONS = [
    Action("support", "query", "db:customers", {"table": "customers", "limit": 500, "where": "x"}),
    Action("researcher", "search", "tool:web_search", {"query": "refund policy best practice"}),
    Action("support", "send", "mail:c", {"to": "a@example.com", "body": "your refund is sent"}),
    Action("support", "refund", "payments:stripe", {"amount": 20, "currency": "EUR"}),
]

# Near-misses: text that starts like a secret of every detector and then is not one.
_NEAR_MISSES = (
    "AKIAIOSFODNN7EXAMPL ",
    "ghp_0123456789abcdefghijklmnopqrstuvwxy ",
    "xoxb-123 ",
    "sk-abcdefghijklmnopqrs ",
    "AIzaSyA-short ",
    "sk_live_short ",
    "-----BEGIN NOT A KEY----- ",
    "eyJhbGciOi.x ",
    "Bearer words ",
    "http://user@host/ ",
    "name@host ",
    "4111 1111 1111 1112 ",
    "GB82 WEST 1234 5698 7654 31 ",
    "+1 23 ",
    "078-05-112 ",
    "1234567890123 ",
)


def crafted_text(size: int, *, seed: int = 5) -> str:
    """About ``size`` characters of dense near-misses, in a random order."""
    rng = random.Random(seed)
    parts: list[str] = []
    total = 0
    while total < size:
        part = rng.choice(_NEAR_MISSES)
        parts.append(part)
        total += len(part)
    return "".join(parts)[:size]


_WORDS = (
    *("the", "customer", "asked", "about", "a", "refund", "for", "order", "2024", "and"),
    *("we", "replied", "on", "monday", "with", "details", "of", "the", "policy", "and"),
    *("the", "invoice", "total", "of", "125", "euros"),
)


def ordinary_text(size: int, *, seed: int = 7) -> str:
    """About ``size`` characters of ordinary prose with a few numbers."""
    words = _WORDS
    rng = random.Random(seed)
    parts: list[str] = []
    total = 0
    while total < size:
        word = rng.choice(words)
        parts.append(word)
        total += len(word) + 1
    return " ".join(parts)[:size]


def run(*, quick: bool = False) -> list[Section]:
    """Measure both sections."""
    rounds, calls = (3, 300) if quick else (7, 2000)
    policy = Policy.from_toml(demo_policy_path())
    sections = []
    with tempfile.TemporaryDirectory() as tmp:
        gates = {
            # validate=False: the memory sink's schema check is a test aid, not the gate.
            "gate + memory sink": Gate(policy, sink=MemoryAuditSink(validate=False)),
        }
        sinks = []
        modes: tuple[Durability, ...] = ("process", "chunk")
        for mode in modes:
            sink = McapAuditSink(Path(tmp) / f"{mode}.mcap", durability=mode)
            sinks.append(sink)
            gates[f"gate + MCAP sink ({mode})"] = Gate(policy, sink=sink)
        counter = iter(range(10**12))

        def cycle(gate: Gate) -> object:
            return gate.check(ACTIONS[next(counter) % len(ACTIONS)])

        candidates: dict[str, Callable[[], object]] = {
            "peer: value_sha256(args)": lambda: value_sha256(ACTIONS[1].args)
        }
        for name, each in gates.items():
            candidates[name] = functools.partial(cycle, each)
        medians = interleaved(candidates, rounds=rounds, calls=calls)
        peer = medians["peer: value_sha256(args)"]
        rows = [
            Row(name, seconds * 1e6, "µs", ratio=seconds / peer)
            for name, seconds in medians.items()
        ]
        sections.append(
            Section(
                "The audited decision",
                "`Gate.check` on the bundled demo policy, four small actions in turn, as a"
                " ratio to canonical encoding + SHA-256 of the arguments (the floor of any"
                " auditing layer). Issue 10 sets the performance targets.",
                tuple(rows),
            )
        )

        gate = Gate(policy, sink=MemoryAuditSink(validate=False))
        small = Action("researcher", "search", "tool:web_search", {"query": ordinary_text(1000)})
        crafted = Action(
            "researcher", "search", "tool:web_search", {"query": crafted_text(1_000_000)}
        )
        verdict = gate.check(crafted).verdict.value
        hostile = interleaved(
            {"1 KB": lambda: gate.check(small), "crafted 1 MB": lambda: gate.check(crafted)},
            rounds=rounds,
            calls=1,
        )
        small_cost = interleaved({"1 KB": lambda: gate.check(small)}, rounds=rounds, calls=200)
        ratio = hostile["crafted 1 MB"] / small_cost["1 KB"]
        sections.append(
            Section(
                "Hostile input: a crafted 1 MB argument against an ordinary 1 KB one",
                "A full `Gate.check` (memory sink) of one argument of about 1,000,000"
                " characters of dense near-misses of every detector, against a check of"
                " 1,000 characters of ordinary text (issue 5).",
                (
                    Row("check, ordinary 1 KB argument", small_cost["1 KB"] * 1e6, "µs"),
                    Row(
                        f"check, crafted 1 MB argument (verdict: {verdict})",
                        hostile["crafted 1 MB"] * 1e6,
                        "µs",
                        ratio=ratio,
                        target="< 100× the 1 KB check",
                        holds=ratio < 100,
                    ),
                ),
            )
        )
        for sink in sinks:
            sink.close()
    return sections
