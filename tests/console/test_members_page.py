"""Settings → Members: the table, adding, changing a role, deactivating; empty and error states."""

from __future__ import annotations

from api import OrgdeckClient
from tests.console.conftest import select_row, texts

PAGE = "pages/members.py"


def test_lists_members_with_role_state_and_key_count(console, server, org):
    with OrgdeckClient(server.url, org.key, org_slug=org.slug) as admin:
        dana = admin.members.create("dana@example.com", "Dana Reyes", "operator")
        admin.api_keys.create("dana-laptop", member_id=dana.id)
        admin.api_keys.create("dana-ci", member_id=dana.id)
        admin.members.create("lee@example.com", "Lee Park", "viewer")
    app = console(PAGE)
    table = app.dataframe[0].value
    assert list(table["Email"]) == ["dana@example.com", "lee@example.com"]
    row = table.set_index("Email").loc["dana@example.com"]
    assert (row["Role"], bool(row["Active"]), int(row["Keys"])) == ("operator", True, 2)
    assert "Dana Reyes (dana@example.com)" in app.subheader[0].value


def test_add_change_role_and_deactivate(console, server, org):
    app = console(PAGE)
    assert "No members yet" in texts(app)
    app.text_input(key="new_member_email").input("sam@example.com")
    app.text_input(key="new_member_name").input("Sam Lee")
    app.selectbox(key="new_member_role").select("author")
    next(b for b in app.button if b.label == "Add member").click().run()
    assert not app.exception
    assert "Added **Sam Lee** as author" in texts(app)
    with OrgdeckClient(server.url, org.key, org_slug=org.slug) as admin:
        sam = next(m for m in admin.members.list().items if m.email == "sam@example.com")
    assert sam.role == "author"

    app.selectbox(key=f"role_of_{sam.id}").select("operator")
    next(b for b in app.button if b.label == "Change role").click().run()
    assert "is now operator" in texts(app)

    app.button(key=f"deactivate_{sam.id}_start").click().run()
    assert "stop working at once" in texts(app)
    app.button(key=f"deactivate_{sam.id}_confirm").click().run()
    assert "Deactivated **Sam Lee**" in texts(app)
    with OrgdeckClient(server.url, org.key, org_slug=org.slug) as admin:
        stored = admin.members.get(sam.id)
    assert (stored.role, stored.active) == ("operator", False)


def test_a_refused_email_is_said_next_to_the_field(console):
    app = console(PAGE)
    app.text_input(key="new_member_email").input("not-an-address")
    app.text_input(key="new_member_name").input("Nobody")
    next(b for b in app.button if b.label == "Add member").click().run()
    assert any(e.value.startswith("Email:") for e in app.error), [e.value for e in app.error]
    assert app.text_input(key="new_member_email").value == "not-an-address"


def test_deactivated_members_show_on_request(console, server, org):
    with OrgdeckClient(server.url, org.key, org_slug=org.slug) as admin:
        gone = admin.members.create("gone@example.com", "Gone", "viewer")
        admin.members.deactivate(gone.id)
    app = console(PAGE)
    assert "No members yet" in texts(app)
    app.toggle(key="members_show_inactive").set_value(True).run()
    assert list(app.dataframe[0].value["Email"]) == ["gone@example.com"]
    select_row(app, "members_table", 0)
    assert "their keys no longer work" in texts(app)
