"""The Environments and Tools pages in headless Chromium, on the demo organization."""

from __future__ import annotations

import pytest

from service.environments.demo import DEMO_ENVIRONMENTS, ORG_WIDE_SECRETS
from tests.browser.conftest import grid_cells, open_page

pytestmark = pytest.mark.browser


def test_environments_page_shows_targets_and_secrets_without_values(page, console_url):
    open_page(page, console_url, "environments", "Select an environment", "Organization-wide secrets")
    cells = grid_cells(page)
    assert set(DEMO_ENVIRONMENTS) <= set(cells)
    assert "builtin" in cells
    assert {"ZENDESK_TOKEN", "STRIPE_SECRET_KEY", "OPENAI_API_KEY"} <= set(cells)
    content = page.content()
    for value in ORG_WIDE_SECRETS.values():
        assert value not in content
    assert page.locator("input[type=password]").count() >= 2  # the environment's and the org-wide form


def test_tools_page_shows_the_catalogue_and_the_version_matrix(page, console_url):
    open_page(page, console_url, "tools", "Deployments", "Green: the highest version")
    cells = grid_cells(page)
    assert {"stripe.refund", "zendesk.search_tickets", "eu-production"} <= set(cells)
    page.locator(".js-plotly-plot").first.wait_for(timeout=30_000)
