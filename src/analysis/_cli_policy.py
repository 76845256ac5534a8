"""``ghost policy check | explain | replay``: trust a policy before it gates anything (ADR 0033).

::

    ghost policy check FILE [--schema CEDAR_SCHEMA] [--json]
    ghost policy explain FILE --agent A --verb V --resource R [--args JSON] [--json]
    ghost policy replay --mcap RUN [--policy NEW | --policy attached] [--json]

``check`` prints every problem of a TOML, JSON or Cedar policy, one line each
(``policy.toml:12: rule "refunds": narrow.clamp.limit: ...``). ``explain``
prints what the gate would decide on one action and every rule that matched
or nearly matched, and why; it writes no log, and prints the arguments only
as scrubbed by every detector. ``replay`` decides every recorded decision of
a run again under NEW (`analysis._replay`), or under the run's own attached
policy: the coherence check.

Every text printed that came from a file or the command line — names, rule
ids, reasons — is scrubbed by every detector and made printable first.

Exit codes: 0 done (``check``: no problem; ``replay`` under NEW: the table was
printed, whatever changed; ``replay`` under the run's own policy: every
replayable decision reproduced); 7 ``check`` found problems; 8 ``replay``
under the run's own policy: a decision the policy does not reproduce; 1 a
file that cannot be read (the run, the policy, ``--schema``), a policy that
does not load (``explain``, ``replay``), or an attached policy that cannot
be rebuilt; 2 usage (``--args`` not a JSON object included).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from analysis._printable import printable

if TYPE_CHECKING:
    from analysis._replay import ReplayReport
    from runtime import PolicyBackend
    from runtime._explain import Explanation

__all__ = ["EXIT_NOT_REPRODUCED", "EXIT_POLICY_PROBLEMS", "add_policy_command"]

EXIT_POLICY_PROBLEMS: Final = 7
"""``policy check``: the policy has problems (each printed)."""
EXIT_NOT_REPRODUCED: Final = 8
"""``policy replay`` under the run's own policy: a recorded verdict it does not reproduce."""

_EXIT_OK: Final = 0
_EXIT_FAILURE: Final = 1
_EXIT_USAGE: Final = 2
_PROG: Final = "ghost"
_MAX_LINE: Final = 6_000
_ATTACHED: Final = "attached"
_MAX_ARGS_BYTES: Final = 1 << 20


def add_policy_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``policy check|explain|replay`` to the ``ghost`` parser's subcommands."""
    policy = commands.add_parser(
        "policy",
        help="check, explain or replay a policy (TOML or Cedar)",
        description="Check a policy file, explain a verdict, or replay a run under a policy.",
    )
    actions = policy.add_subparsers(dest="policy_command", metavar="ACTION", required=True)

    check = actions.add_parser(
        "check",
        help="every problem of a policy file, with its line",
        description=(
            "Validate a TOML, JSON or Cedar policy (by extension, else by content) and print"
            " every problem, one line each: file, line, rule, field. Exit 0: it loads;"
            f" {EXIT_POLICY_PROBLEMS}: problems; 1: the file cannot be read; 2: usage."
        ),
    )
    check.add_argument("file", type=Path, metavar="FILE", help="the policy file")
    check.add_argument(
        "--schema",
        type=Path,
        metavar="SCHEMA",
        help="a Cedar schema to validate a Cedar policy against",
    )
    check.add_argument("--json", action="store_true", help="print the problems as JSON")
    check.set_defaults(handler=_check)

    explain = actions.add_parser(
        "explain",
        help="the verdict on one action, and every rule that matched or nearly did",
        description=(
            "Decide on one action as the gate would, without writing a log, and print the"
            " verdict, its reason, every rule that matched or nearly matched and why, and the"
            " arguments that would run (scrubbed by every detector). Exit 0: explained;"
            " 1: the policy cannot be read or does not load; 2: usage."
        ),
    )
    explain.add_argument("file", type=Path, metavar="FILE", help="the policy file")
    explain.add_argument("--agent", required=True, help="the acting agent's name")
    explain.add_argument("--verb", required=True, help="the action's verb (the tool)")
    explain.add_argument("--resource", required=True, help="the resource acted on")
    explain.add_argument(
        "--args", default="{}", metavar="JSON", help="the arguments, a JSON object (default {})"
    )
    _policy_options(explain)
    explain.add_argument("--json", action="store_true", help="print the explanation as JSON")
    explain.set_defaults(handler=_explain)

    replay = actions.add_parser(
        "replay",
        help="decide a run's recorded decisions again under a policy",
        description=(
            "Decide every recorded decision of a run again, under NEW or (without --policy,"
            " or with --policy attached) under the run's own attached policy, and print the"
            " decisions whose verdict would change, by rule, and those that cannot be"
            " replayed and why. Exit 0: printed (under the own policy: every replayable"
            f" decision reproduced); {EXIT_NOT_REPRODUCED}: under the own policy, a decision"
            " it does not reproduce; 1: the run or the policy cannot be read or used; 2: usage."
        ),
    )
    replay.add_argument("--mcap", required=True, type=Path, metavar="RUN", help="the run")
    replay.add_argument(
        "--policy",
        default=_ATTACHED,
        metavar="NEW",
        help="the policy to replay under (default: 'attached', the run's own)",
    )
    _policy_options(replay)
    replay.add_argument("--json", action="store_true", help="print the replay as JSON")
    replay.set_defaults(handler=_replay)


