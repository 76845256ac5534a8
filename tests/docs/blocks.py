"""Fenced code blocks of the documentation pages, as the tests in this folder read them.

A block is ```` ```lang title="name" ```` ... ```` ``` ```` at the start of a line;
the title is optional. Pages are read from docs/ (tests/docs/test_docs.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

DOCS = Path(__file__).parents[2] / "docs"

_FENCE = re.compile(
    r'^```(?P<lang>[\w-]*)(?:[ ]+title="(?P<title>[^"]*)")?[ ]*\n(?P<body>.*?)^```[ ]*$',
    re.MULTILINE | re.DOTALL,
)


@dataclass(frozen=True, slots=True)
class Block:
    """One fenced block: its language, its title (or ""), its text and where it starts."""

    lang: str
    title: str
    body: str
    line: int


def blocks(page: Path) -> list[Block]:
    """Every fenced block of a page, in order."""
    text = page.read_text(encoding="utf-8")
    return [
        Block(m["lang"], m["title"] or "", m["body"], text.count("\n", 0, m.start()) + 1)
        for m in _FENCE.finditer(text)
    ]


def pages() -> list[Path]:
    """Every Markdown page of the site."""
    return sorted(DOCS.rglob("*.md"))
