"""Checking a policy file: every problem, each placed at its line (issue 11, ADR 0033).

`check_policy(path)` is what ``ghost policy check`` prints. It reads a TOML,
JSON or Cedar policy (by extension, else by content) and returns *every*
problem the loader would raise, not only the first, each with the file, the
line, the rule and the field. It never weakens the loader: `Policy` and
`CedarPolicy` still refuse a policy at its first problem, all or nothing, and
a policy `check_policy` passes is one they load (the last step builds it).

Where a problem is comes from the source text itself, because ``tomllib``
keeps no positions: `TomlLines` scans the (already parsed, so valid) TOML
for its table headers and keys — the ``[[rules]]`` headers give each rule's
first line, and the keys inside give a field's line (the longest key prefix
of the field that is written on a line of its own; an inline table's fields
are on the line of its key). A problem the scan cannot place gets the rule's
header line, or none. Cedar problems are placed by `runtime._cedar_check`.

Hostile files give problems, not tracebacks: a file larger than
`MAX_POLICY_SOURCE_BYTES`, bytes that are not UTF-8, nesting that would
exhaust the parser's recursion, a NUL.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal

from runtime._errors import PolicyError
from runtime._frozen import plain_copy
from runtime._policy_load import collect_policy_problems

__all__ = [
    "MAX_POLICY_SOURCE_BYTES",
    "PolicyCheck",
    "PolicyProblem",
    "TomlLines",
    "check_policy",
    "check_policy_source",
    "policy_format",
]

MAX_POLICY_SOURCE_BYTES: Final = 8 * 1024 * 1024
"""Largest policy file `check_policy` reads (a policy is kilobytes; this is far above any)."""

PolicyFormat = Literal["toml", "json", "cedar"]

_TOML_AT: Final = re.compile(r"\(at line (\d+), column (\d+)\)")
_CEDAR_START: Final = re.compile(r"^\s*(?:@[A-Za-z_]\w*\s*\(|permit\s*\(|forbid\s*\()", re.M)


@dataclass(frozen=True, slots=True)
class PolicyProblem:
    """One problem of a policy file, placed in it.

    Attributes:
        source: the file, as it was named.
        line: the 1-based line it is on, or None where no line can be named.
        rule: the rule's id (``#3`` for a rule without a usable id), or None.
        field: the field, dotted (``narrow.clamp.limit``; ``@ghost_effect`` in
            Cedar), or None.
        problem: what is wrong.
    """

    source: str
    line: int | None
    rule: str | None
    field: str | None
    problem: str

    def __str__(self) -> str:
        where = self.source if self.line is None else f"{self.source}:{self.line}"
        rule = "" if self.rule is None else f" rule {_quoted(self.rule)}:"
        field = "" if self.field is None else f" {self.field}:"
        return f"{where}:{rule}{field} {self.problem}"


@dataclass(frozen=True, slots=True)
class PolicyCheck:
    """What `check_policy` found.

    Attributes:
        source: the file, as it was named.
        format: ``toml``, ``json`` or ``cedar``.
        problems: every problem, in file order as the loader meets them.
        rule_count: how many rules the file holds (0 when it cannot be parsed).
    """

    source: str
    format: PolicyFormat
    problems: tuple[PolicyProblem, ...]
    rule_count: int

    @property
    def ok(self) -> bool:
        """Whether the policy loads."""
        return not self.problems


def _quoted(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def policy_format(path: str | Path, source: bytes) -> PolicyFormat:
    """A policy file's format: by extension (``.toml``, ``.json``, ``.cedar``), else by content."""
    suffix = Path(path).suffix.lower()
    if suffix in (".toml", ".json", ".cedar"):
        return suffix[1:]  # type: ignore[return-value]
    head = source[:4096].decode("utf-8", errors="replace")
    if head.lstrip().startswith("{"):
        return "json"
    if _CEDAR_START.search(head) and "[[rules]]" not in head:
        return "cedar"
    return "toml"


