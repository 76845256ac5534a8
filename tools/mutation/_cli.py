"""``python -m tools.mutation``: mutate the configured modules, score them, keep the page.

Exit codes: 0 every module run is at or above ``--fail-under`` (and, with
``--require-reasons``, every survivor has a hand-kept reason); 1 one is not; 2 the
configuration is wrong or a module's tests fail without any mutant (nothing can be
measured then).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from tools.mutation._config import ConfigError, Target, load_config
from tools.mutation._mutants import Generated, Mutant, generate_mutants
from tools.mutation._report import ModuleResult, parse_reasons, render_doc
from tools.mutation._runner import Outcome, Status, Workspace

__all__ = ["main"]

_DEFAULT_CONFIG = "tools/mutation/modules.toml"
_DEFAULT_DOCS = "docs/mutation.md"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m tools.mutation",
        description="Mutation testing of ghost's contract-critical modules (ADR 0014).",
    )
    parser.add_argument(
        "--root", type=Path, default=Path.cwd(), help="repository root (default: .)"
    )
    parser.add_argument(
        "--config", type=Path, default=None, help=f"targets file (default: {_DEFAULT_CONFIG})"
    )
    parser.add_argument(
        "--module",
        action="append",
        default=[],
        metavar="NAME",
        help="only this module (dotted name, path, or last part such as _glob); repeatable",
    )
    parser.add_argument(
        "--mutant",
        action="append",
        default=[],
        metavar="ID",
        help="only this mutant (an id from the page or --list); repeatable; writes no page",
    )
    parser.add_argument("--sample", type=int, metavar="N", help="run N random mutants per module")
    parser.add_argument("--seed", type=int, default=0, help="seed for --sample (default: 0)")
    parser.add_argument("--jobs", type=int, default=2, help="mutants run at once (default: 2)")
    parser.add_argument(
        "--fail-under", type=float, default=None, metavar="PCT", help="exit 1 if a score is lower"
    )
    parser.add_argument(
        "--require-reasons",
        action="store_true",
        help="exit 1 if a surviving mutant has no hand-kept reason",
    )
    parser.add_argument(
        "--timeout-factor",
        type=float,
        default=3.0,
        help="a mutant's limit is the unmutated run's time times this ... (default: 3)",
    )
    parser.add_argument(
        "--timeout-extra", type=float, default=30.0, help="... plus this many seconds (default: 30)"
    )
    parser.add_argument(
        "--memory-limit-mb",
        type=int,
        default=1024,
        help="data-segment limit of each test run, 0 for none (default: 1024)",
    )
    parser.add_argument("--docs", type=Path, default=None, help=f"page (default: {_DEFAULT_DOCS})")
    parser.add_argument("--no-docs", action="store_true", help="do not write the page")
    parser.add_argument("--json", type=Path, default=None, help="also write the results as JSON")
    parser.add_argument("--list", action="store_true", help="list the mutants; run nothing")
    return parser


def _select(targets: Sequence[Target], names: Sequence[str]) -> list[Target]:
    if not names:
        return list(targets)
    chosen: list[Target] = []
    for name in names:
        found = [
            t for t in targets if name in (t.module, t.path) or t.module.rsplit(".", 1)[-1] == name
        ]
        if not found:
            known = ", ".join(t.module for t in targets)
            raise ConfigError(f"no configured module matches {name!r} (configured: {known})")
        chosen.extend(t for t in found if t not in chosen)
    return chosen


def _sample(mutants: Sequence[Mutant], size: int | None, seed: int) -> list[Mutant]:
    if size is None or size >= len(mutants):
        return list(mutants)
    picked = set(random.Random(seed).sample(sorted(m.id for m in mutants), size))
    return [m for m in mutants if m.id in picked]


def _reasons(docs: Path) -> dict[str, str]:
    if not docs.is_file():
        return {}
    text = docs.read_text(encoding="utf-8")
    _, _, hand_kept = text.partition("<!-- mutation:generated:end -->")
    return parse_reasons(hand_kept or text)


def _print_result(result: ModuleResult, reasons: dict[str, str], fail_under: float | None) -> None:
    needed = f" ({fail_under:g} needed)" if fail_under is not None else ""
    print(
        f"{result.target.module}: {len(result.outcomes)} mutants"
        f"{f' (sample of {result.generated})' if result.sampled else ''}, "
        f"{result.count(Status.KILLED)} killed, {result.count(Status.TIMED_OUT)} timed out, "
        f"{len(result.survivors)} survived: score {result.score:.1f} %{needed}; "
        f"{result.duration_s:.0f} s",
        flush=True,
    )
    for outcome in result.survivors:
        mutant = outcome.mutant
        known = "" if reasons.get(mutant.id) else "  [no reason recorded]"
        where = f"line {mutant.line} {mutant.operator}"
        print(f"  survived {mutant.id} {where}: {mutant.description}{known}")


def _outcome_json(outcome: Outcome) -> dict[str, object]:
    mutant = outcome.mutant
    return {
        "id": mutant.id,
        "line": mutant.line,
        "operator": mutant.operator,
        "description": mutant.description,
        "status": str(outcome.status),
        "exit_code": outcome.exit_code,
        "duration_s": round(outcome.duration_s, 2),
        "diff": mutant.diff,
    }


def _json(results: Sequence[ModuleResult]) -> str:
    modules = [
        {
            "module": r.target.module,
            "path": r.target.path,
            "tests": list(r.target.tests),
            "generated": r.generated,
            "run": len(r.outcomes),
            "sampled": r.sampled,
            "killed": r.count(Status.KILLED),
            "timed_out": r.count(Status.TIMED_OUT),
            "survived": len(r.survivors),
            "score": round(r.score, 2),
            "baseline_s": round(r.baseline_s, 2),
            "timeout_s": round(r.timeout_s, 2),
            "duration_s": round(r.duration_s, 2),
            "mutants": [_outcome_json(o) for o in r.outcomes],
        }
        for r in results
    ]
    return json.dumps({"modules": modules}, indent=2) + "\n"


def _run_module(
    workspace: Workspace,
    target: Target,
    generated: Generated,
    chosen: list[Mutant],
    args: argparse.Namespace,
) -> ModuleResult | None:
    started = time.perf_counter()
    baseline = workspace.baseline(target)
    if not baseline.passed:
        print(f"{target.module}: its tests fail without any mutant; not run.\n{baseline.output}")
        return None
    timeout_s = baseline.duration_s * args.timeout_factor + args.timeout_extra
    print(
        f"{target.module}: {len(chosen)} mutants; unmutated tests {baseline.duration_s:.1f} s, "
        f"limit {timeout_s:.0f} s per mutant, {args.jobs} at once",
        flush=True,
    )
    lock = threading.Lock()
    done = [0]
    step = max(1, len(chosen) // 10)

    def progress(outcome: Outcome) -> None:
        with lock:
            done[0] += 1
            if done[0] % step == 0 or done[0] == len(chosen):
                elapsed = time.perf_counter() - started
                print(f"  {done[0]}/{len(chosen)} ({elapsed:.0f} s)", flush=True)

    outcomes = workspace.run(target, chosen, timeout_s, on_result=progress)
    return ModuleResult(
        target=target,
        generated=len(generated.mutants),
        all_ids=frozenset(m.id for m in generated.mutants),
        outcomes=tuple(outcomes),
        sampled=len(chosen) < len(generated.mutants),
        unspliceable=generated.unspliceable,
        baseline_s=baseline.duration_s,
        timeout_s=timeout_s,
        duration_s=time.perf_counter() - started,
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Run the tool; returns the exit code (see the module docstring)."""
    args = _parser().parse_args(argv)
    root: Path = args.root.resolve()
    config_path = args.config or root / _DEFAULT_CONFIG
    docs = args.docs or root / _DEFAULT_DOCS
    if args.jobs < 1 or (args.sample is not None and args.sample < 1) or args.memory_limit_mb < 0:
        print(
            "--jobs and --sample must be at least 1, --memory-limit-mb 0 or more", file=sys.stderr
        )
        return 2
    try:
        config = load_config(config_path, root)
        targets = _select(config.targets, args.module)
        plans: list[tuple[Target, Generated, list[Mutant]]] = []
        for target in targets:
            source = (root / target.path).read_text(encoding="utf-8")
            generated = generate_mutants(
                source, target.module, mutate_logging=target.mutate_logging
            )
            if generated.unspliceable:
                print(f"{target.module}: {generated.unspliceable} mutants could not be spliced")
            chosen = _sample(generated.mutants, args.sample, args.seed)
            if args.mutant:
                chosen = [m for m in chosen if m.id in set(args.mutant)]
            plans.append((target, generated, chosen))
        unknown = set(args.mutant) - {m.id for _, g, _ in plans for m in g.mutants}
        if unknown:
            raise ConfigError(
                f"no such mutant in the modules selected: {', '.join(sorted(unknown))}"
            )
        if args.mutant:
            plans = [plan for plan in plans if plan[2]]
    except (ConfigError, SyntaxError, OSError) as exc:
        print(f"mutation: {exc}", file=sys.stderr)
        return 2
    if args.list:
        for _, _, chosen in plans:
            for m in chosen:
                print(f"{m.id}\tline {m.line}\t{m.operator}\t{m.description}")
        return 0
    reasons = _reasons(docs)
    results: list[ModuleResult] = []
    broken = False
    with Workspace(root, config.src, args.jobs, memory_limit_mb=args.memory_limit_mb) as workspace:
        for target, generated, chosen in plans:
            result = _run_module(workspace, target, generated, chosen, args)
            if result is None:
                broken = True
                continue
            results.append(result)
            _print_result(result, reasons, args.fail_under)
    full = [r for r in results if not r.sampled]
    if full and not args.no_docs:
        existing = docs.read_text(encoding="utf-8") if docs.is_file() else None
        page, warnings = render_doc(existing, full, config.targets)
        docs.parent.mkdir(parents=True, exist_ok=True)
        docs.write_text(page, encoding="utf-8")
        print(f"wrote {docs}")
        for warning in warnings:
            print(f"  {warning}")
    if args.json is not None:
        args.json.write_text(_json(results), encoding="utf-8")
    if broken:
        return 2
    failed = False
    if args.fail_under is not None:
        low = [r for r in results if r.score < args.fail_under]
        for r in low:
            print(f"FAIL {r.target.module}: {r.score:.1f} % < {args.fail_under:g} %")
        failed = bool(low)
    if args.require_reasons:
        unexplained = [o for r in results for o in r.survivors if not reasons.get(o.mutant.id)]
        if unexplained:
            print(f"FAIL {len(unexplained)} surviving mutants have no hand-kept reason")
            failed = True
    return 1 if failed else 0
