"""The Deployments page's Promotion tab: the paths as columns, the agents as rows, what waits and
what holds it back; promote, or request it where the target is protected."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from api import OrgdeckClient
from tests.console.conftest import texts
from tests.console.test_deployments_page import button, open_tab, org_client
from tests.console.test_roles_in_console import open_as, signed_in_as
from tests.test_deployments import versioned_agent, wait_for_end
from tests.test_promotion import backdate

PAGE = "pages/deployments.py"
PROMOTION = "Promotion"


def deployed(orgdeck: OrgdeckClient, environment_id: str, stable_key: str) -> None:
    job = orgdeck.deployments.deploy(environment_id, [stable_key])
    assert wait_for_end(orgdeck, job.id).status == "complete"


@pytest.fixture
def path(server, org) -> tuple[str, str]:
    """`staging` → `production` (production, promotion required, soak 60 min): `triage` runs version
    1 in both and version 2 in staging, for 45 minutes."""
    with org_client(server, org) as admin:
        staging = admin.environments.create("staging").id
        production = admin.environments.create("production").id
        admin.environments.update(production, promotes_from=staging, production=True)
        versioned_agent(admin, "triage")
        deployed(admin, staging, "triage")
        assert wait_for_end(admin, admin.deployments.promote(staging, production).id).status == "complete"
        admin.environments.update(production, require_promotion=True, soak_minutes=60)
        admin.agents.update("triage", name="Triage two")
        admin.agents.snapshot("triage")
        deployed(admin, staging, "triage")
    return staging, production


def test_without_paths_the_tab_says_how_to_make_one_and_who_may(console, server, org):
    with org_client(server, org) as admin:
        admin.environments.create("staging")
    app = open_tab(console(PAGE), PROMOTION)
    shown = texts(app)
    assert "No promotion paths yet" in shown
    assert (
        "An admin sets it" in shown and "**Rollouts and promotion**" in shown and "*Promotes from*" in shown
    )
    assert [link.label for link in app.get("page_link")] == ["Set a promotion path"]
    assert not [b for b in app.button if b.label.startswith("Promote")]


def test_columns_follow_the_path_and_cells_say_what_runs_and_what_waits(console, db, path):
    staging, _ = path
    backdate(db, staging, 18)
    app = open_tab(console(PAGE), PROMOTION)
    grid = next(m.value for m in app.markdown if m.value.startswith("| Agent |"))
    header = grid.splitlines()[0]
    assert header.index("**staging**") < header.index("**production**")
    assert header.endswith(
        "**production**<br>:violet-badge[counts as production]<br>:blue-badge[promotion required]"
        "<br>:gray-badge[soak 60 min] |"
    )
    row = next(line for line in grid.splitlines() if line.startswith("| **triage**"))
    staging_cell, production_cell = row.split(" | ")[1:3]
    assert staging_cell == "v2 · since 18 min"
    assert production_cell.startswith("v1 · since ")
    assert "**v2 waiting** · soak 42 min left" in production_cell
    promote = button(app, "Promote to production")
    assert not promote.disabled


def test_a_viewer_sees_the_promote_button_disabled_naming_the_role(server, org, path, monkeypatch):
    signed_in_as(server, org, "viewer", monkeypatch)
    app = open_as(PAGE)
    open_tab(app, PROMOTION)
    promote = button(app, "Promote to production")
    assert promote.disabled and promote.help == "Needs the operator role; you are a viewer."
    assert "v2 waiting" in texts(app)


def test_a_soaking_promotion_previews_its_block_and_cannot_go(console, path):
    app = open_tab(console(PAGE), PROMOTION)
    button(app, "Promote to production").click().run()
    assert not app.exception, app.exception
    shown = texts(app)
    assert "Promote 1 agent(s) from **staging** to **production**" in shown
    assert "must run in 'staging' for 60 min first (60 min left)" in shown
    assert button(app, "Promote now to production").disabled


def test_a_protected_target_requests_promotion_with_a_reason(console, server, org, db, path):
    staging, production = path
    backdate(db, staging, 61)
    with org_client(server, org) as admin:
        admin.environments.update(production, protected=True)
    app = open_tab(console(PAGE), PROMOTION)
    button(app, "Request promotion to production").click().run()
    assert not app.exception, app.exception
    assert "production is protected" in texts(app)
    request = button(app, "Request promotion now to production")
    assert request.disabled and request.help == "Type a reason first: the reviewers read it."
    app.text_input(key="promotion_reason").input("Triage two is ready").run()
    button(app, "Request promotion now to production").click().run()
    assert not app.exception, app.exception
    assert "Requested the promotion to **production**" in texts(app)
    with org_client(server, org) as admin:
        (opened,) = admin.change_requests.list(status="open").items
    assert opened.payload["promotedFrom"] == staging and opened.payload["agentVersions"] == {"triage": 2}
    assert "review pending" in texts(app)
    assert any(link.label == f"Review pending to production ({opened.id})" for link in app.get("page_link"))


def test_a_promotion_starts_its_job_and_an_api_error_is_said_in_words(console, server, org, db, path):
    staging, production = path
    backdate(db, staging, 61)
    app = open_tab(console(PAGE), PROMOTION)
    button(app, "Promote to production").click().run()
    with org_client(server, org) as admin:  # what runs in staging moves under the preview
        admin.environments.update(production, soak_minutes=120)
    button(app, "Promote now to production").click().run()
    assert not app.exception, app.exception
    assert "Could not promote." in texts(app) and "120 min" in texts(app)
    with org_client(server, org) as admin:
        admin.environments.update(production, soak_minutes=60)
    button(app, "Promote now to production").click().run()
    assert "Promotion to **production** started" in texts(app)


def test_agents_beyond_a_page_are_reached_with_next(console, server, org, path, monkeypatch):
    staging, _ = path
    with org_client(server, org) as admin:
        for key in ("kb-answerer", "summarizer"):
            versioned_agent(admin, key)
            deployed(admin, staging, key)
    monkeypatch.setattr("components.deployments.promotion.AGENTS_PER_PAGE", 2)
    app = open_tab(console(PAGE), PROMOTION)

    def rows() -> list[str]:
        grid = next(m.value for m in app.markdown if m.value.startswith("| Agent |"))
        return [line.split(" | ")[0] for line in grid.splitlines() if line.startswith("| **")]

    assert rows() == ["| **kb-answerer**", "| **summarizer**"]
    assert "1 to 2 of 3 agents running on the paths" in texts(app)
    button(app, "Next").click().run()
    assert rows() == ["| **triage**"]
    assert "3 to 3 of 3 agents running on the paths" in texts(app)
    assert button(app, "Next").disabled and not button(app, "Previous").disabled


def two_ready_previewed(console, server, org, db, path) -> AppTest:
    """`summarizer` beside `triage`, both past the soak and waiting for production, the promotion
    previewed."""
    staging, _ = path
    with org_client(server, org) as admin:
        versioned_agent(admin, "summarizer")
        deployed(admin, staging, "summarizer")
    backdate(db, staging, 61)
    app = open_tab(console(PAGE), PROMOTION)
    button(app, "Promote to production").click().run()
    return app


def test_an_agent_taken_out_of_the_promotion_keeps_waiting(console, server, org, db, path):
    _, production = path
    app = two_ready_previewed(console, server, org, db, path)
    chosen = app.multiselect(key="promotion_agents")
    assert chosen.value == ["summarizer", "triage"]
    assert "Promote 2 agent(s) from **staging** to **production**" in texts(app)
    chosen.unselect("summarizer").run()
    assert not app.exception, app.exception
    assert "Promote 1 agent(s) from **staging** to **production**" in texts(app)
    button(app, "Promote now to production").click().run()
    assert "Promotion to **production** started" in texts(app)
    with org_client(server, org) as admin:
        job = admin.deployments.jobs(environment_id=production, limit=1).items[0]  # the newest
        assert [agent.stable_key for agent in job.agents] == ["triage"]
        assert wait_for_end(admin, job.id).status == "complete"
        view = admin.deployments.promotions()
    summarizer = next(agent for agent in view.items if agent.stable_key == "summarizer")
    assert [waiting.environment_id for waiting in summarizer.waiting] == [production]


def test_with_no_agent_chosen_nothing_can_be_promoted(console, server, org, db, path):
    app = two_ready_previewed(console, server, org, db, path)
    app.multiselect(key="promotion_agents").set_value([]).run()
    assert not app.exception, app.exception
    assert "Choose at least one agent to promote." in texts(app)
    assert not [b for b in app.button if b.label == "Promote now to production"]
    button(app, "Discard preview").click().run()
    assert not app.multiselect and "Choose at least one agent" not in texts(app)
