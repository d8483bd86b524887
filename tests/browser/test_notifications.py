"""The Notifications page in headless Chromium, on the demo organization's month of deliveries."""

from __future__ import annotations

import re

import pytest
from sqlalchemy import select

from service.notifications.demo import DEMO_CHANNELS
from service.notifications.models import DeliveryRow
from service.orgs.models import OrganizationRow
from service.storage.db import Database
from tests.browser.conftest import grid_cells, open_page, shoot

pytestmark = pytest.mark.browser


def test_notifications_page_shows_the_log_with_charts(page, console_url):
    open_page(page, console_url, "notifications", "Failure rate per channel", "Delivery log")
    charts = page.locator("[data-testid=stPlotlyChart] .js-plotly-plot")
    charts.nth(1).wait_for(timeout=30_000)
    assert charts.count() == 2
    # Bars drawn, not only axes: one stacked series per status, and a bar per demo channel.
    assert page.locator(".js-plotly-plot .barlayer .trace").count() >= 4
    assert page.get_by_text("1 delivery dead").first.is_visible()
    cells = grid_cells(page)
    assert set(DEMO_CHANNELS) & set(cells)
    # Newest first: the month's history, or live deliveries failing against the demo's dead address.
    assert {"sent", "failed"} & set(cells)
    assert page.locator("[data-testid=stException]").count() == 0


def test_a_delivery_opens_from_the_table_with_every_attempt(page, console_url, database_url):
    """The demo's dead delivery (the outage's): picked in the deliveries table, its detail shows the
    event, the body sent and all eight attempts with their answers, labelled as demo data."""
    page.set_viewport_size({"width": 1440, "height": 1600})
    open_page(page, console_url, "notifications", "Deliveries")
    dead, event_type = _demo_dead_delivery(database_url)
    page.get_by_role("combobox", name="State").click()
    page.get_by_role("option", name="dead").click()
    page.keyboard.press("Escape")
    page.get_by_text("1 to 1 of 1 deliveries").wait_for(timeout=30_000)
    assert {"dead", "Release webhook"} <= set(grid_cells(page))
    table = page.locator("[data-testid=stDataFrame]").first
    box = table.bounding_box()
    assert box is not None
    page.mouse.click(box["x"] + 12, box["y"] + 52)  # the row's selection marker, left of its first cell
    page.get_by_text(f"message {dead}").first.wait_for(timeout=30_000)
    attempts = page.locator("[data-testid=stExpander] summary").filter(has_text=re.compile(r"#\d+ · "))
    attempts.nth(7).wait_for(timeout=30_000)
    assert attempts.count() == 8
    assert "#8 · dead · HTTP 503" in attempts.first.inner_text()
    assert page.get_by_text("Demo data: made-up history").first.is_visible()
    assert page.get_by_text("Resend").first.is_visible()
    assert "next attempt" not in page.get_by_text(f"message {dead}").first.inner_text()
    page.get_by_text(f'"type": "{event_type}"').first.wait_for(timeout=30_000)  # the body sent
    assert page.locator("[data-testid=stException]").count() == 0
    shoot(page, "notifications-delivery")


def _demo_dead_delivery(database_url: str) -> tuple[str, str]:
    """The dead delivery's id and its event's type, which the demo's history draws by the day."""
    db = Database(database_url)
    try:
        with db.session() as session:
            query = (
                select(DeliveryRow.id, DeliveryRow.event_type)
                .join(OrganizationRow, OrganizationRow.id == DeliveryRow.org_id)
                .where(OrganizationRow.slug == "demo", DeliveryRow.status == "dead")
            )
            dead, event_type = session.execute(query).one()
            return dead, event_type
    finally:
        db.dispose()
