"""`@gate.guard`: every call gated, the function run only with `decision.args` (SPEC §3)."""

from __future__ import annotations

import asyncio
import functools
import inspect
import threading
from collections.abc import Mapping
from typing import Any

import pytest

from audit import MemoryAuditSink
from runtime import (
    ActionDenied,
    ApprovalPending,
    AuditError,
    Gate,
    GhostError,
    GuardError,
    Policy,
    RuntimeVerdict,
    value_sha256,
)

POLICY: dict[str, Any] = {
    "policy_id": "guard-policy",
    "default": "deny",
    "rules": [
        {"id": "never-delete", "verbs": ["delete"], "effect": "deny"},
        {
            "id": "big-refunds",
            "verbs": ["refund"],
            "resources": ["payments:*"],
            "effect": "approval",
            "when": {"amount": {"gt": 50}},
            "approval": {"timeout_s": 600, "approvers": ["alice"]},
        },
        {"id": "refunds", "verbs": ["refund"], "resources": ["payments:*"], "effect": "allow"},
        {"id": "mail", "verbs": ["send"], "resources": ["mail:*"], "effect": "allow"},
        {
            "id": "queries",
            "verbs": ["query"],
            "resources": ["db:*"],
            "effect": "narrow",
            "narrow": {"clamp": {"limit": 100}},
        },
        {
            "id": "read-only",
            "verbs": ["write"],
            "resources": ["db:*"],
            "effect": "narrow",
            "narrow": {"set": {"read_only": True}},
        },
        {
            "id": "keep-table",
            "verbs": ["peek"],
            "resources": ["db:*"],
            "effect": "narrow",
            "narrow": {"keep": ["table"]},
        },
        {
            "id": "keep-second",
            "verbs": ["pair"],
            "resources": ["db:*"],
            "effect": "narrow",
            "narrow": {"keep": ["b", "rest", "extra"]},
        },
        {
            "id": "reshape",
            "verbs": ["reshape"],
            "resources": ["db:*"],
            "effect": "narrow",
            "narrow": {"set": {"rest": "no longer a list", "extra": "no longer a dict"}},
        },
        {
            "id": "shadow",
            "verbs": ["shadow"],
            "resources": ["db:*"],
            "effect": "narrow",
            "narrow": {"set": {"extra.limit": 1}},
        },
        {"id": "anything", "verbs": ["any"], "effect": "allow"},
    ],
}


@pytest.fixture
def sink() -> MemoryAuditSink:
    return MemoryAuditSink()


@pytest.fixture
def gate(sink: MemoryAuditSink) -> Gate:
    return Gate(Policy.from_dict(POLICY), sink=sink, fingerprint_key=b"k" * 32)


def decisions(sink: MemoryAuditSink) -> list[Mapping[str, Any]]:
    return list(sink.records("/decisions"))


def assessments(sink: MemoryAuditSink) -> list[Mapping[str, Any]]:
    return list(sink.records("/assessments"))


class Calls:
    """Records what a guarded tool was called with."""

    def __init__(self) -> None:
        self.seen: list[tuple[tuple[Any, ...], dict[str, Any]]] = []

    def __call__(self, *args: Any, **kwargs: Any) -> None:
        self.seen.append((args, kwargs))


# -- sync: every verdict -------------------------------------------------------------


def test_an_allowed_call_runs_once_and_returns_the_functions_result(
    gate: Gate, sink: MemoryAuditSink
) -> None:
    calls = Calls()

    @gate.guard(verb="send", resource="mail:{to}", agent="mailer")
    def send(to: str, body: str = "hi") -> str:
        calls(to, body)
        return f"sent to {to}"

    assert send("bob") == "sent to bob"
    assert calls.seen == [(("bob", "hi"), {})]
    (record,) = decisions(sink)
    assert (record["verdict"], record["matched_policy"]) == ("allow", "mail")
    (assessment,) = assessments(sink)
    assert (assessment["agent"], assessment["verb"], assessment["resource"]) == (
        "mailer",
        "send",
        "mail:bob",
    )


