"""Shadow mode's cost (issue 11, ADR 0031): an audited decision with a shadow, against one without.

Each gate checks the same four small actions of `bench.gate` in turn, on the
bundled demo policy, into an MCAP sink in the default ``process`` mode (a
real audited decision, written and flushed), all in the same interleaved
rounds. The peer is the same gate without a shadow; the rows are that gate
with the demo policy as a TOML candidate (``Gate(shadow=...)``, a second full
derivation), with one shadow rule in the enforced policy (a second matching
over the policy's rules), and with the demo policy in Cedar as the candidate
(when ``cedarpy`` is installed). A shadow costs one more derivation, its
scrub included, and the assessment's bigger record.
"""

from __future__ import annotations

import contextlib
import functools
import tempfile
import tomllib
from collections.abc import Callable
from pathlib import Path

from analysis._demo import demo_cedar_policy, demo_policy_path
from audit import McapAuditSink
from bench._harness import Row, Section, interleaved
from bench.gate import ACTIONS
from runtime import Gate, Policy, PolicyBackend, PolicyError

__all__ = ["run"]

_PEER = "gate, no shadow (peer)"


def _with_shadow_rule() -> Policy:
    """The demo policy plus one shadow deny rule that the benchmark's actions reach."""
    with demo_policy_path().open("rb") as handle:
        data = tomllib.load(handle)
    shadow = {"id": "shadow-no-mail", "verbs": ["send"], "effect": "deny", "shadow": True}
    return Policy.from_dict({**data, "rules": [*data["rules"], shadow]})


def run(*, quick: bool = False) -> list[Section]:
    """Measure the one section."""
    rounds, calls = (3, 300) if quick else (7, 2000)
    policy = Policy.from_toml(demo_policy_path())
    setups: dict[str, tuple[PolicyBackend, PolicyBackend | None]] = {
        _PEER: (policy, None),
        "gate + TOML candidate (the demo policy)": (policy, Policy.from_toml(demo_policy_path())),
        "gate + one shadow rule in the policy": (_with_shadow_rule(), None),
    }
    with contextlib.suppress(PolicyError):  # without cedarpy, the Cedar row is left out
        setups["gate + Cedar candidate (the demo policy in Cedar)"] = (policy, demo_cedar_policy())
    with tempfile.TemporaryDirectory() as tmp:
        sinks = []
        candidates: dict[str, Callable[[], object]] = {}
        counter = iter(range(10**12))

        def cycle(gate: Gate) -> object:
            return gate.check(ACTIONS[next(counter) % len(ACTIONS)])

        for index, (name, (enforced, shadow)) in enumerate(setups.items()):
            sink = McapAuditSink(Path(tmp) / f"{index}.mcap")
            sinks.append(sink)
            candidates[name] = functools.partial(cycle, Gate(enforced, sink=sink, shadow=shadow))
        medians = interleaved(candidates, rounds=rounds, calls=calls)
        for sink in sinks:
            sink.close()
    peer = medians[_PEER]
    rows = tuple(
        Row(name, seconds * 1e6, "µs", ratio=seconds / peer) for name, seconds in medians.items()
    )
    return [
        Section(
            "Shadow mode: an audited decision with a shadow against one without",
            "`Gate.check` on the bundled demo policy, four small actions in turn, MCAP sink"
            " (`process` mode), as a ratio to the same gate without a shadow, in the same"
            " interleaved rounds (issue 11; ADR 0031).",
            rows,
        )
    ]
