"""Scrubber throughput: ordinary text against adversarial input, at the default budget.

`measure()` returns result rows; `summary(rows)` the figures the targets are
stated in (issue 5; ADR 0010):

* the scrubber's worst MB/s on adversarial input at the default ``max_bytes``
  (1 MiB) must be at least a third of its MB/s on ordinary text;
* so that a gate check of a crafted 1 MiB argument costs under 100x a 1 KB one,
  the scrubber must finish (or refuse) crafted 1 MiB in a few milliseconds.

Two readings, both reported:

* *at the default budget*: inputs of 7/8 MiB to just under 1 MiB, MB/s = input
  bytes (the JSON size, for structures) per CPU second -- the target's wording;
* *any size*: inputs from 1/16 MiB up; a small input dense with candidates
  spends the whole budget on them (or is refused when it runs out), so the
  figure that bounds a check is the slowest time of any input, against the
  time of 1 MiB of ordinary text ("budget MB/s" = 1 MiB / slowest time).

A refused input (``ScrubLimitExceeded``) is timed until the refusal: that is
the time a check spends on it. Times are CPU seconds, the best of a few
repetitions. Run on its own with ``python bench/scrub.py``.
"""

from __future__ import annotations

import json
import random
import string
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from runtime import Scrubber, ScrubLimitExceeded