def _policy_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--policy-id", metavar="ID", help="a Cedar policy's id (default: the file's stem)"
    )
    parser.add_argument(
        "--scrub-from",
        type=Path,
        metavar="TOML",
        help="a TOML policy whose [scrub] table a Cedar policy uses",
    )


# --- shared ----------------------------------------------------------------------------------


class _CannotUse(Exception):
    """An input of the command line cannot be used; the message says why."""


def _text(value: object) -> str:
    """Outside text as it may be printed: scrubbed by every detector, printable, bounded."""
    return printable(_redact(str(value)), limit=_MAX_LINE)


_REDACTOR: list[Any] = []


def _redact(text: str) -> str:
    if not _REDACTOR:
        from runtime._scrub import Scrubber

        _REDACTOR.append(Scrubber(fingerprint_key=os.urandom(32)).record_text)
    redacted: str = _REDACTOR[0](text)
    return redacted


def _error(message: str) -> int:
    print(f"{_PROG}: error: {_text(message)}", file=sys.stderr)
    return _EXIT_FAILURE


def _write(text: str) -> int:
    sys.stdout.buffer.write(text.encode("utf-8", errors="backslashreplace"))
    sys.stdout.flush()
    return _EXIT_OK


def _load(path: Path, policy_id: str | None, scrub_from: Path | None) -> PolicyBackend:
    """Load a policy file as the gate would, or raise `_CannotUse` with the loader's words."""
    from runtime import CedarPolicy, Policy, PolicyError, loads_strict
    from runtime._policy_check import MAX_POLICY_SOURCE_BYTES, policy_format

    try:
        with path.open("rb") as stream:
            head = stream.read(MAX_POLICY_SOURCE_BYTES + 1)
    except OSError as exc:
        raise _CannotUse(
            f"cannot read policy {path}: {exc.strerror or type(exc).__name__}"
        ) from None
    if len(head) > MAX_POLICY_SOURCE_BYTES:
        raise _CannotUse(f"cannot use policy {path}: it is larger than any policy")
    chosen = policy_format(path, head)
    try:
        if chosen == "cedar":
            scrub = None if scrub_from is None else _scrub_table(scrub_from)
            return CedarPolicy.from_file(path, policy_id=policy_id, scrub=scrub)
        if chosen == "json":
            data = loads_strict(head)
            if not isinstance(data, dict):
                raise _CannotUse(f"cannot use policy {path}: not a JSON object")
            return Policy.from_dict(data, origin=str(path))
        return Policy.from_toml(path)
    except PolicyError as exc:
        raise _CannotUse(
            f"cannot use policy: {exc} (ghost policy check {path} lists every problem)"
        ) from None
    except (ValueError, RecursionError) as exc:
        raise _CannotUse(f"cannot use policy {path}: {type(exc).__name__}") from None


def _scrub_table(path: Path) -> dict[str, Any]:
    """The ``[scrub]`` table of a TOML policy (which must itself load)."""
    import tomllib

    from runtime import Policy

    Policy.from_toml(path)
    try:
        with path.open("rb") as stream:
            table = tomllib.load(stream).get("scrub", {})
    except (OSError, tomllib.TOMLDecodeError) as exc:  # pragma: no cover - it just loaded
        raise _CannotUse(f"cannot read {path}: {type(exc).__name__}") from None
    return table if isinstance(table, dict) else {}


# --- check -----------------------------------------------------------------------------------


