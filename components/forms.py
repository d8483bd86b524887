"""Form fields that show their rule before anything is typed and the service's refusal next to
themselves, in words, while keeping what was typed.

    fields = FormFields("environment")
    name = fields.text_input("name", key="new_environment_name")
    if st.form_submit_button("Create"):
        try:
            created = orgdeck.environments.create(name)
        except ApiError as error:
            fields.show(error, "create the environment")
        else:
            fields.clear()
            notify(...)

Forms using it are not `clear_on_submit`: a refused submit keeps every field as typed; `clear`
forgets the values once the service has accepted them.
"""

from __future__ import annotations

import json
from typing import Any

import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from api.errors import ApiError
from components.feedback import explain, plain
from components.fields import field_of, rule, worded

_RESETS = "orgdeck_form_resets"


class InvalidField(ValueError):
    """A value the page could not turn into what the API expects (JSON that does not parse), said
    in words and about one field, like the service's refusals."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


def json_value(text: str, field: str) -> Any:
    """What a JSON field holds, or InvalidField saying where the text stops being JSON."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise InvalidField(field, f"not valid JSON: {error.msg} (line {error.lineno})") from error


def json_object(text: str, field: str, *, example: str) -> dict[str, Any]:
    """The object a JSON-object field holds; refused with `example` shown when it holds anything else."""
    value = json_value(text, field)
    if not isinstance(value, dict):
        raise InvalidField(field, f"must be a JSON object, like {example}")
    return value


def too_long(label: str, length: int, limit: int) -> str:
    """`Instructions: too long, 20,412 characters of at most 20,000; shorten it before saving.`"""
    return f"{label}: too long, {length:,} characters of at most {limit:,}; shorten it before saving."


class FormFields:
    """The fields of one form of `form` (the prefix of its rules in `components.fields`)."""

    def __init__(self, form: str) -> None:
        self.form = form
        self._slots: dict[str, DeltaGenerator] = {}
        self._keys: list[str] = []

    def text_input(self, field: str, *, key: str, where: DeltaGenerator | None = None, **kwargs: Any) -> str:
        return self._draw("text_input", field, key, where, kwargs)

    def text_area(self, field: str, *, key: str, where: DeltaGenerator | None = None, **kwargs: Any) -> str:
        return self._draw("text_area", field, key, where, kwargs)

    def slot(self, field: str, *, where: DeltaGenerator | None = None) -> None:
        """Where the error of a field drawn by another kind of widget goes: right below it."""
        self._slots[field] = (where or st).empty()

    def _draw(
        self, kind: str, field: str, key: str, where: DeltaGenerator | None, kwargs: dict[str, Any]
    ) -> str:
        found = rule(f"{self.form}.{field}")
        kwargs.setdefault("label", found.label)
        # Not the widget's own max_chars: the browser would cut or drop a longer paste. The text is
        # kept whole and marked too long instead, for the person to shorten; the help says the limit.
        limit = kwargs.pop("max_chars", found.max_chars)
        kwargs.setdefault("help", found.help)
        # A disabled field's help is why it is disabled: its limit would only blur that.
        if limit is not None and not kwargs.get("disabled") and f"{limit:,}" not in kwargs["help"]:
            kwargs["help"] += f" At most {limit:,} characters."
        if found.example is not None and "placeholder" not in kwargs:
            kwargs["placeholder"] = f"e.g. {found.example}"
        resets: set[str] = st.session_state.get(_RESETS, set())
        if key in resets:
            # Set through session state before the widget is drawn, the value reaches the browser
            # too: a field only forgotten on the server keeps showing what was typed.
            resets.discard(key)
            st.session_state[key] = kwargs.pop("value", "")
        value = str(getattr(where or st, kind)(key=key, **kwargs))
        self._keys.append(key)
        self.slot(field, where=where)
        if limit is not None and len(value) > limit:
            self._place(field, too_long(found.label, len(value), limit))
        return value

    def show(self, error: ApiError | InvalidField, action: str) -> None:
        """Each message next to its field; what belongs to no field of the form above the button."""
        if isinstance(error, InvalidField):
            self._place(error.field, f"{rule(f'{self.form}.{error.field}').label}: {error.message}")
            return
        unplaced = [
            detail for detail in error.details if not self._place(field_of(detail), worded(self.form, detail))
        ]
        if unplaced or not error.details:
            said = "; ".join(worded(self.form, d) for d in unplaced) if unplaced else explain(error)
            st.error(f"**Could not {action}.** {plain(said)}", icon=":material/error:")

    def _place(self, field: str, message: str) -> bool:
        slot = self._slots.get(field)
        if slot is None:
            return False
        slot.error(plain(message), icon=":material/error:")
        return True

    def clear(self) -> None:
        """Forget what was typed, once it has been saved: on the server now, in the browser when the
        page is drawn again (a rerun follows)."""
        st.session_state.setdefault(_RESETS, set()).update(self._keys)
        for key in self._keys:
            st.session_state.pop(key, None)
