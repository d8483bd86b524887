"""Every table of the service, imported in one place so that migrations and tests see them all."""

from service.agents.models import AgentRow, AgentTagRow, AgentVersionRow, FleetEnvironmentRow, FleetRow
from service.api_keys.models import ApiKeyRow
from service.changes.models import ChangeRequestRow, ChangeReviewRow
from service.deployments.models import AgentDeploymentRow, DeploymentJobAgentRow, DeploymentJobRow
from service.environments.models import DeploymentSigningKeyRow, EnvironmentRow, SecretRow
from service.events.models import EventRow
from service.governance.models import PolicyRow, PolicyVersionRow
from service.idempotency.models import IdempotencyKeyRow
from service.members.models import MemberRow
from service.notifications.models import ChannelRow, DeliveryLogRow, DeliveryRow, SubscriptionRow
from service.orgs.models import OrganizationRow
from service.providers.models import ProviderConnectionRow
from service.registries.models import (
    RegistryArtifactLabelRow,
    RegistryArtifactRow,
    RegistryArtifactVersionRow,
    RegistryRow,
)
from service.signin.models import SignInSessionRow, WorkloadIdentityRow
from service.storage.db import Base
from service.tools.models import ToolDeploymentHistoryRow, ToolDeploymentRow, ToolRow
from service.trail.models import AuditEventRow

__all__ = [
    "AgentDeploymentRow",
    "AgentRow",
    "AgentTagRow",
    "AgentVersionRow",
    "ApiKeyRow",
    "AuditEventRow",
    "Base",
    "ChangeRequestRow",
    "ChangeReviewRow",
    "ChannelRow",
    "DeliveryLogRow",
    "DeliveryRow",
    "DeploymentJobAgentRow",
    "DeploymentJobRow",
    "DeploymentSigningKeyRow",
    "EnvironmentRow",
    "EventRow",
    "FleetEnvironmentRow",
    "FleetRow",
    "IdempotencyKeyRow",
    "MemberRow",
    "OrganizationRow",
    "PolicyRow",
    "PolicyVersionRow",
    "ProviderConnectionRow",
    "RegistryArtifactLabelRow",
    "RegistryArtifactRow",
    "RegistryArtifactVersionRow",
    "RegistryRow",
    "SecretRow",
    "SignInSessionRow",
    "SubscriptionRow",
    "ToolDeploymentHistoryRow",
    "ToolDeploymentRow",
    "ToolRow",
    "WorkloadIdentityRow",
]
