"""The policy editor's check: the CEL check beside the rule text, its message, scope and examples,
the examples run as the author edits (results inline), what the check flags among what runs now,
and the enforcement, where deny stays out of reach until a check's examples all pass.

Every value lives in session state under one key prefix (a draft's, or a saved policy version's),
so the same editor serves both; `values` reads what the author has typed, in wire form.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
import streamlit as st

from api import ApiError
from api.governance import ENFORCEMENTS, Policy, PolicyDraft, PolicyTestResult
from components.connection import client
from components.feedback import plain
from components.forms import FormFields
from components.governance.violations import ENFORCEMENT_COLUMN, ENFORCEMENT_LABELS, enforcement_table

ENVIRONMENT_MATCHES = {"all": "All environments", "names": "Named ones", "protected": "Protected ones"}
AGENT_MATCHES = {"all": "All agents", "tags": "With a tag", "fleets": "In a fleet"}
EXPECTATIONS = ("pass", "fail")
EXAMPLE_COLUMNS = ("Name", "Input", "Expect")
INPUT_EXAMPLE = '{"agent": {"model": "gpt-4o", "tags": []}, "environment": {"name": "production"}}'
CHECK_PLACEHOLDER = "e.g. agent.model != 'gpt-3.5-turbo' && agent.providerConfig.temperature <= 0.3"
# The check is code: a monospace text area, as wide as the rule text beside it.
_STYLE = "<style>[class*='st-key-'][class*='_check'] textarea {font-family: monospace;}</style>"


@dataclass
class CheckValues:
    """What the author typed, in wire form, and what keeps it from being saved or tested."""

    check: str | None
    message: str | None
    enforcement: str
    scope: dict[str, Any]
    examples: list[dict[str, Any]]
    problems: list[str] = field(default_factory=list)

    def changes(self) -> dict[str, Any]:
        """Check, message, enforcement, scope and examples as the client's create and update take them."""
        return {
            "check": self.check,
            "message": self.message,
            "enforcement": self.enforcement,
            "scope": self.scope,
            "examples": self.examples,
        }


def saved_value(policy: Policy, name: str) -> Any:
    """A saved policy's field as the editor types it (scope and examples in wire form), to compare."""
    value = getattr(policy, name)
    if name == "scope":
        return value.model_dump(mode="json", by_alias=True)
    if name == "examples":
        return [example.model_dump(mode="json", by_alias=True) for example in value]
    return value


def seed(key: str, source: Policy | PolicyDraft, *, overwrite: bool = False) -> None:
    """Fill the editor of `key` from a saved policy or a draft (a draft without a check leaves it
    empty, in audit). `overwrite` replaces what was typed (a new draft); otherwise only what is unset."""
    environments, agents = source.scope.environments, source.scope.agents
    seeded = {
        "check": source.check or "",
        "message": source.message or "",
        "enforcement": source.enforcement or "audit",
        "env_match": environments.match,
        "env_names": list(environments.names),
        "agent_match": agents.match,
        "agent_tags": list(agents.tags),
        "agent_fleets": list(agents.fleet_ids),
        "examples_base": pd.DataFrame(
            [{"Name": e.name, "Input": json.dumps(e.input), "Expect": e.expect} for e in source.examples],
            columns=list(EXAMPLE_COLUMNS),
        ),
    }
    for name, value in seeded.items():
        if overwrite:
            st.session_state[f"{key}_{name}"] = value
        else:
            st.session_state.setdefault(f"{key}_{name}", value)
    if overwrite:
        st.session_state.pop(f"{key}_examples", None)  # the table's edits belong to the rows replaced


def values(key: str) -> CheckValues:
    """The editor's values as typed; `problems` names the examples whose input is not an object."""
    state = st.session_state
    examples, problems = _examples(state.get(f"{key}_examples_edited"))
    env_match, agent_match = state[f"{key}_env_match"], state[f"{key}_agent_match"]
    # Only the names of the chosen kind are sent: a list left from another choice means nothing.
    environments = {"match": env_match, "names": state[f"{key}_env_names"] if env_match == "names" else []}
    agents = {
        "match": agent_match,
        "tags": state[f"{key}_agent_tags"] if agent_match == "tags" else [],
        "fleetIds": state[f"{key}_agent_fleets"] if agent_match == "fleets" else [],
    }
    return CheckValues(
        check=state[f"{key}_check"].strip() or None,
        message=state[f"{key}_message"].strip() or None,
        enforcement=state[f"{key}_enforcement"],
        scope={"environments": environments, "agents": agents},
        examples=examples,
        problems=problems,
    )


