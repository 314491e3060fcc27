"""A new user's first look: on a home with nothing in it, every page in the navigation opens and says what to do
next; a wrong address or a bad filter shows the error's stable code (and a filter form keeps what was typed)."""

from __future__ import annotations

import re

import pytest

from tests.inspector.helpers import page_text, signed_in_client

pytestmark = pytest.mark.django_db

# What each page's empty state tells a new user to do (the rest of the nav must at least open).
NEXT_STEP = {
    "/inspector/": "No workspace yet. To add one, run <code>compozy memory write",
    "/inspector/memories/": 'No memories yet. Write one with <a href="/inspector/memories/new">New memory</a>',
    "/inspector/decisions/": "No decisions yet. Every write, edit, delete or revert",
    "/inspector/events/": "No events yet.",
    "/inspector/snapshots/": "No session has received a snapshot yet. A session gets one when it starts: <code>compozy",
    "/inspector/dreaming/": "No workspace yet: dreaming runs per workspace. To add one, run <code>compozy",
    "/inspector/sessions/": "No sessions yet. A session starts when an agent's hook runs <code>compozy hook",
    "/inspector/extractor/": "No session has been extracted yet. A session is read after each answer its agent",
}


def nav_links(page: str) -> list[str]:
    nav = re.search(r'<nav aria-label="Inspector">(.*?)</nav>', page, re.S).group(1)
    return re.findall(r'<a href="([^"]+)">', nav)


def test_on_an_empty_home_every_page_in_the_navigation_opens_and_says_what_to_do(home):
    client = signed_in_client()
    links = nav_links(page_text(client.get("/inspector/")))
    assert set(NEXT_STEP) <= set(links)
    for link in links:
        response = client.get(link)
        assert response.status_code == 200, (link, response.status_code)
        if link in NEXT_STEP:
            assert NEXT_STEP[link] in page_text(response), link


def test_filters_say_when_nothing_matches_them_rather_than_that_nothing_exists(home, workspace_dir):
    from tests import helpers as h

    h.write(workspace_dir, name="Only fact", content="The only memory here.")
    client = signed_in_client()
    assert "No memories match these filters" in page_text(client.get("/inspector/memories/?type=user"))
    assert "No decision matches these filters." in page_text(client.get("/inspector/decisions/?op=delete"))
    assert "No event matches these filters." in page_text(client.get("/inspector/events/?family=dream"))


def test_a_wrong_address_or_a_bad_filter_shows_the_errors_stable_code(home):
    client = signed_in_client()
    missing = client.get("/inspector/no-such-page")
    assert missing.status_code == 404 and "Code: <code>memory.not_found</code>" in page_text(missing)
    bad_id = client.get("/inspector/decisions/dec_123")
    assert bad_id.status_code == 400 and "Code: <code>memory.validation</code>" in page_text(bad_id)
    bad_filter = client.get("/inspector/decisions/?since=last+tuesday")
    text = page_text(bad_filter)
    assert bad_filter.status_code == 400 and "Code: <code>memory.validation</code>" in text
    assert '<input id="since" name="since"' in text and 'value="last tuesday"' in text  # the form kept it
    unknown_choice = client.get("/inspector/memories/?type=diary")
    assert unknown_choice.status_code == 400 and "Code: <code>memory.validation</code>" in page_text(unknown_choice)
