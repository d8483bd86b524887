"""Exceptions to deny policies: the list with their expiry, a form to grant one (an operator's; where
policies need approval, the form submits it as a change request instead), and revoking one before it
expires."""

from __future__ import annotations

from datetime import UTC, datetime, time, timedelta
from typing import Any

import pandas as pd
import streamlit as st

from api import ApiError
from api.changes import PolicyExceptionChange
from api.governance import Policy, PolicyException
from api.resource import body
from components import layout
from components.connection import client, current
from components.feedback import attempt, notify, plain, show_error
from components.formatting import ago
from components.forms import FormFields
from components.permissions import control
from components.tables import chosen_row

TABLE = "exceptions_table"
ANY = ""
DEFAULT_DAYS = 7
MAX_DAYS = 90


def until(expires_at: datetime) -> str:
    now = datetime.now(UTC)
    return f"expired {ago(expires_at)}" if expires_at <= now else f"in {_span(expires_at - now)}"


def _span(left: timedelta) -> str:
    if left.days:
        return f"{left.days} day{'s' if left.days != 1 else ''}"
    hours = left.seconds // 3600
    return f"{hours} hour{'s' if hours != 1 else ''}" if hours else "under an hour"


def exception_rows(exceptions: list[PolicyException], names: dict[str, str]) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "Policy": names.get(exception.policy_id, exception.policy_id),
                "Agent": exception.agent_stable_key or "every agent",
                "Environment": exception.environment_name or "every environment",
                "Reason": exception.reason,
                "Expires": until(exception.expires_at),
                "State": "live" if exception.live else ("revoked" if exception.revoked_at else "expired"),
                "By": exception.created_by,
            }
            for exception in exceptions
        ]
    )


def grant_form(
    policies: list[Policy], environment_names: list[str], agent_keys: list[str], *, reviewed: bool
) -> None:
    """Grant an exception, or where policies need approval (`reviewed`) submit it for approval: the
    reason is the exception's, and the reviewers read it."""
    deny_policies = [policy for policy in policies if policy.enforcement == "deny"]
    if not deny_policies:
        st.caption("No deny policy yet: exceptions let deployments through a deny policy.")
        return
    with st.form("exception_form", clear_on_submit=False):
        fields = FormFields("exception")
        policy, agent, environment = exception_subject(fields, deny_policies, environment_names, agent_keys)
        reason = fields.text_area("reason", key="exception_reason", height=80)
        today = datetime.now(UTC).date()
        expires = st.date_input(
            "Expires (end of the day, UTC)",
            value=today + timedelta(days=DEFAULT_DAYS),
            min_value=today,
            max_value=today + timedelta(days=MAX_DAYS - 1),
            key="exception_expires",
        )
        fields.slot("expiresAt")
        if not st.form_submit_button(
            "Submit exception for approval" if reviewed else "Grant exception",
            type="primary",
            icon=":material/approval:" if reviewed else ":material/verified_user:",
            # Granted once approved, it is an operator's change like a direct grant.
            **(control("openChangeRequest", at_least="operator") if reviewed else control("createException")),
        ):
            return
    if not agent and not environment:
        st.error(
            "Name an agent, an environment or both: an exception for everything would disable the policy."
        )
        return
    wanted = {
        "policy_id": policy.id,
        "reason": reason.strip(),
        "expires_at": datetime.combine(expires, time(23, 59), tzinfo=UTC),
        "agent_stable_key": agent or None,
        "environment_name": environment or None,
    }
    if reviewed:
        submit_exception(policy, wanted, fields)
    else:
        grant_exception(policy, wanted, fields)


def exception_subject(
    fields: FormFields, deny_policies: list[Policy], environment_names: list[str], agent_keys: list[str]
) -> tuple[Policy, str, str]:
    """The policy an exception passes through, and the agent and environment it covers (ANY: all)."""
    policy_col, agent_col, env_col = layout.fields("exception_what", 3)
    policy = policy_col.selectbox(
        "Policy", deny_policies, format_func=lambda p: p.name, key="exception_policy"
    )
    fields.slot("policyId", where=policy_col)
    agent = agent_col.selectbox(
        "Agent", [ANY, *agent_keys], format_func=lambda k: k or "every agent", key="exception_agent"
    )
    fields.slot("agentStableKey", where=agent_col)
    environment = env_col.selectbox(
        "Environment",
        [ANY, *environment_names],
        format_func=lambda n: n or "every environment",
        key="exception_environment",
    )
    fields.slot("environmentName", where=env_col)
    return policy, agent, environment


def grant_exception(policy: Policy, wanted: dict[str, Any], fields: FormFields) -> None:
    try:
        granted = client().policies.create_exception(**wanted)
    except ApiError as error:
        fields.show(error, "grant the exception")
        return
    notify(f"Granted an exception to **{plain(policy.name)}** until {granted.expires_at:%Y-%m-%d %H:%M} UTC.")


def submit_exception(policy: Policy, wanted: dict[str, Any], fields: FormFields) -> None:
    """Open the exception's change request; the reviewers read its reason."""
    payload = body(PolicyExceptionChange, org_slug=current().org_slug, exception=True, **wanted)
    try:
        opened = client().change_requests.open("policy", payload, wanted["reason"])
    except ApiError as error:
        fields.show(error, "submit the exception for approval")
        return
    notify(
        f"Submitted an exception to **{plain(policy.name)}** for approval ({opened.id}): it is granted "
        "once another member approves it on the Changes page."
    )


def exceptions_section(
    policies: list[Policy], environment_names: list[str], agent_keys: list[str], *, reviewed: bool
) -> None:
    st.header("Exceptions")
    st.caption(
        "A time-boxed exception lets deployments of an agent, or to an environment, through a deny "
        "policy; every use is recorded in the audit trail."
    )
    listed = attempt("list the exceptions", client().policies.exceptions)
    names = {policy.id: policy.name for policy in policies}
    if listed is not None and listed.items:
        chosen = chosen_row(
            exception_rows(listed.items, names), [e.id for e in listed.items], key=TABLE, width="stretch"
        )
        exception = next((e for e in listed.items if e.id == chosen), None)
        if (
            exception is not None
            and exception.live
            and st.button(
                "Revoke exception",
                key=f"revoke_{exception.id}",
                icon=":material/block:",
                **control("revokeException"),
            )
        ):
            try:
                client().policies.revoke_exception(exception.id)
            except ApiError as error:
                show_error(error, "revoke the exception")
            else:
                notify(f"Revoked the exception to **{plain(names.get(exception.policy_id, '?'))}**.")
    elif listed is not None:
        st.caption("No exceptions yet.")
    grant_form(policies, environment_names, agent_keys, reviewed=reviewed)
