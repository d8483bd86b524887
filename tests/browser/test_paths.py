"""The three people the console is for, each on their path, at 1440 and at 1024 px, with nothing but
what the screen says: an operator shipping an agent, a manager asking a heatmap a question, a policy
author writing a rule. And a form refused with bad input, which keeps what was typed."""

from __future__ import annotations

import re
from datetime import date, datetime, timedelta

import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeoutError

from tests.browser.conftest import (
    ANSWERS,
    ARTIFACTS,
    NARROW,
    RUNNING,
    WIDE,
    assert_no_exception,
    choose,
    click_row,
    form_with,
    go,
    grid_cells,
    open_page,
    settle,
    shoot,
    submit,
)

pytestmark = pytest.mark.browser
WIDTHS = pytest.mark.parametrize("width", [WIDE, NARROW])


def start(page, console_url: str, width: int) -> None:
    page.set_viewport_size({"width": width, "height": 900})
    open_page(page, console_url, "", "What needs attention")
    settle(page)


def expect(page, text: str, timeout_ms: int = 60_000) -> None:
    """Until `text` is on screen and the run that put it there has ended; if it never comes, the
    failure says what the page showed instead, and keeps a screenshot of it."""
    try:
        page.get_by_text(text).first.wait_for(timeout=timeout_ms)
    except PlaywrightTimeoutError:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        shot = ARTIFACTS / f"missing-{re.sub(r'[^a-z0-9]+', '-', text.lower()).strip('-')[:60]}.png"
        page.screenshot(path=str(shot), full_page=True)
        alerts = page.locator(ANSWERS).all_inner_texts()
        running = page.locator(RUNNING).count() > 0
        raise AssertionError(
            f"{text!r} never showed on {page.url}; alerts: {alerts}; "
            f"{'still running' if running else 'not running'}; see {shot}"
        ) from None
    settle(page)


@WIDTHS
def test_operator_ships_an_agent_to_a_new_environment(page, console_url, server, width):
    """Environment → secret → agent → version → preview → deploy → follow → history."""
    environment, agent = f"qa-{width}", f"faq-bot-{width}"
    start(page, console_url, width)

    go(page, "Environments")
    page.get_by_text("New environment", exact=True).click()
    form = form_with(page, "Create environment")
    form.get_by_role("textbox", name="Name", exact=True).fill(environment)
    form.get_by_role("textbox", name="Description", exact=True).fill(
        "Where support checks answers before production"
    )
    submit(page, "Create environment")
    expect(page, f"Created environment {environment}.")
    assert_no_exception(page)
    # The new environment is the one opened below the table, ready for its secrets.
    assert page.get_by_role("heading", name=environment, exact=True).is_visible()
    secrets = form_with(page, "Save secret").first
    secrets.get_by_role("textbox", name="Secret name", exact=True).fill("QA_SUPPORT_TOKEN")
    secrets.get_by_role("textbox", name="Value", exact=True).fill("qa-token-not-shown-again")
    submit(page, "Save secret")
    expect(page, f"Stored QA_SUPPORT_TOKEN in {environment}.")
    assert "qa-token-not-shown-again" not in page.content()

    go(page, "Agents")
    page.get_by_text("New agent", exact=True).click()
    form = form_with(page, "Create agent")
    form.get_by_role("textbox", name="Stable key", exact=True).fill(agent)
    form.get_by_role("textbox", name="Provider", exact=True).fill("openai")
    submit(page, "Create agent")
    expect(page, f"Created agent {agent}.")
    assert page.get_by_role("heading", name=agent, exact=True).is_visible()
    page.get_by_role("button", name="Snapshot version").click()
    expect(page, f"Snapshotted {agent} as version 1.")
    assert_no_exception(page)

    go(page, "Deployments")
    page.get_by_role("tab", name="Deploy", exact=True).click()
    settle(page)
    main = page.locator("[data-testid=stMain]")
    choose(main, "Environment", environment)
    choose(main, "Agents", f"{agent} · v1")
    settle(page)
    page.get_by_role("button", name="Preview changes").click()
    expect(page, f"Preview: 1 agent(s) to {environment} (1 added)")
    assert_no_exception(page)
    page.get_by_role("button", name=f"Deploy to {environment}").click()
    # Followed live until it ends: the test service's worker runs it.
    expect(page, "Deployed 1 agent", timeout_ms=60_000)
    shoot(page, "deploy-followed", widths=(width,))
    assert_no_exception(page)

    page.get_by_role("tab", name="History", exact=True).click()
    settle(page)
    cells = grid_cells(page)
    assert agent in cells and environment in cells and "v1" in cells
    assert_no_exception(page)