def test_the_function_gets_the_gates_copy_never_the_callers_objects(gate: Gate) -> None:
    received: list[Any] = []

    @gate.guard(verb="send", resource="mail:{to}", agent="mailer")
    def send(to: str, cc: list[str], headers: dict[str, Any]) -> None:
        received.extend([cc, headers])

    cc, headers = ["a", "b"], {"x": ["y"]}
    send("bob", cc, headers=headers)
    assert received == [["a", "b"], {"x": ["y"]}]
    assert received[0] is not cc
    assert received[1] is not headers
    assert received[1]["x"] is not headers["x"]


def test_a_tuple_argument_arrives_as_the_snapshots_list(gate: Gate) -> None:
    received: list[Any] = []

    @gate.guard(verb="send", resource="mail:{to}", agent="mailer")
    def send(to: str, cc: Any) -> None:
        received.append(cc)

    send("bob", ("a", "b"))
    assert received == [["a", "b"]]  # what the gate decided on, and hashed


def test_a_narrowed_argument_reaches_the_function(gate: Gate, sink: MemoryAuditSink) -> None:
    received: list[int] = []

    @gate.guard(verb="query", resource="db:{table}", agent="analyst")
    def query(table: str, limit: int) -> None:
        received.append(limit)

    query("customers", 5_000)
    assert received == [100]
    assert decisions(sink)[0]["verdict"] == "narrow"


def test_a_default_is_seen_by_the_policy_and_narrowed(gate: Gate) -> None:
    received: list[int] = []

    @gate.guard(verb="query", resource="db:{table}", agent="analyst")
    def query(table: str, limit: int = 10_000) -> None:
        received.append(limit)

    query("customers")
    assert received == [100]


def test_scrubbed_arguments_reach_the_function(gate: Gate, sink: MemoryAuditSink) -> None:
    received: list[str] = []

    @gate.guard(verb="send", resource="mail:{to}", agent="mailer")
    def send(to: str, body: str) -> None:
        received.append(body)

    send("bob", "the key is sk-proj-abcdefghijklmnopqrstuvwxyz0123456789ABCD")
    assert received == ["the key is [REDACTED:openai_api_key]"]
    assert decisions(sink)[0]["verdict"] == "scrub"


def test_deny_raises_and_the_function_is_not_called(gate: Gate, sink: MemoryAuditSink) -> None:
    calls = Calls()

    @gate.guard(verb="delete", resource="file:{path}", agent="janitor")
    def delete(path: str) -> None:
        calls(path)

    with pytest.raises(ActionDenied) as info:
        delete("/etc/passwd")
    assert calls.seen == []
    assert info.value.decision.verdict is RuntimeVerdict.DENY
    assert info.value.decision.matched_policy == "never-delete"
    assert decisions(sink)[0]["decision_id"] == info.value.decision.decision_id


def test_the_policy_default_denies_too(gate: Gate) -> None:
    calls = Calls()

    @gate.guard(verb="launch", resource="rocket:{name}", agent="bot")
    def launch(name: str) -> None:
        calls(name)

    with pytest.raises(ActionDenied, match="no rule matched"):
        launch("x")
    assert calls.seen == []


def test_pending_raises_with_the_arguments_that_would_run(
    gate: Gate, sink: MemoryAuditSink
) -> None:
    calls = Calls()

    @gate.guard(verb="refund", resource="payments:{order}", agent="support")
    def refund(order: str, amount: int) -> None:
        calls(order, amount)

    with pytest.raises(ApprovalPending) as info:
        refund("o-1", 500)
    assert calls.seen == []
    decision = info.value.decision
    assert decision.verdict is RuntimeVerdict.PENDING
    assert decision.matched_policy == "big-refunds"
    assert dict(decision.args) == {"order": "o-1", "amount": 500}
    assert decisions(sink)[0]["verdict"] == "pending"
    refund("o-2", 5)  # a small one runs
    assert calls.seen == [(("o-2", 5), {})]


class BrokenSink(MemoryAuditSink):
    def append(self, topic: str, record: Mapping[str, Any]) -> str:
        raise OSError("disk full")


def test_an_unrecordable_decision_means_the_function_never_runs() -> None:
    gate = Gate(Policy.from_dict(POLICY), sink=BrokenSink())
    calls = Calls()

    @gate.guard(verb="send", resource="mail:{to}", agent="mailer")
    def send(to: str) -> None:
        calls(to)

    with pytest.raises(AuditError):
        send("bob")
    assert calls.seen == []


