"""The Governance pages in headless Chromium, on the demo organization, with no network needed."""

from __future__ import annotations

import pytest

from service.governance.demo import DEMO_POLICIES, EXAMPLE_PROVIDER
from tests.browser.conftest import grid_cells, open_page, shoot

pytestmark = pytest.mark.browser


def test_draft_a_policy_with_the_builtin_drafter(page, console_url):
    open_page(page, console_url, "governance", "Draft a policy", "Policies")
    assert {name for name, *_ in DEMO_POLICIES} <= set(grid_cells(page))
    page.get_by_role("textbox", name="Instructions").fill(
        "Never send customer emails to third-party tools. Always redact card numbers before logging.\n"
        "- Agents must escalate refunds above 500 EUR to a person"
    )
    page.get_by_role("button", name="Generate draft").click()
    page.get_by_role("button", name="Save as policy").wait_for(timeout=60_000)
    rule_text = page.get_by_role("textbox", name="Draft rule text").input_value()
    assert "1. MUST NOT send customer emails to third-party tools." in rule_text
    assert "3. MUST escalate refunds above 500 EUR to a person." in rule_text
    assert (
        page.get_by_role("textbox", name="Policy name").first.input_value()
        == "Do not send customer emails to third-party tools"
    )
    shoot(page, "governance-draft")


def test_providers_page_lists_the_example_connection(page, console_url):
    open_page(page, console_url, "providers", "System models", "Test connection")
    cells = grid_cells(page)
    assert EXAMPLE_PROVIDER in cells
    assert "builtin-template" in cells
