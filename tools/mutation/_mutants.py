"""The mutants of one module: the operators, what is never mutated, and how a mutant is made.

Operators (the name appears in every report):

1. ``arith`` -- ``+`` <-> ``-``, ``*`` -> ``/``, ``/`` -> ``*``, ``//`` -> ``*``,
   ``%`` -> ``//``, ``**`` -> ``*``, ``<<`` <-> ``>>``, ``&`` <-> ``|``, ``^`` -> ``&``,
   in expressions and augmented assignments (``+=`` -> ``-=``).
2. ``compare-boundary`` -- ``<`` <-> ``<=``, ``>`` <-> ``>=`` (an off-by-one).
3. ``compare-negate`` -- ``<`` -> ``>=``, ``<=`` -> ``>``, ``>`` -> ``<=``, ``>=`` -> ``<``,
   ``==`` <-> ``!=``, ``is`` <-> ``is not``, ``in`` <-> ``not in``.
4. ``bool-swap`` -- ``and`` <-> ``or``.
5. ``not-removed`` -- ``not x`` -> ``x``.
6. ``number`` -- a number ``n`` -> ``n + 1``, ``n - 1``, ``0`` (those that differ from ``n``).
7. ``bool-constant`` -- ``True`` <-> ``False``.
8. ``string`` -- a string or bytes literal, or a whole f-string, emptied; an empty one
   becomes ``"x"``.
9. ``return-none`` -- ``return x`` -> ``return None``.
10. ``statement-removed`` -- a ``raise``, ``continue``, ``break`` or call statement -> ``pass``.
11. ``branch-forced`` -- the test of ``if``/``elif`` and of a conditional expression ->
    ``True`` and -> ``False``; a comprehension's ``if`` filter -> ``True``.
12. ``slice`` -- each bound of a slice removed; a bound that is not a number literal
    (those are covered by ``number``) also ``+ 1`` and ``- 1``.

Never mutated, each for a reason (ADR 0014):

* docstrings and other bare constant statements: they do nothing at run time;
* type annotations (parameters, returns, annotated assignments), the value of a
  ``TypeAlias``, ``Literal[...]`` anywhere (an alias may be written without
  ``TypeAlias``), the type argument of ``cast`` and ``TypeVar``/``NewType`` calls: types
  are checked by mypy, not executed;
* ``__all__``, ``__slots__`` and ``__match_args__``: the import surface has its own test;
* logging calls (``<...log...>.info(...)`` and its siblings, ``get_event_log(...)``,
  ``logging.getLogger(...)``): the SDK's own events are best-effort diagnostics, not the
  contract -- a module whose events *are* contract opts back in (``mutate_logging``);
* ``assert`` statements: in ``src/`` they only narrow types for mypy (pyproject's ``S101``
  reason), never check input;
* ``if TYPE_CHECKING:`` bodies and ``if __name__ == "__main__":`` blocks;
* the ``slots=`` argument of ``@dataclass(...)``: memory layout, not behaviour;
* removing the only statement of an ``if`` without ``else``: the ``branch-forced`` ``False``
  mutant already deletes it;
* ``while`` tests are not forced (``True`` only hangs); their comparisons are mutated.

A mutant is made by splicing ``ast.unparse`` of the replacement node into the original
text over the node's span only, so comments, layout and every other line stay as they
are and the diff is a line or two. The spliced text is parsed again and must give the
original tree with exactly that one node replaced; if it does not (operator precedence),
the replacement is put in parentheses and checked again, and a mutant that still does
not match is dropped and counted (`Generated.unspliceable`), never run as something else.

A mutant's id is ``<module>:<qualname>:<8 hex>``, the hex a hash of the operator, the
original and replacement nodes and their occurrence count within the function: edits
elsewhere in the module do not change it.
"""

from __future__ import annotations

import ast
import difflib
import hashlib
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["Generated", "Mutant", "generate_mutants"]