def test_each_call_is_a_decision_of_its_own(gate: Gate, sink: MemoryAuditSink) -> None:
    @gate.guard(verb="send", resource="mail:{to}", agent="mailer")
    def send(to: str) -> None:
        pass

    send("a")
    send("b")
    assert [a["resource"] for a in assessments(sink)] == ["mail:a", "mail:b"]
    assert len({d["decision_id"] for d in decisions(sink)}) == 2


def test_a_call_that_does_not_fit_the_signature_is_a_type_error_and_no_decision(
    gate: Gate, sink: MemoryAuditSink
) -> None:
    @gate.guard(verb="send", resource="mail:{to}", agent="mailer")
    def send(to: str) -> None:
        pass

    with pytest.raises(TypeError) as info:
        send("a", "b")  # type: ignore[call-arg]
    assert not isinstance(info.value, GhostError)
    assert decisions(sink) == []


# -- the resource: format strings refused at decoration --------------------------------


@pytest.mark.parametrize(
    ("resource", "why"),
    [
        ("mail:{to.__class__}", "reads an attribute or an index"),
        ("mail:{to[0]}", "reads an attribute or an index"),
        ("mail:{to.__class__.__init__.__globals__}", "reads an attribute or an index"),
        ("mail:{}", "positional field"),
        ("mail:{0}", "positional field"),
        ("mail:{missing}", "names no parameter"),
        ("mail:{rest}", "names \\*args or \\*\\*kwargs"),
        ("mail:{options}", "names \\*args or \\*\\*kwargs"),
        ("mail:{to!r}", "conversion or format spec"),
        ("mail:{to!s}", "conversion or format spec"),
        ("mail:{to:>4096}", "conversion or format spec"),
        ("mail:{to:{body}}", "conversion or format spec"),
        ("mail:{to", "not a valid format string"),
        ("mail:}", "not a valid format string"),
    ],
)
def test_a_resource_field_that_is_not_a_plain_parameter_is_refused_at_decoration(
    gate: Gate, resource: str, why: str
) -> None:
    def send(to: str, body: str, *rest: str, **options: str) -> None:
        pass

    with pytest.raises(GuardError, match=why) as info:
        gate.guard(verb="send", resource=resource, agent="mailer")(send)
    assert info.value.function == send.__qualname__
    assert isinstance(info.value, TypeError)


def test_literal_braces_are_text(gate: Gate, sink: MemoryAuditSink) -> None:
    @gate.guard(verb="send", resource="mail:{{x}}{to}", agent="mailer")
    def send(to: str) -> None:
        pass

    send("bob")
    assert assessments(sink)[0]["resource"] == "mail:{x}bob"


def test_a_value_that_looks_like_a_format_field_is_never_parsed(
    gate: Gate, sink: MemoryAuditSink
) -> None:
    received: list[str] = []

    @gate.guard(verb="send", resource="mail:{to}", agent="mailer")
    def send(to: str, other: str = "hidden") -> None:
        received.append(to)

    send("{other}{to.__class__}")
    assert assessments(sink)[0]["resource"] == "mail:{other}{to.__class__}"
    assert received == ["{other}{to.__class__}"]


@pytest.mark.parametrize(
    ("kwargs", "why"),
    [
        ({"verb": 5, "resource": "mail:{to}", "agent": "mailer"}, "verb must be a string"),
        ({"verb": "send", "resource": "mail:{to}", "agent": None}, "agent must be a string"),
        ({"verb": "send", "resource": 5, "agent": "mailer"}, "format string or a callable"),
        ({"verb": "send", "resource": b"mail:{to}", "agent": "mailer"}, "format string or"),
    ],
)
def test_names_that_are_not_strings_are_refused_at_decoration(
    gate: Gate, kwargs: dict[str, Any], why: str
) -> None:
    def send(to: str) -> None:
        pass

    with pytest.raises(GuardError, match=why):
        gate.guard(**kwargs)(send)


def test_only_functions_are_guarded(gate: Gate) -> None:
    decorate = gate.guard(verb="send", resource="mail:x", agent="mailer")
    with pytest.raises(GuardError, match="only a function"):
        decorate(5)  # type: ignore[type-var]

    async def stream() -> Any:
        yield 1

    with pytest.raises(GuardError, match="async generator"):
        decorate(stream)


