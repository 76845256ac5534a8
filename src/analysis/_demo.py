"""`ghost demo`: a scripted agent loop under the bundled policy, written to a real run.

No network and no model: three agents (researcher, support, analyst) work
through a fixed script of tool calls against in-process fake tools. Each call
goes through `Gate.check` first and runs only with ``decision.args`` when the
verdict permits it; ``deny`` calls never run. ``pending`` calls are held for a
human: the script has alice approve one refund (which then runs, after
`gate.approvals.execute` checked its arguments), bob reject another, and the
treasury miss a wire transfer whose approval times out (recorded as expired).
Some calls arrive with a W3C ``traceparent`` (one of them malformed) to show
how trace context is recorded.

The run is then read back from the MCAP file and its decision trace report is
printed, so what is shown is what was logged.
"""

from __future__ import annotations

import errno
import os
import shutil
import sys
import tempfile
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, TextIO

import structlog

from analysis._decision_trace import build_decision_trace_report
from analysis._trace_json import encode_decision_trace_report_to_bytes
from analysis._trace_model import DecisionTraceReport
from audit import McapAuditSink
from runtime import Action, CedarPolicy, Decision, Gate, Policy, RuntimeVerdict, loads_strict

__all__ = [
    "SCRIPT",
    "ScriptedCall",
    "demo_cedar_policy",
    "demo_cedar_policy_path",
    "demo_policy_path",
    "run_demo",
]

_INCOMING = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
# Truncated, made-up key material: enough for the private_key detector, useless as a key.
_TEST_PEM = (
    "-----BEGIN RSA PRIVATE KEY-----\n"
    "MIIBOgIBAAJBAKj34GkxFhD90vcNLYLInFEX6Ppy1tPf9Cnzj4p4WGeKLs1Pt8Qu\n"
    "-----END RSA PRIVATE KEY-----"
)
_MALFORMED = "00-4BF92F3577B34DA6A3CE929D0E0E4736-00F067AA0BA902B7-01"  # uppercase: invalid


@dataclass(frozen=True, slots=True)
class ScriptedCall:
    """One step of the scripted agent: an action, optionally its incoming header and a human.

    Attributes:
        action: what the agent asks to do.
        traceparent: the incoming W3C header, if any.
        human: for a held call, what the scripted human does: ``("approve", name)``,
            ``("reject", name)`` or ``("ignore", None)`` (it waits until it expires).
    """

    action: Action
    traceparent: str | None = None
    human: tuple[str, str | None] | None = None


def _call(
    agent: str,
    verb: str,
    resource: str,
    traceparent: str | None = None,
    human: tuple[str, str | None] | None = None,
    **args: Any,
) -> ScriptedCall:
    return ScriptedCall(Action(agent, verb, resource, args), traceparent, human)


# A fake but realistic day at a support desk. The values that look like secrets
# are documented example or test values (AWS's example key id, a Luhn-valid test
# card number), never real credentials.
SCRIPT: tuple[ScriptedCall, ...] = (
    _call(
        "researcher", "search", "tool:web_search", _INCOMING, query="refund policy best practice"
    ),
    _call("researcher", "fetch", "https://docs.example.com/refunds", _INCOMING),
    _call("researcher", "read", "file:/data/public/faq.md", path="/data/public/faq.md"),
    _call(
        "researcher", "read", "file:/data/public/q3/report.txt", path="/data/public/./q3/report.txt"
    ),
    _call(
        "researcher",
        "read",
        "file:/data/public/../private/salaries.csv",
        path="/data/public/../private/salaries.csv",
    ),
    _call(
        "researcher",
        "fetch",
        "https://evil.example.net/exfil",
        url="https://evil.example.net/exfil",
    ),
    _call(
        "researcher",
        "search",
        "tool:web_search",
        _MALFORMED,
        query="how to contact jane.doe@example.com",
    ),
    _call("researcher", "search", "tool:web_search", query="aws key AKIAIOSFODNN7EXAMPLE leaked?"),
    _call(
        "support",
        "query",
        "db:customers",
        table="customers",
        columns=["name", "email"],
        limit=20,
        read_only=True,
        where="id = 4411",
    ),
    _call(
        "support",
        "query",
        "db:customers",
        table="customers",
        columns=["*"],
        limit=100000,
        where="1=1",
    ),
    _call(
        "support",
        "send",
        "mail:customer",
        to="jane.doe@example.com",
        subject="Your refund",
        body="Hi Jane, your refund is on its way.",
    ),
    _call(
        "support",
        "send",
        "mail:customer",
        to="sam@example.org",
        subject="Card on file",
        body="We charged card 4111 1111 1111 1111 today.",
    ),
    _call("support", "refund", "payments:stripe", amount=20, currency="EUR", order="A-1001"),
    _call("support", "refund", "payments:stripe", amount=35, currency="EUR", order="A-1002"),
    _call(
        "support",
        "refund",
        "payments:stripe",
        human=("approve", "alice"),
        amount=480,
        currency="EUR",
        order="A-1003",
    ),
    _call(
        "support",
        "refund",
        "payments:stripe",
        human=("reject", "bob"),
        amount=1200,
        currency="EUR",
        order="A-1004",
    ),
    _call(
        "support",
        "transfer",
        "bank:wire",
        human=("ignore", None),
        amount=25000,
        currency="EUR",
        iban_to="DE89370400440532013000",
    ),
    _call("support", "refund", "payments:stripe", amount="900", currency="EUR", order="A-1005"),
    _call("support", "delete", "db:customers", where="id = 4411"),
    _call(
        "support",
        "send",
        "mail:ops",
        to="ops@example.com",
        subject="key",
        body=_TEST_PEM,
    ),
    _call("support", "exec", "shell:bash", command="rm -rf /tmp/cache"),
    _call(
        "analyst",
        "query",
        "db:customers",
        table="customers",
        columns=["region", "count"],
        limit=50,
        read_only=True,
    ),
    _call(
        "analyst",
        "query",
        "db:customers",
        table="customers",
        columns=["region"],
        limit=500,
        read_only=True,
        debug=True,
    ),
    _call("analyst", "query", "db:orders", table="orders", limit=10),
    _call("analyst", "read", "file:/data/public/q3/summary.csv", path="q3/summary.csv"),
    _call("analyst", "search", "tool:web_search", query="EU VAT rates 2026"),
    _call("analyst", "search", "tool:web_search", query="call me on +44 20 7946 0958"),
    _call("analyst", "refund", "payments:stripe", amount=10, currency="EUR", order="A-1006"),
    _call("analyst", "read", "file:/etc/passwd", path="/etc/passwd"),
    _call("researcher", "delete", "file:/data/public/faq.md", path="/data/public/faq.md"),
    _call("researcher", "search", "tool:web_search", _INCOMING, query="ghost audit log format"),
)


