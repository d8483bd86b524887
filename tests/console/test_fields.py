"""The field rules' words: what a form says instead of the service's patterns and types."""

from __future__ import annotations

import pytest

from api.common import ErrorDetail
from components.feedback import plain
from components.fields import RULES, field_of, worded


def detail(field: str | None, message: str, kind: str) -> ErrorDetail:
    return ErrorDetail(field=field, message=message, type=kind)


def test_a_pattern_is_said_in_the_words_of_the_rule():
    said = worded(
        "environment",
        detail("name", "string should match pattern '^[a-z0-9][a-z0-9-]{0,62}$'", "string_pattern_mismatch"),
    )
    assert said == (
        "Name: lowercase letters, digits and hyphens, starting with a letter or digit, at most 63, "
        "e.g. eu-production"
    )


def test_a_list_item_names_its_place_and_the_rule_of_the_list():
    said = worded(
        "agent",
        detail(
            "tags.2", "string should match pattern '^[a-z0-9][a-z0-9_.:/-]{0,63}$'", "string_pattern_mismatch"
        ),
    )
    assert said.startswith("Tags (item 3): up to 32, separated by commas")
    assert field_of(detail("tags.2", "x", "y")) == "tags"
    assert field_of(detail("config.recipients.0", "x", "y")) == "config.recipients"


def test_missing_and_empty_say_the_field_is_required():
    for kind, message in (
        ("missing", "is required"),
        ("string_too_short", "string should have at least 1 character"),
    ):
        said = worded("draft", detail("instructions", message, kind))
        assert said.startswith("Instructions is required: at least one sentence")


def test_the_services_own_words_stay_with_the_fields_label():
    said = worded(
        "agent", detail("stableKey", "value error, 'list' is reserved; choose another key", "value_error")
    )
    assert said == "Stable key: 'list' is reserved; choose another key"
    taken = worded("environment", detail("name", "An environment named 'x' already exists", "already_exists"))
    assert taken == "Name: An environment named 'x' already exists"


def test_a_field_without_a_rule_never_shows_a_pattern():
    said = worded(
        "",
        detail(
            "orgSlug",
            "string should match pattern '^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$'",
            "string_pattern_mismatch",
        ),
    )
    assert said == "orgSlug: has characters that are not allowed"


@pytest.mark.parametrize("key", sorted(RULES))
def test_no_rule_quotes_a_pattern(key):
    rule = RULES[key]
    for text in (rule.help, rule.sentence()):
        assert "^" not in text and "$" not in text and "{0," not in text


def test_plain_text_is_never_read_as_markdown_or_math():
    assert plain("costs $5 and $6") == r"costs \$5 and \$6"
    assert plain("a_b*c") == r"a\_b\*c"


def test_a_text_over_its_limit_is_kept_and_marked_too_long(console):
    from api.governance import INSTRUCTIONS_MAX_LENGTH

    app = console("pages/governance.py")
    pasted = "Never log customer PII. " * (INSTRUCTIONS_MAX_LENGTH // 24 + 1)
    field = app.text_area(key="draft_instructions")
    assert not field.max_chars  # the browser never cuts or drops a paste
    field.input(pasted).run()
    assert not app.exception, app.exception
    assert app.text_area(key="draft_instructions").value == pasted
    assert (
        f"Instructions: too long, {len(pasted):,} characters of at most {INSTRUCTIONS_MAX_LENGTH:,}; "
        "shorten it before saving." in [e.value for e in app.error]
    )


def test_a_form_field_over_its_limit_keeps_the_text_after_the_refusal(console):
    from api.common import DESCRIPTION_MAX_LENGTH

    app = console("pages/environments.py")
    typed = "x" * (DESCRIPTION_MAX_LENGTH + 5)
    app.text_input(key="new_environment_name").input("staging")
    app.text_input(key="new_environment_description").input(typed)
    next(b for b in app.button if b.label == "Create environment").click().run()
    assert not app.exception, app.exception
    assert app.text_input(key="new_environment_description").value == typed
    assert any(e.value.startswith("Description: ") for e in app.error)