def test_a_function_whose_signature_cannot_be_read_is_refused(gate: Gate) -> None:
    class Opaque:
        __signature__ = "not a signature"

        def __call__(self) -> None:
            pass

    decorate = gate.guard(verb="send", resource="mail:x", agent="mailer")
    with pytest.raises(GuardError, match="signature cannot be read") as info:
        decorate(Opaque())  # inspect.signature raises TypeError
    assert info.value.function == "Opaque"  # no __qualname__: named by its type
    with pytest.raises(GuardError, match="signature cannot be read"):
        decorate(vars)  # inspect.signature raises ValueError


# -- the resource: values that cannot fill it deny, recorded ----------------------------


class Hostile:
    """Every method an attacker's argument could lie or fail in."""

    def __format__(self, spec: str) -> str:
        raise RuntimeError("format ran")

    def __str__(self) -> str:
        raise RuntimeError("str ran")

    def __repr__(self) -> str:
        raise RuntimeError("repr ran")


@pytest.mark.parametrize(
    "value", [None, True, 1.5, float("nan"), b"bob", ["bob"], {"to": "bob"}, Hostile()]
)
def test_a_value_that_is_not_str_or_int_denies_and_is_recorded(
    gate: Gate, sink: MemoryAuditSink, value: object
) -> None:
    calls = Calls()

    @gate.guard(verb="send", resource="mail:{to}", agent="mailer")
    def send(to: Any) -> None:
        calls(to)

    with pytest.raises(ActionDenied, match="UnfilledResource") as info:
        send(value)
    assert calls.seen == []
    assert decisions(sink)[0]["decision_id"] == info.value.decision.decision_id
    assert assessments(sink)[0]["resource"] == "<not a string: UnfilledResource>"


def test_an_int_too_long_to_print_denies_rather_than_crashing(
    gate: Gate, sink: MemoryAuditSink
) -> None:
    calls = Calls()

    @gate.guard(verb="refund", resource="payments:{order}", agent="support")
    def refund(order: int, amount: int) -> None:
        calls(order)

    with pytest.raises(ActionDenied, match="UnfilledResource"):
        refund(10**5000, 1)
    assert calls.seen == []
    assert decisions(sink)[0]["verdict"] == "deny"


def test_an_int_fills_a_resource(gate: Gate, sink: MemoryAuditSink) -> None:
    @gate.guard(verb="refund", resource="payments:{order}", agent="support")
    def refund(order: int, amount: int) -> None:
        pass

    refund(42, 1)
    assert assessments(sink)[0]["resource"] == "payments:42"


class LyingStr(str):
    __slots__ = ()

    def __str__(self) -> str:
        return "evil"

    def __format__(self, spec: str) -> str:
        return "evil"


class LyingInt(int):
    def __repr__(self) -> str:
        return "evil"

    __str__ = __repr__

    def __format__(self, spec: str) -> str:
        return "evil"


def test_subclasses_fill_the_resource_as_their_base_value(
    gate: Gate, sink: MemoryAuditSink
) -> None:
    @gate.guard(verb="refund", resource="payments:{order}-{ref}", agent="support")
    def refund(order: Any, ref: Any, amount: int) -> None:
        pass

    refund(LyingStr("o-1"), LyingInt(7), 1)
    assert assessments(sink)[0]["resource"] == "payments:o-1-7"


def test_a_resource_the_gate_cannot_accept_is_a_recorded_deny(
    gate: Gate, sink: MemoryAuditSink
) -> None:
    calls = Calls()

    @gate.guard(verb="send", resource="mail:{to}", agent="mailer")
    def send(to: str) -> None:
        calls(to)

    for hostile in ("x" * 5_000, "bob\x00", "bob\ud800", "bob\u202e"):
        with pytest.raises(ActionDenied):
            send(hostile)
    assert calls.seen == []
    assert [d["verdict"] for d in decisions(sink)] == ["deny"] * 4


def test_a_resource_climbing_out_of_its_glob_denies(gate: Gate) -> None:
    calls = Calls()

    @gate.guard(verb="query", resource="db:{table}", agent="analyst")
    def query(table: str, limit: int) -> None:
        calls(table)

    with pytest.raises(ActionDenied):
        query("../../etc", 1)
    assert calls.seen == []