def check_policy(
    path: str | Path,
    *,
    format: PolicyFormat | None = None,
    schema: str | None = None,
    policy_id: str | None = None,
) -> PolicyCheck:
    """Check a policy file and return every problem it has (see the module docstring).

    Args:
        path: the file.
        format: ``toml``, ``json`` or ``cedar`` (default: `policy_format`).
        schema: for Cedar, a schema's text to validate against.
        policy_id: for Cedar, the policy id (default: the file's stem).

    Returns:
        the check; ``ok`` when the policy loads. A file that cannot be read
        is one problem without a line.
    """
    name = str(path)
    try:
        with Path(path).open("rb") as stream:
            source = stream.read(MAX_POLICY_SOURCE_BYTES + 1)
    except OSError as exc:
        problem = f"cannot read the file ({exc.strerror or type(exc).__name__})"
        return PolicyCheck(
            name, format or "toml", (PolicyProblem(name, None, None, None, problem),), 0
        )
    chosen = format or policy_format(path, source)
    if len(source) > MAX_POLICY_SOURCE_BYTES:
        limit = MAX_POLICY_SOURCE_BYTES // (1024 * 1024)
        problem = f"the file is larger than {limit} MiB, far larger than any policy"
        return PolicyCheck(name, chosen, (PolicyProblem(name, None, None, None, problem),), 0)
    return check_policy_source(
        source, name, format=chosen, schema=schema,
        policy_id=Path(path).stem if policy_id is None else policy_id,
    )  # fmt: skip


def check_policy_source(
    source: bytes,
    name: str,
    *,
    format: PolicyFormat,
    schema: str | None = None,
    policy_id: str = "cedar",
) -> PolicyCheck:
    """Check a policy's bytes (as `check_policy`, for bytes already read).

    Args:
        source: the file's bytes.
        name: the name problems are reported under.
        format: ``toml``, ``json`` or ``cedar``.
        schema, policy_id: for Cedar, as in `check_policy`.
    """
    try:
        text = source.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = source[: exc.start].count(b"\n") + 1
        problem = f"the file is not UTF-8 text (byte {exc.start} is not)"
        return PolicyCheck(name, format, (PolicyProblem(name, line, None, None, problem),), 0)
    if format == "cedar":
        from runtime._cedar_check import check_cedar_text

        problems, count = check_cedar_text(text, name, schema=schema, policy_id=policy_id)
        return PolicyCheck(name, format, problems, count)
    data, unparsed = _parse_data(text, name, format)
    if unparsed is not None:
        return PolicyCheck(name, format, (unparsed,), 0)
    assert data is not None
    raw_rules = data.get("rules")
    count = len(raw_rules) if isinstance(raw_rules, list) else 0
    lines = TomlLines(text) if format == "toml" else None
    try:
        plain = plain_copy(data, origin=name)
    except PolicyError as exc:
        return PolicyCheck(name, format, (_placed(exc, name, lines),), count)
    errors = collect_policy_problems(plain, name)
    if not errors:
        errors = _build_errors(plain, source, name, format)
    placed = sorted((_placed(e, name, lines) for e in errors), key=_line_order)
    return PolicyCheck(name, format, tuple(placed), count)


def _line_order(problem: PolicyProblem) -> tuple[bool, int]:
    """File order; problems without a line last (a stable sort keeps the loader's order within)."""
    return (problem.line is None, problem.line or 0)


def _parse_data(
    text: str, name: str, format: PolicyFormat
) -> tuple[Mapping[str, Any] | None, PolicyProblem | None]:
    if "\x00" in text:
        line = text[: text.index("\x00")].count("\n") + 1
        return None, PolicyProblem(name, line, None, None, "the file holds a NUL byte: not text")
    try:
        if format == "json":
            from runtime._canonical import loads_strict

            data: object = loads_strict(text.encode("utf-8"))
        else:
            data = tomllib.loads(text)
    except RecursionError:
        return None, PolicyProblem(name, None, None, None, "the file nests too deeply to parse")
    except tomllib.TOMLDecodeError as exc:
        found = _TOML_AT.search(str(exc))
        at = int(found.group(1)) if found else None
        message = _TOML_AT.sub("", str(exc)).strip()
        return None, PolicyProblem(name, at, None, None, f"not valid TOML: {message}")
    except ValueError as exc:
        return None, PolicyProblem(name, None, None, None, f"not valid JSON: {exc}")
    if not isinstance(data, Mapping):
        return None, PolicyProblem(name, None, None, None, "a policy must be a JSON object")
    return data, None


def _build_errors(
    plain: Mapping[str, Any], source: bytes, name: str, format: PolicyFormat
) -> tuple[PolicyError, ...]:
    """Build the policy as the loader does: a check that passes is a policy that loads."""
    from runtime._policy import Policy

    media = "application/toml" if format == "toml" else "application/json"
    try:
        Policy(plain, source=source, source_name=Path(name).name, source_media_type=media,
               origin=name)  # fmt: skip
    except PolicyError as exc:
        return (exc,)
    return ()


