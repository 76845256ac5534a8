"""`@gate.guard`: gate every call of a tool function (SPEC §3, ADR 0018).

What a guarded call does, in order:

1. bind the call to the function's signature (``inspect.Signature.bind``,
   defaults applied); a call that does not fit raises ``TypeError`` as the
   bare function would, before anything is decided;
2. fill the resource: a format string whose fields name parameters, or a
   callable given the bound arguments as the gate's plain-data snapshot
   (the caller's objects are never handed to it). A value that cannot fill
   the format (not a ``str`` or ``int``), arguments that are not plain data,
   or a callable that raises or returns no string, yield a recorded ``deny``;
3. ask the gate (`Gate.check`, or `Gate.acheck` for a coroutine function, so
   the loop never blocks; a callable resource then runs in a worker thread
   too, since it is host code that may do I/O) about ``Action(agent, verb, resource, args)``, where
   ``args`` holds every parameter under its own name (``*args`` as a list,
   ``**kwargs`` as a dict, both under their parameter's name);
4. on ``deny`` raise `ActionDenied`, on ``pending`` raise `ApprovalPending`;
   an `AuditError` propagates. In none of these is the function called.
   With ``wait=True``, ``pending`` instead waits in ``gate.approvals`` until
   the decision is resolved or expires (its rule's timeout): approved, the
   arguments pass `ApprovalQueue.execute` (bound to what was approved, under
   the same policy, once) and the call goes on; rejected or expired, it raises
   `ActionDenied` carrying the approval;
5. otherwise call the function with ``decision.args`` — the gate's narrowed
   and scrubbed snapshot, never the caller's objects — mapped back onto the
   parameters. Arguments the gate removed are not passed (a default applies);
   arguments it added or reshaped that the function cannot take raise
   `GuardError` and the function is not called: a narrowing is never dropped.

What the module may not do: format a resource with ``str.format`` (no field
of a call's text is ever parsed, and no attribute, index, conversion or
format spec of an argument is ever evaluated), or read an argument through
its own methods (``str``/``int`` subclasses are read as their base type).
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import math
import string
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, TypeVar, cast

from runtime._action import Action, Decision
from runtime._approval import Approval
from runtime._errors import ActionDenied, ApprovalPending, GuardError
from runtime._verdict import RuntimeVerdict

if TYPE_CHECKING:
    from runtime._gate import Gate

__all__ = ["ResourceFunction", "UnfilledResource", "guard"]

F = TypeVar("F", bound=Callable[..., Any])
ResourceFunction = Callable[[dict[str, Any]], str]

_P: Final = inspect.Parameter


class UnfilledResource:
    """Stands in for a resource the guard could not fill, so that the gate denies.

    The gate accepts only a string as a resource; handing it this object makes
    the refusal a recorded ``deny`` ("resource must be a string, not
    UnfilledResource") rather than an unaudited error or a guess at a string a
    policy might allow.
    """

    __slots__ = ()


_UNFILLED: Final = UnfilledResource()
# The snapshot for a callable resource is of the arguments only; the names stand in for
# the action's. Empty, so they pass every gate's name checks (ApprovalBinding does so too).
_NO_NAME: Final = ""


@dataclass(frozen=True, slots=True)
class _Template:
    """A resource format string, parsed once: literal text and the parameter after it."""

    parts: tuple[tuple[str, str | None], ...]

    def fill(self, arguments: Mapping[str, object]) -> str | None:
        """The resource for these bound arguments, or None if a value cannot fill it."""
        out: list[str] = []
        for literal, name in self.parts:
            out.append(literal)
            if name is not None:
                text = _field_text(arguments[name])
                if text is None:
                    return None
                out.append(text)
        return "".join(out)


def _field_text(value: object) -> str | None:
    """A value as resource text, read as its base type; None unless ``str`` or ``int``.

    A ``str`` subclass is safe as it is: `_Template.fill` joins it, and the gate
    reads every name through ``str``'s own methods.
    """
    if isinstance(value, str):
        return value  # str.join reads the characters: no method of a subclass runs
    if isinstance(value, int) and not isinstance(value, bool):
        try:
            return int.__repr__(value)
        except ValueError:  # more digits than the interpreter prints (int_max_str_digits)
            return None
    return None


def _parse_template(resource: str, signature: inspect.Signature, qualname: str) -> _Template:
    """Parse ``resource`` at decoration time; refuse any field but a plain parameter name."""
    try:
        fields = list(string.Formatter().parse(resource))
    except ValueError as exc:
        raise GuardError(qualname, f"resource is not a valid format string ({exc})") from None
    params = signature.parameters
    parts: list[tuple[str, str | None]] = []
    for literal, name, spec, conversion in fields:
        if name is None:
            parts.append((literal, None))
            continue
        if name == "" or name.isdigit():
            problem = "a positional field ({} or {0}); name a parameter instead"
        elif not name.isidentifier():
            problem = f"field {{{name}}} reads an attribute or an index; name a parameter"
        elif name not in params:
            problem = f"field {{{name}}} names no parameter of the function"
        elif params[name].kind in (_P.VAR_POSITIONAL, _P.VAR_KEYWORD):
            problem = f"field {{{name}}} names *args or **kwargs, which cannot fill a resource"
        elif conversion is not None or spec:
            problem = f"field {{{name}}} has a conversion or format spec; none is allowed"
        else:
            parts.append((literal, name))
            continue
        raise GuardError(qualname, f"resource {problem}")
    return _Template(tuple(parts))


def _call_resource(make: ResourceFunction, arguments: dict[str, Any]) -> str | UnfilledResource:
    """The host's resource for these (plain) arguments; unfilled if it fails or gives no str."""
    try:
        made = make(arguments)
    except Exception:  # noqa: BLE001 - host code failed: deny (its message is never recorded)
        return _UNFILLED
    return made if isinstance(made, str) else _UNFILLED  # the gate reads it as a str


class _Guarded:
    """What one guarded function needs on each call, computed once at decoration."""

    __slots__ = (
        "agent",
        "gate",
        "keyword_names",
        "params",
        "qualname",
        "resource",
        "resource_is_callable",
        "signature",
        "verb",
        "wait",
    )

    def __init__(
        self,
        gate: Gate,
        fn: Callable[..., Any],
        *,
        verb: str,
        resource: str | ResourceFunction,
        agent: str,
        wait: bool,
    ) -> None:
        self.qualname = getattr(fn, "__qualname__", type(fn).__name__)
        for field, value in (("verb", verb), ("agent", agent)):
            if not isinstance(value, str):
                raise GuardError(self.qualname, f"{field} must be a string")
        if type(wait) is not bool:
            raise GuardError(self.qualname, "wait must be True or False")
        self.wait = wait
        try:
            self.signature = inspect.signature(fn)
        except (TypeError, ValueError):
            raise GuardError(self.qualname, "its signature cannot be read") from None
        self.params = tuple(self.signature.parameters.values())
        # A **kwargs key may repeat a positional-only name (f(1, a=2) is legal), not these.
        self.keyword_names = frozenset(
            p.name for p in self.params if p.kind in (_P.POSITIONAL_OR_KEYWORD, _P.KEYWORD_ONLY)
        )
        self.gate = gate
        self.verb = verb  # the gate reads names through str's own methods
        self.agent = agent
        self.resource_is_callable = not isinstance(resource, str)
        if isinstance(resource, str):
            self.resource: _Template | ResourceFunction = _parse_template(
                resource, self.signature, self.qualname
            )
        elif callable(resource):
            self.resource = resource
        else:
            raise GuardError(self.qualname, "resource must be a format string or a callable")

    def action(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Action:
        """The action one call asks for (steps 1-2). Raises TypeError as the function would."""
        bound = self.signature.bind(*args, **kwargs)
        bound.apply_defaults()
        arguments: dict[str, Any] = dict(bound.arguments)
        resource: str | UnfilledResource
        if isinstance(self.resource, _Template):
            text = self.resource.fill(arguments)
            resource = _UNFILLED if text is None else text
        else:
            # The callable reads a snapshot taken as the gate takes it, never the caller's
            # objects, so an argument that answers differently on a second read cannot pick
            # the resource; the gate decides on that same snapshot. The callable gets a copy
            # of its own, so what it does to it changes nothing that is decided.
            snapshotter = self.gate._snapshotter
            try:
                arguments = snapshotter.take(_NO_NAME, _NO_NAME, _NO_NAME, arguments).args
                shown = snapshotter.take(_NO_NAME, _NO_NAME, _NO_NAME, arguments).args
            except Exception:  # noqa: BLE001 - not plain data: the gate denies (no resource)
                return Action(self.agent, self.verb, cast(str, _UNFILLED), arguments)
            resource = _call_resource(self.resource, shown)
        # An unfillable resource goes to the gate as a non-string: a recorded deny.
        return Action(self.agent, self.verb, cast(str, resource), arguments)

    def permitted(self, decision: Decision) -> tuple[list[Any], dict[str, Any]]:
        """Step 4-5: raise unless permitted, else ``decision.args`` as a call of the function."""
        if decision.verdict is RuntimeVerdict.DENY:
            raise ActionDenied(decision)
        if decision.verdict is RuntimeVerdict.PENDING:
            if not self.wait:
                raise ApprovalPending(decision)
            approval = self.gate.approvals.wait(decision.decision_id, math.inf)
            return self.approved(decision, approval)
        return self.call_args(decision, decision.args)

    async def permitted_async(self, decision: Decision) -> tuple[list[Any], dict[str, Any]]:
        """`permitted` for a coroutine function: the wait holds no thread and never blocks."""
        if decision.verdict is RuntimeVerdict.PENDING and self.wait:
            approval = await self.gate.approvals.wait_async(decision.decision_id, math.inf)
            # execute may read the store (a file, for a SQLite store): off the loop.
            return await asyncio.to_thread(self.approved, decision, approval)
        return self.permitted(decision)

    def approved(self, decision: Decision, approval: Approval) -> tuple[list[Any], dict[str, Any]]:
        """The call an approval lets run, or `ActionDenied` for a rejection or an expiry."""
        if not approval.approved:
            raise ActionDenied(decision, approval)
        return self.call_args(decision, self.gate.approvals.execute(approval, decision.args))

    def call_args(
        self, decision: Decision, args: Mapping[str, Any]
    ) -> tuple[list[Any], dict[str, Any]]:
        """Map the decided ``args`` onto the parameters; GuardError if they do not fit."""
        remaining = dict(args)
        positional: list[Any] = []
        keywords: dict[str, Any] = {}
        in_order = True  # every positional parameter so far is present
        for param in self.params:
            if param.name not in remaining:
                # (*args may go missing too, but no positional parameter follows it.)
                if param.kind in (_P.POSITIONAL_ONLY, _P.POSITIONAL_OR_KEYWORD):
                    in_order = False
                continue
            value = remaining.pop(param.name)
            kind = param.kind
            if kind is _P.POSITIONAL_ONLY or (kind is _P.POSITIONAL_OR_KEYWORD and in_order):
                if not in_order:
                    self._refuse(decision, f"positional-only {param.name!r} follows a removed one")
                positional.append(value)
            elif kind is _P.VAR_POSITIONAL:
                if type(value) is not list:
                    self._refuse(decision, f"*{param.name} is no longer a list")
                if value and not in_order:
                    self._refuse(decision, f"*{param.name} follows a removed positional argument")
                positional.extend(value)
            elif kind is _P.VAR_KEYWORD:
                if type(value) is not dict:
                    self._refuse(decision, f"**{param.name} is no longer a dict")
                if not self.keyword_names.isdisjoint(value):
                    self._refuse(decision, f"**{param.name} holds a key naming a parameter")
                keywords.update(value)
            else:  # keyword-only, or positional-or-keyword after a removed one
                keywords[param.name] = value
        if remaining:
            added = ", ".join(sorted(map(repr, remaining)))
            self._refuse(decision, f"it has no parameter for {added}")
        try:
            self.signature.bind(*positional, **keywords)
        except TypeError:
            self._refuse(decision, "a required parameter is missing")
        return positional, keywords

    def _refuse(self, decision: Decision, problem: str) -> None:
        raise GuardError(
            self.qualname, f"decision {decision.decision_id}'s arguments do not fit: {problem}"
        )


def guard(
    gate: Gate, *, verb: str, resource: str | ResourceFunction, agent: str, wait: bool
) -> Callable[[F], F]:
    """Return a decorator that gates every call of a sync or async tool function.

    Args:
        gate: the gate to ask.
        verb: the action's verb (often the tool's name).
        resource: a format string whose ``{fields}`` each name a parameter
            (``"mail:{to}"``), filled with that argument (a ``str`` or an
            ``int``, read as its base type); or a callable taking a dict of
            the bound arguments (defaults applied) and returning the resource.
        agent: who acts.
        wait: on ``pending``, wait for the approval (until it is resolved or
            expires) instead of raising `ApprovalPending` (`Gate.guard` defaults
            it to False, and is the only caller).

    Returns:
        a decorator; the function it returns keeps the original's name,
        docstring, ``inspect.signature`` and coroutine-ness, and calls the
        original with ``decision.args`` when the verdict permits it.

    Raises:
        GuardError: at decoration, a resource field that is positional, reads
            an attribute or index, names no parameter or ``*args``/``**kwargs``,
            or has a conversion or format spec; a malformed format string; a
            non-string verb or agent; an async generator function. At call
            time, arguments the gate returned that the function cannot take.
        ActionDenied: (at call time) the verdict is ``deny``; with ``wait``, the
            approval was rejected or expired.
        ApprovalPending: (at call time) the verdict is ``pending`` and ``wait`` is False.
        ApprovalError: (at call time, with ``wait``) the approved arguments no
            longer pass `ApprovalQueue.execute` (another policy, a second run).
        AuditError: (at call time) the decision could not be recorded.
    """

    def decorate(fn: F) -> F:
        if not callable(fn):
            raise GuardError(type(fn).__name__, "only a function can be guarded")
        if inspect.isasyncgenfunction(fn):
            raise GuardError(fn.__qualname__, "an async generator function cannot be guarded")
        guarded = _Guarded(gate, fn, verb=verb, resource=resource, agent=agent, wait=wait)
        if inspect.iscoroutinefunction(fn):
            coroutine_fn = cast(Callable[..., Awaitable[Any]], fn)

            async def guarded_coroutine(*args: Any, **kwargs: Any) -> Any:
                if guarded.resource_is_callable:  # host code and a snapshot: off the loop
                    action = await asyncio.to_thread(guarded.action, args, kwargs)
                else:
                    action = guarded.action(args, kwargs)
                decision = await gate.acheck(action)
                positional, keywords = await guarded.permitted_async(decision)
                return await coroutine_fn(*positional, **keywords)

            wrapper: Callable[..., Any] = guarded_coroutine
        else:

            def guarded_call(*args: Any, **kwargs: Any) -> Any:
                decision = gate.check(guarded.action(args, kwargs))
                positional, keywords = guarded.permitted(decision)
                return fn(*positional, **keywords)

            wrapper = guarded_call
        # Sets __wrapped__, through which inspect.signature reports the original's.
        functools.update_wrapper(wrapper, fn)
        return cast(F, wrapper)

    return decorate
