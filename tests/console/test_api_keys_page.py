from __future__ import annotations

from api import OrgdeckClient
from tests.console.conftest import select_row, texts

PAGE = "pages/api_keys.py"


def test_lists_keys_without_values(console, org):
    app = console(PAGE)
    table = app.dataframe[0].value
    assert list(table["Name"]) == ["admin"]
    assert org.key not in texts(app)
    assert org.key not in table.to_csv()


def test_create_shows_the_value_once(console, server, org):
    app = console(PAGE)
    app.text_input(key="new_api_key_name").input("release-bot")
    next(b for b in app.button if b.label == "Create key").click().run()
    assert not app.exception
    shown_value = app.code[0].value
    assert shown_value.startswith("odk_")
    assert "will not be shown again" in texts(app)
    with OrgdeckClient(server.url, shown_value) as as_new_key:
        assert as_new_key.whoami().key_name == "release-bot"
    assert "release-bot" in list(app.dataframe[0].value["Name"])
    assert "release-bot (odk_" in app.subheader[0].value  # the new key is the one selected
    app.run()  # any further interaction: the value is gone
    assert shown_value not in texts(app)


def test_revoke_asks_for_confirmation_then_removes_the_key(console, server, org):
    with OrgdeckClient(server.url, org.key, org_slug=org.slug) as client:
        doomed = client.api_keys.create("old-ci")
    app = console(PAGE)
    row = list(app.dataframe[0].value["Name"]).index("old-ci")
    select_row(app, "api_keys_table", row)
    app.button(key=f"revoke_{doomed.id}_start").click().run()
    assert "cannot be undone" in texts(app)
    with OrgdeckClient(server.url, doomed.key) as still_valid:
        still_valid.whoami()  # nothing revoked before confirming
    app.button(key=f"revoke_{doomed.id}_confirm").click().run()
    assert not app.exception
    assert "Revoked **old-ci**" in texts(app)
    assert "old-ci" not in list(app.dataframe[0].value["Name"])
    with OrgdeckClient(server.url, org.key, org_slug=org.slug) as client:
        assert doomed.id not in {k.id for k in client.api_keys.list().items}


def test_the_consoles_own_key_is_not_offered_for_revocation(console):
    app = console(PAGE)
    assert "the key the console itself uses" in texts(app)
    assert not [b for b in app.button if b.label.startswith("Revoke")]


def test_a_refused_name_is_kept_and_explained(console, server, org):
    app = console(PAGE)
    assert "at most 200 characters" in app.text_input(key="new_api_key_name").help
    app.text_input(key="new_api_key_name").input("   ")
    next(b for b in app.button if b.label == "Create key").click().run()
    assert [e.value for e in app.error] == [
        "Key name is required: any text, at most 200 characters, e.g. github-actions-deploy"
    ]
    with OrgdeckClient(server.url, org.key, org_slug=org.slug) as client:
        assert client.api_keys.list().total == 1
