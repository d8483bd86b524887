"""Every page twice in one session, moving the way people do: through the menu, away and back again.

Streamlit drops a widget's state when its page is left; a page that kept something there broke on
the way back (the Notifications page did). The first round is at 1440 px, the second at 1024 px,
and each visit opens every tab of the page. Each page is photographed on its first visit at each
width: these are the README's tour.
"""

from __future__ import annotations

import pytest

from tests.browser.conftest import NARROW, WIDE, assert_no_exception, go, open_page, settle, shoot

pytestmark = pytest.mark.browser

# The menu's labels, in its order, with what each page is photographed as.
PAGES = [
    ("Overview", "overview"),
    ("Environments", "environments"),
    ("Tools", "tools"),
    ("Agents", "agents"),
    ("Fleets", "fleets"),
    ("Deployments", "deployments"),
    ("Changes", "changes"),
    ("Registries", "registries"),
    ("Policies", "governance"),
    ("LLM providers", "providers"),
    ("API keys", "api-keys"),
    ("Members", "members"),
    ("Activity", "activity"),
    ("Notifications", "notifications"),
]


def visit_every_tab(page) -> list[str]:
    """Open each tab of the page, the ones that appear inside others included; their names."""
    seen: list[str] = []
    main = page.locator("[data-testid=stMain]")
    while True:
        names = [name.strip() for name in main.get_by_role("tab").all_inner_texts()]
        fresh = [name for name in names if name not in seen]
        if not fresh:
            return seen
        seen.append(fresh[0])
        main.get_by_role("tab", name=fresh[0], exact=True).first.click()
        assert_no_exception(page)


def test_every_page_twice_and_every_tab_without_an_exception(page, console_url, server):
    # This console runs no worker; the test service's worker (`server`) runs the demo's jobs.
    open_page(page, console_url, "", "What needs attention")
    for round_number, width in enumerate((WIDE, NARROW), start=1):
        page.set_viewport_size({"width": width, "height": 900})
        for label, name in PAGES:
            go(page, label)
            assert_no_exception(page)
            assert page.locator("[data-testid=stSidebar]").get_by_role("link", name=label).is_visible()
            first_tab = page.locator("[data-testid=stMain]").get_by_role("tab").first
            if first_tab.count():  # a page is photographed on its first tab, whichever was left open
                first_tab.click()
                settle(page)
            shoot(page, name, widths=(width,))
            tabs = visit_every_tab(page)
            if label == "Deployments":
                assert {"Overview", "Deploy", "Jobs", "History"} <= set(tabs)
            if label == "Notifications" and round_number == 1:
                # Leave the log on its second page: coming back must not need it any more.
                page.get_by_role("tab", name="Delivery log", exact=True).click()
                settle(page)
                page.get_by_role("button", name="Older").click()
                assert_no_exception(page)
                assert page.get_by_text("51 to").first.is_visible()
        # Away and straight back again, the move that broke the Notifications page.
        go(page, "Overview")
        go(page, "Notifications")
        assert_no_exception(page)
        page.get_by_role("tab", name="Delivery log", exact=True).click()
        assert_no_exception(page)
        assert page.get_by_text("attempts, newest first").first.is_visible()


def test_the_menu_is_there_from_the_first_paint_and_never_lists_files(page, console_url):
    """The file-based list of pages/ ("app, agents, api keys…") must never show, not even at start."""
    seen_file_list = []

    def look(_message: object = None) -> None:
        names = page.locator("[data-testid=stSidebarNav] a").all_inner_texts()
        if any(name.strip().lower() in {"app", "api keys", "api_keys"} for name in names):
            seen_file_list.append(names)

    page.on("framenavigated", look)
    page.goto(console_url)
    for _ in range(60):  # every 50 ms through the first seconds of the session
        look()
        page.wait_for_timeout(50)
    open_page(page, console_url, "", "What needs attention")
    settle(page)
    look()
    assert not seen_file_list, seen_file_list
    assert page.locator("[data-testid=stSidebarNav]").count() == 0  # Streamlit's own menu is off
    menu = page.locator("[data-testid=stSidebar]").get_by_role("link")
    assert {"Overview", "Deployments", "Policies", "API keys"} <= {
        text.split("\n")[-1].strip() for text in menu.all_inner_texts()
    }
