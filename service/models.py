"""Every table of the service, imported in one place so that migrations and tests see them all."""

from service.agents.models import Agent, AgentTag, AgentVersion
from service.api_keys.models import ApiKey
from service.audit.models import AuditEventRow
from service.changes.models import ChangeRequest, ChangeReview
from service.db import Base
from service.deployments.models import (
    AgentDeployment,
    DeploymentJob,
    DeploymentJobAgent,
    DeploymentSigningKey,
)
from service.environments.models import Environment, Secret
from service.events.models import Event
from service.fleets.models import Fleet, FleetEnvironment
from service.governance.models import Policy, PolicyVersion
from service.idempotency.models import IdempotencyKey
from service.members.models import MemberRow
from service.notifications.models import Channel, Delivery, DeliveryLog, Subscription
from service.orgs.models import Organization
from service.providers.models import ProviderConnection
from service.registries.models import (
    Registry,
    RegistryArtifact,
    RegistryArtifactLabel,
    RegistryArtifactVersion,
)
from service.tools.models import Tool, ToolDeploymentHistory, ToolDeploymentRecord

__all__ = [
    "Agent",
    "AgentDeployment",
    "AgentTag",
    "AgentVersion",
    "ApiKey",
    "AuditEventRow",
    "Base",
    "ChangeRequest",
    "ChangeReview",
    "Channel",
    "Delivery",
    "DeliveryLog",
    "DeploymentJob",
    "DeploymentJobAgent",
    "DeploymentSigningKey",
    "Environment",
    "Event",
    "Fleet",
    "FleetEnvironment",
    "IdempotencyKey",
    "MemberRow",
    "Organization",
    "Policy",
    "PolicyVersion",
    "ProviderConnection",
    "Registry",
    "RegistryArtifact",
    "RegistryArtifactLabel",
    "RegistryArtifactVersion",
    "Secret",
    "Subscription",
    "Tool",
    "ToolDeploymentHistory",
    "ToolDeploymentRecord",
]