def _examples(table: pd.DataFrame | None) -> tuple[list[dict[str, Any]], list[str]]:
    if table is None:
        return [], []
    examples, problems = [], []
    for number, row in enumerate(table.to_dict("records"), start=1):
        name = str(row.get("Name") or "").strip() or f"example {number}"
        try:
            given = json.loads(str(row.get("Input") or "{}"))
        except json.JSONDecodeError as error:
            problems.append(f"{name}: the input is not valid JSON ({error.msg}, column {error.colno})")
            continue
        if not isinstance(given, dict):
            problems.append(f"{name}: the input must be a JSON object like {INPUT_EXAMPLE}")
            continue
        examples.append({"name": name, "input": given, "expect": row.get("Expect") or "pass"})
    return examples, problems


def tested(key: str, typed: CheckValues, fields: FormFields) -> PolicyTestResult | None:
    """The examples and impact of the check as typed, asked of the service once per change."""
    if typed.check is None:
        return None
    asked = json.dumps([typed.check, typed.message, typed.examples, typed.scope], sort_keys=True)
    cache = st.session_state.get(f"{key}_tested")
    if cache and cache[0] == asked:
        if isinstance(cache[1], ApiError):
            fields.show(cache[1], "run the check")
            return None
        return cache[1]
    try:
        result: PolicyTestResult | ApiError = client().policies.test_check(
            typed.check, message=typed.message, examples=typed.examples, scope=typed.scope
        )
    except ApiError as error:
        result = error
    st.session_state[f"{key}_tested"] = (asked, result)
    return tested(key, typed, fields)


def deny_refusal(typed: CheckValues, result: PolicyTestResult | None) -> str | None:
    """Why deny cannot be chosen now, or None when it can."""
    if typed.check is None:
        return "Deny needs a check: without one nothing can be refused."
    if typed.problems:
        return "Deny needs examples that run: fix the examples' input first."
    if result is None:
        return "Deny needs a check that compiles: fix the check first."
    if not result.examples:
        return "Deny needs examples: add at least one that passes and one that fails."
    if not result.passed:
        failing = ", ".join(e.name for e in result.examples if not e.passed)
        return f"Deny needs every example to give its expected outcome; these do not: {failing}."
    return None


def check_pane(key: str, fields: FormFields) -> None:
    """Check and message, beside the rule text."""
    st.html(_STYLE)
    fields.text_area(
        "check", key=f"{key}_check", height=160, placeholder=CHECK_PLACEHOLDER, label="Check (CEL)"
    )
    fields.text_input(
        "message", key=f"{key}_message", placeholder="e.g. Production agents must not use gpt-3.5"
    )


def scope_controls(
    key: str, fields: FormFields, environment_names: list[str], fleets: dict[str, str]
) -> None:
    st.markdown("**Applies to**")
    env_col, agent_col = st.columns(2)
    with env_col:
        match = st.radio(
            "Environments",
            list(ENVIRONMENT_MATCHES),
            format_func=ENVIRONMENT_MATCHES.get,
            key=f"{key}_env_match",
        )
        if match == "names":
            known = sorted(set(environment_names) | set(st.session_state[f"{key}_env_names"]))
            st.multiselect("Environment names", known, key=f"{key}_env_names", accept_new_options=True)
    with agent_col:
        match = st.radio(
            "Agents", list(AGENT_MATCHES), format_func=AGENT_MATCHES.get, key=f"{key}_agent_match"
        )
        if match == "tags":
            known = sorted(set(st.session_state[f"{key}_agent_tags"]))
            st.multiselect(
                "Tags", known, key=f"{key}_agent_tags", accept_new_options=True, placeholder="Type a tag"
            )
        elif match == "fleets":
            known = sorted(set(fleets) | set(st.session_state[f"{key}_agent_fleets"]))
            st.multiselect("Fleets", known, format_func=lambda f: fleets.get(f, f), key=f"{key}_agent_fleets")
    fields.slot("scope")


