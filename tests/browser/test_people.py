"""People in a real browser: a viewer signs in with a personal key against a real service and can
read every page but change nothing (every write control disabled, moving away and back); the
Members and Activity pages of the demo, photographed for the README's tour."""

from __future__ import annotations

import re

import pytest

from api import OrgdeckClient
from tests.browser.conftest import assert_no_exception, go, open_page, settle, shoot

pytestmark = pytest.mark.browser


def sidebar(page):
    return page.locator("[data-testid=stSidebar]")


def button(page, label: str):
    return page.locator("[data-testid=stMain]").get_by_role("button", name=label, exact=True).first


WRITES = re.compile(
    r"^(Create|Save|Delete|Register|Add|Publish|Move|Deploy|Revoke|Archive|Rotate|Send test|Rename|"
    r"Disable|Enable|Resend|Test connection|Generate|Apply|Snapshot|Change role|Deactivate)"
)


def write_buttons(page) -> list[tuple[str, bool]]:
    """Every write control of the page, collapsed sections opened: its label and whether it is off."""
    main = page.locator("[data-testid=stMain]")
    closed = main.locator("[data-testid=stExpander] details:not([open]) > summary")
    for _ in range(10):
        if not closed.count():
            break
        closed.first.click()
        settle(page)
    return [
        (text, button.is_disabled())
        for button in main.get_by_role("button").all()
        if (text := button.inner_text().strip()) and WRITES.match(text)
    ]


def test_a_viewer_signs_in_reads_every_page_and_changes_nothing(page, service_console_url, server, org):
    with OrgdeckClient(server.url, org.key, org_slug=org.slug) as admin:
        admin.environments.create("staging")
        admin.tools.create("Search tickets", "search-tickets")
        admin.agents.create("triage", "openai", provider_config={"model": "m"})
        viewer = admin.members.create("vic@example.com", "Vic Viewer", "viewer")
        key = admin.api_keys.create("vic-browser", member_id=viewer.id).key
    open_page(page, service_console_url, "", "Not signed in")
    sidebar(page).get_by_label("Your API key").fill(key)
    sidebar(page).get_by_role("button", name="Sign in").click()
    sidebar(page).get_by_text("Vic Viewer (vic@example.com)").wait_for(timeout=30_000)
    settle(page)
    assert "Role: viewer" in sidebar(page).inner_text()
    assert key not in page.content()  # the field it was typed into is emptied and gone

    # Away and back again: still signed in, still nothing to change.
    for label in ("Environments", "Tools", "Members", "Agents", "Environments", "API keys", "Members"):
        go(page, label)
        page.locator("[data-testid=stMain] h1", has_text=label).first.wait_for(timeout=30_000)
        assert_no_exception(page)
        assert "Vic Viewer" in sidebar(page).inner_text()
        writes = write_buttons(page)
        main_buttons = page.locator("[data-testid=stMain]").get_by_role("button").all_inner_texts()
        assert writes, (label, main_buttons)
        enabled = [text for text, disabled in writes if not disabled]
        # A viewer may make and revoke keys of their own: only those stay enabled.
        assert enabled == (["Create key"] if label == "API keys" else []), (label, enabled)
    # On Members, where the last visit ended, the tooltip of a disabled control names the role it needs.
    add = page.get_by_role("button", name="Add member", exact=True)
    page.locator("[data-testid=stTooltipHoverTarget]").filter(has=add).first.hover()
    page.get_by_text("Needs the admin role; you are a viewer.").first.wait_for(timeout=10_000)

    sidebar(page).get_by_role("button", name="Sign out").click()
    sidebar(page).get_by_label("Your API key").wait_for(timeout=30_000)
    assert "Vic Viewer" not in sidebar(page).inner_text()


def test_members_and_activity_of_the_demo(page, console_url, server):
    open_page(page, console_url, "", "What needs attention")
    go(page, "Members")
    assert_no_exception(page)
    page.locator("[data-testid=stMain] [data-testid=stDataFrame]").first.wait_for(timeout=60_000)
    assert_no_exception(page)
    shoot(page, "members")
    go(page, "Activity")
    assert_no_exception(page)
    page.locator("[data-testid=stPlotlyChart] .js-plotly-plot").first.wait_for(timeout=60_000)
    page.locator("[data-testid=stMain] [data-testid=stDataFrame]").first.wait_for(timeout=60_000)
    assert_no_exception(page)
    shoot(page, "activity")