def demo_policy_path() -> Path:
    """The bundled example policy file."""
    return Path(str(resources.files("analysis").joinpath("demo_policy.toml")))


def demo_cedar_policy_path() -> Path:
    """The bundled example policy written in Cedar (the same rules as `demo_policy_path`)."""
    return Path(str(resources.files("analysis").joinpath("demo_policy.cedar")))


def demo_cedar_policy() -> CedarPolicy:
    """The bundled example policy as a `CedarPolicy`, with the TOML file's id and ``[scrub]``.

    Raises:
        runtime.PolicyError: cedarpy is not installed (``ghost-sdk[cedar]``).
    """
    with demo_policy_path().open("rb") as handle:
        toml = tomllib.load(handle)
    return CedarPolicy.from_file(
        demo_cedar_policy_path(), policy_id=toml["policy_id"], scrub=toml["scrub"]
    )


_TOOLS: Mapping[str, Callable[[Mapping[str, Any]], str]] = {
    "search": lambda a: f"3 results for {len(str(a.get('query', '')))}-char query",
    "fetch": lambda a: "200 OK, 4.1 kB",
    "read": lambda a: f"read {a.get('path')}",
    "query": lambda a: f"{min(int(a.get('limit', 0)), 7)} rows",
    "send": lambda a: "queued",
    "refund": lambda a: f"refunded {a.get('amount')} {a.get('currency')}",
    "transfer": lambda a: f"wired {a.get('amount')} {a.get('currency')}",
}
# How long the demo's agent waits for the human it ignores: longer than the rule's timeout.
_IGNORED_WAIT_S = 5.0


def run_demo(out: Path, *, stream: TextIO | None = None) -> int:
    """Run the scripted agent loop, write the run to ``out``, print its trace report.

    The report is also written beside the run (``out`` with the suffix
    ``.trace.json``). An existing file at either path is replaced only when
    it is this demo's own earlier output — a ghost run of the bundled demo
    policy, and a decision trace report — so a second ``ghost demo`` works
    and no other file, least of all a real audit log, is ever overwritten.
    Both files are written to a fresh directory beside ``out`` first and
    moved into place when complete, so a failure leaves no half-written run.

    Args:
        out: where to write the run.
        stream: where to print (default: standard output).

    Returns:
        the process exit code (0).

    Raises:
        FileExistsError: ``out`` or its report exists and is not the demo's own.
        OSError: the directory cannot be created or written to.
        runtime.AuditError: the run could not be written.
    """
    print_ = stream or sys.stdout
    # The SDK logs through structlog; keep its lines on stderr, apart from the report.
    structlog.configure(logger_factory=structlog.PrintLoggerFactory(sys.stderr))
    policy = Policy.from_toml(demo_policy_path())
    report_path = out.with_suffix(".trace.json")
    replacing = _check_replaceable(out, report_path, policy.policy_id)
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".ghost-demo-", dir=out.parent))
    try:
        print(
            f"ghost demo: {len(SCRIPT)} scripted tool calls under policy {policy.policy_id!r}",
            file=print_,
        )
        staged_run = staging / out.name
        with McapAuditSink(staged_run) as sink:
            # Scrubbed arguments stored, so that `ghost policy replay` can re-decide the run.
            gate = Gate(policy, sink=sink, record_args="scrubbed")
            for step in SCRIPT:
                _step(gate, step, print_)
        report = build_decision_trace_report(staged_run)
        staged_report = staging / report_path.name
        staged_report.write_bytes(encode_decision_trace_report_to_bytes(report))
        os.replace(staged_run, out)
        os.replace(staged_report, report_path)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    if replacing:
        print(f"\n(replaced the previous demo run at {out})", file=print_)
    _print_summary(report, out, report_path, print_)
    return 0