# -- the resource: a callable ------------------------------------------------------------


def test_a_callable_resource_reads_the_snapshot_never_a_lying_argument(
    gate: Gate, sink: MemoryAuditSink
) -> None:
    seen: list[Any] = []

    def resource(arguments: dict[str, Any]) -> str:
        seen.append(type(arguments["to"]))
        return f"mail:{arguments['to']}"  # would call LyingStr.__format__ on the original

    received: list[Any] = []

    @gate.guard(verb="send", resource=resource, agent="mailer")
    def send(to: str) -> None:
        received.append(to)

    send(LyingStr("bob"))
    assert seen == [str]
    assert assessments(sink)[0]["resource"] == "mail:bob"
    assert received == ["bob"]
    assert type(received[0]) is str


def test_a_callable_resource_cannot_change_what_is_decided(
    gate: Gate, sink: MemoryAuditSink
) -> None:
    def resource(arguments: dict[str, Any]) -> str:
        arguments["cc"].append("eve@attacker.example")
        arguments["to"] = "mutated"
        return "mail:bob"

    received: list[Any] = []

    @gate.guard(verb="send", resource=resource, agent="mailer")
    def send(to: str, cc: list[str]) -> None:
        received.append((to, cc))

    send("bob", ["carol"])
    assert received == [("bob", ["carol"])]
    assert assessments(sink)[0]["args_sha256"] == value_sha256({"to": "bob", "cc": ["carol"]})


def test_a_callable_resource_is_not_asked_about_arguments_that_are_not_plain_data(
    gate: Gate, sink: MemoryAuditSink
) -> None:
    seen: list[Any] = []
    calls = Calls()

    @gate.guard(verb="send", resource=lambda a: seen.append(a) or "mail:bob", agent="mailer")
    def send(to: str, attachment: Any) -> None:
        calls(to)

    with pytest.raises(ActionDenied, match="UnfilledResource"):
        send("bob", Hostile())
    assert (seen, calls.seen) == ([], [])
    assert decisions(sink)[0]["verdict"] == "deny"


def test_a_callable_resource_gets_the_bound_arguments_with_defaults(
    gate: Gate, sink: MemoryAuditSink
) -> None:
    seen: list[dict[str, Any]] = []

    def resource(arguments: dict[str, Any]) -> str:
        seen.append(arguments)
        arguments["to"] = "mutated"  # the guard's own copy is not touched
        return f"mail:{arguments['domain']}"

    received: list[str] = []

    @gate.guard(verb="send", resource=resource, agent="mailer")
    def send(to: str, domain: str = "example.org") -> None:
        received.append(to)

    send("bob")
    assert seen == [{"to": "mutated", "domain": "example.org"}]  # its own copy
    assert assessments(sink)[0]["resource"] == "mail:example.org"
    assert received == ["bob"]


class SecretFailure(Exception):
    pass


@pytest.mark.parametrize(
    "resource",
    [
        lambda arguments: None,
        lambda arguments: b"mail:bob",
        lambda arguments: ["mail:bob"],
        lambda arguments: (_ for _ in ()).throw(SecretFailure("password=hunter2")),
    ],
)
def test_a_callable_that_fails_or_returns_no_string_denies(
    gate: Gate, sink: MemoryAuditSink, resource: Any
) -> None:
    calls = Calls()

    @gate.guard(verb="send", resource=resource, agent="mailer")
    def send(to: str) -> None:
        calls(to)

    with pytest.raises(ActionDenied, match="UnfilledResource"):
        send("bob")
    assert calls.seen == []
    assert "hunter2" not in repr(decisions(sink)) + repr(assessments(sink))


def test_a_callable_returning_a_str_subclass_is_read_as_its_base_value(
    gate: Gate, sink: MemoryAuditSink
) -> None:
    @gate.guard(verb="send", resource=lambda arguments: LyingStr("mail:bob"), agent="mailer")
    def send(to: str) -> None:
        pass

    send("bob")
    assert assessments(sink)[0]["resource"] == "mail:bob"


