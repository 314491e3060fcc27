"""The Dreaming page in a real browser against a live `compozy serve`: the gates with what each waits for, and
the Trigger button answering with the gate that blocks."""

from __future__ import annotations

from playwright.sync_api import Page, expect

from tests.browser.conftest import Server


def test_the_dreaming_page_shows_the_gates_and_the_trigger_button_names_the_blocking_gate(page: Page,
                                                                                          server: Server):
    page.goto(f"/inspector/dreaming/?workspace={server.workspace_id}")
    gates = page.get_by_role("table").filter(has_text="Gates, cheapest first")
    for gate in ("disabled", "time", "sessions", "lock", "signal"):
        expect(gates.get_by_role("rowheader", name=gate, exact=True)).to_be_visible()
    expect(gates).to_contain_text("more completed session(s)")
    page.get_by_role("button", name="Trigger").click()
    expect(page.get_by_role("alert")).to_contain_text("Not triggered: the sessions gate blocks.")
    expect(page.get_by_text("No runs yet.")).to_be_visible()