def _step(gate: Gate, step: ScriptedCall, print_: TextIO) -> None:
    decision = gate.check(step.action, traceparent=step.traceparent)
    action = step.action
    if decision.permitted:
        outcome = _TOOLS[action.verb](decision.args)
    elif decision.verdict is RuntimeVerdict.PENDING:
        outcome = f"held for a human: {decision.reason}"
        if step.human is not None:
            outcome += "; " + _human(gate, decision, action.verb, step.human)
    else:
        outcome = f"not run: {decision.reason}"
    print(
        f"  {decision.verdict.value:<8} {action.agent:<10} {action.verb:<7}"
        f" {decision.matched_policy or '-':<28} {outcome}",
        file=print_,
    )


def _human(gate: Gate, decision: Decision, verb: str, human: tuple[str, str | None]) -> str:
    """Play the scripted human for a held call; say what came of it."""
    what, name = human
    if name is None:  # nobody comes: the agent waits, and the hold expires
        approval = gate.approvals.wait(decision.decision_id, timeout_s=_IGNORED_WAIT_S)
    else:
        approval = gate.approvals.resolve(
            decision.decision_id, approved=what == "approve", approver=name
        )
    if not approval.approved:
        who = f" by {approval.approver}" if approval.approver else ""
        return f"{approval.outcome}{who}: not run"
    args = gate.approvals.execute(approval, decision.args)
    return f"approved by {approval.approver}: {_TOOLS[verb](args)}"


def _print_summary(
    report: DecisionTraceReport, out: Path, report_path: Path, print_: TextIO
) -> None:
    from analysis._summary import summarize
    from analysis._summary_render import render_summary
    from analysis._verify import verify_run

    print(f"\nrun written to {out} (sha256 {report.source_mcap_sha256[:16]}…)", file=print_)
    print("its summary, read back from the MCAP file (ghost summary):\n", file=print_)
    terminal = print_.isatty()
    render_summary(
        summarize(report, verify_run(out)),
        name=str(out),
        file=print_,
        terminal=terminal,
        color=terminal and not os.environ.get("NO_COLOR"),
    )
    print(
        f"\nchain: verified={report.verified_count} broken={report.broken_count}"
        f" assessment_missing={report.assessment_missing_count}"
        f" no_assessment_claimed={report.no_assessment_claimed_count}",
        file=print_,
    )
    print(f"full report: {report_path}  (ghost trace-decisions --mcap {out})", file=print_)
    print(f"verify it:   ghost verify --mcap {out}", file=print_)
    page = out.with_suffix(".html")
    print(f"see it:      ghost report {out} --html {page}  (the report extra)", file=print_)


def _check_replaceable(out: Path, report_path: Path, policy_id: str) -> bool:
    """Refuse to replace anything but the demo's own output; return whether there is some."""
    run_exists = os.path.lexists(out)
    if run_exists and not _is_demo_run(out, policy_id):
        raise FileExistsError(
            errno.EEXIST,
            "it exists and is not a previous ghost demo run; choose another --out, or remove it",
            str(out),
        )
    if os.path.lexists(report_path) and not _is_trace_report(report_path):
        raise FileExistsError(
            errno.EEXIST,
            "the demo writes its report there, but that file exists and is not a ghost"
            " decision trace report; choose another --out, or remove it",
            str(report_path),
        )
    return run_exists


def _is_demo_run(path: Path, policy_id: str) -> bool:
    from audit import LogFormatError, read_run

    try:
        run = read_run(path)
    except LogFormatError:
        return False
    first = run.records[0].record if run.records and run.records[0].topic == "/run" else None
    return (
        first is not None
        and first.get("policy_id") == policy_id
        and any(attachment.name == demo_policy_path().name for attachment in run.attachments)
    )


def _is_trace_report(path: Path) -> bool:
    try:
        if not path.is_file():
            return False
        document = loads_strict(path.read_bytes())
    except (OSError, ValueError, RecursionError):
        return False
    return isinstance(document, dict) and {"analysis_version", "source_mcap_sha256"} <= set(
        document
    )
