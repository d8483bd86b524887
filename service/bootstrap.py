"""Creating an organization with its first key: the only way into a fresh install."""

from __future__ import annotations

import re

from api.common import SLUG_PATTERN
from service.api_keys.service import create_key
from service.db import Database
from service.errors import InvalidInput
from service.orgs.service import create_org


def create_org_with_key(db: Database, *, slug: str, name: str | None, key_name: str) -> tuple[str, str]:
    """Create the organization and one key for it; return (slug, key value)."""
    if not re.match(SLUG_PATTERN, slug):
        raise InvalidInput(
            f"'{slug}' is not a valid slug: use lowercase letters, digits and inner hyphens (1-63)",
            field="orgSlug",
        )
    with db.session(write=True) as session:
        org = create_org(session, slug=slug, name=name)
        issued = create_key(session, org_id=org.id, name=key_name)
        return org.slug, issued.value
