"""Orgdeck's API as a contract (wire models) and a client. Depends on nothing else of Orgdeck."""

from api.client import OrgdeckClient
from api.errors import ApiError

__all__ = ["ApiError", "OrgdeckClient"]
