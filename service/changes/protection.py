"""The rules that send a direct call to review: each area's write checks them before changing
anything, unless it is applying an approved change request (given its `change_request_id`)."""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import select
from sqlalchemy.orm import Session

from service.environments.models import EnvironmentRow
from service.errors import ApprovalRequired
from service.orgs.models import OrganizationRow
from service.registries.models import RegistryRow


def require_review_of_deployment(environment: EnvironmentRow) -> None:
    if environment.protected:
        approvals = (
            "1 approval"
            if environment.required_approvals == 1
            else f"{environment.required_approvals} approvals"
        )
        raise ApprovalRequired(
            rule=f"Environment '{environment.name}' is protected (deployments need {approvals})",
            kind="deployment",
            field="environmentId",
        )


def require_review_of_labels(registry: RegistryRow, labels: Iterable[str]) -> None:
    protected = sorted(set(labels) & set(registry.protected_labels or ()))
    if protected:
        raise ApprovalRequired(
            rule=f"Label '{protected[0]}' of registry '{registry.org.slug}/{registry.name}' is protected",
            kind="label",
            field="label" if len(protected) == 1 else "labels",
        )


def policy_approval_required(session: Session, *, org_id: str) -> bool:
    return bool(
        session.scalar(select(OrganizationRow.policy_approval_required).where(OrganizationRow.id == org_id))
    )


def require_review_of_policies(session: Session, *, org_id: str) -> None:
    if policy_approval_required(session, org_id=org_id):
        raise ApprovalRequired(
            rule="This organization requires approval of new policies and policy changes",
            kind="policy",
            field="orgSlug",
        )