_BINOPS: dict[type[ast.operator], type[ast.operator]] = {
    ast.Add: ast.Sub,
    ast.Sub: ast.Add,
    ast.Mult: ast.Div,
    ast.Div: ast.Mult,
    ast.FloorDiv: ast.Mult,
    ast.Mod: ast.FloorDiv,
    ast.Pow: ast.Mult,
    ast.LShift: ast.RShift,
    ast.RShift: ast.LShift,
    ast.BitAnd: ast.BitOr,
    ast.BitOr: ast.BitAnd,
    ast.BitXor: ast.BitAnd,
}
_BOUNDARY: dict[type[ast.cmpop], type[ast.cmpop]] = {
    ast.Lt: ast.LtE,
    ast.LtE: ast.Lt,
    ast.Gt: ast.GtE,
    ast.GtE: ast.Gt,
}
_NEGATE: dict[type[ast.cmpop], type[ast.cmpop]] = {
    ast.Lt: ast.GtE,
    ast.LtE: ast.Gt,
    ast.Gt: ast.LtE,
    ast.GtE: ast.Lt,
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
    ast.Is: ast.IsNot,
    ast.IsNot: ast.Is,
    ast.In: ast.NotIn,
    ast.NotIn: ast.In,
}
_SKIPPED_NAMES = frozenset({"__all__", "__slots__", "__match_args__"})
_LOG_METHODS = frozenset(
    {"debug", "info", "warning", "warn", "error", "exception", "critical", "log", "msg"}
)
_LOGGER_FACTORIES = frozenset({"get_event_log", "getLogger"})
_TYPE_CALLS = frozenset({"TypeVar", "NewType"})
_SHORT = 60


@dataclass(frozen=True, slots=True)
class Mutant:
    """One mutant of a module.

    Attributes:
        id: stable id, ``<module>:<qualname>:<8 hex>``.
        module: the dotted module name (``runtime._glob``).
        qualname: the enclosing function or class (``<module>`` at module level).
        operator: the operator's name (``compare-negate``...).
        line: the first line of the mutated node in the original file.
        description: ``before -> after``, shortened.
        source: the whole mutated module.
        diff: a unified diff against the original, one line of context.
    """

    id: str
    module: str
    qualname: str
    operator: str
    line: int
    description: str
    source: str
    diff: str


@dataclass(frozen=True, slots=True)
class Generated:
    """Every mutant of a module, in source order.

    Attributes:
        mutants: the mutants (distinct mutated texts).
        unspliceable: mutants dropped because no splice reproduced the intended tree.
    """

    mutants: tuple[Mutant, ...]
    unspliceable: int


@dataclass(frozen=True, slots=True)
class _Site:
    node: ast.AST
    replacement: ast.AST
    operator: str
    qualname: str
    removal: bool


def _name_of(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Call):
        return _name_of(node.func)
    return ""


def _is_logging_call(call: ast.Call) -> bool:
    func = call.func
    if _name_of(func) in _LOGGER_FACTORIES:
        return True
    return (
        isinstance(func, ast.Attribute)
        and func.attr in _LOG_METHODS
        and "log" in _name_of(func.value).lower()
    )


def _const(value: int | float) -> ast.expr:
    """A literal node as the parser would build it (negative numbers are a unary minus)."""
    if isinstance(value, int | float) and not isinstance(value, bool) and value < 0:
        return ast.UnaryOp(op=ast.USub(), operand=ast.Constant(value=-value))
    return ast.Constant(value=value)


def _number_variants(value: int | float) -> list[int | float]:
    out: list[int | float] = []
    for candidate in (value + 1, value - 1, value * 0):
        if candidate != value and candidate not in out:
            out.append(candidate)
    return out


def _is_type_checking(test: ast.expr) -> bool:
    return _name_of(test) == "TYPE_CHECKING" and isinstance(test, ast.Name | ast.Attribute)


def _is_main_guard(test: ast.expr) -> bool:
    return (
        isinstance(test, ast.Compare)
        and isinstance(test.left, ast.Name)
        and test.left.id == "__name__"
    )


def _targets_skipped_name(targets: Iterable[ast.expr]) -> bool:
    return any(isinstance(t, ast.Name) and t.id in _SKIPPED_NAMES for t in targets)


