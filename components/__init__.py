"""Reusable console pieces. Like pages, they talk to the service only through `api`."""