def _check(args: argparse.Namespace) -> int:
    from runtime._policy_check import check_policy

    schema = None
    if args.schema is not None:
        try:
            schema = args.schema.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            return _error(f"cannot read schema {args.schema}: {type(exc).__name__}")
    path: Path = args.file
    if not path.is_file() and not path.exists():
        return _error(f"cannot read policy {path}: no such file")
    if path.is_dir():
        return _error(f"cannot read policy {path}: it is a directory")
    result = check_policy(path, schema=schema)
    if args.json:
        document = {
            "source": str(path),
            "format": result.format,
            "ok": result.ok,
            "rule_count": result.rule_count,
            "problems": [
                {"line": p.line, "rule": p.rule, "field": p.field, "problem": p.problem}
                for p in result.problems
            ],
        }
        _write(json.dumps(document, sort_keys=True, indent=2, ensure_ascii=False) + "\n")
    else:
        lines = [_text(problem) for problem in result.problems]
        if result.ok:
            lines.append(_text(f"{path}: ok ({result.format}, {result.rule_count} rules)"))
        else:
            count = len(result.problems)
            lines.append(_text(f"{path}: {count} problem{'s' if count != 1 else ''}"))
        _write("".join(line + "\n" for line in lines))
    return _EXIT_OK if result.ok else EXIT_POLICY_PROBLEMS


# --- explain ---------------------------------------------------------------------------------


def _explain(args: argparse.Namespace) -> int:
    from runtime import loads_strict
    from runtime._explain import explain_action

    raw = args.args.encode("utf-8", errors="surrogatepass")
    try:
        if len(raw) > _MAX_ARGS_BYTES:
            raise ValueError("larger than 1 MiB")
        action_args = loads_strict(raw)
    except (ValueError, RecursionError) as exc:
        return _usage(args, f"--args is not JSON ({type(exc).__name__})")
    if not isinstance(action_args, dict):
        return _usage(args, "--args must be a JSON object")
    try:
        policy = _load(args.file, args.policy_id, args.scrub_from)
    except _CannotUse as exc:
        return _error(str(exc))
    explanation = explain_action(policy, args.agent, args.verb, args.resource, action_args)
    if args.json:
        return _write(_explanation_json(explanation) + "\n")
    return _write(_explanation_text(explanation, policy))


def _usage(args: argparse.Namespace, message: str) -> int:
    print(f"{_PROG} policy explain: error: {_text(message)}", file=sys.stderr)
    return _EXIT_USAGE


def _explanation_document(explanation: Explanation) -> dict[str, Any]:
    from runtime import jcs_bytes

    return {
        "verdict": explanation.verdict.value,
        "held": None if explanation.held is None else explanation.held.value,
        "reason": _redact(explanation.reason),
        "matched_policy": explanation.matched_policy,
        "matched_rules": list(explanation.matched_rules),
        "args": json.loads(jcs_bytes(explanation.args)),
        "findings": [
            {"detector": f.detector, "path": _redact(f.path)} for f in explanation.findings
        ],
        "narrowings": [
            {"rule": rule, "kind": kind, "path": _redact(path)}
            for rule, kind, path in explanation.narrowings
        ],
        "error": explanation.error,
        "diagnosis_error": explanation.diagnosis_error,
        "rules": [
            {
                "id": d.rule,
                "effect": d.effect.value,
                "matched": d.matched,
                "near_miss": d.near_miss,
                "error": None if d.error is None else _redact(d.error),
                "checks": [
                    {"part": c.part, "holds": c.holds, "detail": _redact(c.detail)}
                    for c in d.checks
                ],
            }
            for d in explanation.diagnoses
        ],
    }


def _explanation_json(explanation: Explanation) -> str:
    return json.dumps(
        _explanation_document(explanation), sort_keys=True, indent=2, ensure_ascii=False
    )


def _explanation_text(explanation: Explanation, policy: PolicyBackend) -> str:
    from runtime import jcs_bytes

    lines = [f"policy: {policy.policy_id} (sha256 {policy.policy_sha256[:16]}...)"]
    verdict = explanation.verdict.value
    if explanation.held is not None:
        verdict += f" (runs as {explanation.held.value} once approved)"
    lines.append(f"verdict: {verdict}")
    lines.append(f"reason: {explanation.reason}")
    lines.append(f"decided by: {explanation.matched_policy or '-'}")
    lines.append(f"matched rules: {', '.join(explanation.matched_rules) or '-'}")
    if explanation.narrowings:
        done = ", ".join(f"{r} {k} {p}" for r, k, p in explanation.narrowings)
        lines.append(f"narrowings: {done}")
    if explanation.findings:
        found = ", ".join(f"{f.detector} at {f.path}" for f in explanation.findings)
        lines.append(f"scrubbed: {found}")
    lines.append(
        "arguments that would run (scrubbed): "
        + (
            jcs_bytes(explanation.args).decode("utf-8")
            if explanation.verdict.value != "deny"
            else "- (denied)"
        )
    )
    if explanation.diagnosis_error is not None:
        lines.append(f"rules not diagnosed: {explanation.diagnosis_error}")
    elif not explanation.diagnoses:
        lines.append("rules: none matched or nearly matched")
    else:
        lines.append("rules:")
    for d in explanation.diagnoses:
        state = "matched" if d.matched else ("error" if d.error is not None else "near miss")
        lines.append(f"  {d.rule} ({d.effect.value}): {state}")
        for check in d.checks:
            mark = {True: "ok", False: "no", None: "error"}[check.holds]
            lines.append(f"    {mark:<5} {check.part}: {check.detail}")
    return "".join(_text(line) + "\n" for line in lines)


