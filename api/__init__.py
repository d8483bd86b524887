"""Orgdeck's API as a contract (wire models) and a client. Depends on nothing else of Orgdeck."""

import sys
import types

# httpx's __init__ imports its command line (click, rich, pygments: 40 ms of every start of a
# process) whenever they are installed, as they are here for other packages; a client has no use
# for it. An empty `httpx._main` stands in, and httpx falls back to its placeholder `main`.
sys.modules.setdefault("httpx._main", types.ModuleType("httpx._main"))

from api.client import OrgdeckClient  # noqa: E402
from api.errors import ApiError  # noqa: E402

__all__ = ["ApiError", "OrgdeckClient"]
