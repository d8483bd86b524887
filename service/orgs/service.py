"""Organizations: created by the operator (CLI or embedded demo), never through the public API."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from service.errors import AlreadyExists
from service.orgs.models import OrganizationRow


def get_org(session: Session, *, slug: str) -> OrganizationRow | None:
    return session.scalar(select(OrganizationRow).where(OrganizationRow.slug == slug))


def create_org(session: Session, *, slug: str, name: str | None = None) -> OrganizationRow:
    """Create an organization; its slug must be free."""
    if get_org(session, slug=slug) is not None:
        raise AlreadyExists(f"Organization '{slug}' already exists", field="orgSlug")
    org = OrganizationRow(slug=slug, name=name or slug)
    session.add(org)
    session.flush()
    return org
