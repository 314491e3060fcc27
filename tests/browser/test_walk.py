"""A new user's walk through the inspector in a real browser: every page in the navigation, and every link those
pages show one step further, opens without an error at 1280 and 390 px, without sideways scrolling (screenshots
of each navigation page go to $ARTIFACTS_DIR/browser/walk-*.png)."""

from __future__ import annotations

import re
from urllib.parse import urlsplit

import pytest
from playwright.sync_api import expect

from .conftest import ARTIFACTS, Pages, Server

# Links a walk does not follow: they change something (sign-out is a form anyway) or leave the pages.
NOT_FOLLOWED = re.compile(r"/(delete|revert|edit|retry|trigger|signout)(\?|$)|^/static/")


@pytest.mark.parametrize("width", (1280, 390))
def test_every_page_in_the_navigation_and_every_link_on_it_opens_and_fits_the_screen(
        pages: Pages, signed_in_state: dict, server: Server, width: int):
    started = server.cli("memory", "snapshot", "--session", "walk-session-1", "-o", "json")
    assert started.code == 0, started.stdout + started.stderr
    page = pages.open(storage_state=signed_in_state, viewport={"width": width, "height": 900})
    page.goto("/inspector/")
    nav = page.get_by_role("navigation", name="Inspector").get_by_role("link")
    paths = [urlsplit(nav.nth(i).get_attribute("href")).path for i in range(nav.count())]
    assert "/inspector/snapshots/" in paths and len(paths) >= 8
    followed: set[str] = set()
    for path in paths:
        response = page.goto(path)
        assert response is not None and response.status == 200, (path, response and response.status)
        expect(page.get_by_role("heading", level=1)).to_be_visible()
        slug = path.strip("/").replace("/", "-") or "inspector"
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / f"walk-{slug}-{width}.png"), full_page=True)
        assert page.evaluate("() => document.documentElement.scrollWidth") <= width + 1, path
        hrefs = page.locator("main a[href]").evaluate_all("links => links.map(a => a.getAttribute('href'))")
        for href in hrefs:
            target = href if href.startswith("/") else f"{path}{href}" if href.startswith("?") else None
            if target is None or NOT_FOLLOWED.search(target) or target in followed:
                continue
            followed.add(target)
    # One step further: each distinct link the navigation pages show (memories, decisions, sessions, workspaces,
    # filters), each must open too.
    assert any(link.startswith("/inspector/memories/project_") for link in followed)
    assert any("session_id=walk-session-1" in link for link in followed)
    shot: set[str] = set()
    for target in sorted(followed):
        response = page.goto(target)
        assert response is not None and response.status == 200, (target, response and response.status)
        assert page.evaluate("() => document.documentElement.scrollWidth") <= width + 1, target
        segments = [part for part in urlsplit(target).path.split("/") if part]
        kind = (segments[1] if len(segments) > 1 else "health") + (
            "-detail" if len(segments) > 2 or "session_id=" in target else "")
        if kind not in shot:  # one screenshot of each kind of page a link leads to
            shot.add(kind)
            page.screenshot(path=str(ARTIFACTS / f"walk-link-{kind}-{width}.png"), full_page=True)
