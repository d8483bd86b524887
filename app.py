"""Orgdeck console: `streamlit run app.py`.

This is the console's process: Streamlit serving the pages of console.py. With no ORGDECK_API_URL
the console's embedded demo service starts with it, as a process of its own, so that it imports,
migrates and seeds on the other core while Streamlit starts, and is up, or nearly, when the first
page asks for it. It stops with the console.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import streamlit as st

from service.runtime import launcher


def _embedded() -> bool:
    return not os.environ.get("ORGDECK_API_URL", "").strip()


@asynccontextmanager
async def lifespan(_app: st.App) -> AsyncIterator[None]:
    try:
        yield
    finally:
        launcher.stop()


# As the process starts, not in the lifespan: that runs a fifth of a second later, once Streamlit's
# server is set up, and the service's start is what the first page waits for.
if _embedded():
    launcher.launch()
app = st.App("console.py", lifespan=lifespan)