# --- replay ----------------------------------------------------------------------------------


def _replay(args: argparse.Namespace) -> int:
    from analysis._replay import ReplayError, replay_run
    from audit import LogFormatError

    policy = None
    if args.policy != _ATTACHED:
        try:
            policy = _load(Path(args.policy), args.policy_id, args.scrub_from)
        except _CannotUse as exc:
            return _error(str(exc))
    try:
        report = replay_run(args.mcap, policy)
    except LogFormatError as exc:
        return _error(f"cannot read {exc.path}: {exc.problem}")
    except ReplayError as exc:
        return _error(f"cannot replay {args.mcap}: {exc}")
    if args.json:
        _write(
            json.dumps(_replay_document(report), sort_keys=True, indent=2, ensure_ascii=False)
            + "\n"
        )
    else:
        _write(_replay_text(report))
    if report.own_policy and not report.reproduced:
        return EXIT_NOT_REPRODUCED
    return _EXIT_OK


def _replay_document(report: ReplayReport) -> dict[str, Any]:
    from analysis._replay import ReplayStatus

    return {
        "run": str(report.run),
        "policy_id": report.policy_id,
        "policy_sha256": report.policy_sha256,
        "own_policy": report.own_policy,
        "reproduced": report.reproduced,
        "args_stored": report.args_stored,
        "counts": {s.value: len(report.with_status(s)) for s in ReplayStatus},
        "groups": [
            {"recorded": old, "replayed": new, "rule": rule, "decisions": list(ids)}
            for old, new, rule, ids in report.groups()
        ],
        "decisions": [
            {
                "decision_id": d.decision_id,
                "agent": _redact(d.agent),
                "verb": _redact(d.verb),
                "resource": _redact(d.resource),
                "recorded_verdict": d.recorded_verdict,
                "recorded_rule": d.recorded_rule,
                "status": d.status.value,
                "verdict": d.verdict,
                "rule": d.rule,
                "method": d.method,
                "note": _redact(d.note),
            }
            for d in report.decisions
        ],
    }


def _replay_text(report: ReplayReport) -> str:
    from analysis._replay import ReplayStatus

    under = "its own attached policy" if report.own_policy else "policy"
    lines = [
        (
            f"replayed {len(report.decisions)} decisions of {report.run} under {under}"
            f" {report.policy_id!r} (sha256 {report.policy_sha256[:16]}...)"
        ),
        f"arguments stored for {report.args_stored} of them (Gate record_args)",
        "  " + ", ".join(f"{s.value}: {len(report.with_status(s))}" for s in ReplayStatus),
    ]
    groups = report.groups()
    if groups:
        lines.append("")
        lines.append(f"  {'count':>5}  {'recorded':<8} -> {'replayed':<8}  {'rule':<32} decisions")
        for old, new, rule, ids in groups:
            lines.append(f"  {len(ids):>5}  {old:<8} -> {new:<8}  {rule:<32} {', '.join(ids)}")
    missing = report.with_status(ReplayStatus.NOT_REPLAYABLE)
    if missing:
        lines.append("")
        lines.append("not replayable:")
        lines.extend(f"  {d.decision_id}  {d.verb} {d.resource}: {d.note}" for d in missing)
    lines.append("")
    changed = len(report.with_status(ReplayStatus.CHANGED))
    reruled = len(report.with_status(ReplayStatus.RERULED))
    if report.own_policy:
        verdict = (
            "every replayable decision is reproduced by the run's policy"
            if report.reproduced
            else f"{changed + reruled} decisions are not reproduced by the run's own policy"
        )
    else:
        verdict = f"{changed} verdicts would change, {reruled} decided by another rule"
    lines.append(f"{report.run}: {verdict}")
    return "".join(_text(line) + "\n" for line in lines)
