"""Every table of the service, imported in one place so that migrations and tests see them all."""

from service.api_keys.models import ApiKey
from service.db import Base
from service.environments.models import Environment
from service.orgs.models import Organization

__all__ = ["ApiKey", "Base", "Environment", "Organization"]