@WIDTHS
def test_manager_opens_the_jobs_behind_a_heatmap_cell(page, console_url, server, width):
    """Heatmap cell → the jobs of that environment and week."""
    start(page, console_url, width)
    go(page, "Deployments")
    page.get_by_role("tab", name="Overview", exact=True).click()
    settle(page)
    page.locator("[data-testid=stButtonGroup]").filter(has_text="week").get_by_text(
        "week", exact=True
    ).click()
    settle(page)
    heatmap = page.locator("[data-testid=stPlotlyChart]").first
    heatmap.locator(".js-plotly-plot .heatmaplayer").first.wait_for(timeout=30_000)
    heatmap.scroll_into_view_if_needed()
    grid = heatmap.locator(".nsewdrag").first.bounding_box()
    assert grid is not None
    # The last row (staging), a few weeks back: hover says which week and how many jobs, then click.
    x, y = grid["x"] + grid["width"] * 0.7, grid["y"] + grid["height"] * (3.5 / 4)
    page.mouse.move(x, y)
    hover = heatmap.locator(".hoverlayer").first
    page.wait_for_timeout(500)
    said = hover.text_content() or ""
    found = re.search(r"staging · week of \w+ (\d{2} \w{3} \d{4})(\d+) jobs", said)
    assert found, said
    monday = datetime.strptime(found.group(1), "%d %b %Y").date()
    page.mouse.click(x, y)
    settle(page)
    assert_no_exception(page)
    assert page.get_by_role("tab", name="Jobs", selected=True).count() == 1
    environment = page.locator("[data-testid=stSelectbox]").filter(has_text="Environment").locator("input")
    assert environment.first.input_value() == "staging"
    shown = (
        page.locator("[data-testid=stDateInput]")
        .first.locator("input")
        .evaluate_all("inputs => inputs.map(input => input.value)")
    )
    assert shown == [f"{monday:%Y-%m-%d}", f"{monday + timedelta(days=6):%Y-%m-%d}"], shown
    cells = grid_cells(page)
    assert "staging" in cells and not {"production", "development", "eu-production"} & set(cells)
    # The grid's accessible copy holds each creation time in full: 2026-11-01 18:27:18+00:00.
    days = {cell[:10] for cell in cells if re.fullmatch(r"\d{4}-\d{2}-\d{2} [\d:]{8}\+00:00", cell)}
    assert days and all(monday <= date.fromisoformat(day) <= monday + timedelta(days=6) for day in days)
    shoot(page, "heatmap-cell-jobs", widths=(width,))


