from __future__ import annotations

from streamlit.proto.TextInput_pb2 import TextInput as TextInputProto

from api import OrgdeckClient
from service.storage.crypto import cipher_for
from tests.console.conftest import texts
from tests.test_secrets import read_values

PAGE = "pages/environments.py"


def org_client(server, org) -> OrgdeckClient:
    return OrgdeckClient(server.url, org.key, org_slug=org.slug)


def everything_shown(app) -> str:
    """Texts, tables and widget values: wherever a value could leak onto the screen."""
    tables = "\n".join(frame.value.to_csv() for frame in app.dataframe)
    widgets = "\n".join(str(w.value) for w in (*app.text_input, *app.text_area, *app.selectbox))
    return "\n".join((texts(app), tables, widgets))


def test_empty_state_invites_a_first_environment(console):
    app = console(PAGE)
    assert "No environments yet" in texts(app)
    assert "No secrets organization-wide yet" in texts(app)


def test_lists_environments_with_targets_and_secret_counts(console, server, org):
    with org_client(server, org) as orgdeck:
        production = orgdeck.environments.create("production", description="US traffic")
        orgdeck.environments.create("edge", target="webhook", webhook_url="https://edge.example/deploy")
        orgdeck.environments.secrets.set("ZENDESK_TOKEN", "zd-secret-value", environment_id=production.id)
    app = console(PAGE)
    table = app.dataframe[0].value
    assert list(table["Name"]) == ["edge", "production"]
    assert list(table["Target"]) == ["webhook", "builtin"]
    assert list(table["Secrets"]) == [0, 1]
    assert "Webhook URL" not in table  # in the detail: the table fits a 1024 px window
    assert "webhook https://edge.example/deploy · updated" in texts(app)  # the first row's detail
    assert "zd-secret-value" not in everything_shown(app)


def test_create_an_environment(console, server, org):
    app = console(PAGE)
    app.text_input(key="new_environment_name").input("staging")
    app.text_input(key="new_environment_description").input("Release candidates")
    next(b for b in app.button if b.label == "Create environment").click().run()
    assert not app.exception
    assert "Created environment **staging**" in texts(app)
    assert list(app.dataframe[0].value["Name"]) == ["staging"]
    with org_client(server, org) as orgdeck:
        assert [e.description for e in orgdeck.environments.list().items] == ["Release candidates"]


def test_a_refused_environment_keeps_what_was_typed_and_says_why_in_words(console, server, org):
    app = console(PAGE)
    app.text_input(key="new_environment_name").input("EU Production")
    app.text_input(key="new_environment_description").input("Customers in the EU")
    next(b for b in app.button if b.label == "Create environment").click().run()
    assert not app.exception
    [message] = [e.value for e in app.error]
    assert message.startswith("Name: lowercase letters, digits and hyphens")
    assert "e.g. eu-production" in message
    assert "^" not in message and "$" not in message  # words, never the pattern
    # Everything typed is still there to correct.
    assert app.text_input(key="new_environment_name").value == "EU Production"
    assert app.text_input(key="new_environment_description").value == "Customers in the EU"
    with org_client(server, org) as orgdeck:
        assert orgdeck.environments.list().total == 0

    app.text_input(key="new_environment_name").input("eu-production")
    next(b for b in app.button if b.label == "Create environment").click().run()
    assert "Created environment **eu-production**" in texts(app)
    assert app.text_input(key="new_environment_name").value == ""  # saved: the form starts afresh


def test_the_name_field_shows_its_rule_and_limit_before_anything_is_typed(console):
    app = console(PAGE)
    name = app.text_input(key="new_environment_name")
    assert "Lowercase letters, digits and hyphens" in name.help and "at most 63" in name.help
    assert name.placeholder == "e.g. eu-production"