class _SiteFinder:
    """Walks a module in source order and lists every mutation site, honouring the skips."""

    def __init__(self, *, mutate_logging: bool) -> None:
        self._mutate_logging = mutate_logging
        self._scope: list[str] = []
        self.sites: list[_Site] = []

    # -- sites ---------------------------------------------------------------------------

    def _add(
        self, node: ast.AST, replacement: ast.AST, operator: str, *, removal: bool = False
    ) -> None:
        qualname = ".".join(self._scope) or "<module>"
        self.sites.append(_Site(node, replacement, operator, qualname, removal))

    def _remove(self, stmt: ast.stmt) -> None:
        self._add(stmt, ast.Pass(), "statement-removed", removal=True)

    def _force(self, test: ast.expr, *, both: bool = True) -> None:
        if isinstance(test, ast.Constant):
            return
        self._add(test, ast.Constant(value=True), "branch-forced")
        if both:
            self._add(test, ast.Constant(value=False), "branch-forced")

    # -- statements ----------------------------------------------------------------------

    def body(self, stmts: list[ast.stmt], *, sole_if_body: bool = False) -> None:
        for stmt in stmts:
            self._stmt(stmt, removable=not (sole_if_body and len(stmts) == 1))

    def _stmt(self, stmt: ast.stmt, *, removable: bool) -> None:
        if isinstance(stmt, ast.Expr):
            value = stmt.value
            if isinstance(value, ast.Constant):
                return  # a docstring, or a string documenting the attribute above
            call = value.value if isinstance(value, ast.Await) else value
            if isinstance(call, ast.Call):
                if _is_logging_call(call) and not self._mutate_logging:
                    return
                if removable:
                    self._remove(stmt)
            self.expr(value)
        elif isinstance(stmt, ast.Assert | ast.Import | ast.ImportFrom | ast.Global | ast.Nonlocal):
            return
        elif isinstance(stmt, ast.Assign):
            if _targets_skipped_name(stmt.targets):
                return
            for target in stmt.targets:
                self._target(target)
            self.expr(stmt.value)
        elif isinstance(stmt, ast.AnnAssign):
            if _targets_skipped_name([stmt.target]) or _name_of(stmt.annotation) == "TypeAlias":
                return
            self._target(stmt.target)
            if stmt.value is not None:
                self.expr(stmt.value)
        elif isinstance(stmt, ast.AugAssign):
            new_op = _BINOPS.get(type(stmt.op))
            if new_op is not None:
                self._add(
                    stmt, ast.AugAssign(target=stmt.target, op=new_op(), value=stmt.value), "arith"
                )
            self._target(stmt.target)
            self.expr(stmt.value)
        elif isinstance(stmt, ast.Return):
            if stmt.value is not None:
                if not (isinstance(stmt.value, ast.Constant) and stmt.value.value is None):
                    self._add(stmt.value, ast.Constant(value=None), "return-none")
                self.expr(stmt.value)
        elif isinstance(stmt, ast.Raise):
            if removable:
                self._remove(stmt)
            for part in (stmt.exc, stmt.cause):
                if part is not None:
                    self.expr(part)
        elif isinstance(stmt, ast.Continue | ast.Break):
            if removable:
                self._remove(stmt)
        elif isinstance(stmt, ast.If):
            self._if(stmt)
        elif isinstance(stmt, ast.For | ast.AsyncFor):
            self.expr(stmt.iter)
            self.body(stmt.body)
            self.body(stmt.orelse)
        elif isinstance(stmt, ast.While):
            self.expr(stmt.test)
            self.body(stmt.body)
            self.body(stmt.orelse)
        elif isinstance(stmt, ast.With | ast.AsyncWith):
            for item in stmt.items:
                self.expr(item.context_expr)
            self.body(stmt.body)
        elif isinstance(stmt, ast.Try | ast.TryStar):
            self.body(stmt.body)
            for handler in stmt.handlers:
                self.body(handler.body)
            self.body(stmt.orelse)
            self.body(stmt.finalbody)
        elif isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
            self._decorators(stmt.decorator_list)
            for default in [*stmt.args.defaults, *stmt.args.kw_defaults]:
                if default is not None:
                    self.expr(default)
            self._scope.append(stmt.name)
            self.body(stmt.body)
            self._scope.pop()
        elif isinstance(stmt, ast.ClassDef):
            self._decorators(stmt.decorator_list)
            self._scope.append(stmt.name)
            self.body(stmt.body)
            self._scope.pop()
        elif isinstance(stmt, ast.Match):
            self.expr(stmt.subject)
            for case in stmt.cases:
                if case.guard is not None:
                    self.expr(case.guard)
                self.body(case.body)
        elif isinstance(stmt, ast.Delete):
            for target in stmt.targets:
                self._target(target)
        # Pass and anything newer: nothing to mutate.

    def _if(self, stmt: ast.If) -> None:
        if _is_main_guard(stmt.test):
            return
        if _is_type_checking(stmt.test):
            self.body(stmt.orelse)
            return
        self._force(stmt.test)
        self.expr(stmt.test)
        self.body(stmt.body, sole_if_body=not stmt.orelse)
        self.body(stmt.orelse)

    def _decorators(self, decorators: list[ast.expr]) -> None:
        for decorator in decorators:
            if isinstance(decorator, ast.Call) and _name_of(decorator.func) == "dataclass":
                for keyword in decorator.keywords:
                    if keyword.arg != "slots":
                        self.expr(keyword.value)
            else:
                self.expr(decorator)

    def _target(self, target: ast.expr) -> None:
        # Names bind, they are not values; subscripts and attributes hold expressions.
        if isinstance(target, ast.Subscript):
            self.expr(target.value)
            self.expr(target.slice)
        elif isinstance(target, ast.Attribute):
            self.expr(target.value)
        elif isinstance(target, ast.Tuple | ast.List):
            for element in target.elts:
                self._target(element)

    # -- expressions ---------------------------------------------------------------------

    def expr(self, node: ast.expr) -> None:
        if isinstance(node, ast.Constant):
            self._constant(node)
        elif isinstance(node, ast.JoinedStr):
            self._add(node, ast.Constant(value=""), "string")
        elif isinstance(node, ast.BinOp):
            new_op = _BINOPS.get(type(node.op))
            if new_op is not None:
                self._add(node, ast.BinOp(left=node.left, op=new_op(), right=node.right), "arith")
            self.expr(node.left)
            self.expr(node.right)
        elif isinstance(node, ast.BoolOp):
            swapped: ast.boolop = ast.Or() if isinstance(node.op, ast.And) else ast.And()
            self._add(node, ast.BoolOp(op=swapped, values=node.values), "bool-swap")
            for value in node.values:
                self.expr(value)
        elif isinstance(node, ast.UnaryOp):
            if isinstance(node.op, ast.Not):
                self._add(node, node.operand, "not-removed")
            self.expr(node.operand)
        elif isinstance(node, ast.Compare):
            self._compare(node)
        elif isinstance(node, ast.IfExp):
            self._force(node.test)
            for part in (node.test, node.body, node.orelse):
                self.expr(part)
        elif isinstance(node, ast.Call):
            self._call(node)
        elif isinstance(node, ast.Slice):
            self._slice(node)
        elif isinstance(node, ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp):
            self._comprehension(node)
        elif isinstance(node, ast.Subscript) and _name_of(node.value) == "Literal":
            return  # `Literal["a", "b"]` is a type (an alias written without TypeAlias)
        elif isinstance(node, ast.Lambda):
            for default in [*node.args.defaults, *node.args.kw_defaults]:
                if default is not None:
                    self.expr(default)
            self.expr(node.body)
        else:
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.expr):
                    self.expr(child)
                elif isinstance(child, ast.keyword):
                    self.expr(child.value)

    def _constant(self, node: ast.Constant) -> None:
        value = node.value
        if isinstance(value, bool):
            self._add(node, ast.Constant(value=not value), "bool-constant")
        elif isinstance(value, int | float):
            for variant in _number_variants(value):
                self._add(node, _const(variant), "number")
        elif isinstance(value, str):
            self._add(node, ast.Constant(value="" if value else "x"), "string")
        elif isinstance(value, bytes):
            self._add(node, ast.Constant(value=b"" if value else b"x"), "string")
        # None, Ellipsis, complex: nothing meaningful to change to.

    def _compare(self, node: ast.Compare) -> None:
        for index, op in enumerate(node.ops):
            for table, name in ((_BOUNDARY, "compare-boundary"), (_NEGATE, "compare-negate")):
                new_op = table.get(type(op))
                if new_op is None:
                    continue
                ops = [*node.ops[:index], new_op(), *node.ops[index + 1 :]]
                self._add(
                    node, ast.Compare(left=node.left, ops=ops, comparators=node.comparators), name
                )
        self.expr(node.left)
        for comparator in node.comparators:
            self.expr(comparator)

    def _call(self, node: ast.Call) -> None:
        name = _name_of(node.func)
        if (_is_logging_call(node) and not self._mutate_logging) or name in _TYPE_CALLS:
            return
        args = node.args[1:] if name == "cast" else node.args
        self.expr(node.func)
        for arg in args:
            self.expr(arg)
        for keyword in node.keywords:
            self.expr(keyword.value)

    def _slice(self, node: ast.Slice) -> None:
        for bound in ("lower", "upper"):
            value = getattr(node, bound)
            if value is None:
                continue
            kept = {b: getattr(node, b) for b in ("lower", "upper", "step") if b != bound}
            self._add(node, ast.Slice(**kept), "slice")
            if not (isinstance(value, ast.Constant) and isinstance(value.value, int)):
                for op in (ast.Add(), ast.Sub()):
                    moved = ast.BinOp(left=value, op=op, right=ast.Constant(value=1))
                    self._add(node, ast.Slice(**{**kept, bound: moved}), "slice")
        for part in (node.lower, node.upper, node.step):
            if part is not None:
                self.expr(part)

    def _comprehension(
        self, node: ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp
    ) -> None:
        for generator in node.generators:
            self.expr(generator.iter)
            for condition in generator.ifs:
                self._force(condition, both=False)
                self.expr(condition)
        if isinstance(node, ast.DictComp):
            self.expr(node.key)
            self.expr(node.value)
        else:
            self.expr(node.elt)


