"""How the service runs: the `python -m service` commands, the server in a thread (tests, the
console's embedded mode), an organization's first key, and the demo data."""
