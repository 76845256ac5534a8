"""Headless Chromium for ``ghost report``: the browser test's driver, and the README screenshot.

The report is checked the way a person sees it: Debian's ``chromium`` loads the
page from a ``file://`` address, driven by playwright (the Python package; no
browser download: ``executable_path`` points at the system Chromium), and
every console error, uncaught exception, dialog and request is recorded.
Requests other than the page itself are refused as well as recorded, so a
page that tried to fetch anything would both fail to and be caught.

``python -m tools.report_browser docs/report.png`` runs ``ghost demo`` into a
temporary folder, writes its report, and saves a screenshot of the page's top.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Dialog, Page, Route

__all__ = ["CHROMIUM_ARGS", "PageEvents", "find_chromium", "launch", "load_report", "main"]

CHROMIUM_ARGS: Final = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)
"""Flags that let Chromium start here: no sandbox as root, no background connections."""
_INSTALL_TIMEOUT_S: Final = 900
_WIDTH: Final = 1280
_HEIGHT: Final = 900


def find_chromium(*, install: bool) -> tuple[str | None, str]:
    """Chromium's path, installing Debian's ``chromium`` package when absent and ``install``.

    Returns:
        ``(path, "")``, or ``(None, why)`` when there is no Chromium and none could be
        installed (not root, no apt-get, or apt-get failed).
    """
    found = shutil.which("chromium")
    if found is not None:
        return found, ""
    if not install:
        return None, "chromium is not installed"
    if shutil.which("apt-get") is None:
        return None, "chromium is not installed, and there is no apt-get to install it with"
    if os.geteuid() != 0:
        return None, "chromium is not installed, and installing it needs root"
    # The package lists may be stale or absent on a fresh machine: update once if needed.
    failures = [_apt("install", "-y", "chromium")]
    if failures[-1]:
        failures += [_apt("update"), _apt("install", "-y", "chromium")]
    found = shutil.which("chromium")
    if found is not None:
        return found, ""
    return None, "cannot install chromium: " + "; ".join(f for f in failures if f)


def _apt(*args: str) -> str:
    """Run apt-get; return "" on success, else what went wrong."""
    command = ["apt-get", *args]
    try:
        done = subprocess.run(  # noqa: S603 - apt-get with our own arguments
            command,
            capture_output=True,
            text=True,
            timeout=_INSTALL_TIMEOUT_S,
            check=False,
            env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"},
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"`{' '.join(command)}`: {exc}"
    if done.returncode != 0:
        return f"`{' '.join(command)}` exited {done.returncode}: {done.stderr.strip()[-300:]}"
    return ""


@dataclass
class PageEvents:
    """What a loaded page did besides drawing.

    Attributes:
        errors: console errors and uncaught exceptions, as text.
        requests: every URL the page asked for, the page's own included.
        refused: the URLs refused (everything but the page itself).
        dialogs: the messages of dialogs opened (``alert`` and friends), each dismissed.
    """

    errors: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    dialogs: list[str] = field(default_factory=list)


@contextmanager
def launch(chromium: str) -> Iterator[Browser]:
    """A headless Chromium (playwright gives it a fresh, empty profile), closed on exit."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as driver:
        browser = driver.chromium.launch(executable_path=chromium, args=list(CHROMIUM_ARGS))
        try:
            yield browser
        finally:
            browser.close()


def load_report(
    browser: Browser, path: Path, *, timeout_ms: int = 60_000
) -> tuple[Page, PageEvents]:
    """Open the report at ``path`` and wait until its charts and table are drawn.

    Returns:
        The page (close it when done) and what it did while loading. The events keep
        being recorded while the page is used.
    """
    events = PageEvents()
    page = browser.new_page(viewport={"width": _WIDTH, "height": _HEIGHT})
    address = path.resolve().as_uri()

    def route(request_route: Route) -> None:
        if request_route.request.url == address:
            request_route.continue_()
        else:
            events.refused.append(request_route.request.url)
            request_route.abort()

    def dialog(opened: Dialog) -> None:
        events.dialogs.append(opened.message)
        opened.dismiss()

    page.route("**/*", route)
    page.on("request", lambda request: events.requests.append(request.url))
    page.on("console", lambda m: events.errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda error: events.errors.append(f"uncaught: {error}"))
    page.on("dialog", dialog)
    page.goto(address, timeout=timeout_ms)
    page.wait_for_selector("body[data-ready=true]", timeout=timeout_ms, state="attached")
    return page, events


def main(argv: list[str] | None = None) -> int:
    """Write a screenshot of the demo run's report (the README's picture)."""
    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("out", type=Path, help="where to write the PNG, e.g. docs/report.png")
    parser.add_argument("--height", type=int, default=1000, help="pixels of the page shown")
    args = parser.parse_args(argv)
    chromium, why = find_chromium(install=False)
    if chromium is None:
        print(f"report_browser: {why}", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory() as tmp:
        html = Path(tmp) / "report.html"
        ghost = [sys.executable, "-m", "analysis"]
        # Relative names, so that the page shows "demo.mcap", not a temporary folder.
        for command in (
            ["demo", "--out", "demo.mcap"],
            ["report", "demo.mcap", "--html", html.name],
        ):
            subprocess.run([*ghost, *command], check=True, capture_output=True, cwd=tmp)  # noqa: S603
        with launch(chromium) as browser:
            page, events = load_report(browser, html)
            if events.errors or events.refused:
                print(f"report_browser: the page misbehaved: {events}", file=sys.stderr)
                return 1
            page.set_viewport_size({"width": _WIDTH, "height": args.height})
            page.screenshot(path=str(args.out))
            page.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
