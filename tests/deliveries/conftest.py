"""The delivery tests' fixtures, defined with their receivers and service in support.py."""

from tests.deliveries.support import hanging, inbox, receiver, service, tenant  # noqa: F401