def test_a_webhook_environment_gets_its_signing_key_here_shown_once(console, server, org):
    with org_client(server, org) as orgdeck:
        hook = orgdeck.environments.create(
            "partner", target="webhook", webhook_url="https://partner.example/hook"
        )
    app = console(PAGE)
    assert "missing" in list(app.dataframe[0].value["Signing key"])
    assert "No signing key yet" in texts(app)
    next(b for b in app.button if b.label == "Create signing key").click().run()
    assert not app.exception, app.exception
    [secret] = [c.value for c in app.code if c.value.startswith("whsec_")]
    assert "shown this once" in texts(app)
    with org_client(server, org) as orgdeck:
        created = orgdeck.environments.get(hook.id).signing_key_created_at
    assert created is not None
    app.run()  # shown once: gone on the next run
    assert not [c for c in app.code if c.value.startswith("whsec_")]
    assert list(app.dataframe[0].value["Signing key"]) == ["set"]
    # Rotating asks first, then replaces the key.
    app.button(key=f"rotate_key_{hook.id}_start").click().run()
    assert "refuses them until it has the new key" in texts(app)
    app.button(key=f"rotate_key_{hook.id}_confirm").click().run()
    [rotated] = [c.value for c in app.code if c.value.startswith("whsec_")]
    assert rotated != secret
    with org_client(server, org) as orgdeck:
        assert orgdeck.environments.get(hook.id).signing_key_created_at > created


def test_secret_add_and_rotate_never_echo_the_value(console, server, org, db, settings):
    with org_client(server, org) as orgdeck:
        production = orgdeck.environments.create("production")
    app = console(PAGE)
    app.text_input(key=f"secret_name_{production.id}").input("STRIPE_SECRET_KEY")
    app.text_input(key=f"secret_value_{production.id}").input("sk-live-first-value")
    assert app.text_input(key=f"secret_value_{production.id}").proto.type == TextInputProto.PASSWORD
    next(b for b in app.button if b.label == "Save secret").click().run()
    assert not app.exception
    assert "Stored **STRIPE_SECRET_KEY** in production" in texts(app)
    assert "will not be shown again" in texts(app)
    assert "sk-live-first-value" not in everything_shown(app)
    assert app.text_input(key=f"secret_value_{production.id}").value == ""

    app.text_input(key=f"secret_name_{production.id}").input("STRIPE_SECRET_KEY")
    app.text_input(key=f"secret_value_{production.id}").input("sk-live-second-value")
    next(b for b in app.button if b.label == "Save secret").click().run()
    assert "Rotated to version 2" in texts(app)
    assert "sk-live-second-value" not in everything_shown(app)
    values = read_values(db, cipher_for(settings), org.slug, production.id, "STRIPE_SECRET_KEY")
    assert values == {"STRIPE_SECRET_KEY": "sk-live-second-value"}


def test_org_wide_secret_and_delete_with_confirmation(console, server, org):
    app = console(PAGE)
    app.text_input(key="secret_name_org").input("OPENAI_API_KEY")
    app.text_input(key="secret_value_org").input("sk-org-value")
    next(b for b in app.button if b.label == "Save secret").click().run()
    assert "organization-wide" in texts(app)
    with org_client(server, org) as orgdeck:
        [secret] = orgdeck.environments.secrets.list().items
    assert secret.environment_id is None
    app.selectbox(key="delete_pick_org").select("OPENAI_API_KEY (v1)").run()
    app.button(key=f"delete_secret_{secret.id}_start").click().run()
    assert "Deployments that use it" in texts(app)
    with org_client(server, org) as orgdeck:
        assert orgdeck.environments.secrets.list().total == 1  # nothing deleted before confirming
    app.button(key=f"delete_secret_{secret.id}_confirm").click().run()
    assert not app.exception
    assert "Deleted **OPENAI_API_KEY**" in texts(app)
    with org_client(server, org) as orgdeck:
        assert orgdeck.environments.secrets.list().total == 0


def test_edit_and_delete_an_environment(console, server, org):
    with org_client(server, org) as orgdeck:
        qa = orgdeck.environments.create("qa")
    app = console(PAGE)
    app.text_area[0].input("QA in Frankfurt")
    next(b for b in app.button if b.label == "Save changes").click().run()
    assert "Saved **qa**" in texts(app)
    app.button(key=f"delete_environment_{qa.id}_start").click().run()
    app.button(key=f"delete_environment_{qa.id}_confirm").click().run()
    assert not app.exception
    with org_client(server, org) as orgdeck:
        assert orgdeck.environments.list().total == 0