def _placed(error: PolicyError, name: str, lines: TomlLines | None) -> PolicyProblem:
    line = None if lines is None else lines.line_of(error.rule_index, error.field)
    return PolicyProblem(name, line, error.rule, error.field, error.problem)


class TomlLines:
    """Where a valid TOML policy's rules and keys are written (tomllib keeps no positions).

    Args:
        text: the TOML text (already known to parse).
    """

    __slots__ = ("_keys", "_rules")

    def __init__(self, text: str) -> None:
        self._rules: list[int] = []
        # (rule index or None for outside [[rules]], dotted key) -> line of its first mention
        self._keys: dict[tuple[int | None, str], int] = {}
        self._scan(text)

    def line_of(self, rule_index: int | None, field: str | None) -> int | None:
        """The line of ``field`` in rule ``rule_index`` (None: a top-level field), or the rule's."""
        if field is not None:
            parts = field.split(".")
            for size in range(len(parts), 0, -1):
                found = self._keys.get((rule_index, ".".join(parts[:size])))
                if found is not None:
                    return found
        if rule_index is not None and 0 <= rule_index < len(self._rules):
            return self._rules[rule_index]
        return None

    def _scan(self, text: str) -> None:
        rule: int | None = None
        prefix = ""
        lines = text.split("\n")
        number = 0
        while number < len(lines):
            line = lines[number]
            number += 1
            stripped = line.strip()
            if not stripped or stripped.startswith("#"):
                continue
            if stripped.startswith("["):
                array = stripped.startswith("[[")
                header = _header_name(stripped, array)
                if array and header == "rules":
                    self._rules.append(number)
                    rule, prefix = len(self._rules) - 1, ""
                elif header.startswith("rules.") and rule is not None:
                    prefix = header[len("rules.") :] + "."
                    self._keys.setdefault((rule, header[len("rules.") :]), number)
                else:
                    rule, prefix = None, header + "."
                    self._keys.setdefault((None, header), number)
                continue
            key, rest = _split_key(line)
            if key is None:
                continue
            self._keys.setdefault((rule, prefix + key), number)
            # A value spanning lines (an array, an inline table, a multi-line string).
            number = _value_end(lines, number - 1, rest) + 1


def _header_name(stripped: str, array: bool) -> str:
    inner = stripped[2:] if array else stripped[1:]
    end = inner.find("]")
    return _dotted(inner[: end if end >= 0 else len(inner)])


def _dotted(text: str) -> str:
    """A TOML key as dotted text: parts stripped of spaces and quotes."""
    parts, current, quote = [], "", ""
    for char in text:
        if quote:
            if char == quote:
                quote = ""
            else:
                current += char
        elif char in "\"'":
            quote = char
        elif char == ".":
            parts.append(current.strip())
            current = ""
        else:
            current += char
    parts.append(current.strip())
    return ".".join(parts)


def _split_key(line: str) -> tuple[str | None, str]:
    quote = ""
    for index, char in enumerate(line):
        if quote:
            if char == quote:
                quote = ""
        elif char in "\"'":
            quote = char
        elif char == "=":
            return _dotted(line[:index]), line[index + 1 :]
        elif char == "#":
            break
    return None, ""


def _value_end(lines: list[str], index: int, rest: str) -> int:
    """The index of the line a value starting with ``rest`` (on line ``index``) ends on."""
    depth = 0
    text = rest
    current = index
    multiline = ""
    while True:
        position = 0
        while position < len(text):
            if multiline:
                end = text.find(multiline, position)
                if end < 0:
                    position = len(text)
                    break
                position = end + 3
                multiline = ""
                continue
            char = text[position]
            if text.startswith('"""', position) or text.startswith("'''", position):
                multiline = text[position : position + 3]
                position += 3
                continue
            if char in "\"'":
                end = position + 1
                while end < len(text) and text[end] != char:
                    end += 2 if char == '"' and text[end] == "\\" else 1
                position = end + 1
                continue
            if char == "#":
                break
            if char in "[{":
                depth += 1
            elif char in "]}":
                depth -= 1
            position += 1
        if (depth <= 0 and not multiline) or current + 1 >= len(lines):
            return current
        current += 1
        text = lines[current]