class _Splicer:
    """Rewrites one node's span of the original text and checks the result's tree.

    The check re-parses only the top-level statement holding the node (its lines, from
    its first decorator): the text around it is unchanged, and a function-sized parse
    keeps generating a large module's mutants fast.
    """

    def __init__(self, text: str, tree: ast.Module) -> None:
        self._data = text.encode("utf-8")
        self._starts = [0]
        for line in self._data.splitlines(keepends=True):
            self._starts.append(self._starts[-1] + len(line))
        self._parents: dict[int, tuple[ast.AST, str, int | None]] = {}
        for parent in ast.walk(tree):
            for name, value in ast.iter_fields(parent):
                if isinstance(value, list):
                    for index, item in enumerate(value):
                        if isinstance(item, ast.AST):
                            self._parents[id(item)] = (parent, name, index)
                elif isinstance(value, ast.AST):
                    self._parents[id(value)] = (parent, name, None)
        self._segments: dict[int, tuple[int, int]] = {}
        body = tree.body
        for index, stmt in enumerate(body):
            first = min([stmt.lineno, *(d.lineno for d in getattr(stmt, "decorator_list", []))])
            last = stmt.end_lineno or stmt.lineno
            alone = (index == 0 or (body[index - 1].end_lineno or 0) < first) and (
                index == len(body) - 1 or body[index + 1].lineno > last
            )
            if alone and stmt.col_offset == 0:
                self._segments[id(stmt)] = (self._starts[first - 1], self._starts[last])

    def _offset(self, line: int, col: int) -> int:
        return self._starts[line - 1] + col

    def _top(self, node: ast.AST) -> ast.AST:
        while True:
            parent, _, _ = self._parents[id(node)]
            if isinstance(parent, ast.Module):
                return node
            node = parent

    def _expected_dump(self, top: ast.AST, node: ast.AST, replacement: ast.AST) -> str:
        parent, name, index = self._parents[id(node)]
        holder: list[ast.AST] | None = getattr(parent, name) if index is not None else None
        if holder is not None and index is not None:
            holder[index] = replacement
        else:
            setattr(parent, name, replacement)
        try:
            return ast.dump(top)
        finally:
            if holder is not None and index is not None:
                holder[index] = node
            else:
                setattr(parent, name, node)

    def splice(self, node: ast.AST, replacement: ast.AST, *, removal: bool) -> str | None:
        top = self._top(node)
        seg_start, seg_end = self._segments.get(id(top), (0, len(self._data)))
        whole = (seg_start, seg_end) == (0, len(self._data))
        if whole:
            expected = self._expected_dump(self._parents[id(top)][0], node, replacement)
        elif top is node:
            expected = ast.dump(replacement)
        else:
            expected = self._expected_dump(top, node, replacement)
        text = "pass" if removal else ast.unparse(replacement)
        start = self._offset(node.lineno, node.col_offset)  # type: ignore[attr-defined]
        end = self._offset(node.end_lineno, node.end_col_offset)  # type: ignore[attr-defined]
        for candidate in (text, f"({text})"):
            segment = (
                self._data[seg_start:start] + candidate.encode("utf-8") + self._data[end:seg_end]
            )
            try:
                parsed = ast.parse(segment)
            except SyntaxError:
                continue
            if whole:
                got = ast.dump(parsed)
            else:
                got = ast.dump(parsed.body[0]) if len(parsed.body) == 1 else ""
            if got == expected:
                return (self._data[:seg_start] + segment + self._data[seg_end:]).decode("utf-8")
        return None


