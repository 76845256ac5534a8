"""Checking a Cedar policy: every problem, at its statement's line (issue 11, ADR 0033).

cedarpy reports only the first syntax error of a text, and without a
position. So the text is split into its statements first (`cedar_statements`:
a statement ends at a ``;`` outside strings and ``//`` comments), and each is
parsed on its own: every statement that does not parse is one problem, at the
line it starts on. The statements that parse are then checked as
`CedarPolicy` checks them — their ``@ghost_*`` annotations, then the rules
those make, through the TOML loader's collecting mode — and, with a schema,
validated by cedarpy, whose errors name the statement. A problem inside a
statement is placed on the line of the annotation it names, else the
statement's first line. Cedar's own messages carry no position, so a
syntax error is placed at its statement, not its token.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Final

from runtime._errors import PolicyError
from runtime._frozen import plain_copy
from runtime._policy_check import PolicyProblem
from runtime._policy_load import collect_policy_problems

__all__ = ["CedarStatement", "cedar_statements", "check_cedar_text"]

_ANNOTATION: Final = re.compile(r"@([A-Za-z_][A-Za-z0-9_]*)")
_ID: Final = re.compile(r'@id\s*\(\s*"((?:[^"\\]|\\.)*)"\s*\)')


@dataclass(frozen=True, slots=True)
class CedarStatement:
    """One statement of a Cedar text.

    Attributes:
        line: the 1-based line it starts on (its first annotation or keyword).
        text: its text, from its first character to its ``;`` (included, if any).
    """

    line: int
    text: str

    def line_of(self, annotation: str) -> int:
        """The line of ``@annotation`` in the statement, else its first line."""
        for found in _ANNOTATION.finditer(self.text):
            if found.group(1) == annotation:
                return self.line + self.text[: found.start()].count("\n")
        return self.line


def cedar_statements(text: str) -> list[CedarStatement]:
    """Split Cedar text into its statements (strings and ``//`` comments respected)."""
    statements: list[CedarStatement] = []
    start: int | None = None
    index, size = 0, len(text)
    while index < size:
        char = text[index]
        if char == "/" and text.startswith("//", index):
            end = text.find("\n", index)
            index = size if end < 0 else end
            continue
        if start is None and not char.isspace():
            start = index
        if char == '"':
            index += 1
            while index < size and text[index] != '"':
                index += 2 if text[index] == "\\" else 1
        elif char == ";" and start is not None:
            statements.append(
                CedarStatement(text.count("\n", 0, start) + 1, text[start : index + 1])
            )
            start = None
        index += 1
    if start is not None:
        statements.append(CedarStatement(text.count("\n", 0, start) + 1, text[start:]))
    return statements


def check_cedar_text(
    text: str, name: str, *, schema: str | None = None, policy_id: str = "cedar"
) -> tuple[tuple[PolicyProblem, ...], int]:
    """Every problem of a Cedar policy text, and how many statements it has.

    Args:
        text: the Cedar text.
        name: the name problems are reported under.
        schema: a Cedar schema's text (Cedar or JSON) to validate against.
        policy_id: the id a `CedarPolicy` of it would record.
    """
    from runtime._cedar import CedarPolicy, _cedarpy, _rule_table, annotation_field

    try:
        cedarpy = _cedarpy(name)
    except PolicyError as exc:
        return (PolicyProblem(name, None, None, None, exc.problem),), 0
    statements = cedar_statements(text)
    problems: list[PolicyProblem] = []
    parsed: list[tuple[int, CedarStatement, dict[str, Any]]] = []
    for position, statement in enumerate(statements):
        rule = _rule_name(statement, position)
        try:
            est = json.loads(cedarpy.policies_to_json_str(statement.text))
        except ValueError as exc:
            problems.append(
                PolicyProblem(name, statement.line, rule, None, f"not valid Cedar: {exc}")
            )
            continue
        if est.get("templates") or est.get("templateLinks"):
            problems.append(
                PolicyProblem(name, statement.line, rule, None, "Cedar templates are not supported")
            )
            continue
        bodies = list(est.get("staticPolicies", {}).values())
        if len(bodies) != 1:
            problems.append(
                PolicyProblem(name, statement.line, rule, None, "not one Cedar statement")
            )
            continue
        parsed.append((position, statement, bodies[0]))
    tables: list[dict[str, Any]] = []
    placed: list[CedarStatement] = []
    for position, statement, body in parsed:
        try:
            tables.append(_rule_table(f"policy{position}", body, name))
            placed.append(statement)
        except PolicyError as exc:
            line = statement.line_of(exc.field[1:]) if exc.field else statement.line
            problems.append(PolicyProblem(name, line, exc.rule, exc.field, exc.problem))
    data = {"policy_id": policy_id, "default": "deny", "rules": tables, "scrub": {}}
    for error in collect_policy_problems(plain_copy(data, origin=name), name):
        field = annotation_field(error.field)
        at: int | None = None
        if error.rule_index is not None:
            owner = placed[error.rule_index]
            annotation = field[1:].split(" ", 1)[0] if field and field.startswith("@") else ""
            at = owner.line_of(annotation) if annotation else owner.line
        problems.append(PolicyProblem(name, at, error.rule, field, error.problem))
    if schema is not None and not problems:
        problems.extend(_schema_problems(cedarpy, text, schema, statements, name))
    if not problems:
        try:
            CedarPolicy.from_str(text, policy_id=policy_id, schema=schema)
        except PolicyError as exc:
            problems.append(PolicyProblem(name, None, exc.rule, exc.field, exc.problem))
    problems.sort(key=lambda p: (p.line is None, p.line or 0))
    return tuple(problems), len(statements)


def _rule_name(statement: CedarStatement, position: int) -> str:
    found = _ID.search(statement.text)
    return found.group(1) if found else f"policy{position}"


def _schema_problems(
    cedarpy: Any, text: str, schema: str, statements: list[CedarStatement], name: str
) -> list[PolicyProblem]:
    try:
        parsed = (
            cedarpy.Schema.from_json_str(schema)
            if schema.lstrip().startswith("{")
            else cedarpy.Schema.from_str(schema)
        )
        result = cedarpy.validate_policies(text, parsed)
    except ValueError as exc:
        return [PolicyProblem(name, None, None, "schema", f"not a valid Cedar schema: {exc}")]
    problems = []
    for error in result.errors:
        found = re.fullmatch(r"policy([0-9]+)", error.policy_id or "")
        position = int(found.group(1)) if found else -1
        statement = statements[position] if 0 <= position < len(statements) else None
        rule = _rule_name(statement, position) if statement is not None else None
        line = statement.line if statement is not None else None
        problems.append(
            PolicyProblem(name, line, rule, "schema", f"does not validate: {error.error}")
        )
    return problems