def test_names_given_as_str_subclasses_are_read_as_their_base_value(
    gate: Gate, sink: MemoryAuditSink
) -> None:
    @gate.guard(verb=LyingStr("send"), resource=LyingStr("mail:{to}"), agent=LyingStr("mailer"))
    def send(to: str) -> None:
        pass

    send("bob")
    assessment = assessments(sink)[0]
    assert (assessment["agent"], assessment["verb"], assessment["resource"]) == (
        "mailer",
        "send",
        "mail:bob",
    )


# -- mapping decision.args back onto the parameters ---------------------------------------


def test_every_kind_of_parameter_round_trips(gate: Gate, sink: MemoryAuditSink) -> None:
    received: list[Any] = []

    @gate.guard(verb="any", resource="tool:{a}", agent="bot")
    def tool(a: str, /, b: int, *rest: int, c: str = "c", **options: Any) -> None:
        received.append((a, b, rest, c, options))

    tool("x", 1, 2, 3, c="see", flag=True, a="a positional-only name may be a keyword")
    assert received == [
        ("x", 1, (2, 3), "see", {"flag": True, "a": "a positional-only name may be a keyword"})
    ]
    assert assessments(sink)[0]["resource"] == "tool:x"


def test_the_policy_sees_each_parameter_under_its_own_name(
    gate: Gate, sink: MemoryAuditSink
) -> None:
    seen: list[dict[str, Any]] = []

    def resource(arguments: dict[str, Any]) -> str:
        seen.append(arguments)
        return "tool:x"

    @gate.guard(verb="any", resource=resource, agent="bot")
    def tool(a: str, /, *rest: int, k: int = 0, **options: Any) -> None:
        pass

    tool("x", 1, 2, z=3)
    # As plain data, as the gate snapshots it: *args became a list.
    expected = {"a": "x", "rest": [1, 2], "k": 0, "options": {"z": 3}}
    assert seen == [expected]
    assert assessments(sink)[0]["args_sha256"] == value_sha256(expected)


def test_an_argument_a_narrowing_adds_that_the_function_cannot_take_is_refused(
    gate: Gate, sink: MemoryAuditSink
) -> None:
    calls = Calls()

    @gate.guard(verb="write", resource="db:{table}", agent="writer")
    def write(table: str, **options: Any) -> None:
        calls(table, options)

    with pytest.raises(GuardError, match="no parameter for 'read_only'") as info:
        write("t")
    assert calls.seen == []  # never run without its narrowing
    assert decisions(sink)[0]["decision_id"] in str(info.value)


def test_every_argument_a_narrowing_adds_that_cannot_be_taken_is_named(gate: Gate) -> None:
    calls = Calls()

    @gate.guard(verb="reshape", resource="db:{table}", agent="bot")
    def plain(table: str) -> None:
        calls(table)

    with pytest.raises(GuardError) as info:
        plain("t")
    assert str(info.value).endswith("it has no parameter for 'extra', 'rest'")
    assert calls.seen == []


def test_an_argument_a_narrowing_adds_reaches_a_function_that_takes_it(gate: Gate) -> None:
    received: list[bool] = []

    @gate.guard(verb="write", resource="db:{table}", agent="writer")
    def write(table: str, read_only: bool = False) -> None:
        received.append(read_only)

    write("t")
    assert received == [True]


def test_an_argument_a_narrowing_removes_falls_back_to_its_default(gate: Gate) -> None:
    received: list[Any] = []

    @gate.guard(verb="peek", resource="db:{table}", agent="reader")
    def peek(table: str, limit: int = 7, *, where: str = "all") -> None:
        received.append((table, limit, where))

    peek("t", 500, where="secret = 1")
    assert received == [("t", 7, "all")]


def test_a_removed_required_argument_is_refused(gate: Gate) -> None:
    calls = Calls()

    @gate.guard(verb="peek", resource="db:{table}", agent="reader")
    def peek(table: str, limit: int) -> None:
        calls(table, limit)

    with pytest.raises(GuardError, match="a required parameter is missing"):
        peek("t", 5)
    assert calls.seen == []


def test_after_a_removed_positional_argument_the_rest_go_by_keyword(gate: Gate) -> None:
    received: list[Any] = []

    @gate.guard(verb="pair", resource="db:{b}", agent="bot")
    def pair(a: str = "default-a", b: str = "default-b") -> None:
        received.append((a, b))

    pair("one", "two")
    assert received == [("default-a", "two")]