def _short(node: ast.AST) -> str:
    text = " ".join(ast.unparse(node).split())
    return text if len(text) <= _SHORT else text[: _SHORT - 3] + "..."


def _describe(site: _Site) -> str:
    if site.removal:
        return f"removed `{_short(site.node)}`"
    return f"`{_short(site.node)}` -> `{_short(site.replacement)}`"


def _diff(original: str, mutated: str) -> str:
    lines = difflib.unified_diff(
        original.splitlines(keepends=True), mutated.splitlines(keepends=True), n=1
    )
    body = [line if line.endswith("\n") else line + "\n" for line in list(lines)[2:]]
    return "".join(body)


def generate_mutants(
    source: str,
    module: str,
    *,
    mutate_logging: bool = False,
) -> Generated:
    """Every mutant of one module's source, in source order.

    Args:
        source: the module's text.
        module: its dotted name (``runtime._glob``), the first part of every id.
        mutate_logging: also mutate logging calls (for modules whose events are contract).

    Returns:
        The mutants, each a distinct text, and how many sites could not be spliced.

    Raises:
        SyntaxError: ``source`` is not valid Python.
    """
    tree = ast.parse(source)
    finder = _SiteFinder(mutate_logging=mutate_logging)
    finder.body(tree.body)
    splicer = _Splicer(source, tree)
    seen_keys: Counter[tuple[str, str, str, str]] = Counter()
    seen_texts: set[str] = set()
    mutants: list[Mutant] = []
    unspliceable = 0
    for site in finder.sites:
        before, after = ast.dump(site.node), ast.dump(site.replacement)
        key = (site.qualname, site.operator, before, after)
        occurrence = seen_keys[key]
        seen_keys[key] += 1
        digest = hashlib.sha256(
            "\x00".join([site.operator, before, after, str(occurrence)]).encode()
        ).hexdigest()[:8]
        mutant_id = f"{module}:{site.qualname}:{digest}"
        mutated = splicer.splice(site.node, site.replacement, removal=site.removal)
        if mutated is None:
            unspliceable += 1
            continue
        if mutated in seen_texts:
            continue
        seen_texts.add(mutated)
        mutants.append(
            Mutant(
                id=mutant_id,
                module=module,
                qualname=site.qualname,
                operator=site.operator,
                line=site.node.lineno,  # type: ignore[attr-defined]
                description=_describe(site),
                source=mutated,
                diff=_diff(source, mutated),
            )
        )
    return Generated(mutants=tuple(mutants), unspliceable=unspliceable)