def examples_table(key: str, fields: FormFields) -> None:
    st.markdown("**Examples** · each row an input and whether the check must pass or fail on it")
    edited = st.data_editor(
        st.session_state[f"{key}_examples_base"],
        key=f"{key}_examples",
        num_rows="dynamic",
        hide_index=True,
        width="stretch",
        column_config={
            "Name": st.column_config.TextColumn("Name", required=True, max_chars=100),
            "Input": st.column_config.TextColumn(
                "Input (JSON)", help=f"An object like {INPUT_EXAMPLE}", width="large"
            ),
            "Expect": st.column_config.SelectboxColumn("Expect", options=EXPECTATIONS, required=True),
        },
    )
    st.session_state[f"{key}_examples_edited"] = edited
    fields.slot("examples")


def example_results(typed: CheckValues, result: PolicyTestResult | None) -> None:
    """Each example's outcome against its expectation, right below the table."""
    for problem in typed.problems:
        st.error(plain(problem), icon=":material/data_object:")
    if result is None:
        return
    for example in result.examples:
        said = f": {plain(example.message)}" if example.message else ""
        line = f"**{plain(example.name)}** expected {example.expect}, got {example.outcome}{said}"
        if example.passed:
            st.markdown(f":green[:material/check_circle:] {line}")
        else:
            st.markdown(f":red[:material/cancel:] {line}")
    if result.examples and result.passed:
        st.caption("Every example gives its expected outcome.")


def impact(result: PolicyTestResult | None, enforcement: str) -> None:
    """What the check flags among what runs now: what deny would block today."""
    if result is None:
        return
    if not result.impact:
        st.caption(":green[:material/check_circle:] Nothing that runs now breaks this check.")
        return
    what = "Deny would refuse new deployments of" if enforcement == "deny" else "Breaking it today:"
    st.markdown(f"**Impact on what runs now** · {what} {len(result.impact)} agent-environment pair(s)")
    rows = [
        {
            "Agent": entry.agent,
            "Environment": entry.environment_name,
            ENFORCEMENT_COLUMN: enforcement,
            "Message": entry.message,
        }
        for entry in result.impact
    ]
    st.dataframe(enforcement_table(rows), hide_index=True, width="stretch")


def enforcement_selector(key: str, fields: FormFields, refusal: str | None) -> None:
    """Audit, warn or deny as three buttons, the chosen one filled; deny disabled while `refusal`."""
    state = st.session_state
    if refusal and state[f"{key}_enforcement"] == "deny":
        st.warning(
            f"Deny is chosen but cannot refuse anything yet. {plain(refusal)}", icon=":material/block:"
        )
    st.markdown("**Enforcement**")
    row = st.container(horizontal=True)
    for enforcement in ENFORCEMENTS:
        chosen = state[f"{key}_enforcement"] == enforcement
        blocked = enforcement == "deny" and refusal is not None and not chosen
        if row.button(
            enforcement,
            key=f"{key}_enforce_{enforcement}",
            type="primary" if chosen else "secondary",
            disabled=blocked,
            help=refusal if blocked else ENFORCEMENT_LABELS[enforcement],
        ):
            state[f"{key}_enforcement"] = enforcement
            st.rerun()
    fields.slot("enforcement")


def check_editor(
    key: str, fields: FormFields, environment_names: list[str], fleets: dict[str, str]
) -> CheckValues:
    """Scope, examples with their results, impact and enforcement (the check pane is drawn by the
    caller beside the rule text); what the author typed."""
    scope_controls(key, fields, environment_names, fleets)
    examples_table(key, fields)
    typed = values(key)
    result = tested(key, typed, fields)
    example_results(typed, result)
    impact(result, typed.enforcement)
    enforcement_selector(key, fields, deny_refusal(typed, result))
    return typed
