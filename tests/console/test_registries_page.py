from __future__ import annotations

import pytest

from api import OrgdeckClient
from tests.console.conftest import label_target, select_row, texts

PAGE = "pages/registries.py"


@pytest.fixture
def orgdeck(server, org):
    with OrgdeckClient(server.url, org.key, org_slug=org.slug) as client:
        yield client


@pytest.fixture
def seeded(orgdeck) -> str:
    ref = orgdeck.registries.create("support", description="Support prompts").registry_ref
    orgdeck.registries.create("shared", visibility="public")
    orgdeck.registries.publish(
        ref, "triage", "Hello {{customer}},\nwe got your ticket.", commit_message="first"
    )
    orgdeck.registries.publish(
        ref, "triage", "Hello {{customer}},\nwe got ticket {{ticket_id}}.\nThanks!", labels=["production"]
    )
    orgdeck.registries.publish(ref, "triage", "Draft three", labels=["staging"])
    return ref


def table_with(app, column: str):
    return next(frame.value for frame in app.dataframe if column in frame.value.columns)


def open_registry(app, ref: str) -> None:
    select_row(app, "registries_table", list(app.dataframe[0].value["Registry"]).index(ref))


def button(app, label: str):
    return next(b for b in app.button if b.label == label)


def test_empty_state_offers_to_create_a_registry(console):
    app = console(PAGE)
    assert "No registries yet" in texts(app)
    app.text_input[0].input("my-prompts")
    button(app, "Create registry").click().run()
    assert not app.exception
    assert [ref.split("/")[1] for ref in app.dataframe[0].value["Registry"]] == ["my-prompts"]
    assert "publish the first one" in texts(app)


def test_lists_registries_with_visibility_and_counts(console, seeded):
    app = console(PAGE)
    table = app.dataframe[0].value
    rows = {row["Registry"].split("/")[1]: row for row in table.to_dict("records")}
    assert rows["support"]["Versions"] == 3 and rows["support"]["Artifacts"] == 1
    assert "public" in rows["shared"]["Visibility"] and "private" in rows["support"]["Visibility"]


def test_browse_shows_production_content_with_variables_highlighted(console, seeded):
    app = console(PAGE)
    open_registry(app, seeded)
    assert table_with(app, "Production").to_dict("records")[0]["Production"] == "2"
    assert app.radio(key="artifact_choice").value == "triage"
    shown = texts(app)
    assert "Version **2**" in shown  # production is what applications get, so it is shown first
    assert "<mark" in shown and "{{ticket_id}}</mark>" in shown
    assert "`{{customer}}`" in shown
    versions = table_with(app, "Labels")
    assert list(versions["Version"]) == ["3", "2", "1"]
    assert list(versions["Labels"]) == ["latest, staging", "production", ""]


def test_diff_shows_two_versions_side_by_side(console, seeded):
    app = console(PAGE)
    open_registry(app, seeded)
    app.selectbox(key=f"diff_from:{seeded}:triage").select("1").run()
    app.selectbox(key=f"diff_to:{seeded}:triage").select("2").run()
    assert not app.exception
    assert "2 lines added, 1 removed between 1 and 2" in texts(app)
    table = app.html[0].value
    assert "Version 1" in table and "Version 2" in table
    assert "we got ticket {{ticket_id}}." in table and "we got your ticket." in table


def test_publish_from_the_console(console, seeded, orgdeck):
    app = console(PAGE)
    open_registry(app, seeded)
    form_inputs = {t.label: t for t in app.text_input}
    form_inputs["Version (optional)"].input("4.0.0")
    form_inputs["Labels (optional)"].input("canary")
    form_inputs["Commit message"].input("From the console")
    app.text_area[0].input("Hi {{name}}, version four")
    button(app, "Publish").click().run()
    assert not app.exception, app.exception
    published = orgdeck.registries.retrieve(seeded, "triage", label="canary")
    assert (published.version, published.content, published.commit_message) == (
        "4.0.0",
        "Hi {{name}}, version four",
        "From the console",
    )


def test_publish_with_a_bad_version_explains_what_to_fix(console, seeded, orgdeck):
    app = console(PAGE)
    open_registry(app, seeded)
    next(t for t in app.text_input if t.label == "Version (optional)").input("4.0")
    app.text_area[0].input("anything")
    button(app, "Publish").click().run()
    assert [e.value for e in app.error] == ["Version: must be a semantic version such as 1.4.0 or 2.0.0-rc.1"]
    assert next(t for t in app.text_input if t.label == "Version (optional)").value == "4.0"
    assert orgdeck.registries.versions(seeded, "triage").total == 3


def test_move_label_promotes_a_version(console, seeded, orgdeck):
    app = console(PAGE)
    open_registry(app, seeded)
    app.radio(key="label_to_move").set_value("production")
    label_target(app).select("3")
    button(app, "Move label").click().run()
    assert not app.exception
    assert orgdeck.registries.retrieve(seeded, "triage").version == "3"
    # The picker stays on the version, worded with the label it now has.
    assert label_target(app).value == "3"
    assert label_target(app).options[0].startswith("3 · latest, production")


def test_move_label_to_a_new_label(console, seeded, orgdeck):
    app = console(PAGE)
    open_registry(app, seeded)
    app.text_input(key="new_label").input("canary")
    label_target(app).select("2")
    button(app, "Move label").click().run()
    assert not app.exception
    assert orgdeck.registries.retrieve(seeded, "triage", label="canary").version == "2"


def test_delete_asks_for_confirmation_then_restore_brings_it_back(console, seeded, orgdeck):
    app = console(PAGE)
    open_registry(app, seeded)
    app.button(key=f"delete_registry_{seeded}_start").click().run()
    assert "Nothing is erased" in texts(app)
    assert orgdeck.registries.retrieve(seeded, "triage").version == "2"  # nothing deleted yet
    button(app, "Delete registry").click().run()
    assert not app.exception
    assert seeded not in list(app.dataframe[0].value["Registry"])
    assert seeded in {
        r.registry_ref for r in orgdeck.registries.list(include_deleted=True).items if r.deleted_at
    }
    restore_box = next(s for s in app.selectbox if s.label == "Deleted registry")
    restore_box.select(seeded).run()
    app.button(key=f"restore_registry_{seeded}_start").click().run()
    assert "served again" in texts(app)
    button(app, "Restore registry").click().run()
    assert not app.exception
    assert seeded in list(app.dataframe[0].value["Registry"])
    assert orgdeck.registries.retrieve(seeded, "triage").content.startswith("Hello")