MIB = 1 << 20
REPEATS = 7
AT_BUDGET = (7 * MIB // 8, 15 * MIB // 16, MIB - 1024)
ANY_SIZE = (MIB // 16, MIB // 8, MIB // 4, MIB // 2, 3 * MIB // 4, *AT_BUDGET)


@dataclass(frozen=True, slots=True)
class Row:
    """One measurement.

    Attributes:
        family: what was scrubbed.
        kind: ``"ordinary"``, ``"at budget"`` (adversarial, sized to the default
            budget) or ``"any size"`` (adversarial, its slowest size).
        size: input bytes (JSON size for structures).
        seconds: best CPU time of `REPEATS` runs.
        outcome: ``"N findings"`` or ``"refused (<bound>)"``.
    """

    family: str
    kind: str
    size: int
    seconds: float
    outcome: str

    @property
    def mb_per_s(self) -> float:
        """Throughput in MB/s (10**6 bytes)."""
        return self.size / self.seconds / 1e6


def _words(rng: random.Random) -> list[str]:
    letters = string.ascii_lowercase
    return ["".join(rng.choice(letters) for _ in range(rng.randint(2, 9))) for _ in range(3000)]


def _prose(size: int, rng: random.Random) -> str:
    words = _words(rng)
    out: list[str] = []
    total = 0
    while total < size:
        word = rng.choice(words)
        roll = rng.random()
        if roll < 0.05:
            word = word.capitalize()
        elif roll < 0.08:
            word = str(rng.randint(0, 100_000))
        elif roll < 0.10:
            word += rng.choice(",.;:")
        out.append(word)
        total += len(word) + 1
    return " ".join(out)[:size]


def _json_text(size: int, rng: random.Random) -> str:
    words = _words(rng)
    rows: list[str] = []
    total = 0
    while total < size:
        row = {
            "id": rng.randint(1, 10**9),
            "name": rng.choice(words),
            "url": f"https://example.com/{rng.choice(words)}?page={rng.randint(1, 99)}",
            "ts": "2024-01-15T10:30:00Z",
            "score": rng.random(),
            "sha256": f"{rng.getrandbits(256):064x}",
        }
        text = json.dumps(row)
        rows.append(text)
        total += len(text) + 1
    return ("[" + ",".join(rows) + "]")[:size]


def _repeat(unit: str) -> Callable[[int], str]:
    return lambda size: (unit * (size // len(unit) + 1))[:size]


ORDINARY: dict[str, Callable[[int, random.Random], Any]] = {
    "prose": _prose,
    "JSON text": _json_text,
}

ADVERSARIAL: dict[str, Callable[[int], Any]] = {
    "letters": _repeat("a"),
    "digits": _repeat("1"),
    "prefix runs AKIA": _repeat("AKIA"),
    "prefix runs sk-": _repeat("sk-"),
    "prefix runs eyJ": _repeat("eyJ"),
    "prefix runs -----BEGIN": _repeat("-----BEGIN "),
    "url prefixes x://a:": _repeat("x://a:"),
    "at signs a@": _repeat("a@"),
    "dense emails": _repeat("a@b.co "),
    "dense bearer tokens": _repeat("Bearer abcdefgh1 "),
    "bearer words": _repeat("bearer "),
    "basic words": _repeat("basic "),
    "near-miss cards (Luhn)": _repeat("4111111111111112 "),
    "dense cards": _repeat("4111111111111111 "),
    "near-miss IBANs (mod 97)": _repeat("DE89370400440532013001 "),
    "IBAN group prefixes": _repeat("GB82 "),
    "dense phone numbers": _repeat("+14155552671 "),
    "dense SSNs": _repeat("219-09-9999 "),
    "pem headers": _repeat("-----BEGIN RSA PRIVATE KEY-----"),
    "glued secrets": _repeat("AKIAIOSFODNN7EXAMPLE,4111111111111111;bob@x.com|"),
    "random printable": lambda size: "".join(
        random.Random(size).choice(string.printable) for _ in range(size)
    ),
    "many strings": lambda size: ["w" + str(i) for i in range(size // 8)],
    "many ints": lambda size: list(range(size // 8)),
    "many keys": lambda size: {f"k{i}": i for i in range(size // 12)},
    "deep and wide": lambda size: [[[[[[i]]]]] for i in range(size // 14)],
}


def _size(value: Any) -> int:
    if isinstance(value, str):
        return len(value.encode())
    return len(json.dumps(value))


def _time(scrubber: Scrubber, value: Any) -> tuple[float, str]:
    best = float("inf")
    outcome = ""
    for _ in range(REPEATS):
        started = time.process_time()
        try:
            result = scrubber.scrub(value)
            outcome = f"{len(result.findings)} findings"
        except ScrubLimitExceeded as exc:
            outcome = f"refused ({exc.bound})"
        best = min(best, time.process_time() - started)
    return max(best, 1e-9), outcome


def _worst(scrubber: Scrubber, name: str, sizes: tuple[int, ...], kind: str) -> Row:
    worst: Row | None = None
    for size in sizes:
        value = ADVERSARIAL[name](size)
        seconds, outcome = _time(scrubber, value)
        row = Row(name, kind, _size(value), seconds, outcome)
        slower = worst is None or (
            row.seconds > worst.seconds if kind == "any size" else row.mb_per_s < worst.mb_per_s
        )
        if slower:
            worst = row
    assert worst is not None
    return worst


def measure() -> list[Row]:
    """Measure ordinary and adversarial families with a default `Scrubber`.

    Returns:
        One row per ordinary family (7/8 MiB), and per adversarial family its
        slowest row at the default budget (by MB/s) and at any size (by time).
    """
    scrubber = Scrubber(fingerprint_key=b"bench-key" * 4)
    rows: list[Row] = []
    for name, make in ORDINARY.items():
        value = make(7 * MIB // 8, random.Random(7))
        seconds, outcome = _time(scrubber, value)
        rows.append(Row(name, "ordinary", _size(value), seconds, outcome))
    for name in ADVERSARIAL:
        rows.append(_worst(scrubber, name, AT_BUDGET, "at budget"))
        rows.append(_worst(scrubber, name, ANY_SIZE, "any size"))
    return rows


def small_and_crafted() -> tuple[float, float]:
    """CPU seconds to scrub a typical 1 KB argument set, and the slowest crafted 1 MiB one."""
    scrubber = Scrubber(fingerprint_key=b"bench-key" * 4)
    small = {
        "to": "alice@example.com",
        "subject": "Quarterly report",
        "body": "Hi team, please find the numbers attached. " * 20,
        "cc": ["bob@example.org"],
        "priority": 3,
        "tags": ["q3", "finance", "report"],
        "meta": {"thread": "abc-123", "reply": False},
    }
    calls = 2000
    best = float("inf")
    for _ in range(REPEATS):
        started = time.process_time()
        for _ in range(calls):
            scrubber.scrub(small)
        best = min(best, (time.process_time() - started) / calls)
    crafted = 0.0
    for build in ADVERSARIAL.values():
        for size in AT_BUDGET:
            crafted = max(crafted, _time(scrubber, build(size))[0])
    return best, crafted


def _needed(value: Any) -> int:
    """The smallest ``max_bytes`` that scrubs ``value`` (bisection over the public API)."""
    low, high = 0, 1 << 30
    while low < high:
        middle = (low + high) // 2
        try:
            Scrubber(fingerprint_key=b"bench-key", max_bytes=middle).scrub(value)
        except ScrubLimitExceeded:
            low = middle + 1
        else:
            high = middle
    return low


def ordinary_payloads() -> list[tuple[str, int, int]]:
    """Realistic arguments and the budget they need: (what, JSON bytes, budget bytes).

    The default budget (1 MiB) is meant to refuse adversarial input, never these.
    """
    rng = random.Random(3)
    payloads: dict[str, Any] = {
        "mail tool call, 2 addresses (1 KB)": {
            "to": "alice@example.com",
            "cc": ["bob@example.org"],
            "subject": "Quarterly report",
            "body": "Hi team, please find the numbers attached. " * 20,
        },
        "document, 5 PII items (20 KB)": {
            "title": "Incident 4711",
            "text": _prose(20_000, rng)
            + " mail alice@example.com or +44 20 7946 0958; card 4111 1111 1111 1111;"
            " IBAN DE89370400440532013000; ssn 219-09-9999",
        },
        "table of 100 rows x 5 fields (8 KB)": {
            "rows": [
                {"id": i, "name": f"item {i}", "price": i * 1.5, "ok": True, "tags": ["a", "b"]}
                for i in range(100)
            ]
        },
        "log excerpt with 20 findings (200 KB)": {
            "log": "\n".join(
                f"{_prose(1000, rng)} user{i}@example.com" if i % 10 == 0 else _prose(1000, rng)
                for i in range(200)
            )
        },
    }
    return [(name, _size(value), _needed(value)) for name, value in payloads.items()]


def summary(rows: list[Row]) -> dict[str, float]:
    """The target figures.

    Returns:
        ``ordinary_mb_s`` (the slower ordinary family), ``at_budget_mb_s`` (the
        worst adversarial input sized to the budget) and its ``ratio`` to ordinary;
        ``budget_mb_s`` (1 MiB over the slowest adversarial time at any size) and
        ``budget_ratio``, the same against ordinary.
    """
    ordinary = [row for row in rows if row.kind == "ordinary"]
    ordinary_mb_s = min(row.mb_per_s for row in ordinary)
    at_budget = min(row.mb_per_s for row in rows if row.kind == "at budget")
    slowest = max(row.seconds for row in rows if row.kind == "any size")
    budget_mb_s = MIB / slowest / 1e6
    return {
        "ordinary_mb_s": ordinary_mb_s,
        "at_budget_mb_s": at_budget,
        "ratio": at_budget / ordinary_mb_s,
        "budget_mb_s": budget_mb_s,
        "budget_ratio": budget_mb_s / ordinary_mb_s,
    }


def main() -> None:
    """Print the rows and the summary as Markdown."""
    rows = measure()
    out = ["| family | kind | bytes | ms | MB/s | outcome |", "|---|---|---:|---:|---:|---|"]
    out += [
        f"| {r.family} | {r.kind} | {r.size} | {r.seconds * 1e3:.2f} | {r.mb_per_s:.0f}"
        f" | {r.outcome} |"
        for r in rows
    ]
    figures = summary(rows)
    small, crafted = small_and_crafted()
    out += [
        "",
        (
            f"ordinary: {figures['ordinary_mb_s']:.0f} MB/s; worst adversarial at the budget:"
            f" {figures['at_budget_mb_s']:.0f} MB/s (ratio {figures['ratio']:.2f}, target >= 0.33);"
            f" any size: {figures['budget_mb_s']:.0f} budget MB/s"
            f" (ratio {figures['budget_ratio']:.2f})"
        ),
        (
            f"scrub of a 1 KB argument set: {small * 1e6:.1f} µs;"
            f" slowest crafted ~1 MiB: {crafted * 1e3:.2f} ms ({crafted / small:.0f}x)"
        ),
        "",
        "| ordinary payload | JSON bytes | budget needed | share of 1 MiB |",
        "|---|---:|---:|---:|",
    ]
    out += [
        f"| {name} | {size} | {needed} | {needed / MIB:.1%} |"
        for name, size, needed in ordinary_payloads()
    ]
    sys.stdout.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