def test_a_positional_only_argument_after_a_removed_one_is_refused(gate: Gate) -> None:
    calls = Calls()

    @gate.guard(verb="pair", resource="db:{b}", agent="bot")
    def pair(a: str = "default-a", b: str = "default-b", /) -> None:
        calls(a, b)

    with pytest.raises(GuardError, match="positional-only 'b' follows a removed one"):
        pair("one", "two")
    assert calls.seen == []


def test_star_args_after_a_removed_positional_argument_are_refused(gate: Gate) -> None:
    calls = Calls()

    @gate.guard(verb="pair", resource="db:x", agent="bot")
    def pair(a: str = "a", *rest: str) -> None:
        calls(a, rest)

    with pytest.raises(GuardError, match=r"\*rest follows a removed positional argument"):
        pair("one", "two")
    assert calls.seen == []


def test_empty_star_args_after_a_removed_positional_argument_are_fine(gate: Gate) -> None:
    received: list[Any] = []

    @gate.guard(verb="pair", resource="db:x", agent="bot")
    def pair(a: str = "a", *rest: str, b: str = "b") -> None:
        received.append((a, rest, b))

    pair("one", b="two")
    assert received == [("a", (), "two")]


def test_star_args_and_kwargs_reshaped_by_a_narrowing_are_refused(gate: Gate) -> None:
    calls = Calls()

    @gate.guard(verb="reshape", resource="db:x", agent="bot")
    def rest_only(*rest: str) -> None:
        calls(rest)

    @gate.guard(verb="reshape", resource="db:x", agent="bot")
    def extra_only(**extra: str) -> None:
        calls(extra)

    with pytest.raises(GuardError, match=r"\*rest is no longer a list"):
        rest_only("a")
    with pytest.raises(GuardError, match=r"\*\*extra is no longer a dict"):
        extra_only(k="v")
    assert calls.seen == []


def test_a_kwargs_key_that_would_shadow_a_parameter_is_refused(gate: Gate) -> None:
    calls = Calls()

    @gate.guard(verb="shadow", resource="db:x", agent="bot")
    def shadow(limit: int = 5, **extra: Any) -> None:
        calls(limit, extra)

    with pytest.raises(GuardError, match=r"\*\*extra holds a key naming a parameter"):
        shadow(limit=1000)
    assert calls.seen == []


def test_a_kwargs_key_that_would_shadow_a_keyword_only_parameter_is_refused(gate: Gate) -> None:
    calls = Calls()

    @gate.guard(verb="shadow", resource="db:x", agent="bot")
    def shadow(*, limit: int = 5, **extra: Any) -> None:
        calls(limit, extra)

    with pytest.raises(GuardError, match=r"\*\*extra holds a key naming a parameter"):
        shadow(limit=1000)
    assert calls.seen == []


# -- what frameworks introspect ------------------------------------------------------------


def test_metadata_and_signature_are_preserved(gate: Gate) -> None:
    def send(to: str, body: str = "hi", *, urgent: bool = False) -> str:
        """Send a mail."""
        return to

    guarded = gate.guard(verb="send", resource="mail:{to}", agent="mailer")(send)
    assert guarded.__name__ == "send"
    assert guarded.__qualname__ == send.__qualname__
    assert guarded.__doc__ == "Send a mail."
    assert guarded.__module__ == send.__module__
    assert guarded.__wrapped__ is send  # type: ignore[attr-defined]
    assert guarded.__annotations__ == send.__annotations__
    assert inspect.signature(guarded) == inspect.signature(send)
    assert not inspect.iscoroutinefunction(guarded)


def test_an_async_functions_metadata_and_coroutine_ness_are_preserved(gate: Gate) -> None:
    async def fetch(url: str, *, timeout_s: float = 1.0) -> str:
        """Fetch a page."""
        return url

    guarded = gate.guard(verb="fetch", resource="web:{url}", agent="bot")(fetch)
    assert inspect.iscoroutinefunction(guarded)
    assert inspect.signature(guarded) == inspect.signature(fetch)
    assert (guarded.__name__, guarded.__doc__) == ("fetch", "Fetch a page.")


