"""Browser tests of the Memory inspector: one real `compozy serve` on a free loopback port for the whole session,
one headless Debian chromium, and a fresh browser context per test.

Nothing leaves the machine: the server binds 127.0.0.1 only and every browser context aborts any request whose
host is not loopback, recording it so a test can assert that none was attempted. Each test's final page is saved
as a full-page screenshot under $ARTIFACTS_DIR/browser/<test name>.png, even when the test fails.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from bench.live import start_serve, stop_serve
from tests.conftest import REPO, Cli
from tests.helpers import workspace_root

# Playwright's sync API runs an event loop in this thread; Django refuses ORM calls from such a thread otherwise.
os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"

from playwright.sync_api import Browser, BrowserContext, Page, Route, sync_playwright  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
# The server's local zone, which the inspector shows times in: one without daylight saving, so titles are stable.
SERVER_TIME_ZONE = "Asia/Kolkata"
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost"})
ARTIFACTS = Path(os.environ.get("ARTIFACTS_DIR") or REPO / ".artifacts") / "browser"
TIMEOUT_MS = 15_000


@dataclass
class Server:
    """The running `compozy serve`, the data it serves, and the workspace the tests write into (a second one,
    `other`, holds data too, so the default views show two workspaces)."""

    base_url: str
    first_link: str
    cli: Cli
    workspace_id: str
    other: Cli
    other_workspace_id: str

    @property
    def workspace_dir(self) -> Path:
        return self.cli.cwd

    @property
    def memory_dir(self) -> Path:
        return workspace_root(self.workspace_dir)

    def write(self, name: str, description: str, content: str, memory_type: str = "project") -> dict:
        """Write a memory with the real CLI (cwd = the workspace, same COMPOZY_HOME as the server)."""
        result = self.cli("memory", "write", "-o", "json", "--type", memory_type, "--name", name,
                          "--description", description, "--content", content)
        assert result.code == 0, f"compozy memory write failed ({result.code}): {result.stdout}{result.stderr}"
        decision = result.json["decision"]
        assert decision["op"] == "add", decision
        return decision

    def new_link(self) -> str:
        result = self.cli("inspector", "link", "--base-url", self.base_url)
        assert result.code == 0, result.stderr
        link = result.stdout.strip()
        assert link.startswith(f"{self.base_url}/inspector/signin?token="), link
        return link


@pytest.fixture(scope="session")
def server() -> Iterator[Server]:
    root = Path(tempfile.mkdtemp(prefix="compozy-browser-"))
    try:
        home = root / "home"
        workspace_dir = root / "project"
        home.mkdir()
        (workspace_dir / ".git").mkdir(parents=True)
        cli = Cli(home=home, cwd=workspace_dir)
        # A first memory makes the directory a known workspace, so the inspector's workspace selects offer it.
        seed = cli("memory", "write", "-o", "json", "--type", "project", "--name", "Browser suite seed",
                   "--description", "Registers the workspace the browser tests use",
                   "--content", "The browser suite writes its memories into this workspace.")
        assert seed.code == 0, seed.stdout + seed.stderr
        workspace_id = json.loads(seed.stdout)["decision"]["workspace_id"]
        other_dir = root / "billing-service"
        (other_dir / ".git").mkdir(parents=True)
        other = Cli(home=home, cwd=other_dir)
        other_id = ""
        for name, content in (("Invoice retries", "Failed invoices are retried three times, an hour apart."),
                              ("Ledger export", "The ledger exports to the finance bucket every night at 02:00.")):
            written = other("memory", "write", "-o", "json", "--type", "project", "--name", name,
                            "--description", f"How {name.lower()} work", "--content", content)
            assert written.code == 0, written.stdout + written.stderr
            other_id = json.loads(written.stdout)["decision"]["workspace_id"]
        live = start_serve(home, workspace_dir, root / "serve.log", env={"TZ": SERVER_TIME_ZONE})
        try:
            assert live.signin_link.startswith(f"{live.base_url}/inspector/signin?token="), live.signin_link
            yield Server(base_url=live.base_url, first_link=live.signin_link, cli=cli, workspace_id=workspace_id,
                         other=other, other_workspace_id=other_id)
        finally:
            stop_serve(live)
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
def browser() -> Iterator[Browser]:
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, headless=True,
                                              args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"])
        try:
            yield launched
        finally:
            launched.close()


@dataclass
class Guard:
    """Every request to a host other than loopback, aborted before it left the browser."""

    foreign: list[str] = field(default_factory=list)

    def route(self, route: Route) -> None:
        url = route.request.url
        host = urlsplit(url).hostname or ""
        if url.startswith(("http:", "https:", "ws:", "wss:", "ftp:")) and host not in LOOPBACK_HOSTS:
            self.foreign.append(url)
            route.abort("blockedbyclient")
        else:
            route.continue_()


@pytest.fixture(scope="session")
def signed_in_state(browser: Browser, server: Server) -> dict:
    """Cookies of a session signed in with a fresh one-time link (not the one serve printed)."""
    context = browser.new_context(base_url=server.base_url)
    try:
        page = context.new_page()
        page.goto(server.new_link())
        page.get_by_role("button", name="Sign in").click()
        page.wait_for_url(f"{server.base_url}/inspector/")
        return context.storage_state()
    finally:
        context.close()


@dataclass
class Pages:
    """Opens pages in fresh contexts for one test; remembers them so the last one can be screenshotted."""

    browser: Browser
    server: Server
    guard: Guard
    contexts: list[BrowserContext] = field(default_factory=list)
    pages: list[Page] = field(default_factory=list)

    def open(self, storage_state: dict | None = None, **options) -> Page:
        context = self.browser.new_context(base_url=self.server.base_url, storage_state=storage_state, **options)
        context.set_default_timeout(TIMEOUT_MS)
        context.route("**/*", self.guard.route)
        self.contexts.append(context)
        page = context.new_page()
        self.pages.append(page)
        return page


@pytest.fixture
def guard() -> Guard:
    return Guard()


@pytest.fixture
def pages(request: pytest.FixtureRequest, browser: Browser, server: Server, guard: Guard) -> Iterator[Pages]:
    opened = Pages(browser=browser, server=server, guard=guard)
    yield opened
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", request.node.name).strip("_")
    try:
        live = [page for page in opened.pages if not page.is_closed()]
        if live:
            live[-1].screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)
    finally:
        for context in opened.contexts:
            context.close()
    assert guard.foreign == [], f"the browser tried to reach another host: {guard.foreign}"


@pytest.fixture
def page(pages: Pages, signed_in_state: dict) -> Page:
    """A page in a fresh context that is already signed in to the inspector."""
    return pages.open(storage_state=signed_in_state)


@pytest.fixture
def anonymous_page(pages: Pages) -> Page:
    """A page in a fresh context with no session cookie."""
    return pages.open()
