"""Overview: is the service up, which organization this is, and what it holds."""

from __future__ import annotations

import streamlit as st

from components.connection import client, current
from components.feedback import load

connection = current()
orgdeck = client()

st.title(connection.org_name)
st.caption(f"Organization `{connection.org_slug}` on {connection.url}")

health = load("check the service's health", orgdeck.health)
keys = load("list API keys", orgdeck.api_keys.list)

service_col, database_col, keys_col = st.columns(3)
service_col.metric("Service", health.status.upper(), help=f"Version {health.version}")
database_col.metric("Database", health.database.upper())
keys_col.metric("Active API keys", keys.total or 0)

st.subheader("Use the API")
st.markdown(
    "Every endpoint takes an organization key in `X-API-Key` (or `Authorization: Bearer`). "
    "Create one under **Settings → API keys**, then:"
)
st.code(
    f'curl -H "X-API-Key: $ORGDECK_API_KEY" "{connection.url}/api-keys?orgSlug={connection.org_slug}"',
    language="bash",
)
st.caption(f"Interactive API reference: {connection.url}/docs")
