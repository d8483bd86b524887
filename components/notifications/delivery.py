"""One delivery, opened above the tabs from a row of the deliveries or the log, or by its message id:
its event, what every attempt sends, and each attempt with the answer to it; and Resend."""

from __future__ import annotations

import json

import streamlit as st

from api import ApiError
from api.errors import NotFound
from api.notifications import DeliveryAttempt, DeliveryDetail
from components.connection import client
from components.feedback import notify, show_error
from components.formatting import ago
from components.permissions import control

# The delivery whose detail is open, whichever table or lookup opened it.
OPEN_DELIVERY = "open_delivery"


def delivery_detail(delivery_id: str) -> None:
    """One delivery: its event, what every attempt sends, and each attempt with the answer to it."""
    try:
        detail = client().notifications.delivery(delivery_id)
    except NotFound:
        st.session_state.pop(OPEN_DELIVERY, None)
        st.warning(
            f"No delivery `{delivery_id}` in this organization (a deleted channel's deliveries go with "
            "it; their attempts stay in the log).",
            icon=":material/search_off:",
        )
        return
    except ApiError as error:
        show_error(error, "load the delivery")
        return
    with st.container(border=True):
        title_col, resend_col, close_col = st.columns([6, 1, 1], vertical_alignment="center")
        title_col.subheader(f"{detail.event_type} → {detail.channel_name}", anchor=False)
        if resend_col.button(
            "Resend", icon=":material/replay:", key="resend_delivery", width="stretch", **control("resend")
        ):
            resend(detail)
        if close_col.button("Close", key="close_delivery", width="stretch"):
            st.session_state.pop(OPEN_DELIVERY, None)
            st.rerun()
        st.markdown(delivery_summary(detail))
        demo = detail.event.payload.get("demo")
        if demo:
            st.caption(f":material/info: {demo}: nothing of it was really sent.")
        event_col, request_col = st.columns(2, gap="large")
        with event_col:
            st.markdown(f"**Event** `{detail.event.id}` at {detail.event.occurred_at:%Y-%m-%d %H:%M:%S} UTC")
            st.json(detail.event.payload, expanded=2)
        with request_col:
            st.markdown(f"**Sent** {detail.request.method} to `{detail.request.destination}`")
            st.code(
                readable(detail.request.body, detail.request.content_type), language=None, wrap_lines=True
            )
        attempts_detail(detail.attempt_log)


def delivery_summary(detail: DeliveryDetail) -> str:
    colour = {"sent": "green", "failed": "orange", "dead": "red", "held": "blue"}.get(detail.status, "gray")
    parts = [
        f":{colour}-badge[{detail.status}]",
        f"message `{detail.id}`",
        f"{detail.attempts} attempt{'s' if detail.attempts != 1 else ''}",
        f"created {ago(detail.created_at)}",
    ]
    if detail.next_attempt_at:
        parts.append(f"next attempt {detail.next_attempt_at:%Y-%m-%d %H:%M:%S} UTC")
    return " · ".join(parts)


def readable(body: str, content_type: str) -> str:
    """A JSON body indented, anything else as it is."""
    if content_type != "application/json":
        return body
    try:
        return json.dumps(json.loads(body), indent=2)
    except ValueError:
        return body


def attempts_detail(attempts: list[DeliveryAttempt]) -> None:
    if not attempts:
        st.info("No attempt yet.", icon=":material/schedule:")
        return
    st.markdown("**Attempts**")
    for attempt in reversed(attempts):  # newest first, the one people look for
        answer = f"HTTP {attempt.response_status}" if attempt.response_status else "no answer"
        latency = f" in {attempt.latency_ms} ms" if attempt.latency_ms is not None else ""
        title = (
            f"#{attempt.attempt} · {attempt.status} · {answer}{latency} · "
            f"{attempt.created_at:%Y-%m-%d %H:%M:%S} UTC"
        )
        with st.expander(title, expanded=attempt is attempts[-1]):
            if attempt.error:
                st.error(attempt.error, icon=":material/error:")
            if attempt.next_attempt_at:
                st.caption(f"Retried at {attempt.next_attempt_at:%Y-%m-%d %H:%M:%S} UTC")
            sent_col, got_col = st.columns(2, gap="large")
            with sent_col:
                st.markdown("Request headers")
                st.json(attempt.request_headers or {}, expanded=True)
            with got_col:
                st.markdown("Response headers")
                st.json(attempt.response_headers or {}, expanded=True)
                st.markdown("Response body (first 4 KiB)")
                st.code(attempt.response_body or "(empty)", language=None, wrap_lines=True)


def resend(delivery: DeliveryDetail) -> None:
    try:
        client().notifications.resend(delivery.id)
    except ApiError as error:
        show_error(error, "resend the delivery")
    else:
        notify(
            f"Queued message `{delivery.id}` to **{delivery.channel_name}** again; its attempt appears "
            "here within seconds, with the same `webhook-id`."
        )
