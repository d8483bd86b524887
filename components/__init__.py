"""Reusable console pieces. Like pages, they talk to the service only through `api`.

Unlike a page, which Streamlit runs afresh on every run of every session, a module here is imported
once per process and shared by all sessions: it asks for `client()` and `current()` inside its
functions, never at import, so that each run acts with its own session's connection."""
