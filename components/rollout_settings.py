"""An environment's rollout and promotion settings, an admin's: the webhook that verifies each wave
of a rollout here, the environment versions come from before they may run here, how long they must
have run there, and whether deployments here end the lead time for changes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import streamlit as st

from api import ApiError
from api.environments import MAX_SOAK_MINUTES, Environment
from components import layout
from components.connection import client
from components.feedback import notify, plain
from components.fields import rule
from components.forms import FormFields
from components.permissions import control

NO_SOURCE = ""


def admin_only(help: str | None = None) -> dict[str, Any]:
    """`disabled` and `help` of a field only an admin changes (the route itself is an operator's)."""
    return control("updateEnvironment", at_least="admin", help=help)


@dataclass(frozen=True)
class Chosen:
    verification_url: str
    source: str
    soak_minutes: int
    require_promotion: bool
    production: bool


def rollout_settings_panel(environment: Environment, environments: list[Environment]) -> None:
    """The settings' form. On a protected environment the verification webhook, like the webhook
    URL, changes only through review: the service says so beside the field."""
    st.markdown("**Rollouts and promotion**")
    with st.form(f"rollout_settings_{environment.id}"):
        fields = FormFields("environment")
        chosen = _fields(fields, environment, {e.id: e.name for e in environments if e.id != environment.id})
        if st.form_submit_button("Save rollouts and promotion", **admin_only()):
            _save(fields, environment, chosen)


def _fields(fields: FormFields, environment: Environment, others: dict[str, str]) -> Chosen:
    key = environment.id
    verification_url = fields.text_input(
        "verificationWebhookUrl",
        key=f"edit_verification_url_{key}",
        value=environment.verification_webhook_url or "",
        **admin_only(rule("environment.verificationWebhookUrl").help),
    )
    source_col, soak_col = layout.fields(f"promotion_{key}", 2)
    choices = [NO_SOURCE, *others]
    source = source_col.selectbox(
        "Promotes from",
        choices,
        index=choices.index(environment.promotes_from) if environment.promotes_from in others else 0,
        format_func=lambda e: others.get(e, "none"),
        key=f"edit_promotes_from_{key}",
        **admin_only("The environment whose versions go on to this one."),
    )
    fields.slot("promotesFrom", where=source_col)
    soak = soak_col.number_input(
        "Soak minutes",
        min_value=0,
        max_value=MAX_SOAK_MINUTES,
        value=environment.soak_minutes,
        step=1,
        key=f"edit_soak_minutes_{key}",
        **admin_only(
            "With Require promotion: how long a version must have run there, with no failed job since."
        ),
    )
    fields.slot("soakMinutes", where=soak_col)
    required = st.toggle(
        "Require promotion",
        value=environment.require_promotion,
        key=f"edit_require_promotion_{key}",
        **admin_only("A deployment here must have run complete in the environment it promotes from."),
    )
    production = st.toggle(
        "Counts as production",
        value=environment.production,
        key=f"edit_production_{key}",
        **admin_only("Deployments here end the lead time for changes."),
    )
    return Chosen(verification_url.strip(), source or "", int(soak), required, production)


def _save(fields: FormFields, environment: Environment, chosen: Chosen) -> None:
    changes: dict[str, Any] = {
        "promotes_from": chosen.source,
        "require_promotion": chosen.require_promotion,
        "soak_minutes": chosen.soak_minutes,
        "production": chosen.production,
    }
    # Sent only when changed: on a protected environment an unchanged URL needs no review.
    if chosen.verification_url != (environment.verification_webhook_url or ""):
        changes["verification_webhook_url"] = chosen.verification_url
    try:
        saved = client().environments.update(environment.id, **changes)
    except ApiError as error:
        fields.show(error, "save the rollout and promotion settings")
    else:
        notify(f"Saved the rollout and promotion settings of **{plain(saved.name)}**.")
