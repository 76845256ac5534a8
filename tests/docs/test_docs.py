"""The documentation site: it builds in strict mode, its code runs, it covers what it must.

* the site builds with ``mkdocs build --strict`` (a warning is an error), and its
  API reference has an entry for every name of every public ``__all__``;
* every ``python`` block of a page runs: a page's blocks run in order, as one
  script, in a fresh directory that holds the page's titled ``toml`` blocks as
  files (so ``Policy.from_toml("policy.toml")`` reads the page's own policy);
* every titled ``toml`` policy of the policy reference loads, and every
  mistake raises exactly the `PolicyError` the page prints after it;
* the policy reference has a heading for every key and operator the loader
  accepts, and none for a key it does not (so a new key cannot go undocumented);
* the CLI reference is what the argparse parser gives today;
* each page that shows code links to the example it comes from, and every file
  of ``examples/`` is run by some test.
"""

from __future__ import annotations

import importlib
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from runtime import Policy, PolicyError
from runtime._conditions import OPERATORS
from runtime._detectors import DETECTOR_NAMES
from runtime._policy_load import (
    _APPROVAL_KEYS,
    _LIMIT_KEYS,
    _NARROW_KEYS,
    _RULE_KEYS,
    _SCRUB_KEYS,
    _TOP_KEYS,
)
from tests.docs.blocks import DOCS, Block, blocks, pages
from tools.cli_reference import render

ROOT = DOCS.parent
API_PAGES = {
    "runtime": "runtime",
    "runtime.integrations": "integrations",
    "audit": "audit",
    "analysis": "analysis",
}
POLICY_PAGE = DOCS / "policy.md"


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return out


def test_the_site_builds_in_strict_mode_with_every_page(site: Path) -> None:
    for page in pages():
        built = site / page.relative_to(DOCS).with_suffix("") / "index.html"
        if page.name == "index.md":
            built = site / page.relative_to(DOCS).with_name("index.html")
        assert built.is_file(), page
    assert (site / "report.png").is_file()  # the mutation page's neighbour, kept


@pytest.mark.parametrize("package", sorted(API_PAGES))
def test_the_api_reference_documents_every_public_name(site: Path, package: str) -> None:
    html = (site / "api" / API_PAGES[package] / "index.html").read_text(encoding="utf-8")
    anchors = set(re.findall(r'id="([\w.]+)"', html))
    module = importlib.import_module(package)
    missing = [name for name in module.__all__ if f"{package}.{name}" not in anchors]
    assert missing == []


def _page_ids() -> list[str]:
    return [str(p.relative_to(DOCS)) for p in pages() if any(b.lang == "python" for b in blocks(p))]


@pytest.mark.parametrize("page", _page_ids())
def test_every_python_block_of_a_page_runs(page: str, tmp_path: Path) -> None:
    found = blocks(DOCS / page)
    for block in found:
        if block.lang == "toml" and block.title:
            (tmp_path / block.title).write_text(block.body, encoding="utf-8")
    script = "\n".join(b.body for b in found if b.lang == "python")
    (tmp_path / "page.py").write_text(script, encoding="utf-8")
    result = subprocess.run(
        [sys.executable, "page.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, f"{page}:\n{result.stderr}"


def _policy_examples() -> list[tuple[Block, Block | None]]:
    found = blocks(POLICY_PAGE)
    pairs: list[tuple[Block, Block | None]] = []
    for index, block in enumerate(found):
        if block.lang == "toml" and block.title.endswith(".toml"):
            after = found[index + 1] if index + 1 < len(found) else None
            pairs.append((block, after if after and after.title == "PolicyError" else None))
    return pairs


def test_every_policy_example_loads_and_every_mistake_gives_its_documented_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    pairs = _policy_examples()
    assert sum(error is not None for _, error in pairs) >= 15
    for example, error in pairs:
        Path(example.title).write_text(example.body, encoding="utf-8")
        if error is None:
            assert not example.title.startswith("mistake"), example.title
            Policy.from_toml(example.title)
            continue
        assert example.title.startswith("mistake"), example.title
        with pytest.raises(PolicyError) as caught:
            Policy.from_toml(example.title)
        assert str(caught.value) == error.body.strip(), example.title


def _documented_keys() -> set[str]:
    text = POLICY_PAGE.read_text(encoding="utf-8")
    return set(re.findall(r"^#{2,4} `([^`]+)`\s*$", text, re.MULTILINE))


def test_the_policy_reference_has_a_heading_for_every_key_the_loader_accepts() -> None:
    expected = (
        set(_TOP_KEYS)
        | {f"rules.{key}" for key in _RULE_KEYS}
        | {f"rules.narrow.{key}" for key in _NARROW_KEYS}
        | {f"rules.approval.{key}" for key in _APPROVAL_KEYS}
        | {f"rules.limit.{key}" for key in _LIMIT_KEYS}
        | {f"scrub.{key}" for key in _SCRUB_KEYS}
        | {f"rules.when.<path>.{op}" for op in OPERATORS}
    )
    assert _documented_keys() == expected


def test_the_policy_reference_names_every_detector() -> None:
    text = POLICY_PAGE.read_text(encoding="utf-8")
    section = text[text.index("### `scrub.detectors`") : text.index("### `scrub.action`")]
    assert set(re.findall(r"`(\w+)`", section)) - {"scrub", "detectors"} == set(DETECTOR_NAMES)


def test_the_cli_reference_is_current() -> None:
    current = (DOCS / "cli.md").read_text(encoding="utf-8")
    assert current == render(), "run: python -m tools.cli_reference --write docs/cli.md"


_EXAMPLE_LINK = re.compile(r"https://github\.com/ghost-sdk/ghost/(?:blob|tree)/main/([\w./-]+)")


@pytest.mark.parametrize("page", [p for p in _page_ids() if p != "policy.md"] + ["policy.md"])
def test_each_page_with_code_links_to_the_example_it_comes_from(page: str) -> None:
    text = (DOCS / page).read_text(encoding="utf-8")
    linked = _EXAMPLE_LINK.findall(text)
    examples = [path for path in linked if path.startswith(("examples", "src/analysis/demo"))]
    assert examples, page
    for path in linked:
        assert (ROOT / path.split("#")[0]).exists(), f"{page} links to a missing {path}"


def test_every_example_is_run_by_a_test() -> None:
    tests = "\n".join(p.read_text(encoding="utf-8") for p in (ROOT / "tests").rglob("test_*.py"))
    for entry in sorted((ROOT / "examples").iterdir()):
        if entry.name.startswith((".", "__")):
            continue
        name = entry.stem if entry.is_file() else entry.name
        quoted = f'"examples" / "{entry.name}"'
        assert quoted in tests or f"examples/{entry.name}" in tests, name


def test_the_readme_links_are_absolute() -> None:
    # The README is the package's page on the index too, where relative links break.
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    targets = re.findall(r"\]\(([^)\s]+)\)", text)
    assert targets
    relative = [t for t in targets if not t.startswith(("https://", "#"))]
    assert relative == []