@WIDTHS
def test_author_drafts_edits_every_field_saves_and_finds_a_policy(page, console_url, width):
    """Draft → edit all fields → save → find (and a rename that the rule's title follows)."""
    name = f"Refunds need a person above 500 EUR ({width})"
    start(page, console_url, width)
    go(page, "Policies")
    page.get_by_role("textbox", name="Instructions", exact=True).fill(
        "Agents must escalate refunds above 500 EUR to a person. Never promise a refund date."
    )
    page.get_by_role("button", name="Generate draft").click()
    page.get_by_role("button", name="Save as policy").wait_for(timeout=60_000)
    assert_no_exception(page)
    editor = page.locator("[class*=st-key-panes_drafting] > [data-testid=stLayoutWrapper]").nth(1)
    editor.get_by_role("textbox", name="Policy name", exact=True).fill(name)
    choose(editor, "Category", "compliance")
    choose(editor, "Severity", "warning (reports)")
    editor.get_by_role("textbox", name="Description", exact=True).fill("Agreed with the finance team")
    text = editor.get_by_role("textbox", name="Draft rule text", exact=True)
    text.fill(text.input_value() + "\n\nReviewed with the finance team.")
    page.get_by_role("button", name="Save as policy").click()
    expect(page, f"Saved policy {name} as version 1.")
    assert_no_exception(page)

    page.get_by_role("textbox", name="Find by name", exact=True).fill(f"500 eur ({width}")
    page.keyboard.press("Enter")
    settle(page)
    assert name in grid_cells(page)
    assert page.get_by_role("heading", name=name).is_visible()
    caption = page.get_by_text("compliance · warning (reports) · version 1").first
    assert caption.is_visible()
    # The saved policy's editor is no form (its examples run as they are edited): the page's only
    # Rule text and Policy name fields, once the draft is saved.
    editor = page.locator("[data-testid=stMain]")
    saved = editor.get_by_role("textbox", name="Rule text", exact=True)
    assert saved.input_value().startswith(f"Title: {name}\nCategory: compliance · Severity: warning")
    assert saved.input_value().endswith("Reviewed with the finance team.")

    renamed = f"Large refunds go to a person ({width})"
    editor.get_by_role("textbox", name="Policy name", exact=True).fill(renamed)
    page.evaluate("document.activeElement?.blur()")
    settle(page)
    page.get_by_role("button", name="Save as new version").click()
    expect(page, f"Saved {renamed}, now at version 2.")
    page.get_by_role("textbox", name="Find by name", exact=True).fill("large refunds")
    page.keyboard.press("Enter")
    settle(page)
    # The policies' table, below the compliance view's tables once other runs leave violations.
    policies = page.locator("[data-testid=stDataFrame]").filter(has_text=renamed).first
    click_row(page, policies, renamed)
    rule = editor.get_by_role("textbox", name="Rule text", exact=True).input_value()
    assert f"Title: {renamed}" in rule and f"Title: {name}" not in rule
    assert "Category: compliance · Severity: warning" in rule
    shoot(page, "policy-saved", widths=(width,))


@WIDTHS
def test_a_refused_form_keeps_what_was_typed_and_says_why_by_the_field(page, console_url, width):
    start(page, console_url, width)
    go(page, "Environments")
    page.get_by_text("New environment", exact=True).click()
    form = form_with(page, "Create environment")
    form.get_by_role("textbox", name="Name", exact=True).fill("EU Production $1")
    form.get_by_role("textbox", name="Description", exact=True).fill("Customers in the EU")
    submit(page, "Create environment")
    settle(page)
    message = form.locator("[data-testid=stAlert]").first
    message.wait_for(timeout=30_000)
    said = message.locator("[data-testid=stMarkdownContainer]").inner_text()
    assert said.startswith("Name: lowercase letters, digits and hyphens"), said
    assert "e.g. eu-production" in said and "^" not in said and "{0," not in said
    assert page.locator(".katex").count() == 0  # no `$` read as mathematics anywhere
    # Next to the field: the message sits between the name and the description.
    name_box = form.get_by_role("textbox", name="Name", exact=True).bounding_box()
    description_box = form.get_by_role("textbox", name="Description", exact=True).bounding_box()
    message_box = message.bounding_box()
    assert name_box and description_box and message_box
    assert name_box["y"] < message_box["y"] < description_box["y"]
    assert form.get_by_role("textbox", name="Name", exact=True).input_value() == "EU Production $1"
    assert form.get_by_role("textbox", name="Description", exact=True).input_value() == "Customers in the EU"
    shoot(page, "refused-form", widths=(width,))