def test_a_partial_of_a_coroutine_function_is_guarded_as_async(gate: Gate) -> None:
    async def fetch(prefix: str, url: str) -> str:
        return prefix + url

    partial = functools.partial(fetch, "p:")
    guarded = gate.guard(verb="any", resource="web:{url}", agent="bot")(partial)
    assert inspect.iscoroutinefunction(guarded)
    assert asyncio.run(guarded("u")) == "p:u"


# -- async -------------------------------------------------------------------------------


def test_async_every_verdict(gate: Gate, sink: MemoryAuditSink) -> None:
    calls = Calls()

    @gate.guard(verb="refund", resource="payments:{order}", agent="support")
    async def refund(order: str, amount: int) -> str:
        calls(order, amount)
        return "done"

    @gate.guard(verb="query", resource="db:{table}", agent="analyst")
    async def query(table: str, limit: int) -> int:
        return limit

    @gate.guard(verb="delete", resource="file:{path}", agent="janitor")
    async def delete(path: str) -> None:
        calls(path)

    async def main() -> None:
        assert await refund("o-1", 5) == "done"
        assert await query("t", 999) == 100
        with pytest.raises(ApprovalPending):
            await refund("o-2", 500)
        with pytest.raises(ActionDenied):
            await delete("/x")

    asyncio.run(main())
    assert calls.seen == [(("o-1", 5), {})]
    assert [d["verdict"] for d in decisions(sink)] == ["allow", "narrow", "pending", "deny"]


def test_async_an_unrecordable_decision_means_the_coroutine_never_runs() -> None:
    gate = Gate(Policy.from_dict(POLICY), sink=BrokenSink())
    calls = Calls()

    @gate.guard(verb="send", resource="mail:{to}", agent="mailer")
    async def send(to: str) -> None:
        calls(to)

    with pytest.raises(AuditError):
        asyncio.run(send("bob"))
    assert calls.seen == []


class HeldSink(MemoryAuditSink):
    """A sink whose decision write waits until the event loop releases it."""

    def __init__(self) -> None:
        super().__init__()
        self.release = threading.Event()
        self.writing = threading.Event()

    def append(self, topic: str, record: Mapping[str, Any]) -> str:
        if topic == "/decisions":
            self.writing.set()
            # A deadlock guard, not a time limit: released at once if the loop runs.
            if not self.release.wait(timeout=30):
                raise TimeoutError("the event loop was blocked")
        return super().append(topic, record)


def test_a_guarded_coroutine_never_blocks_the_loop() -> None:
    sink = HeldSink()
    gate = Gate(Policy.from_dict(POLICY), sink=sink)

    @gate.guard(verb="send", resource="mail:{to}", agent="mailer")
    async def send(to: str) -> str:
        return to

    async def main() -> str:
        task = asyncio.create_task(send("bob"))
        # The check is under way in a worker thread, and the loop still runs this.
        while not sink.writing.is_set():
            await asyncio.sleep(0.001)
        assert not task.done()
        sink.release.set()
        return await task

    assert asyncio.run(main()) == "bob"


def test_an_async_guards_callable_resource_runs_off_the_loop(
    gate: Gate, sink: MemoryAuditSink
) -> None:
    threads: list[int] = []

    def resource(arguments: dict[str, Any]) -> str:
        threads.append(threading.get_ident())
        return f"mail:{arguments['to']}"

    @gate.guard(verb="send", resource=resource, agent="mailer")
    async def send(to: str) -> str:
        return to

    async def main() -> int:
        assert await send("bob") == "bob"
        with pytest.raises(TypeError):
            await send()  # type: ignore[call-arg]
        return threading.get_ident()

    loop_thread = asyncio.run(main())
    assert len(threads) == 1
    assert threads[0] != loop_thread
    assert assessments(sink)[0]["resource"] == "mail:bob"
    assert len(decisions(sink)) == 1  # the call that did not bind decided nothing


def test_an_async_guard_refuses_a_bad_call_and_an_unfillable_resource(gate: Gate) -> None:
    @gate.guard(verb="send", resource="mail:{to}", agent="mailer")
    async def send(to: str) -> str:
        return to

    async def main() -> None:
        with pytest.raises(TypeError):
            await send()  # type: ignore[call-arg]
        with pytest.raises(ActionDenied, match="UnfilledResource"):
            await send(None)  # type: ignore[arg-type]

    asyncio.run(main())
