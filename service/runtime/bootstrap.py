"""Creating an organization with its first key: the only way into a fresh install."""

from __future__ import annotations

import re

from api.common import SLUG_PATTERN
from api.members import CreateMember
from service.api_keys.service import create_key
from service.errors import InvalidInput
from service.members.service import create_member
from service.orgs.service import create_org
from service.storage.db import Database


def create_org_with_key(
    db: Database, *, slug: str, name: str | None, key_name: str, admin_email: str | None = None
) -> tuple[str, str]:
    """Create the organization and one admin key for it: the key of its first member, an admin, when
    `admin_email` is given, else a service key. Return (slug, key value)."""
    if not re.match(SLUG_PATTERN, slug):
        raise InvalidInput(
            f"'{slug}' is not a valid slug: use lowercase letters, digits and inner hyphens (1-63)",
            field="orgSlug",
        )
    with db.session(write=True) as session:
        org = create_org(session, slug=slug, name=name)
        member = None
        if admin_email:
            first = CreateMember(
                org_slug=slug, email=admin_email, name=admin_email.split("@")[0], role="admin"
            )
            member = create_member(session, org_id=org.id, request=first)
        issued = create_key(session, org_id=org.id, name=key_name, role="admin", member=member)
        return org.slug, issued.value
