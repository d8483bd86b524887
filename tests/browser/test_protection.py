"""Protection set in the console, in headless Chromium: an admin protects an environment and a
registry's label without leaving the console; a pasted over-long text stays in its field."""

from __future__ import annotations

import pytest

from api import OrgdeckClient
from api.governance import INSTRUCTIONS_MAX_LENGTH
from tests.browser.conftest import (
    assert_no_exception,
    choose,
    form_with,
    open_page,
    running_console,
    settle,
    shoot,
    submit,
)

pytestmark = pytest.mark.browser


def test_an_admin_protects_an_environment_and_a_label(page, server, org, tmp_path, database_url):
    with OrgdeckClient(server.url, org.key, org_slug=org.slug) as admin:
        production = admin.environments.create("production")
        registry = admin.registries.create("support-prompts")
        admin.registries.publish(registry.registry_ref, "system", "You are helpful.", labels=["production"])

    with running_console(tmp_path / "admin", database_url, server.url, org.key) as console:
        open_page(page, console, "environments", "Save protection")
        protection = form_with(page, "Save protection")
        protection.get_by_text("Protected: deployments").click()
        approvals = protection.get_by_role("spinbutton", name="Approvals needed")
        approvals.fill("2")
        approvals.press("Tab")
        submit(page, "Save protection")
        page.get_by_text("is protected · 2 approvals").first.wait_for(timeout=60_000)
        assert_no_exception(page)
        shoot(page, "environment-protected")

        open_page(page, console, "registries", "Protected labels: none")
        page.get_by_text("Protected labels: none").click()
        choose(form_with(page, "Save protected labels"), "Protected labels", "production")
        submit(page, "Save protected labels")
        page.get_by_text("Protected labels of").first.wait_for(timeout=60_000)
        assert_no_exception(page)
        shoot(page, "registry-label-protected")

    with OrgdeckClient(server.url, org.key, org_slug=org.slug) as admin:
        saved = admin.environments.get(production.id)
        [protected] = admin.registries.list().items
    assert (saved.protected, saved.required_approvals) == (True, 2)
    assert protected.protected_labels == ["production"]


def test_a_pasted_over_long_text_stays_in_its_field(page, server, org, tmp_path, database_url):
    pasted = "Never log customer PII. " * (INSTRUCTIONS_MAX_LENGTH // 24 + 1)
    with running_console(tmp_path / "author", database_url, server.url, org.key) as console:
        open_page(page, console, "governance", "Instructions")
        field = page.get_by_role("textbox", name="Instructions")
        field.click()
        page.keyboard.insert_text(pasted)  # as a paste arrives: the whole text in one input
        field.press("Tab")
        settle(page)
        page.get_by_text(f"{len(pasted):,} characters of at most {INSTRUCTIONS_MAX_LENGTH:,}").wait_for(
            timeout=60_000
        )
        assert field.input_value() == pasted
        assert_no_exception(page)
        shoot(page, "instructions-too-long", widths=(1024,))
